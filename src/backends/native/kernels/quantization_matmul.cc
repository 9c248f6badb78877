// The integer GEMM (int16 zero-point-adjusted operands, int32 accumulation)
// and the native MatMulInteger and QLinearMatMul kernels on it. Operands are
// widened once (x - zero_point fits int16), so the GEMM's inner loop is a
// plain widening multiply-add the compiler vectorises (the loop nest is in
// quantization_gemm_body.h, built per ISA and chosen here from CPU features);
// tasks are blocks of output rows.
#include <algorithm>

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/quantization_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {

namespace {

#include "backends/native/kernels/quantization_gemm_body.h"

using IntegerGemmFn = void (*)(int64_t, int64_t, int64_t, const int16_t*, const int16_t*, int32_t*, int64_t);

/// The one dispatch place: the widest ISA build of the GEMM this CPU runs.
IntegerGemmFn best_integer_gemm() {
  if (cpu_features().avx512) return integer_gemm_avx512;
  if (cpu_features().avx2_fma) return integer_gemm_avx2;
  return integer_gemm_body;
}

}  // namespace

void integer_gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc) {
  static const IntegerGemmFn gemm = best_integer_gemm();
  gemm(m, n, k, a, b, c, ldc);
}

void integer_gemm_portable(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc) {
  integer_gemm_body(m, n, k, a, b, c, ldc);
}

int32_t scalar_zero_point(const TensorView* zero_point) {
  return zero_point ? static_cast<int32_t>(view_int_at(*zero_point, 0)) : 0;
}

namespace {

template <typename T>
void subtract_zero_point_typed(const T* src, int64_t count, const std::vector<int16_t>& z, int64_t stride, int16_t* dst) {
  if (z.size() <= 1) {
    const int16_t zv = z.empty() ? 0 : z[0];
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<int16_t>(src[i] - zv);
    return;
  }
  // Runs of `stride` elements share one zero point.
  const auto zc = static_cast<int64_t>(z.size());
  for (int64_t i = 0, run = 0; i < count; i += stride, ++run) {
    const int16_t zv = z[static_cast<size_t>(run % zc)];
    const int64_t end = std::min(count, i + stride);
    for (int64_t e = i; e < end; ++e) dst[e] = static_cast<int16_t>(src[e] - zv);
  }
}

}  // namespace

void subtract_zero_point(const TensorView& src, const TensorView* zero_point, int64_t zero_point_stride, int16_t* dst) {
  std::vector<int16_t> z;
  if (zero_point) {
    for (int64_t i = 0; i < zero_point->numel(); ++i) z.push_back(static_cast<int16_t>(view_int_at(*zero_point, i)));
  }
  if (src.dtype == DType::kUInt8) return subtract_zero_point_typed(src.as<uint8_t>(), src.numel(), z, zero_point_stride, dst);
  if (src.dtype == DType::kInt8) return subtract_zero_point_typed(src.as<int8_t>(), src.numel(), z, zero_point_stride, dst);
  throw_unsupported("integer product of ", dtype_name(src.dtype), " (int8 and uint8 are supported)");
}

namespace {

/// numpy matmul of A [..., m, k] by B [..., k, n] as `batch` pairs of matrices.
struct MatmulLayout {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  std::vector<int64_t> a_offset, b_offset;  // element offset of each batch's matrices
};

MatmulLayout matmul_layout(const KernelContext& ctx, const Shape& a_shape, const Shape& b_shape) {
  if (a_shape.empty() || b_shape.empty()) ctx.fail("operands must have rank >= 1");
  Shape a = a_shape, b = b_shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatmulLayout l;
  l.m = a[a.size() - 2];
  l.k = a.back();
  l.n = b.back();
  if (b[b.size() - 2] != l.k) ctx.fail("inner dimensions differ: ", shape_to_string(a_shape), " x ", shape_to_string(b_shape));
  const Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b);
  const std::vector<int64_t> sa = broadcast_strides(batch_a, batch), sb = broadcast_strides(batch_b, batch);
  l.batch = shape_numel(batch);
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t t = 0; t < l.batch; ++t) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
    }
    l.a_offset.push_back(oa * l.m * l.k);
    l.b_offset.push_back(ob * l.k * l.n);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return l;
}

void check_param_count(const KernelContext& ctx, const TensorView* param, int64_t count, const char* what, const char* per) {
  if (param && param->numel() != 1 && param->numel() != count) {
    ctx.fail(what, " has ", param->numel(), " values, expected 1 or ", count, " (one per ", per, ")");
  }
}

