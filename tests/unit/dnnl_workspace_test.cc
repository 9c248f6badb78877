// The oneDNN region's workspace plan (dnnl_workspace.cc): in-place sums and
// concatenations share ranges, and no slot's bytes may change while it is
// live. Checked by running each plan on a model of memory: every step writes
// values of its own into its output's range, a concat copies only the inputs
// the plan did not place in its output, and every read must find what the
// program's semantics say the slot holds (a value-level reference that knows
// nothing of offsets).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"
#include "cpu_isa.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

using dnnl::memory;
using dnnl_backend::ConcatCopyPlan;
using dnnl_backend::PostOp;
using dnnl_backend::PostOpKind;
using dnnl_backend::Program;
using dnnl_backend::Slot;
using dnnl_backend::Step;
using dnnl_backend::StepKind;
using dnnl_backend::StepMemoryFacts;
using dnnl_backend::WorkspacePlan;

constexpr int64_t kPixels = 4 * 4;

/// A program under construction: slots of [1, C, 4, 4] floats in nChw16c, steps that make them.
struct ProgramBuilder {
  Program program;
  std::vector<memory::desc> descs;

  int32_t slot(int64_t channels, Slot::Kind kind = Slot::Kind::kIntermediate) {
    Slot s;
    s.kind = kind;
    s.dims = {1, channels, 4, 4};
    program.slots.push_back(s);
    descs.emplace_back(memory::dims{1, channels, 4, 4}, memory::data_type::f32, memory::format_tag::nChw16c);
    return static_cast<int32_t>(program.slots.size() - 1);
  }
  int32_t channels(int32_t slot) const { return static_cast<int32_t>(program.slots[static_cast<size_t>(slot)].dims[1]); }
  /// A step computing a new value from `inputs` (optionally adding `sum` into it).
  int32_t compute(std::vector<int32_t> inputs, int64_t channels, int32_t sum = -1,
                  Slot::Kind kind = Slot::Kind::kIntermediate) {
    Step step;
    step.kind = StepKind::kReorder;
    step.inputs = std::move(inputs);
    step.output = slot(channels, kind);
    if (sum >= 0) {
      PostOp p;
      p.kind = PostOpKind::kSum;
      p.alpha = 1.0f;
      p.slot = sum;
      step.post_ops.push_back(p);
    }
    program.steps.push_back(step);
    return step.output;
  }
  /// A view (a reshape, or a slice of whole channels at batch 1): `channels` of `in` from `first` on.
  int32_t view(int32_t in, int64_t first, int64_t channels, Slot::Kind kind = Slot::Kind::kIntermediate) {
    Step step;
    step.kind = StepKind::kReorder;
    step.ints = {3};
    step.inputs = {in};
    step.output = slot(channels, kind);
    view_offsets.push_back({program.steps.size(), first * kPixels * 4});
    program.steps.push_back(step);
    return step.output;
  }
  std::vector<std::pair<size_t, int64_t>> view_offsets;  // per view step: its bytes' offset in its input
  int32_t concat(std::vector<int32_t> inputs, Slot::Kind kind = Slot::Kind::kIntermediate) {
    int64_t total = 0;
    for (int32_t s : inputs) total += channels(s);
    Step step;
    step.kind = StepKind::kConcat;
    step.ints = {1};
    step.inputs = std::move(inputs);
    step.output = slot(total, kind);
    program.steps.push_back(step);
    return step.output;
  }
};

struct Planned {
  std::vector<ConcatCopyPlan> concats;  // storage the facts point into
  std::vector<StepMemoryFacts> facts;
  WorkspacePlan plan;
};

