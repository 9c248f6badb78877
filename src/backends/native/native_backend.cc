// The native backend: runs each node with its kernel from KernelRegistry,
// re-running shape inference at run time only for nodes whose output shapes
// were not known at compile time.
#include "backends/native/native_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

#include "backends/native/compiled_body.h"
#include "backends/native/kernel.h"
#include "backends/native/native_declarations.h"
#include "backends/native/node_runner.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "partition/common_patterns.h"

namespace tessera {
namespace {

using native::KernelContext;
using native::KernelDef;
using native::KernelRegistry;
using native::ThreadPool;
using native::CompiledNode;
using native::run_node;

class NativeRegion : public ExecutableRegion {
 public:
  NativeRegion(const Graph& region, std::vector<CompiledNode> nodes, std::deque<Node> lowered,
               std::shared_ptr<ThreadPool> pool)
      : inputs_(region.inputs), outputs_(region.outputs), nodes_(std::move(nodes)), lowered_(std::move(lowered)),
        pool_(std::move(pool)) {
    // After which node each value computed here (not a region output) is read for the last time.
    std::vector<int64_t> last(region.values.size(), -1);
    std::vector<char> kept(region.values.size(), 0);
    for (ValueId id : region.outputs) kept[static_cast<size_t>(id)] = 1;
    for (ValueId id : region.inputs) kept[static_cast<size_t>(id)] = 1;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (ValueId id : nodes_[i].node->outputs) {
        if (id != kNoValue) last[static_cast<size_t>(id)] = static_cast<int64_t>(i);
      }
      for (ValueId id : nodes_[i].node->inputs) {
        if (id != kNoValue) last[static_cast<size_t>(id)] = static_cast<int64_t>(i);
      }
    }
    release_after_.resize(nodes_.size());
    for (const CompiledNode& cn : nodes_) {
      for (ValueId id : cn.node->outputs) {
        if (id == kNoValue || kept[static_cast<size_t>(id)] || region.value(id).constant) continue;
        release_after_[static_cast<size_t>(last[static_cast<size_t>(id)])].push_back(id);
      }
    }
  }

  std::string node_algorithm(size_t node) const override {
    if (node >= nodes_.size() || !nodes_[node].state || !nodes_[node].kernel->describe) return "";
    return nodes_[node].kernel->describe(nodes_[node].state.get());
  }

  std::vector<InnerNodePlacement> node_inner_placement(size_t node) const override {
    std::vector<InnerNodePlacement> rows;
    if (node >= nodes_.size() || !nodes_[node].state || !nodes_[node].kernel->bodies) return rows;
    for (const auto& [attribute, body] : nodes_[node].kernel->bodies(nodes_[node].state.get())) {
      if (!body) continue;
      for (InnerNodePlacement row : body->inner_placement()) {
        row.path = attribute + "/" + row.path;
        rows.push_back(std::move(row));
      }
    }
    return rows;
  }

  bool reads_strided(size_t input, const TensorView& view) const override {
    return input < inputs_.size() && every_reader_takes(inputs_[input], view);
  }

  /// Concat writes any caller view (a key/value cache's in place); every other
  /// node a contiguous one (run_node checks its shape first).
  bool writes_into(size_t output, const TensorView& view) const override {
    if (output >= outputs_.size()) return false;
    const ValueId id = outputs_[output];
    if (is_contiguous(view)) return true;
    for (const CompiledNode& cn : nodes_) {
      for (ValueId out : cn.node->outputs) {
        if (out == id && cn.node->op_type != "Concat") return false;
      }
    }
    return every_reader_takes(id, view);
  }

