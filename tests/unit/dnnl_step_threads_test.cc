// Per-step thread counts of oneDNN regions (dnnl_step_threads.cc): a small
// residual block compiled on two threads runs right whatever each step was
// given (every candidate on one thread, TESSERA_DNNL_STEP_THREADS=one; none,
// =team; as measured, the default), against a reference in double computed
// here; the placement report names the steps moved to one thread with the
// times measured, and those times agree with the choice; a small region's
// large steps are candidates too, a large region's are not; one thread moves
// nothing, and a bad value of the variable is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "backends/dnnl/dnnl_region.h"
#include "graph_builder.h"
#include "ir/error.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

struct StepThreadsEnv {
  explicit StepThreadsEnv(const char* value) {
    if (value) setenv("TESSERA_DNNL_STEP_THREADS", value, 1);
  }
  ~StepThreadsEnv() { unsetenv("TESSERA_DNNL_STEP_THREADS"); }
};

constexpr int64_t kC = 16, kH = 20, kW = 20;

/// out = Conv3x3(Relu(Conv3x3(x, w1) + b1) + x, w2): each convolution about 0.9 M multiply-adds and
/// the sum 6,400 elements, all of a size that is measured on one thread too.
struct Block {
  Tensor input, w1, b1, w2;
  GraphBuilder b;
  std::vector<double> expected;

  Block() {
    input = random_uniform({1, kC, kH, kW}, 11, -1, 1);
    w1 = random_uniform({kC, kC, 3, 3}, 12, -0.2f, 0.2f);
    b1 = random_uniform({kC}, 13, -0.5f, 0.5f);
    w2 = random_uniform({kC, kC, 3, 3}, 14, -0.2f, 0.2f);
    const ValueId x = b.input({1, kC, kH, kW});
    const AttributeMap pads = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
    const ValueId relu = b.node("Relu", {b.node("Conv", {x, b.constant(w1), b.constant(b1)}, pads)});
    const ValueId sum = b.node("Add", {relu, x});
    b.output(b.node("Conv", {sum, b.constant(w2)}, pads));
    for (const Node& node : b.graph.nodes) b.graph.value(node.outputs[0]).type = TensorType::make(DType::kFloat32, {1, kC, kH, kW});

    const std::vector<double> x_values(input.as<float>(), input.as<float>() + input.numel());
    std::vector<double> first = reference_conv3x3_same(x_values, kC, w1, kC, kH, kW);
    for (size_t i = 0; i < first.size(); ++i) {
      first[i] = std::max(first[i] + b1.as<float>()[i / static_cast<size_t>(kH * kW)], 0.0) + x_values[i];
    }
    expected = reference_conv3x3_same(first, kC, w2, kC, kH, kW);
  }

  std::unique_ptr<CompiledModel> compile(int threads) const {
    CompileOptions options;
    options.backends = {"dnnl", "native"};
    options.num_threads = threads;
    return CompiledModel::compile(b.graph, options);
  }

  void expect_outputs(const CompiledModel& model) const {
    const std::vector<Tensor> outputs = model.run({input.view()});
    ASSERT_EQ(outputs.size(), 1u);
    ASSERT_EQ(outputs[0].numel(), static_cast<int64_t>(expected.size()));
    int failures = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const double actual = outputs[0].as<float>()[i];
      // NaN-propagating: a NaN output fails the comparison.
      if (!(std::fabs(actual - expected[i]) <= 1e-4 + 1e-4 * std::fabs(expected[i])) && failures++ < 5) {
        ADD_FAILURE() << "output " << i << ": " << actual << ", expected " << expected[i];
      }
    }
  }
};

/// The notes of the placement report that say a step runs on one thread.
std::vector<std::string> one_thread_notes(const CompiledModel& model) {
  std::vector<std::string> notes;
  for (const NodePlacement& p : model.placement()) {
    if (p.note.find("runs on one thread") != std::string::npos) notes.push_back(p.note);
  }
  return notes;
}

