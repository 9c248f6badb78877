// The lowering driver: slots, layouts, reorders, and the dispatch of each
// region node (or composite) to its op family (see dnnl_lowering.h).
#include "backends/dnnl/dnnl_lowering.h"

#include <cfloat>
#include <cmath>

#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera::dnnl_backend {

ValueId FusedNode::region_value(ValueId id) const {
  if (id == kNoValue) return kNoValue;
  if (body_to_region.empty()) return id;
  return body_to_region[static_cast<size_t>(id)];
}

memory::desc any_desc(const std::vector<int64_t>& dims, memory::data_type type) {
  memory::dims d(dims.begin(), dims.end());
  if (d.empty()) d = {1};
  return memory::desc(d, type, memory::format_tag::any);
}

std::vector<int64_t> dims_of(const Graph& graph, ValueId id) { return graph.value(id).type.dims; }

Lowering::Lowering(const Graph& region, const dnnl::engine& engine, const std::vector<char>& bf16_nodes,
                   AlgorithmMemo* memo)
    : graph_(region), engine_(engine), slot_of_value_(region.values.size(), -1), bf16_nodes_(bf16_nodes), memo_(memo) {}

namespace {

/// An op whose products may read bf16 operands (the op schema's one list: Conv, MatMul, Gemm).
bool is_compute_op(const std::string& op_type) {
  return is_bf16_compute_op_type(op_type);
}

}  // namespace

memory::data_type Lowering::compute_output_type(ValueId value) const {
  for (ValueId id : graph_.outputs) {
    if (id == value) return memory::data_type::f32;
  }
  bool read = false;
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const Node& node = graph_.nodes[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] != value) continue;
      read = true;
      if (!bf16(static_cast<int32_t>(i))) return memory::data_type::f32;
      if (node.domain.empty()) {
        if (k != 0 || !is_compute_op(node.op_type)) return memory::data_type::f32;
        continue;
      }
      // A composite: its input k must reach only the source of the body's first (main) node.
      const Attribute* body = node.attrs.find("body");
      if (node.domain != "tessera" || !body || !body->graph || body->graph->nodes.empty() ||
          k >= body->graph->inputs.size()) {
        return memory::data_type::f32;
      }
      const Graph& g = *body->graph;
      const ValueId inner = g.inputs[k];
      if (!is_compute_op(g.nodes[0].op_type)) return memory::data_type::f32;
      for (size_t n = 0; n < g.nodes.size(); ++n) {
        for (size_t j = 0; j < g.nodes[n].inputs.size(); ++j) {
          if (g.nodes[n].inputs[j] == inner && (n != 0 || j != 0)) return memory::data_type::f32;
        }
      }
    }
  }
  return read ? memory::data_type::bf16 : memory::data_type::f32;
}

void Lowering::unsupported(const Node& node, const std::string& why) const {
  throw_unsupported(node.describe(), ": oneDNN backend: ", why);
}

bool Lowering::is_constant_value(ValueId value) const { return value != kNoValue && graph_.is_constant(value); }

int32_t Lowering::add_slot(Slot slot, const memory::desc& desc) {
  program_.slots.push_back(std::move(slot));
  descs_.push_back(desc);
  layout_pending_.push_back(0);
  return static_cast<int32_t>(program_.slots.size() - 1);
}

int32_t Lowering::slot_of(ValueId value) {
  int32_t& slot = slot_of_value_[static_cast<size_t>(value)];
  if (slot >= 0) return slot;
  const Value& v = graph_.value(value);
  if (v.constant) {
    slot = constant_slot(v.type.dims, ConstantTransform::kNone, {value});
    layout_pending_[static_cast<size_t>(slot)] = 0;  // used as it is: plain
    return slot;
  }
  bool is_input = false;
  for (ValueId id : graph_.inputs) is_input |= id == value;
  if (!is_input) throw_internal_error("oneDNN lowering: value '", v.name, "' is read before it is computed");
  Slot s;
  s.kind = Slot::Kind::kInput;
  s.value = value;
  s.dims = v.type.dims;
  s.type = slot_type_for(v.type.dtype);
  const memory::data_type type = data_type_of(s.type);
  slot = add_slot(std::move(s), plain_desc(v.type.dims, type));
  return slot;
}

