// The workspace of a oneDNN region (contract in dnnl_internal.h, plan_workspace).
//
// Intermediates get ranges of one buffer by liveness (step indices): the
// largest first, each at the lowest offset free over its live steps. Two kinds
// of slot share a range with another instead of a range of their own:
//
// - A sum post-op's operand in place: when its operand has the output's
//   layout, is an intermediate this step reads for the last time and none of
//   the step's sources, the step writes its output over the operand (oneDNN
//   adds into dst) instead of copying it first. Copying took a single thread
//   and most of ResNet-50's residual convolutions' second-thread gain (layer1:
//   0.60 ms at 1 thread, 0.66-0.95 at 2).
// - Concatenation in place: a Concat of one run per input (outer == 1: the dims
//   before the axis are all 1, as for a batch-1 channel concat) whose input is
//   an intermediate written once, read as the slot's own layout, is given the
//   bytes of the output where its run goes, so its producer writes it there and
//   the concat copies nothing for it. Concats are taken last to first: where a
//   concat's inputs all lie already, in order and back to back, inside a later
//   concat's output (DenseNet: layer k concatenates the block's input and the
//   features of layers 1..k-1, layer k+1 the same and one more), its output is
//   that range: the whole dense block lives in one buffer that every layer
//   appends to, and its concats copy nothing (DenseNet-121: 62 concats, 2.3 ms
//   of 31 at one thread on Zen 5).
//
// - Views: a reshape (Reshape, Flatten, Squeeze, Unsqueeze) of a plain layout
//   is its input's bytes, and so is a slice that is one contiguous part of a
//   plain layout (a channel split at batch 1): the step copies nothing. They
//   are planned first; ShuffleNetV2's channel shuffles and splits were seven
//   copies of each tensor, four of them such views.
//
// A slot that shares a range is live, for placement, as long as every slot of
// that range is. A slot already in a shared range (either way) is not shared
// again, and no concat input goes into a range an in-place sum writes over, so
// no slot's bytes change after its one write while it is live.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

constexpr int64_t kAlignment = 64;
int64_t align_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

