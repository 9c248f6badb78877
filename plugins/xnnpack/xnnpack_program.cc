// The XNNPACK plug-in's payload format (version 1) and the checks that make a
// parsed payload safe to build: see xnnpack_program.h for the contract.
//
// Layout of the bytes (little-endian):
//   u32 magic "TXNP", u32 version, u32 tensor_count, u32 op_count,
//   tensor × tensor_count: u32 kind, i32 ref, i32 scope, u32 transform, u32 count, f32 scale
//   op × op_count: u32 code, i32 region_node, u32 n_in, u32 in[n_in], u32 n_out, u32 out[n_out],
//                  u32 n_ints, i64 ints[n_ints], u32 n_floats, f32 floats[n_floats]
// and nothing after the last op.
#include "xnnpack_program.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace tessera_xnnpack {
namespace {

constexpr uint32_t kMaxTensors = 1u << 20;
constexpr uint32_t kMaxOps = 1u << 20;
constexpr uint32_t kMaxOpInputs = 4;
constexpr uint32_t kMaxOpInts = 2 * kMaxRank + 2;
constexpr uint32_t kMaxOpFloats = 4;

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void i64(int64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  std::vector<uint8_t> bytes;

 private:
  void raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
};

class Reader {
 public:
  Reader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool i32(int32_t* v) { return raw(v, 4); }
  bool i64(int64_t* v) { return raw(v, 8); }
  bool f32(float* v) { return raw(v, 4); }
  size_t remaining() const { return size_ - at_; }
  size_t at() const { return at_; }

 private:
  bool raw(void* out, size_t n) {
    if (size_ - at_ < n) return false;
    std::memcpy(out, data_ + at_, n);
    at_ += n;
    return true;
  }
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

bool fail(std::string* error, const std::string& message) {
  *error = message;
  return false;
}

// The parameter counts each op code requires (ints may depend on rank: -1).
struct OpShape {
  int inputs_min, inputs_max, ints, floats;
};
OpShape op_shape(OpCode code) {
  switch (code) {
    case OpCode::kConvolution: return {3, 3, 13, 2};
    case OpCode::kDepthwiseConvolution: return {3, 3, 12, 2};
    case OpCode::kFullyConnected: return {2, 3, 0, 2};
    case OpCode::kMaxPooling: return {1, 1, 10, 2};
    case OpCode::kAveragePooling: return {1, 1, 8, 2};
    case OpCode::kGlobalAveragePooling: return {1, 1, 0, 2};
    case OpCode::kAdd: case OpCode::kMultiply: case OpCode::kSubtract: case OpCode::kDivide: return {2, 2, 0, 2};
    case OpCode::kMaximum: case OpCode::kMinimum: return {2, 2, 0, 0};
    case OpCode::kClamp: return {1, 1, 0, 2};
    case OpCode::kLeakyRelu: case OpCode::kElu: return {1, 1, 0, 1};
    case OpCode::kPRelu: return {2, 2, 0, 0};
    case OpCode::kStaticReshape: return {1, 1, -1, 0};
    case OpCode::kStaticConstantPad: return {1, 1, -1, 1};
    default: return {1, 1, 0, 0};
  }
}

// Output extent of a 2-D window op along one axis; false when it is not positive.
bool window_extent(size_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel, int64_t stride, int64_t dilation,
                   size_t* out) {
  const int64_t effective = (kernel - 1) * dilation + 1;
  const int64_t padded = static_cast<int64_t>(in) + pad_begin + pad_end;
  if (padded < effective) return false;
  *out = static_cast<size_t>((padded - effective) / stride + 1);
  return true;
}

}  // namespace

const char* op_code_name(OpCode code) {
  static const char* const names[] = {"?", "convolution_2d", "depthwise_convolution_2d", "fully_connected",
                                      "max_pooling_2d", "average_pooling_2d", "global_average_pooling_2d", "add2",
                                      "multiply2", "subtract", "divide", "maximum2", "minimum2", "clamp", "sigmoid",
                                      "hardswish", "leaky_relu", "elu", "prelu", "softmax", "abs", "negate", "ceiling",
                                      "floor", "square_root", "bankers_rounding", "static_reshape",
                                      "static_constant_pad"};
  const uint32_t i = static_cast<uint32_t>(code);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

uint64_t element_count(const Dims& dims) {
  uint64_t n = 1;
  for (size_t d : dims) {
    if (d != 0 && n > kMaxElements * 4 / d) return kMaxElements * 4;  // saturate: callers compare with kMaxElements
    n *= d;
  }
  return n;
}

std::string dims_text(const Dims& dims) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < dims.size(); ++i) s << (i ? "," : "") << dims[i];
  s << ']';
  return s.str();
}