  void run(ValueStore& store) const override {
    // Values read for the last time go back to the store (release_after_), so that later ones of shapes known
    // only at run time reuse their memory.
    const ThreadPool::WarmScope warm(*pool_);
    if (!store.profiling()) {
      for (size_t i = 0; i < nodes_.size(); ++i) {
        run_node(nodes_[i], store, *pool_);
        for (ValueId id : release_after_[i]) store.release(id);
      }
      return;
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const CompiledNode& node = nodes_[i];
      const bool bodies = node.state && node.kernel->bodies;
      native::BodyTimes times;
      auto start = std::chrono::steady_clock::now();
      if (bodies) {
        native::ScopedBodyTimes collect(&times);
        run_node(node, store, *pool_);
      } else {
        run_node(node, store, *pool_);
      }
      std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
      store.node_finished(i, elapsed.count());
      if (bodies) {
        // In node_inner_placement's order: each compiled body's nodes after its attribute's name.
        std::vector<double> inner;
        for (const auto& [attribute, body] : node.kernel->bodies(node.state.get())) {
          if (!body) continue;
          std::vector<double> ran = times.of(body);
          ran.resize(body->inner_placement().size(), 0.0);
          inner.insert(inner.end(), ran.begin(), ran.end());
        }
        if (!inner.empty()) store.inner_nodes_finished(i, inner);
      }
      for (ValueId id : release_after_[i]) store.release(id);
    }
  }

 private:
  bool every_reader_takes(ValueId id, const TensorView& view) const {
    for (const CompiledNode& cn : nodes_) {
      for (size_t i = 0; i < cn.node->inputs.size(); ++i) {
        if (cn.node->inputs[i] == id && !native::reads_strided_input(cn, i, view)) return false;
      }
    }
    return true;
  }