int32_t Lowering::constant_slot(std::vector<int64_t> dims, ConstantTransform transform, std::vector<int32_t> sources,
                                std::vector<float> floats) {
  Slot s;
  s.kind = Slot::Kind::kConstant;
  s.value = sources.empty() ? -1 : sources[0];
  s.dims = dims;
  s.transform = transform;
  s.sources = std::move(sources);
  s.floats = std::move(floats);
  const int32_t slot = add_slot(std::move(s), plain_desc(dims));
  layout_pending_[static_cast<size_t>(slot)] = 1;
  return slot;
}

int32_t Lowering::in_layout(int32_t slot, const memory::desc& desc) {
  if (descs_[static_cast<size_t>(slot)] == desc) return slot;
  // A slot is written once: a value read in one layout by several steps is reordered once (DenseNet's
  // block features, each read by every later layer's concat, were reordered per concat: 399 a run).
  std::vector<std::pair<memory::desc, int32_t>>& copies = reordered_[slot];
  for (const auto& [layout, copy] : copies) {
    if (layout == desc) return copy;
  }
  const int32_t tag = format_tag_of(desc);
  if (tag < 0) throw_unsupported("oneDNN backend: a layout oneDNN chose has no format tag");
  Slot s;
  s.kind = Slot::Kind::kIntermediate;
  s.dims = program_.slots[static_cast<size_t>(slot)].dims;
  s.format_tag = tag;
  s.type = slot_type_of(desc);
  const int32_t out = add_slot(std::move(s), desc);
  Step step;
  step.kind = StepKind::kReorder;
  step.inputs = {slot};
  step.output = out;
  program_.steps.push_back(std::move(step));
  copies.emplace_back(desc, out);
  return out;
}

int32_t Lowering::plain(int32_t slot) { return in_layout(slot, plain_desc(program_.slots[static_cast<size_t>(slot)].dims)); }

