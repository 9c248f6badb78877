// Fixes the values of graph inputs at compile time (CompileOptions::input_values,
// --input-values NAME=VALUE): every node that reads such an input reads a
// constant of that value instead, so that what depends on it folds (an If on
// a sample rate takes its branch at compile time: inline_constant_if). The
// input stays an input of the model, read by no node: callers still feed it,
// and each run checks that they feed the value fixed (bound_input_values,
// CompiledModel::validate_inputs), so another value is an error, never a
// silently wrong answer. The values are kept in the graph's metadata
// ("tessera.input_values"), so an artifact checks them too.
//
// An input takes a value when it holds one element (shape [] or all ones,
// after bind_input_shapes) of a numeric or bool dtype; the text is parsed for
// that dtype (integers in range, "true"/"false" or 1/0 for bool). Anything
// else is a user error naming the input.
//
// Needs: bind_input_shapes. Keeps: graph inputs and outputs (an output that is
// such an input stays the input).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace tessera {

inline constexpr char kInputValuesMetadata[] = "tessera.input_values";

/// Binds `values` (input name -> value text) and records them in graph.metadata.
void bind_input_values(Graph& graph, const std::map<std::string, std::string>& values);

/// The values graph.metadata records (bind_input_values), as (input index, value) pairs.
std::vector<std::pair<size_t, Tensor>> bound_input_values(const Graph& graph);

}  // namespace tessera