bool layout_dims(const tsrp_value* value, Dims* out) {
  if (!value || value->rank < 0 || static_cast<size_t>(value->rank) > kMaxRank || (value->rank > 0 && !value->dims)) {
    return false;
  }
  Dims d;
  for (int32_t i = 0; i < value->rank; ++i) {
    if (value->dims[i] < 0) return false;
    d.push_back(static_cast<size_t>(value->dims[i]));
  }
  if (d.empty()) d.push_back(1);
  if (d.size() == 4) d = {d[0], d[2], d[3], d[1]};
  *out = d;
  return true;
}

std::vector<uint8_t> serialize_program(const Program& program) {
  Writer w;
  w.u32(kPayloadMagic);
  w.u32(kPayloadVersion);
  w.u32(static_cast<uint32_t>(program.tensors.size()));
  w.u32(static_cast<uint32_t>(program.ops.size()));
  for (const Tensor& t : program.tensors) {
    w.u32(static_cast<uint32_t>(t.kind));
    w.i32(t.ref);
    w.i32(t.scope);
    w.u32(static_cast<uint32_t>(t.transform));
    w.u32(t.count);
    w.f32(t.scale);
  }
  for (const Op& op : program.ops) {
    w.u32(static_cast<uint32_t>(op.code));
    w.i32(op.region_node);
    w.u32(static_cast<uint32_t>(op.inputs.size()));
    for (uint32_t v : op.inputs) w.u32(v);
    w.u32(static_cast<uint32_t>(op.outputs.size()));
    for (uint32_t v : op.outputs) w.u32(v);
    w.u32(static_cast<uint32_t>(op.ints.size()));
    for (int64_t v : op.ints) w.i64(v);
    w.u32(static_cast<uint32_t>(op.floats.size()));
    for (float v : op.floats) w.f32(v);
  }
  return w.bytes;
}

bool parse_program(const void* data, size_t size, Program* out, std::string* error) {
  if (!data && size) return fail(error, "no data");
  Reader r(data, size);
  uint32_t magic = 0, version = 0, tensor_count = 0, op_count = 0;
  if (!r.u32(&magic) || magic != kPayloadMagic) return fail(error, "bad magic (not an xnnpack payload)");
  if (!r.u32(&version) || version != kPayloadVersion) {
    return fail(error, "format version " + std::to_string(version) + ", this plug-in reads " +
                           std::to_string(kPayloadVersion));
  }
  if (!r.u32(&tensor_count) || !r.u32(&op_count)) return fail(error, "truncated header");
  if (tensor_count > kMaxTensors || op_count > kMaxOps) return fail(error, "too many tensors or ops");
  // Each record has a fixed minimum size: refuse counts the bytes cannot hold before reserving.
  if (tensor_count > r.remaining() / 24 || op_count > (r.remaining() - tensor_count * 24ull) / 24) {
    return fail(error, "truncated: counts exceed the payload size");
  }
  Program p;
  p.tensors.resize(tensor_count);
  for (uint32_t i = 0; i < tensor_count; ++i) {
    Tensor& t = p.tensors[i];
    uint32_t kind, transform;
    if (!r.u32(&kind) || !r.i32(&t.ref) || !r.i32(&t.scope) || !r.u32(&transform) || !r.u32(&t.count) ||
        !r.f32(&t.scale)) {
      return fail(error, "truncated at tensor " + std::to_string(i));
    }
    if (kind > static_cast<uint32_t>(TensorKind::kStatic)) return fail(error, "tensor " + std::to_string(i) + " has unknown kind");
    if (transform >= static_cast<uint32_t>(StaticTransform::kEnd)) {
      return fail(error, "tensor " + std::to_string(i) + " has unknown transform");
    }
    if (!std::isfinite(t.scale)) return fail(error, "tensor " + std::to_string(i) + " has a non-finite scale");
    t.kind = static_cast<TensorKind>(kind);
    t.transform = static_cast<StaticTransform>(transform);
  }
  p.ops.resize(op_count);
  for (uint32_t i = 0; i < op_count; ++i) {
    Op& op = p.ops[i];
    const std::string where = "op " + std::to_string(i);
    uint32_t code, n;
    if (!r.u32(&code) || !r.i32(&op.region_node)) return fail(error, "truncated at " + where);
    if (code == 0 || code >= static_cast<uint32_t>(OpCode::kEnd)) return fail(error, where + " has unknown code");
    op.code = static_cast<OpCode>(code);
    if (!r.u32(&n) || n > kMaxOpInputs) return fail(error, where + ": bad input count");
    op.inputs.resize(n);
    for (uint32_t& v : op.inputs) if (!r.u32(&v)) return fail(error, "truncated at " + where);
    if (!r.u32(&n) || n != 1) return fail(error, where + ": bad output count");
    op.outputs.resize(n);
    for (uint32_t& v : op.outputs) if (!r.u32(&v)) return fail(error, "truncated at " + where);
    if (!r.u32(&n) || n > kMaxOpInts) return fail(error, where + ": bad parameter count");
    op.ints.resize(n);
    for (int64_t& v : op.ints) if (!r.i64(&v)) return fail(error, "truncated at " + where);
    if (!r.u32(&n) || n > kMaxOpFloats) return fail(error, where + ": bad parameter count");
    op.floats.resize(n);
    for (float& v : op.floats) if (!r.f32(&v)) return fail(error, "truncated at " + where);
  }
  if (r.remaining() != 0) return fail(error, std::to_string(r.remaining()) + " trailing bytes");
  *out = std::move(p);
  return true;
}

