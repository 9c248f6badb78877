#include "runtime/compiled_body.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>

#include "ir/op_schema.h"

namespace tessera {
namespace {

/// A body as a CompiledModel: its graph inputs are the model's inputs, its outputs the model's.
class ModelBody final : public native::CompiledBody {
 public:
  ModelBody(std::unique_ptr<CompiledModel> model, std::vector<size_t> fed, std::string measured)
      : model_(std::move(model)), fed_(std::move(fed)), measured_(std::move(measured)) {
    for (const ValueDesc& d : model_->outputs()) {
      TensorType t = TensorType::make(d.dtype, d.shape);
      t.kind = d.kind;
      t.rank_known = d.rank_known;
      output_types_.push_back(std::move(t));
    }
  }
  std::vector<Tensor> run(const std::vector<TensorView>& inputs, const std::vector<TensorView*>& outputs) const override {
    native::BodyTimes* times = native::current_body_times();
    if (!times && fed_.size() == inputs.size()) return model_->run(inputs, outputs);
    // The inputs the body reads, in views kept by this thread from one trip to the next (one per
    // nesting depth: a body's node may run another body): assigning the same shapes again allocates
    // nothing, where a fresh vector of copied views made three allocations a Loop trip.
    thread_local std::deque<std::vector<TensorView>> fed_by_depth;  // (growing keeps references)
    thread_local size_t depth = 0;
    if (fed_by_depth.size() <= depth) fed_by_depth.resize(depth + 1);
    std::vector<TensorView>& fed = fed_by_depth[depth];
    fed.resize(fed_.size());
    for (size_t k = 0; k < fed_.size(); ++k) {
      const size_t i = fed_[k];
      if (i >= inputs.size()) throw_internal_error("a compiled body got ", inputs.size(), " inputs; it reads input ", i);
      fed[k] = inputs[i];
    }
    struct Nested {
      size_t& depth;
      explicit Nested(size_t& d) : depth(d) { ++depth; }
      ~Nested() { --depth; }
    } nested(depth);
    if (!times) return model_->run(fed, outputs);
    // A profiled run: the body's nodes timed, added to its rows (inner_placement's order: each node, then
    // the nodes of its own bodies).
    RunProfile profile;
    std::vector<Tensor> results = model_->run(fed_.size() == inputs.size() ? inputs : fed, outputs, &profile);
    std::vector<double>& rows = times->of(this);
    size_t k = 0;
    auto add = [&](double ms) {
      if (rows.size() <= k) rows.resize(k + 1, 0.0);
      rows[k++] += ms;
    };
    for (size_t i = 0; i < model_->placement().size(); ++i) {
      add(i < profile.node_milliseconds.size() ? profile.node_milliseconds[i] : 0.0);
      const size_t nested = model_->inner_placement(i).size();
      for (size_t j = 0; j < nested; ++j) {
        const bool known = i < profile.inner_node_milliseconds.size() && j < profile.inner_node_milliseconds[i].size();
        add(known ? profile.inner_node_milliseconds[i][j] : 0.0);
      }
    }
    return results;
  }
  const std::vector<TensorType>& output_types() const override { return output_types_; }
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
    return str_cat(out, " in ", regions, regions == 1 ? " region" : " regions", measured_.empty() ? "" : " (", measured_,
                   measured_.empty() ? "" : ")");
  }
  std::vector<InnerNodePlacement> inner_placement() const override {
    std::vector<InnerNodePlacement> rows;
    const std::vector<NodePlacement>& placement = model_->placement();
    for (size_t i = 0; i < placement.size(); ++i) {
      const NodePlacement& p = placement[i];
      rows.push_back({p.node_name, p.op_type, p.backend, p.note});
      for (InnerNodePlacement nested : model_->inner_placement(i)) {
        nested.path = p.node_name + "/" + nested.path;
        rows.push_back(std::move(nested));
      }
    }
    return rows;
  }

 private:
  std::unique_ptr<CompiledModel> model_;
  std::vector<size_t> fed_;  // the body inputs the model takes (the others were compiled in as constants)
  std::string measured_;     // how the placement was chosen by measurement, or ""
  std::vector<TensorType> output_types_;
};

std::string format_fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

/// Microseconds a run of `model` takes on zero inputs (median of up to 15 runs after one to warm up,
/// within about 20 ms), or -1 where an input's shape is not known or a run fails.
double microseconds_a_run(const CompiledModel& model) {
  std::vector<Tensor> inputs;
  for (const ValueDesc& d : model.inputs()) {
    if (d.kind != ValueKind::kTensor || !d.rank_known || d.dtype == DType::kString) return -1;
    for (int64_t x : d.shape) {
      if (x < 0) return -1;
    }
    inputs.emplace_back(d.dtype, d.shape);
  }
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  try {
    model.run(views);
    std::vector<double> times;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    for (int i = 0; i < 15; ++i) {
      const auto start = std::chrono::steady_clock::now();
      model.run(views);
      const auto end = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      if (i >= 2 && end > deadline) break;
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  } catch (const Error&) {
    return -1;
  }
}

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
                                                            const std::vector<const Tensor*>& constants, native::BodyUse use)
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
    CompileOptions native_alone = base;
    native_alone.backends = {"native"};  // (placement selectors name the other backends)
    if (use == native::BodyUse::kPerTripNewShapes) {
      return std::make_shared<ModelBody>(CompiledModel::compile(std::move(graph), native_alone), std::move(fed), "");
    }
    CompileOptions options = base;
    options.place = applicable(place, body, /*selector_first=*/true);
    options.deny = applicable(deny, body, /*selector_first=*/false);
    const bool measure = use == native::BodyUse::kPerTrip && options.place.empty() && options.deny.empty();
    Graph copy = measure ? graph : Graph{};
    std::unique_ptr<CompiledModel> model = CompiledModel::compile(std::move(graph), options);
    std::string measured;
    const bool off_native = std::any_of(model->regions().begin(), model->regions().end(),
                                        [](const RegionSummary& r) { return r.backend != "native"; });
    if (measure && off_native) {
      // A body run once a trip: its placement on the model's backends against native alone, by measurement.
      try {
        std::unique_ptr<CompiledModel> alone = CompiledModel::compile(std::move(copy), native_alone);
        const double mixed = microseconds_a_run(*model), native_only = microseconds_a_run(*alone);
        if (mixed >= 0 && native_only >= 0) {
          const bool switch_to_native = native_only < mixed;
          measured = str_cat(switch_to_native ? "on native alone: " : "kept: ", format_fixed(switch_to_native ? native_only : mixed, 1),
                             " us a trip against ", format_fixed(switch_to_native ? mixed : native_only, 1),
                             switch_to_native ? " with the model's backends" : " on native alone", ", measured");
          if (switch_to_native) model = std::move(alone);
        }
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kInternal) throw;
      }
    }
    return std::make_shared<ModelBody>(std::move(model), std::move(fed), std::move(measured));
  };
}

}  // namespace tessera
