// Patterns several backends declare, written once: the forms exporters give
// ops that ONNX (before opset 17/20) has no single node for. A backend passes
// `check` to add its own conditions (dtypes, shapes) to every matched node.
#pragma once
#include <functional>
#include <optional>

#include "partition/pattern.h"

namespace tessera {

using NodeCheck = std::function<bool(const Graph&, const Node&)>;

/// GELU's erf form as PyTorch exports it: x is read twice,
///   Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5).
Pattern gelu_erf_pattern(Pattern x, const NodeCheck& check = {});

/// Layer normalisation over the last axis as exported before opset 17:
///   d = Sub(x, ReduceMean(x, [-1]));  v = ReduceMean(Pow(d, 2), [-1]);
///   y = Add(Mul(Div(d, Sqrt(Add(v, epsilon))), scale), bias)
/// with epsilon a constant scalar and scale and bias 1-D constants of the last
/// axis's size (x and d each read twice).
Pattern layer_norm_pattern(Pattern x, const NodeCheck& check = {});

/// Where the pieces of a matched layer_norm_pattern are in its composite's
/// body: indices into body.inputs (the composite node's inputs, same order).
struct LayerNormParts {
  size_t input = 0;
  size_t scale = 0;
  size_t bias = 0;
  size_t epsilon = 0;
};
std::optional<LayerNormParts> parse_layer_norm_body(const Graph& body);

}  // namespace tessera
