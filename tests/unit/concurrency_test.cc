// One compiled model run from several threads at once gives the same results
// as runs one at a time (the bundled CNN: Conv with packed weights, pooling,
// Gemm, Softmax), with a multi-threaded intra-op pool as well.
#include <gtest/gtest.h>

#include <thread>

#include "frontend/onnx/onnx_importer.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

TEST(Concurrency, BundledModelFromFourThreads) {
  for (int intra_op_threads : {1, 2}) {
    CompileOptions options;
    options.num_threads = intra_op_threads;
    auto model = CompiledModel::compile(onnx_frontend::import_onnx_file(TESSERA_SOURCE_DIR "/models/tiny_resnet.onnx"),
                                        options);
    constexpr int kThreads = 4;
    std::vector<Tensor> inputs, expected;
    for (int t = 0; t < kThreads; ++t) {
      inputs.push_back(random_float({1, 3, 64, 64}, static_cast<uint32_t>(t + 7)));
      expected.push_back(model->run({inputs.back().view()})[0]);
    }
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 10; ++rep) {
          Tensor out = model->run({inputs[static_cast<size_t>(t)].view()})[0];
          for (int64_t i = 0; i < out.numel(); ++i) {
            mismatches[static_cast<size_t>(t)] += out.as<float>()[i] != expected[static_cast<size_t>(t)].as<float>()[i];
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << "thread " << t;
    // Different inputs really give different outputs (the check above could fail).
    EXPECT_NE(expected[0].as<float>()[0], expected[1].as<float>()[0]);
  }
}

}  // namespace
}  // namespace tessera::testing
