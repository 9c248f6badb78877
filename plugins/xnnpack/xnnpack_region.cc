// Builds and runs one region's XNNPACK subgraph; see xnnpack_region.h.
#include "xnnpack_region.h"

#include <chrono>
#include <cstring>

namespace tessera_xnnpack {
namespace {

constexpr size_t kSlackFloats = (XNN_EXTRA_BYTES + sizeof(float) - 1) / sizeof(float);

bool fail(std::string* error, const std::string& message) {
  *error = message;
  return false;
}

// NCHW [n, c, h, w] → NHWC, and back.
void nchw_to_nhwc(const float* src, float* dst, const int64_t* d) {
  const size_t n = d[0], c = d[1], hw = d[2] * d[3];
  for (size_t b = 0; b < n; ++b)
    for (size_t ch = 0; ch < c; ++ch) {
      const float* s = src + (b * c + ch) * hw;
      float* o = dst + b * hw * c + ch;
      for (size_t p = 0; p < hw; ++p) o[p * c] = s[p];
    }
}
void nhwc_to_nchw(const float* src, float* dst, const int64_t* d) {
  const size_t n = d[0], c = d[1], hw = d[2] * d[3];
  for (size_t b = 0; b < n; ++b)
    for (size_t ch = 0; ch < c; ++ch) {
      const float* s = src + b * hw * c + ch;
      float* o = dst + (b * c + ch) * hw;
      for (size_t p = 0; p < hw; ++p) o[p] = s[p * c];
    }
}

xnn_status define_op(xnn_subgraph_t g, const Op& op, const std::vector<uint32_t>& id) {
  auto in = [&](size_t k) { return op.inputs[k] == kNoTensor ? XNN_INVALID_VALUE_ID : id[op.inputs[k]]; };
  const uint32_t out = id[op.outputs[0]];
  const std::vector<int64_t>& p = op.ints;
  auto u = [&](size_t k) { return static_cast<uint32_t>(p[k]); };
  const float* f = op.floats.data();
  switch (op.code) {
    case OpCode::kConvolution:
      return xnn_define_convolution_2d(g, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10), p[11],
                                       p[12], f[0], f[1], in(0), in(1), in(2), out, 0);
    case OpCode::kDepthwiseConvolution:
      return xnn_define_depthwise_convolution_2d(g, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10),
                                                 p[11], f[0], f[1], in(0), in(1), in(2), out, 0);
    case OpCode::kFullyConnected: return xnn_define_fully_connected(g, f[0], f[1], in(0), in(1), in(2), out, 0);
    case OpCode::kMaxPooling:
      return xnn_define_max_pooling_2d(g, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), f[0], f[1],
                                       in(0), out, 0);
    case OpCode::kAveragePooling:
      return xnn_define_average_pooling_2d(g, u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), f[0], f[1], in(0), out, 0);
    case OpCode::kGlobalAveragePooling: return xnn_define_global_average_pooling_2d(g, f[0], f[1], in(0), out, 0);
    case OpCode::kAdd: return xnn_define_add2(g, f[0], f[1], in(0), in(1), out, 0);
    case OpCode::kMultiply: return xnn_define_multiply2(g, f[0], f[1], in(0), in(1), out, 0);
    case OpCode::kSubtract: return xnn_define_subtract(g, f[0], f[1], in(0), in(1), out, 0);
    case OpCode::kDivide: return xnn_define_divide(g, f[0], f[1], in(0), in(1), out, 0);
    case OpCode::kMaximum: return xnn_define_maximum2(g, in(0), in(1), out, 0);
    case OpCode::kMinimum: return xnn_define_minimum2(g, in(0), in(1), out, 0);
    case OpCode::kClamp: return xnn_define_clamp(g, f[0], f[1], in(0), out, 0);
    case OpCode::kSigmoid: return xnn_define_sigmoid(g, in(0), out, 0);
    case OpCode::kHardSwish: return xnn_define_hardswish(g, in(0), out, 0);
    case OpCode::kLeakyRelu: return xnn_define_leaky_relu(g, f[0], in(0), out, 0);
    case OpCode::kElu: return xnn_define_elu(g, f[0], in(0), out, 0);
    case OpCode::kPRelu: return xnn_define_prelu(g, in(0), in(1), out, 0);
    case OpCode::kSoftmax: return xnn_define_softmax(g, in(0), out, 0);
    case OpCode::kAbs: return xnn_define_abs(g, in(0), out, 0);
    case OpCode::kNegate: return xnn_define_negate(g, in(0), out, 0);
    case OpCode::kCeiling: return xnn_define_ceiling(g, in(0), out, 0);
    case OpCode::kFloor: return xnn_define_floor(g, in(0), out, 0);
    case OpCode::kSquareRoot: return xnn_define_square_root(g, in(0), out, 0);
    case OpCode::kBankersRounding: return xnn_define_bankers_rounding(g, in(0), out, 0);
    case OpCode::kStaticReshape: {
      std::vector<size_t> shape(p.begin(), p.end());
      return xnn_define_static_reshape(g, shape.size(), shape.data(), in(0), out, 0);
    }
    case OpCode::kStaticConstantPad: {
      const size_t rank = p.size() / 2;
      std::vector<size_t> pre(p.begin(), p.begin() + rank), post(p.begin() + rank, p.end());
      return xnn_define_static_constant_pad(g, pre.data(), post.data(), f[0], in(0), out, 0);
    }
    default: return xnn_status_invalid_parameter;
  }
}

