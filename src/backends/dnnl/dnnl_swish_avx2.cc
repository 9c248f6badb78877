// The swish loop compiled for AVX2 + FMA (flags from the file name; see
// CMakeLists.txt). Chosen at run time from CPU features in dnnl_swish.cc.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

using V = __m256;
constexpr int64_t kLanes = 8;
inline V set1(float v) { return _mm256_set1_ps(v); }
inline V zero() { return _mm256_setzero_ps(); }
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
/// 2^k for integral k in [-126, 127], built in the exponent bits.
inline V pow2(V k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
}
inline V reciprocal_estimate(V d) { return _mm256_rcp_ps(d); }
/// rc where a < b, else 0.
inline V zero_where_not_less(V a, V b, V rc) { return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), rc); }

#include "backends/dnnl/dnnl_swish_body.h"

}  // namespace

void swish_span_avx2(const float* x, float* y, int64_t n) { swish_vectors(x, y, n); }

}  // namespace tessera::dnnl_backend
