// Control-flow bodies compiled like a model. The runtime, while it compiles or
// loads a model's regions, lends the native backend a BodyCompiler: the If and
// Loop kernels' prepare hands it each body whose values are all tensors, and
// the body goes through the whole pipeline (passes, partitioning across the
// model's backends, region compilation, a memory plan) once, instead of being
// interpreted node by node on every call or trip. Bodies it refuses, bodies of
// sequences or optionals, and nodes prepared outside a compile (folding,
// accuracy-check references) keep the interpreter (controlflow_subgraph.cc).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace tessera::native {

class CompiledBody {
 public:
  virtual ~CompiledBody() = default;
  /// Runs the body on its graph inputs in order (formal inputs, then captures; read in place).
  /// `outputs[i]`, where given and non-null, is a buffer for output i of the dtype and shape the
  /// run makes (checked), written in place where the body can; the other outputs are returned.
  virtual std::vector<Tensor> run(const std::vector<TensorView>& inputs, const std::vector<TensorView*>& outputs) const = 0;
  /// The types of the body's outputs as compiled (dims -1 where known only at run time).
  virtual const std::vector<TensorType>& output_types() const = 0;
  /// Where the body's nodes run, for the placement note: "dnnl 12 nodes, native 2 nodes in 3 regions".
  virtual std::string summary() const = 0;
  /// Every node of the body as compiled, with where it runs (nested bodies' nodes under their node's path).
  virtual std::vector<InnerNodePlacement> inner_placement() const = 0;
};

/// The time each node inside compiled bodies took, for a profiled run: while a ScopedBodyTimes lives on a
/// thread, every CompiledBody run on it adds its nodes' milliseconds (in its inner_placement() order,
/// summed over runs: a Loop's trips) to its entry here.
struct BodyTimes {
  std::vector<std::pair<const CompiledBody*, std::vector<double>>> bodies;
  /// `body`'s times (empty until it ran).
  std::vector<double>& of(const CompiledBody* body);
};
/// The times being collected on this thread, or null.
BodyTimes* current_body_times();
class ScopedBodyTimes {
 public:
  explicit ScopedBodyTimes(BodyTimes* times);
  ~ScopedBodyTimes();
  ScopedBodyTimes(const ScopedBodyTimes&) = delete;
  ScopedBodyTimes& operator=(const ScopedBodyTimes&) = delete;

 private:
  BodyTimes* previous_;
};

/// Compiles `body` with its inputs typed `input_types` (one per graph input); `constants[i]`, where
/// given and non-null, is input i's value, the same on every run (an outer weight a body captures), which
/// the body compiles in as a constant (run still takes every input and ignores those). Throws an Error
/// where it cannot. `use` says how the body runs (BodyUse).
enum class BodyUse {
  kOnce,  // an If's branch: once a call; compiled on the model's backends
  /// A Loop's or Scan's body, once a trip: compiled on the model's backends and, where that placed nodes
  /// off native and every input's shape is known, on native alone too; the faster by measurement is kept
  /// (a few tiny steps run faster on native than as oneDNN primitives, whose fixed cost a trip pays).
  kPerTrip,
  /// A Loop's body whose carried values change shape every trip: on native alone (a backend that prepares
  /// per shape, like oneDNN, would prepare on every trip).
  kPerTripNewShapes,
};
using BodyCompiler = std::function<std::shared_ptr<const CompiledBody>(
    const Graph& body, const std::vector<TensorType>& input_types, const std::vector<const Tensor*>& constants,
    BodyUse use)>;

/// try_compile_body's reason where no compiler is lent.
inline constexpr const char* kNoBodyCompiler = "no compile in progress";

/// The compiler lent for the compile or load in progress on this thread, or null.
const BodyCompiler* current_body_compiler();

/// Lends `compiler` to this thread's kernel preparation until destroyed (scopes nest).
class ScopedBodyCompiler {
 public:
  explicit ScopedBodyCompiler(BodyCompiler compiler);
  ~ScopedBodyCompiler();
  ScopedBodyCompiler(const ScopedBodyCompiler&) = delete;
  ScopedBodyCompiler& operator=(const ScopedBodyCompiler&) = delete;

 private:
  BodyCompiler compiler_;
  const BodyCompiler* previous_;
};

/// A body compiled by the lent compiler, or null with `why` saying why the interpreter runs it:
/// no compiler is lent, TESSERA_COMPILE_BODIES=0 (for A/B runs), a value of the body is a sequence or optional (`kinds`, the interpreter's), an
/// input's type is not known, or the compiler refused it.
std::shared_ptr<const CompiledBody> try_compile_body(const Graph& body, const std::vector<TensorType>& input_types,
                                                     const std::vector<const Tensor*>& constants,
                                                     const std::vector<ValueKind>& kinds, std::string* why,
                                                     BodyUse use = BodyUse::kOnce);

}  // namespace tessera::native
