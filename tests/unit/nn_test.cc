// Tests of the nn family: the packed GEMM (every microkernel this CPU runs)
// and the Conv / MatMul / Gemm fast paths against plain references on random
// shapes with odd sizes, groups, strides, dilations and padding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/native/kernels/nn_internal.h"
#include "test_util.h"

namespace tessera {
namespace {

using native::GemmA;
using native::GemmB;
using testing::expect_close;
using testing::OneOpGraph;
using testing::random_float;
using testing::run_one_op;

TEST(NnGemm, EveryMicrokernelMatchesReference) {
  native::ThreadPool pool(3);
  struct Case { int64_t m, n, k; bool trans_a, trans_b, accumulate, bias; };
  const Case cases[] = {{1, 1, 1, false, false, false, false}, {13, 37, 5, false, false, false, true},
                        {29, 65, 300, true, false, true, false}, {64, 33, 513, false, true, false, true},
                        {7, 129, 257, true, true, true, true},   {100, 500, 70, false, false, false, false},
                        {30, 1700, 300, false, false, true, true}};  // wide B: column chunks per thread
  for (const native::GemmMicrokernel* kernel : native::available_gemm_microkernels()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
      Tensor a = random_float({c.m, c.k}, 1), b = random_float({c.k, c.n}, 2), bias = random_float({c.m}, 3);
      Tensor expected = random_float({c.m, c.n}, 4), actual = expected.clone();
      // Transposed operands are read through strides of the same data.
      const int64_t a_row = c.trans_a ? 1 : c.k, a_col = c.trans_a ? c.m : 1;
      const int64_t b_row = c.trans_b ? 1 : c.n, b_col = c.trans_b ? c.k : 1;
      native::reference_gemm<float>(c.m, c.n, c.k, a.as<float>(), a_row, a_col, b.as<float>(), b_row, b_col, expected.as<float>(),
                                    c.n, c.accumulate);
      if (c.bias) {
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < c.n; ++j) expected.as<float>()[i * c.n + j] += bias.as<float>()[i];
        }
      }
      native::MatrixRef aref{a.as<float>(), a_row, a_col}, bref{b.as<float>(), b_row, b_col};
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{nullptr, aref}, GemmB{nullptr, {}, bref}, actual.as<float>(), c.n,
                       c.accumulate, c.bias ? bias.as<float>() : nullptr, &pool);
      expect_close(actual, expected, 1e-4, 1e-4);
      // Pre-packed operands give the same result.
      native::PackedMatrix pa = native::pack_gemm_a(*kernel, aref, c.m, c.k);
      native::PackedMatrix pb = native::pack_gemm_b(*kernel, bref, c.k, c.n);
      Tensor packed_out = random_float({c.m, c.n}, 4);
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{&pa, {}}, GemmB{&pb, {}, {}}, packed_out.as<float>(), c.n, c.accumulate,
                       c.bias ? bias.as<float>() : nullptr, nullptr);
      expect_close(packed_out, expected, 1e-4, 1e-4);
      // Threads with packed operands, and a fused clamp (as a Conv with a folded Relu6 uses).
      const native::GemmClamp clamp{-0.25f, 0.5f};
      Tensor clamped = random_float({c.m, c.n}, 4), clamped_expected = expected.clone();
      for (int64_t i = 0; i < clamped_expected.numel(); ++i) {
        clamped_expected.as<float>()[i] = std::min(std::max(clamped_expected.as<float>()[i], clamp.lo), clamp.hi);
      }
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{&pa, {}}, GemmB{&pb, {}, {}}, clamped.as<float>(), c.n, c.accumulate,
                       c.bias ? bias.as<float>() : nullptr, &pool, &clamp);
      expect_close(clamped, clamped_expected, 1e-4, 1e-4);
    }
  }
}

TEST(NnGemm, OneRowAgainstPackedBMatchesReference) {
  // M = 1 with B packed (a decoder's token times a weight matrix) takes GemmMicrokernel::run_row:
  // every K-block's panels read once, split among threads. K past one block and not a multiple of
  // four, N not a multiple of NR, a strided row, accumulate, bias, clamp, with and without threads.
  native::ThreadPool pool(2);
  struct Case { int64_t n, k, x_stride; bool accumulate, bias, clamp, threads; };
  const Case cases[] = {{1, 1, 1, false, false, false, false},   {37, 5, 1, true, true, false, false},
                        {1700, 300, 3, false, true, true, true},  {50, 513, 1, true, false, false, true},
                        {33, 1027, 2, false, false, true, false}, {4099, 770, 1, true, true, false, true}};
  for (const native::GemmMicrokernel* kernel : native::available_gemm_microkernels()) {
    ASSERT_NE(kernel->run_row, nullptr) << kernel->name;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(kernel->name) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
      Tensor x = random_float({c.k * c.x_stride}, 11), b = random_float({c.k, c.n}, 12), bias = random_float({1}, 13);
      Tensor expected = random_float({1, c.n}, 14), actual = expected.clone();
      std::vector<double> sums(static_cast<size_t>(c.n));
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = c.accumulate ? expected.as<float>()[j] : 0.0;
        for (int64_t p = 0; p < c.k; ++p) sum += double(x.as<float>()[p * c.x_stride]) * b.as<float>()[p * c.n + j];
        if (c.bias) sum += bias.as<float>()[0];
        if (c.clamp) sum = std::min(std::max(sum, -0.25), 0.5);
        expected.as<float>()[j] = static_cast<float>(sum);
      }
      native::PackedMatrix pb = native::pack_gemm_b(*kernel, {b.as<float>(), c.n, 1}, c.k, c.n);
      const native::GemmClamp clamp{-0.25f, 0.5f};
      native::gemm_f32(*kernel, 1, c.n, c.k, GemmA{nullptr, {x.as<float>(), c.k * c.x_stride, c.x_stride}},
                       GemmB{&pb, {}, {}}, actual.as<float>(), c.n, c.accumulate, c.bias ? bias.as<float>() : nullptr,
                       c.threads ? &pool : nullptr, c.clamp ? &clamp : nullptr);
      expect_close(actual, expected, 1e-4, 1e-4);
    }
    // A NaN in the row reaches every column; an Inf times a zero weight is NaN there, as in the sum.
    Tensor x = random_float({600}, 15), b = random_float({600, 40}, 16), out = random_float({1, 40}, 17);
    x.as<float>()[300] = std::numeric_limits<float>::quiet_NaN();
    native::PackedMatrix pb = native::pack_gemm_b(*kernel, {b.as<float>(), 40, 1}, 600, 40);
    native::gemm_f32(*kernel, 1, 40, 600, GemmA{nullptr, {x.as<float>(), 600, 1}}, GemmB{&pb, {}, {}}, out.as<float>(), 40,
                     false, nullptr, &pool);
    for (int64_t j = 0; j < 40; ++j) EXPECT_TRUE(std::isnan(out.as<float>()[j])) << kernel->name << " column " << j;
  }
}