bool static_dims(const Tensor& t, const tsrp_value* source, Dims* out, std::string* error) {
  if (t.transform == StaticTransform::kZeros) {
    if (t.count == 0 || t.count > kMaxElements) return fail(error, "zeros of a bad count");
    *out = {t.count};
    return true;
  }
  if (!source || !source->constant || source->dtype != TSRP_FLOAT32 || source->rank < 0 ||
      static_cast<size_t>(source->rank) > kMaxRank || (source->rank > 0 && !source->dims)) {
    return fail(error, "source is not a float32 constant");
  }
  Dims d;
  for (int32_t i = 0; i < source->rank; ++i) {
    if (source->dims[i] < 0) return fail(error, "source has unknown dims");
    d.push_back(static_cast<size_t>(source->dims[i]));
  }
  const uint64_t n = element_count(d);
  if (n > kMaxElements || source->constant_bytes != n * sizeof(float)) return fail(error, "source has the wrong size");
  switch (t.transform) {
    case StaticTransform::kCopy:
      if (d.size() == 4) return fail(error, "rank-4 source copied without a layout change");
      if (d.empty()) d = {1};
      break;
    case StaticTransform::kFlatten: d = {static_cast<size_t>(n)}; break;
    case StaticTransform::kTranspose2d:
      if (d.size() != 2) return fail(error, "transpose of a non-matrix");
      d = {d[1], d[0]};
      break;
    case StaticTransform::kFilterOhwi:
      if (d.size() != 4) return fail(error, "filter is not 4-D");
      d = {d[0], d[2], d[3], d[1]};
      break;
    case StaticTransform::kFilterDepthwise:
      if (d.size() != 4 || d[1] != 1) return fail(error, "depthwise filter is not [O,1,KH,KW]");
      d = {1, d[2], d[3], d[0]};
      break;
    case StaticTransform::kToNhwc: {
      if (d.size() > 4) return fail(error, "NHWC source of rank over 4");
      while (d.size() < 4) d.insert(d.begin(), 1);
      d = {d[0], d[2], d[3], d[1]};
      break;
    }
    case StaticTransform::kFill:
      if (n != 1 || t.count == 0 || t.count > kMaxElements) return fail(error, "fill needs a one-element source");
      d = {t.count};
      break;
    default: return fail(error, "bad transform");
  }
  *out = d;
  return true;
}

