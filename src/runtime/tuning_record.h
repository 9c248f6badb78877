// A tuning record: what `tessera tune` measured and the placement it chose,
// as data (JSON) that `tessera compile --tuning FILE` applies.
//
// The record is keyed by a fingerprint of the model (its structure and input
// shapes, see graph_fingerprint) and by the machine (CPU model, ISA, thread
// count). A model with open dims is tuned as it compiles without input shapes
// (one plan for every shape), measured at the shapes the user names
// (`measured_at`); its fingerprint is the open model's. Applying a record
// (apply_tuning, called by CompiledModel::compile):
//   - another model's record is not applied: a warning says so, naming both
//     fingerprints (the nodes it names may not exist or mean other things);
//   - a record of the model's open-dims plan applies to a compile that binds
//     its shapes too (nodes that binding folded away are skipped), with a
//     warning when the shapes bound differ from those it was measured at;
//   - another machine's or thread count's record is applied, with a warning
//     naming what differs (the placement is valid anywhere, maybe not best);
//   - the record's placement becomes the policy: its backend list (unless the
//     options name one) and one --place per node.
// read_tuning_record treats the file as hostile: malformed JSON, a wrong
// format or version, missing or mistyped fields and absurd sizes are user
// errors naming the file and the field, never a crash.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct Graph;
struct CompileOptions;

struct TuningCandidate {
  std::string name;         // "default", "only dnnl", "region 3 -> native", ...
  std::string description;  // what it changes
  double milliseconds = -1; // median end-to-end time; -1 when it failed to compile
  std::string error;        // why it failed
  bool accepted = false;    // became the best so far when measured
};

struct TuningRecord {
  static constexpr int kVersion = 1;
  std::string fingerprint;  // graph_fingerprint of the model tuned
  /// A model with open dims: the input shapes it was measured at (input_shapes_text); empty otherwise.
  std::string measured_at;
  std::string cpu;          // machine_cpu()
  std::string isa;          // machine_isa()
  int threads = 1;
  std::string precision = "fp32";
  std::vector<std::string> backends;  // the backend list searched (priority order of the default)
  /// The chosen placement: executed node -> backend.
  std::vector<std::pair<std::string, std::string>> placement;
  std::vector<TuningCandidate> candidates;  // in the order measured
  std::string chosen;                       // the name of the candidate chosen
  double tuned_milliseconds = -1, default_milliseconds = -1, best_single_milliseconds = -1;
  std::string best_single;  // the fastest single-backend candidate
  double seconds = 0;       // time spent tuning
  std::string source;       // the file (or name) it was read from, for messages; not written
};

/// A hex digest of the graph's structure as imported with its input shapes bound: node names, op
/// types, domains, the names of their inputs and outputs, and the graph inputs' names, dtypes and dims.
std::string graph_fingerprint(const Graph& graph);
/// The graph inputs' shapes as "x=8x64 mask=8x12" (an open dim as its name, or "?"), for records and messages.
std::string input_shapes_text(const Graph& graph);
/// "/proc/cpuinfo"'s model name ("unknown" when it cannot be read).
std::string machine_cpu();
/// The ISA extensions that decide kernels here (e.g. "avx2 avx512f avx512_vnni avx512_bf16").
std::string machine_isa();

std::string write_tuning_record(const TuningRecord& record);
/// Parses a record; `name` labels errors.
TuningRecord read_tuning_record(const std::string& text, const std::string& name);
TuningRecord read_tuning_record_file(const std::string& path);

/// Applies `record` to `options` for a graph of fingerprint `fingerprint`, whose fingerprint before its
/// input shapes were bound is `open_fingerprint` and whose inputs are `shapes` (input_shapes_text); see
/// the contract above. Returns the warnings to show; `applied` says whether the placement was taken.
std::vector<std::string> apply_tuning(const TuningRecord& record, const std::string& fingerprint,
                                      const std::string& open_fingerprint, const std::string& shapes,
                                      CompileOptions& options, bool* applied);

}  // namespace tessera
