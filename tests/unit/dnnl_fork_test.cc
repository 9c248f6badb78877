// oneDNN's OpenMP team and fork (dnnl_fork.cc): after a session of two threads
// has run a oneDNN region (so the calling thread leads a team of two), a child
// of fork runs the same model on two threads and gets the double-precision
// reference's answer, and so does the parent after it. Before, libgomp in the
// child waited forever for the parent's team threads; a child that does not
// finish within a minute fails the test (and is killed).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "graph_builder.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

constexpr int64_t kC = 32, kH = 40, kW = 40;

/// Failures of `model`'s output for `input` against `expected` (at most a few are printed by the caller).
int count_mismatches(const CompiledModel& model, const Tensor& input, const std::vector<double>& expected) {
  const std::vector<Tensor> outputs = model.run({input.view()});
  if (outputs.size() != 1 || outputs[0].numel() != static_cast<int64_t>(expected.size())) return -1;
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double actual = outputs[0].as<float>()[i];
    if (!(std::fabs(actual - expected[i]) <= 1e-4 + 1e-4 * std::fabs(expected[i]))) ++failures;  // NaN fails
  }
  return failures;
}

TEST(DnnlFork, ChildOfForkRunsTwoThreadSessionAfterParentRan) {
  // Every step on the team, so that the run surely uses the calling thread's OpenMP team of two.
  setenv("TESSERA_DNNL_STEP_THREADS", "team", 1);
  const Tensor input = random_uniform({1, kC, kH, kW}, 21, -1, 1);
  const Tensor weights = random_uniform({kC, kC, 3, 3}, 22, -0.2f, 0.2f);
  GraphBuilder b;
  const ValueId x = b.input({1, kC, kH, kW});
  const AttributeMap pads = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  b.output(b.node("Relu", {b.node("Conv", {x, b.constant(weights)}, pads)}));
  for (const Node& node : b.graph.nodes) b.graph.value(node.outputs[0]).type = TensorType::make(DType::kFloat32, {1, kC, kH, kW});
  std::vector<double> expected =
      reference_conv3x3_same(std::vector<double>(input.as<float>(), input.as<float>() + input.numel()), kC, weights, kC, kH, kW);
  for (double& v : expected) v = std::max(v, 0.0);

  CompileOptions options;
  options.backends = {"dnnl"};
  options.num_threads = 2;
  const std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  unsetenv("TESSERA_DNNL_STEP_THREADS");
  ASSERT_EQ(count_mismatches(*model, input, expected), 0);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    try {
      const int first = count_mismatches(*model, input, expected);
      const int second = count_mismatches(*model, input, expected);
      code = first == 0 && second == 0 ? 0 : 2;
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  int status = 0;
  pid_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child of fork did not finish its two-thread runs within 60 s (hung in its OpenMP team)";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: wrong output, 3/4: the run threw, -1 shape";
  EXPECT_EQ(count_mismatches(*model, input, expected), 0) << "the parent after the fork";
}

}  // namespace
}  // namespace tessera::testing
