// Native Gemm and MatMul. float32 runs on the packed GEMM (constant B packed
// once in prepare); other dtypes take the plain reference loops. A MatMul
// lowered from native's MatMulInt8Weights composite (float32 A, int8 B and
// B's scales in tessera_int8_scales) runs on the int8 panels of
// nn_int8_weights.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/nn_int8_weights.h"
#include "backends/native/kernels/nn_internal.h"
#include "ir/small_vector.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

/// Packed constant B of a MatMul or Gemm node.
struct PackedWeights {
  PackedMatrix b;
  std::optional<Int8Weights> int8;  // MatMul with tessera_int8_scales: B's int8 panels instead
};

template <typename Fn>
decltype(auto) dispatch_matrix(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    default: throw_unsupported("dtype ", dtype_name(dtype), " is not supported by Gemm/MatMul here");
  }
}

// ------------------------------------------------------------------ Gemm --

std::shared_ptr<void> prepare_gemm(const Node& node, const std::vector<const Tensor*>& constants,
                                   const std::vector<TensorType>& types) {
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  if (!b || b->dtype() != DType::kFloat32 || b->shape().size() != 2) return nullptr;
  const bool trans_b = node.attrs.get_int_or("transB", 0) != 0;
  const int64_t rows = b->shape()[0], cols = b->shape()[1];
  const int64_t k = trans_b ? cols : rows, n = trans_b ? rows : cols;
  MatrixRef ref{b->as<float>(), trans_b ? 1 : cols, trans_b ? cols : 1};
  auto state = std::make_shared<PackedWeights>();
  state->b = pack_gemm_b(best_gemm_microkernel(), ref, k, n);
  return state;
}

void gemm_kernel(KernelContext& ctx) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& y = ctx.output(0);
  const bool trans_a = ctx.attrs().get_int_or("transA", 0) != 0;
  const bool trans_b = ctx.attrs().get_int_or("transB", 0) != 0;
  const float alpha = ctx.attrs().get_float_or("alpha", 1.0f);
  const float beta = ctx.attrs().get_float_or("beta", 1.0f);
  const int64_t m = y.shape[0], n = y.shape[1];
  const int64_t k = trans_a ? a.shape[0] : a.shape[1];
  const bool has_c = ctx.has_input(2) && beta != 0.0f;
  dispatch_matrix(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = y.as<T>();
    // alpha or beta times an element: exact at 1, else in double, saturating into an integer type.
    auto scaled = [](float factor, T v) { return factor == 1.0f ? v : real_to<T>(static_cast<double>(factor) * v); };
    // Y = beta * C first, so the product can accumulate onto it.
    auto fill_c = [&] {
      const TensorView& c = ctx.input(2);
      std::vector<int64_t> cs = broadcast_strides(c.shape, {m, n});
      const T* pc = c.as<T>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) out[i * n + j] = scaled(beta, pc[i * cs[0] + j * cs[1]]);
      }
    };
    const int64_t a_row = trans_a ? 1 : a.shape[1], a_col = trans_a ? a.shape[1] : 1;
    const int64_t b_row = trans_b ? 1 : b.shape[1], b_col = trans_b ? b.shape[1] : 1;
    if constexpr (std::is_same_v<T, float>) {
      const PackedWeights* packed = ctx.state<PackedWeights>();
      GemmA ga{nullptr, {a.as<float>(), a_row, a_col}};
      GemmB gb;
      if (packed) gb.packed = &packed->b;
      gb.ref = {b.as<float>(), b_row, b_col};
      const GemmMicrokernel& kernel = packed ? *packed->b.kernel : best_gemm_microkernel();
      if (alpha == 1.0f) {
        if (has_c) fill_c();
        gemm_f32(kernel, m, n, k, ga, gb, out, n, has_c, nullptr, &ctx.pool());
        return;
      }
      gemm_f32(kernel, m, n, k, ga, gb, out, n, false, nullptr, &ctx.pool());
      for (int64_t i = 0; i < m * n; ++i) out[i] *= alpha;
      if (has_c) {
        std::vector<float> product(out, out + m * n);
        fill_c();
        for (int64_t i = 0; i < m * n; ++i) out[i] += product[static_cast<size_t>(i)];
      }
    } else {
      std::vector<T> product(static_cast<size_t>(m * n));
      reference_gemm<T>(m, n, k, a.as<T>(), a_row, a_col, b.as<T>(), b_row, b_col, product.data(), n, false);
      if (has_c) {
        fill_c();
      } else {
        std::fill(out, out + m * n, T(0));
      }
      for (int64_t i = 0; i < m * n; ++i) out[i] = add_wrapping(out[i], scaled(alpha, product[static_cast<size_t>(i)]));
    }
  });
}