void fill_static(const Tensor& t, const tsrp_value* source, const Dims& dims, float* out) {
  const size_t n = static_cast<size_t>(element_count(dims));
  const float* src = source ? static_cast<const float*>(source->constant) : nullptr;
  auto sd = [&](int i) { return static_cast<size_t>(source->dims[i]); };
  switch (t.transform) {
    case StaticTransform::kZeros: std::memset(out, 0, n * sizeof(float)); break;
    case StaticTransform::kFill: for (size_t i = 0; i < n; ++i) out[i] = src[0]; break;
    case StaticTransform::kCopy: case StaticTransform::kFlatten: std::memcpy(out, src, n * sizeof(float)); break;
    case StaticTransform::kTranspose2d: {
      const size_t k = sd(0), m = sd(1);
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < m; ++j) out[j * k + i] = src[i * m + j];
      break;
    }
    case StaticTransform::kFilterOhwi: case StaticTransform::kToNhwc: case StaticTransform::kFilterDepthwise: {
      // All three read a [A, B, C, D] (NCHW-like) source. OHWI/NHWC write [A, C, D, B]; depthwise writes [C, D, A].
      size_t s[4] = {1, 1, 1, 1};
      const int rank = source->rank;
      for (int i = 0; i < rank; ++i) s[4 - rank + i] = sd(i);
      for (size_t a = 0; a < s[0]; ++a)
        for (size_t b = 0; b < s[1]; ++b)
          for (size_t c = 0; c < s[2]; ++c)
            for (size_t d = 0; d < s[3]; ++d) {
              const float v = src[((a * s[1] + b) * s[2] + c) * s[3] + d];
              if (t.transform == StaticTransform::kFilterDepthwise) out[(c * s[3] + d) * s[0] + a] = v;
              else out[((a * s[2] + c) * s[3] + d) * s[1] + b] = v;
            }
      break;
    }
    default: break;
  }
  if (t.scale != 1.0f) for (size_t i = 0; i < n; ++i) out[i] *= t.scale;
}