TEST(NnGemm, FewRowsAgainstPackedBMatchesReference) {
  // A few rows against packed B (a prompt's tokens times weights): up to 48 rows each B panel meets
  // every A panel in turn, full A panels read in place and partial ones packed each into a slot of
  // its own, through run_stream. Rows around the panel edges (AVX-512 12, AVX2 6) and the 48-row
  // limit, K over several blocks, N not a multiple of NR, chunks per thread, the epilogue.
  native::ThreadPool pool(2);
  struct Case { int64_t m, n, k; bool accumulate, bias, clamp, threads; };
  const Case cases[] = {{2, 37, 5, false, false, false, false},    {5, 700, 300, true, true, false, true},
                        {12, 65, 513, false, true, true, false},   {13, 1100, 260, true, false, false, true},
                        {30, 97, 770, false, true, false, false},  {32, 2100, 300, true, true, true, true},
                        {47, 33, 257, false, false, true, true},   {48, 530, 100, true, true, false, false},
                        {49, 70, 300, false, true, true, true}};
  for (const native::GemmMicrokernel* kernel : native::available_gemm_microkernels()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" +
                   std::to_string(c.k));
      // A's rows are 3 floats longer than K (a strided in-place read).
      const int64_t lda = c.k + 3;
      Tensor a = random_float({c.m, lda}, 21), b = random_float({c.k, c.n}, 22), bias = random_float({c.m}, 23);
      Tensor expected = random_float({c.m, c.n}, 24), actual = expected.clone();
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = c.accumulate ? expected.as<float>()[i * c.n + j] : 0.0;
          for (int64_t p = 0; p < c.k; ++p) sum += double(a.as<float>()[i * lda + p]) * b.as<float>()[p * c.n + j];
          if (c.bias) sum += bias.as<float>()[i];
          if (c.clamp) sum = std::min(std::max(sum, -0.25), 0.5);
          expected.as<float>()[i * c.n + j] = static_cast<float>(sum);
        }
      }
      native::PackedMatrix pb = native::pack_gemm_b(*kernel, {b.as<float>(), c.n, 1}, c.k, c.n);
      const native::GemmClamp clamp{-0.25f, 0.5f};
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{nullptr, {a.as<float>(), lda, 1}}, GemmB{&pb, {}, {}},
                       actual.as<float>(), c.n, c.accumulate, c.bias ? bias.as<float>() : nullptr,
                       c.threads ? &pool : nullptr, c.clamp ? &clamp : nullptr);
      expect_close(actual, expected, 1e-4, 1e-4);
    }
    // A NaN in one row reaches that row's every column and no other row.
    Tensor a = random_float({20, 300}, 25), b = random_float({300, 70}, 26), out = random_float({20, 70}, 27);
    a.as<float>()[13 * 300 + 150] = std::numeric_limits<float>::quiet_NaN();
    native::PackedMatrix pb = native::pack_gemm_b(*kernel, {b.as<float>(), 70, 1}, 300, 70);
    native::gemm_f32(*kernel, 20, 70, 300, GemmA{nullptr, {a.as<float>(), 300, 1}}, GemmB{&pb, {}, {}}, out.as<float>(), 70,
                     false, nullptr, &pool);
    for (int64_t i = 0; i < 20; ++i) {
      for (int64_t j = 0; j < 70; ++j) EXPECT_EQ(std::isnan(out.as<float>()[i * 70 + j]), i == 13) << kernel->name << " " << i << "," << j;
    }
  }
}

