// tsrp_status: the error objects that cross the plug-in ABI. The host makes
// them (tsrp_host.make_status) and owns those a plug-in returns.
#pragma once
#include <string>

#include "tessera/backend_plugin.h"

namespace tessera {

extern "C" tsrp_status* make_plugin_status(tsrp_status_code code, const char* message);

/// Throws the Error a status stands for (TSRP_INVALID_ARGUMENT a user error,
/// TSRP_UNSUPPORTED unsupported, anything else internal), with `context`
/// before the plug-in's message, and frees the status. Does nothing for NULL.
void throw_if_error(tsrp_status* status, const std::string& context);

}  // namespace tessera