  std::vector<ValueId> inputs_;   // the region graph's
  std::vector<ValueId> outputs_;
  std::vector<CompiledNode> nodes_;
  std::vector<std::vector<ValueId>> release_after_;  // per node: values read for the last time there
  std::deque<Node> lowered_;  // nodes made from composites; CompiledNode points at them
  std::shared_ptr<ThreadPool> pool_;
};

CompiledNode compile_node(const Graph& graph, const Node& node) {
  CompiledNode cn;
  cn.node = &node;
  cn.schema = OpRegistry::instance().find(node.domain, node.op_type);
  cn.kernel = KernelRegistry::instance().find(node.domain, node.op_type);
  if (!cn.schema || !cn.kernel) throw_unsupported(node.describe(), ": the native backend has no kernel for this op");
  native::mark_boxed_values(cn, graph);
  cn.outputs_static = true;
  for (ValueId id : node.outputs) {
    if (id != kNoValue && !graph.value(id).type.is_static()) cn.outputs_static = false;
  }
  if (cn.outputs_static) {
    for (ValueId id : node.inputs) {
      const TensorType& t = id == kNoValue ? TensorType{} : graph.value(id).type;
      if (id != kNoValue && t.is_tensor() && !t.is_static()) cn.check_static_outputs = true;
    }
  }
  if (!cn.outputs_static || cn.check_static_outputs) {
    for (ValueId id : node.outputs) cn.output_names.push_back(id == kNoValue ? "" : graph.value(id).name);
  }
  if (cn.kernel->prepare) {
    std::vector<const Tensor*> constants(node.inputs.size(), nullptr);
    std::vector<TensorType> types(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      constants[i] = graph.value(node.inputs[i]).constant.get();
      types[i] = graph.value(node.inputs[i]).type;
    }
    cn.state = cn.kernel->prepare(node, constants, types);
  }
  return cn;
}

/// The float32 values of a constant region value, or a user error naming the composite.
std::vector<float> constant_floats(const Graph& region, const Node& composite, ValueId id, const char* what) {
  const Value& v = region.value(id);
  if (!v.constant || v.constant->dtype() != DType::kFloat32) {
    throw_user_error(composite.describe(), ": the ", what, " of a composite matmul is not a float32 constant");
  }
  return std::vector<float>(v.constant->as<float>(), v.constant->as<float>() + v.constant->numel());
}

/// MatMul→Add(bias)[→Relu/Clip] (kMatMulBias), and the same with the weights
/// behind a DequantizeLinear or Gemm(x, DequantizeLinear(...)[, bias])[→Relu/
/// Clip] (kMatMulInt8Weights), as one MatMul carrying the bias's values, the
/// clamp and, for the latter, the int8 weights as B, their scales and, for
/// Gemm's transB, tessera_transpose_b (native_declarations.h).
template <typename ToRegion>
Node lower_matmul_chain(const Graph& region, const Node& composite, const Graph& body, const ToRegion& to_region,
                        bool int8_weights) {
  auto fail = [&] {
    throw_user_error(composite.describe(), ": composite ", int8_weights ? native::kMatMulInt8Weights : native::kMatMulBias,
                     " whose body is not ", int8_weights ? "DequantizeLinear, " : "",
                     "MatMul, Add and an activation, or Gemm and an activation");
  };
  const size_t first = int8_weights ? 1 : 0;  // the product's index in the body
  const size_t count = body.nodes.size();
  if (count < first + 1 || count > first + 3 || body.inputs.size() != composite.inputs.size() || composite.outputs.size() != 1) {
    fail();
  }
  const Node& product = body.nodes[first];
  const bool gemm = int8_weights && product.op_type == "Gemm";
  if ((product.op_type != "MatMul" && !gemm) || (int8_weights && body.nodes[0].op_type != "DequantizeLinear")) fail();
  // After the product: MatMul's bias Add, then an activation; Gemm's bias is its C.
  const bool has_add = !gemm && count > first + 1;
  if ((has_add && body.nodes[first + 1].op_type != "Add") || (gemm && count > first + 2) || (!int8_weights && !has_add)) fail();
  Node matmul;
  matmul.name = composite.name;
  matmul.op_type = "MatMul";
  matmul.opset = 13;
  matmul.outputs = composite.outputs;
  if (int8_weights) {
    const Node& dq = body.nodes[0];
    if (product.inputs.size() < 2 || product.inputs[1] != dq.outputs[0] || product.inputs[0] == dq.outputs[0]) fail();
    matmul.inputs = {to_region(product.inputs[0]), to_region(dq.inputs[0])};
    matmul.attrs.set("tessera_int8_scales", Attribute::of_floats(constant_floats(region, composite, to_region(dq.inputs[1]), "scales")));
    if (gemm && product.attrs.get_int_or("transB", 0) != 0) matmul.attrs.set("tessera_transpose_b", Attribute::of_int(1));
    if (gemm && product.has_input(2)) {
      matmul.attrs.set("tessera_bias", Attribute::of_floats(constant_floats(region, composite, to_region(product.inputs[2]), "bias")));
    }
  } else {
    matmul.inputs = {to_region(product.inputs[0]), to_region(product.inputs[1])};
  }
  ValueId last = product.outputs[0];
  size_t next = first + 1;
  if (has_add) {
    const Node& add = body.nodes[next++];
    const ValueId bias = add.inputs[0] == last ? add.inputs[1] : add.inputs[0];
    matmul.attrs.set("tessera_bias", Attribute::of_floats(constant_floats(region, composite, to_region(bias), "bias")));
    last = add.outputs[0];
  }
  if (next < count) {
    Node activation = body.nodes[next];
    if (activation.op_type != "Relu" && activation.op_type != "Clip") fail();
    for (ValueId& id : activation.inputs) id = id == last ? kNoValue : to_region(id);
    const auto [low, high] = native::clamp_of_activation(region, activation);
    matmul.attrs.set("tessera_clamp", Attribute::of_floats({low, high}));
  }
  return matmul;
}

/// Turns a composite node of the region graph into the one node the native
/// kernels run: ConvActivation becomes its Conv with the activation as the
/// attribute tessera_clamp = [low, high], applied in the Conv's epilogue;
/// MatMulBias and MatMulInt8Weights one MatMul (lower_matmul_chain);
/// MatMulTransposedB a MatMul reading B transposed (tessera_transpose_b);
/// LayerNorm becomes a LayerNormalization over the last axis.
Node lower_composite(const Graph& region, const Node& composite) {
  const Attribute* pattern = composite.attrs.find("pattern");
  const Attribute* body_attr = composite.attrs.find("body");
  if (!pattern || !body_attr || !body_attr->graph) throw_user_error(composite.describe(), ": composite without pattern or body");
  const Graph& body = *body_attr->graph;
  if (pattern->s == native::kLayerNorm) {
    const std::optional<LayerNormParts> parts = parse_layer_norm_body(body);
    if (!parts || body.inputs.size() != composite.inputs.size() || composite.outputs.size() != 1) {
      throw_user_error(composite.describe(), ": composite LayerNorm whose body is not a layer normalisation");
    }
    const Value& epsilon = region.value(composite.inputs[parts->epsilon]);
    if (!epsilon.constant || epsilon.constant->numel() != 1) throw_user_error(composite.describe(), ": epsilon is not a scalar constant");
    Node norm;
    norm.name = composite.name;
    norm.op_type = "LayerNormalization";
    norm.opset = 17;
    norm.inputs = {composite.inputs[parts->input], composite.inputs[parts->scale], composite.inputs[parts->bias]};
    norm.outputs = composite.outputs;
    norm.attrs.set("axis", Attribute::of_int(-1));
    norm.attrs.set("epsilon", Attribute::of_float(static_cast<float>(epsilon.constant->double_at(0))));
    norm.attrs.set("stash_type", Attribute::of_int(1));
    return norm;
  }
  // Body values map to region values through the body's inputs (same order
  // as the composite node's); constants in the body are region constants.
  auto to_region = [&](ValueId body_id) -> ValueId {
    if (body_id == kNoValue) return kNoValue;
    for (size_t i = 0; i < body.inputs.size(); ++i) {
      if (body.inputs[i] == body_id) return composite.inputs[i];
    }
    throw_user_error(composite.describe(), ": composite body reads a value that is not one of its inputs");
  };
  if (pattern->s == native::kMatMulTransposedB) {
    if (body.nodes.size() != 2 || body.nodes[0].op_type != "Transpose" || body.nodes[1].op_type != "MatMul" ||
        body.nodes[1].inputs.size() != 2 || body.nodes[1].inputs[1] != body.nodes[0].outputs[0] ||
        body.nodes[1].inputs[0] == body.nodes[0].outputs[0] || composite.outputs.size() != 1 ||
        body.inputs.size() != composite.inputs.size()) {
      throw_user_error(composite.describe(), ": composite MatMulTransposedB whose body is not Transpose then MatMul");
    }
    Node matmul = body.nodes[1];
    matmul.inputs = {to_region(matmul.inputs[0]), to_region(body.nodes[0].inputs[0])};
    matmul.attrs.set("tessera_transpose_b", Attribute::of_int(1));
    matmul.outputs = composite.outputs;
    matmul.name = composite.name;
    return matmul;
  }
  if (pattern->s == native::kMatMulBias || pattern->s == native::kMatMulInt8Weights) {
    return lower_matmul_chain(region, composite, body, to_region, pattern->s == native::kMatMulInt8Weights);
  }
  if (pattern->s != native::kConvActivation || body.nodes.size() != 2 || body.nodes[0].op_type != "Conv" ||
      body.inputs.size() != composite.inputs.size() || composite.outputs.size() != 1) {
    throw_user_error(composite.describe(), ": the native backend cannot run composite '", pattern->s, "'");
  }
  Node conv = body.nodes[0];
  for (ValueId& id : conv.inputs) id = to_region(id);
  Node activation = body.nodes[1];
  for (ValueId& id : activation.inputs) id = id == body.nodes[0].outputs[0] ? kNoValue : to_region(id);
  const auto [low, high] = native::clamp_of_activation(region, activation);
  conv.attrs.set("tessera_clamp", Attribute::of_floats({low, high}));
  conv.outputs = composite.outputs;
  conv.name = composite.name;
  return conv;
}

/// The native payload: a tag and the node count. The plan's graph is the
/// program; kernels re-prepare (pack weights) from its constants at load.
constexpr char kPayloadMagic[8] = {'T', 'S', 'R', 'N', 'A', 'T', 'V', '1'};

std::vector<uint8_t> make_payload(const Graph& region) {
  std::vector<uint8_t> payload(kPayloadMagic, kPayloadMagic + 8);
  const uint64_t count = region.nodes.size();
  for (int i = 0; i < 8; ++i) payload.push_back(static_cast<uint8_t>(count >> (8 * i)));
  return payload;
}

class NativeBackend : public Backend {
 public:
  std::string name() const override { return "native"; }
  std::string version() const override { return "1"; }
  std::string compatibility() const override { return "x86_64"; }
  const Declarations& declarations() const override { return native::native_declarations(); }

