// The backends built into this Tessera, in priority order. The runtime and
// the C API choose backends by name from here; nothing else lists them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace tessera {

struct BackendEntry {
  std::string name;
  /// Used when the caller names no backends. The test backend is not: it
  /// exists to exercise partitioning, copies and artifacts.
  bool used_by_default = true;
  std::string description;
  std::function<std::unique_ptr<Backend>()> make;
};

/// Every built-in backend, highest priority first (native, the fallback, last).
const std::vector<BackendEntry>& built_in_backends();

/// "native, test" for messages.
std::string built_in_backend_names();

/// The entry named `name`, or null.
const BackendEntry* find_backend(const std::string& name);

}  // namespace tessera
