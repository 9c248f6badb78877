// The swish loop (swish_span in dnnl_internal.h), included inside an anonymous
// namespace by dnnl_swish_avx2.cc and dnnl_swish_avx512.cc after defining the
// vector type and its operations (V, kLanes, load, store, ...). One source for
// both widths, so they compute alike.
//
// y = x / (1 + e^-x): e^-x as the native math's Cephes polynomial (-x clamped
// to [-87.34, 88.38], 2^n built in the exponent bits), 1 / (1 + e) as a
// reciprocal estimate and one Newton step (relative error below 2e-7 against
// double). Where e saturates (x <= -88.38) the reciprocal is taken as 0, so y
// is x * 0: -0 for finite x and NaN for -inf, as x * Sigmoid(x) gives. NaN
// stays NaN (it is x itself that is multiplied).
// (No include guard or pragma once: each file includes it exactly once.)

void swish_vectors(const float* x, float* y, int64_t n) {
  const V kLog2e = set1(1.44269504088896341f), kLn2Hi = set1(0.693359375f), kLn2Lo = set1(-2.12194440e-4f);
  const V kHi = set1(88.3762626647949f), kLo = set1(-87.3365447505531f), kOne = set1(1.0f), kTwo = set1(2.0f);
  const V kRound = set1(12582912.0f);  // 1.5 * 2^23: adding and removing it rounds to the nearest integer
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V v = load(x + i);
    const V t = min(max(sub(zero(), v), kLo), kHi);  // -x, clamped (NaN becomes kLo: v carries it)
    const V k = sub(add(mul(t, kLog2e), kRound), kRound);
    V r = fnmadd(k, kLn2Hi, t);
    r = fnmadd(k, kLn2Lo, r);
    V p = set1(1.9875691500e-4f);
    p = fmadd(p, r, set1(1.3981999507e-3f));
    p = fmadd(p, r, set1(8.3334519073e-3f));
    p = fmadd(p, r, set1(4.1665795894e-2f));
    p = fmadd(p, r, set1(1.6666665459e-1f));
    p = fmadd(p, r, set1(5.0000001201e-1f));
    p = fmadd(mul(p, r), r, add(r, kOne));
    const V e = mul(p, pow2(k));  // e^-x
    const V d = add(e, kOne);
    V rc = reciprocal_estimate(d);
    rc = mul(rc, fnmadd(d, rc, kTwo));
    rc = zero_where_not_less(t, kHi, rc);
    store(y + i, mul(v, rc));
  }
  for (; i < n; ++i) {
    const float t = -x[i];
    y[i] = t >= 88.3762626647949f ? x[i] * 0.0f : x[i] / (1.0f + std::exp(t));
  }
}