TEST(DnnlStepThreads, EveryCandidateOnOneThreadRunsRight) {
  StepThreadsEnv env("one");
  Block block;
  std::unique_ptr<CompiledModel> model = block.compile(2);
  for (const NodePlacement& p : model->placement()) {
    if (p.region >= 0) EXPECT_EQ(p.backend, "dnnl") << p.node_name;
  }
  const std::vector<std::string> notes = one_thread_notes(*model);
  // Both convolutions (the sum and relu fuse into the first as post-ops, or run as steps of their own).
  ASSERT_GE(notes.size(), 2u);
  for (const std::string& note : notes) EXPECT_NE(note.find("(TESSERA_DNNL_STEP_THREADS=one)"), std::string::npos) << note;
  block.expect_outputs(*model);
}

TEST(DnnlStepThreads, TeamKeepsEveryStepOnTheSessionsThreads) {
  StepThreadsEnv env("team");
  Block block;
  std::unique_ptr<CompiledModel> model = block.compile(2);
  EXPECT_TRUE(one_thread_notes(*model).empty());
  block.expect_outputs(*model);
}

TEST(DnnlStepThreads, MeasuredChoiceAgreesWithItsTimes) {
  StepThreadsEnv env(nullptr);
  Block block;
  for (int round = 0; round < 3; ++round) {
    std::unique_ptr<CompiledModel> model = block.compile(2);
    for (const std::string& note : one_thread_notes(*model)) {
      // Either the step's own times or, where the whole region went to one thread, whole runs' times.
      const size_t step_at = note.find("runs on one thread: measured ");
      const size_t whole_at = note.find("runs on one thread, as its whole region does: whole runs measured ");
      ASSERT_TRUE(step_at != std::string::npos || whole_at != std::string::npos) << note;
      double single = 0, team = 0;
      const int parsed =
          step_at != std::string::npos
              ? std::sscanf(note.c_str() + step_at, "runs on one thread: measured %lf \xc2\xb5s against %lf", &single, &team)
              : std::sscanf(note.c_str() + whole_at,
                            "runs on one thread, as its whole region does: whole runs measured %lf \xc2\xb5s against %lf",
                            &single, &team);
      ASSERT_EQ(parsed, 2) << note;
      EXPECT_GT(team, 0) << note;
      EXPECT_LE(single, team) << note;
      EXPECT_NE(note.find("on 2 threads"), std::string::npos) << note;
    }
    block.expect_outputs(*model);
  }
}

/// Relu(Conv3x3(x, w)) of `channels` channels on an `hw` x `hw` image, and its multiply-adds.
struct WideConv {
  GraphBuilder b;
  int64_t channels, hw, macs;
  Tensor input, w;
  WideConv(int64_t channels, int64_t hw) : channels(channels), hw(hw) {
    const ValueId x = b.input({1, channels, hw, hw});
    input = random_uniform({1, channels, hw, hw}, 22, -1, 1);
    w = random_uniform({channels, channels, 3, 3}, 21, -0.1f, 0.1f);
    const AttributeMap pads = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
    b.output(b.node("Relu", {b.node("Conv", {x, b.constant(w)}, pads)}));
    for (const Node& node : b.graph.nodes) {
      b.graph.value(node.outputs[0]).type = TensorType::make(DType::kFloat32, {1, channels, hw, hw});
    }
    macs = channels * channels * 9 * hw * hw;
  }
  std::unique_ptr<CompiledModel> compile() const {
    CompileOptions options;
    options.backends = {"dnnl", "native"};
    options.num_threads = 2;
    return CompiledModel::compile(b.graph, options);
  }
};

