// The window geometry of ONNX pooling and ConvTranspose nodes as oneDNN's
// pooling_v2 and deconvolution take it (explicit begin and end paddings,
// dilations as ONNX counts them), shared by the declarations (which refuse
// what the lowering cannot express) and the lowering, so the two can never
// disagree. The arithmetic itself (auto_pad, SAME padding, window extents)
// is the ir's (ir/window_geometry.h); what is added here is oneDNN's floor
// rule: the end padding that gives the output size the graph holds.
//
// Contract: pure functions of a node with static input and output shapes;
// they never throw, a `refusal` says why oneDNN cannot run the node.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera::dnnl_backend {

struct PoolingGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;  // ONNX's (1 = dense)
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;    // what gives the output size with oneDNN's floor rule (ceil_mode included)
  bool include_padding = false;    // AveragePool's count_include_pad
  std::string refusal;             // why oneDNN cannot run it, empty when it can
};

/// The geometry of a MaxPool, AveragePool, GlobalAveragePool or GlobalMaxPool
/// node whose input and output have static shapes of rank 3..5.
PoolingGeometry pooling_geometry(const Graph& graph, const Node& node);

struct DeconvolutionGeometry {
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;  // ONNX's (1 = dense)
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;    // what gives the output size (output_padding absorbed into it)
  std::string refusal;             // why oneDNN cannot run it, empty when it can
};

/// The geometry of a ConvTranspose node whose input, weights and output have
/// static shapes of one rank (3..5): explicit pads only (no auto_pad, no output_shape).
DeconvolutionGeometry deconvolution_geometry(const Graph& graph, const Node& node);

/// A (de)convolution step's ints: strides, dilations counted from 0 (oneDNN's), begin and end paddings.
std::vector<int64_t> convolution_step_ints(const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                                           const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end);
/// Conv weights [O, I/g, k...] as oneDNN takes them: the same dims for g = 1, [g, O/g, I/g, k...] otherwise
/// (the same bytes: ConstantTransform::kGroupedWeights).
std::vector<int64_t> grouped_weight_dims(const std::vector<int64_t>& w_dims, int64_t group);

}  // namespace tessera::dnnl_backend