Planned plan_of(const ProgramBuilder& b) {
  Planned p;
  p.concats.reserve(b.program.steps.size());
  p.facts.resize(b.program.steps.size());
  for (size_t k = 0; k < b.program.steps.size(); ++k) {
    const Step& step = b.program.steps[k];
    p.facts[k].input_is_slot.assign(step.inputs.size(), 1);
    for (const PostOp& op : step.post_ops) {
      if (op.kind == PostOpKind::kSum) p.facts[k].sum_slot = op.slot;
    }
    for (const auto& [view_step, offset] : b.view_offsets) {
      if (view_step == k) p.facts[k].view_offset = offset;
    }
    if (step.kind == StepKind::kConcat) {
      std::vector<memory::desc> roles;
      for (int32_t s : step.inputs) roles.push_back(b.descs[static_cast<size_t>(s)]);
      roles.push_back(b.descs[static_cast<size_t>(step.output)]);
      std::optional<ConcatCopyPlan> copy = dnnl_backend::concat_copy_plan(roles, 1);
      EXPECT_TRUE(copy.has_value());
      p.concats.push_back(*copy);
      p.facts[k].concat = &p.concats.back();
    }
  }
  p.plan = dnnl_backend::plan_workspace(b.program, b.descs, p.facts);
  return p;
}

/// Runs the plan on a model of memory (one int32 per float) and returns the first disagreement with
/// the program's value semantics, or "".
std::string simulate(const ProgramBuilder& b, const Planned& p) {
  const Program& program = b.program;
  const size_t num_slots = program.slots.size();
  std::vector<int32_t> workspace(static_cast<size_t>(p.plan.bytes / 4), -1);
  std::vector<std::vector<int32_t>> own(num_slots);  // inputs and outputs live outside the workspace
  std::vector<std::vector<int32_t>> expected(num_slots);
  auto words = [&](size_t s) { return static_cast<size_t>(b.channels(static_cast<int32_t>(s)) * kPixels); };
  auto at = [&](size_t s) -> int32_t* {
    if (program.slots[s].kind != Slot::Kind::kIntermediate) {
      own[s].resize(words(s), -1);
      return own[s].data();
    }
    return workspace.data() + p.plan.offsets[s] / 4;
  };
  for (size_t s = 0; s < num_slots; ++s) {
    if (program.slots[s].kind == Slot::Kind::kIntermediate) {
      if (p.plan.offsets[s] < 0 || p.plan.offsets[s] % 64 != 0 ||
          p.plan.offsets[s] + static_cast<int64_t>(words(s) * 4) > p.plan.bytes) {
        return "slot " + std::to_string(s) + " has offset " + std::to_string(p.plan.offsets[s]);
      }
    }
    if (program.slots[s].kind == Slot::Kind::kInput) {
      expected[s].resize(words(s));
      for (size_t i = 0; i < words(s); ++i) expected[s][i] = static_cast<int32_t>(s * 100000 + i);
      std::copy(expected[s].begin(), expected[s].end(), at(s));
    }
  }
  auto holds = [&](size_t s) {
    const int32_t* data = at(s);
    return std::equal(expected[s].begin(), expected[s].end(), data);
  };
  for (size_t k = 0; k < program.steps.size(); ++k) {
    const Step& step = program.steps[k];
    for (int32_t s : step.inputs) {
      if (!holds(static_cast<size_t>(s))) return "step " + std::to_string(k) + " reads slot " + std::to_string(s) + " overwritten";
    }
    for (const PostOp& op : step.post_ops) {
      if (op.kind == PostOpKind::kSum && !holds(static_cast<size_t>(op.slot))) {
        return "step " + std::to_string(k) + " adds slot " + std::to_string(op.slot) + " overwritten";
      }
    }
    const size_t out = static_cast<size_t>(step.output);
    int32_t* dst = at(out);
    if (step.kind == StepKind::kConcat) {
      expected[out].clear();
      size_t offset = 0;
      const std::vector<char>& in_place = p.plan.concat_in_place[k];
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        const size_t s = static_cast<size_t>(step.inputs[i]);
        expected[out].insert(expected[out].end(), expected[s].begin(), expected[s].end());
        if (in_place.empty() || !in_place[i]) std::copy(expected[s].begin(), expected[s].end(), dst + offset);
        offset += words(s);
      }
      if (!holds(out)) return "concat step " + std::to_string(k) + " does not hold its inputs";
    } else if (p.facts[k].view_offset >= 0) {
      const size_t in = static_cast<size_t>(step.inputs[0]);
      const size_t first = static_cast<size_t>(p.facts[k].view_offset / 4);
      expected[out].assign(expected[in].begin() + static_cast<std::ptrdiff_t>(first),
                           expected[in].begin() + static_cast<std::ptrdiff_t>(first + words(out)));
      if (!p.plan.view[k]) std::copy(expected[out].begin(), expected[out].end(), dst);
      if (!holds(out)) return "view step " + std::to_string(k) + " does not hold its input's part";
    } else {
      // In place, the step adds into its output's bytes: they must hold the operand already.
      if (p.plan.sum_in_place[k]) {
        for (const PostOp& op : step.post_ops) {
          const size_t operand = static_cast<size_t>(op.slot);
          if (op.kind == PostOpKind::kSum && !std::equal(expected[operand].begin(), expected[operand].end(), dst)) {
            return "step " + std::to_string(k) + " adds in place but its output's bytes do not hold slot " +
                   std::to_string(operand);
          }
        }
      }
      expected[out].resize(words(out));
      for (size_t i = 0; i < words(out); ++i) expected[out][i] = static_cast<int32_t>((k + 1) * 1000000 + i);
      std::copy(expected[out].begin(), expected[out].end(), dst);
    }
  }
  for (size_t s = 0; s < num_slots; ++s) {
    if (program.slots[s].kind == Slot::Kind::kOutput && !holds(s)) return "output slot " + std::to_string(s) + " wrong";
  }
  return "";
}