TEST(NnGemm, RowsOfAStrideThatAliasesInL1MatchReference) {
  // Row-major A whose row stride is a multiple of 2 KiB (512 or 1024 floats): full panels are copied row
  // by row at another stride instead of read in place (their rows shared a few L1 sets). Packed B (up to
  // 48 rows each B panel meets every A panel; more rows panel by panel) and B packed per call, K over
  // several blocks and shorter than the stride, with and without threads, accumulate and bias.
  native::ThreadPool pool(2);
  struct Case { int64_t m, n, k, lda; bool packed_b, threads; };
  const Case cases[] = {{12, 70, 512, 512, true, false},   {24, 300, 1024, 1024, true, true},
                        {30, 33, 500, 512, true, false},   {64, 130, 1024, 1024, true, true},
                        {36, 520, 512, 512, false, true},  {13, 40, 700, 1024, false, false}};
  for (const native::GemmMicrokernel* kernel : native::available_gemm_microkernels()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" +
                   std::to_string(c.k) + " lda=" + std::to_string(c.lda) + (c.packed_b ? " packed B" : ""));
      Tensor a = random_float({c.m, c.lda}, 31), b = random_float({c.k, c.n}, 32), bias = random_float({c.m}, 33);
      Tensor expected = random_float({c.m, c.n}, 34), actual = expected.clone();
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = expected.as<float>()[i * c.n + j] + double(bias.as<float>()[i]);
          for (int64_t p = 0; p < c.k; ++p) sum += double(a.as<float>()[i * c.lda + p]) * b.as<float>()[p * c.n + j];
          expected.as<float>()[i * c.n + j] = static_cast<float>(sum);
        }
      }
      const native::MatrixRef bref{b.as<float>(), c.n, 1};
      native::PackedMatrix pb;
      if (c.packed_b) pb = native::pack_gemm_b(*kernel, bref, c.k, c.n);
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{nullptr, {a.as<float>(), c.lda, 1}},
                       c.packed_b ? GemmB{&pb, {}, {}} : GemmB{nullptr, {}, bref}, actual.as<float>(), c.n, true,
                       bias.as<float>(), c.threads ? &pool : nullptr);
      expect_close(actual, expected, 1e-4, 1e-4);
    }
  }
}

TEST(NnGemm, FewRowsAgainstBInPlaceMatchReference) {
  // One to four rows against B that nothing packed (a value computed at run time) take GemmMicrokernel::run_rows: B read in place, row-major
  // with a row stride longer than N, K split among threads (runs of four rows, partial sums per
  // thread), K not a multiple of four, N not a multiple of 16, A strided or transposed, the epilogue,
  // C accumulated with K split, and C wider than a chunk kept in cache (16384 columns at four rows).
  native::ThreadPool pool(2);
  struct Case { int64_t m, n, k; bool trans_a, accumulate, bias, clamp, threads; };
  const Case cases[] = {{1, 1, 1, false, false, false, false, false},    {1, 37, 5, false, true, true, false, false},
                        {2, 700, 300, true, false, true, true, true},     {3, 4099, 771, false, true, false, false, true},
                        {4, 33, 1027, false, false, true, false, true},    {1, 3072, 768, false, false, false, false, true},
                        {4, 70, 6, true, true, true, true, false},         {2, 16, 2048, false, false, false, true, true},
                        {2, 300, 600, false, true, true, false, true},     {4, 20000, 40, false, true, false, false, false}};
  for (const native::GemmMicrokernel* kernel : native::available_gemm_microkernels()) {
    ASSERT_NE(kernel->run_rows, nullptr) << kernel->name;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(kernel->name) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" +
                   std::to_string(c.k) + (c.threads ? " threads" : ""));
      const int64_t lda = c.k + 3, ldb = c.n + 5;
      Tensor a = random_float({c.m * lda}, 31), b = random_float({c.k * ldb}, 32), bias = random_float({c.m}, 33);
      Tensor expected = random_float({c.m, c.n}, 34), actual = expected.clone();
      // A transposed: element (i, p) at a[p * m + i] (k x m storage).
      auto a_at = [&](int64_t i, int64_t p) { return c.trans_a ? a.as<float>()[p * c.m + i] : a.as<float>()[i * lda + p]; };
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = c.accumulate ? expected.as<float>()[i * c.n + j] : 0.0;
          for (int64_t p = 0; p < c.k; ++p) sum += double(a_at(i, p)) * b.as<float>()[p * ldb + j];
          if (c.bias) sum += bias.as<float>()[i];
          if (c.clamp) sum = std::min(std::max(sum, -0.25), 0.5);
          expected.as<float>()[i * c.n + j] = static_cast<float>(sum);
        }
      }
      const native::MatrixRef aref = c.trans_a ? native::MatrixRef{a.as<float>(), 1, c.m} : native::MatrixRef{a.as<float>(), lda, 1};
      const native::GemmClamp clamp{-0.25f, 0.5f};
      native::gemm_f32(*kernel, c.m, c.n, c.k, GemmA{nullptr, aref}, GemmB{nullptr, {}, {b.as<float>(), ldb, 1}},
                       actual.as<float>(), c.n, c.accumulate, c.bias ? bias.as<float>() : nullptr,
                       c.threads ? &pool : nullptr, c.clamp ? &clamp : nullptr);
      expect_close(actual, expected, 1e-4, 1e-4);
    }
    // A NaN in one row of A reaches that row's every column and no other row; an Inf in B times a zero of A
    // is NaN in that column, as in the sum.
    Tensor a = random_float({3, 600}, 35), b = random_float({600, 40}, 36), out = random_float({3, 40}, 37);
    a.as<float>()[1 * 600 + 301] = std::numeric_limits<float>::quiet_NaN();
    a.as<float>()[2 * 600 + 7] = 0.0f;
    b.as<float>()[7 * 40 + 9] = std::numeric_limits<float>::infinity();
    native::gemm_f32(*kernel, 3, 40, 600, GemmA{nullptr, {a.as<float>(), 600, 1}}, GemmB{nullptr, {}, {b.as<float>(), 40, 1}},
                     out.as<float>(), 40, false, nullptr, &pool);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 40; ++j) {
        const bool nan = i == 1 || (i == 2 && j == 9);
        EXPECT_EQ(std::isnan(out.as<float>()[i * 40 + j]), nan) << kernel->name << " " << i << "," << j;
      }
    }
  }
}

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> stride, dilation, pads;
  bool bias;
};

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/// Conv of any rank straight from the ONNX definition, summed in long double
/// and written without any Tessera kernel (the float64 kernel is
/// native::reference_conv itself, so only this can check it):
///   y[n, m, o] = B[m] + sum over c < C/group and k of x[n, g*C/group + c, o*stride + k*dilation - pad_begin] * W[m, c, k]
/// with g = m / (M/group) and reads outside x counting as zero.
Tensor naive_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* bias) {
  const size_t r = c.x.size() - 2;
  Shape out = {c.x[0], c.w[0]};
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = (c.w[d + 2] - 1) * c.dilation[d] + 1;
    out.push_back((c.x[d + 2] + c.pads[d] + c.pads[d + r] - extent) / c.stride[d] + 1);
  }
  const std::vector<int64_t> x_strides = strides_of(c.x), w_strides = strides_of(c.w), y_strides = strides_of(out);
  const Shape out_spatial(out.begin() + 2, out.end()), kernel(c.w.begin() + 2, c.w.end());
  const int64_t channels_per_group = c.w[1], outputs_per_group = c.w[0] / c.group;
  Tensor y(x.dtype(), out);
  std::vector<int64_t> o(r), k(r);
  for (int64_t n = 0; n < out[0]; ++n) {
    for (int64_t m = 0; m < out[1]; ++m) {
      const int64_t g = m / outputs_per_group;
      for (int64_t oi = 0; oi < shape_numel(out_spatial); ++oi) {
        for (size_t d = r, rest = static_cast<size_t>(oi); d-- > 0; rest /= static_cast<size_t>(out[d + 2])) {
          o[d] = static_cast<int64_t>(rest % static_cast<size_t>(out[d + 2]));
        }
        long double sum = bias ? bias->double_at(m) : 0.0L;
        for (int64_t ci = 0; ci < channels_per_group; ++ci) {
          for (int64_t ki = 0; ki < shape_numel(kernel); ++ki) {
            for (size_t d = r, rest = static_cast<size_t>(ki); d-- > 0; rest /= static_cast<size_t>(kernel[d])) {
              k[d] = static_cast<int64_t>(rest % static_cast<size_t>(kernel[d]));
            }
            int64_t x_index = n * x_strides[0] + (g * channels_per_group + ci) * x_strides[1];
            int64_t w_index = m * w_strides[0] + ci * w_strides[1];
            bool inside = true;
            for (size_t d = 0; d < r; ++d) {
              const int64_t position = o[d] * c.stride[d] + k[d] * c.dilation[d] - c.pads[d];
              inside &= position >= 0 && position < c.x[d + 2];
              x_index += position * x_strides[d + 2];
              w_index += k[d] * w_strides[d + 2];
            }
            if (inside) sum += static_cast<long double>(x.double_at(x_index)) * w.double_at(w_index);
          }
        }
        int64_t y_index = n * y_strides[0] + m * y_strides[1];
        for (size_t d = 0; d < r; ++d) y_index += o[d] * y_strides[d + 2];
        if (y.dtype() == DType::kFloat32) {
          y.as<float>()[y_index] = static_cast<float>(sum);
        } else {
          y.as<double>()[y_index] = static_cast<double>(sum);
        }
      }
    }
  }
  return y;
}

