// Per-call cost of the C API on a model of one Add of two float32[2, 3]
// inputs: what a binding (Python, the torch op) adds is measured against this.
//   build/bench/tessera_capi_overhead MODEL.onnx [CALLS]
// Prints JSON: median nanoseconds per call of tsr_model_run (caller-allocated
// outputs) and tsr_model_run_alloc (Tessera-allocated), over 15 batches.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/tessera.h"

namespace {

template <typename Fn>
double median_ns(int calls, Fn&& fn) {
  std::vector<double> batches;
  for (int b = 0; b < 15; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    batches.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [CALLS]\n", argv[0]);
    return 2;
  }
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  tsr_model* model = nullptr;
  if (tsr_status* s = tsr_model_load(argv[1], nullptr, &model)) {
    std::fprintf(stderr, "%s\n", tsr_status_message(s));
    return 1;
  }
  std::vector<float> x(6, 1.0f), y(6, 2.0f), z(6);
  int64_t shape[2] = {2, 3};
  DLTensor inputs[2] = {{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0},
                        {y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0}};
  DLTensor output{z.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  bool failed = false;
  const double run_ns = median_ns(calls, [&] {
    if (tsr_status* s = tsr_model_run(model, inputs, 2, &output, 1)) failed = true, tsr_status_free(s);
  });
  const double alloc_ns = median_ns(calls, [&] {
    DLManagedTensor* out = nullptr;
    if (tsr_status* s = tsr_model_run_alloc(model, inputs, 2, &out, 1)) {
      failed = true;
      tsr_status_free(s);
    } else {
      out->deleter(out);
    }
  });
  tsr_model_free(model);
  if (failed || z[0] != 3.0f) {
    std::fprintf(stderr, "a run failed or computed the wrong sum\n");
    return 1;
  }
  std::printf("{\"run_ns\": %.1f, \"run_alloc_ns\": %.1f}\n", run_ns, alloc_ns);
  return 0;
}
