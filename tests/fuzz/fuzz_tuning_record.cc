// libFuzzer target: arbitrary bytes as a tuning record (tessera tune's JSON) must parse or throw a user
// error; never crash. A record that parses must write back to text that parses to the same record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/error.h"
#include "runtime/session.h"
#include "runtime/tuning_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::TuningRecord record;
  try {
    record = tessera::read_tuning_record(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const tessera::Error& e) {
    if (e.kind() == tessera::ErrorKind::kInternal) std::abort();
    return 0;
  }
  tessera::CompileOptions options;
  bool applied = false;
  // As the record of the model's open-dims plan applied to a compile that binds other shapes.
  tessera::apply_tuning(record, "another", record.fingerprint, "x=1", options, &applied);
  if (!applied && !record.measured_at.empty()) std::abort();
  tessera::apply_tuning(record, record.fingerprint, "open", "", options, &applied);
  if (!applied) std::abort();
  const std::string text = tessera::write_tuning_record(record);
  const tessera::TuningRecord again = tessera::read_tuning_record(text, "rewritten.json");
  if (tessera::write_tuning_record(again) != text || again.placement != record.placement ||
      again.measured_at != record.measured_at) {
    std::abort();
  }
  return 0;
}