bool infer_op(const Op& op, const std::vector<const Dims*>& in, Dims* out, std::string* error) {
  const OpShape shape = op_shape(op.code);
  if (static_cast<int>(in.size()) < shape.inputs_min || static_cast<int>(in.size()) > shape.inputs_max) {
    return fail(error, "wrong input count");
  }
  if (shape.ints >= 0 && op.ints.size() != static_cast<size_t>(shape.ints)) return fail(error, "wrong parameter count");
  if (op.floats.size() != static_cast<size_t>(shape.floats)) return fail(error, "wrong parameter count");
  for (float f : op.floats) if (std::isnan(f)) return fail(error, "NaN parameter");
  // The limits of this snapshot's xnn_define_* (probed): min < max (min <= max for clamp), a finite
  // leaky slope, a positive normal elu alpha, pooling windows of more than one element.
  if (shape.floats == 2 && !(op.code == OpCode::kClamp ? op.floats[0] <= op.floats[1] : op.floats[0] < op.floats[1])) {
    return fail(error, "output_min not below output_max");
  }
  if (op.code == OpCode::kLeakyRelu && !std::isfinite(op.floats[0])) return fail(error, "non-finite slope");
  if (op.code == OpCode::kElu && (!std::isnormal(op.floats[0]) || op.floats[0] < 0)) return fail(error, "bad alpha");
  if ((op.code == OpCode::kMaxPooling || op.code == OpCode::kAveragePooling) && op.ints[4] == 1 && op.ints[5] == 1) {
    return fail(error, "1x1 pooling window");
  }
  const Dims& x = *in[0];
  const std::vector<int64_t>& p = op.ints;
  switch (op.code) {
    case OpCode::kConvolution: case OpCode::kDepthwiseConvolution: case OpCode::kMaxPooling:
    case OpCode::kAveragePooling: {
      if (x.size() != 4) return fail(error, "input is not 4-D");
      for (int i = 0; i < 4; ++i) if (p[i] < 0 || p[i] > (1 << 16)) return fail(error, "bad padding");
      for (int i = 4; i < 8; ++i) if (p[i] < 1 || p[i] > (1 << 16)) return fail(error, "bad kernel or stride");
      const bool dilated = op.code != OpCode::kAveragePooling;
      const int64_t dh = dilated ? p[8] : 1, dw = dilated ? p[9] : 1;
      if (dh < 1 || dw < 1 || dh > (1 << 16) || dw > (1 << 16)) return fail(error, "bad dilation");
      size_t oh, ow;
      if (!window_extent(x[1], p[0], p[2], p[4], p[6], dh, &oh) || !window_extent(x[2], p[3], p[1], p[5], p[7], dw, &ow)) {
        return fail(error, "window larger than the padded input");
      }
      size_t channels = x[3];
      if (op.code == OpCode::kConvolution) {
        const int64_t groups = p[10], gi = p[11], go = p[12];
        if (groups < 1 || gi < 1 || go < 1 || groups > (1 << 20) || gi > (1 << 20) || go > (1 << 20) ||
            static_cast<uint64_t>(groups * gi) != x[3]) {
          return fail(error, "groups × group input channels differs from the input's channels");
        }
        const Dims filter = {size_t(groups * go), size_t(p[4]), size_t(p[5]), size_t(gi)};
        if (*in[1] != filter) return fail(error, "filter is " + dims_text(*in[1]) + ", expected " + dims_text(filter));
        if (*in[2] != Dims{size_t(groups * go)}) return fail(error, "bias has the wrong shape");
        channels = size_t(groups * go);
      } else if (op.code == OpCode::kDepthwiseConvolution) {
        const int64_t m = p[10], c = p[11];
        if (m < 1 || m > (1 << 20) || c < 1 || static_cast<uint64_t>(c) != x[3]) return fail(error, "bad channels");
        const Dims filter = {1, size_t(p[4]), size_t(p[5]), size_t(c * m)};
        if (*in[1] != filter) return fail(error, "filter is " + dims_text(*in[1]) + ", expected " + dims_text(filter));
        if (*in[2] != Dims{size_t(c * m)}) return fail(error, "bias has the wrong shape");
        channels = size_t(c * m);
      }
      *out = {x[0], oh, ow, channels};
      return true;
    }
    case OpCode::kGlobalAveragePooling:
      if (x.size() != 4) return fail(error, "input is not 4-D");
      *out = {x[0], 1, 1, x[3]};
      return true;
    case OpCode::kFullyConnected: {
      const Dims& f = *in[1];
      if (x.empty() || f.size() != 2 || f[1] != x.back()) return fail(error, "filter does not match the input");
      if (in.size() == 3 && *in[2] != Dims{f[0]}) return fail(error, "bias has the wrong shape");
      *out = x;
      out->back() = f[0];
      return true;
    }
    case OpCode::kAdd: case OpCode::kMultiply: case OpCode::kSubtract: case OpCode::kDivide:
    case OpCode::kMaximum: case OpCode::kMinimum: {
      const Dims& a = *in[0];
      const Dims& b = *in[1];
      Dims o(std::max(a.size(), b.size()));
      for (size_t i = 0; i < o.size(); ++i) {
        const size_t da = i < o.size() - a.size() ? 1 : a[i - (o.size() - a.size())];
        const size_t db = i < o.size() - b.size() ? 1 : b[i - (o.size() - b.size())];
        if (da != db && da != 1 && db != 1) return fail(error, "shapes do not broadcast");
        o[i] = da == 1 ? db : da;
      }
      *out = o;
      return true;
    }
    case OpCode::kPRelu:
      if (x.empty() || *in[1] != Dims{x.back()}) return fail(error, "slope is not [channels]");
      *out = x;
      return true;
    case OpCode::kStaticReshape: {
      if (p.empty() || p.size() > kMaxRank) return fail(error, "bad reshape rank");
      Dims o;
      for (int64_t d : p) {
        if (d < 0 || static_cast<uint64_t>(d) > kMaxElements) return fail(error, "bad reshape dim");
        o.push_back(static_cast<size_t>(d));
      }
      if (element_count(o) != element_count(x)) return fail(error, "reshape changes the element count");
      *out = o;
      return true;
    }
    case OpCode::kStaticConstantPad: {
      if (p.size() != 2 * x.size()) return fail(error, "pads do not match the rank");
      Dims o = x;
      for (size_t i = 0; i < x.size(); ++i) {
        if (p[i] < 0 || p[x.size() + i] < 0 || p[i] > (1 << 20) || p[x.size() + i] > (1 << 20)) {
          return fail(error, "bad padding");
        }
        o[i] += static_cast<size_t>(p[i] + p[x.size() + i]);
      }
      *out = o;
      return true;
    }
    default:
      *out = x;  // element-wise unary and softmax keep the shape
      return true;
  }
}

