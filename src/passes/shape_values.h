// What is known, element by element, of the small integer tensors a model computes from shapes.
//
// Exporters write a Reshape's target as a computation: Shape(x) -> Gather -> Unsqueeze -> Concat (torch's
// attention writes four of them a layer). With every dim static the chain folds as constants do; with
// an open dim (a sequence length) its tensors are not constants, yet all their elements but one are: the
// heads and the head width are. ShapeValues tracks that, as ONNX's "data propagation" does: each element
// of an int32/int64 tensor of rank 0 or 1 (at most kMaxShapeValueElements) is a constant, or the dim d of
// some value it was read from by Shape, or nothing known. infer_and_fold asks it, node by node:
//  - a node whose output is known in full becomes a constant (Gather(Shape(x), 2) where x's dim 2 is
//    static), so what reads it folds as well (a Slice whose bounds were computed gets constant bounds);
//  - a Reshape whose target is known but for its open dims gets a constant target: 0 where an element is
//    its input's own dim at that position (allowzero 0), -1 for at most one other, nothing when more
//    remain. Both mean what the computed target meant for every input the Reshape accepts.
// Where an element is derived is decided by running the node itself (the evaluator the caller gives)
// on tensors of element indices, so Gather, Slice, Concat, Unsqueeze and the like mean here exactly
// what they mean at run time. Arithmetic keeps a traced element only through its identity (x * 1, x + 0,
// x / 1, x - 0); every other result with an unknown operand is unknown.
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_and_fold.h"

namespace tessera {

constexpr int64_t kMaxShapeValueElements = 64;

class ShapeValues {
 public:
  /// One element: known (`value`), or the dim `dim` of value `source`, or neither (source kNoValue).
  struct Element {
    bool known = false;
    int64_t value = 0;
    ValueId source = kNoValue;
    int64_t dim = -1;
  };

  explicit ShapeValues(const NodeEvaluator& evaluate) : evaluate_(evaluate) {}

  /// Before `node` is inferred: a Reshape whose target is not constant but known well enough reads a
  /// new constant target instead (added to the graph). Returns whether it did.
  bool give_reshape_a_constant_target(Graph& graph, Node& node);

  /// After `node`'s outputs are typed (and it was not folded): records what is known of its outputs.
  /// Returns output 0's value when every element of it is known, for the caller to fold.
  std::optional<Tensor> observe(const Graph& graph, const Node& node);

 private:
  struct Partial {
    DType dtype = DType::kInt64;
    Shape dims;  // rank 0 or 1
    std::vector<Element> elements;
  };
  /// What is known of `id`: a constant's elements, or what observe recorded; nullopt otherwise.
  std::optional<Partial> get(const Graph& graph, ValueId id) const;
  std::optional<Partial> moved(const Graph& graph, const Node& node, const std::vector<size_t>& data_inputs) const;
  std::optional<Partial> arithmetic(const Graph& graph, const Node& node) const;

  const NodeEvaluator& evaluate_;
  std::vector<std::optional<Partial>> recorded_;  // by ValueId
};

}  // namespace tessera