const ConvCase kConvCases[] = {
    {{2, 3, 11, 13}, {5, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
    {{1, 8, 9, 7}, {6, 4, 3, 2}, 2, {2, 1}, {1, 2}, {0, 1, 2, 1}, true},
    {{1, 16, 17, 15}, {32, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},      // pointwise: direct GEMM
    {{2, 6, 10, 10}, {12, 1, 3, 3}, 6, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},       // depthwise, multiplier 2
    {{1, 7, 12, 9}, {7, 1, 5, 5}, 7, {1, 1}, {2, 2}, {4, 4, 4, 4}, false},        // depthwise, dilated
    {{1, 5, 29}, {4, 5, 4}, 1, {3}, {2}, {2, 1}, true},                           // 1-D
    {{1, 4, 5, 6, 7}, {4, 2, 2, 3, 2}, 2, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, true},  // 3-D grouped
    {{1, 37, 20, 20}, {70, 37, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},     // K > one block
    {{2, 5, 23, 57}, {5, 1, 3, 3}, 5, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},        // depthwise plane kernel, stride 1
    {{1, 4, 30, 71}, {4, 1, 3, 3}, 4, {2, 2}, {1, 1}, {0, 1, 1, 0}, true},        // depthwise plane kernel, stride 2
    {{1, 3, 19, 50}, {3, 1, 5, 3}, 3, {1, 2}, {2, 3}, {2, 3, 1, 2}, false},       // depthwise, dilated, uneven pads
    // Implicit im2col (phase images, taps read in place): several 32-column
    // tiles and chunks, more than one 12-row panel, strides, dilation, uneven
    // and floor-truncated pads, a 1x1 stride 2 (one phase of four read).
    {{1, 20, 30, 41}, {40, 20, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
    {{2, 3, 37, 45}, {16, 3, 7, 7}, 1, {2, 2}, {1, 1}, {3, 3, 3, 3}, true},       // stem-like
    {{1, 8, 22, 27}, {30, 8, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 0, 0}, false},      // last row and column unread
    {{1, 6, 18, 33}, {13, 6, 3, 3}, 1, {1, 1}, {2, 2}, {2, 0, 1, 3}, true},       // dilated, uneven pads
    {{1, 12, 16, 17}, {26, 6, 3, 2}, 2, {3, 2}, {1, 2}, {1, 0, 2, 1}, true},      // grouped, strides 3 x 2
    {{1, 16, 14, 14}, {24, 16, 1, 1}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},     // 1x1 stride 2
    {{1, 7, 9, 10}, {5, 7, 1, 1}, 1, {1, 1}, {1, 1}, {1, 1, 0, 2}, true},         // 1x1 with pads: OW > W + pad
    {{1, 5, 9, 8}, {4, 5, 3, 5}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},          // rows twice the outputs: packed im2col
};

void run_conv_case(const ConvCase& c, DType dtype, bool constant_weights) {
  Tensor x = random_float(c.x, 7), w = random_float(c.w, 8), b = random_float({c.w[0]}, 9);
  if (dtype == DType::kFloat64) {
    auto to_double = [](const Tensor& t) {
      Tensor d(DType::kFloat64, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) d.as<double>()[i] = t.as<float>()[i];
      return d;
    };
    x = to_double(x), w = to_double(w), b = to_double(b);
  }
  OneOpGraph spec{.op_type = "Conv"};
  spec.attrs.set("group", Attribute::of_int(c.group));
  spec.attrs.set("strides", Attribute::of_ints(c.stride));
  spec.attrs.set("dilations", Attribute::of_ints(c.dilation));
  spec.attrs.set("pads", Attribute::of_ints(c.pads));
  spec.inputs.push_back(x);
  if (constant_weights) {
    spec.constants.push_back({1, w});
  } else {
    spec.inputs.push_back(w);
  }
  if (c.bias) spec.constants.push_back({2, b});
  Tensor expected = naive_conv(c, x, w, c.bias ? &b : nullptr);
  // float64 sums in double: far closer to the long double sum than float32's 1e-4.
  const double tolerance = dtype == DType::kFloat64 ? 1e-12 : 1e-4;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    expect_close(run_one_op(spec, threads)[0], expected, tolerance, tolerance);
  }
}

TEST(NnConv, Float32FastPathsMatchReference) {
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE("x=" + shape_to_string(c.x) + " w=" + shape_to_string(c.w));
    run_conv_case(c, DType::kFloat32, true);
    run_conv_case(c, DType::kFloat32, false);
  }
}

// Random 2-D convolutions (kernels 1-5, strides 1-3, dilations 1-2, pads
// 0-3 on each side, widths 1-40): every geometry of the implicit-im2col
// layout and the packed fallback, against the naive sum.
TEST(NnConv, RandomGeometriesMatchReference) {
  std::mt19937 rng(2026);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    ConvCase c;
    c.group = between(1, 2);
    c.x = {1, c.group * between(1, 4), between(1, 12), between(1, 40)};
    c.w = {c.group * between(1, 14), c.x[1] / c.group, between(1, 5), between(1, 5)};
    c.stride = {between(1, 3), between(1, 3)};
    c.dilation = {between(1, 2), between(1, 2)};
    c.pads = {between(0, 3), between(0, 3), between(0, 3), between(0, 3)};
    c.bias = trial % 2 == 0;
    bool valid = true;
    for (size_t d = 0; d < 2; ++d) {
      valid &= c.x[d + 2] + c.pads[d] + c.pads[d + 2] >= (c.w[d + 2] - 1) * c.dilation[d] + 1;
    }
    if (!valid) continue;  // no output position
    SCOPED_TRACE("trial " + std::to_string(trial) + " x=" + shape_to_string(c.x) + " w=" + shape_to_string(c.w) +
                 " stride " + std::to_string(c.stride[0]) + "x" + std::to_string(c.stride[1]) + " dilation " +
                 std::to_string(c.dilation[0]) + "x" + std::to_string(c.dilation[1]) + " pads " +
                 std::to_string(c.pads[0]) + "," + std::to_string(c.pads[1]) + "," + std::to_string(c.pads[2]) + "," +
                 std::to_string(c.pads[3]));
    run_conv_case(c, DType::kFloat32, trial % 3 != 0);
  }
}

// Every depthwise plane kernel this CPU can run against the portable one, on
// widths that exercise the vector body, the edges and the tails. Called
// directly, so a TESSERA_ISA cap on the dispatch does not skip them.
TEST(NnConv, DepthwisePlaneKernelsAgree) {
  std::vector<std::pair<const char*, native::DepthwisePlaneFn>> kernels;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    kernels.push_back({"avx512", native::depthwise_plane_avx512});
  }
  const native::DepthwisePlaneFn best = native::best_depthwise_plane();
  EXPECT_TRUE(best == nullptr || best == native::depthwise_plane_avx512);
  if (kernels.empty()) GTEST_SKIP() << "this CPU has no AVX-512, so no ISA-specific depthwise plane kernel";
  for (const auto& [name, kernel] : kernels) {
    SCOPED_TRACE(name);
    uint32_t seed = 1;
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t width : {5, 16, 17, 40, 113}) {
        for (int64_t dilation : {1, 2}) {
          Tensor x = random_float({9, width}, seed++), w = random_float({3, 3}, seed++);
          native::DepthwisePlane p;
          p.x = x.as<float>();
          p.in_h = 9;
          p.in_w = width;
          p.w = w.as<float>();
          p.kernel_h = p.kernel_w = 3;
          p.stride_h = p.stride_w = stride;
          p.pad_top = 1;
          p.pad_left = 2;
          p.dilation_h = p.dilation_w = dilation;
          p.bias = 0.25f;
          p.out_h = (9 + 2 - 2 * dilation - 1) / stride + 1;
          p.out_w = (width + 3 - 2 * dilation - 1) / stride + 1;
          Tensor expected(DType::kFloat32, {p.out_h, p.out_w}), actual(DType::kFloat32, {p.out_h, p.out_w});
          p.y = expected.as<float>();
          native::depthwise_plane_portable(p);
          p.y = actual.as<float>();
          kernel(p);
          SCOPED_TRACE("stride " + std::to_string(stride) + " width " + std::to_string(width) + " dilation " +
                       std::to_string(dilation));
          expect_close(actual, expected, 1e-5, 1e-5);
        }
      }
    }
  }
}

