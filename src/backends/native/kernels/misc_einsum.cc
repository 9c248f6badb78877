// Native kernel of Einsum.
//
// General case: explicit loops over every label (output labels outer,
// summed labels inner), each operand read through per-label strides; a label
// repeated within an operand gets the sum of its dims' strides (a diagonal),
// a broadcast dim stride 0. Fast path: two float operands whose labels split
// into batch (both inputs and output), M (first input and output), N (second
// input and output) and K (both inputs, summed) are permuted to [B, M, K] and
// [B, K, N], multiplied by a blocked matmul, and the [B, M, N] result
// permuted into the output order ("bij,bjk->bik", "bhqd,bhkd->bhqk", ...).
#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/misc_internal.h"
#include "backends/native/kernels/reduction_internal.h"
#include "ir/ops/misc_internal.h"

namespace tessera::native {
namespace {

/// Per-operand stride of each label (0 where absent or broadcast).
std::vector<std::vector<int64_t>> label_strides(const einsum::Equation& eq, const std::vector<const TensorView*>& xs,
                                                const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> strides(xs.size(), std::vector<int64_t>(sizes.size(), 0));
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::vector<int64_t> own = strides_of(xs[i]->shape);
    const std::vector<int>& labels = eq.operand_labels[i];
    for (size_t d = 0; d < labels.size(); ++d) {
      if (xs[i]->shape[d] == 1 && sizes[static_cast<size_t>(labels[d])] != 1) continue;
      strides[i][static_cast<size_t>(labels[d])] += own[d];
    }
  }
  return strides;
}

template <typename T>
void einsum_general(const einsum::Equation& eq, const std::vector<const TensorView*>& xs,
                    const std::vector<int64_t>& sizes, T* out, int64_t out_numel) {
  std::fill(out, out + out_numel, T(0));
  // Loop order: output labels, then every other used label.
  std::vector<int> order = eq.output_labels;
  for (size_t label = 0; label < sizes.size(); ++label) {
    if (sizes[label] < 0) continue;  // unused label
    if (std::find(order.begin(), order.end(), static_cast<int>(label)) == order.end()) {
      order.push_back(static_cast<int>(label));
    }
  }
  std::vector<int64_t> extents;
  for (int label : order) extents.push_back(sizes[static_cast<size_t>(label)]);
  const int64_t total = shape_numel(extents);
  if (total == 0) return;
  const std::vector<std::vector<int64_t>> strides = label_strides(eq, xs, sizes);
  const std::vector<int64_t> out_strides_dense = strides_of(Shape(extents.begin(), extents.begin() + static_cast<std::ptrdiff_t>(eq.output_labels.size())));
  const size_t k = xs.size();
  // step[i][p]: stride of operand i (i == k: the output) along loop position p.
  std::vector<std::vector<int64_t>> step(k + 1, std::vector<int64_t>(order.size(), 0));
  for (size_t p = 0; p < order.size(); ++p) {
    for (size_t i = 0; i < k; ++i) step[i][p] = strides[i][static_cast<size_t>(order[p])];
    if (p < eq.output_labels.size()) step[k][p] = out_strides_dense[p];
  }
  std::vector<int64_t> index(order.size(), 0), offset(k + 1, 0);
  for (int64_t it = 0; it < total; ++it) {
    T product = T(1);
    for (size_t i = 0; i < k; ++i) product = static_cast<T>(product * xs[i]->as<T>()[offset[i]]);
    out[offset[k]] = static_cast<T>(out[offset[k]] + product);
    for (size_t p = order.size(); p-- > 0;) {
      for (size_t i = 0; i <= k; ++i) offset[i] += step[i][p];
      if (++index[p] < extents[p]) break;
      for (size_t i = 0; i <= k; ++i) offset[i] -= step[i][p] * extents[p];
      index[p] = 0;
    }
  }
}

/// The fast path's plan, or nullopt when the equation does not fit it.
struct MatmulPlan {
  std::vector<int64_t> perm_a, perm_b, perm_out;  // perm_out maps [B, M, N] dims to the output order
  int64_t batch = 1, m = 1, n = 1, k = 1;
};

std::optional<MatmulPlan> plan_matmul(const einsum::Equation& eq, const std::vector<const TensorView*>& xs,
                                      const std::vector<int64_t>& sizes) {
  if (xs.size() != 2) return std::nullopt;
  const std::vector<int>& a = eq.operand_labels[0];
  const std::vector<int>& b = eq.operand_labels[1];
  const std::vector<int>& out = eq.output_labels;
  auto position = [](const std::vector<int>& v, int label) {
    auto it = std::find(v.begin(), v.end(), label);
    return it == v.end() ? int64_t{-1} : static_cast<int64_t>(it - v.begin());
  };
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<int>& labels = eq.operand_labels[i];
    for (size_t d = 0; d < labels.size(); ++d) {
      // No diagonals, no broadcasting.
      if (position(labels, labels[d]) != static_cast<int64_t>(d)) return std::nullopt;
      if (xs[i]->shape[d] != sizes[static_cast<size_t>(labels[d])]) return std::nullopt;
    }
  }
  std::vector<int> batch, m, n, k;
  for (int label : a) {
    const bool in_b = position(b, label) >= 0, in_out = position(out, label) >= 0;
    if (in_b && in_out) batch.push_back(label);
    else if (in_out) m.push_back(label);
    else if (in_b) k.push_back(label);
    else return std::nullopt;  // summed within one operand only
  }
  for (int label : b) {
    if (position(a, label) >= 0) continue;
    if (position(out, label) < 0) return std::nullopt;
    n.push_back(label);
  }
  MatmulPlan plan;
  auto take = [&](std::vector<int64_t>& perm, const std::vector<int>& labels, const std::vector<int>& group,
                  int64_t* extent) {
    for (int label : group) {
      perm.push_back(position(labels, label));
      if (extent) *extent *= sizes[static_cast<size_t>(label)];
    }
  };
  take(plan.perm_a, a, batch, &plan.batch);
  take(plan.perm_a, a, m, &plan.m);
  take(plan.perm_a, a, k, &plan.k);
  take(plan.perm_b, b, batch, nullptr);
  take(plan.perm_b, b, k, nullptr);
  take(plan.perm_b, b, n, &plan.n);
  std::vector<int> product_labels = batch;
  product_labels.insert(product_labels.end(), m.begin(), m.end());
  product_labels.insert(product_labels.end(), n.begin(), n.end());
  for (int label : out) plan.perm_out.push_back(position(product_labels, label));
  return plan;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

/// The input permuted by perm, or the input itself when perm is the identity.
template <typename T>
const T* permuted(const TensorView& x, const std::vector<int64_t>& perm, std::vector<T>& storage) {
  if (is_identity(perm)) return x.as<T>();
  storage.resize(static_cast<size_t>(x.numel()));
  permute_copy(x.as<T>(), x.shape, perm, storage.data());
  return storage.data();
}

template <typename T>
void einsum_matmul(const MatmulPlan& plan, const einsum::Equation& eq, const std::vector<const TensorView*>& xs,
                   const std::vector<int64_t>& sizes, T* out, ThreadPool& pool) {
  std::vector<T> a_storage, b_storage, c_storage;
  const T* a = permuted(*xs[0], plan.perm_a, a_storage);
  const T* b = permuted(*xs[1], plan.perm_b, b_storage);
  T* c = out;
  if (!is_identity(plan.perm_out)) {
    c_storage.resize(static_cast<size_t>(plan.batch * plan.m * plan.n));
    c = c_storage.data();
  }
  batched_matmul(a, b, c, plan.batch, plan.m, plan.k, plan.n, pool);
  if (c == out) return;
  // The product's shape, by label, in [batch, M, N] order.
  Shape product_shape(plan.perm_out.size());
  for (size_t i = 0; i < eq.output_labels.size(); ++i) {
    product_shape[static_cast<size_t>(plan.perm_out[i])] = sizes[static_cast<size_t>(eq.output_labels[i])];
  }
  permute_copy(c, product_shape, plan.perm_out, out);
}

}  // namespace

void einsum_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, einsum_kernel)) return;
  std::vector<const TensorView*> xs;
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    xs.push_back(&ctx.input(i));
    ranks.push_back(xs.back()->rank());
    shapes.push_back(xs.back()->shape);
    if (xs.back()->dtype != xs[0]->dtype) ctx.fail("inputs have different dtypes");
  }
  einsum::Equation eq;
  std::vector<int64_t> sizes;
  try {
    eq = einsum::parse(ctx.attrs().get_string_or("equation", ""), ranks);
    sizes = einsum::label_sizes(eq, shapes);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
  TensorView& y = ctx.output(0);
  dispatch_numeric(xs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::optional<MatmulPlan> plan = plan_matmul(eq, xs, sizes)) {
        if (y.numel() > 0) einsum_matmul<T>(*plan, eq, xs, sizes, y.as<T>(), ctx.pool());
        return;
      }
    }
    einsum_general<T>(eq, xs, sizes, y.as<T>(), y.numel());
  });
}

}  // namespace tessera::native
