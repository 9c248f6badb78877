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
  const CompiledModel& model() const { return *model_; }
  const std::vector<size_t>& fed() const { return fed_; }
  const std::string& measured() const { return measured_; }
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

/// The body graph as a model: its constant inputs (an outer weight it captures) compiled in, the other
/// inputs typed as the node feeds them; `fed` gets the positions of those.
Graph body_model_graph(const Graph& body, const std::vector<TensorType>& input_types,
                       const std::vector<const Tensor*>& constants, std::vector<size_t>& fed) {
  Graph graph = body;
  std::vector<ValueId> inputs;
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
  return graph;
}

/// What finds a compiled body again in an artifact: the digest of its graph as a model (its types and
/// constants' bytes included) and how it runs; "" for a body an artifact cannot hold (string constants),
/// which is neither stored nor looked for.
std::string body_key(const Graph& graph, native::BodyUse use) {
  uint64_t digest = 0;
  try {
    digest = graph_digest(graph);
  } catch (const Error&) {
    return "";  // (a graph the encoder cannot write: it would not save either, so nothing is lost)
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
  const char* how = use == native::BodyUse::kOnce ? "once" : use == native::BodyUse::kPerTrip ? "per-trip" : "per-trip-new-shapes";
  return str_cat(hex, "/", how);
}

void record(BodyRecords& records, const std::string& key, const std::shared_ptr<const native::CompiledBody>& body) {
  if (key.empty()) return;
  std::lock_guard<std::mutex> lock(records.mutex);
  records.made.emplace_back(key, body);
}

/// Why the loaded plan `model` cannot run as the body `graph` (the body as a model, `fed` its inputs'
/// positions; `stored_fed` the plan's), or "".
std::string misfit(const CompiledModel& model, const Graph& graph, const std::vector<size_t>& fed,
                   const std::vector<size_t>& stored_fed) {
  if (stored_fed != fed) return "it takes other inputs of the body than the body's own non-constant ones";
  if (model.inputs().size() != graph.inputs.size()) {
    return str_cat("it takes ", model.inputs().size(), " inputs where the body has ", graph.inputs.size());
  }
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const TensorType& want = graph.value(graph.inputs[i]).type;
    const ValueDesc& got = model.inputs()[i];
    bool fits = got.kind == ValueKind::kTensor && got.dtype == want.dtype && got.rank_known && want.rank_known &&
                got.shape.size() == want.dims.size();
    for (size_t d = 0; fits && d < want.dims.size(); ++d) fits = got.shape[d] < 0 || got.shape[d] == want.dims[d];
    if (!fits) return str_cat("its input ", i, " is not of the type the body is fed (", want.to_string(), ")");
  }
  if (model.outputs().size() != graph.outputs.size()) {
    return str_cat("it makes ", model.outputs().size(), " outputs where the body has ", graph.outputs.size());
  }
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const TensorType& want = graph.value(graph.outputs[i]).type;
    if (want.dtype != DType::kUndefined && model.outputs()[i].dtype != want.dtype) {
      return str_cat("its output ", i, " is ", dtype_name(model.outputs()[i].dtype), " where the body's is ", dtype_name(want.dtype));
    }
  }
  return "";
}

}  // namespace

/// A body's model to and from its plan in the artifact (CompiledModel's friend).
struct BodyPlans {
  static std::unique_ptr<CompiledModel> load(const Artifact& plan, const std::string& name, const CompileOptions& options) {
    return CompiledModel::from_artifact(plan, name, options);
  }
  static Artifact save(const CompiledModel& model) { return model.to_artifact(); }
};

namespace {

/// What bodies compile with: the enclosing model's options that apply to a body, and where they are recorded.
struct BodySettings {
  CompileOptions base;  // threads, backends, region size, strictness, precision
  std::vector<std::pair<std::string, std::string>> place, deny;
  std::shared_ptr<BodyRecords> records;
};

BodySettings body_settings(const CompileOptions& options, std::shared_ptr<BodyRecords> records) {
  BodySettings settings;
  settings.base.num_threads = options.num_threads;
  settings.base.backends = options.backends;
  settings.base.min_region_size = options.min_region_size;
  settings.base.strict = options.strict;
  settings.base.precision = options.precision;
  settings.place = options.place;
  settings.deny = options.deny;
  settings.records = std::move(records);
  return settings;
}

/// Compiles `body`, already made a model (`graph`, `fed` and `key` from body_model_graph and body_key), and
/// records it.
std::shared_ptr<const native::CompiledBody> compile_body(const BodySettings& settings, const Graph& body, Graph graph,
                                                         std::vector<size_t> fed, const std::string& key, native::BodyUse use) {
  CompileOptions native_alone = settings.base;
  native_alone.backends = {"native"};  // (placement selectors name the other backends)
  if (use == native::BodyUse::kPerTripNewShapes) {
    auto made = std::make_shared<ModelBody>(CompiledModel::compile(std::move(graph), native_alone), std::move(fed), "");
    record(*settings.records, key, made);
    return made;
  }
  CompileOptions options = settings.base;
  options.place = applicable(settings.place, body, /*selector_first=*/true);
  options.deny = applicable(settings.deny, body, /*selector_first=*/false);
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
  auto made = std::make_shared<ModelBody>(std::move(model), std::move(fed), std::move(measured));
  record(*settings.records, key, made);
  return made;
}

}  // namespace

