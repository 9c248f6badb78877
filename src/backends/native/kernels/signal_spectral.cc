// Native kernels of the spectral ops: the window functions, DFT, STFT and
// MelWeightMatrix (all opset 17).
//
// The transforms run in double. Power-of-two lengths (the usual FFT sizes)
// take an iterative radix-2 FFT; other lengths take the plain O(n^2) sum over
// a table of the n roots of unity, which is also the reference the FFT is
// tested against (through the op, in tests/unit/signal_test.cc).
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"
#include "backends/native/kernels/signal_internal.h"
#include "backends/native/kernels/tensor_internal.h"

namespace tessera::native {
namespace {

using Complex = std::complex<double>;

/// Writes value i of a generated tensor in whatever dtype the output has.
void store_at(const TensorView& out, int64_t i, double value) {
  store_scalar(out.dtype, value, static_cast<uint8_t*>(out.data) + i * static_cast<int64_t>(dtype_size(out.dtype)));
}

/// Generalised cosine window sum_k (-1)^k a_k cos(2 pi k n / N), N = size
/// (periodic) or size - 1 (symmetric).
void cosine_window(KernelContext& ctx, std::initializer_list<double> coefficients) {
  const TensorView& out = ctx.output(0);
  const int64_t size = out.numel();
  const bool periodic = ctx.attrs().get_int_or("periodic", 1) != 0;
  const int64_t denominator = periodic ? size : size - 1;
  for (int64_t n = 0; n < size; ++n) {
    const double angle = denominator > 0 ? 2 * std::numbers::pi * static_cast<double>(n) / static_cast<double>(denominator) : 0;
    double value = 0, sign = 1;
    int k = 0;
    for (double a : coefficients) {
      value += sign * a * std::cos(angle * k);
      sign = -sign;
      ++k;
    }
    store_at(out, n, value);
  }
}

/// The n-point transform of `in` (n_valid points, zero beyond) into `bins`
/// outputs: out[k] = sum_j in[j] * exp(-+2 pi i j k / n), divided by n when inverse.
struct Transform {
  int64_t length = 0;
  bool inverse = false;
  std::vector<Complex> roots;  // exp(-+2 pi i m / length)

  Transform(int64_t n, bool inverse_transform) : length(n), inverse(inverse_transform), roots(static_cast<size_t>(n)) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t m = 0; m < n; ++m) {
      const double angle = sign * 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
      roots[static_cast<size_t>(m)] = {std::cos(angle), std::sin(angle)};
    }
  }

  bool power_of_two() const { return length > 0 && (length & (length - 1)) == 0; }

  /// `scratch` holds `length` points between calls (no allocation per line).
  void run(const Complex* in, int64_t n_valid, int64_t bins, Complex* out, std::vector<Complex>& scratch) const {
    if (power_of_two()) return run_fft(in, n_valid, bins, out, scratch);
    run_reference(in, n_valid, bins, out);
  }

  void run_fft(const Complex* in, int64_t n_valid, int64_t bins, Complex* out, std::vector<Complex>& a) const {
    a.assign(static_cast<size_t>(length), Complex(0));
    const int64_t used = std::min(n_valid, length);
    // Load in bit-reversed order, then combine halves of doubling size.
    int bits = 0;
    while ((int64_t{1} << bits) < length) ++bits;
    for (int64_t j = 0; j < used; ++j) {
      int64_t r = 0;
      for (int b = 0; b < bits; ++b) r |= ((j >> b) & 1) << (bits - 1 - b);
      a[static_cast<size_t>(r)] = in[j];
    }
    for (int64_t size = 2; size <= length; size *= 2) {
      const int64_t half = size / 2, stride = length / size;
      for (int64_t start = 0; start < length; start += size) {
        for (int64_t k = 0; k < half; ++k) {
          const Complex t = roots[static_cast<size_t>(k * stride)] * a[static_cast<size_t>(start + k + half)];
          const Complex u = a[static_cast<size_t>(start + k)];
          a[static_cast<size_t>(start + k)] = u + t;
          a[static_cast<size_t>(start + k + half)] = u - t;
        }
      }
    }
    for (int64_t k = 0; k < bins; ++k) out[k] = inverse ? a[static_cast<size_t>(k)] / static_cast<double>(length) : a[static_cast<size_t>(k)];
  }

