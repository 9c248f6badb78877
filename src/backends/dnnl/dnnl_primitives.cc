// Primitive descriptors for every step kind, from the step's parameters and
// one layout per role (inputs in order, then the output). Lowering calls this
// with format_tag::any where oneDNN should choose; loading calls it with the
// concrete layouts stored in the payload.
#include <omp.h>

#include "backends/dnnl/dnnl_internal.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

memory::dims slice(const std::vector<int64_t>& ints, size_t begin, size_t count, const Step& step) {
  if (begin + count > ints.size()) throw_user_error("oneDNN payload: step has too few parameters");
  return memory::dims(ints.begin() + static_cast<std::ptrdiff_t>(begin),
                      ints.begin() + static_cast<std::ptrdiff_t>(begin + count));
}

size_t spatial_rank(const memory::desc& src) {
  const int rank = src.data.ndims;
  if (rank < 3 || rank > 5) throw_user_error("oneDNN payload: convolution or pooling of rank ", rank);
  return static_cast<size_t>(rank - 2);
}

void expect_roles(const Step& step, const std::vector<memory::desc>& descs, size_t min_inputs, size_t max_inputs) {
  const size_t inputs = step.inputs.size();
  if (inputs < min_inputs || inputs > max_inputs || descs.size() != inputs + 1) {
    throw_user_error("oneDNN payload: step of kind ", static_cast<int>(step.kind), " has ", inputs, " inputs");
  }
}

}  // namespace

dnnl::primitive_attr make_attributes(const Step& step, const std::vector<memory::desc>& slot_descs) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops post_ops;
  for (const PostOp& p : step.post_ops) {
    switch (p.kind) {
      case PostOpKind::kEltwise:
        post_ops.append_eltwise(1.0f, static_cast<algorithm>(p.algorithm), p.alpha, p.beta);
        break;
      case PostOpKind::kSum:
        if (p.algorithm < 0 || p.algorithm > static_cast<int32_t>(memory::data_type::u8) ||
            p.beta != static_cast<float>(static_cast<int32_t>(p.beta))) {
          throw_user_error("oneDNN payload: bad sum post-op");
        }
        if (p.beta != 0.0f || p.algorithm != 0) {
          post_ops.append_sum(p.alpha, static_cast<int32_t>(p.beta), static_cast<memory::data_type>(p.algorithm));
        } else {
          post_ops.append_sum(p.alpha);
        }
        break;
      case PostOpKind::kBinary:
        if (p.slot < 0 || static_cast<size_t>(p.slot) >= slot_descs.size()) {
          throw_user_error("oneDNN payload: binary post-op names slot ", p.slot);
        }
        post_ops.append_binary(static_cast<algorithm>(p.algorithm), slot_descs[static_cast<size_t>(p.slot)]);
        break;
    }
  }
  attr.set_post_ops(post_ops);
  if (!step.output_scales.empty()) {
    if (step.scale_mask < 0 || step.scale_mask > 0xff) throw_user_error("oneDNN payload: output-scale mask ", step.scale_mask);
    attr.set_output_scales(step.scale_mask, step.output_scales);
  }
  if (step.src_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {step.src_zero_point});
  if (step.dst_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {step.dst_zero_point});
  if (step.weights_zero_point != 0) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {step.weights_zero_point});
  return attr;
}

