// Internal to the misc family: the parsed form of an Einsum equation, shared
// by Einsum's shape inference (src/ir/ops/misc.cc) and its native kernel
// (src/backends/native/kernels/misc_einsum.cc). Defined in misc_einsum.cc.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::einsum {

/// Every subscript letter and every dim an ellipsis covers gets a label id.
/// Letters keep their id across operands; ellipsis dims are right-aligned
/// across operands (numpy broadcasting) and get ids after the letters.
struct Equation {
  std::vector<std::vector<int>> operand_labels;  // per operand, the label of each dim
  std::vector<int> output_labels;                // the label of each output dim
  int num_labels = 0;
};

/// Parses `text` (e.g. "bij,bjk->bik", "...ii->...i", "i,i") for operands of
/// the given ranks. Without "->", the output is the ellipsis dims followed by
/// the letters used exactly once, in ASCII order. Throws a user error on a
/// malformed equation or a rank that does not match the subscripts.
Equation parse(const std::string& text, const std::vector<int64_t>& ranks);

/// The size of every label, from the operands' shapes (-1 where a dim is
/// unknown). A dim of size 1 broadcasts against a larger size of the same
/// label. Throws a user error on sizes that disagree.
std::vector<int64_t> label_sizes(const Equation& equation, const std::vector<Shape>& shapes);

}  // namespace tessera::einsum