  void run_reference(const Complex* in, int64_t n_valid, int64_t bins, Complex* out) const {
    const int64_t used = std::min(n_valid, length);
    for (int64_t k = 0; k < bins; ++k) {
      Complex sum = 0;
      int64_t index = 0;  // j * k mod length, advanced without a multiply
      for (int64_t j = 0; j < used; ++j) {
        sum += in[j] * roots[static_cast<size_t>(index)];
        index += k;
        if (index >= length) index %= length;
      }
      out[k] = inverse ? sum / static_cast<double>(length) : sum;
    }
  }
};

template <typename T>
void dft(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const int64_t rank = x.rank();
  const int64_t components = x.shape.back();
  if (rank < 3 || (components != 1 && components != 2)) {
    ctx.fail("input must be [batch, signal..., 1 or 2], got ", shape_to_string(x.shape));
  }
  int64_t axis = ctx.attrs().get_int_or("axis", 1);
  if (axis < 0) axis += rank - 1;
  const TensorView& y = ctx.output(0);
  const int64_t n_in = x.shape[static_cast<size_t>(axis)];
  const int64_t bins = y.shape[static_cast<size_t>(axis)];
  const int64_t length = ctx.has_input(1) ? view_int_at(ctx.input(1), 0) : n_in;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x.shape[static_cast<size_t>(d)];
  const Transform transform(length, ctx.attrs().get_int_or("inverse", 0) != 0);
  const T* in = x.as<T>();
  T* out = y.as<T>();
  ctx.pool().parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, bins * n_in)), [&](int64_t begin, int64_t end) {
    std::vector<Complex> signal(static_cast<size_t>(n_in)), spectrum(static_cast<size_t>(bins)), scratch;
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / inner, i = line % inner;
      for (int64_t j = 0; j < n_in; ++j) {
        const T* p = in + ((o * n_in + j) * inner + i) * components;
        signal[static_cast<size_t>(j)] = {static_cast<double>(p[0]), components == 2 ? static_cast<double>(p[1]) : 0.0};
      }
      transform.run(signal.data(), n_in, bins, spectrum.data(), scratch);
      for (int64_t k = 0; k < bins; ++k) {
        T* q = out + ((o * bins + k) * inner + i) * 2;
        q[0] = static_cast<T>(spectrum[static_cast<size_t>(k)].real());
        q[1] = static_cast<T>(spectrum[static_cast<size_t>(k)].imag());
      }
    }
  });
}

