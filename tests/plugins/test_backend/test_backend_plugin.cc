// The test backend (src/backends/testing/), built from its own sources as a
// plug-in named "test_plugin": loaded with --backend-plugin, it runs through
// the C ABI of include/tessera/backend_plugin.h what the built-in "test"
// backend runs directly, so the conformance, model and partition tests can
// compare the two (tests/plugins/test_backend/).
#include "backends/plugin_export/export_backend.h"
#include "backends/testing/test_backend.h"

extern "C" TSRP_EXPORT const tsrp_plugin* tessera_backend_plugin(const tsrp_host* host) {
  return tessera::export_backend_as_plugin(host, "test_plugin",
                                           "the test backend, built as a plug-in from its own sources (tests only)",
                                           [] { return tessera::make_test_backend("test_plugin"); });
}
