// What the Winograd F(4x4, 3x3) kernels for oneDNN regions share, whatever
// their vector width (dnnl_winograd_avx2.cc: 8 channels a vector,
// dnnl_winograd_avx512.cc: 16): the transforms and the run through chunks of
// tiles (plan and contract: dnnl_winograd.cc, dnnl_internal.h). Templates only,
// instantiated in each kernel file with that file's vector operations, so that
// no code compiled for one instruction set is shared with the other.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend::winograd_body {

/// Where a chunk's data lies in the scratch (floats).
struct Geometry {
  const WinogradPlan& plan;
  int64_t tiles_per_image;
  int64_t num_panels;
  int64_t point_in_stride;   // between transform points in V (the transformed inputs)
  int64_t point_out_stride;  // ... in M (the products)
  int64_t block_stride;      // between channel blocks of one point (chunk * block)
};

/// r = B^T x for F(4x4, 3x3)'s B^T (rows 4 0 -5 0 1 0 / 0 -4 -4 1 1 0 / 0 4 -4 -1 1 0 /
/// 0 -2 -1 2 1 0 / 0 2 -1 -2 1 0 / 0 4 0 -5 0 1). `Ops`: the vector type V and set1, add, sub,
/// fmadd (a b + c) and fnmadd (c - a b).
template <class Ops>
inline void input_transform(const typename Ops::V x[6], typename Ops::V r[6]) {
  const typename Ops::V two = Ops::set1(2), four = Ops::set1(4), five = Ops::set1(5);
  r[0] = Ops::fmadd(four, x[0], Ops::fnmadd(five, x[2], x[4]));
  r[1] = Ops::fnmadd(four, Ops::add(x[1], x[2]), Ops::add(x[3], x[4]));
  r[2] = Ops::fmadd(four, Ops::sub(x[1], x[2]), Ops::sub(x[4], x[3]));
  r[3] = Ops::fmadd(two, Ops::sub(x[3], x[1]), Ops::sub(x[4], x[2]));
  r[4] = Ops::fnmadd(two, Ops::sub(x[3], x[1]), Ops::sub(x[4], x[2]));
  r[5] = Ops::fmadd(four, x[1], Ops::fnmadd(five, x[3], x[5]));
}

/// r = A^T m for A^T's rows 1 1 1 1 1 0 / 0 1 -1 2 -2 0 / 0 1 1 4 4 0 / 0 1 -1 8 -8 1.
template <class Ops>
inline void output_transform(const typename Ops::V m[6], typename Ops::V r[4]) {
  const typename Ops::V sum12 = Ops::add(m[1], m[2]), diff12 = Ops::sub(m[1], m[2]);
  const typename Ops::V sum34 = Ops::add(m[3], m[4]), diff34 = Ops::sub(m[3], m[4]);
  r[0] = Ops::add(Ops::add(m[0], sum12), sum34);
  r[1] = Ops::fmadd(Ops::set1(2), diff34, diff12);
  r[2] = Ops::fmadd(Ops::set1(4), sum34, sum12);
  r[3] = Ops::add(Ops::fmadd(Ops::set1(8), diff34, diff12), m[5]);
}

/// The run on the calling thread's OpenMP team: the tiles in chunks, each transformed, multiplied and
/// transformed back by `Kernels` (constexpr pointers to the steps: input, product, output).
template <class Kernels>
void run_chunks(const WinogradPlan& plan, const float* src, const float* weights, const float* bias, float* dst,
                float* scratch) {
  const Geometry g{plan,
                   plan.tiles[0] * plan.tiles[1],
                   (plan.out_blocks + 1) / 2,
                   plan.in_blocks * plan.chunk * plan.block,
                   plan.out_blocks * plan.chunk * plan.block,
                   plan.chunk * plan.block};
  const int64_t tiles = plan.batch * g.tiles_per_image;
  float* v = scratch;
  float* m = scratch + 36 * g.point_in_stride;
#pragma omp parallel
  for (int64_t start = 0; start < tiles; start += plan.chunk) {
    const int64_t count = std::min(plan.chunk, tiles - start);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < count * plan.in_blocks; ++k) {
      Kernels::input(g, src, v, start + k / plan.in_blocks, k / plan.in_blocks, k % plan.in_blocks);
    }
#pragma omp for schedule(static)
    for (int64_t task = 0; task < 36 * g.num_panels; ++task) Kernels::product(g, v, weights, m, task, count);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < count * plan.out_blocks; ++k) {
      Kernels::output(g, m, bias, dst, start + k / plan.out_blocks, k / plan.out_blocks, k % plan.out_blocks);
    }
  }
}

}  // namespace tessera::dnnl_backend::winograd_body
