// What a backend compiles a region from, as one string: two regions with the same
// key compile to interchangeable results. CompiledModel::compile partitions and
// compiles again whenever a backend refuses a node it had claimed (a slow kernel,
// a shape it cannot run), and most regions come back unchanged: a GPT-2-small
// decoder's 13 oneDNN regions were compiled 174 times over its rounds, each
// lowering its region at the probe dims and reordering its weights. With this
// key a round takes an unchanged region's compiled result from the round before.
//
// The key spells out the region graph in full: every value in order (name, type,
// and for a constant its tensor's identity: regions share the model's constants,
// so equal names in one model are equal data), every node in order (name, domain,
// op, opset, inputs and outputs by local id, fused members, attributes, subgraphs
// recursively), the graph's inputs and outputs by local id, and the options the
// backend is given. Equal keys therefore mean equal local numbering as well, so a
// compiled region and its graph can serve a new round's global numbering.
#pragma once
#include <string>

#include "backends/backend.h"
#include "ir/graph.h"

namespace tessera {

std::string region_compile_key(const std::string& backend, const Graph& region, const RegionOptions& options);

}  // namespace tessera
