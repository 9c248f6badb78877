// ONNX nodes of a tsrp_graph → the XNNPACK plug-in's program (xnnpack_program.h).
//
// Contract: one function decides both what support() claims and what
// compile() emits, so a claimed node always lowers. A refusal is a reason
// starting with "xnnpack: " and naming the op and the input, attribute or
// dtype at fault. Lowering follows the layout rule of xnnpack_program.h
// (rank-4 values are NHWC inside), refusing what that layout would change the
// meaning of (a Softmax over W, a Reshape that reorders C past H and W, a
// broadcast operand that cannot be re-laid out). Needs: static shapes and
// float32; the region's composites come from this plug-in's patterns
// (xnnpack_patterns.cc), whose body nodes are lowered one by one and then
// fused (bias into fully connected, clamps into their producer's
// output_min/output_max).
#pragma once
#include <string>

#include "xnnpack_program.h"

namespace tessera_xnnpack {

/// Whether node `node_index` of `graph` lowers on its own; `reason` says why not.
bool check_node(const tsrp_graph* graph, size_t node_index, std::string* reason);

/// The whole region's program (fused), or false with a reason.
bool lower_region(const tsrp_graph* region, Program* out, std::string* reason);

}  // namespace tessera_xnnpack
