// Placement reports: where each node of a compiled model ran and why, as a
// text table, JSON, a Graphviz DOT graph and a self-contained HTML page with
// an SVG drawing of the graph coloured by backend. Plain data in, strings
// out: this library depends on nothing else in Tessera.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct ReportValue {
  std::string name;
  std::string type;          // "float32[1x64x56x56]"
  int64_t producer = -1;     // index into PlacementReport::nodes, -1 for graph inputs and constants
  bool graph_input = false;
  bool graph_output = false;
  bool constant = false;
};

/// A node inside a control-flow body of a report node (an If's branch, a Loop's or Scan's body compiled
/// as a model of its own).
struct ReportInnerNode {
  std::string path;     // below the report node: "then_branch/Conv_3", "body/If_2/else_branch/Add"
  std::string op_type;
  std::string backend;  // or "folded"
  std::string note;
  double milliseconds = -1;  // from a profiled run (included in its node's), -1 when not profiled
};

struct ReportNode {
  std::string name;
  std::string op_type;
  std::string backend;        // a backend name, or "folded" (computed at compile time, not run)
  int64_t region = -1;        // index into PlacementReport::regions, -1 for folded nodes
  std::string why;            // why it went there ("claimed", "pattern ConvActivation", "placed by --place ...")
  std::string note;           // e.g. "fused into 'conv_3' (pattern ConvActivation)"
  /// Per backend (same order as PlacementReport::backends): "" when that
  /// backend claims the node, else its reason for refusing.
  std::vector<std::string> refusals;
  std::vector<int64_t> inputs;   // indices into PlacementReport::values (constants included)
  std::vector<int64_t> outputs;  // indices into PlacementReport::values
  double milliseconds = -1;      // from a profiled run, -1 when not profiled
  std::string precision;         // "bf16" where it computes in bfloat16 (--precision bf16), "" otherwise
  std::string precision_note;    // why a Conv/MatMul/Gemm stays float32 under --precision bf16
  std::vector<ReportInnerNode> inner;  // the nodes of its compiled control-flow bodies, if any
};

struct ReportRegion {
  std::string backend;
  std::string memory_space;      // "host" or the backend's device space
  std::vector<int64_t> nodes;    // indices into PlacementReport::nodes, execution order
  std::vector<int64_t> inputs;   // boundary inputs (indices into values)
  std::vector<int64_t> outputs;  // boundary outputs
  std::vector<std::string> composites;  // "ConvActivation: conv_3, relu_3"
  double milliseconds = -1;      // from a profiled run, -1 when not profiled
};

/// What `tessera tune` measured, when the model was compiled with its record.
struct ReportTuningCandidate {
  std::string name, description, error;
  double milliseconds = -1;  // -1: it failed (error says why)
  bool accepted = false;     // the fastest so far when measured
};
struct ReportTuning {
  bool present = false;
  std::string chosen, best_single, cpu;
  int threads = 1;
  double tuned_milliseconds = -1, default_milliseconds = -1, best_single_milliseconds = -1, seconds = 0;
  std::vector<ReportTuningCandidate> candidates;
};

struct PlacementReport {
  std::string model;                   // the model's file name
  std::vector<std::string> backends;   // priority order
  std::vector<ReportRegion> regions;   // execution order
  std::vector<ReportNode> nodes;       // executed nodes first (graph order), then folded ones
  std::vector<ReportValue> values;
  int64_t copies_per_run = 0;          // tensor copies between memory spaces in one run
  int64_t copy_bytes_per_run = 0;
  ReportTuning tuning;                 // present when compiled with a tuning record that applied
};

/// A text table: one row per region (backend, node count, boundary tensors),
/// then the nodes each backend refused with the reason, then totals.
std::string render_report_table(const PlacementReport& report);
/// Everything in the report as one JSON object (stable key order).
std::string render_report_json(const PlacementReport& report);
/// A Graphviz digraph: nodes coloured by backend, one cluster per region.
std::string render_report_dot(const PlacementReport& report);
/// A self-contained HTML page (inline SVG, CSS and a little script, nothing
/// fetched) drawing the graph in layers, coloured by backend, with a legend,
/// the region table and each node's placement reasons on hover.
std::string render_report_html(const PlacementReport& report);

}  // namespace tessera
