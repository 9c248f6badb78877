// The plug-in ABI from the plug-in's side: the test backend built as a
// plug-in (libtessera_test_backend_plugin.so, whose C++ adapter is
// src/backends/plugin_export/) driven by a host written here, as an older or
// smaller host than this one would drive it. Run arguments cut before
// node_finished (an older minor version's), with the bytes past their
// struct_size poisoned, must run and never call the poisoned member; arguments
// too small to hold the tensors are an error, not a crash.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/backend_plugin.h"

#ifndef TEST_PLUGIN_PATH
#error "TEST_PLUGIN_PATH: the test backend built as a plug-in"
#endif

struct tsrp_status {  // this host's status
  tsrp_status_code code;
  std::string message;
};

namespace {

tsrp_status* make_status(tsrp_status_code code, const char* message) { return new tsrp_status{code, message}; }

struct Host {
  void* library = nullptr;
  const tsrp_plugin* api = nullptr;
  tsrp_backend* backend = nullptr;
  tsrp_host host{};
  Host() {
    host.struct_size = sizeof(host);
    host.abi_major = TSRP_ABI_MAJOR;
    host.abi_minor = TSRP_ABI_MINOR;
    host.tessera_version = "test";
    host.make_status = make_status;
    library = dlopen(TEST_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(library, nullptr) << dlerror();
    if (!library) return;
    auto entry = reinterpret_cast<tsrp_entry_point>(dlsym(library, TSRP_ENTRY_POINT_NAME));
    EXPECT_NE(entry, nullptr);
    api = entry ? entry(&host) : nullptr;
    EXPECT_NE(api, nullptr);
    if (!api) return;
    tsrp_backend_options options{};
    options.struct_size = sizeof(options);
    options.num_threads = 1;
    EXPECT_EQ(api->create_backend(&options, &backend), nullptr);
  }
  ~Host() {
    if (api && backend) api->destroy_backend(backend);
    // The library stays loaded: the adapter's tables are process-wide.
  }
};

/// x[2,5] -> Relu -> y: the region graph a host hands the plug-in.
struct ReluGraph {
  int64_t dims[2] = {2, 5};
  tsrp_value x{sizeof(tsrp_value), "x", TSRP_FLOAT32, 2, dims, nullptr, 0};
  tsrp_value y{sizeof(tsrp_value), "y", TSRP_FLOAT32, 2, dims, nullptr, 0};
  const tsrp_value* values[2] = {&x, &y};
  int32_t node_inputs[1] = {0}, node_outputs[1] = {1};
  tsrp_node relu{sizeof(tsrp_node), "relu", "Relu", "", 13, 1, node_inputs, 1, node_outputs, 0, nullptr};
  const tsrp_node* nodes[1] = {&relu};
  int32_t inputs[1] = {0}, outputs[1] = {1};
  tsrp_graph graph{sizeof(tsrp_graph), "relu", 2, values, 1, nodes, 1, inputs, 1, outputs};
};

void poisoned_node_finished_called(void*, size_t, double) { ADD_FAILURE() << "unreachable"; }

TEST(PluginSideAbi, RunArgumentsOfAnOlderOrSmallerHostAreReadOnlyAsFarAsTheirSize) {
  Host h;
  ASSERT_NE(h.backend, nullptr);
  ReluGraph g;
  tsrp_support support{};
  char reason[256];
  support.struct_size = sizeof(support);
  support.reason = reason;
  support.reason_capacity = sizeof(reason);
  ASSERT_EQ(h.api->support(h.backend, &g.graph, 0, &support), nullptr);
  ASSERT_TRUE(support.supported) << reason;
  tsrp_payload payload{};
  payload.struct_size = sizeof(payload);
  ASSERT_EQ(h.api->compile(h.backend, &g.graph, &payload), nullptr);
  tsrp_region* region = nullptr;
  ASSERT_EQ(h.api->load(h.backend, &g.graph, payload.data, payload.size, &region), nullptr);
  h.api->free_payload(h.backend, payload.owner);

  // Its tensors live in its memory space: copy the input in, the output out.
  const tsrp_memory_space* space = h.api->memory_space(h.backend);
  ASSERT_NE(space, nullptr);
  std::vector<float> x(10), y(10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i) - 2.2f;
  void* dx = nullptr;
  void* dy = nullptr;
  ASSERT_EQ(space->allocate(space->context, sizeof(float) * 10, &dx), nullptr);
  ASSERT_EQ(space->allocate(space->context, sizeof(float) * 10, &dy), nullptr);
  ASSERT_EQ(space->copy_from_host(space->context, dx, x.data(), sizeof(float) * 10), nullptr);
  DLTensor in{}, out{};
  for (DLTensor* t : {&in, &out}) {
    t->device = {kDLExtDev, 0};
    t->ndim = 2;
    t->dtype = {kDLFloat, 32, 1};
    t->shape = g.dims;
  }
  in.data = dx;
  out.data = dy;

  // An older host's arguments: they end before node_finished, and what follows is junk.
  alignas(tsrp_run_args) unsigned char bytes[sizeof(tsrp_run_args)];
  std::memset(bytes, 0x5A, sizeof(bytes));
  tsrp_run_args older{};
  older.input_count = 1;
  older.inputs = &in;
  older.output_count = 1;
  older.outputs = &out;
  older.allocate_output = nullptr;
  older.host_context = nullptr;
  older.struct_size = offsetof(tsrp_run_args, node_finished);
  std::memcpy(bytes, &older, older.struct_size);
  const auto* args = reinterpret_cast<const tsrp_run_args*>(bytes);
  tsrp_status* status = h.api->run(region, args);
  EXPECT_EQ(status, nullptr) << (status ? status->message : "");
  delete status;
  ASSERT_EQ(space->copy_to_host(space->context, y.data(), dy, sizeof(float) * 10), nullptr);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;

  // The same with every member, node_finished set: it is called once per node.
  struct Counter {
    int calls = 0;
  } counter;
  tsrp_run_args full = older;
  full.struct_size = sizeof(full);
  full.host_context = &counter;
  full.node_finished = [](void* context, size_t node, double ms) {
    EXPECT_EQ(node, 0u);
    EXPECT_GE(ms, 0.0);
    ++static_cast<Counter*>(context)->calls;
  };
  status = h.api->run(region, &full);
  EXPECT_EQ(status, nullptr) << (status ? status->message : "");
  delete status;
  EXPECT_EQ(counter.calls, 1);
  (void)poisoned_node_finished_called;

  // Arguments too small to hold the tensors: an error naming why, not a read of junk.
  tsrp_run_args tiny = older;
  tiny.struct_size = offsetof(tsrp_run_args, inputs);
  std::memset(bytes, 0x5A, sizeof(bytes));
  std::memcpy(bytes, &tiny, tiny.struct_size);
  status = h.api->run(region, reinterpret_cast<const tsrp_run_args*>(bytes));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->code, TSRP_INVALID_ARGUMENT);
  EXPECT_NE(status->message.find("too small to hold the inputs and outputs"), std::string::npos) << status->message;
  delete status;

  h.api->release_region(region);
  space->deallocate(space->context, dx);
  space->deallocate(space->context, dy);
}

}  // namespace
