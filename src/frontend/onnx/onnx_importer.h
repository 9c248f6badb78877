// The ONNX frontend: reads an ONNX model (protobuf) into Tessera's graph IR.
// No protobuf type appears in this header.
#pragma once
#include <string>

#include "ir/graph.h"

namespace tessera::onnx_frontend {

struct ImportOptions {
  /// Initializers become constants (default). When false, initializers that
  /// are also listed as graph inputs stay graph inputs (like TVM's
  /// freeze_params=False), fed at run time.
  bool freeze_weights = true;
};

/// Reads `path`; external-data files are looked up beside it. Throws a user
/// error naming the node, op and opset on a bad or unsupported model.
Graph import_onnx_file(const std::string& path, const ImportOptions& options = {});
/// Same, from bytes in memory; `base_dir` is where external data lives ("" = none allowed).
Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& options = {});

/// Reads a serialized TensorProto (as in the ONNX test data sets).
Tensor load_tensor_proto_file(const std::string& path);
/// Reads a serialized SequenceProto (kind kSequence) or OptionalProto (the
/// optional kinds) of tensors, as in the ONNX test data sets.
BoxedValue load_boxed_proto_file(const std::string& path, ValueKind kind);

}  // namespace tessera::onnx_frontend
