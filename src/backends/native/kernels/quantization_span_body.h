// The quantize span and the float range (QuantizeSpans in quantization_internal.h), included inside
// an anonymous namespace by each ISA's file, which compiles it with its own
// flags (quantization.cc: baseline; quantization_span_avx2.cc,
// quantization_span_avx512.cc). The arithmetic is quantize_value's, always
// inlined, so every build computes the same bytes.
// (No include guard or pragma once: each file includes it exactly once.)

template <typename Q>
void quantize_span(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = quantize_value<Q>(x[i] / scale, zero_point);
}

void quantize_span_uint8(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y) {
  quantize_span(x, n, scale, zero_point, y);
}

void quantize_span_int8(const float* x, int64_t n, float scale, int32_t zero_point, int8_t* y) {
  quantize_span(x, n, scale, zero_point, y);
}

/// min(0, x...) and max(0, x...) over 64 lanes the compiler keeps in vector
/// registers (one running pair ran one element at a time); `v < lo ? v : lo`
/// is minps's own rule, so a NaN is skipped as std::min(lo, v) skips it.
void float_range(const float* x, int64_t n, float* lo_out, float* hi_out) {
  constexpr int kLanes = 64;
  float lanes_lo[kLanes] = {}, lanes_hi[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      lanes_lo[j] = v < lanes_lo[j] ? v : lanes_lo[j];
      lanes_hi[j] = v > lanes_hi[j] ? v : lanes_hi[j];
    }
  }
  float lo = 0.0f, hi = 0.0f;
  for (int j = 0; j < kLanes; ++j) {
    lo = lanes_lo[j] < lo ? lanes_lo[j] : lo;
    hi = lanes_hi[j] > hi ? lanes_hi[j] : hi;
  }
  for (; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  *lo_out = lo;
  *hi_out = hi;
}
