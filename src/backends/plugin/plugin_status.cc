// Status objects of the plug-in ABI (plugin_status.h).
#include "backends/plugin/plugin_status.h"

#include <memory>
#include <new>

#include "ir/error.h"

struct tsrp_status {
  tsrp_status_code code;
  std::string message;
};

namespace tessera {
namespace {
// Stands in for a status that could not be allocated (a NULL would read as success).
tsrp_status out_of_memory_status{TSRP_INTERNAL, "out of memory while making a status"};
}  // namespace

extern "C" tsrp_status* make_plugin_status(tsrp_status_code code, const char* message) {
  // Called by plug-ins: must not throw.
  try {
    return new tsrp_status{code == TSRP_OK ? TSRP_INTERNAL : code, message ? message : "(no message)"};
  } catch (...) {
    return &out_of_memory_status;
  }
}

void throw_if_error(tsrp_status* status, const std::string& context) {
  if (!status) return;
  const tsrp_status_code code = status->code;
  std::string message = context + status->message;
  if (status != &out_of_memory_status) delete status;
  switch (code) {
    case TSRP_INVALID_ARGUMENT: throw Error(ErrorKind::kUser, std::move(message));
    case TSRP_UNSUPPORTED: throw Error(ErrorKind::kUnsupported, std::move(message));
    default: throw Error(ErrorKind::kInternal, std::move(message));
  }
}

}  // namespace tessera
