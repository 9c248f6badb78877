// ONNX nodes → XNNPACK plug-in program ops, with the reason for every refusal.
// See xnnpack_lowering.h for the contract; the per-op geometry (pads from
// auto_pad, ceil_mode's extra end padding) is derived from the graph's static
// output shapes, and every op emitted is checked with the program's own shape
// rule (infer_op) against the graph's output shape before it is claimed.
#include "xnnpack_lowering.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace tessera_xnnpack {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

const tsrp_attribute* find_attribute(const tsrp_node* node, const char* name) {
  for (size_t i = 0; i < node->attribute_count; ++i) {
    if (std::strcmp(node->attributes[i]->name, name) == 0) return node->attributes[i];
  }
  return nullptr;
}
int64_t attr_int(const tsrp_node* node, const char* name, int64_t fallback) {
  const tsrp_attribute* a = find_attribute(node, name);
  return a && a->kind == TSRP_ATTR_INT ? a->i : fallback;
}
float attr_float(const tsrp_node* node, const char* name, float fallback) {
  const tsrp_attribute* a = find_attribute(node, name);
  return a && a->kind == TSRP_ATTR_FLOAT ? a->f : fallback;
}
std::string attr_string(const tsrp_node* node, const char* name, const char* fallback) {
  const tsrp_attribute* a = find_attribute(node, name);
  return a && a->kind == TSRP_ATTR_STRING ? std::string(a->s, a->s_length) : std::string(fallback);
}
std::vector<int64_t> attr_ints(const tsrp_node* node, const char* name, std::vector<int64_t> fallback) {
  const tsrp_attribute* a = find_attribute(node, name);
  if (!a || a->kind != TSRP_ATTR_INTS) return fallback;
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

const char* dtype_name(tsrp_dtype t) {
  switch (t) {
    case TSRP_FLOAT32: return "float32"; case TSRP_UINT8: return "uint8"; case TSRP_INT8: return "int8";
    case TSRP_INT16: return "int16"; case TSRP_INT32: return "int32"; case TSRP_INT64: return "int64";
    case TSRP_BOOL: return "bool"; case TSRP_FLOAT16: return "float16"; case TSRP_FLOAT64: return "float64";
    case TSRP_BFLOAT16: return "bfloat16"; default: return "a non-float32 type";
  }
}

std::vector<int64_t> value_dims(const tsrp_value* v) {
  return v->rank > 0 ? std::vector<int64_t>(v->dims, v->dims + v->rank) : std::vector<int64_t>();
}

// A value as a node of some scope sees it: body inputs and outputs of a composite resolve to region values.
struct Ref {
  const tsrp_value* value = nullptr;
  int32_t scope = -1;  // where `index` lives: -1 the region graph, k the body of region node k
  int32_t index = -1;
};

struct Scope {
  const tsrp_graph* graph;
  const tsrp_node* composite;  // NULL for the region graph itself
  int32_t id;                  // -1, or the composite's region node index
};

class Refusal {};  // thrown inside this file only, caught by lower()

class Lowerer {
 public:
  Lowerer(const tsrp_graph* region, bool whole_region) : region_(region), whole_region_(whole_region) {
    if (!whole_region) return;
    for (size_t k = 0; k < region->input_count; ++k) bind(region->values[region->inputs[k]], TensorKind::kRegionInput, k);
    for (size_t k = 0; k < region->output_count; ++k) bind(region->values[region->outputs[k]], TensorKind::kRegionOutput, k);
  }

  bool lower(size_t node_index) {
    try {
      const tsrp_node* node = region_->nodes[node_index];
      lower_node(Scope{region_, nullptr, -1}, node, static_cast<int32_t>(node_index));
      return true;
    } catch (const Refusal&) {
      return false;
    }
  }

  void fuse();
  Program take();
  std::string reason;

 private:
  [[noreturn]] void refuse(const tsrp_node* node, const std::string& why) {
    reason = std::string("xnnpack: ") + node->op_type + " " + why;
    throw Refusal();
  }

  void bind(const tsrp_value* v, TensorKind kind, size_t io) {
    Tensor t;
    t.kind = kind;
    t.ref = static_cast<int32_t>(io);
    Dims d;
    layout_dims(v, &d);
    tensors_[v] = add_tensor(t, d);
  }

  uint32_t add_tensor(const Tensor& t, const Dims& d) {
    program_.tensors.push_back(t);
    dims_.push_back(d);
    return static_cast<uint32_t>(program_.tensors.size() - 1);
  }

  Ref ref(const Scope& s, const tsrp_node* node, size_t position, bool output) {
    const size_t count = output ? node->output_count : node->input_count;
    const int32_t index = position < count ? (output ? node->outputs : node->inputs)[position] : -1;
    if (index < 0 || static_cast<size_t>(index) >= s.graph->value_count) return Ref{};
    if (s.composite) {
      // A body input or output is the composite's input or output of the same position.
      for (size_t k = 0; k < s.graph->input_count; ++k)
        if (s.graph->inputs[k] == index && k < s.composite->input_count && s.composite->inputs[k] >= 0)
          return Ref{region_->values[s.composite->inputs[k]], -1, s.composite->inputs[k]};
      for (size_t k = 0; k < s.graph->output_count; ++k)
        if (s.graph->outputs[k] == index && k < s.composite->output_count && s.composite->outputs[k] >= 0)
          return Ref{region_->values[s.composite->outputs[k]], -1, s.composite->outputs[k]};
    }
    return Ref{s.graph->values[index], s.id, index};
  }

  // Checks every value the node reads as data and every output: float32, static shape, rank ≤ 6.
  void check_values(const Scope& s, const tsrp_node* node, std::vector<size_t> non_data_inputs) {
    for (size_t i = 0; i < node->input_count; ++i) {
      if (std::find(non_data_inputs.begin(), non_data_inputs.end(), i) != non_data_inputs.end()) continue;
      const Ref r = ref(s, node, i, false);
      if (!r.value) continue;
      check_value(node, r.value, "input");
    }
    for (size_t i = 0; i < node->output_count; ++i) {
      const Ref r = ref(s, node, i, true);
      if (r.value) check_value(node, r.value, "output");
    }
  }
  void check_value(const tsrp_node* node, const tsrp_value* v, const char* role) {
    const std::string name = std::string(role) + " '" + v->name + "'";
    if (v->dtype != TSRP_FLOAT32) refuse(node, name + " is " + dtype_name(v->dtype) + "; only float32");
    if (v->rank < 0) refuse(node, name + " has an unknown rank; only static shapes");
    if (static_cast<size_t>(v->rank) > kMaxRank) refuse(node, name + " has rank " + std::to_string(v->rank) + "; at most 6");
    for (int32_t d = 0; d < v->rank; ++d)
      if (v->dims[d] < 0) refuse(node, name + " has a dynamic dimension; only static shapes");
    Dims dims;
    layout_dims(v, &dims);
    if (element_count(dims) > kMaxElements) refuse(node, name + " has more than 2^30 elements");
  }

  // A value the op computes on (never a constant: those are folded before a backend sees them).
  uint32_t activation(const tsrp_node* node, const Ref& r, const char* what) {
    if (!r.value) refuse(node, std::string("has no ") + what);
    auto it = tensors_.find(r.value);
    if (it != tensors_.end()) return it->second;
    if (r.value->constant) refuse(node, std::string(what) + " '" + r.value->name + "' is a constant (fold it first)");
    if (whole_region_) refuse(node, std::string("reads '") + r.value->name + "' before it is written");
    Tensor t;  // support(): a stand-in for a value from outside
    t.kind = TensorKind::kRegionInput;
    Dims d;
    layout_dims(r.value, &d);
    const uint32_t id = add_tensor(t, d);
    tensors_[r.value] = id;
    return id;
  }

  uint32_t constant(const tsrp_node* node, const Ref& r, StaticTransform transform, float scale = 1.0f,
                    uint32_t count = 0) {
    Tensor t;
    t.kind = TensorKind::kStatic;
    t.ref = r.index;
    t.scope = r.scope;
    t.transform = transform;
    t.scale = scale;
    t.count = count;
    Dims d;
    std::string why;
    if (!static_dims(t, r.value, &d, &why)) refuse(node, "constant '" + std::string(r.value ? r.value->name : "") + "': " + why);
    return add_tensor(t, d);
  }

  uint32_t zeros(size_t count) {
    Tensor t;
    t.kind = TensorKind::kStatic;
    t.transform = StaticTransform::kZeros;
    t.count = static_cast<uint32_t>(count);
    return add_tensor(t, Dims{count});
  }

  uint32_t result(const Ref& r) {
    auto it = tensors_.find(r.value);
    if (it != tensors_.end()) return it->second;  // a region output
    Dims d;
    layout_dims(r.value, &d);
    const uint32_t id = add_tensor(Tensor{}, d);
    tensors_[r.value] = id;
    return id;
  }

  uint32_t internal() { return add_tensor(Tensor{}, Dims{}); }

  // Appends an op and checks its shape rule; when `expected` is set, the output must have its layout dims.
  void emit(const tsrp_node* node, int32_t region_node, Op op, const tsrp_value* expected) {
    op.region_node = region_node;
    std::vector<const Dims*> in;
    for (uint32_t id : op.inputs) if (id != kNoTensor) in.push_back(&dims_[id]);
    Dims out;
    std::string why;
    if (!infer_op(op, in, &out, &why)) refuse(node, std::string("does not map onto xnn ") + op_code_name(op.code) + ": " + why);
    if (expected) {
      Dims want;
      layout_dims(expected, &want);
      if (out != want) {
        refuse(node, std::string("maps onto xnn ") + op_code_name(op.code) + " giving " + dims_text(out) +
                         " (NHWC) where the graph says " + dims_text(want) + "; not supported");
      }
    }
    dims_[op.outputs[0]] = out;
    program_.ops.push_back(std::move(op));
  }

  // A constant one-element float input (Clip's min/max, Pad's value).
  bool scalar_input(const Scope& s, const tsrp_node* node, size_t position, const char* what, float* out) {
    const Ref r = ref(s, node, position, false);
    if (!r.value) return false;
    if (!r.value->constant) refuse(node, std::string(what) + " '" + r.value->name + "' is not a constant");
    if (r.value->dtype != TSRP_FLOAT32 || r.value->constant_bytes != sizeof(float)) {
      refuse(node, std::string(what) + " '" + r.value->name + "' is not one float32");
    }
    std::memcpy(out, r.value->constant, sizeof(float));
    return true;
  }

  void lower_node(const Scope& s, const tsrp_node* node, int32_t region_node);
  void lower_conv(const Scope& s, const tsrp_node* node, int32_t region_node);
  void lower_pool(const Scope& s, const tsrp_node* node, int32_t region_node, bool max);
  void lower_gemm(const Scope& s, const tsrp_node* node, int32_t region_node, bool matmul);
  void lower_binary(const Scope& s, const tsrp_node* node, int32_t region_node, OpCode code);
  void lower_reshape(const Scope& s, const tsrp_node* node, int32_t region_node);
  void lower_pad(const Scope& s, const tsrp_node* node, int32_t region_node);
  void lower_prelu(const Scope& s, const tsrp_node* node, int32_t region_node);
  // Pads of a 2-D window op in XNNPACK's order (top, right, bottom, left), from auto_pad or pads.
  std::vector<int64_t> window_pads(const tsrp_node* node, const tsrp_value* x, const tsrp_value* y,
                                   const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dilations);

  const tsrp_graph* region_;
  bool whole_region_;
  Program program_;
  std::vector<Dims> dims_;
  std::map<const tsrp_value*, uint32_t> tensors_;
};

std::vector<int64_t> Lowerer::window_pads(const tsrp_node* node, const tsrp_value* x, const tsrp_value* y,
                                          const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                          const std::vector<int64_t>& dilations) {
  const std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  std::vector<int64_t> onnx = attr_ints(node, "pads", {0, 0, 0, 0});  // h_begin, w_begin, h_end, w_end
  if (onnx.size() != 4) refuse(node, "pads has " + std::to_string(onnx.size()) + " entries; expected 4 (2-D)");
  if (auto_pad == "VALID") {
    onnx = {0, 0, 0, 0};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int a = 0; a < 2; ++a) {
      const int64_t in = x->dims[2 + a], out = y->dims[2 + a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1 - in);
      const int64_t small = total / 2;
      onnx[a] = auto_pad == "SAME_UPPER" ? small : total - small;
      onnx[2 + a] = total - onnx[a];
    }
  } else if (auto_pad != "NOTSET") {
    refuse(node, "with auto_pad " + auto_pad + "; expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  for (int64_t p : onnx) if (p < 0) refuse(node, "with a negative pad");
  return {onnx[0], onnx[3], onnx[2], onnx[1]};
}

void Lowerer::lower_conv(const Scope& s, const tsrp_node* node, int32_t region_node) {
  check_values(s, node, {});
  const Ref x = ref(s, node, 0, false), w = ref(s, node, 1, false), b = ref(s, node, 2, false), y = ref(s, node, 0, true);
  if (!x.value || !w.value || !y.value) refuse(node, "without input, weight or output");
  if (x.value->rank != 4) refuse(node, "on input '" + std::string(x.value->name) + "' of rank " + std::to_string(x.value->rank) + "; only 2-D convolution (rank 4)");
  if (!w.value->constant) refuse(node, "with weight '" + std::string(w.value->name) + "' not a constant");
  if (w.value->rank != 4) refuse(node, "with a weight of rank " + std::to_string(w.value->rank));
  if (b.value && (!b.value->constant || b.value->rank != 1)) refuse(node, "with bias '" + std::string(b.value->name) + "' not a constant vector");
  const std::vector<int64_t> wd = value_dims(w.value);
  const int64_t group = attr_int(node, "group", 1), channels = x.value->dims[1], m = wd[0];
  if (group < 1 || wd[1] * group != channels || m % group != 0) refuse(node, "with group " + std::to_string(group) + " inconsistent with its shapes");
  const std::vector<int64_t> kernel = {wd[2], wd[3]};
  if (attr_ints(node, "kernel_shape", kernel) != kernel) refuse(node, "with kernel_shape differing from the weight's");
  const std::vector<int64_t> strides = attr_ints(node, "strides", {1, 1}), dilations = attr_ints(node, "dilations", {1, 1});
  if (strides.size() != 2 || dilations.size() != 2) refuse(node, "with strides/dilations not of 2 entries");
  const std::vector<int64_t> pads = window_pads(node, x.value, y.value, kernel, strides, dilations);
  Op op;
  op.ints = {pads[0], pads[1], pads[2], pads[3], kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1]};
  op.floats = {-kInf, kInf};
  const uint32_t in = activation(node, x, "input");
  const bool depthwise = group > 1 && group == channels && wd[1] == 1;
  uint32_t filter;
  if (depthwise) {
    op.code = OpCode::kDepthwiseConvolution;
    op.ints.insert(op.ints.end(), {m / channels, channels});
    filter = constant(node, w, StaticTransform::kFilterDepthwise);
  } else {
    op.code = OpCode::kConvolution;
    op.ints.insert(op.ints.end(), {group, wd[1], m / group});
    filter = constant(node, w, StaticTransform::kFilterOhwi);
  }
  const uint32_t bias = b.value ? constant(node, b, StaticTransform::kFlatten) : zeros(static_cast<size_t>(m));
  op.inputs = {in, filter, bias};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_pool(const Scope& s, const tsrp_node* node, int32_t region_node, bool max) {
  check_values(s, node, {});
  const Ref x = ref(s, node, 0, false), y = ref(s, node, 0, true);
  if (!x.value || !y.value) refuse(node, "without input or output");
  if (node->output_count > 1 && node->outputs[1] >= 0) refuse(node, "with the Indices output; not in XNNPACK");
  if (x.value->rank != 4) refuse(node, "on a rank-" + std::to_string(x.value->rank) + " input; only 2-D pooling (rank 4)");
  const std::vector<int64_t> kernel = attr_ints(node, "kernel_shape", {});
  if (kernel.size() != 2) refuse(node, "with kernel_shape not of 2 entries");
  const std::vector<int64_t> strides = attr_ints(node, "strides", {1, 1}), dilations = attr_ints(node, "dilations", {1, 1});
  if (strides.size() != 2 || dilations.size() != 2) refuse(node, "with strides/dilations not of 2 entries");
  std::vector<int64_t> pads = window_pads(node, x.value, y.value, kernel, strides, dilations);
  const bool ceil_mode = attr_int(node, "ceil_mode", 0) != 0;
  // ceil_mode: a last window past the end pad is XNNPACK's extra end padding. Max pooling ignores
  // padding; average pooling with count_include_pad=0 divides by the input elements only, like ONNX.
  int64_t extra[2] = {0, 0};
  for (int a = 0; a < 2; ++a) {
    const int64_t in = x.value->dims[2 + a], out = y.value->dims[2 + a];
    const int64_t begin = a == 0 ? pads[0] : pads[3];
    int64_t& end = a == 0 ? pads[2] : pads[1];
    const int64_t effective = (kernel[a] - 1) * dilations[a] + 1;
    extra[a] = std::max<int64_t>(0, (out - 1) * strides[a] + effective - (in + begin + end));
    if (extra[a] > 0 && !ceil_mode) break;  // the shape check below reports it
    if ((out - 1) * strides[a] - begin >= in) refuse(node, "whose last window starts in the padding");
    end += extra[a];
    if (begin >= effective || end >= effective) refuse(node, "with a pad not smaller than the window");
  }
  const bool padded = pads[0] || pads[1] || pads[2] || pads[3];
  if (kernel[0] * kernel[1] == 1) {
    // XNNPACK refuses 1x1 pooling windows; unstrided and unpadded, the op is a copy.
    if (padded || strides[0] != 1 || strides[1] != 1) refuse(node, "with a 1x1 kernel and strides or pads; XNNPACK has no 1x1 pooling");
    Dims out;
    layout_dims(y.value, &out);
    Op copy;
    copy.code = OpCode::kStaticReshape;
    copy.ints.assign(out.begin(), out.end());
    copy.inputs = {activation(node, x, "input")};
    copy.outputs = {result(y)};
    return emit(node, region_node, std::move(copy), y.value);
  }
  Op op;
  op.floats = {-kInf, kInf};
  uint32_t in = activation(node, x, "input");
  if (max) {
    // Padded positions never win, with or without dilation (the plug-in test checks both on negative inputs).
    op.code = OpCode::kMaxPooling;
    op.ints = {pads[0], pads[1], pads[2], pads[3], kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1]};
  } else {
    if (dilations[0] != 1 || dilations[1] != 1) refuse(node, "with dilations; XNNPACK's average pooling has none");
    op.code = OpCode::kAveragePooling;
    if (attr_int(node, "count_include_pad", 0) != 0 && padded) {
      // XNNPACK divides by the input elements in the window: count the pads by padding with zeros first.
      if (extra[0] || extra[1]) refuse(node, "with count_include_pad=1 and a ceil_mode window past the pads");
      Op pad;
      pad.code = OpCode::kStaticConstantPad;
      pad.ints = {0, pads[0], pads[3], 0, 0, pads[2], pads[1], 0};
      pad.floats = {0.0f};
      pad.inputs = {in};
      pad.outputs = {internal()};
      in = pad.outputs[0];
      emit(node, region_node, std::move(pad), nullptr);
      pads = {0, 0, 0, 0};
    }
    op.ints = {pads[0], pads[1], pads[2], pads[3], kernel[0], kernel[1], strides[0], strides[1]};
  }
  op.inputs = {in};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_gemm(const Scope& s, const tsrp_node* node, int32_t region_node, bool matmul) {
  check_values(s, node, {});
  const Ref a = ref(s, node, 0, false), b = ref(s, node, 1, false), c = ref(s, node, 2, false), y = ref(s, node, 0, true);
  if (!a.value || !b.value || !y.value) refuse(node, "without inputs or output");
  if (!b.value->constant || b.value->rank != 2) {
    refuse(node, "with B '" + std::string(b.value->name) + "' not a constant matrix; XNNPACK's fully connected needs constant weights");
  }
  const int64_t n = matmul ? b.value->dims[1] : (attr_int(node, "transB", 0) ? b.value->dims[0] : b.value->dims[1]);
  Op op;
  op.code = OpCode::kFullyConnected;
  op.floats = {-kInf, kInf};
  if (matmul) {
    const int32_t rank = a.value->rank;
    if (rank < 2) refuse(node, "with a rank-" + std::to_string(rank) + " A; at least 2");
    if (rank == 4) refuse(node, "with a rank-4 A: rank-4 values are NHWC inside xnnpack, so its last axis is not W");
    op.inputs = {activation(node, a, "A"), constant(node, b, StaticTransform::kTranspose2d), kNoTensor};
  } else {
    if (attr_int(node, "transA", 0) != 0) refuse(node, "with transA=1");
    if (a.value->rank != 2) refuse(node, "with a rank-" + std::to_string(a.value->rank) + " A");
    const float alpha = attr_float(node, "alpha", 1.0f), beta = attr_float(node, "beta", 1.0f);
    // XNNPACK's filter is [N, K]: B as is when transB=1, transposed otherwise; alpha folded into it.
    const uint32_t filter = constant(node, b, attr_int(node, "transB", 0) ? StaticTransform::kCopy : StaticTransform::kTranspose2d, alpha);
    uint32_t bias = kNoTensor;
    if (c.value && beta != 0.0f) {
      if (!c.value->constant) refuse(node, "with C '" + std::string(c.value->name) + "' not a constant");
      Dims cd;
      layout_dims(c.value, &cd);
      const uint64_t count = element_count(cd);
      if (count == 1) bias = constant(node, c, StaticTransform::kFill, beta, static_cast<uint32_t>(n));
      else if (count == static_cast<uint64_t>(n) && cd.back() == static_cast<size_t>(n)) bias = constant(node, c, StaticTransform::kFlatten, beta);
      else refuse(node, "with C '" + std::string(c.value->name) + "' of shape " + dims_text(cd) + "; only a per-column bias [N]");
    }
    op.inputs = {activation(node, a, "A"), filter, bias};
  }
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_binary(const Scope& s, const tsrp_node* node, int32_t region_node, OpCode code) {
  check_values(s, node, {});
  if (node->input_count != 2) refuse(node, "with " + std::to_string(node->input_count) + " inputs; only 2");
  const Ref y = ref(s, node, 0, true);
  const Ref operands[2] = {ref(s, node, 0, false), ref(s, node, 1, false)};
  if (!y.value || !operands[0].value || !operands[1].value) refuse(node, "without inputs or output");
  if (operands[0].value->constant && operands[1].value->constant) refuse(node, "of two constants (fold it first)");
  const int32_t out_rank = y.value->rank;
  Op op;
  op.code = code;
  if (code != OpCode::kMaximum && code != OpCode::kMinimum) op.floats = {-kInf, kInf};
  for (const Ref& r : operands) {
    const tsrp_value* v = r.value;
    const std::string name = std::string("input '") + v->name + "'";
    if (v->rank == 4 && out_rank != 4) refuse(node, "broadcasting rank-4 " + name + " to rank " + std::to_string(out_rank));
    if (out_rank != 4 || v->rank == 4) {
      op.inputs.push_back(v->constant ? constant(node, r, v->rank == 4 ? StaticTransform::kToNhwc : StaticTransform::kCopy)
                                      : activation(node, r, "input"));
      continue;
    }
    // A lower-rank operand of a rank-4 result lines up with NCHW's trailing dims.
    if (v->constant) {
      op.inputs.push_back(constant(node, r, StaticTransform::kToNhwc));
      continue;
    }
    std::vector<int64_t> e = value_dims(v);
    while (e.size() < 4) e.insert(e.begin(), 1);
    if (e[1] != 1 && e[2] * e[3] != 1) {
      refuse(node, name + " of rank " + std::to_string(v->rank) + " broadcast against a rank-4 value: rank-4 values are NHWC inside xnnpack and this operand cannot be re-laid out without a transpose");
    }
    Op reshape;
    reshape.code = OpCode::kStaticReshape;
    reshape.ints = {e[0], e[2], e[3], e[1]};
    reshape.inputs = {activation(node, r, "input")};
    reshape.outputs = {internal()};
    op.inputs.push_back(reshape.outputs[0]);
    emit(node, region_node, std::move(reshape), nullptr);
  }
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

// True when a value's bytes are in the same order in NCHW and NHWC (rank ≠ 4, or C = 1, or H·W = 1).
bool layout_free(const tsrp_value* v) {
  return v->rank != 4 || v->dims[1] == 1 || v->dims[2] * v->dims[3] == 1;
}

void Lowerer::lower_reshape(const Scope& s, const tsrp_node* node, int32_t region_node) {
  const std::string op_type = node->op_type;
  const bool shape_input = op_type == "Reshape" || op_type == "Squeeze" || op_type == "Unsqueeze";
  check_values(s, node, shape_input ? std::vector<size_t>{1} : std::vector<size_t>{});
  const Ref x = ref(s, node, 0, false), y = ref(s, node, 0, true);
  if (!x.value || !y.value) refuse(node, "without input or output");
  if (op_type == "Dropout" && (node->input_count > 1 || (node->output_count > 1 && node->outputs[1] >= 0))) {
    refuse(node, "with a ratio/training_mode input or a mask output");
  }
  for (const tsrp_value* v : {x.value, y.value}) {
    if (!layout_free(v)) {
      refuse(node, "of '" + std::string(v->name) + "' (rank 4, C > 1 and H·W > 1): rank-4 values are NHWC inside xnnpack, so the reshape would reorder elements");
    }
  }
  Dims out;
  layout_dims(y.value, &out);
  Op op;
  op.code = OpCode::kStaticReshape;
  op.ints.assign(out.begin(), out.end());
  op.inputs = {activation(node, x, "input")};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_pad(const Scope& s, const tsrp_node* node, int32_t region_node) {
  check_values(s, node, {1, 3});
  const Ref x = ref(s, node, 0, false), y = ref(s, node, 0, true);
  if (!x.value || !y.value) refuse(node, "without input or output");
  const std::string mode = attr_string(node, "mode", "constant");
  if (mode != "constant") refuse(node, "with mode " + mode + "; only constant");
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (node->opset < 11) {
    pads = attr_ints(node, "pads", {});
    value = attr_float(node, "value", 0.0f);
  } else {
    const Ref p = ref(s, node, 1, false);
    if (!p.value || !p.value->constant || p.value->dtype != TSRP_INT64) refuse(node, "with pads not a constant int64 tensor");
    const int64_t* data = static_cast<const int64_t*>(p.value->constant);
    pads.assign(data, data + p.value->constant_bytes / sizeof(int64_t));
    scalar_input(s, node, 2, "constant_value", &value);
    if (ref(s, node, 3, false).value) refuse(node, "with an axes input");
  }
  const size_t rank = static_cast<size_t>(x.value->rank);
  if (pads.size() != 2 * rank) refuse(node, "with " + std::to_string(pads.size()) + " pads for rank " + std::to_string(rank));
  for (int64_t p : pads) if (p < 0) refuse(node, "with a negative pad (a crop)");
  std::vector<int64_t> pre(pads.begin(), pads.begin() + rank), post(pads.begin() + rank, pads.end());
  if (rank == 4) {
    pre = {pre[0], pre[2], pre[3], pre[1]};
    post = {post[0], post[2], post[3], post[1]};
  }
  if (rank == 0) pre = post = {0};
  Op op;
  op.code = OpCode::kStaticConstantPad;
  op.ints = pre;
  op.ints.insert(op.ints.end(), post.begin(), post.end());
  op.floats = {value};
  op.inputs = {activation(node, x, "input")};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_prelu(const Scope& s, const tsrp_node* node, int32_t region_node) {
  check_values(s, node, {});
  const Ref x = ref(s, node, 0, false), slope = ref(s, node, 1, false), y = ref(s, node, 0, true);
  if (!x.value || !slope.value || !y.value) refuse(node, "without inputs or output");
  if (!slope.value->constant) refuse(node, "with slope '" + std::string(slope.value->name) + "' not a constant");
  if (x.value->rank < 1) refuse(node, "on a scalar");
  // XNNPACK's slope is per channel: the last dim inside (C for rank 4, since it is NHWC there).
  const int32_t rank = x.value->rank;
  const int32_t channel_axis = rank == 4 ? 1 : rank - 1;
  const int64_t channels = x.value->dims[channel_axis];
  std::vector<int64_t> e = value_dims(slope.value);
  if (e.size() > static_cast<size_t>(rank)) refuse(node, "with a slope of higher rank than X");
  while (e.size() < static_cast<size_t>(rank)) e.insert(e.begin(), 1);
  int64_t count = 1;
  for (int64_t d : e) count *= d;
  uint32_t slope_tensor;
  if (count == 1) {
    slope_tensor = constant(node, slope, StaticTransform::kFill, 1.0f, static_cast<uint32_t>(channels));
  } else if (count == channels && e[channel_axis] == channels) {
    slope_tensor = constant(node, slope, StaticTransform::kFlatten);
  } else {
    refuse(node, "with slope '" + std::string(slope.value->name) + "' not per channel (axis " + std::to_string(channel_axis) + ") or a scalar");
  }
  Op op;
  op.code = OpCode::kPRelu;
  op.inputs = {activation(node, x, "input"), slope_tensor};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

void Lowerer::lower_node(const Scope& s, const tsrp_node* node, int32_t region_node) {
  const std::string op_type = node->op_type;
  if (*node->domain && std::strcmp(node->domain, "ai.onnx") != 0) {
    if (op_type == "Composite" && std::strcmp(node->domain, "tessera") == 0 && !s.composite) {
      const tsrp_attribute* body = find_attribute(node, "body");
      if (!body || body->kind != TSRP_ATTR_GRAPH || !body->graph) refuse(node, "without a body");
      const Scope inner{body->graph, node, region_node};
      for (size_t k = 0; k < body->graph->node_count; ++k) lower_node(inner, body->graph->nodes[k], region_node);
      return;
    }
    refuse(node, std::string("of domain '") + node->domain + "'");
  }
  static const std::map<std::string, OpCode> binary = {
      {"Add", OpCode::kAdd}, {"Mul", OpCode::kMultiply}, {"Sub", OpCode::kSubtract},
      {"Div", OpCode::kDivide}, {"Max", OpCode::kMaximum}, {"Min", OpCode::kMinimum}};
  static const std::map<std::string, OpCode> unary = {
      {"Sigmoid", OpCode::kSigmoid}, {"HardSwish", OpCode::kHardSwish}, {"Abs", OpCode::kAbs},
      {"Neg", OpCode::kNegate}, {"Ceil", OpCode::kCeiling}, {"Floor", OpCode::kFloor},
      {"Sqrt", OpCode::kSquareRoot}, {"Round", OpCode::kBankersRounding}, {"Relu", OpCode::kClamp},
      {"Clip", OpCode::kClamp}, {"LeakyRelu", OpCode::kLeakyRelu}, {"Elu", OpCode::kElu},
      {"Softmax", OpCode::kSoftmax}};
  if (op_type == "Conv") return lower_conv(s, node, region_node);
  if (op_type == "MaxPool") return lower_pool(s, node, region_node, true);
  if (op_type == "AveragePool") return lower_pool(s, node, region_node, false);
  if (op_type == "Gemm") return lower_gemm(s, node, region_node, false);
  if (op_type == "MatMul") return lower_gemm(s, node, region_node, true);
  if (op_type == "PRelu") return lower_prelu(s, node, region_node);
  if (op_type == "Pad") return lower_pad(s, node, region_node);
  if (op_type == "Reshape" || op_type == "Flatten" || op_type == "Squeeze" || op_type == "Unsqueeze" ||
      op_type == "Identity" || op_type == "Dropout") {
    return lower_reshape(s, node, region_node);
  }
  if (binary.count(op_type)) return lower_binary(s, node, region_node, binary.at(op_type));
  if (op_type == "GlobalAveragePool") {
    check_values(s, node, {});
    const Ref x = ref(s, node, 0, false), y = ref(s, node, 0, true);
    if (!x.value || !y.value) refuse(node, "without input or output");
    if (x.value->rank != 4) refuse(node, "on a rank-" + std::to_string(x.value->rank) + " input; only rank 4");
    Op op;
    op.code = OpCode::kGlobalAveragePooling;
    op.floats = {-kInf, kInf};
    op.inputs = {activation(node, x, "input")};
    op.outputs = {result(y)};
    return emit(node, region_node, std::move(op), y.value);
  }
  if (!unary.count(op_type)) {
    refuse(node, "is not in this XNNPACK snapshot's subgraph API (it has no concat/split/transpose/slice/tanh/"
                 "exp/log/reduce node) or not mapped by the plug-in");
  }
  check_values(s, node, {});
  const Ref x = ref(s, node, 0, false), y = ref(s, node, 0, true);
  if (!x.value || !y.value) refuse(node, "without input or output");
  Op op;
  op.code = unary.at(op_type);
  if (op_type == "Relu") {
    op.floats = {0.0f, kInf};
  } else if (op_type == "Clip") {
    float lo = -kInf, hi = kInf;
    if (node->opset < 11) {
      lo = attr_float(node, "min", -kInf);
      hi = attr_float(node, "max", kInf);
    } else {
      scalar_input(s, node, 1, "min", &lo);
      scalar_input(s, node, 2, "max", &hi);
    }
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) refuse(node, "with min above max or NaN bounds");
    op.floats = {lo, hi};
  } else if (op_type == "LeakyRelu") {
    op.floats = {attr_float(node, "alpha", 0.01f)};
    if (!std::isfinite(op.floats[0])) refuse(node, "with a non-finite alpha");
  } else if (op_type == "Elu") {
    op.floats = {attr_float(node, "alpha", 1.0f)};
    if (!std::isnormal(op.floats[0]) || op.floats[0] < 0) refuse(node, "with alpha " + std::to_string(op.floats[0]) + "; XNNPACK takes a positive (normal) alpha only");
  } else if (op_type == "Softmax") {
    const int32_t rank = x.value->rank;
    int64_t axis = attr_int(node, "axis", node->opset < 13 ? 1 : -1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) refuse(node, "over axis " + std::to_string(axis) + " of rank " + std::to_string(rank) + "; only the last axis");
    if (rank == 4) refuse(node, "over the last axis (W) of a rank-4 value: rank-4 values are NHWC inside xnnpack, so W is not last there");
  }
  op.inputs = {activation(node, x, "input")};
  op.outputs = {result(y)};
  emit(node, region_node, std::move(op), y.value);
}

bool has_output_clamp(OpCode code) {
  switch (code) {
    case OpCode::kConvolution: case OpCode::kDepthwiseConvolution: case OpCode::kFullyConnected:
    case OpCode::kMaxPooling: case OpCode::kAveragePooling: case OpCode::kGlobalAveragePooling:
    case OpCode::kAdd: case OpCode::kMultiply: case OpCode::kSubtract: case OpCode::kDivide: return true;
    default: return false;
  }
}

void Lowerer::fuse() {
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<int> readers(program_.tensors.size(), 0);
    std::vector<int> producer(program_.tensors.size(), -1);
    for (size_t k = 0; k < program_.ops.size(); ++k) {
      for (uint32_t id : program_.ops[k].inputs) if (id != kNoTensor) ++readers[id];
      producer[program_.ops[k].outputs[0]] = static_cast<int>(k);
    }
    for (size_t k = 0; k < program_.ops.size() && !changed; ++k) {
      Op& op = program_.ops[k];
      const bool is_clamp = op.code == OpCode::kClamp;
      const bool is_add = op.code == OpCode::kAdd;
      if (!is_clamp && !is_add) continue;
      for (size_t side = 0; side < (is_add ? 2 : 1) && !changed; ++side) {
        const uint32_t t = op.inputs[side];
        if (program_.tensors[t].kind != TensorKind::kInternal || readers[t] != 1 || producer[t] < 0) continue;
        Op& p = program_.ops[producer[t]];
        if (is_clamp && has_output_clamp(p.code)) {
          const float lo = std::max(p.floats[0], op.floats[0]), hi = std::min(p.floats[1], op.floats[1]);
          if (!(lo < hi)) continue;
          p.floats = {lo, hi};
        } else if (is_add && p.code == OpCode::kFullyConnected && p.inputs[2] == kNoTensor &&
                   p.floats[0] == -kInf && p.floats[1] == kInf) {
          // FC + a constant [..1, N] → the FC's bias, when the Add's result keeps the FC's shape.
          const uint32_t b = op.inputs[1 - side];
          const Tensor bt = program_.tensors[b];
          const size_t n = dims_[p.inputs[1]][0];
          if (bt.kind != TensorKind::kStatic || bt.transform != StaticTransform::kCopy || element_count(dims_[b]) != n ||
              dims_[b].back() != n || dims_[op.outputs[0]] != dims_[t]) {
            continue;
          }
          Tensor flat = bt;
          flat.transform = StaticTransform::kFlatten;
          p.inputs[2] = add_tensor(flat, Dims{n});
          p.floats = op.floats;
        } else {
          continue;
        }
        p.outputs = op.outputs;
        program_.ops.erase(program_.ops.begin() + static_cast<std::ptrdiff_t>(k));
        changed = true;
      }
    }
  }
}

Program Lowerer::take() {
  // Keep region inputs/outputs and the tensors ops still use, renumbered in order.
  std::vector<char> used(program_.tensors.size(), 0);
  for (const Op& op : program_.ops) {
    for (uint32_t id : op.inputs) if (id != kNoTensor) used[id] = 1;
    used[op.outputs[0]] = 1;
  }
  std::vector<uint32_t> renumber(program_.tensors.size(), kNoTensor);
  Program out;
  for (size_t i = 0; i < program_.tensors.size(); ++i) {
    const TensorKind kind = program_.tensors[i].kind;
    if (!used[i] && kind != TensorKind::kRegionOutput) continue;
    renumber[i] = static_cast<uint32_t>(out.tensors.size());
    out.tensors.push_back(program_.tensors[i]);
  }
  for (Op op : program_.ops) {
    for (uint32_t& id : op.inputs) if (id != kNoTensor) id = renumber[id];
    op.outputs[0] = renumber[op.outputs[0]];
    out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace

bool check_node(const tsrp_graph* graph, size_t node_index, std::string* reason) {
  if (!graph || node_index >= graph->node_count) {
    *reason = "xnnpack: no such node";
    return false;
  }
  Lowerer lowerer(graph, false);
  if (lowerer.lower(node_index)) return true;
  *reason = lowerer.reason;
  return false;
}

bool lower_region(const tsrp_graph* region, Program* out, std::string* reason) {
  Lowerer lowerer(region, true);
  for (size_t k = 0; k < region->node_count; ++k) {
    if (!lowerer.lower(k)) {
      *reason = lowerer.reason;
      return false;
    }
  }
  lowerer.fuse();
  *out = lowerer.take();
  return true;
}

}  // namespace tessera_xnnpack