TEST(DnnlStepThreads, SmallRegionsMeasureTheirLargeStepsToo) {
  // A convolution past the per-step bound (2^24 multiply-adds) is measured on one thread where its
  // region is small (below 2^30 in all), so that the whole region can run on one thread; in a larger
  // region it keeps the session's threads. Forced onto one thread here to see which steps are candidates.
  StepThreadsEnv env("one");
  setenv("TESSERA_DNNL_TUNE", "0", 1);  // direct convolutions: the layouts one thread keeps
  {
    const WideConv small(64, 48);  // 85 M multiply-adds
    ASSERT_GT(small.macs, int64_t{1} << 24);
    ASSERT_LT(small.macs, int64_t{1} << 30);
    const std::unique_ptr<CompiledModel> model = small.compile();
    EXPECT_EQ(one_thread_notes(*model).size(), 1u);
    // Its one-thread primitive computes the convolution: against a reference in double.
    const std::vector<double> x(small.input.as<float>(), small.input.as<float>() + small.input.numel());
    const std::vector<double> expected = reference_conv3x3_same(x, small.channels, small.w, small.channels, small.hw, small.hw);
    const std::vector<Tensor> outputs = model->run({small.input.view()});
    ASSERT_EQ(outputs.size(), 1u);
    ASSERT_EQ(outputs[0].numel(), static_cast<int64_t>(expected.size()));
    int failures = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const double want = std::max(expected[i], 0.0), actual = outputs[0].as<float>()[i];
      if (!(std::fabs(actual - want) <= 1e-4 + 1e-4 * std::fabs(want)) && failures++ < 5) {
        ADD_FAILURE() << "output " << i << ": " << actual << ", expected " << want;
      }
    }
  }
  {
    const WideConv large(128, 96);  // 1.36 G multiply-adds
    ASSERT_GT(large.macs, int64_t{1} << 30);
    const std::unique_ptr<CompiledModel> model = large.compile();
    EXPECT_TRUE(one_thread_notes(*model).empty());
  }
  unsetenv("TESSERA_DNNL_TUNE");
}

TEST(DnnlStepThreads, OneThreadSessionsMeasureNothing) {
  StepThreadsEnv env("one");  // even forced: a session of one thread has nothing to move
  Block block;
  std::unique_ptr<CompiledModel> model = block.compile(1);
  EXPECT_TRUE(one_thread_notes(*model).empty());
  block.expect_outputs(*model);
}

TEST(DnnlStepThreads, AContenderMustBeatTheTeamByFivePercent) {
  using dnnl_backend::pick_step_threads_config;
  using dnnl_backend::StepThreadsConfig;
  // Nothing else measured: the team.
  EXPECT_EQ(pick_step_threads_config(4.0, std::nullopt, std::nullopt), StepThreadsConfig::kTeam);
  // A mix or one thread about as fast as the team (the encoder that then ran 2x slower): the team.
  EXPECT_EQ(pick_step_threads_config(4.0, 3.9, std::nullopt), StepThreadsConfig::kTeam);
  EXPECT_EQ(pick_step_threads_config(4.0, std::nullopt, 3.85), StepThreadsConfig::kTeam);
  // Clearly faster: kept (ShuffleNetV2's mix read 25% faster on Zen 5).
  EXPECT_EQ(pick_step_threads_config(4.0, 3.0, std::nullopt), StepThreadsConfig::kMixed);
  EXPECT_EQ(pick_step_threads_config(4.0, std::nullopt, 3.7), StepThreadsConfig::kOne);
  // Both clearly faster: the faster of the two; one thread must also beat a kept mix.
  EXPECT_EQ(pick_step_threads_config(4.0, 3.0, 2.5), StepThreadsConfig::kOne);
  EXPECT_EQ(pick_step_threads_config(4.0, 3.0, 3.2), StepThreadsConfig::kMixed);
  // One thread clearly faster than the team while the mix is not kept: one thread.
  EXPECT_EQ(pick_step_threads_config(4.0, 3.9, 3.7), StepThreadsConfig::kOne);
  // NaN (a failed timing) never wins.
  EXPECT_EQ(pick_step_threads_config(4.0, std::nan(""), std::nan("")), StepThreadsConfig::kTeam);
}

TEST(DnnlStepThreads, BadValueIsAClearError) {
  StepThreadsEnv env("sometimes");
  Block block;
  try {
    block.compile(2);
    ADD_FAILURE() << "compiled with TESSERA_DNNL_STEP_THREADS=sometimes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_DNNL_STEP_THREADS is 'sometimes'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::testing
