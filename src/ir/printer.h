// A readable, stable text form of a graph, for dumps (TESSERA_DUMP) and tests.
#pragma once
#include <string>

#include "ir/graph.h"

namespace tessera {

/// One line per input, constant (type only), node and output, e.g.
///   %y: float32[1x8] = Relu(%x)  # relu_0
std::string print_graph(const Graph& graph);

}  // namespace tessera
