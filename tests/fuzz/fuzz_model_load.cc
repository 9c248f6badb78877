// libFuzzer target: arbitrary bytes as a .tsr file loaded by the runtime, all
// the way: artifact checks, type re-check, partition check, and every
// backend's payload (native, test, oneDNN, and the plug-ins scripts/fuzz.sh
// loads through TESSERA_BACKEND_PLUGINS: XNNPACK, the example accelerator,
// the test backend as a plug-in) rebuilt into executable regions.
// It must load or fail with a tessera user error; never crash, leak, read out
// of bounds or raise an internal error. A model that loads and whose sizes are
// bounded (fuzz_run_model.h) is then run once, so the kernels see the mutated
// shapes, attributes and constants, unless it has a oneDNN region: a oneDNN
// payload's intermediate slots are bounded only by the payload limits
// (kMaxSlotElements), not by the graph's values, so a mutated payload can
// describe hours of convolution (CI hit one). Those payloads are parsed,
// checked and turned into primitives here; fuzz_onnx_import runs oneDNN
// regions compiled from fuzzed models, whose slots follow bounded values. As in fuzz_artifact, the
// checksum is recomputed over the mutated bytes so that mutations reach the
// payload parsers.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "artifact/artifact_internal.h"
#include "fuzz_run_model.h"
#include "ir/error.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace internal = tessera::artifact_internal;
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= internal::kHeaderSize) {
    const uint64_t checksum = internal::artifact_checksum(bytes);
    std::memcpy(bytes.data() + internal::kChecksumOffset, &checksum, sizeof(checksum));
  }
  // The runtime loads from a path (it maps the file).
  static const std::string path = "/tmp/tessera_fuzz_model_" + std::to_string(getpid()) + ".tsr";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  std::unique_ptr<tessera::CompiledModel> model;
  try {
    tessera::CompileOptions options;
    model = tessera::CompiledModel::load(path, options);
  } catch (const tessera::Error& error) {
    tessera::fuzz::fail_on_internal_error(error);
    return 0;
  }
  for (const tessera::RegionSummary& region : model->regions()) {
    if (region.backend == "dnnl") return 0;
  }
  tessera::fuzz::run_if_bounded(*model, data, size);
  return 0;
}
