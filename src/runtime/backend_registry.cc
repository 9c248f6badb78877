#include "runtime/backend_registry.h"

#include "backends/native/native_backend.h"
#include "backends/testing/test_backend.h"
#include "backends/dnnl/dnnl_backend.h"

namespace tessera {

const std::vector<BackendEntry>& built_in_backends() {
  static const std::vector<BackendEntry> entries = {
      {"dnnl", true, "oneDNN 2.6: convolutions, matmuls, pooling, normalisation with fused post-ops and blocked layouts",
       make_dnnl_backend},
      {"test", false, "test backend: a few float32 ops in its own (scrambled) memory space", make_test_backend},
      {"native", true, "Tessera's own CPU kernels; runs every op", make_native_backend},
  };
  return entries;
}

std::string built_in_backend_names() {
  std::string names;
  for (const BackendEntry& entry : built_in_backends()) names += (names.empty() ? "" : ", ") + entry.name;
  return names;
}

const BackendEntry* find_backend(const std::string& name) {
  for (const BackendEntry& entry : built_in_backends()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace tessera
