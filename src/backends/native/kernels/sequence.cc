// Kernels of the sequence and optional family (schemas in src/ir/ops/sequence.cc).
// A sequence or optional lives in a BoxedValue; a tensor put into one is
// copied out of the run's memory (which later nodes reuse), and boxes share
// their tensors afterwards, which nothing writes in place.
#include <cstring>
#include <numeric>

#include "backends/native/kernels/controlflow_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

const BoxedValue& sequence_in(const KernelContext& ctx, size_t i) {
  const BoxedValue* box = ctx.boxed_input(i);
  if (!box) ctx.fail("input ", i, " must be a sequence, got a tensor");
  if (box->kind != ValueKind::kSequence) ctx.fail("input ", i, " must be a sequence, got ", value_kind_phrase(box->kind));
  return *box;
}

BoxedValue& sequence_out(const KernelContext& ctx, size_t i) {
  BoxedValue* box = ctx.boxed_output(i);
  if (!box) ctx.fail("output ", i, " must be a sequence");
  box->kind = ValueKind::kSequence;
  box->present = true;
  return *box;
}

/// The output view for a tensor of `dtype` and `shape`, allocated unless already planned so.
TensorView& tensor_out(const KernelContext& ctx, size_t i, DType dtype, const Shape& shape) {
  TensorView& out = ctx.output(i);
  if (!out.data || out.dtype != dtype || out.shape != shape) ctx.allocate_output(i, dtype, shape);
  return out;
}

void copy_to_output(const KernelContext& ctx, size_t i, const Tensor& value) {
  TensorView& out = tensor_out(ctx, i, value.dtype(), value.shape());
  if (value.nbytes()) std::memcpy(out.data, value.data(), value.nbytes());
}

/// A position input: the index it names in a sequence of `size` tensors, which
/// may be `size` itself where `one_past_end` (an insert at the end).
size_t position(const KernelContext& ctx, size_t input, size_t size, bool one_past_end) {
  const TensorView& p = ctx.input(input);
  if (p.numel() != 1) ctx.fail("position must be a scalar, got shape ", shape_to_string(p.shape));
  const int64_t n = static_cast<int64_t>(size);
  const int64_t raw = view_int_at(p, 0);
  const int64_t last = one_past_end ? n : n - 1;
  if (raw < -n || raw > last) {
    ctx.fail("position ", raw, " is out of range for a sequence of ", size, " tensor", size == 1 ? "" : "s",
             " (valid: ", -n, " to ", last, ")");
  }
  return static_cast<size_t>(raw < 0 ? raw + n : raw);
}

void check_dtype(const KernelContext& ctx, const BoxedValue& sequence, DType dtype, const char* what) {
  if (!sequence.items.empty() && sequence.items.front().dtype() != dtype) {
    ctx.fail(what, " is ", dtype_name(dtype), " but the sequence holds ", dtype_name(sequence.items.front().dtype()));
  }
}

/// A sequence may hold at most 2^24 tensors: a Loop that inserts empty tensors without end fails here.
/// Their bytes need no sum (it made every insert O(length), a list built in a Loop quadratic): each
/// tensor put in a sequence is its own allocation, bounded like any tensor (check_tensor_size), so the
/// allocator fails before a sum could.
constexpr size_t kMaxSequenceLength = size_t{1} << 24;

void check_sequence_size(const KernelContext& ctx, const std::vector<Tensor>& items) {
  if (items.size() > kMaxSequenceLength) {
    ctx.fail("the sequence would hold ", items.size(), " tensors, more than the ", kMaxSequenceLength, " allowed");
  }
}

void sequence_empty_kernel(KernelContext& ctx) { sequence_out(ctx, 0).items.clear(); }

void sequence_construct_kernel(KernelContext& ctx) {
  BoxedValue result;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorView& t = ctx.input(i);
    check_dtype(ctx, result, t.dtype, ("input " + std::to_string(i)).c_str());
    result.items.push_back(Tensor::from_view(t));
  }
  sequence_out(ctx, 0).items = std::move(result.items);
}

