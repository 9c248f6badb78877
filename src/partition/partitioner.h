// The partitioner: decides which backend runs each node, groups nodes into
// regions without creating cycles, and extracts each region into a
// standalone graph with explicit boundary inputs and outputs.
//
// Steps (partition_graph):
//  1. Patterns: for each backend in priority order, each declared pattern is
//     matched at every node (largest-first as declared); a match becomes a
//     composite if none of its nodes is taken yet, denied to that backend, or
//     placed elsewhere by the policy.
//  2. Annotation: each remaining node goes to the first backend (priority
//     order) whose predicate claims it and that the policy does not deny; the
//     refusal reason of every backend before it is kept. A node placed by
//     the policy goes where it is told (an error if that backend refuses it).
//     Nodes nobody claims go to the fallback backend, or, in strict mode,
//     fail the whole partition naming each such node and each refusal.
//  3. Grouping: a topological order is built that keeps running nodes of the
//     backend it is on while any is ready (composites move as one unit);
//     each maximal run of one backend is a region. Regions are contiguous
//     in a topological order, so the region graph has no cycle.
//  4. Minimum size: a region of a non-fallback backend with fewer nodes than
//     the policy's minimum goes back to the fallback backend (nodes the
//     policy placed explicitly stay), and grouping is redone.
// Needs: a verified graph with nodes in topological order. Guarantees: every
// node in exactly one region; regions listed in an order that runs them
// (each region's inputs are graph inputs, constants or outputs of earlier
// regions); composites are single-exit and convex.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

class Declarations;
struct GraphUses;

struct PartitionBackend {
  std::string name;
  const Declarations* declarations = nullptr;
};

/// A node a backend refused once it compiled it, and why (e.g. "oneDNN has only its reference kernel ...").
struct CompileRefusal {
  std::string backend;
  std::string node;  // node name
  std::string reason;
};

struct PartitionPolicy {
  /// Manual placement: selector → backend name. A selector names a node, or an
  /// op type as "op:Softmax"; a bare word that is no node's name but is an op
  /// type in the graph also selects that op type.
  std::vector<std::pair<std::string, std::string>> place;
  /// Denials: backend name → selector (same selectors as place).
  std::vector<std::pair<std::string, std::string>> deny;
  /// Regions of non-fallback backends with fewer nodes go to the fallback.
  int min_region_size = 1;
  /// Fail naming every node no listed backend claims, instead of falling back.
  bool strict = false;
  /// Index into the backend list of the backend that takes what nobody else
  /// claims (the native backend); -1 for none (then every node must be claimed).
  int fallback = -1;
  /// Nodes a backend claimed and then refused when it compiled them (the
  /// runtime partitions again with these): that backend does not get them,
  /// unless `place` puts them there.
  std::vector<CompileRefusal> compile_refusals;
};

struct Composite {
  std::string pattern;
  std::vector<size_t> nodes;  // global node indices, ascending; the last is the pattern's root
};

struct Region {
  size_t backend = 0;             // index into the backend list
  std::vector<size_t> nodes;      // global node indices in execution order (composite members included)
  std::vector<Composite> composites;
  std::vector<ValueId> inputs;    // boundary inputs: graph inputs or other regions' outputs (never constants)
  std::vector<ValueId> outputs;   // values read by later regions or graph outputs
};

struct NodeDecision {
  size_t backend = 0;
  /// Why it went there: "claimed (priority 1 of 2)", "pattern MatMulBiasRelu",
  /// "placed by --place conv_3=native", "fallback", "region too small (2 < 3)".
  std::string why;
  /// Per backend in priority order: "" when that backend claimed the node,
  /// else why it refused (or was denied, or was not asked).
  std::vector<std::string> refusals;
};

struct PartitionResult {
  std::vector<std::string> backends;  // names in priority order
  std::vector<Region> regions;        // in execution order
  std::vector<NodeDecision> decisions;  // per global node
  std::vector<size_t> region_of_node;   // per global node
};

/// Partitions `graph` among `backends` (priority order). Throws a user error
/// for a bad policy (unknown backend or selector, placement a backend refuses)
/// and, in strict mode, for nodes no backend claims.
PartitionResult partition_graph(const Graph& graph, const std::vector<PartitionBackend>& backends,
                                const PartitionPolicy& policy);

/// Recomputes each region's boundary inputs and outputs from its nodes.
void compute_region_boundaries(const Graph& graph, PartitionResult& result);

/// Checks that regions cover every node exactly once, that composites lie in
/// their region, and that regions run in a valid order (no region reads a
/// value produced by itself later, or by a region after it), which also
/// means the region graph has no cycle. Throws a user error naming the
/// region and value otherwise. Used on artifacts and by the property tests.
void check_partition(const Graph& graph, const PartitionResult& result);

/// A region as a standalone graph for its backend.
struct RegionGraph {
  Graph graph;
  /// Per region-graph value: the global value it stands for.
  std::vector<ValueId> global_value;
  /// Per region-graph node: the global nodes it runs (one, or a composite's members).
  std::vector<std::vector<size_t>> global_nodes;
};

/// Builds the region's graph: boundary inputs become graph inputs, constants
/// the region reads become its own constants (shared, not copied), boundary
/// outputs become graph outputs, and each composite becomes one node
/// (op "Composite", domain "tessera", attribute "pattern" = its name,
/// attribute "body" = a graph of the matched nodes whose inputs are the
/// composite node's inputs, constants included, in the same order).
RegionGraph extract_region(const Graph& graph, const Region& region);

class Declarations;

/// The composites of `declarations`' patterns among `nodes` (global indices in execution order, as a
/// Region holds them), matched as the partitioner matches one backend's: patterns in declaration order,
/// roots from the last node back, a node in one composite at most. A match is kept only where every value
/// its members read from outside it is made before its first member runs (extract_region emits a
/// composite there). For a region whose nodes run on another backend than the one that claimed them
/// (native's fallback of another backend's region), so that they fuse as that backend's own would.
/// `uses`: the graph's (GraphUses, partition/pattern.h), built once for every region matched.
std::vector<Composite> match_composites(const Graph& graph, const GraphUses& uses, const std::vector<size_t>& nodes,
                                        const Declarations& declarations);

/// Reorders graph.nodes into region order (regions contiguous) and renumbers
/// the result's node indices to match. Keeps a topological order.
void order_nodes_by_region(Graph& graph, PartitionResult& result);

}  // namespace tessera