  CompiledRegion compile(const Graph& region, const RegionOptions& options) const override {
    CompiledRegion result;
    result.payload = make_payload(region);
    result.executable = build(region, options);
    return result;
  }

  std::unique_ptr<ExecutableRegion> load(const Graph& region, std::span<const uint8_t> payload,
                                         const RegionOptions& options) const override {
    const std::vector<uint8_t> expected = make_payload(region);
    if (payload.size() != expected.size() || !std::equal(payload.begin(), payload.end(), expected.begin())) {
      throw_user_error("native backend payload does not match its region (", region.nodes.size(), " nodes)");
    }
    return build(region, options);
  }

 private:
  std::unique_ptr<ExecutableRegion> build(const Graph& region, const RegionOptions& options) const {
    std::deque<Node> lowered;
    std::vector<CompiledNode> compiled;
    compiled.reserve(region.nodes.size());
    for (const Node& node : region.nodes) {
      if (node.domain == "tessera" && node.op_type == "Composite") {
        lowered.push_back(lower_composite(region, node));
        compiled.push_back(compile_node(region, lowered.back()));
      } else {
        compiled.push_back(compile_node(region, node));
      }
    }
    return std::make_unique<NativeRegion>(region, std::move(compiled), std::move(lowered), pool(options.num_threads));
  }

