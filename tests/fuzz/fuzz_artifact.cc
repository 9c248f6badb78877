// libFuzzer target: arbitrary bytes as a .tsr artifact must load and pass the
// type re-check, or fail with a tessera::Error; never crash, leak or read out
// of bounds. The checksum field is recomputed over the mutated bytes first,
// so mutations reach the header-field, manifest and structure checks instead
// of all stopping at "checksum mismatch" (the unit tests cover that check).
// Seeds: small artifacts saved from the artifact tests' graphs and from the
// node-test models compiled by the CLI.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/artifact_internal.h"
#include "ir/error.h"
#include "passes/check_inferred_types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace internal = tessera::artifact_internal;
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= internal::kHeaderSize) {
    uint64_t checksum = internal::artifact_checksum(bytes);
    std::memcpy(bytes.data() + internal::kChecksumOffset, &checksum, sizeof(checksum));
  }
  try {
    tessera::Artifact artifact = tessera::load_artifact_from_memory(bytes, nullptr, "fuzz.tsr");
    tessera::check_inferred_types(artifact.graph);
  } catch (const tessera::Error&) {
  }
  return 0;
}