int count_in_place(const Planned& p, size_t step) {
  int n = 0;
  for (char c : p.plan.concat_in_place[step]) n += c != 0;
  return n;
}

TEST(DnnlWorkspace, DenseBlockConcatsShareOneBuffer) {
  // DenseNet's shape: each layer concatenates the block's input and every feature made so far.
  ProgramBuilder b;
  const int32_t input = b.slot(32, Slot::Kind::kInput);
  const int32_t x0 = b.compute({input}, 32);                     // step 0
  const int32_t f1 = b.compute({x0}, 16);                        // step 1
  const int32_t c1 = b.concat({x0, f1});                         // step 2
  const int32_t f2 = b.compute({c1}, 16);                        // step 3
  const int32_t c2 = b.concat({x0, f1, f2});                     // step 4
  const int32_t f3 = b.compute({c2}, 16);                        // step 5
  const int32_t c3 = b.concat({x0, f1, f2, f3});                 // step 6
  b.compute({c3}, 16, -1, Slot::Kind::kOutput);                  // step 7
  const Planned p = plan_of(b);
  EXPECT_EQ(simulate(b, p), "");
  // Every concat copies nothing: the features sit back to back in the last concat's range, and the
  // earlier concats are its prefixes.
  EXPECT_EQ(count_in_place(p, 2), 2);
  EXPECT_EQ(count_in_place(p, 4), 3);
  EXPECT_EQ(count_in_place(p, 6), 4);
  const int64_t base = p.plan.offsets[static_cast<size_t>(c3)];
  const int64_t bytes_per_channel = kPixels * 4;
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(x0)], base);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(f1)], base + 32 * bytes_per_channel);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(f2)], base + 48 * bytes_per_channel);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(f3)], base + 64 * bytes_per_channel);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(c1)], base);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(c2)], base);
  // The block needs one range of the last concat's size, not one per concat.
  EXPECT_EQ(p.plan.bytes, 80 * bytes_per_channel);
}