native::BodyCompiler make_body_compiler(const CompileOptions& options, std::shared_ptr<BodyRecords> records) {
  return [settings = body_settings(options, std::move(records))](const Graph& body, const std::vector<TensorType>& input_types,
                                                                 const std::vector<const Tensor*>& constants, native::BodyUse use)
             -> std::shared_ptr<const native::CompiledBody> {
    std::vector<size_t> fed;
    Graph graph = body_model_graph(body, input_types, constants, fed);
    const std::string key = body_key(graph, use);
    return compile_body(settings, body, std::move(graph), std::move(fed), key, use);
  };
}

native::BodyCompiler make_body_loader(const CompileOptions& options, std::shared_ptr<BodyRecords> records,
                                      const std::vector<ArtifactBody>* stored, std::string artifact_name,
                                      std::shared_ptr<std::string> problem) {
  CompileOptions load_options;
  load_options.num_threads = options.num_threads;
  return [settings = body_settings(options, std::move(records)), load_options, stored, artifact_name = std::move(artifact_name),
          problem](const Graph& body, const std::vector<TensorType>& input_types, const std::vector<const Tensor*>& constants,
                   native::BodyUse use) -> std::shared_ptr<const native::CompiledBody> {
    std::vector<size_t> fed;
    Graph graph = body_model_graph(body, input_types, constants, fed);
    const std::string key = body_key(graph, use);
    const auto found = key.empty() ? stored->end()
                                   : std::find_if(stored->begin(), stored->end(), [&](const ArtifactBody& b) { return b.key == key; });
    if (found == stored->end()) {  // not stored (format version 1)
      return compile_body(settings, body, std::move(graph), std::move(fed), key, use);
    }
    // A problem here fails the whole load (from_artifact reads `problem`): the kernel asking would
    // otherwise take the error as a reason to interpret the body.
    auto fail = [&](const std::string& message) {
      if (problem->empty()) *problem = message;
      throw_user_error(message);
    };
    std::unique_ptr<CompiledModel> model;
    try {
      model = BodyPlans::load(*found->plan, str_cat(artifact_name, "', compiled body '", key), load_options);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInternal) throw;
      fail(e.what());
    }
    if (const std::string why = misfit(*model, graph, fed, found->fed); !why.empty()) {
      fail(str_cat("compiled body '", key, "' does not fit the body it is stored for: ", why));
    }
    auto loaded = std::make_shared<ModelBody>(std::move(model), found->fed, found->measured);
    record(*settings.records, key, loaded);
    return loaded;
  };
}

std::vector<ArtifactBody> stored_bodies(BodyRecords& records) {
  std::vector<std::pair<std::string, std::shared_ptr<const native::CompiledBody>>> alive;
  {
    std::lock_guard<std::mutex> lock(records.mutex);
    for (const auto& [key, weak] : records.made) {
      if (auto body = weak.lock()) alive.emplace_back(key, std::move(body));
    }
  }
  std::vector<ArtifactBody> out;
  for (const auto& entry : alive) {
    const std::string& key = entry.first;
    const std::shared_ptr<const native::CompiledBody>& body = entry.second;
    if (std::any_of(out.begin(), out.end(), [&](const ArtifactBody& b) { return b.key == key; })) continue;
    const auto* model_body = dynamic_cast<const ModelBody*>(body.get());
    if (!model_body) continue;
    ArtifactBody stored;
    stored.key = key;
    stored.fed = model_body->fed();
    stored.measured = model_body->measured();
    stored.plan = std::make_shared<Artifact>(BodyPlans::save(model_body->model()));
    out.push_back(std::move(stored));
  }
  return out;
}

}  // namespace tessera
