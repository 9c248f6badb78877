// Plain reference implementations of the quantization ops: straight loops
// over the ONNX spec's formulas, one output element at a time, with int64
// accumulation. The unit tests compare the kernels against these.
#include <algorithm>
#include <cmath>

#include "backends/native/kernels/quantization_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

/// Index into a per-tensor (one value) or per-axis parameter for element i of `shape`.
int64_t param_index(const Shape& shape, const Tensor& param, int64_t axis, int64_t i) {
  if (param.numel() == 1) return 0;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(shape.size()));
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(a) + 1; d < shape.size(); ++d) inner *= shape[d];
  return (i / inner) % shape[static_cast<size_t>(a)];
}

/// saturate(round_half_to_even(v)) into [lo, hi], written out; NaN to lo (the spec leaves it
/// undefined; the kernels' rule, and no float-to-integer conversion of NaN).
int64_t round_and_saturate(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return lo;
  double r = std::floor(v);
  const double fraction = v - r;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return static_cast<int64_t>(std::clamp(r, static_cast<double>(lo), static_cast<double>(hi)));
}

void store_quantized(Tensor& y, int64_t i, int64_t v) {
  if (y.dtype() == DType::kUInt8) {
    y.as<uint8_t>()[i] = static_cast<uint8_t>(v);
  } else {
    y.as<int8_t>()[i] = static_cast<int8_t>(v);
  }
}

int64_t quantized_min(DType dtype) { return dtype == DType::kUInt8 ? 0 : -128; }
int64_t quantized_max(DType dtype) { return dtype == DType::kUInt8 ? 255 : 127; }

double zero_point_at(const Tensor* zero_point, int64_t i) { return zero_point ? zero_point->double_at(i) : 0.0; }

}  // namespace

Tensor reference_quantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, int64_t axis) {
  const DType q = zero_point ? zero_point->dtype() : DType::kUInt8;
  Tensor y(q, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = param_index(x.shape(), scale, axis, i);
    // float32 input divides in float32; int32 input in float64 (numpy's promotion).
    const double quotient = x.dtype() == DType::kFloat32 ? static_cast<double>(x.as<float>()[i] / scale.as<float>()[c])
                                                         : x.double_at(i) / static_cast<double>(scale.as<float>()[c]);
    const double shifted = static_cast<double>(round_and_saturate(quotient, -(1LL << 40), 1LL << 40)) + zero_point_at(zero_point, c);
    store_quantized(y, i, round_and_saturate(shifted, quantized_min(q), quantized_max(q)));
  }
  return y;
}

Tensor reference_dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, int64_t axis) {
  Tensor y(DType::kFloat32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = param_index(x.shape(), scale, axis, i);
    y.as<float>()[i] = static_cast<float>(x.int_at(i) - static_cast<int64_t>(zero_point_at(zero_point, c))) * scale.as<float>()[c];
  }
  return y;
}

std::vector<Tensor> reference_dynamic_quantize_linear(const Tensor& x) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, x.as<float>()[i]);
    hi = std::max(hi, x.as<float>()[i]);
  }
  Tensor scale(DType::kFloat32, {}), zero_point(DType::kUInt8, {});
  scale.as<float>()[0] = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float initial = 0.0f - lo / scale.as<float>()[0];
  zero_point.as<uint8_t>()[0] = static_cast<uint8_t>(round_and_saturate(std::clamp(initial, 0.0f, 255.0f), 0, 255));
  return {reference_quantize_linear(x, scale, &zero_point, 1), scale, zero_point};
}

Tensor reference_matmul_integer(const Tensor& a, const Tensor& b, const Tensor* a_zero_point, const Tensor* b_zero_point) {
  Shape sa = a.shape(), sb = b.shape();
  const bool a_vector = sa.size() == 1, b_vector = sb.size() == 1;
  if (a_vector) sa.insert(sa.begin(), 1);
  if (b_vector) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b);
  Shape out = batch;
  if (!a_vector) out.push_back(m);
  if (!b_vector) out.push_back(n);
  Tensor y(DType::kInt32, out);
  const int64_t batches = shape_numel(batch);
  for (int64_t t = 0; t < batches; ++t) {
    // Batch index t in `batch`, mapped into each operand's (broadcast) batch dims.
    int64_t rest = t, a_batch = 0, b_batch = 0, a_scale = 1, b_scale = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      const size_t da = d + batch_a.size() - batch.size(), db = d + batch_b.size() - batch.size();
      if (d + batch_a.size() >= batch.size()) {
        a_batch += (batch_a[da] == 1 ? 0 : idx) * a_scale;
        a_scale *= batch_a[da];
      }
      if (d + batch_b.size() >= batch.size()) {
        b_batch += (batch_b[db] == 1 ? 0 : idx) * b_scale;
        b_scale *= batch_b[db];
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t av = a.int_at((a_batch * m + i) * k + p) - static_cast<int64_t>(zero_point_at(a_zero_point, a_zero_point && a_zero_point->numel() > 1 ? i : 0));
          const int64_t bv = b.int_at((b_batch * k + p) * n + j) - static_cast<int64_t>(zero_point_at(b_zero_point, b_zero_point && b_zero_point->numel() > 1 ? j : 0));
          sum += av * bv;
        }
        y.as<int32_t>()[(t * m + i) * n + j] = static_cast<int32_t>(sum);
      }
    }
  }
  return y;
}