TEST(NnConv, Float64MatchesNaiveConv) {
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE("x=" + shape_to_string(c.x) + " w=" + shape_to_string(c.w));
    run_conv_case(c, DType::kFloat64, true);
    run_conv_case(c, DType::kFloat64, false);
  }
}

// native::reference_conv is what the fast paths are developed against and what
// float64 runs: check it directly too, in float32, on every case.
TEST(NnConv, ReferenceConvMatchesNaiveConv) {
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE("x=" + shape_to_string(c.x) + " w=" + shape_to_string(c.w));
    Tensor x = random_float(c.x, 7), w = random_float(c.w, 8), b = random_float({c.w[0]}, 9);
    Tensor expected = naive_conv(c, x, w, c.bias ? &b : nullptr);
    Tensor y(DType::kFloat32, expected.shape());
    const std::vector<int64_t> pad_begin(c.pads.begin(), c.pads.begin() + static_cast<std::ptrdiff_t>(c.x.size() - 2));
    native::reference_conv<float>(x.view(), w.view(), c.bias ? b.as<float>() : nullptr, c.group, c.stride, c.dilation, pad_begin,
                                  y.view());
    expect_close(y, expected, 1e-5, 1e-5);
  }
}

TEST(NnConv, ReferenceConvKnownValue) {
  // 1x1x3x3 ones with a 2x2 kernel of ones, no padding: every output sums 4 inputs.
  Tensor x = testing::make_float({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = testing::make_float({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor y(DType::kFloat32, {1, 1, 2, 2});
  native::reference_conv<float>(x.view(), w.view(), nullptr, 1, {1, 1}, {1, 1}, {0, 0}, y.view());
  expect_close(y, testing::make_float({1, 1, 2, 2}, {12, 16, 24, 28}));
}

TEST(NnConv, ChannelMismatchIsUserError) {
  OneOpGraph spec{.op_type = "Conv"};
  spec.inputs = {random_float({1, 3, 5, 5}, 1), random_float({2, 4, 3, 3}, 2)};
  EXPECT_USER_ERROR(run_one_op(spec), "Conv_0");
}

TEST(NnConvTranspose, MatchesScatterReference) {
  // ConvTranspose is the adjoint of Conv: scatter each input through the kernel.
  const Shape xs = {1, 4, 5, 6}, ws = {4, 3, 3, 2};  // group 2: Cout = 3 * 2
  const int64_t group = 2, stride[2] = {2, 1}, pad[2] = {1, 0};
  Tensor x = random_float(xs, 3), w = random_float(ws, 4);
  OneOpGraph spec{.op_type = "ConvTranspose"};
  spec.attrs.set("group", Attribute::of_int(group));
  spec.attrs.set("strides", Attribute::of_ints({stride[0], stride[1]}));
  spec.attrs.set("pads", Attribute::of_ints({pad[0], pad[1], pad[0], pad[1]}));
  spec.inputs = {x};
  spec.constants = {{1, w}};
  Tensor y = run_one_op(spec)[0];
  const int64_t oh = stride[0] * (xs[2] - 1) + ws[2] - 2 * pad[0], ow = stride[1] * (xs[3] - 1) + ws[3] - 2 * pad[1];
  Tensor expected(DType::kFloat32, {1, 6, oh, ow});
  const int64_t cin_g = 2, cout_g = 3;
  for (int64_t ic = 0; ic < 4; ++ic) {
    const int64_t g = ic / cin_g;
    for (int64_t ih = 0; ih < xs[2]; ++ih) {
      for (int64_t iw = 0; iw < xs[3]; ++iw) {
        for (int64_t oc = 0; oc < cout_g; ++oc) {
          for (int64_t kh = 0; kh < ws[2]; ++kh) {
            for (int64_t kw = 0; kw < ws[3]; ++kw) {
              const int64_t h = ih * stride[0] - pad[0] + kh, ww = iw * stride[1] - pad[1] + kw;
              if (h < 0 || h >= oh || ww < 0 || ww >= ow) continue;
              expected.as<float>()[((g * cout_g + oc) * oh + h) * ow + ww] +=
                  x.as<float>()[(ic * xs[2] + ih) * xs[3] + iw] * w.as<float>()[((ic * cout_g + oc) * ws[2] + kh) * ws[3] + kw];
            }
          }
        }
      }
    }
  }
  expect_close(y, expected, 1e-4, 1e-4);
}

/// MatMul of [.., m, k] x [.., k, n] with numpy broadcasting, plain loops.
Tensor reference_matmul(const Tensor& a, const Tensor& b, const Shape& out_shape) {
  Tensor y(DType::kFloat32, out_shape);
  const int64_t m = a.shape()[a.shape().size() - 2], k = a.shape().back(), n = b.shape().back();
  const int64_t batches = y.numel() / (m * n);
  const int64_t a_batches = a.numel() / (m * k), b_batches = b.numel() / (k * n);
  for (int64_t t = 0; t < batches; ++t) {
    // The tests below broadcast only whole operands (batch count 1) or match exactly.
    const float* pa = a.as<float>() + (a_batches == 1 ? 0 : t) * m * k;
    const float* pb = b.as<float>() + (b_batches == 1 ? 0 : t) * k * n;
    native::reference_gemm<float>(m, n, k, pa, k, 1, pb, n, 1, y.as<float>() + t * m * n, n, false);
  }
  return y;
}

TEST(NnMatMul, BatchedAndBroadcastMatchReference) {
  struct Case { Shape a, b, y; bool constant_b; };
  const Case cases[] = {{{2, 3, 17, 33}, {2, 3, 33, 19}, {2, 3, 17, 19}, false},
                        {{4, 13, 70}, {70, 45}, {4, 13, 45}, true},
                        {{4, 13, 70}, {70, 45}, {4, 13, 45}, false},
                        {{1, 9, 300}, {5, 300, 7}, {5, 9, 7}, false}};
  for (const Case& c : cases) {
    Tensor a = random_float(c.a, 11), b = random_float(c.b, 12);
    OneOpGraph spec{.op_type = "MatMul"};
    spec.inputs = {a};
    if (c.constant_b) {
      spec.constants = {{1, b}};
    } else {
      spec.inputs.push_back(b);
    }
    expect_close(run_one_op(spec, 3)[0], reference_matmul(a, b, c.y), 1e-4, 1e-4);
  }
}

/// [.., m, k] x [.., k, n] with equal batch dims, summed in long double straight
/// from the definition, without any Tessera kernel.
Tensor naive_batched_matmul(const Tensor& a, const Tensor& b) {
  Shape out = a.shape();
  out.back() = b.shape().back();
  const int64_t m = a.shape()[a.shape().size() - 2], k = a.shape().back(), n = b.shape().back();
  Tensor y(a.dtype(), out);
  for (int64_t t = 0; t < y.numel() / (m * n); ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        long double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += static_cast<long double>(a.double_at((t * m + i) * k + p)) * b.double_at((t * k + p) * n + j);
        }
        if (y.dtype() == DType::kFloat32) {
          y.as<float>()[(t * m + i) * n + j] = static_cast<float>(sum);
        } else {
          y.as<double>()[(t * m + i) * n + j] = static_cast<double>(sum);
        }
      }
    }
  }
  return y;
}

Tensor to_float64(const Tensor& t) {
  Tensor d(DType::kFloat64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) d.as<double>()[i] = t.as<float>()[i];
  return d;
}

// float64 MatMul runs native::reference_gemm, the reference of the float32
// tests above: both against the definition.
TEST(NnMatMul, Float64AndReferenceGemmMatchNaiveLoops) {
  Tensor a = random_float({3, 17, 33}, 31), b = random_float({3, 33, 19}, 32);
  OneOpGraph spec{.op_type = "MatMul", .inputs = {to_float64(a), to_float64(b)}};
  expect_close(run_one_op(spec)[0], naive_batched_matmul(to_float64(a), to_float64(b)), 1e-12, 1e-12);
  expect_close(reference_matmul(a, b, {3, 17, 19}), naive_batched_matmul(a, b), 1e-5, 1e-5);
  // Transposed operands (strides), accumulation into the output.
  const int64_t m = 7, n = 5, k = 9;
  Tensor at = random_float({k, m}, 33), bt = random_float({n, k}, 34), c = random_float({m, n}, 35);
  Tensor expected = c.clone();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      long double sum = c.as<float>()[i * n + j];
      for (int64_t p = 0; p < k; ++p) sum += static_cast<long double>(at.as<float>()[p * m + i]) * bt.as<float>()[j * k + p];
      expected.as<float>()[i * n + j] = static_cast<float>(sum);
    }
  }
  native::reference_gemm<float>(m, n, k, at.as<float>(), 1, m, bt.as<float>(), 1, k, c.as<float>(), n, true);
  expect_close(c, expected, 1e-5, 1e-5);
}

