// Native kernel of Unique: distinct elements (or slices along an axis), in
// order of first occurrence or sorted, with first indices, inverse indices
// and counts.
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

/// Lexicographic order of equal-length slices. Written out because GCC 12
/// warns falsely about the memcmp std::vector<uint8_t>'s operator< uses.
template <typename T>
struct SliceLess {
  bool operator()(const std::vector<T>& a, const std::vector<T>& b) const {
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] < b[i]) return true;
      if (b[i] < a[i]) return false;
    }
    return false;
  }
};

template <typename T>
void unique_impl(KernelContext& ctx, const TensorView& x) {
  int64_t outer = 1, dim = x.numel(), inner = 1;
  size_t axis = 0;
  const bool has_axis = ctx.attrs().has("axis");
  if (has_axis) {
    axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int("axis"), x.rank()));
    for (size_t d = 0; d < axis; ++d) outer *= x.shape[d];
    dim = x.shape[axis];
    for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  }
  const T* data = x.as<T>();
  // Slice j holds the elements (o, j, i) for all o, i.
  auto slice = [&](int64_t j) {
    std::vector<T> s(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::copy(data + (o * dim + j) * inner, data + (o * dim + j + 1) * inner, s.begin() + o * inner);
    }
    return s;
  };
  std::map<std::vector<T>, int64_t, SliceLess<T>> position;  // slice -> index into `first`
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(dim));
  for (int64_t j = 0; j < dim; ++j) {
    auto [it, inserted] = position.emplace(slice(j), static_cast<int64_t>(first.size()));
    if (inserted) {
      first.push_back(j);
      counts.push_back(0);
    }
    ++counts[static_cast<size_t>(it->second)];
    inverse[static_cast<size_t>(j)] = it->second;
  }
  const size_t unique = first.size();
  std::vector<int64_t> order(unique);  // output slot -> first-occurrence rank
  std::iota(order.begin(), order.end(), 0);
  if (ctx.attrs().get_int_or("sorted", 1) != 0) {
    size_t slot = 0;
    for (const auto& entry : position) order[slot++] = entry.second;  // std::map iterates in sorted order
  }
  std::vector<int64_t> slot_of(unique);
  for (size_t s = 0; s < unique; ++s) slot_of[static_cast<size_t>(order[s])] = static_cast<int64_t>(s);

  Shape y_shape = has_axis ? x.shape : Shape{0};
  y_shape[axis] = static_cast<int64_t>(unique);
  T* y = ctx.allocate_output(0, x.dtype, y_shape).template as<T>();
  for (size_t s = 0; s < unique; ++s) {
    const int64_t j = first[static_cast<size_t>(order[s])];
    for (int64_t o = 0; o < outer; ++o) {
      std::copy(data + (o * dim + j) * inner, data + (o * dim + j + 1) * inner,
                y + (o * static_cast<int64_t>(unique) + static_cast<int64_t>(s)) * inner);
    }
  }
  auto write = [&](size_t output, size_t n, auto value_of) {
    if (ctx.num_outputs() <= output || !ctx.has_output(output)) return;
    int64_t* p = ctx.allocate_output(output, DType::kInt64, {static_cast<int64_t>(n)}).template as<int64_t>();
    for (size_t i = 0; i < n; ++i) p[i] = value_of(i);
  };
  write(1, unique, [&](size_t s) { return first[static_cast<size_t>(order[s])]; });
  write(2, static_cast<size_t>(dim), [&](size_t j) { return slot_of[static_cast<size_t>(inverse[j])]; });
  write(3, unique, [&](size_t s) { return counts[static_cast<size_t>(order[s])]; });
}

void unique_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype == DType::kBool) return unique_impl<uint8_t>(ctx, x);
  dispatch_numeric(x.dtype, [&](auto tag) { unique_impl<decltype(tag)>(ctx, x); });
}

}  // namespace

void register_unique_kernel(KernelRegistry& registry) { registry.add({.op_type = "Unique", .run = unique_kernel}); }

}  // namespace tessera::native