// ---------------------------------------------------------------- MatMul --

std::shared_ptr<void> prepare_matmul(const Node& node, const std::vector<const Tensor*>& constants,
                                     const std::vector<TensorType>& types) {
  const bool transpose_b = node.attrs.get_int_or("tessera_transpose_b", 0) != 0;
  const Tensor* b = constants.size() > 1 ? constants[1] : nullptr;
  if (const Attribute* scales = node.attrs.find("tessera_int8_scales")) {
    // Checked again (with a message) when the node runs.
    if (!b || b->dtype() != DType::kInt8 || b->shape().size() != 2) return nullptr;
    const int64_t k = b->shape()[transpose_b ? 1 : 0], n = b->shape()[transpose_b ? 0 : 1];
    const auto count = static_cast<int64_t>(scales->floats.size());
    if (count != 1 && count != n) return nullptr;
    auto state = std::make_shared<PackedWeights>();
    state->int8 = pack_int8_weights(b->as<int8_t>(), k, n, scales->floats.data(), count, transpose_b);
    return state;
  }
  if (transpose_b) return nullptr;  // B is computed (attention's K)
  if (!b || b->dtype() != DType::kFloat32 || b->shape().size() != 2) return nullptr;
  const int64_t k = b->shape()[0], n = b->shape()[1];
  auto state = std::make_shared<PackedWeights>();
  state->b = pack_gemm_b(best_gemm_microkernel(), {b->as<float>(), n, 1}, k, n);
  return state;
}

/// Writes the bias a native MatMulBias composite left on the node (attribute
/// tessera_bias, N values) into every row of y; false when there is none.
bool fill_fused_bias(const KernelContext& ctx, float* y, int64_t count, int64_t n) {
  const Attribute* bias = ctx.attrs().find("tessera_bias");
  if (!bias) return false;
  if (static_cast<int64_t>(bias->floats.size()) != n) {
    ctx.fail("attribute 'tessera_bias' holds ", bias->floats.size(), " values for a product of ", n, " columns");
  }
  for (int64_t row = 0; n > 0 && row < count / n; ++row) std::memcpy(y + row * n, bias->floats.data(), n * sizeof(float));
  return true;
}

/// Sum of x[p] * y[p], in eight float lanes (vectorised).
float dot_f32(const float* x, const float* y, int64_t k) {
  float lanes[8] = {};
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += x[p + l] * y[p + l];
  }
  for (; p < k; ++p) lanes[0] += x[p] * y[p];
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

