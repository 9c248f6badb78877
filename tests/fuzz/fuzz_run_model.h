// Shared by the fuzz targets that get a model (fuzz_onnx_import, fuzz_model_load):
// runs a model that compiled or loaded, when its sizes are bounded, so that
// kernels see fuzzed shapes, attributes and constants under the sanitizers.
//
// Bounds, so that every run is short and small whatever the mutation:
// - every value of the graph (and of its subgraphs) has a static type of at most
//   kMaxValueElements elements: no allocation size can depend on input data
//   (a Reshape, Expand or ConstantOfShape of a runtime shape has a dynamic type);
// - at most kMaxNodes nodes, and no Loop (its trip count and condition are data:
//   a mutated one can loop for ever).
// Inputs are filled with small values taken from the fuzzer's bytes: floats in
// [-4, 4], integers in [-4, 4] (valid and invalid indices both), booleans.
//
// A run must succeed or fail with a tessera user or unsupported error; an
// internal error is a bug, reported as a crash so the fuzzer keeps the input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace tessera::fuzz {

constexpr int64_t kMaxValueElements = int64_t{1} << 16;
constexpr size_t kMaxNodes = 128;

/// True when every value of `graph` and of its subgraphs has a static type of
/// at most kMaxValueElements elements, and no node is a Loop.
inline bool sizes_are_bounded(const Graph& graph, size_t& node_budget) {
  if (graph.nodes.size() > node_budget) return false;
  node_budget -= graph.nodes.size();
  for (const Value& value : graph.values) {
    if (!value.type.rank_known || !value.type.is_static()) return false;
    int64_t elements = 1;
    for (int64_t dim : value.type.dims) {
      if (dim < 0 || dim > kMaxValueElements) return false;
      elements *= dim;
      if (elements > kMaxValueElements) return false;
    }
  }
  for (const Node& node : graph.nodes) {
    if (node.op_type == "Loop") return false;
    for (const auto& [name, attribute] : node.attrs.all()) {
      if (attribute.kind == Attribute::Kind::kGraph && attribute.graph &&
          !sizes_are_bounded(*attribute.graph, node_budget)) {
        return false;
      }
    }
  }
  return true;
}

/// Aborts (a finding) on an internal error; user and unsupported errors are
/// the expected answer to a bad model or input.
inline void fail_on_internal_error(const Error& error) {
  if (error.kind() != ErrorKind::kInternal) return;
  std::fprintf(stderr, "internal error (a bug, not a user error): %s\n", error.what());
  std::abort();
}

/// Fills `tensor` with small values derived from the fuzzer's bytes.
inline void fill_small_values(Tensor& tensor, const uint8_t* data, size_t size, size_t& cursor) {
  auto next = [&]() -> int {
    if (size == 0) return 0;
    const uint8_t byte = data[cursor % size];
    cursor += 7;
    return byte;
  };
  const int64_t count = tensor.numel();
  for (int64_t i = 0; i < count; ++i) {
    const int byte = next();
    const int small = byte % 9 - 4;  // [-4, 4]
    switch (tensor.dtype()) {
      case DType::kFloat32: tensor.as<float>()[i] = static_cast<float>(byte - 128) / 32.0f; break;
      case DType::kFloat64: tensor.as<double>()[i] = static_cast<double>(byte - 128) / 32.0; break;
      case DType::kFloat16: {
        static const uint16_t halves[] = {0x0000, 0x3C00, 0xBC00, 0x3800, 0x4000, 0xC200};  // 0, 1, -1, .5, 2, -3
        tensor.as<uint16_t>()[i] = halves[byte % 6];
        break;
      }
      case DType::kBFloat16: {
        static const uint16_t halves[] = {0x0000, 0x3F80, 0xBF80, 0x3F00, 0x4000, 0xC040};  // 0, 1, -1, .5, 2, -3
        tensor.as<uint16_t>()[i] = halves[byte % 6];
        break;
      }
      case DType::kInt8: tensor.as<int8_t>()[i] = static_cast<int8_t>(small); break;
      case DType::kInt16: tensor.as<int16_t>()[i] = static_cast<int16_t>(small); break;
      case DType::kInt32: tensor.as<int32_t>()[i] = small; break;
      case DType::kInt64: tensor.as<int64_t>()[i] = small; break;
      case DType::kUInt8: tensor.as<uint8_t>()[i] = static_cast<uint8_t>(byte % 5); break;
      case DType::kUInt16: tensor.as<uint16_t>()[i] = static_cast<uint16_t>(byte % 5); break;
      case DType::kUInt32: tensor.as<uint32_t>()[i] = static_cast<uint32_t>(byte % 5); break;
      case DType::kUInt64: tensor.as<uint64_t>()[i] = static_cast<uint64_t>(byte % 5); break;
      case DType::kBool: tensor.as<uint8_t>()[i] = static_cast<uint8_t>(byte & 1); break;
      case DType::kUndefined: break;
    }
  }
}

/// How many models were run, and how many of those ran to the end; printed
/// when the fuzzer exits, so a log shows that kernels were reached at all.
struct RunCounts {
  int64_t runs = 0;
  int64_t completed = 0;
  ~RunCounts() {
    std::fprintf(stderr, "fuzz: ran %lld bounded models, %lld of them without a user error\n",
                 static_cast<long long>(runs), static_cast<long long>(completed));
  }
};
inline RunCounts run_counts;

/// Runs `model` once on small inputs when its sizes are bounded (see above).
inline void run_if_bounded(const CompiledModel& model, const uint8_t* data, size_t size) {
  size_t node_budget = kMaxNodes;
  if (!sizes_are_bounded(model.graph(), node_budget)) return;
  std::vector<Tensor> inputs;
  std::vector<TensorView> views;
  size_t cursor = 0;
  for (const ValueDesc& desc : model.inputs()) {
    if (desc.dtype == DType::kUndefined) return;
    for (int64_t dim : desc.shape) {
      if (dim < 0) return;
    }
    inputs.emplace_back(desc.dtype, desc.shape);
    fill_small_values(inputs.back(), data, size, cursor);
    views.push_back(inputs.back().view());
  }
  ++run_counts.runs;
  try {
    model.run(views);
    ++run_counts.completed;
  } catch (const Error& error) {
    fail_on_internal_error(error);
  }
}

}  // namespace tessera::fuzz
