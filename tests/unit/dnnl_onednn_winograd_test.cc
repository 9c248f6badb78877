// oneDNN's own Winograd convolutions (AVX-512 only) run on one thread only:
// 3x3 convolutions of GoogLeNet's small feature maps, each alone and two
// concatenated, compiled at 1 and 2 threads with oneDNN's Winograd taken
// wherever it may be (TESSERA_DNNL_TUNE=onednn-winograd), match a direct
// convolution in double computed here; on one thread oneDNN's Winograd runs
// them where this CPU has it (AVX-512, read from /proc/cpuinfo and the
// ONEDNN_MAX_CPU_ISA cap), on two threads never: oneDNN 2.6 gave GoogLeNet
// wrong outputs and corrupted memory there (make_primitive_desc;
// models_googlenet checks the whole model at 2 threads); a plan compiled on
// one thread with it loads on two as a direct convolution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu_isa.h"
#include "graph_builder.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

struct TuneEnv {
  TuneEnv() { setenv("TESSERA_DNNL_TUNE", "onednn-winograd", 1); }
  ~TuneEnv() { unsetenv("TESSERA_DNNL_TUNE"); }
};

struct Shape3x3 {
  int64_t in, out, hw;
};

/// Relu(Conv3x3(x, w) + b) for each shape, on one input of `shapes[0].in` channels; with two
/// shapes the results are concatenated on channels.
struct Branches {
  GraphBuilder b;
  Tensor input;
  std::vector<Tensor> weights, biases;
  std::vector<double> expected;
  int64_t channels = 0, hw = 0;

  explicit Branches(const std::vector<Shape3x3>& shapes) {
    hw = shapes[0].hw;
    const int64_t in = shapes[0].in;
    input = random_uniform({1, in, hw, hw}, 31, -1, 1);
    const ValueId x = b.input({1, in, hw, hw});
    const AttributeMap pads = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
    std::vector<ValueId> outs;
    const std::vector<double> x_values(input.as<float>(), input.as<float>() + input.numel());
    uint32_t seed = 40;
    for (const Shape3x3& s : shapes) {
      weights.push_back(random_uniform({s.out, in, 3, 3}, seed++, -0.1f, 0.1f));
      biases.push_back(random_uniform({s.out}, seed++, -0.5f, 0.5f));
      const ValueId conv = b.node("Conv", {x, b.constant(weights.back()), b.constant(biases.back())}, pads);
      b.graph.value(conv).type = TensorType::make(DType::kFloat32, {1, s.out, hw, hw});
      const ValueId relu = b.node("Relu", {conv});
      b.graph.value(relu).type = TensorType::make(DType::kFloat32, {1, s.out, hw, hw});
      outs.push_back(relu);
      std::vector<double> y = reference_conv3x3_same(x_values, in, weights.back(), s.out, hw, hw);
      for (size_t i = 0; i < y.size(); ++i) {
        y[i] = std::max(y[i] + biases.back().as<float>()[i / static_cast<size_t>(hw * hw)], 0.0);
      }
      expected.insert(expected.end(), y.begin(), y.end());
      channels += s.out;
    }
    if (outs.size() == 1) {
      b.output(outs[0]);
    } else {
      const ValueId cat = b.node("Concat", outs, attributes({{"axis", Attribute::of_int(1)}}));
      b.graph.value(cat).type = TensorType::make(DType::kFloat32, {1, channels, hw, hw});
      b.output(cat);
    }
  }

  /// Compiles at `threads`, checks three runs against the reference, and returns how many
  /// convolutions the placement report says oneDNN's Winograd runs.
  int expect_right(int threads) const {
    CompileOptions options;
    options.backends = {"dnnl", "native"};
    options.num_threads = threads;
    return expect_right(*CompiledModel::compile(b.graph, options), threads);
  }

  int expect_right(const CompiledModel& compiled, int threads) const {
    const CompiledModel* model = &compiled;
    int onednn_winograd = 0;
    for (const NodePlacement& p : model->placement()) {
      // A loaded plan keeps its compile-time note; the region then says it runs direct.
      onednn_winograd += p.note.find("Winograd, oneDNN's") != std::string::npos &&
                         p.note.find("direct convolution: its plan names oneDNN's Winograd") == std::string::npos;
    }
    for (int run = 0; run < 3; ++run) {
      const std::vector<Tensor> outputs = model->run({input.view()});
      EXPECT_EQ(outputs.size(), 1u);
      if (outputs.size() != 1 || outputs[0].numel() != static_cast<int64_t>(expected.size())) {
        ADD_FAILURE() << "outputs of the wrong count or size";
        break;
      }
      int failures = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        const double actual = outputs[0].as<float>()[i];
        // NaN-propagating; the tolerance covers Winograd's rounding (transforms of terms up to 8x larger).
        if (!(std::fabs(actual - expected[i]) <= 2e-4 + 2e-4 * std::fabs(expected[i])) && failures++ < 5) {
          ADD_FAILURE() << threads << " threads, run " << run << ", output " << i << " of " << expected.size() << ": "
                        << actual << ", expected " << expected[i];
        }
      }
      if (failures) break;
    }
    return onednn_winograd;
  }
};

const std::vector<Shape3x3> kShapes = {{24, 64, 14}, {96, 208, 14}, {112, 224, 14}, {16, 48, 14},
                                       {128, 192, 28}, {160, 320, 7}, {48, 128, 7}};

TEST(DnnlOneDnnWinograd, OnOneThreadOnlyAndRightOnBoth) {
  TuneEnv env;
  int on_one = 0;
  for (const Shape3x3& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.in) + " -> " + std::to_string(s.out) + " channels, " + std::to_string(s.hw) + "x" +
                 std::to_string(s.hw));
    const Branches one({s});
    on_one += one.expect_right(1);
    EXPECT_EQ(one.expect_right(2), 0);
  }
  // oneDNN 2.6 has Winograd kernels for AVX-512 only; with them it takes every one of these shapes.
  if (cpu_isa::dnnl_avx512()) {
    EXPECT_EQ(on_one, static_cast<int>(kShapes.size()));
  } else {
    EXPECT_EQ(on_one, 0);
  }
}

TEST(DnnlOneDnnWinograd, PlanMadeOnOneThreadLoadsOnTwoAsDirect) {
  TuneEnv env;
  const Branches branch({{160, 320, 7}});
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  const std::unique_ptr<CompiledModel> compiled = CompiledModel::compile(branch.b.graph, options);
  EXPECT_EQ(branch.expect_right(*compiled, 1), cpu_isa::dnnl_avx512() ? 1 : 0);
  const std::string path = ::testing::TempDir() + "onednn_winograd_plan.tsr";
  compiled->save(path);
  for (int threads : {2, 1}) {
    CompileOptions load_options;  // only the thread count applies to an artifact
    load_options.num_threads = threads;
    const std::unique_ptr<CompiledModel> loaded = CompiledModel::load(path, load_options);
    EXPECT_EQ(branch.expect_right(*loaded, threads), threads == 1 && cpu_isa::dnnl_avx512() ? 1 : 0) << threads;
  }
  std::remove(path.c_str());
}

TEST(DnnlOneDnnWinograd, ConcatenatedBranchesMatchReferenceOnTwoThreads) {
  TuneEnv env;
  const Branches branches({{96, 208, 14}, {96, 48, 14}});
  EXPECT_EQ(branches.expect_right(2), 0);
}

}  // namespace
}  // namespace tessera::testing