TEST(NnMatMul, VectorOperands) {
  Tensor a = testing::make_float({3}, {1, 2, 3});
  Tensor b = testing::make_float({3, 2}, {1, 2, 3, 4, 5, 6});
  OneOpGraph spec{.op_type = "MatMul", .inputs = {a, b}};
  expect_close(run_one_op(spec)[0], testing::make_float({2}, {22, 28}));
}

TEST(NnGemm, AttributesAndBroadcastBias) {
  const int64_t m = 19, n = 23, k = 41;
  Tensor a = random_float({k, m}, 21), b = random_float({n, k}, 22), c = random_float({n}, 23);
  const float alpha = 0.5f, beta = -2.0f;
  Tensor expected(DType::kFloat32, {m, n});
  native::reference_gemm<float>(m, n, k, a.as<float>(), 1, m, b.as<float>(), 1, k, expected.as<float>(), n, false);
  for (int64_t i = 0; i < m * n; ++i) expected.as<float>()[i] = alpha * expected.as<float>()[i] + beta * c.as<float>()[i % n];
  for (bool constant_b : {true, false}) {
    OneOpGraph spec{.op_type = "Gemm"};
    spec.attrs.set("transA", Attribute::of_int(1));
    spec.attrs.set("transB", Attribute::of_int(1));
    spec.attrs.set("alpha", Attribute::of_float(alpha));
    spec.attrs.set("beta", Attribute::of_float(beta));
    spec.inputs = {a};
    if (constant_b) {
      spec.constants = {{1, b}, {2, c}};
    } else {
      spec.inputs.push_back(b);
      spec.constants = {{2, c}};
    }
    expect_close(run_one_op(spec, 2)[0], expected, 1e-4, 1e-4);
  }
}

