// CompiledModel::placement_report: the plain data the report renderers
// (src/report/) turn into a table, JSON, DOT or HTML.
#include "report/placement_report.h"

#include "runtime/region_plan.h"
#include "runtime/session.h"
#include "runtime/tuning_record.h"

namespace tessera {

PlacementReport CompiledModel::placement_report(const std::string& model_name, const RunProfile* profile) const {
  PlacementReport report;
  report.model = model_name;
  report.backends = partition_.backends;
  report.copies_per_run = copies_per_run_;
  report.copy_bytes_per_run = copy_bytes_per_run_;
  if (tuning_) {
    ReportTuning& t = report.tuning;
    t.present = true;
    t.chosen = tuning_->chosen;
    t.best_single = tuning_->best_single;
    t.cpu = tuning_->cpu;
    t.threads = tuning_->threads;
    t.tuned_milliseconds = tuning_->tuned_milliseconds;
    t.default_milliseconds = tuning_->default_milliseconds;
    t.best_single_milliseconds = tuning_->best_single_milliseconds;
    t.seconds = tuning_->seconds;
    for (const TuningCandidate& c : tuning_->candidates) t.candidates.push_back({c.name, c.description, c.error, c.milliseconds, c.accepted});
  }
  const Graph& g = graph_;
  // Report values are the graph's values, by id.
  std::vector<int64_t> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (ValueId out : g.nodes[i].outputs) {
      if (out != kNoValue) producer[static_cast<size_t>(out)] = static_cast<int64_t>(i);
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v) {
    ReportValue value;
    value.name = g.values[v].name;
    value.type = g.values[v].type.to_string();
    value.producer = producer[v];
    value.constant = g.values[v].constant != nullptr;
    report.values.push_back(std::move(value));
  }
  for (ValueId id : g.inputs) report.values[static_cast<size_t>(id)].graph_input = true;
  for (ValueId id : g.outputs) report.values[static_cast<size_t>(id)].graph_output = true;

  for (size_t i = 0; i < placement_.size(); ++i) {
    const NodePlacement& p = placement_[i];
    ReportNode node;
    node.name = p.node_name;
    node.op_type = p.op_type;
    node.backend = p.backend;
    node.region = p.region;
    node.why = p.why;
    node.note = p.note;
    node.precision = p.precision;
    node.precision_note = p.precision_note;
    if (i < g.nodes.size()) {
      if (i < partition_.decisions.size()) node.refusals = partition_.decisions[i].refusals;
      node.refusals.resize(report.backends.size());
      for (ValueId id : g.nodes[i].inputs) {
        if (id != kNoValue) node.inputs.push_back(id);
      }
      for (ValueId id : g.nodes[i].outputs) {
        if (id != kNoValue) node.outputs.push_back(id);
      }
    }
    if (profile && i < profile->node_milliseconds.size() && p.region >= 0) node.milliseconds = profile->node_milliseconds[i];
    const std::vector<InnerNodePlacement>& inner = inner_placement(i);
    for (size_t k = 0; k < inner.size(); ++k) {
      node.inner.push_back({inner[k].path, inner[k].op_type, inner[k].backend, inner[k].note});
      if (profile && i < profile->inner_node_milliseconds.size() && k < profile->inner_node_milliseconds[i].size()) {
        node.inner.back().milliseconds = profile->inner_node_milliseconds[i][k];
      }
    }
    report.nodes.push_back(std::move(node));
  }
  for (size_t r = 0; r < regions_.size(); ++r) {
    const Region& region = partition_.regions[r];
    ReportRegion out;
    out.backend = partition_.backends[region.backend];
    out.memory_space = region_summaries_[r].memory_space;
    for (size_t node : region.nodes) out.nodes.push_back(static_cast<int64_t>(node));
    for (ValueId id : region.inputs) out.inputs.push_back(id);
    for (ValueId id : region.outputs) out.outputs.push_back(id);
    out.composites = region_summaries_[r].composites;
    if (profile && r < profile->region_milliseconds.size()) out.milliseconds = profile->region_milliseconds[r];
    report.regions.push_back(std::move(out));
  }
  return report;
}

}  // namespace tessera
