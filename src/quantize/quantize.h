// Static post-training quantization (`tessera quantize`): writes a standard
// QDQ ONNX model that Tessera and ONNX Runtime run alike.
//
// Contract: the plan is made on the graph as imported (one IR node per ONNX
// node, names as in the file), the calibration runs a compiled copy of that
// graph whose outputs include every tensor to be quantized, and the writer
// (frontend/onnx/onnx_qdq_writer.h) edits the original file. What is
// quantized:
//   - Conv, Gemm, MatMul: float activations to uint8 (asymmetric, zero in
//     range), constant weights to int8 (symmetric, [-127, 127]; per output
//     channel with per_channel), constant biases to int32 with scale
//     input_scale * weight_scale; a Relu (or Clip from 0) that alone reads
//     the output is left in place and the range is taken after it, so the
//     activation folds into the requantisation;
//   - Add of two activations, MaxPool, AveragePool, GlobalAveragePool and
//     Concat: inputs and output (MaxPool's output with its input's scale and
//     zero point, so that it runs on the 8-bit values);
//   - every other node stays float, and the summary says why per op type.
// A tensor is quantized once however many nodes read it; the model's outputs
// stay float32.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"

namespace tessera::quantize {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

/// Parses "minmax", "percentile" or "entropy" (a user error otherwise).
CalibrationMethod parse_calibration_method(const std::string& text);
const char* calibration_method_name(CalibrationMethod method);

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::kMinMax;
  /// For kPercentile: the range keeps this percentage of the values, cut
  /// evenly from both tails.
  double percentile = 99.99;
  bool per_channel = false;
  /// Weight-only int8 (write_weights_only): MatMul and Gemm weights only,
  /// per output channel, no calibration; activations stay float.
  bool weights_only = false;
  /// Node names or op types left in float.
  std::vector<std::string> exclude;
  /// When no sample was added: this many random inputs (float: standard
  /// normal; integer indices of a Gather: uniform over the table's rows;
  /// other integers: 1; bool: true). Open dims are taken as 1.
  int random_samples = 16;
  uint64_t seed = 0;
  /// Called as calibration advances: phase ("calibrating", "histograms"), samples done, total.
  std::function<void(const std::string& phase, int64_t done, int64_t total)> progress;
};

class Quantizer {
 public:
  /// `graph` is `model_path` as imported (not compiled); `compile` sets
  /// threads and backends for the calibration runs.
  Quantizer(std::string model_path, Graph graph, CompileOptions compile, QuantizeOptions options);
  ~Quantizer();

  /// One calibration sample, a tensor per model input in input order (copied).
  void add_sample(const std::vector<TensorView>& inputs);
  size_t sample_count() const { return samples_.size(); }

  /// Calibrates, writes the QDQ model to `output_path` and returns the
  /// summary (what was quantized, what stayed float and why).
  std::string write(const std::string& output_path);

 private:
  struct Plan;
  std::vector<std::vector<Tensor>> random_samples() const;
  /// write() for options.weights_only (quantize_weights_only.cc).
  std::string write_weights_only(const std::string& output_path);

  std::string model_path_;
  Graph graph_;
  CompileOptions compile_;
  QuantizeOptions options_;
  std::vector<std::vector<Tensor>> samples_;
};

}  // namespace tessera::quantize