/// Runs the batched GEMM of zero-point-adjusted operands; calls
/// finish(batch, row0, rows, acc) with each block of rows x n accumulators.
template <typename Finish>
void batched_integer_gemm(const MatmulLayout& l, const int16_t* a, const int16_t* b, ThreadPool& pool, Finish&& finish) {
  const int64_t blocks = (l.m + kIntegerGemmRows - 1) / kIntegerGemmRows;
  const int64_t block_work = std::max<int64_t>(1, kIntegerGemmRows * l.n * l.k);
  pool.parallel_for(l.batch * blocks, std::max<int64_t>(1, (1 << 16) / block_work), [&](int64_t begin, int64_t end) {
    std::vector<int32_t> acc(static_cast<size_t>(kIntegerGemmRows * l.n));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / blocks, row0 = (t % blocks) * kIntegerGemmRows;
      const int64_t rows = std::min(kIntegerGemmRows, l.m - row0);
      integer_gemm(rows, l.n, l.k, a + l.a_offset[bi] + row0 * l.k, b + l.b_offset[bi], acc.data(), l.n);
      finish(bi, row0, rows, acc.data());
    }
  });
}

void matmul_integer_kernel(KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView* a_zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const TensorView* b_zero_point = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const MatmulLayout l = matmul_layout(ctx, a.shape, b.shape);
  check_param_count(ctx, a_zero_point, l.m, "a_zero_point", "row of A");
  check_param_count(ctx, b_zero_point, l.n, "b_zero_point", "column of B");
  std::vector<int16_t> a16(static_cast<size_t>(a.numel())), b16(static_cast<size_t>(b.numel()));
  subtract_zero_point(a, a_zero_point, l.k, a16.data());
  subtract_zero_point(b, b_zero_point, 1, b16.data());
  int32_t* y = ctx.output(0).as<int32_t>();
  batched_integer_gemm(l, a16.data(), b16.data(), ctx.pool(), [&](int64_t bi, int64_t row0, int64_t rows, const int32_t* acc) {
    std::copy(acc, acc + rows * l.n, y + (bi * l.m + row0) * l.n);
  });
}

// QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
void qlinear_matmul_kernel(KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(3);
  const TensorView& a_scale = ctx.input(1);
  const TensorView& b_scale = ctx.input(4);
  const TensorView& y_scale = ctx.input(6);
  const TensorView* a_zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const TensorView* b_zero_point = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const TensorView* y_zero_point = ctx.has_input(7) ? &ctx.input(7) : nullptr;
  const MatmulLayout l = matmul_layout(ctx, a.shape, b.shape);
  check_param_count(ctx, a_zero_point, l.m, "a_zero_point", "row of A");
  check_param_count(ctx, &a_scale, l.m, "a_scale", "row of A");
  check_param_count(ctx, b_zero_point, l.n, "b_zero_point", "column of B");
  check_param_count(ctx, &b_scale, l.n, "b_scale", "column of B");
  if (y_scale.numel() != 1) ctx.fail("y_scale must be a single value, has ", y_scale.numel());
  std::vector<int16_t> a16(static_cast<size_t>(a.numel())), b16(static_cast<size_t>(b.numel()));
  subtract_zero_point(a, a_zero_point, l.k, a16.data());
  subtract_zero_point(b, b_zero_point, 1, b16.data());
  const float* as = a_scale.as<float>();
  const float* bs = b_scale.as<float>();
  const float ys = y_scale.as<float>()[0];
  const int32_t yz = scalar_zero_point(y_zero_point);
  TensorView& y = ctx.output(0);
  auto run = [&](auto q_tag) {
    using Q = decltype(q_tag);
    Q* out = y.as<Q>();
    batched_integer_gemm(l, a16.data(), b16.data(), ctx.pool(), [&](int64_t bi, int64_t row0, int64_t rows, const int32_t* acc) {
      for (int64_t r = 0; r < rows; ++r) {
        // float32 a_scale * b_scale / y_scale, as the reference computes it.
        const float row_scale = as[a_scale.numel() == 1 ? 0 : row0 + r];
        Q* yrow = out + (bi * l.m + row0 + r) * l.n;
        const int32_t* arow = acc + r * l.n;
        for (int64_t j = 0; j < l.n; ++j) {
          const float multiplier = row_scale * bs[b_scale.numel() == 1 ? 0 : j] / ys;
          yrow[j] = requantize<Q>(arow[j], multiplier, yz);
        }
      }
    });
  };
  if (y.dtype == DType::kUInt8) return run(uint8_t{});
  if (y.dtype == DType::kInt8) return run(int8_t{});
  throw_unsupported(ctx.node().describe(), ": output dtype ", dtype_name(y.dtype), " (int8 and uint8 are supported)");
}

}  // namespace

void register_quantization_matmul_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "MatMulInteger", .run = matmul_integer_kernel});
  registry.add({.op_type = "QLinearMatMul", .run = qlinear_matmul_kernel});
}

}  // namespace tessera::native
