// An executable XNNPACK region: one subgraph and one runtime built from a
// checked program (xnnpack_program.h), with the staging buffers its external
// values use.
//
// Contract:
//  - build_region() resolves the program against the region graph (so a
//    hostile payload is refused before XNNPACK sees it), re-lays out each
//    static tensor once into memory the region owns, defines the subgraph,
//    creates the runtime on `pool` (NULL: the caller's thread) and sets it up
//    once: every external value is a staging buffer the region owns, with
//    XNN_EXTRA_BYTES of slack, so XNNPACK never reads host memory.
//  - run_region() checks the host's DLTensors (kDLCPU, float32, contiguous,
//    the region graph's shapes), copies inputs in (NCHW→NHWC for rank 4),
//    invokes the runtime and copies outputs out (NHWC→NCHW). The host does not
//    yet plan these transposes: they are the plug-in's, on every run. Runs of
//    one region are serialised by its mutex (an XNNPACK runtime is not
//    re-entrant).
//  - Neither function throws; errors are messages.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pthreadpool.h>
#include <xnnpack.h>

#include "xnnpack_program.h"

namespace tessera_xnnpack {

struct ExternalBuffer {
  uint32_t tensor = kNoTensor;         // the program tensor, kNoTensor for an unused region input
  std::vector<int64_t> graph_dims;     // NCHW (the region graph's)
  bool transposed = false;             // rank 4: NHWC inside
  std::vector<float> data;             // elements + XNN_EXTRA_BYTES of slack
};

struct Region {
  ~Region();
  std::shared_ptr<pthreadpool> pool;   // the backend's, shared so it outlives the runtime
  xnn_runtime_t runtime = nullptr;
  std::vector<std::vector<float>> static_data;  // XNNPACK reads these until the runtime is deleted
  std::vector<ExternalBuffer> inputs, outputs;
  size_t node_count = 0;
  std::mutex mutex;
};

bool build_region(const tsrp_graph* region, const Program& program, std::shared_ptr<pthreadpool> pool, Region* out,
                  std::string* error);

/// Returns TSRP_OK, or the status code for *error (bad tensors are TSRP_INVALID_ARGUMENT). A failed
/// allocate_output's own status is passed back in *host_status instead of a message.
tsrp_status_code run_region(Region* region, const tsrp_run_args* args, std::string* error, tsrp_status** host_status);

}  // namespace tessera_xnnpack
