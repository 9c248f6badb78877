// The integer GEMM (int16 zero-point-adjusted operands, int32 accumulation)
// and the native MatMulInteger and QLinearMatMul kernels on it. Operands are
// widened once (x - zero_point fits int16) and B is packed (pack_integer_b)
// for the pmaddwd microkernel (quantization_gemm_body.h, built per ISA and
// chosen here from CPU features); tasks are tiles of C.
#include <algorithm>
#include <cstring>
#include <memory>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/quantization_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {

namespace {

#include "backends/native/kernels/quantization_gemm_body.h"

/// The one dispatch point: the widest ISA build of the microkernel this CPU runs.
IntegerGemmTilesFn best_integer_gemm_tiles() {
  if (cpu_features().avx512) return integer_gemm_tiles_avx512;
  if (cpu_features().avx2_fma) return integer_gemm_tiles_avx2;
  return integer_gemm_tiles;
}

}  // namespace

IntegerGemmTilesFn integer_gemm_tiles_for_cpu() {
  static const IntegerGemmTilesFn tiles = best_integer_gemm_tiles();
  return tiles;
}

void integer_gemm_tiles_portable(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                                 int32_t* c, int64_t ldc) {
  integer_gemm_tiles(m, n, k, a, lda, packed_b, c, ldc);
}

int64_t packed_integer_b_size(int64_t k, int64_t n) {
  return ((n + kIntegerGemmPanel - 1) / kIntegerGemmPanel) * integer_panel_stride(k);
}

void pack_integer_b(int64_t k, int64_t n, const int16_t* b, int64_t ldb, int16_t* packed) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t j0 = 0; j0 < n; j0 += kIntegerGemmPanel) {
    const int64_t cols = std::min(kIntegerGemmPanel, n - j0);
    for (int64_t q = 0; q < pairs; ++q, packed += 2 * kIntegerGemmPanel) {
      const int16_t* row0 = b + 2 * q * ldb + j0;
      const int16_t* row1 = 2 * q + 1 < k ? row0 + ldb : nullptr;
#if defined(__SSE2__)
      if (cols == kIntegerGemmPanel) {
        // Two rows of 16 interleaved: each column's pair side by side.
        auto* o = reinterpret_cast<__m128i*>(packed);
        for (int h = 0; h < 2; ++h) {
          const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row0 + 8 * h));
          const __m128i r1 = row1 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row1 + 8 * h)) : _mm_setzero_si128();
          _mm_storeu_si128(o + 2 * h, _mm_unpacklo_epi16(r0, r1));
          _mm_storeu_si128(o + 2 * h + 1, _mm_unpackhi_epi16(r0, r1));
        }
        continue;
      }
#endif
      for (int64_t j = 0; j < cols; ++j) {
        packed[2 * j] = row0[j];
        packed[2 * j + 1] = row1 ? row1[j] : int16_t{0};
      }
      std::fill(packed + 2 * cols, packed + 2 * kIntegerGemmPanel, int16_t{0});
    }
  }
}

void integer_gemm_packed(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b, int32_t* c,
                         int64_t ldc, const ThreadPool& pool) {
  // Tasks are 40 x 64 tiles of C (whole microkernel tiles on every ISA: 4, 5 or 8 rows, 16 or 32 columns).
  constexpr int64_t kTaskRows = 40, kTaskColumns = 64;
  const IntegerGemmTilesFn tiles = integer_gemm_tiles_for_cpu();
  const int64_t row_tasks = (m + kTaskRows - 1) / kTaskRows, column_tasks = (n + kTaskColumns - 1) / kTaskColumns;
  const int64_t panel_stride = integer_panel_stride(k);
  const int64_t grain = std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, kTaskRows * kTaskColumns * k));
  pool.parallel_for(row_tasks * column_tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t / column_tasks) * kTaskRows, j0 = (t % column_tasks) * kTaskColumns;
      tiles(std::min(kTaskRows, m - i0), std::min(kTaskColumns, n - j0), k, a + i0 * lda, lda,
            packed_b + (j0 / kIntegerGemmPanel) * panel_stride, c + i0 * ldc + j0, ldc);
    }
  });
}

void integer_gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc) {
  int16_t* packed = scratch<int16_t>(ScratchSlot::kTaskPacked, packed_integer_b_size(k, n));
  pack_integer_b(k, n, b, n, packed);
  integer_gemm_tiles_for_cpu()(m, n, k, a, k, packed, c, ldc);
}