/// float32 A by int8 B ([K, N], or [N, K] with tessera_transpose_b) with B's scales (tessera_int8_scales: one or N),
/// the bias and clamp the composite carries: the rows of A (every batch) as
/// rows of one product.
void matmul_int8_weights(KernelContext& ctx, const Attribute& scales) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& y = ctx.output(0);
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kInt8 || b.rank() != 2 || a.rank() < 1) {
    ctx.fail("int8 weights (tessera_int8_scales) need float32 A and a 2-D int8 B, got ", dtype_name(a.dtype), " ",
             shape_to_string(a.shape), " and ", dtype_name(b.dtype), " ", shape_to_string(b.shape));
  }
  // B as stored: [K, N], or [N, K] read transposed (a Gemm's transB).
  const bool transpose_b = ctx.attrs().get_int_or("tessera_transpose_b", 0) != 0;
  const int64_t k = b.shape[transpose_b ? 1 : 0], n = b.shape[transpose_b ? 0 : 1];
  if (a.shape.back() != k) ctx.fail("inner dimensions differ: ", shape_to_string(a.shape), " x ", shape_to_string(b.shape));
  const auto count = static_cast<int64_t>(scales.floats.size());
  if (count != 1 && count != n) ctx.fail("attribute 'tessera_int8_scales' holds ", count, " scales for ", n, " columns");
  const Attribute* bias = ctx.attrs().find("tessera_bias");
  if (bias && static_cast<int64_t>(bias->floats.size()) != n) {
    ctx.fail("attribute 'tessera_bias' holds ", bias->floats.size(), " values for a product of ", n, " columns");
  }
  if (y.numel() == 0) return;
  const std::optional<GemmClamp> clamp = fused_clamp(ctx);
  const PackedWeights* packed = ctx.state<PackedWeights>();
  std::optional<Int8Weights> local;
  if (!packed || !packed->int8) local = pack_int8_weights(b.as<int8_t>(), k, n, scales.floats.data(), count, transpose_b);
  const Int8Weights& weights = local ? *local : *packed->int8;
  int8_weight_rows(weights, y.numel() / n, a.as<float>(), k, y.as<float>(), n, bias ? bias->floats.data() : nullptr,
                   clamp ? clamp->lo : -INFINITY, clamp ? clamp->hi : INFINITY, &ctx.pool());
}