void sequence_insert_kernel(KernelContext& ctx) {
  const BoxedValue& in = sequence_in(ctx, 0);
  const TensorView& t = ctx.input(1);
  check_dtype(ctx, in, t.dtype, "the tensor");
  const size_t at = ctx.has_input(2) ? position(ctx, 2, in.items.size(), true) : in.items.size();
  // The last reader of the input sequence takes its tensors over: a Loop that appends does not copy the list.
  BoxedValue* own = ctx.take_boxed_input(0);
  std::vector<Tensor> items = own ? std::move(own->items) : in.items;
  items.insert(items.begin() + static_cast<ptrdiff_t>(at), Tensor::from_view(t));
  check_sequence_size(ctx, items);
  sequence_out(ctx, 0).items = std::move(items);
}

void sequence_at_kernel(KernelContext& ctx) {
  const BoxedValue& in = sequence_in(ctx, 0);
  copy_to_output(ctx, 0, in.items[position(ctx, 1, in.items.size(), false)]);
}

void sequence_erase_kernel(KernelContext& ctx) {
  const BoxedValue& in = sequence_in(ctx, 0);
  if (in.items.empty()) ctx.fail("cannot erase from an empty sequence");
  const size_t at = ctx.has_input(1) ? position(ctx, 1, in.items.size(), false) : in.items.size() - 1;
  BoxedValue* own = ctx.take_boxed_input(0);
  std::vector<Tensor> items = own ? std::move(own->items) : in.items;
  items.erase(items.begin() + static_cast<ptrdiff_t>(at));
  sequence_out(ctx, 0).items = std::move(items);
}

void sequence_length_kernel(KernelContext& ctx) {
  const BoxedValue& in = sequence_in(ctx, 0);
  *tensor_out(ctx, 0, DType::kInt64, {}).as<int64_t>() = static_cast<int64_t>(in.items.size());
}

/// Rows [start, start + length) of `x` along `axis`, as a new tensor.
Tensor slice_along(const TensorView& x, size_t axis, int64_t start, int64_t length) {
  Shape shape = x.shape;
  shape[axis] = length;
  Tensor out(x.dtype, shape);
  const int64_t outer = std::accumulate(x.shape.begin(), x.shape.begin() + static_cast<ptrdiff_t>(axis), int64_t{1},
                                        std::multiplies<>());
  const int64_t inner = std::accumulate(x.shape.begin() + static_cast<ptrdiff_t>(axis) + 1, x.shape.end(), int64_t{1},
                                        std::multiplies<>()) *
                        static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t dim = x.shape[axis];
  const auto* src = static_cast<const char*>(x.data);
  auto* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer && length * inner > 0; ++o) {
    std::memcpy(dst + o * length * inner, src + (o * dim + start) * inner, static_cast<size_t>(length * inner));
  }
  return out;
}

void split_to_sequence_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail("cannot split a scalar");
  int64_t axis = ctx.attrs().get_int_or("axis", 0);
  if (axis < -x.rank() || axis >= x.rank()) ctx.fail("axis ", axis, " is out of range for rank ", x.rank());
  if (axis < 0) axis += x.rank();
  const size_t a = static_cast<size_t>(axis);
  const int64_t dim = x.shape[a];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = ctx.attrs().get_int_or("keepdims", 1) == 0;
  } else {
    const TensorView& split = ctx.input(1);
    if (split.rank() == 0) {
      const int64_t chunk = view_int_at(split, 0);
      if (chunk <= 0) ctx.fail("split must be positive, got ", chunk);
      for (int64_t start = 0; start < dim; start += chunk) sizes.push_back(std::min(chunk, dim - start));
    } else {
      if (split.rank() != 1) ctx.fail("split must be a scalar or 1-D, got shape ", shape_to_string(split.shape));
      int64_t total = 0;
      for (int64_t k = 0; k < split.numel(); ++k) {
        const int64_t s = view_int_at(split, k);
        if (s < 0) ctx.fail("split ", k, " is negative (", s, ")");
        sizes.push_back(s);
        total += s;
      }
      if (total != dim) ctx.fail("the splits sum to ", total, " but axis ", axis, " has ", dim);
    }
  }
  BoxedValue result;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Tensor part = slice_along(x, a, start, size);
    if (squeeze) {
      Shape shape = part.shape();
      shape.erase(shape.begin() + static_cast<ptrdiff_t>(a));
      part = part.reshaped(shape);
    }
    result.items.push_back(std::move(part));
    start += size;
  }
  sequence_out(ctx, 0).items = std::move(result.items);
}