template <typename T>
void stft(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.rank() != 3 || (x.shape[2] != 1 && x.shape[2] != 2)) {
    ctx.fail("signal must be [batch, length, 1 or 2], got ", shape_to_string(x.shape));
  }
  const TensorView& y = ctx.output(0);
  const int64_t batch = x.shape[0], signal_length = x.shape[1], components = x.shape[2];
  const int64_t step = view_int_at(ctx.input(1), 0);
  const int64_t frames = y.shape[1], bins = y.shape[2];
  const int64_t frame_length = ctx.has_input(3) ? view_int_at(ctx.input(3), 0) : ctx.input(2).numel();
  std::vector<double> window(static_cast<size_t>(frame_length), 1.0);
  if (ctx.has_input(2)) {
    const TensorView& w = ctx.input(2);
    if (w.numel() != frame_length) ctx.fail("window has ", w.numel(), " values for frame_length ", frame_length);
    for (int64_t j = 0; j < frame_length; ++j) window[static_cast<size_t>(j)] = view_double_at(w, j);
  }
  const Transform transform(frame_length, false);
  const T* in = x.as<T>();
  T* out = y.as<T>();
  ctx.pool().parallel_for(batch * frames, 1, [&](int64_t begin, int64_t end) {
    std::vector<Complex> frame(static_cast<size_t>(frame_length)), spectrum(static_cast<size_t>(bins)), scratch;
    for (int64_t bf = begin; bf < end; ++bf) {
      const int64_t b = bf / frames, f = bf % frames;
      for (int64_t j = 0; j < frame_length; ++j) {
        const int64_t t = f * step + j;
        if (t >= signal_length) ctx.fail("frame ", f, " reads past the signal's ", signal_length, " samples");
        const T* p = in + (b * signal_length + t) * components;
        const double w = window[static_cast<size_t>(j)];
        frame[static_cast<size_t>(j)] = {w * static_cast<double>(p[0]), components == 2 ? w * static_cast<double>(p[1]) : 0.0};
      }
      transform.run(frame.data(), frame_length, bins, spectrum.data(), scratch);
      for (int64_t k = 0; k < bins; ++k) {
        out[(bf * bins + k) * 2] = static_cast<T>(spectrum[static_cast<size_t>(k)].real());
        out[(bf * bins + k) * 2 + 1] = static_cast<T>(spectrum[static_cast<size_t>(k)].imag());
      }
    }
  });
}

}  // namespace

void hann_window_kernel(KernelContext& ctx) { cosine_window(ctx, {0.5, 0.5}); }
void hamming_window_kernel(KernelContext& ctx) { cosine_window(ctx, {25.0 / 46.0, 21.0 / 46.0}); }
void blackman_window_kernel(KernelContext& ctx) { cosine_window(ctx, {0.42, 0.5, 0.08}); }

void dft_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, dft_kernel)) return;
  dispatch_float(ctx.input(0).dtype, [&](auto tag) { dft<decltype(tag)>(ctx); });
}

void stft_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, stft_kernel)) return;
  dispatch_float(ctx.input(0).dtype, [&](auto tag) { stft<decltype(tag)>(ctx); });
}

/// Triangular filters between num_mel_bins + 2 edges spaced evenly on the mel
/// scale (mel = 2595 log10(1 + hz / 700)) and snapped down to DFT bins, as the
/// ONNX specification's reference computes them.
void mel_weight_matrix_kernel(KernelContext& ctx) {
  const int64_t num_mel_bins = view_int_at(ctx.input(0), 0);
  const int64_t dft_length = view_int_at(ctx.input(1), 0);
  const double sample_rate = view_double_at(ctx.input(2), 0);
  const double lower_hz = view_double_at(ctx.input(3), 0), upper_hz = view_double_at(ctx.input(4), 0);
  if (!(sample_rate > 0)) ctx.fail("sample_rate ", sample_rate, " must be positive");
  const TensorView& out = ctx.output(0);
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = to_mel(lower_hz), high_mel = to_mel(upper_hz);
  const double mel_step = (high_mel - low_mel) / static_cast<double>(num_mel_bins + 2);
  std::vector<int64_t> edges(static_cast<size_t>(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
    edges[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / sample_rate));
  }
  std::vector<double> weights(static_cast<size_t>(spectrogram_bins * num_mel_bins), 0.0);
  auto set = [&](int64_t bin, int64_t mel, double value) {
    if (bin >= 0 && bin < spectrogram_bins) weights[static_cast<size_t>(bin * num_mel_bins + mel)] = value;
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t low = edges[static_cast<size_t>(i)], center = edges[static_cast<size_t>(i + 1)], high = edges[static_cast<size_t>(i + 2)];
    if (center == low) {
      set(center, i, 1);
    } else {
      for (int64_t j = low; j <= center; ++j) set(j, i, static_cast<double>(j - low) / static_cast<double>(center - low));
    }
    for (int64_t j = center; j < high; ++j) set(j, i, static_cast<double>(high - j) / static_cast<double>(high - center));
  }
  for (int64_t k = 0; k < out.numel(); ++k) store_at(out, k, weights[static_cast<size_t>(k)]);
}

}  // namespace tessera::native
