// CompiledModel's artifact half: loading a .tsr (from a file or memory) into a model that runs it, and
// writing one. The checks a hostile artifact meets (format, checksum, backends, placement, regions) are in
// from_artifact; compiling from a graph is session.cc's.
#include "artifact/artifact.h"
#include "ir/error.h"
#include "partition/declarations.h"
#include "passes/check_inferred_types.h"
#include "runtime/backend_registry.h"
#include "runtime/region_plan.h"
#include "runtime/session.h"
#include "runtime/idle_spinners.h"
#include "runtime/compiled_body.h"

namespace tessera {

namespace {

void check_artifact_options(const std::string& name, const CompileOptions& options) {
  if (!options.input_shapes.empty() || !options.input_values.empty() || !options.backends.empty() || !options.place.empty() ||
      !options.deny.empty() || options.strict || options.min_region_size != 1 || options.precision.bf16 || options.tuning) {
    throw_user_error("'", name, "' is a compiled artifact: input shapes and values, backends, placement, tuning and precision were fixed ",
                     "when it was compiled (only the thread count applies when loading)");
  }
}

}  // namespace

std::unique_ptr<CompiledModel> CompiledModel::load(const std::string& path, const CompileOptions& options) {
  check_artifact_options(path, options);
  return from_artifact(load_artifact(path), path, options);
}

std::unique_ptr<CompiledModel> CompiledModel::load_from_memory(std::span<const uint8_t> bytes,
                                                               std::shared_ptr<const void> keep_alive,
                                                               const std::string& name, const CompileOptions& options) {
  check_artifact_options(name, options);
  return from_artifact(load_artifact_from_memory(bytes, std::move(keep_alive), name), name, options);
}

std::unique_ptr<CompiledModel> CompiledModel::from_artifact(Artifact artifact, const std::string& path,
                                                            const CompileOptions& options) {
  const IdleSpinScope idle_spinners(options.num_threads);  // loading measures per-step threads, as runs will see them
  const std::string where = "artifact '" + path + "': ";
  std::unique_ptr<CompiledModel> model(new CompiledModel());
  try {
    check_inferred_types(artifact.graph);
  } catch (const Error& e) {
    throw_user_error(where, e.what());
  }
  model->artifact_mapping_ = artifact.mapping;
  model->graph_ = std::move(artifact.graph);
  model->parameter_count_ = artifact.parameter_count;
  const Graph& g = model->graph_;

  PartitionResult& partition = model->partition_;
  partition.backends = artifact.backends;
  partition.decisions = std::move(artifact.decisions);
  partition.decisions.resize(g.nodes.size());
  RegionOptions backend_options;
  backend_options.num_threads = options.num_threads;
  for (const std::string& name : partition.backends) {
    const BackendEntry* entry = find_backend(name);
    try {
      model->backends_.push_back(entry ? entry->make(backend_options) : nullptr);
    } catch (const Error& e) {
      throw Error(e.kind(), where + e.what());
    }
  }
  for (size_t r = 0; r < artifact.regions.size(); ++r) {
    const ArtifactRegion& stored = artifact.regions[r];
    Region region;
    region.backend = partition.backends.size();
    for (size_t b = 0; b < partition.backends.size(); ++b) {
      if (partition.backends[b] == stored.backend) region.backend = b;
    }
    if (region.backend == partition.backends.size()) {
      throw_user_error(where, "region ", r, " names backend '", stored.backend, "', which the artifact does not list");
    }
    region.nodes = stored.nodes;
    region.composites = stored.composites;
    partition.regions.push_back(std::move(region));
  }
  partition.region_of_node.assign(g.nodes.size(), 0);
  try {
    check_partition(g, partition);
  } catch (const Error& e) {
    throw_user_error(where, "inconsistent partition: ", e.what());
  }
  for (size_t r = 0; r < partition.regions.size(); ++r) {
    for (size_t node : partition.regions[r].nodes) partition.region_of_node[node] = r;
  }
  compute_region_boundaries(g, partition);

  RegionOptions region_options;
  region_options.num_threads = options.num_threads;
  // If, Loop and Scan bodies load from the plans the artifact stores for them (format version 2), as
  // they were compiled; a body it does not store compiles here, on the artifact's backends (float32).
  CompileOptions body_options;
  body_options.num_threads = options.num_threads;
  body_options.backends = artifact.backends;
  auto body_problem = std::make_shared<std::string>();
  const native::ScopedBodyCompiler body_compiler(
      make_body_loader(body_options, model->body_records_, &artifact.bodies, path, body_problem));
  for (size_t r = 0; r < partition.regions.size(); ++r) {
    const Region& region = partition.regions[r];
    const ArtifactRegion& stored = artifact.regions[r];
    const Backend* backend = model->backends_[region.backend].get();
    if (!backend) {
      throw_user_error(where, "region ", r, " needs backend '", stored.backend, "' (version ", stored.backend_version,
                       ", compiled for '", stored.compatibility, "'), which is neither built in nor loaded as a plug-in ",
                       "(known: ", known_backend_names(), "); load its plug-in with --backend-plugin PATH or TESSERA_BACKEND_PLUGINS");
    }
    if (stored.backend_version != backend->version()) {
      throw_user_error(where, "region ", r, " was compiled by backend '", stored.backend, "' with payload version ",
                       stored.backend_version, "; this build's backend reads version ", backend->version());
    }
    if (stored.compatibility != backend->compatibility()) {
      throw_user_error(where, "region ", r, " was compiled for '", stored.compatibility, "'; backend '", stored.backend,
                       "' here is '", backend->compatibility(), "'");
    }
    auto plan = std::make_unique<RegionPlan>();
    plan->backend_index = region.backend;
    plan->backend = backend;
    plan->region = extract_region(g, region);
    plan->fallback_options = region_options;
    plan->payload = stored.payload;
    try {
      plan->executable = backend->load(plan->region.graph, plan->payload, region_options);
    } catch (const Error& e) {
      throw_user_error(where, "region ", r, " (", stored.backend, "): ", e.what());
    }
    model->regions_.push_back(std::move(plan));
  }
  if (!body_problem->empty()) {
    if (body_problem->rfind("artifact '", 0) == 0) throw_user_error(*body_problem);  // names the file already
    throw_user_error(where, *body_problem);
  }

  // The stored placement lists the graph's nodes first, in order.
  if (artifact.placement.size() < g.nodes.size()) throw_user_error(where, "placement lists fewer rows than the plan has nodes");
  for (size_t i = 0; i < artifact.placement.size(); ++i) {
    const ArtifactPlacement& row = artifact.placement[i];
    if (i < g.nodes.size() && row.node_name != g.nodes[i].name) {
      throw_user_error(where, "placement row ", i, " names '", row.node_name, "' but node ", i, " is '", g.nodes[i].name, "'");
    }
    const int64_t region = i < g.nodes.size() ? static_cast<int64_t>(partition.region_of_node[i]) : -1;
    const std::string why = i < g.nodes.size() ? partition.decisions[i].why : "";
    model->placement_.push_back({row.node_name, row.op_type, row.backend, row.note, region, why});
  }
  model->read_node_precisions();
  model->num_threads_ = options.num_threads;
  if (std::string w = thread_count_warning(options.num_threads); !w.empty()) model->warnings_.push_back(std::move(w));
  model->finish();
  model->apply_dim_bounds(options.dim_bounds);
  return model;
}

void CompiledModel::save(const std::string& path) const { save_artifact(path, to_artifact()); }

std::vector<uint8_t> CompiledModel::serialize() const { return artifact_bytes(to_artifact()); }

Artifact CompiledModel::to_artifact() const {
  Artifact artifact;
  artifact.graph = graph_;
  artifact.backends = partition_.backends;
  artifact.decisions = partition_.decisions;
  artifact.parameter_count = parameter_count_;
  for (size_t r = 0; r < regions_.size(); ++r) {
    const RegionPlan& plan = *regions_[r];
    ArtifactRegion region;
    region.backend = plan.backend->name();
    region.backend_version = plan.backend->version();
    region.compatibility = plan.backend->compatibility();
    region.nodes = partition_.regions[r].nodes;
    region.composites = partition_.regions[r].composites;
    region.payload = plan.payload;
    artifact.regions.push_back(std::move(region));
  }
  for (const NodePlacement& p : placement_) artifact.placement.push_back({p.node_name, p.op_type, p.backend, p.note});
  artifact.bodies = stored_bodies(*body_records_);
  return artifact;
}

}  // namespace tessera