  /// One intra-op pool per backend instance (one per compiled model), shared
  /// by all its regions, so that many regions never mean many spinning pools.
  std::shared_ptr<ThreadPool> pool(int num_threads) const {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_ || pool_threads_ != num_threads) {
      pool_ = std::make_shared<ThreadPool>(num_threads);
      pool_threads_ = num_threads;
    }
    return pool_;
  }
  mutable std::mutex pool_mutex_;
  mutable std::shared_ptr<ThreadPool> pool_;
  mutable int pool_threads_ = 0;
};

/// A ValueStore over local tensors, for evaluating single nodes.
class LocalStore : public ValueStore {
 public:
  explicit LocalStore(size_t n) : views_(n), owned_(n) {}
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
    v.data = owned_[static_cast<size_t>(id)].data();
  }
  void bind(ValueId id, const Tensor& t) { views_[static_cast<size_t>(id)] = t.view(); }
  Tensor take(ValueId id) { return owned_[static_cast<size_t>(id)]; }
  // evaluate_node_natively takes tensors only (folding skips sequences and optionals).

 private:
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
};

}  // namespace

std::unique_ptr<Backend> make_native_backend() { return std::make_unique<NativeBackend>(); }

std::vector<Tensor> evaluate_node_natively(const Node& original, const std::vector<const Tensor*>& inputs) {
  // Renumber the node's values 0..k so that it can run against a LocalStore.
  Node node = original;
  Graph scratch;
  LocalStore store(original.inputs.size() + original.outputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    node.inputs[i] = static_cast<ValueId>(i);
    store.bind(node.inputs[i], *inputs[i]);
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    node.outputs[i] = static_cast<ValueId>(original.inputs.size() + i);
  }
  CompiledNode cn;
  cn.node = &node;
  cn.schema = OpRegistry::instance().find(node.domain, node.op_type);
  cn.kernel = KernelRegistry::instance().find(node.domain, node.op_type);
  if (!cn.schema || !cn.kernel) throw_unsupported(node.describe(), ": no native kernel");
  if (cn.kernel->prepare) {
    std::vector<TensorType> types(node.inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i]) types[i] = TensorType::make(inputs[i]->dtype(), inputs[i]->shape());
    }
    cn.state = cn.kernel->prepare(node, inputs, types);
  }
  ThreadPool pool(1);
  run_node(cn, store, pool);
  std::vector<Tensor> outputs(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    Tensor t = store.take(node.outputs[i]);
    const TensorView& v = store.get(node.outputs[i]);
    if (!t.defined() || t.data() != v.data) t = Tensor::from_view(v);
    outputs[i] = t;
  }
  return outputs;
}

}  // namespace tessera
