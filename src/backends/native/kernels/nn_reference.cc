// Plain reference implementations the tests compare the fast paths with
// (and that float64 convolution runs on): a direct N-D convolution.
#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {

template <typename T>
void reference_conv(const TensorView& x, const TensorView& w, const T* bias, int64_t group, const std::vector<int64_t>& stride,
                    const std::vector<int64_t>& dilation, const std::vector<int64_t>& pad_begin, const TensorView& y) {
  const size_t r = x.shape.size() - 2;
  const int64_t batch = x.shape[0], in_channels = x.shape[1], out_channels = y.shape[1];
  const int64_t in_per_group = in_channels / group, out_per_group = out_channels / group;
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end()), out(y.shape.begin() + 2, y.shape.end()),
      kernel(w.shape.begin() + 2, w.shape.end());
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
  for (size_t d = 0; d < r; ++d) {
    in_size *= in[d];
    out_size *= out[d];
    kernel_size *= kernel[d];
  }
  const T* px = x.as<T>();
  const T* pw = w.as<T>();
  T* py = y.as<T>();
  std::vector<int64_t> o(r), kk(r);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < out_channels; ++oc) {
      const int64_t g = oc / out_per_group;
      for (int64_t op = 0; op < out_size; ++op) {
        for (int64_t t = op, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
          o[static_cast<size_t>(d)] = t % out[static_cast<size_t>(d)];
          t /= out[static_cast<size_t>(d)];
        }
        T sum = bias ? bias[oc] : T(0);
        for (int64_t ic = 0; ic < in_per_group; ++ic) {
          const T* xc = px + (n * in_channels + g * in_per_group + ic) * in_size;
          const T* wc = pw + (oc * in_per_group + ic) * kernel_size;
          for (int64_t kp = 0; kp < kernel_size; ++kp) {
            int64_t offset = 0;
            bool inside = true;
            for (int64_t t = kp, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
              const size_t du = static_cast<size_t>(d);
              const int64_t kd = t % kernel[du];
              t /= kernel[du];
              const int64_t pos = o[du] * stride[du] - pad_begin[du] + kd * dilation[du];
              if (pos < 0 || pos >= in[du]) inside = false;
              kk[du] = pos;
            }
            if (!inside) continue;
            for (size_t d = 0; d < r; ++d) offset = offset * in[d] + kk[d];
            sum += xc[offset] * wc[kp];
          }
        }
        py[(n * out_channels + oc) * out_size + op] = sum;
      }
    }
  }
}

template void reference_conv<float>(const TensorView&, const TensorView&, const float*, int64_t, const std::vector<int64_t>&,
                                    const std::vector<int64_t>&, const std::vector<int64_t>&, const TensorView&);
template void reference_conv<double>(const TensorView&, const TensorView&, const double*, int64_t, const std::vector<int64_t>&,
                                     const std::vector<int64_t>&, const std::vector<int64_t>&, const TensorView&);

}  // namespace tessera::native