struct SubgraphDeleter {
  void operator()(xnn_subgraph* g) const { xnn_delete_subgraph(g); }
};

}  // namespace

Region::~Region() {
  if (runtime) xnn_delete_runtime(runtime);
}

bool build_region(const tsrp_graph* region, const Program& program, std::shared_ptr<pthreadpool> pool, Region* out,
                  std::string* error) {
  ResolvedProgram resolved;
  if (!resolve_program(region, program, &resolved, error)) return false;
  const size_t n = program.tensors.size();
  std::vector<char> used(n, 0);
  for (const Op& op : program.ops) {
    for (uint32_t t : op.inputs) if (t != kNoTensor) used[t] = 1;
    used[op.outputs[0]] = 1;
  }
  // External ids: used region inputs, then region outputs.
  std::vector<uint32_t> external(n, XNN_INVALID_VALUE_ID);
  uint32_t external_count = 0;
  out->inputs.resize(region->input_count);
  out->outputs.resize(region->output_count);
  auto stage = [&](ExternalBuffer& b, uint32_t tensor, const tsrp_value* v) {
    b.tensor = tensor;
    b.graph_dims.assign(v->dims, v->dims + v->rank);
    b.transposed = v->rank == 4;
    b.data.assign(static_cast<size_t>(element_count(resolved.dims[tensor])) + kSlackFloats, 0.0f);
    external[tensor] = external_count++;
  };
  for (size_t k = 0; k < region->input_count; ++k) {
    const uint32_t t = resolved.input_tensor[k];
    if (t != kNoTensor && used[t]) stage(out->inputs[k], t, region->values[region->inputs[k]]);
  }
  for (size_t k = 0; k < region->output_count; ++k) {
    stage(out->outputs[k], resolved.output_tensor[k], region->values[region->outputs[k]]);
  }
  xnn_subgraph_t raw = nullptr;
  if (xnn_create_subgraph(external_count, 0, &raw) != xnn_status_success) return fail(error, "xnn_create_subgraph failed");
  std::unique_ptr<xnn_subgraph, SubgraphDeleter> subgraph(raw);
  std::vector<uint32_t> id(n, XNN_INVALID_VALUE_ID);
  for (size_t i = 0; i < n; ++i) {
    if (!used[i]) continue;
    const Tensor& t = program.tensors[i];
    const void* data = nullptr;
    uint32_t flags = 0;
    if (t.kind == TensorKind::kStatic) {
      std::vector<float> values(static_cast<size_t>(element_count(resolved.dims[i])) + kSlackFloats, 0.0f);
      fill_static(t, resolved.source[i], resolved.dims[i], values.data());
      out->static_data.push_back(std::move(values));
      data = out->static_data.back().data();
    } else if (t.kind == TensorKind::kRegionInput) {
      flags = XNN_VALUE_FLAG_EXTERNAL_INPUT;
    } else if (t.kind == TensorKind::kRegionOutput) {
      flags = XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
    }
    const Dims& d = resolved.dims[i];
    if (xnn_define_tensor_value(subgraph.get(), xnn_datatype_fp32, d.size(), d.data(), data, external[i], flags,
                                &id[i]) != xnn_status_success) {
      return fail(error, "xnn_define_tensor_value failed for tensor " + std::to_string(i) + " " + dims_text(d));
    }
  }
  for (size_t k = 0; k < program.ops.size(); ++k) {
    const xnn_status status = define_op(subgraph.get(), program.ops[k], id);
    if (status != xnn_status_success) {
      return fail(error, "xnn_define_" + std::string(op_code_name(program.ops[k].code)) + " refused op " +
                             std::to_string(k) + " (status " + std::to_string(static_cast<int>(status)) + ")");
    }
  }
  // Workers yield after each run, so an idle XNNPACK pool does not spin against Tessera's own threads.
  const xnn_status status = xnn_create_runtime_v2(subgraph.get(), pool.get(), XNN_FLAG_YIELD_WORKERS, &out->runtime);
  if (status != xnn_status_success) {
    return fail(error, "xnn_create_runtime_v2 failed (status " + std::to_string(static_cast<int>(status)) + ")");
  }
  out->pool = std::move(pool);
  std::vector<xnn_external_value> values;
  for (const std::vector<ExternalBuffer>* list : {&out->inputs, &out->outputs}) {
    for (const ExternalBuffer& b : *list) {
      if (b.tensor != kNoTensor) values.push_back({external[b.tensor], const_cast<float*>(b.data.data())});
    }
  }
  if (xnn_setup_runtime(out->runtime, values.size(), values.data()) != xnn_status_success) {
    return fail(error, "xnn_setup_runtime failed");
  }
  out->node_count = region->node_count;
  return true;
}

