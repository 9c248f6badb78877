// libFuzzer target: arbitrary bytes as an ONNX model must import (and, when
// small enough, compile) or fail with a tessera user or unsupported error;
// never crash, leak or raise an internal error. A model that compiles and
// whose sizes are bounded (fuzz_run_model.h) is then run once, so kernels see
// the mutated shapes and attributes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "frontend/onnx/onnx_importer.h"
#include "fuzz_run_model.h"
#include "ir/error.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<tessera::CompiledModel> model;
  try {
    tessera::Graph graph = tessera::onnx_frontend::import_onnx_bytes(bytes, "");
    if (graph.nodes.size() >= 64) return 0;
    for (tessera::ValueId id : graph.inputs) {
      const auto& type = graph.value(id).type;
      if (!type.is_static() || tessera::shape_numel(type.dims) > (1 << 16)) return 0;
    }
    model = tessera::CompiledModel::compile(std::move(graph), {});
  } catch (const tessera::Error& error) {
    tessera::fuzz::fail_on_internal_error(error);
    return 0;
  }
  tessera::fuzz::run_if_bounded(*model, data, size);
  return 0;
}