void* scratch_bytes(ScratchSlot slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[static_cast<size_t>(ScratchSlot::kCount)];
  Buffer& buffer = buffers[static_cast<size_t>(slot)];
  if (bytes > buffer.size) {
    buffer.data.reset(new char[bytes]);
    buffer.size = bytes;
  }
  return buffer.data.get();
}

std::optional<ConstantIntegerWeight> constant_integer_weight(const Node& node, const std::vector<const Tensor*>& constants,
                                                             size_t w_index, size_t zero_point_index) {
  const Tensor* w = constants.size() > w_index ? constants[w_index] : nullptr;
  if (!w || (w->dtype() != DType::kInt8 && w->dtype() != DType::kUInt8)) return std::nullopt;
  const Tensor* zero_point = constants.size() > zero_point_index ? constants[zero_point_index] : nullptr;
  if (node.has_input(zero_point_index) && !zero_point) return std::nullopt;  // a zero point known only at run time
  ConstantIntegerWeight constant{w, std::nullopt};
  if (zero_point) constant.zero_point = zero_point->view();
  return constant;
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

/// A constant B, packed at compile time: for the u8 x s8 GEMM where this CPU
/// has it (`quad`), else zero point subtracted and packed for the int16 GEMM.
struct PackedIntegerB {
  int64_t k = 0, n = 0;
  std::vector<int16_t> data;
  std::optional<QuadPackedB> quad;
};

/// Adjusts and packs B [k x n] (one matrix, or each of a batch with the same
/// layout) into `packed` (packed_integer_b_size elements); the zero point is
/// per tensor or per column; `widened` holds k x n elements.
void pack_integer_operand(const TensorView& b, const TensorView* zero_point, int64_t k, int64_t n, int64_t offset,
                          int16_t* widened, int16_t* packed) {
  TensorView matrix = b;
  matrix.shape = {k, n};
  matrix.data = static_cast<char*>(b.data) + offset * dtype_size(b.dtype);
  subtract_zero_point(matrix, zero_point, 1, widened);
  pack_integer_b(k, n, widened, n, packed);
}

/// MatMulInteger / QLinearMatMul with a constant 2-D B (input kB) and a
/// constant or absent zero point (input kZeroPoint): B packed once (PrepareFn).
template <size_t kB, size_t kZeroPoint>
std::shared_ptr<void> prepare_integer_b(const Node& node, const std::vector<const Tensor*>& constants,
                                        const std::vector<TensorType>& /*input_types*/) {
  const std::optional<ConstantIntegerWeight> b = constant_integer_weight(node, constants, kB, kZeroPoint);
  if (!b || b->weight->shape().size() != 2) return nullptr;
  const int64_t k = b->weight->shape()[0], n = b->weight->shape()[1];
  if (b->zero_point && b->zero_point->numel() != 1 && b->zero_point->numel() != n) return nullptr;  // the kernel reports it
  auto state = std::make_shared<PackedIntegerB>();
  state->k = k;
  state->n = n;
  if (quad_gemm_available()) {
    state->quad.emplace();
    pack_quad_b(b->weight->view(), b->zero_point_or_null(), k, n, 0, *state->quad);
    return state;
  }
  std::vector<int16_t> widened(static_cast<size_t>(k * n));
  state->data.resize(static_cast<size_t>(packed_integer_b_size(k, n)));
  pack_integer_operand(b->weight->view(), b->zero_point_or_null(), k, n, 0, widened.data(), state->data.data());
  return state;
}

/// The batched u8 x s8 GEMM (AVX512_VNNI): B packed from compile time, or
/// each distinct B matrix packed once.
void batched_quad_gemm(const KernelContext& ctx, const MatmulLayout& l, const TensorView& a, const TensorView* a_zero_point,
                       const TensorView& b, const TensorView* b_zero_point, const PackedIntegerB* prepared, int32_t* c) {
  uint8_t* shifted = a.dtype == DType::kInt8 ? scratch<uint8_t>(ScratchSlot::kA, l.m * l.k) : nullptr;
  QuadPackedB packed;
  int64_t packed_offset = -1;
  QuadA quad;
  for (int64_t bi = 0; bi < l.batch; ++bi) {
    if (!prepared && l.b_offset[bi] != packed_offset) {
      pack_quad_b(b, b_zero_point, l.k, l.n, l.b_offset[bi], packed);
      packed_offset = l.b_offset[bi];
    }
    quad_a(a, l.m, l.k, l.a_offset[bi], a_zero_point, shifted, quad);
    quad_gemm_packed(l.m, quad, prepared ? *prepared->quad : packed, c + bi * l.m * l.n, l.n, ctx.pool());
  }
}

/// The batched GEMM of A and B (each less its zero point) into c (batch x m x
/// n int32): on the u8 x s8 GEMM where this CPU has it, else on the int16 GEMM,
/// A widened and B packed from compile time or each distinct B matrix adjusted
/// and packed once.
void batched_integer_gemm(const KernelContext& ctx, const MatmulLayout& l, const TensorView& a,
                          const TensorView* a_zero_point, const TensorView& b, const TensorView* b_zero_point, int32_t* c) {
  if (!integer_gemm_depth_ok(l.k)) ctx.fail("inner dimension ", l.k, " is too large for exact int32 accumulation");
  const PackedIntegerB* prepared = ctx.state<PackedIntegerB>();
  if (prepared && (prepared->k != l.k || prepared->n != l.n || b.rank() != 2)) prepared = nullptr;
  if (quad_gemm_available()) {
    return batched_quad_gemm(ctx, l, a, a_zero_point, b, b_zero_point, prepared && prepared->quad ? prepared : nullptr, c);
  }
  if (prepared && prepared->quad) prepared = nullptr;
  int16_t* a16 = scratch<int16_t>(ScratchSlot::kA, a.numel());
  subtract_zero_point(a, a_zero_point, l.k, a16);
  int16_t* widened = prepared ? nullptr : scratch<int16_t>(ScratchSlot::kB, l.k * l.n);
  int16_t* packed = prepared ? nullptr : scratch<int16_t>(ScratchSlot::kPacked, packed_integer_b_size(l.k, l.n));
  int64_t packed_offset = -1;
  for (int64_t bi = 0; bi < l.batch; ++bi) {
    if (!prepared && l.b_offset[bi] != packed_offset) {
      pack_integer_operand(b, b_zero_point, l.k, l.n, l.b_offset[bi], widened, packed);
      packed_offset = l.b_offset[bi];
    }
    const int16_t* pb = prepared ? prepared->data.data() : packed;
    integer_gemm_packed(l.m, l.n, l.k, a16 + l.a_offset[bi], l.k, pb, c + bi * l.m * l.n, l.n, ctx.pool());
  }
}

void matmul_integer_kernel(KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView* a_zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const TensorView* b_zero_point = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const MatmulLayout l = matmul_layout(ctx, a.shape, b.shape);
  check_param_count(ctx, a_zero_point, l.m, "a_zero_point", "row of A");
  check_param_count(ctx, b_zero_point, l.n, "b_zero_point", "column of B");
  batched_integer_gemm(ctx, l, a, a_zero_point, b, b_zero_point, ctx.output(0).as<int32_t>());
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
  const float* as = a_scale.as<float>();
  const float* bs = b_scale.as<float>();
  const float ys = y_scale.as<float>()[0];
  const int32_t yz = scalar_zero_point(y_zero_point);
  TensorView& y = ctx.output(0);
  int32_t* acc = scratch<int32_t>(ScratchSlot::kAccumulators, l.batch * l.m * l.n);
  batched_integer_gemm(ctx, l, a, a_zero_point, b, b_zero_point, acc);
  auto run = [&](auto q_tag) {
    using Q = decltype(q_tag);
    Q* out = y.as<Q>();
    ctx.pool().parallel_for(l.batch * l.m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, l.n)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        // float32 a_scale * b_scale / y_scale, as the reference computes it.
        const float row_scale = as[a_scale.numel() == 1 ? 0 : row % l.m];
        Q* yrow = out + row * l.n;
        const int32_t* arow = acc + row * l.n;
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
  registry.add({.op_type = "MatMulInteger", .run = matmul_integer_kernel, .prepare = prepare_integer_b<1, 3>});
  registry.add({.op_type = "QLinearMatMul", .run = qlinear_matmul_kernel, .prepare = prepare_integer_b<3, 5>});
}

}  // namespace tessera::native
