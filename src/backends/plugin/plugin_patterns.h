// Reads a plug-in's fused patterns (tsrp_pattern data) into the host's
// pattern language (src/partition/pattern.h).
#pragma once
#include <functional>
#include <string>

#include "partition/pattern.h"
#include "tessera/backend_plugin.h"

namespace tessera {

using NodePredicate = std::function<bool(const Graph&, const Node&)>;

/// The Pattern `data` describes. `supported` is attached (as a where() check)
/// to op entries flagged TSRP_PATTERN_SUPPORTED, and `checked(entry index)` to
/// those flagged TSRP_PATTERN_CHECKED (null `checked`: such a flag is an
/// error). A user error, prefixed with `where`, for malformed data: a root or
/// input index out of range, an entry that depends on itself, an op entry
/// without op types, an either without alternatives, more than 256 entries.
Pattern read_plugin_pattern(const tsrp_pattern& data, const NodePredicate& supported,
                            const std::function<NodePredicate(size_t entry)>& checked, const std::string& where);

}  // namespace tessera
