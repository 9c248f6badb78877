// The HTTP/REST body of an inference request and response in the Open Inference
// Protocol: JSON tensors (nested or flat data, coerced to the datatype), and the
// binary tensor data extension (the JSON header's length in
// Inference-Header-Content-Length, then the raw tensors in the order of those
// with a binary_data_size parameter; BYTES elements as a 4-byte little-endian
// length and the bytes). Request bodies are hostile: every size, shape, type and
// offset is checked, and every problem is a ServeError (INVALID_ARGUMENT) naming
// the input.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "serve_types.h"

namespace tessera::serve {

/// Parses the body held in `storage` from byte `start` on (kept alive by the request's tensors, which
/// view its binary part in place). header_length: Inference-Header-Content-Length, when the header was sent.
InferRequest parse_infer_request(std::shared_ptr<const std::string> storage, size_t start,
                                 std::optional<size_t> header_length);

struct HttpBody {
  std::string body;
  std::string content_type;
  std::optional<size_t> header_length;  // set when binary data follows the JSON
};
HttpBody write_infer_response(const InferResponse& response);

/// {"error": message} as JSON text.
std::string error_json(const std::string& message);

}  // namespace tessera::serve
