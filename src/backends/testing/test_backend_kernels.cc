// The test backend's kernels: plain loops on host float32 buffers. Speed does
// not matter here; being obviously right does, since the tests compare the
// whole backend (memory space, payload, runtime copies) with the native one.
// Callers have checked shapes (check_program_against) before these run.
#include <algorithm>
#include <cmath>

#include "backends/testing/test_backend_internal.h"
#include "ir/error.h"

namespace tessera::test_backend {
namespace {

/// Row-major strides of `shape` placed right-aligned in a shape of rank
/// `rank`, with 0 for broadcast (size-1 or missing) dimensions.
std::vector<int64_t> broadcast_strides(const Shape& shape, size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t dim = shape.size() - 1 - i;
    const size_t out_dim = rank - 1 - i;
    strides[out_dim] = shape[dim] == 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return strides;
}

/// Calls f(offset_a, offset_b) for every element of out_shape in row-major order.
template <typename F>
void for_each_broadcast(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape, F f) {
  const size_t rank = out_shape.size();
  const std::vector<int64_t> a_strides = broadcast_strides(a_shape, rank);
  const std::vector<int64_t> b_strides = broadcast_strides(b_shape, rank);
  const int64_t total = shape_numel(out_shape);
  std::vector<int64_t> index(rank, 0);
  int64_t a_offset = 0, b_offset = 0;
  for (int64_t n = 0; n < total; ++n) {
    f(a_offset, b_offset);
    // Odometer step: bump the last dimension, carrying into earlier ones.
    for (size_t d = rank; d-- > 0;) {
      ++index[d];
      a_offset += a_strides[d];
      b_offset += b_strides[d];
      if (index[d] < out_shape[d]) break;
      a_offset -= a_strides[d] * index[d];
      b_offset -= b_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

float apply_binary(Opcode opcode, float a, float b) {
  switch (opcode) {
    case Opcode::kAdd: return a + b;
    case Opcode::kSub: return a - b;
    case Opcode::kMul: return a * b;
    case Opcode::kDiv: return a / b;
    default: throw_internal_error("test backend: ", opcode_name(opcode), " is not a binary op");
  }
}

}  // namespace

bool broadcast_shape(const Shape& a, const Shape& b, Shape& out) {
  const size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return true;
}

bool matmul_shape(const Shape& a, const Shape& b, Shape& out) {
  if (a.size() < 2 || b.size() < 2) return false;
  if (a[a.size() - 1] != b[b.size() - 2]) return false;
  Shape batch;
  if (!broadcast_shape(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), batch)) return false;
  out = batch;
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return true;
}

void run_unary(Opcode opcode, const Floats& input, Floats& output) {
  output.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const float x = input[i];
    float y = 0;
    switch (opcode) {
      case Opcode::kRelu: y = x > 0 ? x : 0.0f; break;
      case Opcode::kSigmoid: y = 1.0f / (1.0f + std::exp(-x)); break;
      case Opcode::kTanh: y = std::tanh(x); break;
      case Opcode::kNeg: y = -x; break;
      case Opcode::kAbs: y = std::fabs(x); break;
      case Opcode::kExp: y = std::exp(x); break;
      default: throw_internal_error("test backend: ", opcode_name(opcode), " is not a unary op");
    }
    output[i] = y;
  }
}

void run_binary(Opcode opcode, const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape,
                Floats& output, const Shape& out_shape) {
  output.resize(static_cast<size_t>(shape_numel(out_shape)));
  size_t n = 0;
  for_each_broadcast(a_shape, b_shape, out_shape, [&](int64_t ia, int64_t ib) {
    output[n++] = apply_binary(opcode, a[static_cast<size_t>(ia)], b[static_cast<size_t>(ib)]);
  });
}

void run_matmul(const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape, Floats& output,
                const Shape& out_shape) {
  const int64_t m = a_shape[a_shape.size() - 2];
  const int64_t k = a_shape[a_shape.size() - 1];
  const int64_t n = b_shape[b_shape.size() - 1];
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  const Shape out_batch(out_shape.begin(), out_shape.end() - 2);
  output.assign(static_cast<size_t>(shape_numel(out_shape)), 0.0f);
  int64_t batch = 0;
  // Batch offsets come in units of whole matrices, then scale to elements.
  for_each_broadcast(a_batch, b_batch, out_batch, [&](int64_t a_matrix, int64_t b_matrix) {
    const float* a_data = a.data() + a_matrix * m * k;
    const float* b_data = b.data() + b_matrix * k * n;
    float* out = output.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += a_data[i * k + p] * b_data[p * n + j];
        out[i * n + j] = sum;
      }
    }
    ++batch;
  });
}

