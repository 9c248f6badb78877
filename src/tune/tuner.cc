#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "passes/bind_input_shapes.h"
#include "runtime/backend_registry.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// Random inputs of the shapes the graph's inputs take once `shapes` are bound (each must be static).
std::vector<Tensor> make_inputs(const Graph& bound) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (ValueId id : bound.inputs) {
    const Value& in = bound.value(id);
    if (!in.type.is_tensor() || !in.type.is_static()) {
      throw_user_error("tune: input '", in.name, "' is ", in.type.to_string(),
                       ": give the size to measure at with --input-shape (the plan tuned keeps its open dims open)");
    }
    Tensor t(in.type.dtype, in.type.dims);  // zeros
    if (in.type.dtype == DType::kFloat32) {
      for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = uniform(rng);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

/// The median end-to-end time of `model` in milliseconds: warm-up (3 runs and about 0.05 s), then
/// at least 5 runs and about 0.2 s (at most 200 runs).
double measure(const CompiledModel& model, const std::vector<TensorView>& inputs) {
  const Clock::time_point warm = Clock::now();
  for (int i = 0; i < 3 || (seconds_since(warm) < 0.05 && i < 100); ++i) model.run(inputs);
  std::vector<double> times;
  const Clock::time_point start = Clock::now();
  while (times.size() < 5 || (seconds_since(start) < 0.2 && times.size() < 200)) {
    const Clock::time_point t0 = Clock::now();
    model.run(inputs);
    times.push_back(seconds_since(t0) * 1e3);
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

/// Executed node -> backend of a compiled model.
std::vector<std::pair<std::string, std::string>> placement_of(const CompiledModel& model) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const NodePlacement& p : model.placement()) {
    if (p.region >= 0) out.emplace_back(p.node_name, p.backend);
  }
  return out;
}

struct Best {
  std::unique_ptr<CompiledModel> model;
  double milliseconds = 0;
  std::string name;
};

}  // namespace

TuningRecord tune_placement(const Graph& graph, const TuneOptions& options) {
  const Clock::time_point start = Clock::now();
  TuningRecord record;
  record.threads = options.base.num_threads;
  record.precision = precision_text(options.base.precision);
  record.cpu = machine_cpu();
  record.isa = machine_isa();
  CompileOptions base = options.base;
  base.tuning = nullptr;
  base.place.clear();  // the search places every node itself (denials stay: they restrict it)

  // A model with open dims is tuned as it compiles without input shapes (one plan for every shape),
  // measured at the shapes named; a static model at its shapes (or those named instead).
  Graph bound = graph;
  bind_input_shapes(bound, base.input_shapes);
  bool open = false;
  for (ValueId id : graph.inputs) {
    const TensorType& t = graph.value(id).type;
    open |= t.is_tensor() && !t.is_static();
  }
  if (open) {
    base.input_shapes.clear();
    record.measured_at = input_shapes_text(bound);
  }
  std::vector<Tensor> owned = make_inputs(bound);

  // The default placement first: it fixes the backend list.
  std::unique_ptr<CompiledModel> first = CompiledModel::compile(graph, base);
  record.fingerprint = first->fingerprint();
  record.backends = first->backend_names();
  for (size_t i = 0; i < owned.size(); ++i) {  // an input fixed at compile time (input_values) is fed that value
    if (const Tensor* fixed = first->fixed_input_value(i)) owned[i] = fixed->clone();
  }
  std::vector<TensorView> inputs;
  for (const Tensor& t : owned) inputs.push_back(t.view());

  int64_t done = 0;
  int64_t estimate = static_cast<int64_t>(record.backends.size()) + 1 +
                     static_cast<int64_t>(first->regions().size() * (record.backends.size() > 1 ? record.backends.size() - 1 : 0));
  auto progress = [&] {
    if (options.progress) options.progress("measuring", done, std::max(estimate, done + 1));
  };
  Best best;
  double last_cost = 0;
  // Compiles and measures one candidate; keeps it when it is the fastest so far by `margin`.
  std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, size_t>> measured;  // placement, candidate
  auto try_candidate = [&](const std::string& name, const std::string& description, const CompileOptions& candidate_options,
                           std::unique_ptr<CompiledModel> compiled, double margin) -> double {
    progress();
    const Clock::time_point t0 = Clock::now();
    TuningCandidate c;
    c.name = name;
    // Names are unique in a record: a move tried again from a later best gets a number.
    for (int k = 2;; ++k) {
      bool taken = false;
      for (const TuningCandidate& earlier : record.candidates) taken |= earlier.name == c.name;
      if (!taken) break;
      c.name = name + " #" + std::to_string(k);
    }
    c.description = description;
    bool repeated = false;
    try {
      if (!compiled) compiled = CompiledModel::compile(graph, candidate_options);
      // A placement measured before (e.g. the default order and the first backend alone) keeps that
      // time: measuring it again would only choose between two samples of the same thing.
      auto placement = placement_of(*compiled);
      for (const auto& [seen, index] : measured) {
        if (seen != placement) continue;
        c.milliseconds = record.candidates[index].milliseconds;
        c.description += " (the same placement as '" + record.candidates[index].name + "': not measured again)";
        repeated = true;
        break;
      }
      if (!repeated) {
        c.milliseconds = measure(*compiled, inputs);
        measured.emplace_back(std::move(placement), record.candidates.size());
      }
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInternal) throw;
      c.error = e.what();  // e.g. a backend refusing a node moved to it
    }
    ++done;
    last_cost = seconds_since(t0);
    if (repeated) {
      record.candidates.push_back(c);
      return c.milliseconds;
    }
    if (c.milliseconds >= 0 && (!best.model || c.milliseconds < best.milliseconds * (1.0 - margin))) {
      c.accepted = true;
      best.model = std::move(compiled);
      best.milliseconds = c.milliseconds;
      best.name = c.name;
    }
    record.candidates.push_back(c);
    return c.milliseconds;
  };

  // 1. One rule each: the default priority order, and each backend alone.
  record.default_milliseconds = try_candidate("default", "priority order " + [&] {
    std::string list;
    for (const std::string& b : record.backends) list += (list.empty() ? "" : ",") + b;
    return list;
  }(), base, std::move(first), 0.0);
  for (const std::string& backend : record.backends) {
    CompileOptions only = base;
    only.backends = {backend};
    const double ms = try_candidate("only " + backend,
                                    backend == fallback_backend().name ? "every node on " + backend
                                                                       : "every node " + backend + " claims on it, the rest on " +
                                                                             fallback_backend().name,
                                    only, nullptr, 0.0);
    if (ms >= 0 && (record.best_single_milliseconds < 0 || ms < record.best_single_milliseconds)) {
      record.best_single_milliseconds = ms;
      record.best_single = "only " + backend;
    }
  }
  if (!best.model) throw_user_error("tune: no candidate placement compiled (", record.candidates.front().error, ")");

  // 2. Moves from the best placement so far: each region, then each op type on one backend, to each
  // other backend; slowest first (by a profiled run). The first move that helps is kept and the moves are
  // made again from the new best; a move tried once from a placement is not tried again from it.
  std::set<std::string> tried;
  while (true) {
    RunProfile profile;
    best.model->run(inputs, {}, &profile);
    const std::vector<NodePlacement>& rows = best.model->placement();
    const std::vector<std::pair<std::string, std::string>> current = placement_of(*best.model);
    struct Move {
      std::string label, from;
      std::vector<std::string> nodes;
      double milliseconds = 0;
    };
    std::vector<Move> regions(best.model->regions().size());
    std::map<std::pair<std::string, std::string>, Move> op_groups;  // (op type, backend)
    for (size_t i = 0; i < rows.size(); ++i) {
      const NodePlacement& p = rows[i];
      if (p.region < 0) continue;
      const double ms = i < profile.node_milliseconds.size() ? profile.node_milliseconds[i] : 0.0;
      Move& region = regions[static_cast<size_t>(p.region)];
      region.from = p.backend;
      region.nodes.push_back(p.node_name);
      Move& group = op_groups[{p.op_type, p.backend}];
      group.from = p.backend;
      group.nodes.push_back(p.node_name);
      group.milliseconds += ms;
    }
    std::vector<Move> moves;
    for (size_t r = 0; r < regions.size(); ++r) {
      Move& m = regions[r];
      m.milliseconds = r < profile.region_milliseconds.size() ? profile.region_milliseconds[r] : 0.0;
      char label[160];
      // Named by its first node too: "region 1" is another region in another placement.
      std::snprintf(label, sizeof label, "region %zu (%s: %.60s%s, %.3f ms)", r, m.from.c_str(),
                    m.nodes.empty() ? "" : m.nodes.front().c_str(),
                    m.nodes.size() > 1 ? str_cat(" and ", m.nodes.size() - 1, " more").c_str() : "", m.milliseconds);
      m.label = label;
      if (!m.nodes.empty()) moves.push_back(m);
    }
    std::vector<Move> groups;
    for (auto& [key, m] : op_groups) {
      char label[160];
      std::snprintf(label, sizeof label, "%s on %s (%zu nodes, %.3f ms)", key.first.c_str(), m.from.c_str(), m.nodes.size(), m.milliseconds);
      m.label = label;
      groups.push_back(m);
    }
    auto slowest_first = [](const Move& a, const Move& b) { return a.milliseconds > b.milliseconds; };
    std::stable_sort(moves.begin(), moves.end(), slowest_first);
    std::stable_sort(groups.begin(), groups.end(), slowest_first);
    moves.insert(moves.end(), groups.begin(), groups.end());
    estimate = done + 1;
    estimate += static_cast<int64_t>(moves.size()) * (static_cast<int64_t>(record.backends.size()) - 1);
    bool improved = false, out_of_time = false;
    for (const Move& m : moves) {
      for (const std::string& target : record.backends) {
        if (target == m.from) continue;
        // Keyed by the placement it starts from too: a move that did not help from one best (or
        // lost to noise on a busy machine) is tried again from the next.
        std::string key = best.name + "\n" + target;
        for (const std::string& n : m.nodes) key += "\n" + n;
        if (!tried.insert(key).second) continue;
        if (seconds_since(start) + last_cost > options.budget_seconds) {
          out_of_time = true;
          break;
        }
        CompileOptions moved = base;
        moved.backends = record.backends;
        const std::set<std::string> chosen(m.nodes.begin(), m.nodes.end());
        for (const auto& [node, backend] : current) moved.place.emplace_back(node, chosen.count(node) ? target : backend);
        const std::string previous = best.name;
        try_candidate(m.label + " -> " + target,
                      "from '" + previous + "': '" + m.nodes.front() + "'" +
                          (m.nodes.size() > 1 ? str_cat(" and ", m.nodes.size() - 1, " more nodes") : std::string()) + " on " + target,
                      moved, nullptr, 0.02);
        if (best.name != previous) {
          improved = true;
          break;
        }
      }
      if (improved || out_of_time) break;
    }
    if (!improved) break;
  }

  record.chosen = best.name;
  record.tuned_milliseconds = best.milliseconds;
  record.placement = placement_of(*best.model);
  record.seconds = seconds_since(start);
  if (options.progress) options.progress("measuring", done, done);
  return record;
}