void matmul_kernel(KernelContext& ctx) {
  if (const Attribute* scales = ctx.attrs().find("tessera_int8_scales")) return matmul_int8_weights(ctx, *scales);
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& y = ctx.output(0);
  // Native's MatMulTransposedB: B as stored is [..., N, K], read transposed.
  const bool transpose_b = ctx.attrs().get_int_or("tessera_transpose_b", 0) != 0;
  if (transpose_b && b.shape.size() < 2) ctx.fail("a transposed B needs rank >= 2, got ", shape_to_string(b.shape));
  // A of rank 1 is one row and B of rank 1 one column; the dims before the last two are batch dims.
  // Read in place: no copy of either shape (a small product runs without allocating).
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t m = ra == 1 ? 1 : a.shape[ra - 2], k = a.shape[ra - 1];
  const int64_t n = rb == 1 ? 1 : b.shape[transpose_b ? rb - 2 : rb - 1];
  const size_t batch_rank_a = ra > 2 ? ra - 2 : 0, batch_rank_b = rb > 2 ? rb - 2 : 0;
  const Shape batch_a(a.shape.begin(), a.shape.begin() + static_cast<std::ptrdiff_t>(batch_rank_a));
  const Shape batch_b(b.shape.begin(), b.shape.begin() + static_cast<std::ptrdiff_t>(batch_rank_b));
  const Shape batch = broadcast_shapes(batch_a, batch_b);
  const int64_t batches = shape_numel(batch);
  if (y.numel() == 0) return;
  const bool b_shared = shape_numel(batch_b) == 1;  // B the same for every batch: fold batches into M
  // Per-batch element offsets into A and B. A strided B (a caller's key/value cache, read in place:
  // native::reads_strided_input) has its matrices at its own batch strides, each one contiguous.
  SmallVector<int64_t, 16> a_offsets(static_cast<size_t>(batches), 0), b_offsets(static_cast<size_t>(batches), 0);
  const bool b_strided = b.strided() && b.rank() >= 2;
  {
    std::vector<int64_t> sa = broadcast_strides(batch_a, batch), sb = broadcast_strides(batch_b, batch);
    if (b_strided) {
      const size_t offset = batch.size() - batch_b.size();
      for (size_t d = 0; d < batch_b.size(); ++d) sb[d + offset] = batch_b[d] == 1 ? 0 : b.strides[d];
    }
    std::vector<int64_t> index(batch.size(), 0);
    for (int64_t t = 0; t < batches; ++t) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        oa += index[d] * sa[d];
        ob += index[d] * sb[d];
      }
      a_offsets[static_cast<size_t>(t)] = oa * m * k;
      b_offsets[static_cast<size_t>(t)] = b_strided ? ob : ob * k * n;
      for (size_t d = batch.size(); d-- > 0;) {
        if (++index[d] < batch[d]) break;
        index[d] = 0;
      }
    }
  }
  dispatch_matrix(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    T* out = y.as<T>();
    if constexpr (std::is_same_v<T, float>) {
      const PackedWeights* packed = ctx.state<PackedWeights>();
      const GemmMicrokernel& kernel = packed ? *packed->b.kernel : best_gemm_microkernel();
      GemmB gb;
      if (packed) gb.packed = &packed->b;
      gb.ref = transpose_b ? MatrixRef{pb, 1, k} : MatrixRef{pb, n, 1};
      if (transpose_b && m <= 4 && !ctx.attrs().has("tessera_bias") && !ctx.attrs().has("tessera_clamp")) {
        // Few rows (a decoder's token step against its cache): each output is a dot product of two
        // contiguous rows, with nothing packed. (A bias or clamp, which MatMulTransposedB never
        // carries, takes the GEMM below, which applies them.)
        ctx.pool().parallel_for(batches * m, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, n * k)),
                                [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            const int64_t t = row / m, i = row % m;
            const float* x = pa + a_offsets[static_cast<size_t>(t)] + i * k;
            const float* rows = pb + b_offsets[static_cast<size_t>(t)];
            float* o = out + (t * m + i) * n;
            for (int64_t j = 0; j < n; ++j) o[j] = dot_f32(x, rows + j * k, k);
          }
        });
        return;
      }
      // A fused bias (native MatMulBias): every row of Y starts as the bias and the products accumulate onto it.
      const bool biased = fill_fused_bias(ctx, out, y.numel(), n);
      const std::optional<GemmClamp> clamp = fused_clamp(ctx);
      const GemmClamp* clamp_ptr = clamp ? &*clamp : nullptr;
      const bool a_contiguous = shape_numel(batch_a) == batches;  // A not broadcast over batch
      if (b_shared && a_contiguous) {
        gemm_f32(kernel, batches * m, n, k, GemmA{nullptr, {pa, k, 1}}, gb, out, n, biased, nullptr, &ctx.pool(), clamp_ptr);
        return;
      }
      auto one = [&](int64_t t, ThreadPool* pool) {
        GemmB bt = gb;
        bt.ref.data = pb + b_offsets[static_cast<size_t>(t)];
        gemm_f32(kernel, m, n, k, GemmA{nullptr, {pa + a_offsets[static_cast<size_t>(t)], k, 1}}, bt, out + t * m * n, n,
                 biased, nullptr, pool, clamp_ptr);
      };
      // Many small products (attention heads): one per thread; few big ones: parallel inside.
      if (batches >= ctx.pool().num_threads()) {
        ctx.pool().parallel_for(batches, 1, [&](int64_t begin, int64_t end) {
          for (int64_t t = begin; t < end; ++t) one(t, nullptr);
        });
      } else {
        for (int64_t t = 0; t < batches; ++t) one(t, &ctx.pool());
      }
    } else {
      ctx.pool().parallel_for(batches, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          reference_gemm<T>(m, n, k, pa + a_offsets[static_cast<size_t>(t)], k, 1, pb + b_offsets[static_cast<size_t>(t)],
                            transpose_b ? 1 : n, transpose_b ? k : 1, out + t * m * n, n, false);
        }
      });
    }
  });
}

}  // namespace

void register_nn_matmul_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Gemm", .run = gemm_kernel, .prepare = prepare_gemm});
  registry.add({.op_type = "MatMul", .run = matmul_kernel, .prepare = prepare_matmul});
}

}  // namespace tessera::native