namespace {

// The host's tensor must be what the region graph says: float32, kDLCPU, contiguous, these dims.
bool check_tensor(const DLTensor& t, const ExternalBuffer& b, const std::string& where, std::string* error) {
  if (t.device.device_type != kDLCPU) return fail(error, where + " is not in host memory (kDLCPU)");
  if (t.dtype.code != kDLFloat || t.dtype.bits != 32 || t.dtype.lanes != 1) return fail(error, where + " is not float32");
  if (t.ndim != static_cast<int32_t>(b.graph_dims.size()) || (t.ndim > 0 && !t.shape)) {
    return fail(error, where + " has rank " + std::to_string(t.ndim) + ", expected " + std::to_string(b.graph_dims.size()));
  }
  int64_t stride = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != b.graph_dims[i]) return fail(error, where + " has a different shape from the region graph's");
    if (t.strides && t.shape[i] != 1 && t.strides[i] != stride) return fail(error, where + " is not contiguous");
    stride *= t.shape[i];
  }
  if (!t.data && stride > 0) return fail(error, where + " has no data");
  return true;
}

}  // namespace

tsrp_status_code run_region(Region* region, const tsrp_run_args* args, std::string* error, tsrp_status** host_status) {
  if (!args || !TSRP_HAS_MEMBER(args, tsrp_run_args, host_context)) {
    *error = "run arguments missing or too small";
    return TSRP_INVALID_ARGUMENT;
  }
  if (args->input_count != region->inputs.size() || args->output_count != region->outputs.size() ||
      (args->input_count && !args->inputs) || (args->output_count && !args->outputs)) {
    *error = "run with " + std::to_string(args->input_count) + " inputs and " + std::to_string(args->output_count) +
             " outputs; the region has " + std::to_string(region->inputs.size()) + " and " +
             std::to_string(region->outputs.size());
    return TSRP_INVALID_ARGUMENT;
  }
  std::lock_guard<std::mutex> lock(region->mutex);
  const auto start = std::chrono::steady_clock::now();
  for (size_t k = 0; k < region->inputs.size(); ++k) {
    ExternalBuffer& b = region->inputs[k];
    if (b.tensor == kNoTensor) continue;
    const DLTensor& t = args->inputs[k];
    if (!check_tensor(t, b, "input " + std::to_string(k), error)) return TSRP_INVALID_ARGUMENT;
    const float* src = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
    const size_t count = b.data.size() - kSlackFloats;
    if (b.transposed) nchw_to_nhwc(src, b.data.data(), b.graph_dims.data());
    else if (count) std::memcpy(b.data.data(), src, count * sizeof(float));
  }
  if (xnn_invoke_runtime(region->runtime) != xnn_status_success) {
    *error = "xnn_invoke_runtime failed";
    return TSRP_INTERNAL;
  }
  for (size_t k = 0; k < region->outputs.size(); ++k) {
    ExternalBuffer& b = region->outputs[k];
    DLTensor& t = args->outputs[k];
    if (!t.data && args->allocate_output) {
      // Shapes are static, but the host may still leave the allocation to us.
      if (tsrp_status* s = args->allocate_output(args->host_context, k, b.graph_dims.data(),
                                                 static_cast<int32_t>(b.graph_dims.size()))) {
        *host_status = s;  // handed back to the host as run()'s own status
        return TSRP_INTERNAL;
      }
    }
    if (!check_tensor(t, b, "output " + std::to_string(k), error)) return TSRP_INVALID_ARGUMENT;
    float* dst = reinterpret_cast<float*>(static_cast<char*>(t.data) + t.byte_offset);
    const size_t count = b.data.size() - kSlackFloats;
    if (b.transposed) nhwc_to_nchw(b.data.data(), dst, b.graph_dims.data());
    else if (count) std::memcpy(dst, b.data.data(), count * sizeof(float));
  }
  if (TSRP_HAS_MEMBER(args, tsrp_run_args, node_finished) && args->node_finished && region->node_count) {
    // One subgraph runs as a whole: its time is shared evenly among the region's nodes.
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < region->node_count; ++i) args->node_finished(args->host_context, i, ms / region->node_count);
  }
  return TSRP_OK;
}

}  // namespace tessera_xnnpack
