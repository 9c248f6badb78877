// Conversion of ONNX TensorProto (raw, typed and external data) into Tensors.
// Internal to the frontend: includes protobuf headers.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>

#include "ir/tensor.h"

namespace tessera::onnx_frontend {

/// Maps an ONNX elem_type; throws a user error naming `what` when unsupported.
DType dtype_from_onnx(int elem_type, const std::string& what);

/// Reads a tensor. External data is looked up under base_dir and must stay
/// inside it; every offset and length is checked against the file.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir);
/// The same, with the tensor's raw_data given from outside the proto (lifted out of the serialized
/// model before parsing: raw_data_spans.h); `raw` null where the proto keeps its own.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string_view* raw);

}  // namespace tessera::onnx_frontend