std::optional<dnnl::primitive_desc_base> Lowering::try_desc(const Step& step, const std::vector<memory::desc>& roles) const {
  try {
    return make_primitive_desc(step, roles, descs_, engine_);
  } catch (const dnnl::error&) {
    return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
}

Step eltwise_step_of(const PostOp& p, int32_t node, int32_t input) {
  Step e;
  e.kind = StepKind::kEltwise;
  e.node = node;
  e.algorithm = p.algorithm;
  e.floats = {p.alpha, p.beta};
  e.inputs = {input};
  return e;
}

int32_t Lowering::add_step(Step step, const std::vector<memory::desc>& requests, const memory::desc& output_request,
                           ValueId value, const std::vector<int64_t>& output_dims) {
  const Step original = step;  // for the float32 retry below
  const size_t n = step.inputs.size();
  // A collapsed matmul reads its (plain) source and writes its output as 2-D views.
  const bool collapse = step.kind == StepKind::kMatMul && !step.ints.empty() && step.ints[0] == 1;
  // Data types: a request's where it makes one, else the slot's (float32 unless a bf16 step wrote it).
  auto request_type = [&](size_t i) {
    if (requests[i] != memory::desc()) return requests[i].data_type();
    return descs_[static_cast<size_t>(step.inputs[i])].data_type();
  };
  const memory::data_type output_type =
      output_request == memory::desc() ? memory::data_type::f32 : output_request.data_type();
  auto as_2d = [](const std::vector<int64_t>& dims, memory::data_type type) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    return plain_desc({rows, dims.back()}, type);
  };
  const memory::data_type source_type = n > 0 ? request_type(0) : memory::data_type::f32;
  if (collapse) step.inputs[0] = in_layout(step.inputs[0], plain_desc(dims(step.inputs[0]), source_type));
  auto roles_for = [&](bool plain_everywhere) {
    std::vector<memory::desc> roles;
    for (size_t i = 0; i < n; ++i) {
      const int32_t slot = step.inputs[i];
      if (plain_everywhere && !layout_pending_[static_cast<size_t>(slot)]) {
        roles.push_back(plain_desc(program_.slots[static_cast<size_t>(slot)].dims, request_type(i)));
      } else if (requests[i] == memory::desc()) {
        roles.push_back(descs_[static_cast<size_t>(slot)]);
      } else {
        roles.push_back(requests[i]);
      }
    }
    roles.push_back(plain_everywhere ? plain_desc(output_dims, output_type) : output_request);
    if (collapse) {
      roles[0] = as_2d(program_.slots[static_cast<size_t>(step.inputs[0])].dims, source_type);
      roles.back() = as_2d(output_dims, output_type);
    }
    return roles;
  };
  // Every layout the primitive chose must have a format tag, for the payload.
  // (Constants whose layout this step chooses need none: loading asks the primitive again.)
  auto representable = [&](const dnnl::primitive_desc_base& pd) {
    for (size_t i = 0; i <= n; ++i) {
      if (i < n && layout_pending_[static_cast<size_t>(step.inputs[i])]) continue;
      if (format_tag_of(role_desc(step, pd, i)) < 0) return false;
    }
    return true;
  };
  auto any_roles_of = [](const std::vector<memory::desc>& roles) {
    uint32_t mask = 0;
    for (size_t i = 0; i < roles.size(); ++i) {
      if (roles[i].data.format_kind == dnnl_format_kind_any) mask |= 1u << i;
    }
    return mask;
  };
  std::vector<memory::desc> roles = roles_for(false);
  std::optional<dnnl::primitive_desc_base> pd = try_desc(step, roles);
  if (!pd || !representable(*pd)) {
    roles = roles_for(true);
    pd = try_desc(step, roles);
  }
  if (!pd || !representable(*pd)) {
    // A bf16 request oneDNN has no implementation for: the same step in float32.
    auto as_f32 = [](const memory::desc& desc) {
      if (desc == memory::desc() || desc.data_type() != memory::data_type::bf16) return desc;
      const memory::dims d = desc.dims();
      const std::vector<int64_t> dims(d.begin(), d.end());
      return desc.data.format_kind == dnnl_format_kind_any ? any_desc(dims) : plain_desc(dims);
    };
    bool reduced = as_f32(output_request) != output_request;
    std::vector<memory::desc> f32_requests;
    for (const memory::desc& r : requests) {
      f32_requests.push_back(as_f32(r));
      reduced |= f32_requests.back() != r;
    }
    if (reduced) return add_step(original, f32_requests, as_f32(output_request), value, output_dims);
    throw_unsupported("oneDNN backend: no primitive for step kind ", static_cast<int>(step.kind), " with these layouts");
  }
  // The slow-kernel guard: oneDNN answers some requests with its reference
  // implementation (impl "ref:any"), 100-400x slower than its JIT kernels (a
  // blocked eltwise with a fused clip: 2.6 ms for 32x56x56, 0.03 ms without
  // the post-op). Fused eltwise post-ops that cost the step its JIT kernel run
  // as steps of their own; otherwise plain layouts, where the JIT kernels
  // cover more broadcasts, are tried. What still has only the reference
  // kernel is kept (nothing faster was found here) and named in the placement
  // report and the model's warnings (DnnlRegion::node_warning).
  // An eltwise step never keeps post-ops: oneDNN 2.6 runs eltwise with post-ops on its reference
  // kernel only, and that kernel wrote zeros for HardSigmoid's linear + clip on a 3-element tensor.
  const bool eltwise_with_post_ops = original.kind == StepKind::kEltwise && !original.post_ops.empty();
  if (eltwise_with_post_ops || (is_reference(*pd) && shape_numel(output_dims) >= kReferenceGuardElements)) {
    bool eltwise_post_ops = !original.post_ops.empty();
    for (const PostOp& p : original.post_ops) eltwise_post_ops &= p.kind == PostOpKind::kEltwise;
    if (eltwise_post_ops) {
      Step bare = original;
      bare.post_ops.clear();
      int32_t slot = add_step(std::move(bare), requests, output_request, kNoValue, output_dims);
      for (const PostOp& p : original.post_ops) {
        slot = add_step(eltwise_step_of(p, original.node, slot), {memory::desc()}, descs_[static_cast<size_t>(slot)],
                        kNoValue, output_dims);
      }
      if (value != kNoValue) slot_of_value_[static_cast<size_t>(value)] = slot;
      return slot;
    }
    std::vector<memory::desc> plain_roles = roles_for(true);
    std::optional<dnnl::primitive_desc_base> plain_pd = try_desc(step, plain_roles);
    if (plain_pd && representable(*plain_pd) && !is_reference(*plain_pd)) {
      roles = std::move(plain_roles);
      pd = std::move(plain_pd);
    }
  }
  step.any_roles = any_roles_of(roles);
  for (size_t i = 0; i < n; ++i) {
    if (collapse && i == 0) continue;  // the plain source, viewed as 2-D
    const size_t slot = static_cast<size_t>(step.inputs[i]);
    const memory::desc chosen = role_desc(step, *pd, i);
    if (layout_pending_[slot]) {
      // Chosen through `any`: loading asks again; otherwise the layout is the one it was read with.
      const int32_t tag = (step.any_roles & (1u << i)) ? kLayoutOfReader : format_tag_of(chosen);
      if (tag == -1) throw_unsupported("oneDNN backend: a constant's layout has no format tag");
      program_.slots[slot].format_tag = tag;
      program_.slots[slot].type = slot_type_of(chosen);
      descs_[slot] = chosen;
      layout_pending_[slot] = 0;
    } else {
      step.inputs[i] = in_layout(step.inputs[i], chosen);
    }
  }
  const memory::desc out_desc = collapse ? plain_desc(output_dims, output_type) : role_desc(step, *pd, n);
  Slot s;
  s.kind = Slot::Kind::kIntermediate;
  s.dims = output_dims;
  s.format_tag = format_tag_of(out_desc);
  s.type = slot_type_of(out_desc);
  step.output = add_slot(std::move(s), out_desc);
  // A sum post-op's operand must have the output's layout.
  for (PostOp& p : step.post_ops) {
    if (p.kind == PostOpKind::kSum) p.slot = in_layout(p.slot, out_desc);
  }
  if (value != kNoValue) slot_of_value_[static_cast<size_t>(value)] = step.output;
  const int32_t out = step.output;
  program_.steps.push_back(std::move(step));
  return out;
}

