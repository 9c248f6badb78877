// libFuzzer target: arbitrary bytes as an ONNX model must import (and, when
// small enough, compile) or fail with a tessera::Error; never crash or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    tessera::Graph graph = tessera::onnx_frontend::import_onnx_bytes(bytes, "");
    if (graph.nodes.size() < 64) {
      for (tessera::ValueId id : graph.inputs) {
        const auto& type = graph.value(id).type;
        if (!type.is_static() || tessera::shape_numel(type.dims) > (1 << 16)) return 0;
      }
      tessera::CompiledModel::compile(std::move(graph), {});
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
