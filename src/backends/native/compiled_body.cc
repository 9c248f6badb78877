#include "backends/native/compiled_body.h"

#include <cstdlib>

#include "ir/error.h"

namespace tessera::native {
namespace {
thread_local const BodyCompiler* lent_compiler = nullptr;
thread_local BodyTimes* collected_times = nullptr;
}  // namespace

std::vector<double>& BodyTimes::of(const CompiledBody* body) {
  for (auto& [b, times] : bodies) {
    if (b == body) return times;
  }
  bodies.emplace_back(body, std::vector<double>());
  return bodies.back().second;
}

BodyTimes* current_body_times() { return collected_times; }

ScopedBodyTimes::ScopedBodyTimes(BodyTimes* times) : previous_(collected_times) { collected_times = times; }

ScopedBodyTimes::~ScopedBodyTimes() { collected_times = previous_; }

const BodyCompiler* current_body_compiler() { return lent_compiler; }

ScopedBodyCompiler::ScopedBodyCompiler(BodyCompiler compiler) : compiler_(std::move(compiler)), previous_(lent_compiler) {
  lent_compiler = &compiler_;
}

ScopedBodyCompiler::~ScopedBodyCompiler() { lent_compiler = previous_; }

std::shared_ptr<const CompiledBody> try_compile_body(const Graph& body, const std::vector<TensorType>& input_types,
                                                     const std::vector<const Tensor*>& constants,
                                                     const std::vector<ValueKind>& kinds, std::string* why,
                                                     BodyUse use) {
  const BodyCompiler* compiler = lent_compiler;
  if (!compiler) {
    *why = kNoBodyCompiler;
    return nullptr;
  }
  if (const char* env = std::getenv("TESSERA_COMPILE_BODIES"); env && std::string(env) == "0") {
    *why = "TESSERA_COMPILE_BODIES=0";
    return nullptr;
  }
  for (ValueKind kind : kinds) {
    if (kind != ValueKind::kTensor) {
      *why = "it carries a sequence or optional";
      return nullptr;
    }
  }
  if (input_types.size() != body.inputs.size()) {
    *why = "its inputs' types are not known";
    return nullptr;
  }
  for (size_t i = 0; i < input_types.size(); ++i) {
    const TensorType& t = input_types[i];
    if (!t.is_tensor() || t.dtype == DType::kUndefined || !t.rank_known) {
      *why = "the type of its input '" + body.value(body.inputs[i]).name + "' is not known before running";
      return nullptr;
    }
  }
  try {
    return (*compiler)(body, input_types, constants, use);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) throw;
    *why = e.what();
    return nullptr;
  }
}

}  // namespace tessera::native