TEST(NnPool, MaxPoolIndicesAndAveragePoolPadding) {
  Tensor x = testing::make_float({1, 1, 3, 3}, {1, 9, 2, 4, 5, 6, 7, 3, 8});
  OneOpGraph max_spec{.op_type = "MaxPool", .inputs = {x}, .num_outputs = 2};
  max_spec.attrs.set("kernel_shape", Attribute::of_ints({2, 2}));
  std::vector<Tensor> out = run_one_op(max_spec);
  expect_close(out[0], testing::make_float({1, 1, 2, 2}, {9, 9, 7, 8}));
  expect_close(out[1], testing::make_int64({1, 1, 2, 2}, {1, 1, 6, 8}));
  OneOpGraph avg_spec{.op_type = "AveragePool", .inputs = {x}};
  avg_spec.attrs.set("kernel_shape", Attribute::of_ints({2, 2}));
  avg_spec.attrs.set("pads", Attribute::of_ints({1, 1, 0, 0}));
  avg_spec.attrs.set("count_include_pad", Attribute::of_int(1));
  // Top-left window covers only x[0][0] plus three padded zeros.
  expect_close(run_one_op(avg_spec)[0], testing::make_float({1, 1, 3, 3}, {0.25f, 2.5f, 2.75f, 1.25f, 4.75f, 5.5f, 2.75f, 4.75f, 5.5f}));
}

