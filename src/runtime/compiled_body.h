// The runtime's BodyCompiler (backends/native/compiled_body.h): a control-flow
// body compiled as a model of its own with the enclosing model's options.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "artifact/artifact.h"
#include "backends/native/compiled_body.h"
#include "runtime/session.h"

namespace tessera {

/// The bodies a model compiled (or loaded), each by its key: what its artifact
/// stores. A body whose model was dropped on the way (a region compiled again,
/// the slower of two measured placements) is not stored.
struct BodyRecords {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::weak_ptr<const native::CompiledBody>>> made;
};

/// Compiles bodies with `options`' threads, backends, precision and those of
/// its placement selectors that apply to the body; input shapes, input values,
/// tuning records and dim bounds are the enclosing model's and do not apply.
/// Each body made is added to `records`.
native::BodyCompiler make_body_compiler(const CompileOptions& options, std::shared_ptr<BodyRecords> records);

/// For a model loaded from an artifact: a body the artifact stores (`stored`,
/// found by key) is loaded from its plan with `options`' threads, neither
/// compiled nor measured again; one it does not store (an artifact of format
/// version 1) is compiled as make_body_compiler would. A stored body that does
/// not fit the body it is found for (its inputs, their types, its outputs) is
/// not run: the first such problem is written to `*problem` (the load then fails
/// with it). Each body is added to `records`. `stored` must outlive the compiler.
native::BodyCompiler make_body_loader(const CompileOptions& options, std::shared_ptr<BodyRecords> records,
                                      const std::vector<ArtifactBody>* stored, std::string artifact_name,
                                      std::shared_ptr<std::string> problem);

/// The bodies in `records` that are still in use, as the artifact stores them
/// (each with its model's plan, its own bodies nested).
std::vector<ArtifactBody> stored_bodies(BodyRecords& records);

}  // namespace tessera
