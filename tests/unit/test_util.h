// Helpers for unit tests: build one-op graphs and run them through the
// runtime, a plain comparison of tensors, and (expect_error.h) expectations
// on the kind of a tessera error.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace tessera::testing {

/// A graph with one node `op_type` reading graph inputs (or constants, for
/// inputs given in `constants`) and producing `num_outputs` graph outputs.
struct OneOpGraph {
  std::string op_type;
  int opset = 17;
  std::vector<Tensor> inputs;               // fed at run time
  std::vector<std::pair<size_t, Tensor>> constants;  // (input position, value) baked into the graph
  AttributeMap attrs;
  int num_outputs = 1;
};

/// Builds, compiles and runs the graph; returns the outputs.
std::vector<Tensor> run_one_op(const OneOpGraph& spec, int threads = 1);

Tensor make_float(Shape shape, std::vector<float> values);
Tensor make_int64(Shape shape, std::vector<int64_t> values);
Tensor make_int32(Shape shape, std::vector<int32_t> values);
/// v's low 32 bits as int32: the two's complement wrap-around numpy and ONNX Runtime give an int32 result.
int32_t wrap32(int64_t v);
/// Deterministic pseudo-random floats in [-1, 1).
Tensor random_float(Shape shape, uint32_t seed);
/// A 3x3 convolution with padding 1 and stride 1 (output the input's size), in double, straight from the
/// definition: `in` is [cin, h, w], `weights` float32 [cout, cin, 3, 3]; returns [cout, h, w]. The
/// reference the oneDNN region tests compare with.
std::vector<double> reference_conv3x3_same(const std::vector<double>& in, int64_t cin, const Tensor& weights,
                                           int64_t cout, int64_t h, int64_t w);
/// random_float's values mapped onto [low, high).
Tensor random_uniform(Shape shape, uint32_t seed, float low, float high);

/// Asserts same dtype and shape and |a-b| <= atol + rtol*|b| elementwise.
void expect_close(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-5);

}  // namespace tessera::testing