int32_t Lowering::add_view_reorder(int32_t node, int32_t slot, ValueId value, std::vector<int64_t> view) {
  const std::vector<int64_t> out_dims = dims_of(graph_, value);
  Step step;
  step.kind = StepKind::kReorder;
  step.node = node;
  step.inputs = {plain(slot)};
  step.ints = std::move(view);
  Slot s;
  s.kind = Slot::Kind::kIntermediate;
  s.dims = out_dims;
  step.output = add_slot(std::move(s), plain_desc(out_dims));
  slot_of_value_[static_cast<size_t>(value)] = step.output;
  const int32_t out = step.output;
  program_.steps.push_back(std::move(step));
  return out;
}

int32_t Lowering::add_view(int32_t node, int32_t slot, ValueId value, const std::vector<int64_t>& permutation) {
  std::vector<int64_t> view = {permutation.empty() ? 1 : 2};
  view.insert(view.end(), permutation.begin(), permutation.end());
  return add_view_reorder(node, slot, value, std::move(view));
}

int32_t Lowering::add_subblock(int32_t node, int32_t slot, ValueId value, const std::vector<int64_t>& offsets) {
  std::vector<int64_t> view = {3};
  view.insert(view.end(), offsets.begin(), offsets.end());
  return add_view_reorder(node, slot, value, std::move(view));
}