std::vector<int> role_args(const Step& step) {
  switch (step.kind) {
    case StepKind::kReorder:
    case StepKind::kEltwise:
    case StepKind::kPooling:
    case StepKind::kSoftmax:
    case StepKind::kLogSoftmax:
      return {DNNL_ARG_SRC, DNNL_ARG_DST};
    case StepKind::kConvolution:
    case StepKind::kDeconvolution:
    case StepKind::kMatMul:
    case StepKind::kInnerProduct:
      if (step.inputs.size() == 3) return {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
      return {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    case StepKind::kBinary:
      return {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    case StepKind::kBatchNorm:
      return {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST};
    case StepKind::kLayerNorm:
      if (step.inputs.size() == 3) return {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST};
      return {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_DST};
    case StepKind::kConcat: {
      std::vector<int> args;
      for (size_t i = 0; i < step.inputs.size(); ++i) args.push_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i));
      args.push_back(DNNL_ARG_DST);
      return args;
    }
  }
  throw_user_error("oneDNN payload: unknown step kind");
}

bool is_brdgmm(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("brdgmm") != std::string::npos;
}

dnnl::primitive_desc_base make_primitive_desc(const Step& step, const std::vector<memory::desc>& d,
                                         const std::vector<memory::desc>& slot_descs, const dnnl::engine& engine,
                                         bool avoid_brdgmm) {
  const dnnl::primitive_attr attr = make_attributes(step, slot_descs);
  switch (step.kind) {
    case StepKind::kReorder:
      expect_roles(step, d, 1, 1);
      return dnnl::reorder::primitive_desc(engine, d[0], engine, d[1], attr);
    case StepKind::kConvolution:
    case StepKind::kDeconvolution: {
      expect_roles(step, d, 2, 3);
      const size_t n = spatial_rank(d[0]);
      const memory::dims strides = slice(step.ints, 0, n, step);
      const memory::dims dilations = slice(step.ints, n, n, step);
      const memory::dims pad_l = slice(step.ints, 2 * n, n, step);
      const memory::dims pad_r = slice(step.ints, 3 * n, n, step);
      const bool bias = step.inputs.size() == 3;
      const memory::desc& dst = d.back();
      if (step.kind == StepKind::kConvolution) {
        // Direct unless tuning measured Winograd faster (dnnl_tuning.cc).
        const algorithm alg = step.algorithm == static_cast<int32_t>(algorithm::convolution_winograd)
                                  ? algorithm::convolution_winograd
                                  : algorithm::convolution_direct;
        auto desc = bias ? dnnl::convolution_forward::desc(prop_kind::forward_inference, alg, d[0], d[1], d[2], dst,
                                                           strides, dilations, pad_l, pad_r)
                         : dnnl::convolution_forward::desc(prop_kind::forward_inference, alg, d[0], d[1], dst, strides,
                                                           dilations, pad_l, pad_r);
        // oneDNN 2.6's Winograd convolutions (AVX-512: jit_wino_4x3, jit_fp32_wino_2x3) on more than one
        // thread: GoogLeNet at 2 threads on Zen 5 lost the ReLU post-op of inception5b's two 3x3
        // convolutions on its 7x7 maps (output cosine 0.81-0.95 to the float64 reference; right on one
        // thread, and each block compiled alone was right), and one compile in 7-15 crashed or hung in a
        // later primitive creation, the heap corrupted while Winograd's time was measured (never in 60
        // compiles without it). With F(4x4, 3x3) in place of F(2x2, 3x3) on those maps it was as wrong.
        // So on more than one thread a convolution is direct: measurement finds no Winograd (dnnl::error),
        // and a plan made on one thread that names it is loaded on more as direct (DnnlRegion).
        if (alg == algorithm::convolution_winograd && omp_get_max_threads() > 1) {
          throw dnnl::error(dnnl_unimplemented,
                            "oneDNN's Winograd convolutions are not used on more than one thread (oneDNN 2.6 "
                            "gave wrong outputs and corrupted memory there)");
        }
        dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
        while (avoid_brdgmm && is_brdgmm(pd)) {
          if (!pd.next_impl()) break;
        }
        if (step.algorithm == kDirectJit && std::string(pd.impl_info_str()).rfind("brg", 0) == 0) {
          // The first implementation that is neither brgemm-based nor the reference kernel, else the one
          // oneDNN put first.
          dnnl::convolution_forward::primitive_desc other = pd;
          while (other.next_impl()) {
            const std::string impl = other.impl_info_str();
            if (impl.rfind("ref", 0) == 0) break;
            if (impl.rfind("brg", 0) != 0) return other;
          }
        }
        return pd;
      }
      auto desc = bias ? dnnl::deconvolution_forward::desc(prop_kind::forward_inference, algorithm::deconvolution_direct,
                                                           d[0], d[1], d[2], dst, strides, dilations, pad_l, pad_r)
                       : dnnl::deconvolution_forward::desc(prop_kind::forward_inference, algorithm::deconvolution_direct,
                                                           d[0], d[1], dst, strides, dilations, pad_l, pad_r);
      return dnnl::deconvolution_forward::primitive_desc(desc, attr, engine);
    }
    case StepKind::kMatMul: {
      expect_roles(step, d, 2, 3);
      auto desc = step.inputs.size() == 3 ? dnnl::matmul::desc(d[0], d[1], d[2], d[3]) : dnnl::matmul::desc(d[0], d[1], d[2]);
      return dnnl::matmul::primitive_desc(desc, attr, engine);
    }
    case StepKind::kEltwise: {
      expect_roles(step, d, 1, 1);
      const float alpha = step.floats.size() > 0 ? step.floats[0] : 0.0f;
      const float beta = step.floats.size() > 1 ? step.floats[1] : 0.0f;
      dnnl::eltwise_forward::desc desc(prop_kind::forward_inference, static_cast<algorithm>(step.algorithm), d[0], alpha, beta);
      return dnnl::eltwise_forward::primitive_desc(desc, attr, engine);
    }
    case StepKind::kBinary: {
      expect_roles(step, d, 2, 2);
      dnnl::binary::desc desc(static_cast<algorithm>(step.algorithm), d[0], d[1], d[2]);
      return dnnl::binary::primitive_desc(desc, attr, engine);
    }
    case StepKind::kPooling: {
      expect_roles(step, d, 1, 1);
      const size_t n = spatial_rank(d[0]);
      dnnl::pooling_v2_forward::desc desc(prop_kind::forward_inference, static_cast<algorithm>(step.algorithm), d[0], d[1],
                                          slice(step.ints, 0, n, step), slice(step.ints, n, n, step),
                                          slice(step.ints, 2 * n, n, step), slice(step.ints, 3 * n, n, step),
                                          slice(step.ints, 4 * n, n, step));
      return dnnl::pooling_v2_forward::primitive_desc(desc, attr, engine);
    }
    case StepKind::kBatchNorm: {
      expect_roles(step, d, 5, 5);
      if (step.floats.empty()) throw_user_error("oneDNN payload: batch normalisation without epsilon");
      auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                   dnnl::normalization_flags::use_shift;
      // Its one post-op may be a Relu, built as the fuse_norm_relu flag (max(x, 0) after the affine map).
      if (!step.post_ops.empty()) {
        const PostOp& p = step.post_ops[0];
        if (step.post_ops.size() != 1 || p.kind != PostOpKind::kEltwise ||
            p.algorithm != static_cast<int32_t>(algorithm::eltwise_relu) || p.alpha != 0.0f) {
          throw_user_error("oneDNN payload: a batch normalisation fuses nothing but a Relu");
        }
        flags = flags | dnnl::normalization_flags::fuse_norm_relu;
      }
      Step without_post_ops = step;
      without_post_ops.post_ops.clear();
      dnnl::batch_normalization_forward::desc desc(prop_kind::forward_inference, d[0], step.floats[0], flags);
      return dnnl::batch_normalization_forward::primitive_desc(desc, make_attributes(without_post_ops, slot_descs), engine);
    }
    case StepKind::kLayerNorm: {
      expect_roles(step, d, 2, 3);
      if (step.floats.empty()) throw_user_error("oneDNN payload: layer normalisation without epsilon");
      auto flags = dnnl::normalization_flags::use_scale;
      if (step.inputs.size() == 3) flags = flags | dnnl::normalization_flags::use_shift;
      dnnl::layer_normalization_forward::desc desc(prop_kind::forward_inference, d[0], step.floats[0], flags);
      return dnnl::layer_normalization_forward::primitive_desc(desc, attr, engine);
    }
    case StepKind::kSoftmax:
    case StepKind::kLogSoftmax: {
      expect_roles(step, d, 1, 1);
      if (step.ints.empty()) throw_user_error("oneDNN payload: softmax without an axis");
      const int axis = static_cast<int>(step.ints[0]);
      if (axis < 0 || axis >= d[0].data.ndims) throw_user_error("oneDNN payload: softmax axis out of range");
      if (step.kind == StepKind::kSoftmax) {
        dnnl::softmax_forward::desc desc(prop_kind::forward_inference, d[0], axis);
        return dnnl::softmax_forward::primitive_desc(desc, attr, engine);
      }
      dnnl::logsoftmax_forward::desc desc(prop_kind::forward_inference, d[0], axis);
      return dnnl::logsoftmax_forward::primitive_desc(desc, attr, engine);
    }
    case StepKind::kConcat: {
      if (step.inputs.empty() || d.size() != step.inputs.size() + 1 || step.ints.empty()) {
        throw_user_error("oneDNN payload: bad concat step");
      }
      // oneDNN 2.6 reads the dims at the axis before checking it: a hostile axis or rank is refused here.
      const int rank = d.back().data.ndims;
      if (step.ints[0] < 0 || step.ints[0] >= rank) throw_user_error("oneDNN payload: concat axis out of range");
      std::vector<memory::desc> sources(d.begin(), d.end() - 1);
      for (const memory::desc& source : sources) {
        if (source.data.ndims != rank) throw_user_error("oneDNN payload: concat sources of another rank");
      }
      return dnnl::concat::primitive_desc(d.back(), static_cast<int>(step.ints[0]), sources, engine, attr);
    }
    case StepKind::kInnerProduct:
      break;
  }
  throw_user_error("oneDNN payload: step kind ", static_cast<int>(step.kind), " is not supported");
}

std::optional<int64_t> step_multiply_adds(const Step& step, const std::vector<memory::desc>& roles) {
  const int64_t out = element_count(roles.back());
  switch (step.kind) {
    case StepKind::kConvolution:
    case StepKind::kDeconvolution: {
      // Each output element: the weights of one output channel ([O, I/g, k...] or grouped [g, O/g, I/g, k...]).
      const memory::dims w = roles[1].dims();
      const bool grouped = w.size() == roles.back().dims().size() + 1;
      const int64_t channels = grouped ? w[0] * w[1] : w[0];
      if (channels <= 0) return std::nullopt;
      return out * (element_count(roles[1]) / channels);
    }
    case StepKind::kMatMul:
      return out * roles[0].dims().back();
    case StepKind::kInnerProduct: {
      const memory::dims w = roles[1].dims();
      if (w[0] <= 0) return std::nullopt;
      return out * (element_count(roles[1]) / w[0]);
    }
    default:
      return std::nullopt;
  }
}

memory::desc role_desc(const Step& step, const dnnl::primitive_desc_base& pd, size_t index) {
  const std::vector<int> args = role_args(step);
  if (index >= args.size()) throw_internal_error("oneDNN: role ", index, " out of range");
  return pd.query_md(dnnl::query::exec_arg_md, args[index]);
}

}  // namespace tessera::dnnl_backend