Tensor reference_qlinear_matmul(const Tensor& a, const Tensor& a_scale, const Tensor& a_zero_point, const Tensor& b,
                                const Tensor& b_scale, const Tensor& b_zero_point, const Tensor& y_scale,
                                const Tensor& y_zero_point) {
  const Tensor acc = reference_matmul_integer(a, b, &a_zero_point, &b_zero_point);
  const int64_t n = b.shape().size() == 1 ? 1 : b.shape().back();
  const int64_t m = a.shape().size() == 1 ? 1 : a.shape()[a.shape().size() - 2];
  Tensor y(y_zero_point.dtype(), acc.shape());
  for (int64_t e = 0; e < acc.numel(); ++e) {
    const int64_t i = (e / n) % m, j = e % n;
    const float multiplier = a_scale.as<float>()[a_scale.numel() == 1 ? 0 : i] * b_scale.as<float>()[b_scale.numel() == 1 ? 0 : j] /
                             y_scale.as<float>()[0];
    const double scaled = static_cast<double>(acc.as<int32_t>()[e]) * static_cast<double>(multiplier);
    const double rounded = static_cast<double>(round_and_saturate(scaled, -(1LL << 40), 1LL << 40));
    store_quantized(y, e, round_and_saturate(rounded + y_zero_point.double_at(0), quantized_min(y.dtype()), quantized_max(y.dtype())));
  }
  return y;
}

Tensor reference_conv_integer(const Tensor& x, const Tensor& w, const Tensor* x_zero_point, const Tensor* w_zero_point,
                              const ReferenceConvGeometry& geometry) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const size_t r = xs.size() - 2;
  Shape out = {xs[0], ws[0]};
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = (ws[d + 2] - 1) * geometry.dilation[d] + 1;
    out.push_back((xs[d + 2] + geometry.pad_begin[d] + geometry.pad_end[d] - extent) / geometry.stride[d] + 1);
  }
  Tensor y(DType::kInt32, out);
  const int64_t in_per_group = ws[1], out_per_group = ws[0] / geometry.group;
  const Shape out_spatial(out.begin() + 2, out.end()), kernel(ws.begin() + 2, ws.end());
  const int64_t out_size = shape_numel(out_spatial), kernel_size = shape_numel(kernel);
  const int64_t xz = static_cast<int64_t>(zero_point_at(x_zero_point, 0));
  for (int64_t n = 0; n < xs[0]; ++n) {
    for (int64_t oc = 0; oc < ws[0]; ++oc) {
      const int64_t wz = static_cast<int64_t>(zero_point_at(w_zero_point, w_zero_point && w_zero_point->numel() > 1 ? oc : 0));
      const int64_t g = oc / out_per_group;
      for (int64_t o = 0; o < out_size; ++o) {
        int64_t sum = 0;
        for (int64_t ic = 0; ic < in_per_group; ++ic) {
          const int64_t c = g * in_per_group + ic;
          for (int64_t kk = 0; kk < kernel_size; ++kk) {
            // Decode output position o and kernel position kk into per-dim indices.
            int64_t x_offset = 0, o_rest = o, k_rest = kk;
            bool inside = true;
            std::vector<int64_t> pos(r);
            for (size_t d = r; d-- > 0;) {
              const int64_t od = o_rest % out_spatial[d], kd = k_rest % kernel[d];
              o_rest /= out_spatial[d];
              k_rest /= kernel[d];
              pos[d] = od * geometry.stride[d] - geometry.pad_begin[d] + kd * geometry.dilation[d];
              if (pos[d] < 0 || pos[d] >= xs[d + 2]) inside = false;
            }
            if (!inside) continue;  // padding holds the zero point: contributes 0
            for (size_t d = 0; d < r; ++d) x_offset = x_offset * xs[d + 2] + pos[d];
            const int64_t xv = x.int_at((n * xs[1] + c) * shape_numel(Shape(xs.begin() + 2, xs.end())) + x_offset) - xz;
            const int64_t wv = w.int_at((oc * in_per_group + ic) * kernel_size + kk) - wz;
            sum += xv * wv;
          }
        }
        y.as<int32_t>()[(n * ws[0] + oc) * out_size + o] = static_cast<int32_t>(sum);
      }
    }
  }
  return y;
}

Tensor reference_qlinear_conv(const Tensor& x, const Tensor& x_scale, const Tensor& x_zero_point, const Tensor& w,
                              const Tensor& w_scale, const Tensor& w_zero_point, const Tensor& y_scale,
                              const Tensor& y_zero_point, const Tensor* bias, const ReferenceConvGeometry& geometry) {
  const Tensor acc = reference_conv_integer(x, w, &x_zero_point, &w_zero_point, geometry);
  Tensor y(y_zero_point.dtype(), acc.shape());
  const int64_t channels = acc.shape()[1];
  const int64_t plane = acc.numel() / std::max<int64_t>(1, acc.shape()[0] * channels);
  for (int64_t e = 0; e < acc.numel(); ++e) {
    const int64_t oc = (e / plane) % channels;
    const float multiplier = x_scale.as<float>()[0] * w_scale.as<float>()[w_scale.numel() == 1 ? 0 : oc] / y_scale.as<float>()[0];
    const int64_t with_bias = acc.as<int32_t>()[e] + (bias ? bias->as<int32_t>()[oc] : 0);
    const double scaled = static_cast<double>(with_bias) * static_cast<double>(multiplier);
    const double rounded = static_cast<double>(round_and_saturate(scaled, -(1LL << 40), 1LL << 40));
    store_quantized(y, e, round_and_saturate(rounded + y_zero_point.double_at(0), quantized_min(y.dtype()), quantized_max(y.dtype())));
  }
  return y;
}

}  // namespace tessera::native
