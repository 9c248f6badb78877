#include "runtime/compiled_body.h"

#include <algorithm>
#include <map>

#include "ir/op_schema.h"

namespace tessera {
namespace {

/// A body as a CompiledModel: its graph inputs are the model's inputs, its outputs the model's.
class ModelBody final : public native::CompiledBody {
 public:
  ModelBody(std::unique_ptr<CompiledModel> model, std::vector<size_t> fed) : model_(std::move(model)), fed_(std::move(fed)) {
    for (const ValueDesc& d : model_->outputs()) {
      TensorType t = TensorType::make(d.dtype, d.shape);
      t.kind = d.kind;
      t.rank_known = d.rank_known;
      output_types_.push_back(std::move(t));
    }
  }
  std::vector<Tensor> run(const std::vector<TensorView>& inputs, const std::vector<TensorView*>& outputs) const override {
    if (fed_.size() == inputs.size()) return model_->run(inputs, outputs);
    std::vector<TensorView> fed;
    fed.reserve(fed_.size());
    for (size_t i : fed_) {
      if (i >= inputs.size()) throw_internal_error("a compiled body got ", inputs.size(), " inputs; it reads input ", i);
      fed.push_back(inputs[i]);
    }
    return model_->run(fed, outputs);
  }
  std::vector<TensorType> output_types() const override { return output_types_; }
  std::string summary() const override {
    std::map<std::string, size_t> nodes;
    std::vector<std::string> order;
    for (const RegionSummary& r : model_->regions()) {
      if (!nodes.count(r.backend)) order.push_back(r.backend);
      nodes[r.backend] += r.node_count;
    }
    std::string out;
    for (const std::string& b : order) out += str_cat(out.empty() ? "" : ", ", b, " ", nodes[b], nodes[b] == 1 ? " node" : " nodes");
    if (order.empty()) return "no nodes to run";
    const size_t regions = model_->regions().size();
    return str_cat(out, " in ", regions, regions == 1 ? " region" : " regions");
  }

 private:
  std::unique_ptr<CompiledModel> model_;
  std::vector<size_t> fed_;  // the body inputs the model takes (the others were compiled in as constants)
  std::vector<TensorType> output_types_;
};

/// The selectors of `given` that apply to `body`: op types, and names of the body's own nodes.
std::vector<std::pair<std::string, std::string>> applicable(const std::vector<std::pair<std::string, std::string>>& given,
                                                            const Graph& body, bool selector_first) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : given) {
    const std::string& text = selector_first ? entry.first : entry.second;
    std::string name = text.rfind("node:", 0) == 0 ? text.substr(5) : text;
    const bool is_node = std::any_of(body.nodes.begin(), body.nodes.end(), [&](const Node& n) { return n.name == name; });
    const bool is_op = text.rfind("op:", 0) == 0 || (text.rfind("node:", 0) != 0 && OpRegistry::instance().find("", text));
    if (is_node || is_op) out.push_back(entry);
  }
  return out;
}

}  // namespace

native::BodyCompiler make_body_compiler(const CompileOptions& options) {
  CompileOptions base;
  base.num_threads = options.num_threads;
  base.backends = options.backends;
  base.min_region_size = options.min_region_size;
  base.strict = options.strict;
  base.precision = options.precision;
  return [base, place = options.place, deny = options.deny](const Graph& body, const std::vector<TensorType>& input_types,
                                                            const std::vector<const Tensor*>& constants, bool native_only)
             -> std::shared_ptr<const native::CompiledBody> {
    Graph graph = body;
    std::vector<ValueId> inputs;
    std::vector<size_t> fed;
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      Value& v = graph.value(graph.inputs[i]);
      if (i < constants.size() && constants[i]) {
        v.constant = std::make_shared<const Tensor>(*constants[i]);  // shares the bytes
        v.type = TensorType::make(constants[i]->dtype(), constants[i]->shape());
        continue;
      }
      if (i < input_types.size()) {
        v.type = input_types[i];
        v.type.symbols.resize(v.type.dims.size());
      }
      inputs.push_back(graph.inputs[i]);
      fed.push_back(i);
    }
    graph.inputs = std::move(inputs);
    CompileOptions options = base;
    if (native_only) {
      options.backends = {"native"};  // (placement selectors name the other backends)
    } else {
      options.place = applicable(place, body, /*selector_first=*/true);
      options.deny = applicable(deny, body, /*selector_first=*/false);
    }
    return std::make_shared<ModelBody>(CompiledModel::compile(std::move(graph), options), std::move(fed));
  };
}

}  // namespace tessera