TEST(DnnlWorkspace, WhatCannotShareIsCopied) {
  ProgramBuilder b;
  const int32_t input = b.slot(16, Slot::Kind::kInput);
  const int32_t a = b.compute({input}, 16);                       // step 0
  const int32_t c = b.concat({a, a, input});                      // step 1: a twice, and a region input
  const int32_t d = b.compute({c}, 16, a);                        // step 2: adds a (its last read) in place
  const int32_t e = b.compute({input}, 16);                       // step 3
  const int32_t g = b.concat({d, e}, Slot::Kind::kOutput);        // step 4: a region output
  const int32_t h = b.compute({e}, 16);                           // step 5
  const int32_t q = b.concat({h, e});                             // step 6
  b.compute({q, g}, 16, q, Slot::Kind::kOutput);                  // step 7: adds q in place over its range
  const Planned p = plan_of(b);
  EXPECT_EQ(simulate(b, p), "");
  // a is added in place later, so it does not go into c; nor does the region input.
  EXPECT_EQ(count_in_place(p, 1), 0);
  EXPECT_TRUE(p.plan.sum_in_place[2]);
  // The region output is not in the workspace: its inputs are copied.
  EXPECT_EQ(count_in_place(p, 4), 0);
  (void)d;
}

TEST(DnnlWorkspace, ViewsAreTheirInputsBytes) {
  // ShuffleNetV2's unit: a channel split into two views, one half through a convolution, the halves
  // concatenated again; and a sum in place over a slot whose view is read later must not happen.
  ProgramBuilder b;
  const int32_t input = b.slot(64, Slot::Kind::kInput);
  const int32_t x = b.compute({input}, 64);          // step 0
  const int32_t left = b.view(x, 0, 32);             // step 1
  const int32_t right = b.view(x, 32, 32);           // step 2
  const int32_t branch = b.compute({right}, 32);     // step 3
  const int32_t cat = b.concat({left, branch});      // step 4
  const int32_t y = b.compute({cat}, 64);            // step 5
  const int32_t flat = b.view(y, 0, 64);             // step 6: a view of y, read at step 9
  const int32_t w = b.compute({cat}, 64);            // step 7
  const int32_t z = b.compute({w}, 64, y);           // step 8: adds y (its last direct read): not in place
  const int32_t u = b.compute({z, flat}, 64);        // step 9
  // A sum in place over the second half of u: it must write at that half's bytes.
  const int32_t u_left = b.view(u, 0, 32);           // step 10
  const int32_t u_right = b.view(u, 32, 32);         // step 11
  const int32_t v = b.compute({u_left}, 32);         // step 12: u_left's last read
  const int32_t s = b.compute({v}, 32, u_right);     // step 13: adds u_right in place
  b.compute({s}, 32, -1, Slot::Kind::kOutput);       // step 14
  const Planned p = plan_of(b);
  EXPECT_EQ(simulate(b, p), "");
  EXPECT_TRUE(p.plan.view[1] && p.plan.view[2] && p.plan.view[6]);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(left)], p.plan.offsets[static_cast<size_t>(x)]);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(right)], p.plan.offsets[static_cast<size_t>(x)] + 32 * kPixels * 4);
  EXPECT_FALSE(p.plan.sum_in_place[8]);
  EXPECT_TRUE(p.plan.sum_in_place[13]);
  EXPECT_EQ(p.plan.offsets[static_cast<size_t>(s)], p.plan.offsets[static_cast<size_t>(u_right)]);
  (void)cat;
}

