// Reduced precision (--precision): which nodes may compute in bfloat16.
//
// Contract: the core decides, backends follow. Under bf16 the nodes that do
// the arithmetic of a network (Conv, MatMul, Gemm) may read bf16 operands and
// accumulate in float32; numerically sensitive ops (softmax, normalisation,
// reductions, exp/log, ...) are never marked and keep float32; the final
// layer (the compute nodes no other compute node follows: a classifier or
// projection head) keeps float32 unless the policy includes it. A backend that
// declares bf16 support (Backend::bf16_refusal) lowers the marked nodes of its
// regions in bf16; other backends run them in float32, and the report says why.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

struct PrecisionPolicy {
  bool bf16 = false;         // --precision bf16
  bool final_layer = false;  // --precision bf16-all: the final layer too
};

/// Parses "fp32", "bf16" or "bf16-all"; anything else is a user error naming the accepted values.
PrecisionPolicy parse_precision(const std::string& text);
/// The text parse_precision reads back.
std::string precision_text(const PrecisionPolicy& policy);

/// True for the ops bf16 applies to (Conv, MatMul, Gemm).
bool is_bf16_compute_op(const Node& node);

/// Per node of `graph` (topologically ordered): 1 where the node may compute
/// in bf16 under `policy`. `final_layer` (optional) receives, per node, 1 for
/// the compute nodes the final-layer rule keeps in float32.
std::vector<char> bf16_nodes(const Graph& graph, const PrecisionPolicy& policy, std::vector<char>* final_layer = nullptr);

}  // namespace tessera
