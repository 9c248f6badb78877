// Lowering a region graph into a oneDNN Program (shared by the op-family
// files dnnl_lower_*.cc). Layouts are chosen by oneDNN: a step asks for
// format_tag::any where it may choose, and the lowering keeps the chosen
// (blocked) layout for the value until a consumer needs another one, when
// it inserts a reorder. Constants take the layout their primitive chose and
// are reordered once, at load time.
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {

/// A node being lowered with the nodes fused after it (a composite's body),
/// its values resolved to the region graph's.
struct FusedNode {
  const Node* node = nullptr;      // the main node (Conv, MatMul, ...), from the body or the region graph
  const Graph* graph = nullptr;    // the graph `node` lives in (a composite's body or the region)
  std::vector<const Node*> tail;   // the nodes after it in the body, in order
  std::string pattern;             // the composite's pattern name, "" for a single node
  int32_t region_node = -1;        // the region graph node it reports time on
  std::vector<ValueId> outputs;    // region values it produces
  /// The region value of a value of `graph`, or kNoValue for one inside the chain.
  ValueId region_value(ValueId id) const;
  std::vector<ValueId> body_to_region;  // per body value (composites)
};

class Lowering {
 public:
  Lowering(const Graph& region, const dnnl::engine& engine, const std::vector<char>& bf16_nodes = {},
           AlgorithmMemo* memo = nullptr);
  Program finish();

  const Graph& graph() const { return graph_; }
  const dnnl::engine& engine() const { return engine_; }
  const memory::desc& desc(int32_t slot) const { return descs_[static_cast<size_t>(slot)]; }
  const std::vector<memory::desc>& slot_descs() const { return descs_; }
  /// The algorithms measured for earlier shapes of the same region (lower_region's memo), or null.
  AlgorithmMemo* algorithm_memo() const { return memo_; }
  std::vector<int64_t> dims(int32_t slot) const { return program_.slots[static_cast<size_t>(slot)].dims; }
  bool is_constant_value(ValueId value) const;
  /// True when the core allows region node `node` to compute in bfloat16.
  bool bf16(int32_t node) const {
    return node >= 0 && static_cast<size_t>(node) < bf16_nodes_.size() && bf16_nodes_[static_cast<size_t>(node)];
  }
  /// The data type a bf16 compute step writes `value` in: bf16 when every
  /// reader of it in the region is a bf16 convolution or matmul reading it as
  /// its source (so no conversion is needed in between) and it is not a region
  /// output; float32 otherwise.
  memory::data_type compute_output_type(ValueId value) const;

  /// The slot holding `value` now, in whatever layout (region inputs become plain input slots).
  int32_t slot_of(ValueId value);
  /// `slot` in layout `desc` (a reorder into a new slot when it differs).
  int32_t in_layout(int32_t slot, const memory::desc& desc);
  int32_t plain(int32_t slot);
  /// A constant slot of `dims` made from region constants with a transform;
  /// its layout is chosen by the first step that reads it with format_tag::any.
  int32_t constant_slot(std::vector<int64_t> dims, ConstantTransform transform, std::vector<int32_t> sources,
                        std::vector<float> floats = {});

  /// Appends a step. `requests` holds one layout per input (an empty desc:
  /// the slot's current layout) and `output_request` the output's (usually
  /// format_tag::any). Where oneDNN cannot run the requested layouts, plain
  /// layouts are tried. Inputs are reordered to the layouts the primitive
  /// chose; the output becomes a new slot holding `value`. Returns the slot.
  int32_t add_step(Step step, const std::vector<memory::desc>& requests, const memory::desc& output_request,
                   ValueId value, const std::vector<int64_t>& output_dims);
  /// A reorder that reads `slot` (plain) reshaped to `value`'s dims, or permuted.
  int32_t add_view(int32_t node, int32_t slot, ValueId value, const std::vector<int64_t>& permutation = {});
  /// A reorder that copies the sub-block of `slot` (plain) at `offsets` with `value`'s dims (Slice).
  int32_t add_subblock(int32_t node, int32_t slot, ValueId value, const std::vector<int64_t>& offsets);
  /// Makes `value` (produced by some step) also available under another value id (Identity-like).
  void alias(ValueId value, int32_t slot) { slot_of_value_[static_cast<size_t>(value)] = slot; }

  [[noreturn]] void unsupported(const Node& node, const std::string& why) const;

 private:
  int32_t add_slot(Slot slot, const memory::desc& desc);
  /// A reorder reading `slot` (plain) through the view `view` (dnnl_region.cc's
  /// input_view: 1 reshape, 2 permute, 3 sub-block) into a new plain slot for `value`.
  int32_t add_view_reorder(int32_t node, int32_t slot, ValueId value, std::vector<int64_t> view);
  std::optional<dnnl::primitive_desc_base> try_desc(const Step& step, const std::vector<memory::desc>& roles) const;

  const Graph& graph_;
  const dnnl::engine& engine_;
  Program program_;
  std::vector<memory::desc> descs_;
  std::vector<char> layout_pending_;     // constant slots whose layout no step has chosen yet
  std::vector<int32_t> slot_of_value_;   // per region value
  std::unordered_map<int32_t, std::vector<std::pair<memory::desc, int32_t>>> reordered_;  // in_layout's copies per slot
  std::vector<char> bf16_nodes_;         // per region node
  AlgorithmMemo* memo_ = nullptr;
};

memory::desc any_desc(const std::vector<int64_t>& dims, memory::data_type type = memory::data_type::f32);
std::vector<int64_t> dims_of(const Graph& graph, ValueId id);

/// The eltwise post-op (or step) an activation node stands for, if oneDNN has it.
std::optional<PostOp> activation_post_op(const Graph& graph, const Node& node);
/// Same for a node of a fused chain (a composite's body): its constant
/// operands (Clip's bounds) are read from the region graph.
std::optional<PostOp> chain_activation(const Lowering& lowering, const FusedNode& fused, const Node& node);

/// The post-op of a self-gated activation when the fused chain's tail nodes t and t + 1 are a gate
/// of chain and Mul of chain and that gate (either order): eltwise_swish for Sigmoid (SiLU as
/// exporters write it), eltwise_hardswish for HardSigmoid with HardSwish's constants (torch's
/// nn.Hardswish below opset 14).
std::optional<PostOp> chain_gated_activation(const FusedNode& fused, size_t t, ValueId chain);

/// HardSigmoid's alpha and beta are HardSwish's (1/6 within float rounding, 1/2): x * HardSigmoid(x)
/// is then x * relu6(x + 3) / 6, oneDNN's eltwise_hardswish.
bool is_hardswish_gate_attributes(const Node& node);

/// Tuning by measurement (dnnl_tuning.cc): times the convolution step with
/// the direct and the Winograd algorithm (where oneDNN has it), each with the
/// reorders its layouts would add around it, and returns the faster one's
/// algorithm for Step::algorithm. `milliseconds` (optional) receives its time,
/// or 0 when nothing was measured (not a Winograd shape, or tuning off).
int32_t choose_convolution_algorithm(const Lowering& lowering, Step step, const std::vector<memory::desc>& requests,
                                     const memory::desc& output_request, double* milliseconds = nullptr);

/// The eltwise step that applies eltwise post-op `p` on its own to `input`,
/// for region node `node` (a post-op split off its product).
Step eltwise_step_of(const PostOp& p, int32_t node, int32_t input);

/// Whether a convolution whose last post-op is swish (SiLU) runs faster
/// without it, followed by Tessera's swish loop over its output (swish_plan),
/// measured on this machine with the layouts it would get; false for small
/// outputs, other post-ops last, or TESSERA_DNNL_TUNE=0 (=swish: always true).
bool swish_pass_faster(const Lowering& lowering, const Step& step, const std::vector<memory::desc>& requests,
                       const memory::desc& output_request);

// Op families: each lowers one node (with its fused tail) into steps.
void lower_convolution(Lowering& lowering, const FusedNode& fused);
void lower_matmul(Lowering& lowering, const FusedNode& fused);
void lower_elementwise(Lowering& lowering, const FusedNode& fused);
void lower_pooling(Lowering& lowering, const FusedNode& fused);
void lower_normalization(Lowering& lowering, const FusedNode& fused);
/// The decomposed LayerNorm pattern (common_patterns.h) as one layer normalisation.
void lower_layer_norm_pattern(Lowering& lowering, const FusedNode& fused);
void lower_layout(Lowering& lowering, const FusedNode& fused);
/// QLinearConv, QLinearMatMul, QuantizeLinear, DequantizeLinear (dnnl_lower_quantized.cc).
void lower_quantized(Lowering& lowering, const FusedNode& fused);
/// The patterns QLinearConvAdd[Activation]: an int8 convolution with the residual as a sum post-op.
void lower_qlinear_conv_add(Lowering& lowering, const FusedNode& fused);
/// The patterns MatMulIntegerScale[Bias]: an int8 matmul writing float32, scaled per column, + bias.
void lower_matmul_integer_scaled(Lowering& lowering, const FusedNode& fused);

}  // namespace tessera::dnnl_backend