Program Lowering::finish() {
  // Region outputs leave in plain layout, written straight into the
  // runtime's buffer when the producing step already writes plain.
  std::vector<char> claimed(program_.slots.size(), 0);
  for (ValueId value : graph_.outputs) {
    const int32_t slot = slot_of_value_[static_cast<size_t>(value)];
    if (slot < 0) throw_internal_error("oneDNN lowering: region output '", graph_.value(value).name, "' was never computed");
    Slot& s = program_.slots[static_cast<size_t>(slot)];
    const SlotType boundary_type = slot_type_for(graph_.value(value).type.dtype);
    if (s.kind == Slot::Kind::kIntermediate && s.format_tag == 0 && s.type == boundary_type &&
        !claimed[static_cast<size_t>(slot)] &&
        s.dims == graph_.value(value).type.dims) {
      s.kind = Slot::Kind::kOutput;
      s.value = value;
      claimed[static_cast<size_t>(slot)] = 1;
      continue;
    }
    Slot out;
    out.kind = Slot::Kind::kOutput;
    out.value = value;
    out.dims = graph_.value(value).type.dims;
    out.type = boundary_type;
    const int32_t out_slot = add_slot(std::move(out), plain_desc(graph_.value(value).type.dims, data_type_of(boundary_type)));
    claimed.push_back(1);
    Step step;
    step.kind = StepKind::kReorder;
    step.inputs = {slot};
    step.output = out_slot;
    if (program_.slots[static_cast<size_t>(slot)].dims != program_.slots[static_cast<size_t>(out_slot)].dims) step.ints = {1};
    program_.steps.push_back(std::move(step));
  }
  return std::move(program_);
}

std::optional<PostOp> activation_post_op(const Graph& graph, const Node& node) {
  if (!node.domain.empty()) return std::nullopt;
  const EltwiseOp* row = find_eltwise_op(node.op_type);
  if (!row) return std::nullopt;
  PostOp p;
  p.kind = PostOpKind::kEltwise;
  p.algorithm = static_cast<int32_t>(row->algorithm);
  p.alpha = row->alpha;
  p.beta = row->beta;
  switch (row->parameters) {
    case EltwiseParameters::kFixed:
      break;
    case EltwiseParameters::kAlphaAttribute:
      p.alpha = float_attribute(node, row->alpha_attribute);
      break;
    case EltwiseParameters::kClipBounds: {
      // Bounds as inputs (opset 11 on); the attribute form is not lowered.
      float bounds[2] = {-FLT_MAX, FLT_MAX};
      for (size_t i = 1; i < 3; ++i) {
        if (!node.has_input(i)) continue;
        const Value& v = graph.value(node.inputs[i]);
        if (!v.constant || v.constant->numel() != 1 || v.constant->dtype() != DType::kFloat32) return std::nullopt;
        bounds[i - 1] = v.constant->as<float>()[0];
      }
      if (node.attrs.has("min") || node.attrs.has("max")) return std::nullopt;
      p.alpha = bounds[0];
      p.beta = bounds[1];
      break;
    }
  }
  return p;
}

std::optional<PostOp> chain_activation(const Lowering& lowering, const FusedNode& fused, const Node& node) {
  if (fused.body_to_region.empty()) return activation_post_op(lowering.graph(), node);
  Node in_region = node;
  for (ValueId& id : in_region.inputs) {
    if (id == kNoValue) continue;
    const ValueId mapped = fused.region_value(id);
    // Values inside the chain have no region value; an activation only needs its constants.
    id = mapped;
  }
  for (ValueId& id : in_region.outputs) id = kNoValue;
  return activation_post_op(lowering.graph(), in_region);
}

bool is_hardswish_gate_attributes(const Node& node) {
  if (node.op_type != "HardSigmoid" || !node.domain.empty()) return false;
  return std::fabs(node.attrs.get_float_or("alpha", 0.2f) - 1.0f / 6.0f) <= 1e-7f && node.attrs.get_float_or("beta", 0.5f) == 0.5f;
}