WorkspacePlan plan_workspace(const Program& program, const std::vector<memory::desc>& descs,
                             const std::vector<StepMemoryFacts>& facts) {
  const size_t num_slots = program.slots.size();
  const size_t num_steps = program.steps.size();
  WorkspacePlan plan;
  plan.sum_in_place.assign(num_steps, 0);
  plan.view.assign(num_steps, 0);
  plan.concat_in_place.resize(num_steps);

  std::vector<int64_t> first(num_slots, -1), last(num_slots, -1);
  std::vector<int32_t> writes(num_slots, 0);
  for (size_t k = 0; k < num_steps; ++k) {
    const Step& step = program.steps[k];
    auto read = [&](int32_t slot) { last[static_cast<size_t>(slot)] = static_cast<int64_t>(k); };
    for (int32_t slot : step.inputs) read(slot);
    for (const PostOp& p : step.post_ops) {
      if (p.kind != PostOpKind::kEltwise) read(p.slot);
    }
    const size_t out = static_cast<size_t>(step.output);
    if (first[out] < 0) first[out] = static_cast<int64_t>(k);
    last[out] = std::max(last[out], static_cast<int64_t>(k));
    ++writes[out];
  }
  auto intermediate = [&](size_t slot) { return program.slots[slot].kind == Slot::Kind::kIntermediate; };

  // `parent[s]`: the slot whose range s lies in, `at[s]` bytes into it; `shared[s]`: some slot lies in s's.
  std::vector<int32_t> parent(num_slots, -1);
  std::vector<int64_t> at(num_slots, 0);
  std::vector<char> shared(num_slots, 0);
  std::vector<char> overwritten(num_slots, 0);  // a range an in-place sum writes over
  auto root_of = [&](size_t slot, int64_t* offset) {
    int64_t bytes = 0;
    while (parent[slot] >= 0) {
      bytes += at[slot];
      slot = static_cast<size_t>(parent[slot]);
    }
    if (offset) *offset = bytes;
    return slot;
  };
  auto share = [&](size_t slot, size_t into, int64_t offset) {
    parent[slot] = static_cast<int32_t>(into);
    at[slot] = offset;
    shared[into] = 1;
  };

  // TESSERA_DNNL_IN_PLACE=0 copies every view and concat input (for A/B runs).
  const char* in_place_setting = std::getenv("TESSERA_DNNL_IN_PLACE");
  const bool share_views_and_concats = !in_place_setting || std::strcmp(in_place_setting, "0") != 0;

  // Views: a reshape of a plain layout, or a slice of one that is a contiguous part of it, is its
  // input's bytes.
  for (size_t k = 0; k < num_steps && share_views_and_concats; ++k) {
    const Step& step = program.steps[k];
    if (facts[k].view_offset < 0 || step.inputs.size() != 1 || facts[k].view_offset % kAlignment != 0) continue;
    const size_t in = static_cast<size_t>(step.inputs[0]);
    const size_t out = static_cast<size_t>(step.output);
    if (in == out || !intermediate(in) || !intermediate(out) || writes[in] != 1 || writes[out] != 1 || parent[out] >= 0 ||
        shared[out]) {
      continue;
    }
    share(out, in, facts[k].view_offset);
    plan.view[k] = 1;
  }
  // The last step reading any slot of a range (views share one with their inputs).
  auto last_in_range = [&](size_t root) {
    int64_t latest = last[root];
    for (size_t s = 0; s < num_slots; ++s) {
      if (parent[s] >= 0 && root_of(s, nullptr) == root) latest = std::max(latest, last[s]);
    }
    return latest;
  };

  for (size_t k = 0; k < num_steps; ++k) {
    const Step& step = program.steps[k];
    if (facts[k].sum_slot < 0) continue;
    const size_t operand = static_cast<size_t>(facts[k].sum_slot);
    const size_t out = static_cast<size_t>(step.output);
    if (!intermediate(operand) || !intermediate(out) || last[operand] != static_cast<int64_t>(k) || parent[out] >= 0 ||
        shared[out] || writes[out] != 1) {
      continue;
    }
    int64_t operand_offset = 0;
    const size_t operand_root = root_of(operand, &operand_offset);
    if (last_in_range(operand_root) != static_cast<int64_t>(k)) continue;  // a view of it is read later
    bool read_otherwise = false;
    for (int32_t slot : step.inputs) read_otherwise |= static_cast<size_t>(slot) == operand;
    for (const PostOp& p : step.post_ops) read_otherwise |= p.kind == PostOpKind::kBinary && static_cast<size_t>(p.slot) == operand;
    if (read_otherwise) continue;
    // No cycle, even for a payload that writes a slot twice: a slot written after step k is used
    // after k, so it is never the operand last read at k.
    share(out, operand_root, operand_offset);
    overwritten[operand_root] = 1;
    plan.sum_in_place[k] = 1;
  }

  for (size_t k = share_views_and_concats ? num_steps : 0; k-- > 0;) {
    const Step& step = program.steps[k];
    const ConcatCopyPlan* concat = facts[k].concat;
    if (!concat || concat->outer != 1 || concat->run_bytes.size() != step.inputs.size()) continue;
    const size_t out = static_cast<size_t>(step.output);
    if (!intermediate(out) || writes[out] != 1 || overwritten[root_of(out, nullptr)]) continue;
    std::vector<char>& in_place = plan.concat_in_place[k];
    in_place.assign(step.inputs.size(), 0);
    // Its inputs back to back, in order, inside one range already: the output is that range.
    if (parent[out] < 0 && !shared[out]) {
      size_t root = 0;
      int64_t begin = 0, next = 0;
      bool view = true;
      for (size_t i = 0; i < step.inputs.size() && view; ++i) {
        const size_t slot = static_cast<size_t>(step.inputs[i]);
        int64_t offset = 0;
        const size_t r = parent[slot] >= 0 ? root_of(slot, &offset) : slot;
        if (parent[slot] < 0 || (i > 0 && (r != root || offset != next))) view = false;
        if (i == 0) root = r, begin = offset;
        next = offset + static_cast<int64_t>(concat->run_bytes[i]);
      }
      if (view && begin % kAlignment == 0) {
        share(out, root, begin);
        std::fill(in_place.begin(), in_place.end(), 1);
        continue;
      }
    }
    int64_t offset = 0;
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const size_t slot = static_cast<size_t>(step.inputs[i]);
      // (concat(x, x): the second x is copied, the first having a parent by then.)
      if (slot != out && intermediate(slot) && writes[slot] == 1 && first[slot] < static_cast<int64_t>(k) &&
          parent[slot] < 0 && !shared[slot] && facts[k].input_is_slot[i] && offset % kAlignment == 0 &&
          static_cast<int64_t>(descs[slot].get_size()) == static_cast<int64_t>(concat->run_bytes[i])) {
        share(slot, out, offset);
        in_place[i] = 1;
      }
      offset += static_cast<int64_t>(concat->run_bytes[i]);
    }
  }

  // A range is live while any slot in it is.
  for (size_t s = 0; s < num_slots; ++s) {
    if (parent[s] < 0 || first[s] < 0) continue;
    const size_t root = root_of(s, nullptr);
    first[root] = first[root] < 0 ? first[s] : std::min(first[root], first[s]);
    last[root] = std::max(last[root], last[s]);
  }
  plan.offsets.assign(num_slots, -1);
  struct Placed {
    int64_t offset, size, first, last;
  };
  std::vector<size_t> order;
  for (size_t s = 0; s < num_slots; ++s) {
    if (intermediate(s) && first[s] >= 0 && parent[s] < 0) order.push_back(s);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return descs[a].get_size() > descs[b].get_size(); });
  std::vector<Placed> placed;
  for (size_t s : order) {
    const int64_t size = align_up(std::max<int64_t>(1, static_cast<int64_t>(descs[s].get_size())));
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed) {
      if (p.first <= last[s] && first[s] <= p.last) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    placed.push_back({offset, size, first[s], last[s]});
    plan.offsets[s] = offset;
    plan.bytes = std::max(plan.bytes, offset + size);
  }
  for (size_t s = 0; s < num_slots; ++s) {
    if (parent[s] < 0) continue;
    int64_t offset = 0;
    const size_t root = root_of(s, &offset);
    plan.offsets[s] = plan.offsets[root] + offset;
  }
  return plan;
}

}  // namespace tessera::dnnl_backend
