// Accuracy check reports (`tessera check`): for every region of a compiled
// model, how far its outputs are from a reference backend's outputs on the
// same region inputs. Plain data in, strings out, like placement_report.h:
// this header depends on nothing else in Tessera.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct CheckedOutput {
  std::string name;
  std::string type;                // "float32[1x1000]"
  bool floating = true;            // float outputs get error measures; others are compared exactly
  int64_t elements = 0;
  double max_abs_error = 0;        // max |actual - reference| over elements where both are finite
  double max_reference = 0;        // max |reference| over finite elements
  double relative_error = 0;       // max_abs_error / max_reference (0 when the reference is all zero)
  double cosine = 1;               // cosine similarity of the finite elements (1 when both are all zero)
  int64_t mismatches = 0;          // non-float: elements that differ; float: NaN/Inf where the other is not, or differently
  bool within_tolerance = true;
};

struct CheckedRegion {
  size_t index = 0;
  std::string backend;
  size_t node_count = 0;
  std::string first_node;          // the region's first node, to find it in the placement report
  std::string precision;           // "fp32", or "bf16 (N nodes)"
  bool compared = true;            // false for regions of the reference backend itself (or, see note, no reference)
  std::string note;                // why a region was not compared, when it is not the reference itself
  double tolerance = 0;            // relative error allowed
  double min_cosine = 0;           // cosine similarity required (0: none)
  std::vector<CheckedOutput> outputs;
  bool within_tolerance = true;
};

struct CheckReport {
  std::string model;
  std::string reference;           // the reference backend's name ("native")
  std::vector<CheckedRegion> regions;
  size_t regions_over_tolerance = 0;
};

/// One row per region and output: backend, precision, max abs / relative error,
/// cosine, and a flag for each over its tolerance; then a summary line.
std::string render_check_table(const CheckReport& report);
/// The same as one JSON object (stable key order; non-finite numbers as null).
std::string render_check_json(const CheckReport& report);
/// A self-contained HTML page (inline CSS, nothing fetched): the table with
/// regions over tolerance highlighted, and the summary.
std::string render_check_html(const CheckReport& report);

}  // namespace tessera
