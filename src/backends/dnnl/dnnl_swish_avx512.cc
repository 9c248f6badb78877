// The swish loop compiled for AVX-512 (flags from the file name; see
// CMakeLists.txt). Chosen at run time from CPU features in dnnl_swish.cc.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

using V = __m512;
constexpr int64_t kLanes = 16;
inline V set1(float v) { return _mm512_set1_ps(v); }
inline V zero() { return _mm512_setzero_ps(); }
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
/// 2^k for integral k in [-126, 127], built in the exponent bits.
inline V pow2(V k) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23));
}
inline V reciprocal_estimate(V d) { return _mm512_rcp14_ps(d); }
/// rc where a < b, else 0.
inline V zero_where_not_less(V a, V b, V rc) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), rc); }

#include "backends/dnnl/dnnl_swish_body.h"

}  // namespace

void swish_span_avx512(const float* x, float* y, int64_t n) { swish_vectors(x, y, n); }

}  // namespace tessera::dnnl_backend