void concat_from_sequence_kernel(KernelContext& ctx) {
  const BoxedValue& in = sequence_in(ctx, 0);
  if (in.items.empty()) ctx.fail("cannot concatenate an empty sequence");
  const bool new_axis = ctx.attrs().get_int_or("new_axis", 0) == 1;
  const Tensor& first = in.items.front();
  const int64_t rank = static_cast<int64_t>(first.shape().size()) + (new_axis ? 1 : 0);
  int64_t axis = ctx.attrs().get_int("axis");
  if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const size_t a = static_cast<size_t>(axis);
  // Each tensor as a view with the concatenation axis present (length 1 when stacking).
  std::vector<Shape> shapes;
  for (size_t k = 0; k < in.items.size(); ++k) {
    Shape s = in.items[k].shape();
    if (new_axis) s.insert(s.begin() + static_cast<ptrdiff_t>(a), 1);
    if (s.size() != static_cast<size_t>(rank)) {
      ctx.fail("tensor ", k, " has rank ", in.items[k].shape().size(), " but tensor 0 has ", first.shape().size());
    }
    for (size_t d = 0; d < s.size(); ++d) {
      if (!shapes.empty() && d != a && s[d] != shapes.front()[d]) {
        ctx.fail("tensor ", k, " is [", shape_to_string(in.items[k].shape()), "] but tensor 0 is [",
                 shape_to_string(first.shape()), "]; they may differ only along axis ", axis);
      }
    }
    shapes.push_back(std::move(s));
  }
  Shape out_shape = shapes.front();
  out_shape[a] = 0;
  for (const Shape& s : shapes) out_shape[a] += s[a];
  TensorView& out = tensor_out(ctx, 0, first.dtype(), out_shape);
  const int64_t outer = std::accumulate(out_shape.begin(), out_shape.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(out_shape.begin() + axis + 1, out_shape.end(), int64_t{1}, std::multiplies<>()) *
                        static_cast<int64_t>(dtype_size(first.dtype()));
  auto* dst = static_cast<char*>(out.data);
  const int64_t out_row = out_shape[a] * inner;
  int64_t offset = 0;
  for (size_t k = 0; k < in.items.size(); ++k) {
    if (in.items[k].dtype() != first.dtype()) ctx.fail("tensor ", k, " is ", dtype_name(in.items[k].dtype()), " but tensor 0 is ", dtype_name(first.dtype()));
    const int64_t row = shapes[k][a] * inner;
    const auto* src = static_cast<const char*>(in.items[k].data());
    for (int64_t o = 0; o < outer && row > 0; ++o) std::memcpy(dst + o * out_row + offset, src + o * row, static_cast<size_t>(row));
    offset += row;
  }
}

void optional_kernel(KernelContext& ctx) {
  BoxedValue* out = ctx.boxed_output(0);
  if (!out) ctx.fail("output 0 must be an optional");
  if (const BoxedValue* in = ctx.boxed_input(0)) {
    if (in->kind != ValueKind::kSequence) ctx.fail("input 0 is already ", value_kind_phrase(in->kind));
    *out = *in;
    out->kind = ValueKind::kOptionalSequence;
    return;
  }
  if (ctx.has_input(0)) {
    *out = BoxedValue{ValueKind::kOptionalTensor, true, {Tensor::from_view(ctx.input(0))}};
    return;
  }
  const Attribute* type = ctx.attrs().find("type");
  const TensorType t = type ? decode_type_attribute(type->ints, ctx.node().describe()) : TensorType{};
  *out = BoxedValue{t.is_tensor() ? ValueKind::kOptionalTensor : ValueKind::kOptionalSequence, false, {}};
}

void optional_has_element_kernel(KernelContext& ctx) {
  bool present = ctx.has_input(0);  // a tensor (opset 18) is present
  if (const BoxedValue* in = ctx.boxed_input(0)) present = in->present;
  *tensor_out(ctx, 0, DType::kBool, {}).as<uint8_t>() = present ? 1 : 0;
}

void optional_get_element_kernel(KernelContext& ctx) {
  const BoxedValue* in = ctx.boxed_input(0);
  if (!in) return copy_to_output(ctx, 0, Tensor::from_view(ctx.input(0)));  // a tensor passes through (opset 18)
  if (!in->present) ctx.fail("the optional input is empty");
  if (in->kind == ValueKind::kOptionalTensor) {
    if (in->items.size() != 1) ctx.fail("an optional tensor holds ", in->items.size(), " tensors");
    return copy_to_output(ctx, 0, in->items.front());
  }
  BoxedValue& out = sequence_out(ctx, 0);
  out.items = in->items;
}

struct SequenceMapState {
  SubgraphProgram body;
};

/// The body's input types: a sequence input's tensors, a tensor input as it is.
std::vector<TensorType> body_types(const std::vector<TensorType>& input_types) {
  std::vector<TensorType> out;
  for (const TensorType& t : input_types) out.push_back(t.kind == ValueKind::kSequence ? t.element() : t);
  return out;
}

std::shared_ptr<void> prepare_sequence_map(const Node& node, const std::vector<const Tensor*>&,
                                           const std::vector<TensorType>& types) {
  auto state = std::make_shared<SequenceMapState>();
  state->body = compile_subgraph(graph_attr(node, "body"), body_types(types));
  return state;
}

void sequence_map_kernel(KernelContext& ctx) {
  const size_t length = sequence_in(ctx, 0).items.size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const BoxedValue* box = ctx.boxed_input(i);
    if (box && box->kind != ValueKind::kSequence) ctx.fail("input ", i, " is ", value_kind_phrase(box->kind));
    if (box && box->items.size() != length) {
      ctx.fail("input ", i, " holds ", box->items.size(), " tensors but input 0 holds ", length);
    }
  }
  SubgraphProgram local;
  const SubgraphProgram* program = nullptr;
  if (const SequenceMapState* state = ctx.state<SequenceMapState>()) {
    program = &state->body;
  } else {
    std::vector<TensorType> types = run_time_input_types(ctx, 0);
    for (size_t i = 0; i < types.size(); ++i) {
      if (const BoxedValue* box = ctx.boxed_input(i); box && !box->items.empty()) {
        types[i] = TensorType::make(box->items.front().dtype(), box->items.front().shape());
        types[i].kind = ValueKind::kSequence;
      }
    }
    local = compile_subgraph(graph_attr(ctx.node(), "body"), body_types(types));
    program = &local;
  }
  std::vector<BoxedValue> results(ctx.num_outputs());
  for (size_t j = 0; j < length; ++j) {
    std::vector<SubgraphValue> inputs(ctx.num_inputs());
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (const BoxedValue* box = ctx.boxed_input(i)) {
        inputs[i].view = box->items[j].view();
      } else {
        inputs[i].view = ctx.input(i);
      }
    }
    std::vector<SubgraphValue> outputs = run_subgraph(*program, inputs, ctx.pool());
    for (size_t k = 0; k < outputs.size() && k < results.size(); ++k) {
      if (outputs[k].boxed()) ctx.fail("body output ", k, " is ", value_kind_phrase(outputs[k].boxed_value().kind), ", not a tensor");
      if (!results[k].items.empty() && results[k].items.front().dtype() != outputs[k].tensor.dtype()) {
        ctx.fail("body output ", k, " is ", dtype_name(outputs[k].tensor.dtype()), " at position ", j, " but ",
                 dtype_name(results[k].items.front().dtype()), " before");
      }
      results[k].items.push_back(std::move(outputs[k].tensor));
      check_sequence_size(ctx, results[k].items);
    }
  }
  for (size_t k = 0; k < results.size(); ++k) {
    if (ctx.boxed_output(k)) sequence_out(ctx, k).items = std::move(results[k].items);
  }
}

}  // namespace

void register_sequence_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "SequenceEmpty", .run = sequence_empty_kernel});
  registry.add({.op_type = "SequenceConstruct", .run = sequence_construct_kernel});
  registry.add({.op_type = "SequenceInsert", .run = sequence_insert_kernel});
  registry.add({.op_type = "SequenceAt", .run = sequence_at_kernel});
  registry.add({.op_type = "SequenceErase", .run = sequence_erase_kernel});
  registry.add({.op_type = "SequenceLength", .run = sequence_length_kernel});
  registry.add({.op_type = "SplitToSequence", .run = split_to_sequence_kernel});
  registry.add({.op_type = "ConcatFromSequence", .run = concat_from_sequence_kernel});
  registry.add({.op_type = "SequenceMap", .run = sequence_map_kernel, .prepare = prepare_sequence_map});
  registry.add({.op_type = "Optional", .run = optional_kernel});
  registry.add({.op_type = "OptionalHasElement", .run = optional_has_element_kernel});
  registry.add({.op_type = "OptionalGetElement", .run = optional_get_element_kernel});
}

}  // namespace tessera::native