// The row-wise 2-D MaxPool (taken when Indices are not asked for) against the
// window walk (taken when they are), over strides, pads, dilations and NaN, on
// rows narrower than a vector and rows of several vectors and a tail (the
// vector passes of nn_pool_rows.h; each ISA's in the ISA-capped runs).
TEST(NnPool, RowWiseMaxPoolMatchesWindowWalk) {
  struct Geometry {
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil_mode;
  };
  const Geometry geometries[] = {
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0}, {{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      {{3, 2}, {1, 3}, {1, 0, 2, 1}, {1, 1}, 0}, {{2, 3}, {2, 1}, {0, 1, 1, 1}, {2, 2}, 1},
      {{5, 5}, {3, 3}, {2, 2, 2, 2}, {1, 1}, 1}, {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0},
      {{2, 1}, {2, 1}, {0, 0, 0, 0}, {1, 1}, 0}, {{1, 3}, {1, 2}, {0, 1, 0, 1}, {1, 2}, 0},
  };
  const Shape shapes[] = {{2, 3, 11, 13}, {1, 2, 9, 75}};
  for (const Shape& shape : shapes) {
    int case_index = 0;
    int geometries_with_nan = 0;
    for (const Geometry& g : geometries) {
      Tensor x = random_float(shape, static_cast<uint32_t>(40 + case_index));
      float* px = x.as<float>();
      px[17] = NAN;  // NaN propagates through every window that holds it
      px[x.numel() - 40] = NAN;
      px[x.numel() / 2] = -INFINITY;  // a window of -inf and values takes the values
      for (int64_t i = shape[3] + 30; i < shape[3] + 45; ++i) px[i] = 7.0f;  // ties
      OneOpGraph spec{.op_type = "MaxPool", .inputs = {x}};
      spec.attrs.set("kernel_shape", Attribute::of_ints(g.kernel));
      spec.attrs.set("strides", Attribute::of_ints(g.strides));
      spec.attrs.set("pads", Attribute::of_ints(g.pads));
      spec.attrs.set("dilations", Attribute::of_ints(g.dilations));
      spec.attrs.set("ceil_mode", Attribute::of_int(g.ceil_mode));
      Tensor fast = run_one_op(spec)[0];
      spec.num_outputs = 2;
      Tensor walked = run_one_op(spec)[0];
      SCOPED_TRACE("input " + shape_to_string(shape) + ", geometry " + std::to_string(case_index++));
      expect_close(fast, walked, 0, 0);
      bool saw_nan = false;
      for (int64_t i = 0; i < fast.numel(); ++i) saw_nan |= std::isnan(fast.as<float>()[i]);
      geometries_with_nan += saw_nan;
    }
    EXPECT_GE(geometries_with_nan, 6);  // a strided or dilated window may step over both NaNs
  }
}

TEST(NnNorm, LayerNormalizationRows) {
  Tensor x = testing::make_float({2, 2}, {1, 3, -2, 2});
  OneOpGraph spec{.op_type = "LayerNormalization", .inputs = {x}, .num_outputs = 3};
  spec.attrs.set("epsilon", Attribute::of_float(0.0f));
  spec.constants = {{1, testing::make_float({2}, {2, 1})}, {2, testing::make_float({2}, {0, 1})}};
  std::vector<Tensor> out = run_one_op(spec);
  expect_close(out[0], testing::make_float({2, 2}, {-2, 2, -2, 2}));
  expect_close(out[1], testing::make_float({2, 1}, {2, 0}));
  expect_close(out[2], testing::make_float({2, 1}, {1, 0.5f}));
}

TEST(NnNorm, LayerNormalizationOfRowsFarFromZeroMatchesDouble) {
  // Rows of 1000 values (blocks of the vectorised sums, and a tail) around 1e4, 1 and
  // -3e3 with small spreads: float rounding of the mean is large against these
  // deviations, and a float sum of the squares would lose them.
  const int64_t cols = 1003;
  const double centres[] = {1e4, 1.0, -3e3}, spreads[] = {0.05, 1e-3, 0.5};
  Tensor x(DType::kFloat32, {3, cols});
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < cols; ++i) x.as<float>()[r * cols + i] = static_cast<float>(centres[r] + spreads[r] * unit(rng));
  OneOpGraph spec{.op_type = "LayerNormalization", .inputs = {x}};
  spec.attrs.set("epsilon", Attribute::of_float(0.0f));
  spec.constants = {{1, testing::make_float({cols}, std::vector<float>(cols, 1.0f))}};
  const Tensor out = run_one_op(spec)[0];
  for (int64_t r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < cols; ++i) mean += x.as<float>()[r * cols + i];
    mean /= cols;
    for (int64_t i = 0; i < cols; ++i) var += (x.as<float>()[r * cols + i] - mean) * (x.as<float>()[r * cols + i] - mean);
    const double inv_std = 1 / std::sqrt(var / cols);
    double worst = 0;
    for (int64_t i = 0; i < cols; ++i) {
      const double expected = (x.as<float>()[r * cols + i] - mean) * inv_std;
      const double error = std::fabs(out.as<float>()[r * cols + i] - expected);
      worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    }
    EXPECT_LT(worst, 2e-6) << "row " << r;  // outputs are within about 1.7 of zero: a few float ulps
  }
}

}  // namespace
}  // namespace tessera