bool resolve_program(const tsrp_graph* region, const Program& program, ResolvedProgram* out, std::string* error) {
  ResolvedProgram r;
  const size_t n = program.tensors.size();
  r.dims.resize(n);
  r.source.assign(n, nullptr);
  r.input_tensor.assign(region->input_count, kNoTensor);
  r.output_tensor.assign(region->output_count, kNoTensor);
  std::vector<char> ready(n, 0);
  auto value = [&](const tsrp_graph* g, int32_t index) -> const tsrp_value* {
    return index >= 0 && static_cast<size_t>(index) < g->value_count ? g->values[index] : nullptr;
  };
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = program.tensors[i];
    const std::string where = "tensor " + std::to_string(i);
    switch (t.kind) {
      case TensorKind::kInternal: break;
      case TensorKind::kRegionInput: case TensorKind::kRegionOutput: {
        const bool is_input = t.kind == TensorKind::kRegionInput;
        std::vector<uint32_t>& slot = is_input ? r.input_tensor : r.output_tensor;
        if (t.ref < 0 || static_cast<size_t>(t.ref) >= slot.size()) return fail(error, where + ": bad region input/output index");
        if (slot[t.ref] != kNoTensor) return fail(error, where + ": region input/output used twice");
        slot[t.ref] = static_cast<uint32_t>(i);
        const tsrp_value* v = value(region, is_input ? region->inputs[t.ref] : region->outputs[t.ref]);
        if (!v || v->dtype != TSRP_FLOAT32 || !layout_dims(v, &r.dims[i]) || element_count(r.dims[i]) > kMaxElements) {
          return fail(error, where + ": region value is not a float32 tensor of known shape");
        }
        ready[i] = is_input;
        break;
      }
      case TensorKind::kStatic: {
        const tsrp_graph* g = region;
        if (t.scope >= 0) {
          // A constant inside a composite's body.
          if (static_cast<size_t>(t.scope) >= region->node_count) return fail(error, where + ": bad scope");
          const tsrp_node* node = region->nodes[t.scope];
          g = nullptr;
          for (size_t a = 0; a < node->attribute_count; ++a) {
            const tsrp_attribute* attr = node->attributes[a];
            if (attr->kind == TSRP_ATTR_GRAPH && std::strcmp(attr->name, "body") == 0) g = attr->graph;
          }
          if (!g) return fail(error, where + ": scope node has no body");
        } else if (t.scope != -1) {
          return fail(error, where + ": bad scope");
        }
        const tsrp_value* v = t.transform == StaticTransform::kZeros ? nullptr : value(g, t.ref);
        if (t.transform != StaticTransform::kZeros && !v) return fail(error, where + ": bad source index");
        std::string why;
        if (!static_dims(t, v, &r.dims[i], &why)) return fail(error, where + ": " + why);
        r.source[i] = v;
        ready[i] = 1;
        break;
      }
    }
  }
  for (size_t k = 0; k < program.ops.size(); ++k) {
    const Op& op = program.ops[k];
    const std::string where = "op " + std::to_string(k) + " (" + op_code_name(op.code) + ")";
    if (op.region_node < 0 || static_cast<size_t>(op.region_node) >= region->node_count) {
      return fail(error, where + ": bad region node index");
    }
    std::vector<const Dims*> in;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const uint32_t id = op.inputs[j];
      if (id == kNoTensor && op.code == OpCode::kFullyConnected && j == 2) continue;  // FC without bias
      if (id >= n || !ready[id]) return fail(error, where + ": reads a tensor not yet written");
      in.push_back(&r.dims[id]);
    }
    const uint32_t o = op.outputs[0];
    if (o >= n || ready[o] || (program.tensors[o].kind != TensorKind::kInternal &&
                               program.tensors[o].kind != TensorKind::kRegionOutput)) {
      return fail(error, where + ": bad output tensor");
    }
    Dims dims;
    std::string why;
    if (!infer_op(op, in, &dims, &why)) return fail(error, where + ": " + why);
    if (element_count(dims) > kMaxElements) return fail(error, where + ": output too large");
    if (program.tensors[o].kind == TensorKind::kRegionOutput && dims != r.dims[o]) {
      return fail(error, where + ": writes " + dims_text(dims) + " to a region output of " + dims_text(r.dims[o]));
    }
    r.dims[o] = dims;
    ready[o] = 1;
  }
  for (size_t j = 0; j < r.output_tensor.size(); ++j) {
    if (r.output_tensor[j] == kNoTensor || !ready[r.output_tensor[j]]) {
      return fail(error, "region output " + std::to_string(j) + " is never written");
    }
  }
  *out = std::move(r);
  return true;
}

}  // namespace tessera_xnnpack
