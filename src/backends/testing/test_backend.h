// The "test" backend: a second backend, built into Tessera but used only when
// named (`--backends test,native`), that claims a subset of float32 ops and
// fused patterns and keeps its tensors in its own memory space ("test-device"),
// where every byte is stored XOR 0xA5. A runtime that hands device memory to
// the host, or host memory to the device, without a copy gets wrong results,
// so partitions, copies and artifacts are exercised for real.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"

namespace tessera {

/// Backend "test", version "1", compatibility "test-device/1". `delay_key` is the name its
/// TESSERA_TEST_BACKEND_DELAY_US entries go by ("test"; "test_plugin" where it is built as a plug-in).
std::unique_ptr<Backend> make_test_backend(std::string delay_key = "test");

/// The process-wide "test-device" memory space (the one the test backend uses).
MemorySpace& test_device_memory_space();

struct TestDeviceStats {
  int64_t live_allocations = 0;
  int64_t live_bytes = 0;  // bytes requested by the live allocations
};

/// What the test-device memory space holds right now, so that tests can check
/// that nothing leaks after a run.
TestDeviceStats test_device_stats();

}  // namespace tessera