void run_gemm(const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape, const Floats& c,
              const Shape& c_shape, bool trans_a, bool trans_b, float alpha, float beta, Floats& output,
              const Shape& out_shape) {
  const int64_t m = out_shape[0];
  const int64_t n = out_shape[1];
  const int64_t k = trans_a ? a_shape[0] : a_shape[1];
  const int64_t a_columns = a_shape[1];
  const int64_t b_columns = b_shape[1];
  output.assign(static_cast<size_t>(m * n), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const int64_t a_index = trans_a ? p * a_columns + i : i * a_columns + p;
        const int64_t b_index = trans_b ? j * b_columns + p : p * b_columns + j;
        const float av = a[static_cast<size_t>(a_index)];
        const float bv = b[static_cast<size_t>(b_index)];
        sum += av * bv;
      }
      output[static_cast<size_t>(i * n + j)] = alpha * sum;
    }
  }
  if (c.empty()) return;  // no C (or an empty output)
  size_t index = 0;
  for_each_broadcast(out_shape, c_shape, out_shape, [&](int64_t, int64_t ic) {
    output[index++] += beta * c[static_cast<size_t>(ic)];
  });
}

void run_softmax(const Floats& input, const Shape& shape, int64_t axis, Floats& output) {
  output.resize(input.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t length = shape[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * length * inner + i;
      float max_value = -INFINITY;
      for (int64_t a = 0; a < length; ++a) {
        max_value = std::max(max_value, input[static_cast<size_t>(base + a * inner)]);
      }
      float sum = 0;
      for (int64_t a = 0; a < length; ++a) {
        const float e = std::exp(input[static_cast<size_t>(base + a * inner)] - max_value);
        output[static_cast<size_t>(base + a * inner)] = e;
        sum += e;
      }
      for (int64_t a = 0; a < length; ++a) output[static_cast<size_t>(base + a * inner)] /= sum;
    }
  }
}

void run_transpose(const Floats& input, const Shape& shape, const std::vector<int64_t>& perm, Floats& output) {
  const size_t rank = shape.size();
  output.resize(input.size());
  std::vector<int64_t> input_strides(rank, 1);
  int64_t stride = 1;
  for (size_t i = 0; i < rank; ++i) {
    input_strides[rank - 1 - i] = stride;
    stride *= shape[rank - 1 - i];
  }
  Shape out_shape(rank);
  std::vector<int64_t> strides(rank);  // per output dim: the input stride it walks
  for (size_t d = 0; d < rank; ++d) {
    out_shape[d] = shape[static_cast<size_t>(perm[d])];
    strides[d] = input_strides[static_cast<size_t>(perm[d])];
  }
  // Each output element's index, digit by digit from the last dim, picks its input offset.
  const int64_t total = shape_numel(out_shape);
  for (int64_t n = 0; n < total; ++n) {
    int64_t remainder = n, offset = 0;
    for (size_t i = 0; i < rank; ++i) {
      const size_t d = rank - 1 - i;
      offset += (remainder % out_shape[d]) * strides[d];
      remainder /= out_shape[d];
    }
    output[static_cast<size_t>(n)] = input[static_cast<size_t>(offset)];
  }
}

void run_gelu(const Floats& input, float divisor, float addend, float scale, Floats& output) {
  output.resize(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const float x = input[i];
    output[i] = (x * (std::erf(x / divisor) + addend)) * scale;
  }
}

}  // namespace tessera::test_backend
