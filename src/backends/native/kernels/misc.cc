// Native kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
// and the registration of the whole misc family (Resize/Upsample live in
// misc_resize.cc, Einsum in misc_einsum.cc).
//
// Both losses see the input as [N, C, D] (D = product of the trailing dims)
// and the target as [N, D]. An element whose target equals ignore_index
// contributes 0 to the loss and 0 to the weight sum; "mean" divides the
// weighted sum by the weight sum (the element count when there is no weight
// and no ignore_index, where every weight is 1).
#include <cmath>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"

namespace tessera::native {
namespace {

/// Writes the loss of log-probabilities `log_prob` ([N, C, D]) into ctx.output(0).
template <typename T>
void negative_log_likelihood(KernelContext& ctx, const T* log_prob, const Shape& input_shape) {
  const TensorView& target = ctx.input(1);
  const int64_t n = input_shape[0], classes = input_shape[1];
  const int64_t d = shape_numel(input_shape) / std::max<int64_t>(1, n * classes);
  if (target.numel() != n * d) ctx.fail("target has ", target.numel(), " elements, expected ", n * d);
  const T* weight = nullptr;
  if (ctx.has_input(2)) {
    const TensorView& w = ctx.input(2);
    if (w.numel() != classes) ctx.fail("weight has ", w.numel(), " elements, expected C = ", classes);
    weight = w.as<T>();
  }
  const bool has_ignore = ctx.attrs().has("ignore_index");
  const int64_t ignore_index = ctx.attrs().get_int_or("ignore_index", 0);
  const std::string reduction = ctx.attrs().get_string_or("reduction", "mean");
  T* out = ctx.output(0).as<T>();
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = view_int_at(target, i * d + j);
      T loss = 0;
      if (!(has_ignore && t == ignore_index)) {
        if (t < 0 || t >= classes) ctx.fail("target value ", t, " is out of range for ", classes, " classes");
        const T w = weight ? weight[t] : T(1);
        loss = -log_prob[(i * classes + t) * d + j] * w;
        weight_sum += static_cast<double>(w);
      }
      if (reduction == "none") out[i * d + j] = loss;
      loss_sum += static_cast<double>(loss);
    }
  }
  if (reduction == "sum") out[0] = static_cast<T>(loss_sum);
  if (reduction == "mean") out[0] = static_cast<T>(loss_sum / weight_sum);
}

}  // namespace

void negative_log_likelihood_loss_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, negative_log_likelihood_loss_kernel)) return;
  const TensorView& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2, got ", x.rank());
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    negative_log_likelihood<T>(ctx, x.as<T>(), x.shape);
  });
}

void softmax_cross_entropy_loss_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, softmax_cross_entropy_loss_kernel)) return;
  const TensorView& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2, got ", x.rank());
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = x.shape[0], classes = x.shape[1];
    const int64_t d = x.numel() / std::max<int64_t>(1, n * classes);
    std::vector<T> scratch;
    T* log_prob = nullptr;
    if (ctx.has_output(1)) {
      log_prob = ctx.output(1).as<T>();
    } else {
      scratch.resize(static_cast<size_t>(x.numel()));
      log_prob = scratch.data();
    }
    // Log-softmax over the class axis, stable through the per-column max.
    const T* in = x.as<T>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        const T* column = in + i * classes * d + j;
        T max = column[0];
        for (int64_t c = 1; c < classes; ++c) max = std::max(max, column[c * d]);
        T sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(column[c * d] - max);
        // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds to ulp(max).
        const T log_sum = std::log(sum);
        for (int64_t c = 0; c < classes; ++c) log_prob[(i * classes + c) * d + j] = (column[c * d] - max) - log_sum;
      }
    }
    negative_log_likelihood<T>(ctx, log_prob, x.shape);
  });
}

void register_misc_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Resize", .run = resize_kernel});
  registry.add({.op_type = "Upsample", .run = upsample_kernel});
  registry.add({.op_type = "Einsum", .run = einsum_kernel});
  registry.add({.op_type = "NegativeLogLikelihoodLoss", .run = negative_log_likelihood_loss_kernel});
  registry.add({.op_type = "SoftmaxCrossEntropyLoss", .run = softmax_cross_entropy_loss_kernel});
}

}  // namespace tessera::native
