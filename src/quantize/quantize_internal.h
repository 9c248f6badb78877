// Pieces the two quantize modes share (quantize.cc: static QDQ;
// quantize_weights_only.cc: weight-only int8).
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_qdq_writer.h"
#include "ir/tensor.h"

namespace tessera::quantize {

/// Symmetric int8 weights in [-127, 127]: one scale, or one per slice along
/// `axis` (-1: per tensor). NaN or infinity is a user error naming the weight.
onnx_frontend::QdqConstant quantize_weight(const std::string& name, const Tensor& w, int64_t axis);

/// `model_path` with `plan` applied (onnx_qdq_writer.h), written to
/// `output_path` in one replacement (a user error when that fails).
void write_qdq_model(const std::string& model_path, const std::string& output_path, const onnx_frontend::QdqPlan& plan);

/// The nodes left in float: op type → reason → node names.
using FloatOps = std::map<std::string, std::map<std::string, std::vector<std::string>>>;
/// The summary's "left in float:" lines (nothing when there is none).
void write_left_in_float(std::ostream& out, const FloatOps& float_ops);

}  // namespace tessera::quantize