TEST(DnnlWorkspace, RandomProgramsKeepEveryValueIntact) {
  std::mt19937 random(20261205);
  for (int trial = 0; trial < 1000; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    ProgramBuilder b;
    std::vector<int32_t> values = {b.slot(16 * static_cast<int64_t>(1 + random() % 3), Slot::Kind::kInput)};
    const int steps = 3 + static_cast<int>(random() % 14);
    for (int k = 0; k < steps; ++k) {
      const bool last = k == steps - 1;
      const Slot::Kind kind = last || random() % 8 == 0 ? Slot::Kind::kOutput : Slot::Kind::kIntermediate;
      auto pick = [&] { return values[random() % values.size()]; };
      const uint32_t what = random() % 12;
      if (what >= 10) {
        const int32_t x = pick();
        const int64_t blocks = b.channels(x) / 16;
        const int64_t first = static_cast<int64_t>(random() % static_cast<uint32_t>(blocks));
        const int64_t count = 1 + static_cast<int64_t>(random() % static_cast<uint32_t>(blocks - first));
        values.push_back(b.view(x, 16 * first, 16 * count, kind));
      } else if (what < 4) {
        std::vector<int32_t> inputs;
        const int n = 1 + static_cast<int>(random() % 4);
        for (int i = 0; i < n; ++i) inputs.push_back(pick());
        values.push_back(b.concat(inputs, kind));
      } else {
        const int32_t x = pick();
        int32_t sum = -1;
        if (what < 7) {
          const int32_t candidate = pick();
          if (b.channels(candidate) == b.channels(x) && b.program.slots[static_cast<size_t>(candidate)].kind != Slot::Kind::kOutput) {
            sum = candidate;
          }
        }
        values.push_back(b.compute({x}, b.channels(x), sum, kind));
      }
    }
    const Planned p = plan_of(b);
    const std::string wrong = simulate(b, p);
    ASSERT_EQ(wrong, "");
  }
}

TEST(DnnlWorkspace, AValueIsReorderedOncePerLayout) {
  // A convolution's output read by two plain-only steps (and, in DenseNet, a feature read by every later
  // concat): one reorder into each layout it is read in, not one per reader.
  GraphBuilder b;
  const ValueId x = b.input({1, 16, 8, 8});
  const ValueId conv = b.node("Conv", {x, b.constant(random_float({16, 16, 3, 3}, 1205))},
                              attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId scale = b.constant(random_float({8}, 1206));
  const ValueId first = b.node("LayerNormalization", {conv, scale});
  const ValueId second = b.node("LayerNormalization", {conv, scale}, attributes({{"epsilon", Attribute::of_float(1e-3f)}}));
  b.output(first);
  b.output(second);
  for (ValueId v : {conv, first, second}) b.graph.value(v).type = TensorType::make(DType::kFloat32, {1, 16, 8, 8});
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  setenv("TESSERA_DNNL_TUNE", "0", 1);  // the direct convolution: its layout is oneDNN's choice, not a measurement's
  const Program program = dnnl_backend::lower_region(b.graph, engine);
  unsetenv("TESSERA_DNNL_TUNE");
  int32_t conv_slot = -1;
  for (const Step& step : program.steps) {
    if (step.kind == StepKind::kConvolution) conv_slot = step.output;
  }
  ASSERT_GE(conv_slot, 0);
  size_t of_conv = 0;
  for (size_t k = 0; k < program.steps.size(); ++k) {
    const Step& step = program.steps[k];
    if (step.kind != StepKind::kReorder || step.inputs.size() != 1 || (!step.ints.empty() && step.ints[0] != 0)) continue;
    const Slot& out = program.slots[static_cast<size_t>(step.output)];
    if (step.inputs[0] == conv_slot) ++of_conv;
    for (size_t j = 0; j < k; ++j) {
      const Step& other = program.steps[j];
      if (other.kind != StepKind::kReorder || other.inputs != step.inputs || (!other.ints.empty() && other.ints[0] != 0)) continue;
      const Slot& other_out = program.slots[static_cast<size_t>(other.output)];
      EXPECT_FALSE(other_out.format_tag == out.format_tag && other_out.type == out.type && other_out.dims == out.dims)
          << "steps " << j << " and " << k << " reorder slot " << step.inputs[0] << " into the same layout";
    }
  }
  // Where oneDNN has JIT kernels its convolution writes a blocked or channels-last layout: the case under test.
  if (cpu_isa::dnnl_avx2()) EXPECT_EQ(of_conv, 1u);
}

}  // namespace
}  // namespace tessera::testing
