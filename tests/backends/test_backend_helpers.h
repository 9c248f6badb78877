// Helpers for the test backend's tests: building small region graphs by hand
// (composites included, the shape partition/partitioner.h's extract_region
// produces), a ValueStore over test-device memory that plays the runtime's
// part, and a reference evaluator that runs the plain graph on the native
// backend's kernels node by node.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"

namespace tessera::testing {

/// Deterministic pseudo-random floats in [low, high).
Tensor random_tensor(Shape shape, uint32_t seed, float low = -1.0f, float high = 1.0f);
Tensor float_tensor(Shape shape, std::vector<float> values);
Tensor int64_tensor(Shape shape, std::vector<int64_t> values);

/// Builds a graph node by node; every value gets a static type.
class GraphBuilder {
 public:
  ValueId input(const std::string& name, Shape shape, DType dtype = DType::kFloat32);
  ValueId constant(const std::string& name, Tensor tensor);
  /// Adds a node (opset 17) with one output of the given shape; returns the output.
  ValueId node(const std::string& op_type, std::vector<ValueId> inputs, Shape output_shape,
               AttributeMap attrs = {}, DType dtype = DType::kFloat32);
  void output(ValueId id) { graph_.outputs.push_back(id); }
  Graph& graph() { return graph_; }

 private:
  Graph graph_;
  int counter_ = 0;
};

/// Replaces graph.nodes[members] (ascending, the last one the pattern's root)
/// with one composite node holding them as its body. The composite's inputs
/// are the members' outside inputs (constants included) in order of first
/// use, or reversed when `reverse_inputs`, to show order does not matter.
Graph make_composite(const Graph& graph, const std::vector<size_t>& members, const std::string& pattern,
                     bool reverse_inputs = false);

/// Evaluates the graph's outputs with evaluate_node_natively, node by node.
/// Composite nodes are not allowed: pass the plain graph.
std::vector<Tensor> evaluate_reference(const Graph& graph, const std::vector<Tensor>& inputs);

/// The runtime's part for one region run: device memory for every non-constant
/// value (inputs copied in, outputs either preallocated or left for the
/// backend to allocate()), host views for constants; frees everything it
/// allocated when destroyed.
class DeviceStore : public ValueStore {
 public:
  DeviceStore(const Graph& region, MemorySpace& space, const std::vector<Tensor>& inputs,
              bool preallocate_outputs = true);
  ~DeviceStore() override;
  DeviceStore(const DeviceStore&) = delete;
  DeviceStore& operator=(const DeviceStore&) = delete;

  const TensorView& get(ValueId id) override;
  TensorView& output(ValueId id) override;
  void allocate(ValueId id) override;
  bool profiling() const override { return profiling_; }
  void node_finished(size_t node_index, double milliseconds) override { finished_.push_back(node_index); }

  /// A host copy of a value in device memory.
  Tensor read(ValueId id) const;
  /// Makes get() of graph input `index` return the host tensor itself (a
  /// runtime that forgot a copy), to show the scrambling catches it.
  void hand_host_memory_for_input(size_t index, const Tensor& host);

  bool profiling_ = false;
  std::vector<size_t> finished_;

 private:
  const Graph& region_;
  MemorySpace& space_;
  std::vector<TensorView> views_;
  std::vector<void*> owned_;
};

/// Runs a compiled region on `inputs` through a DeviceStore; returns the graph outputs.
std::vector<Tensor> run_on_device(const ExecutableRegion& executable, const Graph& region, MemorySpace& space,
                                  const std::vector<Tensor>& inputs, bool preallocate_outputs = true);

/// |actual - expected| <= atol + rtol * |expected| everywhere, same shape.
void expect_near_tensor(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-5);

}  // namespace tessera::testing
