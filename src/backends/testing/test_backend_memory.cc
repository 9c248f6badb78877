// The "test-device" memory space: host memory that pretends to be a device.
// Data is stored scrambled (every byte XOR 0xA5) so that any byte the runtime
// moves between host and device without copy_from_host / copy_to_host comes
// out wrong, and fresh allocations are filled with a pattern so that reading
// before writing is visible too.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/testing/test_backend.h"
#include "ir/error.h"

namespace tessera {
namespace {

constexpr uint8_t kScrambleMask = 0xA5;
constexpr size_t kAlignment = 64;
// The allocation's size lives in a header before the data, so that
// deallocate can keep the byte count without a shared map.
constexpr size_t kHeaderBytes = kAlignment;
constexpr uint8_t kFreshFill = 0xCD;

void scramble_copy(uint8_t* destination, const uint8_t* source, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) destination[i] = static_cast<uint8_t>(source[i] ^ kScrambleMask);
}

class TestDeviceMemory : public MemorySpace {
 public:
  std::string name() const override { return "test-device"; }

  void* allocate(size_t bytes) override {
    if (bytes > (size_t{1} << 48)) throw_user_error("test-device: cannot allocate ", bytes, " bytes");
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* base = std::aligned_alloc(kAlignment, kHeaderBytes + rounded);
    if (!base) throw_user_error("test-device: out of memory allocating ", bytes, " bytes");
    std::memcpy(base, &bytes, sizeof bytes);
    uint8_t* data = static_cast<uint8_t*>(base) + kHeaderBytes;
    std::memset(data, kFreshFill, rounded);
    live_allocations_.fetch_add(1, std::memory_order_relaxed);
    live_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    return data;
  }

  void deallocate(void* data) override {
    if (!data) return;
    uint8_t* base = static_cast<uint8_t*>(data) - kHeaderBytes;
    size_t bytes = 0;
    std::memcpy(&bytes, base, sizeof bytes);
    live_allocations_.fetch_sub(1, std::memory_order_relaxed);
    live_bytes_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    std::free(base);
  }

  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) override {
    scramble_copy(static_cast<uint8_t*>(device_dst), static_cast<const uint8_t*>(host_src), bytes);
  }

  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override {
    scramble_copy(static_cast<uint8_t*>(host_dst), static_cast<const uint8_t*>(device_src), bytes);
  }

  TestDeviceStats stats() const {
    return {live_allocations_.load(std::memory_order_relaxed), live_bytes_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<int64_t> live_allocations_{0};
  std::atomic<int64_t> live_bytes_{0};
};

TestDeviceMemory& device_memory() {
  // Never destroyed: regions owned by static objects may free into it at exit.
  static TestDeviceMemory* memory = new TestDeviceMemory();
  return *memory;
}

}  // namespace

MemorySpace& test_device_memory_space() { return device_memory(); }

TestDeviceStats test_device_stats() { return device_memory().stats(); }

}  // namespace tessera
