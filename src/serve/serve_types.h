// The plain data `tessera serve` passes between its front ends (HTTP, gRPC), the
// scheduler and the models: tensors in host memory with Open Inference Protocol
// datatypes, requests, responses and errors. Nothing here knows a wire format.
#pragma once

#include <dlpack/dlpack.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::serve {

/// Errors a request or a repository call can end in, with the HTTP and gRPC
/// codes clients expect (Triton's mapping: docs/serving.md).
enum class ErrorKind { kInvalidArgument, kNotFound, kUnavailable, kUnsupported, kInternal, kCancelled, kTimeout };

struct ServeError : std::runtime_error {
  ServeError(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind(kind) {}
  ErrorKind kind;
};

/// Throws ServeError(kInvalidArgument, message): a request, config or flag the caller can fix.
[[noreturn]] void invalid_argument(const std::string& message);

int http_status_of(ErrorKind kind);
/// grpc::StatusCode's value for the kind.
int grpc_code_of(ErrorKind kind);
/// The `reason` label of nv_inference_request_failure: REJECTED, CANCELED, BACKEND or OTHER.
const char* failure_reason_of(ErrorKind kind);

/// An Open Inference Protocol datatype ("FP32", "BYTES", ...) and its DLPack type.
struct DataType {
  const char* name;
  DLDataType dl;
  size_t element_bytes;  // 0 for BYTES (variable)
};
/// Every datatype Tessera serves, and a lookup by name (nullptr when unknown).
const std::vector<DataType>& data_types();
const DataType* data_type_named(const std::string& name);
/// The datatype of a DLPack type Tessera runs (TSR_DL_STRING_CODE is BYTES); nullptr otherwise.
const DataType* data_type_of(DLDataType dl);

int64_t element_count(const std::vector<int64_t>& shape);
std::string shape_text(const std::vector<int64_t>& shape);

/// Host bytes shared by the tensors that view them (a request body, a run's output).
using Storage = std::shared_ptr<const void>;

/// A tensor of a request or a response. Numeric and BOOL data are `bytes` bytes at
/// `data` (row-major, little-endian, BOOL one byte a value), kept alive by
/// `storage`; BYTES tensors hold `strings` instead.
struct Tensor {
  std::string name;
  const DataType* type = nullptr;
  std::vector<int64_t> shape;
  Storage storage;
  const char* data = nullptr;
  size_t bytes = 0;
  std::vector<std::string> strings;
};

/// Owns `bytes` in a new storage and points the tensor at them.
void own_bytes(Tensor& tensor, std::string bytes);

/// A tensor of `shape` for a warm-up run: zeros, or random values (floats in
/// [0, 1), integers 0 or 1, so that an index input stays in range; BYTES "" or "warm-up").
Tensor filled_tensor(const std::string& name, const DataType* type, const std::vector<int64_t>& shape, bool random,
                     std::mt19937& rng);

/// BYTES elements in the binary form both protocols use (each a 4-byte little-endian
/// length, then its bytes): split (a ServeError names `input` when the data is cut
/// off), and joined.
std::vector<std::string> split_bytes_elements(const char* data, size_t size, const std::string& input);
std::string join_bytes_elements(const std::vector<std::string>& elements);

/// What the client asked for one output.
struct RequestedOutput {
  std::string name;
  bool binary = false;  // HTTP: return as binary data (the binary tensor extension)
};

using Clock = std::chrono::steady_clock;

struct InferRequest {
  std::string model_name;
  std::string model_version;  // "" = the model's default version
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_outputs = false;           // request-level binary_data_output
  std::optional<uint64_t> timeout_us;    // the request's `timeout` parameter
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;
  std::vector<bool> binary;  // per output: send as binary (HTTP)
};

}  // namespace tessera::serve
