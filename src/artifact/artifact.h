// The .tsr artifact: one file holding a compiled model's plan (graph with
// static types, partition, placement), its constants and each region's
// compiled payload.
//
// Layout (all integers little-endian):
//   header   64 bytes: magic "TSRARTF\0", format version, flags, file size,
//            manifest offset and size, blob area offset and size, and a
//            64-bit checksum of the whole file computed with the checksum
//            field zeroed.
//   manifest the plan, in Tessera's own tagged binary encoding: graph
//            (values, nodes with attributes and subgraphs, inputs, outputs,
//            metadata), backend names, regions (backend, payload version,
//            compatibility string, nodes, composites, payload blob), per-node
//            decisions, placement, parameter count.
//   blobs    constants and payloads, each at a 64-byte aligned offset, so
//            loading maps the file and points constants into the mapping.
// Every count, length and offset is checked against the bytes that are
// really there before use; a truncated, corrupted or hostile file is a user
// error naming what is wrong, never a crash.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "partition/partitioner.h"

namespace tessera {

/// The version save_artifact writes: 2 added the compiled bodies of control flow (Artifact::bodies).
constexpr uint32_t kArtifactFormatVersion = 2;
/// The oldest version load_artifact reads (version 1: no bodies; they compile at load).
constexpr uint32_t kOldestArtifactFormatVersion = 1;

struct ArtifactRegion {
  std::string backend;
  std::string backend_version;
  std::string compatibility;
  std::vector<size_t> nodes;  // global node indices, in execution order
  std::vector<Composite> composites;
  /// When saving: the bytes to store. When loading: a view into the mapping.
  std::span<const uint8_t> payload;
};

struct ArtifactPlacement {
  std::string node_name;
  std::string op_type;
  std::string backend;
  std::string note;
};

struct Artifact;

/// A control-flow body (an If branch, a Loop's or Scan's body) as the model compiled it: its own plan,
/// found again at load by `key` (the runtime's digest of the body graph, its input types, the constants
/// it was given and how it runs), so loading neither compiles nor re-measures it.
struct ArtifactBody {
  std::string key;
  std::vector<size_t> fed;  // the body graph's inputs the plan takes, in order (the rest were constants)
  std::string measured;     // the placement note's measurement, as made when compiling
  std::shared_ptr<Artifact> plan;
};

struct Artifact {
  Graph graph;  // nodes in region order; constants point into `mapping` after loading
  std::vector<std::string> backends;  // partition's backend names, priority order
  std::vector<ArtifactRegion> regions;
  std::vector<NodeDecision> decisions;  // per graph node
  std::vector<ArtifactPlacement> placement;
  int64_t parameter_count = 0;
  /// Compiled bodies of the graph's control-flow nodes (their own bodies nested in their plans).
  std::vector<ArtifactBody> bodies;
  /// Keeps the mapped file alive while constants or payloads point into it.
  std::shared_ptr<const void> mapping;
};

/// Writes the artifact (to a temporary file renamed into place, so a failed
/// save never leaves a half-written file under `path`). Throws a user error
/// when the file cannot be written.
void save_artifact(const std::string& path, const Artifact& artifact);

/// The artifact as the bytes save_artifact would write (e.g. to embed it in
/// another file, such as a PyTorch module's pickle).
std::vector<uint8_t> artifact_bytes(const Artifact& artifact);

/// Maps and checks an artifact: header, checksum, every length and offset,
/// graph structure (ids in range, topological order, names unique, nodes'
/// arity and attribute kinds against their op schemas; subgraphs too),
/// constant sizes against their dtype and shape, regions and composites
/// against the graph (every node in exactly one region, regions in an order
/// that runs), one decision per node whose backend is its region's, with one
/// refusal entry per backend. Does not check backends (the runtime does) or
/// shapes against the op schemas (check_inferred_types does). Throws a user
/// error naming the file and the problem. Constants are read-only views of
/// the mapping.
Artifact load_artifact(const std::string& path);

/// Same, from bytes in memory (`keep_alive` owns them; unaligned bytes are copied once).
Artifact load_artifact_from_memory(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep_alive,
                                   const std::string& name);

/// A 64-bit digest of `graph` as an artifact stores it: values, types, nodes, attributes, subgraphs and
/// constants' bytes. A graph and the same graph loaded back from an artifact have the same digest.
uint64_t graph_digest(const Graph& graph);

/// True when the file starts with the artifact magic (to tell .tsr from ONNX).
bool is_artifact_file(const std::string& path);
/// True when `data` starts with the artifact magic (bytes in memory).
bool is_artifact_bytes(const void* data, size_t size);

}  // namespace tessera