std::string tuning_summary(const TuningRecord& record) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "tuned in %.1f s (%zu candidates), %d thread%s, %s, on %s\n", record.seconds,
                record.candidates.size(), record.threads, record.threads == 1 ? "" : "s", record.precision.c_str(), record.cpu.c_str());
  out << line;
  if (!record.measured_at.empty()) {
    out << "the model's open-dims plan (one compile for every shape), measured at " << record.measured_at << "\n";
  }
  for (const TuningCandidate& c : record.candidates) {
    if (c.milliseconds >= 0) {
      std::snprintf(line, sizeof line, "  %10.3f ms  %s %s\n", c.milliseconds, c.accepted ? "*" : " ", c.name.c_str());
    } else {
      std::snprintf(line, sizeof line, "      failed     %s: %s\n", c.name.c_str(), c.error.c_str());
    }
    out << line;
  }
  std::snprintf(line, sizeof line, "chosen: '%s' at %.3f ms; default %.3f ms (%.2fx); best single backend '%s' %.3f ms (%.2fx)\n",
                record.chosen.c_str(), record.tuned_milliseconds, record.default_milliseconds,
                record.default_milliseconds / record.tuned_milliseconds, record.best_single.c_str(), record.best_single_milliseconds,
                record.best_single_milliseconds / record.tuned_milliseconds);
  out << line << "(* : the fastest so far when measured; a region move must gain more than 2%)\n";
  return out.str();
}

}  // namespace tessera
