// Tensor op family: registration, and the shape arithmetic shared by shape
// inference and the native kernels (declared in tensor_internal.h).
#include <algorithm>

#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera {

Tensor int64_tensor(const std::vector<int64_t>& values) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.as<int64_t>());
  return t;
}

Shape reshape_output_shape(const Node& node, const Shape& input, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.size());
  int64_t inferred = -1;
  int64_t known_product = 1;
  bool product_known = true;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t == -1) {
      if (inferred >= 0) throw_user_error(node.describe(), ": shape has more than one -1");
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (t < -1) throw_user_error(node.describe(), ": shape value ", t, " is invalid");
    if (t == 0 && !allowzero) {
      if (i >= input.size()) {
        throw_user_error(node.describe(), ": shape value 0 at position ", i, " copies a dim the input (rank ",
                         input.size(), ") does not have");
      }
      t = input[i];
    }
    if (t == 0) has_zero = true;
    out[i] = t;
    if (t < 0) {
      product_known = false;
    } else if (__builtin_mul_overflow(known_product, t, &known_product)) {
      throw_user_error(node.describe(), ": shape ", shape_to_string(target), " has too many elements");
    }
  }
  if (allowzero && has_zero && inferred >= 0) {
    throw_user_error(node.describe(), ": with allowzero=1 the shape cannot contain both 0 and -1");
  }
  bool input_known = std::all_of(input.begin(), input.end(), [](int64_t d) { return d >= 0; });
  int64_t input_numel = input_known ? shape_numel(input) : -1;
  if (inferred >= 0) {
    if (!input_known || !product_known) {
      out[static_cast<size_t>(inferred)] = -1;
    } else if (known_product == 0 || input_numel % known_product != 0) {
      throw_user_error(node.describe(), ": cannot reshape ", shape_to_string(input), " into shape with -1 (the other dims ",
                       "multiply to ", known_product, ")");
    } else {
      out[static_cast<size_t>(inferred)] = input_numel / known_product;
    }
  } else if (input_known && product_known && known_product != input_numel) {
    throw_user_error(node.describe(), ": cannot reshape ", shape_to_string(input), " (", input_numel,
                     " elements) into ", shape_to_string(out));
  }
  return out;
}

SliceSpec resolve_slice(const Node& node, const Shape& input, const std::vector<int64_t>& starts,
                        const std::vector<int64_t>& ends, const std::optional<std::vector<int64_t>>& axes,
                        const std::optional<std::vector<int64_t>>& steps) {
  const int64_t rank = static_cast<int64_t>(input.size());
  if (starts.size() != ends.size()) {
    throw_user_error(node.describe(), ": starts has ", starts.size(), " values but ends has ", ends.size());
  }
  if (axes && axes->size() != starts.size()) {
    throw_user_error(node.describe(), ": axes has ", axes->size(), " values, expected ", starts.size());
  }
  if (steps && steps->size() != starts.size()) {
    throw_user_error(node.describe(), ": steps has ", steps->size(), " values, expected ", starts.size());
  }
  SliceSpec spec;
  spec.starts.assign(input.size(), 0);
  spec.steps.assign(input.size(), 1);
  spec.output = input;
  std::vector<bool> seen(input.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
    if (axis < -rank || axis >= rank) throw_user_error(node.describe(), ": axis ", axis, " is out of range for rank ", rank);
    if (axis < 0) axis += rank;
    const size_t a = static_cast<size_t>(axis);
    if (seen[a]) throw_user_error(node.describe(), ": axis ", axis, " appears twice in axes");
    seen[a] = true;
    const int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) throw_user_error(node.describe(), ": step 0 on axis ", axis);
    spec.steps[a] = step;
    const int64_t dim = input[a];
    if (dim < 0) {  // unknown at compile time
      spec.output[a] = -1;
      continue;
    }
    // Clamp in a wide type: starts/ends are often INT64_MAX or INT64_MIN.
    auto wrap = [dim](int64_t v) { return v < 0 ? (v < -dim ? -dim - 1 : v) + dim : v; };
    int64_t start = wrap(starts[i]);
    int64_t end = wrap(ends[i]);
    int64_t length;
    if (dim == 0) {
      length = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      length = end > start ? 1 + (end - start - 1) / step : 0;  // no overflow with step = INT64_MAX
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // step may be INT64_MIN, whose negation does not fit in int64.
      length = start > end ? static_cast<int64_t>(1 + static_cast<__int128>(start - end - 1) / -static_cast<__int128>(step)) : 0;
    }
    spec.starts[a] = length > 0 ? start : 0;
    // A step matters only between two elements; then |step| < dim, so step * stride cannot overflow.
    if (length <= 1) spec.steps[a] = 1;
    spec.output[a] = length;
  }
  return spec;
}

std::vector<int64_t> resolve_pads(const Node& node, int64_t rank, const std::vector<int64_t>& pads,
                                  const std::optional<std::vector<int64_t>>& axes) {
  std::vector<int64_t> axis_list;
  if (axes) {
    for (int64_t a : *axes) {
      if (a < -rank || a >= rank) throw_user_error(node.describe(), ": axis ", a, " is out of range for rank ", rank);
      axis_list.push_back(a < 0 ? a + rank : a);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axis_list.push_back(a);
  }
  const size_t n = axis_list.size();
  if (pads.size() != 2 * n) {
    throw_user_error(node.describe(), ": pads has ", pads.size(), " values, expected ", 2 * n, " (2 per padded axis)");
  }
  std::vector<int64_t> full(2 * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < n; ++i) {
    full[static_cast<size_t>(axis_list[i])] = pads[i];
    full[static_cast<size_t>(axis_list[i] + rank)] = pads[i + n];
  }
  return full;
}

std::vector<int64_t> resolve_split(const Node& node, int64_t dim, size_t num_outputs,
                                   const std::optional<std::vector<int64_t>>& split) {
  if (split) {
    if (split->size() != num_outputs) {
      throw_user_error(node.describe(), ": split has ", split->size(), " values for ", num_outputs, " outputs");
    }
    int64_t total = 0;
    for (int64_t s : *split) {
      if (s < 0) throw_user_error(node.describe(), ": split value ", s, " is negative");
      total += s;
    }
    if (dim >= 0 && total != dim) {
      throw_user_error(node.describe(), ": split values sum to ", total, " but the axis has ", dim, " elements");
    }
    return *split;
  }
  std::vector<int64_t> sizes(num_outputs, -1);
  if (dim < 0) return sizes;
  const int64_t n = static_cast<int64_t>(num_outputs);
  const int64_t chunk = (dim + n - 1) / n;
  int64_t left = dim;
  for (size_t i = 0; i < num_outputs; ++i) {
    sizes[i] = std::min(chunk, left);
    left -= sizes[i];
  }
  return sizes;
}

void register_tensor_ops(OpRegistry& registry) {
  register_tensor_shape_ops(registry);
  register_tensor_layout_ops(registry);
  register_tensor_index_ops(registry);
}

}  // namespace tessera
