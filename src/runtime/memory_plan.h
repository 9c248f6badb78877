// Static memory planning: every intermediate value of static shape gets an
// offset in one arena, reusing memory of values whose lifetimes do not overlap.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace tessera {

/// Buffers for values of shapes known only at run time, kept from one run to
/// the next (RunStore takes and gives back; one pool per arena), and the most
/// any run held at once: the pool keeps up to twice that, so memory grows to
/// the largest shapes seen and is reused at every smaller one.
struct BufferPool {
  std::vector<std::unique_ptr<Buffer>> buffers;
  size_t high_water = 0;
};

struct MemoryPlan {
  static constexpr int64_t kNotPlanned = -1;
  std::vector<int64_t> offsets;  // per ValueId; kNotPlanned for inputs, constants, outputs, dynamic values
  int64_t arena_bytes = 0;       // peak, what one run allocates
  int64_t unplanned_bytes = 0;   // sum of planned sizes without reuse, for reporting
};

/// Plans intermediates (not graph inputs, outputs or constants) whose types
/// are static. Lifetimes are [defining node, last reading node] in node order.
/// Needs: nodes in execution order. Guarantees: two values whose lifetimes
/// overlap never overlap in memory; offsets are 64-byte aligned.
MemoryPlan plan_memory(const Graph& graph);
/// Same, planning only values with `in_host_memory[id]` set (values that live
/// only in a device space, or only inside a fused composite, get no offset),
/// and measuring lifetimes in `node_step[k]` for node k (nodes that run as one
/// composite share a step, so its inputs and outputs never share memory).
/// `live_until` (per ValueId, or empty) extends a value's lifetime to at least
/// that step (-1: not extended): the inputs of a region that may be run again.
MemoryPlan plan_memory(const Graph& graph, const std::vector<char>& in_host_memory, const std::vector<int64_t>& node_step,
                       const std::vector<int64_t>& live_until = {});

}  // namespace tessera
