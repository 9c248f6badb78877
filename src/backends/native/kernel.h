// The native backend's kernel interface. A kernel reads input views and
// writes into output views the runtime has already allocated from the
// shapes shape inference gave; an output whose data is null (data-dependent
// shape, e.g. NonZero) is allocated by the kernel through allocate_output.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/native/thread_pool.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/shape_util.h"

namespace tessera::native {

class CompiledBody;  // compiled_body.h

/// Pointers the caller keeps alive while a KernelContext lives (run_node's stack: a node's run
/// allocates nothing for them).
template <typename T>
struct PointerSpan {
  T* const* data = nullptr;
  size_t size = 0;
  T* operator[](size_t i) const { return data[i]; }
};

class KernelContext {
 public:
  using Allocator = std::function<void(size_t index, TensorView& view)>;
  KernelContext(const Node& node, PointerSpan<const TensorView> inputs, PointerSpan<TensorView> outputs, ThreadPool& pool,
                const void* state, Allocator allocator, PointerSpan<BoxedValue> boxed_inputs = {},
                PointerSpan<BoxedValue> boxed_outputs = {})
      : node_(node), inputs_(inputs), outputs_(outputs), pool_(pool), state_(state), allocator_(std::move(allocator)),
        boxed_inputs_(boxed_inputs), boxed_outputs_(boxed_outputs) {}

  const Node& node() const { return node_; }
  const AttributeMap& attrs() const { return node_.attrs; }
  int opset() const { return node_.opset; }
  size_t num_inputs() const { return inputs_.size; }
  /// True for a tensor input that is present (a sequence or optional input is boxed_input).
  bool has_input(size_t i) const { return i < inputs_.size && inputs_[i] != nullptr; }
  /// Input i when it is a sequence or an optional (ValueKind), else null.
  const BoxedValue* boxed_input(size_t i) const { return i < boxed_inputs_.size ? boxed_inputs_[i] : nullptr; }
  /// Input i's box for the kernel to take over (its contents may be moved away) when this node is
  /// its last reader, else null: the kernel then copies from boxed_input(i).
  BoxedValue* take_boxed_input(size_t i) const {
    return movable_inputs_ && i < movable_inputs_->size() && (*movable_inputs_)[i] ? boxed_inputs_[i] : nullptr;
  }
  /// `movable` outlives the context (the compiled node's).
  void set_movable_inputs(const std::vector<char>& movable) { movable_inputs_ = &movable; }
  /// Output i when it is a sequence or an optional, else null; the kernel fills it in.
  BoxedValue* boxed_output(size_t i) const { return i < boxed_outputs_.size ? boxed_outputs_[i] : nullptr; }
  const TensorView& input(size_t i) const {
    if (!has_input(i)) fail("input ", i, " is required but missing");
    return *inputs_[i];
  }
  size_t num_outputs() const { return outputs_.size; }
  bool has_output(size_t i) const { return i < outputs_.size && outputs_[i] != nullptr; }
  /// The preallocated output i (data may be null for data-dependent outputs).
  TensorView& output(size_t i) const { return *outputs_[i]; }
  /// Allocates output i with the given dtype and shape (for data-dependent shapes).
  /// The size is checked first (check_tensor_size), naming the node.
  TensorView& allocate_output(size_t i, DType dtype, Shape shape) const {
    check_tensor_size_lazy([&] { return node_.describe() + ": output " + std::to_string(i); }, shape, dtype);
    TensorView& v = *outputs_[i];
    v.dtype = dtype;
    v.shape = std::move(shape);
    allocator_(i, v);
    return v;
  }
  ThreadPool& pool() const { return pool_; }
  /// What the kernel's prepare function returned at compile time (or null).
  template <typename T>
  const T* state() const { return static_cast<const T*>(state_); }

  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw_user_error(node_.describe(), ": ", std::forward<Args>(args)...);
  }

 private:
  const Node& node_;
  PointerSpan<const TensorView> inputs_;
  PointerSpan<TensorView> outputs_;
  ThreadPool& pool_;
  const void* state_;
  Allocator allocator_;
  PointerSpan<BoxedValue> boxed_inputs_;
  PointerSpan<BoxedValue> boxed_outputs_;
  const std::vector<char>* movable_inputs_ = nullptr;
};

using KernelFn = void (*)(KernelContext& ctx);
/// Compile-time preparation (e.g. packing constant weights). `constants[i]` is
/// the value of input i when it is a constant, else null.
using PrepareFn = std::shared_ptr<void> (*)(const Node& node, const std::vector<const Tensor*>& constants,
                                            const std::vector<TensorType>& input_types);

struct KernelDef {
  std::string op_type;
  std::string domain;
  KernelFn run = nullptr;
  PrepareFn prepare = nullptr;
  /// The output has input 0's bytes (a view with a new shape): run_node asks
  /// the store to alias them (ValueStore::alias) and the kernel copies only
  /// where it could not.
  bool output_aliases_input = false;
  /// The kernel allocates each output whose planned view has no data itself (KernelContext::allocate_output),
  /// from what it computed (If, Loop: the shapes their bodies make): run_node does not infer its outputs'
  /// shapes first, which for control flow means walking the bodies on every call.
  bool allocates_outputs = false;
  /// What the prepared state chose, for the node's placement note ("" for nothing to say): e.g. an
  /// If's branches compiled across backends.
  std::string (*describe)(const void* state) = nullptr;
  /// The control-flow bodies the prepared state compiled, by attribute name ("then_branch", "body"), for
  /// placement reports; null or absent entries for bodies that are interpreted.
  std::vector<std::pair<std::string, const CompiledBody*>> (*bodies)(const void* state) = nullptr;
};

class KernelRegistry {
 public:
  static const KernelRegistry& instance();
  void add(KernelDef def);
  const KernelDef* find(const std::string& domain, const std::string& op_type) const;

 private:
  std::vector<KernelDef> defs_;
};

// One registration function per kernel family (src/backends/native/kernels/<family>.cc).
void register_elementwise_kernels(KernelRegistry& registry);
void register_nn_kernels(KernelRegistry& registry);
void register_tensor_kernels(KernelRegistry& registry);
void register_reduction_kernels(KernelRegistry& registry);
void register_misc_kernels(KernelRegistry& registry);
void register_recurrent_kernels(KernelRegistry& registry);
void register_quantization_kernels(KernelRegistry& registry);
void register_signal_kernels(KernelRegistry& registry);
void register_controlflow_kernels(KernelRegistry& registry);
void register_text_kernels(KernelRegistry& registry);
/// StringNormalizer (kernels/text_normalizer.cc), registered by register_text_kernels.
void register_string_normalizer_kernel(KernelRegistry& registry);
void register_sequence_kernels(KernelRegistry& registry);

}  // namespace tessera::native
