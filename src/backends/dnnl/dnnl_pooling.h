// The window geometry of an ONNX pooling node as oneDNN's pooling_v2 takes
// it (explicit begin and end paddings, dilations counted from 0), shared by
// the declarations (which refuse what the lowering cannot express) and the
// lowering, so the two can never disagree.
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

}  // namespace tessera::dnnl_backend