std::optional<PostOp> chain_gated_activation(const FusedNode& fused, size_t t, ValueId chain) {
  if (t + 1 >= fused.tail.size()) return std::nullopt;
  const Node& gate = *fused.tail[t];
  const Node& product = *fused.tail[t + 1];
  const bool sigmoid = gate.op_type == "Sigmoid" && gate.domain.empty();
  if (!(sigmoid || is_hardswish_gate_attributes(gate)) || gate.inputs.size() != 1 || gate.inputs[0] != chain) {
    return std::nullopt;
  }
  if (product.op_type != "Mul" || !product.domain.empty() || product.inputs.size() != 2) return std::nullopt;
  const ValueId s = gate.outputs[0];
  if (!((product.inputs[0] == chain && product.inputs[1] == s) || (product.inputs[0] == s && product.inputs[1] == chain))) {
    return std::nullopt;
  }
  PostOp post_op;
  post_op.kind = PostOpKind::kEltwise;
  post_op.algorithm = static_cast<int32_t>(sigmoid ? dnnl::algorithm::eltwise_swish : dnnl::algorithm::eltwise_hardswish);
  post_op.alpha = sigmoid ? 1.0f : 0.0f;  // swish: x * sigmoid(alpha * x); hardswish (oneDNN 2.6) reads none
  return post_op;
}

Program lower_region(const Graph& region, const dnnl::engine& engine, const std::vector<char>& bf16_nodes,
                     AlgorithmMemo* memo) {
  Lowering lowering(region, engine, bf16_nodes, memo);
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    const Node& node = region.nodes[i];
    FusedNode fused;
    fused.region_node = static_cast<int32_t>(i);
    for (ValueId out : node.outputs) fused.outputs.push_back(out);
    std::string op_type = node.op_type;
    if (node.domain == "tessera" && node.op_type == "Composite") {
      const Attribute* pattern = node.attrs.find("pattern");
      const Attribute* body = node.attrs.find("body");
      if (!pattern || !body || !body->graph || body->graph->nodes.empty() ||
          body->graph->inputs.size() != node.inputs.size()) {
        throw_user_error(node.describe(), ": composite without a usable pattern or body");
      }
      const Graph& g = *body->graph;
      fused.pattern = pattern->s;
      fused.graph = &g;
      fused.node = &g.nodes[0];
      for (size_t k = 1; k < g.nodes.size(); ++k) fused.tail.push_back(&g.nodes[k]);
      fused.body_to_region.assign(g.values.size(), kNoValue);
      for (size_t k = 0; k < g.inputs.size(); ++k) fused.body_to_region[static_cast<size_t>(g.inputs[k])] = node.inputs[k];
      for (size_t k = 0; k < g.outputs.size() && k < node.outputs.size(); ++k) {
        fused.body_to_region[static_cast<size_t>(g.outputs[k])] = node.outputs[k];
      }
      op_type = fused.node->op_type;
    } else {
      fused.graph = &region;
      fused.node = &node;
    }
    if (fused.pattern == "LayerNorm") {
      lower_layer_norm_pattern(lowering, fused);
      continue;
    }
    if (fused.pattern == "MatMulIntegerScale" || fused.pattern == "MatMulIntegerScaleBias") {
      lower_matmul_integer_scaled(lowering, fused);
      continue;
    }
    if (fused.pattern == "QLinearConvAdd" || fused.pattern == "QLinearConvAddActivation") {
      lower_qlinear_conv_add(lowering, fused);
      continue;
    }
    switch (op_family(op_type)) {
      case OpFamily::kConvolution: lower_convolution(lowering, fused); break;
      case OpFamily::kMatMul: lower_matmul(lowering, fused); break;
      case OpFamily::kPooling: lower_pooling(lowering, fused); break;
      case OpFamily::kNormalization: lower_normalization(lowering, fused); break;
      case OpFamily::kLayout: lower_layout(lowering, fused); break;
      case OpFamily::kElementwise: lower_elementwise(lowering, fused); break;
      case OpFamily::kQuantized: lower_quantized(lowering, fused); break;
    }
  }
  return lowering.finish();
}

}  // namespace tessera::dnnl_backend
