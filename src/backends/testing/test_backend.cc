// The test backend (see test_backend.h): compile lowers the region to a
// program and serializes it, then goes through load() like an artifact would,
// so the load path is the one that always runs. A loaded region owns device
// copies of the constants it reads (the region graph's constants are host
// tensors) and runs each instruction by copying its inputs out of device
// memory, computing on the host, and copying the result back in.
//
// A planted error, for tests of the accuracy check (`tessera check`): with
// TESSERA_TEST_BACKEND_PLANTED_ERROR=NAME in the environment when a region
// is loaded, every instruction whose opcode is NAME (Relu, AddRelu,
// MatMulBias, ...; see opcode_name) scales its output by 1.01.
#include "backends/testing/test_backend.h"

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backends/testing/test_backend_internal.h"
#include "ir/error.h"
#include "partition/declarations.h"

namespace tessera {
namespace {

using test_backend::Floats;
using test_backend::Instruction;
using test_backend::Opcode;
using test_backend::Program;

/// A device allocation freed when it goes out of scope.
class DeviceBuffer {
 public:
  DeviceBuffer(MemorySpace& space, size_t bytes) : space_(&space), data_(space.allocate(bytes)) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept : space_(other.space_), data_(other.data_) { other.data_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() { space_->deallocate(data_); }
  void* data() const { return data_; }

 private:
  MemorySpace* space_;
  void* data_;
};

class TestRegion : public ExecutableRegion {
 public:
  /// `program` has passed check_program_against(program, region).
  TestRegion(const Graph& region, Program program, const std::string& delay_key)
      : region_(region), program_(std::move(program)), space_(test_device_memory_space()),
        device_constants_(region.values.size(), nullptr) {
    // A backend made slow on purpose (tests of `tessera tune`): each instruction waits this long.
    if (const char* delay = std::getenv("TESSERA_TEST_BACKEND_DELAY_US")) read_delays(delay, delay_key);
    if (const char* planted = std::getenv("TESSERA_TEST_BACKEND_PLANTED_ERROR")) {
      for (uint32_t op = 1; op <= static_cast<uint32_t>(Opcode::kLast); ++op) {
        if (std::strcmp(planted, test_backend::opcode_name(static_cast<Opcode>(op))) == 0) planted_ = static_cast<Opcode>(op);
      }
    }
    for (const Instruction& instruction : program_.instructions) {
      for (ValueId id : instruction.inputs) {
        const Tensor* constant = region.value(id).constant.get();
        if (!constant || device_constants_[static_cast<size_t>(id)]) continue;
        constant_buffers_.emplace_back(space_, constant->nbytes());
        space_.copy_from_host(constant_buffers_.back().data(), constant->data(), constant->nbytes());
        device_constants_[static_cast<size_t>(id)] = constant_buffers_.back().data();
      }
    }
  }

  void run(ValueStore& store) const override {
    // Nothing here is mutated: each run keeps its scratch on its own stack.
    for (const Instruction& instruction : program_.instructions) {
      const auto start = std::chrono::steady_clock::now();
      run_instruction(instruction, store);
      if (const long delay = delay_us_[static_cast<size_t>(instruction.opcode)]; delay > 0) {
        while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(delay)) {
        }
      }
      if (store.profiling()) {
        std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
        store.node_finished(instruction.node_index, elapsed.count());
      }
    }
  }

 private:
  const Shape& shape_of(ValueId id) const { return region_.value(id).type.dims; }

  /// Input `id` copied out of device memory (its own device copy for constants).
  Floats read_input(ValueStore& store, ValueId id) const {
    const Shape& shape = shape_of(id);
    Floats host(static_cast<size_t>(shape_numel(shape)));
    const void* device = device_constants_[static_cast<size_t>(id)];
    if (!device) {
      const TensorView& view = store.get(id);
      if (view.dtype != DType::kFloat32 || view.shape != shape || (!view.data && !host.empty())) {
        throw_internal_error("test backend: value '", region_.value(id).name, "' was handed over as ",
                             dtype_name(view.dtype), "[", shape_to_string(view.shape), "]",
                             view.data ? "" : " without data", "; expected float32[", shape_to_string(shape), "]");
      }
      device = view.data;
    }
    space_.copy_to_host(host.data(), device, host.size() * sizeof(float));
    return host;
  }

  void write_output(ValueStore& store, ValueId id, const Floats& host) const {
    const Shape& shape = shape_of(id);
    TensorView* view = &store.output(id);
    if (!view->data) {
      view->dtype = DType::kFloat32;
      view->shape = shape;
      store.allocate(id);
      view = &store.output(id);
    }
    if (view->dtype != DType::kFloat32 || view->shape != shape || host.size() != static_cast<size_t>(view->numel()) ||
        (!view->data && !host.empty())) {
      throw_internal_error("test backend: output '", region_.value(id).name, "' was given as ",
                           dtype_name(view->dtype), "[", shape_to_string(view->shape), "]; expected float32[",
                           shape_to_string(shape), "]");
    }
    space_.copy_from_host(view->data, host.data(), host.size() * sizeof(float));
  }

  void run_instruction(const Instruction& instruction, ValueStore& store) const {
    namespace kernels = test_backend;
    std::vector<Floats> in;
    std::vector<const Shape*> shapes;
    for (ValueId id : instruction.inputs) {
      in.push_back(read_input(store, id));
      shapes.push_back(&shape_of(id));
    }
    const Shape& out_shape = shape_of(instruction.outputs[0]);
    Floats out;
    switch (instruction.opcode) {
      case Opcode::kRelu:
      case Opcode::kSigmoid:
      case Opcode::kTanh:
      case Opcode::kNeg:
      case Opcode::kAbs:
      case Opcode::kExp: kernels::run_unary(instruction.opcode, in[0], out); break;
      case Opcode::kAdd:
      case Opcode::kSub:
      case Opcode::kMul:
      case Opcode::kDiv:
        kernels::run_binary(instruction.opcode, in[0], *shapes[0], in[1], *shapes[1], out, out_shape);
        break;
      case Opcode::kMatMul: kernels::run_matmul(in[0], *shapes[0], in[1], *shapes[1], out, out_shape); break;
      case Opcode::kGemm: {
        static const Shape kNoShape;
        kernels::run_gemm(in[0], *shapes[0], in[1], *shapes[1], in.size() > 2 ? in[2] : Floats{},
                          in.size() > 2 ? *shapes[2] : kNoShape, instruction.ints[0] != 0, instruction.ints[1] != 0,
                          instruction.floats[0], instruction.floats[1], out, out_shape);
        break;
      }
      case Opcode::kSoftmax: kernels::run_softmax(in[0], *shapes[0], instruction.ints[0], out); break;
      case Opcode::kTranspose: kernels::run_transpose(in[0], *shapes[0], instruction.ints, out); break;
      case Opcode::kCopy: out = std::move(in[0]); break;
      case Opcode::kGelu:
        kernels::run_gelu(in[0], instruction.floats[0], instruction.floats[1], instruction.floats[2], out);
        break;
      case Opcode::kAddRelu: {
        Floats sum;
        kernels::run_binary(Opcode::kAdd, in[0], *shapes[0], in[1], *shapes[1], sum, out_shape);
        kernels::run_unary(Opcode::kRelu, sum, out);
        break;
      }
      case Opcode::kMatMulBias:
      case Opcode::kMatMulBiasRelu:
      case Opcode::kMatMulBiasGelu: {
        Shape product_shape;
        kernels::matmul_shape(*shapes[0], *shapes[1], product_shape);
        Floats product, biased;
        kernels::run_matmul(in[0], *shapes[0], in[1], *shapes[1], product, product_shape);
        kernels::run_binary(Opcode::kAdd, product, product_shape, in[2], *shapes[2], biased, out_shape);
        if (instruction.opcode == Opcode::kMatMulBias) {
          out = std::move(biased);
        } else if (instruction.opcode == Opcode::kMatMulBiasRelu) {
          kernels::run_unary(Opcode::kRelu, biased, out);
        } else {
          kernels::run_gelu(biased, instruction.floats[0], instruction.floats[1], instruction.floats[2], out);
        }
        break;
      }
    }
    if (planted_ && *planted_ == instruction.opcode) {
      for (float& v : out) v *= 1.01f;
    }
    write_output(store, instruction.outputs[0], out);
  }

  const Graph& region_;
  const Program program_;
  MemorySpace& space_;
  std::vector<DeviceBuffer> constant_buffers_;
  std::vector<void*> device_constants_;  // per region value: its device copy, for constants read
  std::optional<Opcode> planted_;        // TESSERA_TEST_BACKEND_PLANTED_ERROR
  std::array<long, static_cast<size_t>(Opcode::kLast) + 1> delay_us_{};  // per opcode: TESSERA_TEST_BACKEND_DELAY_US

  /// TESSERA_TEST_BACKEND_DELAY_US: a number of microseconds for every instruction, or a comma list of
  /// [BACKEND:]OPCODE=US (e.g. "test:MatMul=3000,test_plugin:Relu=500"); entries for another backend
  /// (`delay_key` names this one: "test", or "test_plugin" built as a plug-in) are left out.
  void read_delays(const std::string& text, const std::string& delay_key) {
    if (text.find('=') == std::string::npos) {
      delay_us_.fill(std::strtol(text.c_str(), nullptr, 10));
      return;
    }
    size_t start = 0;
    while (start < text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      std::string entry = text.substr(start, comma - start);
      start = comma + 1;
      const size_t colon = entry.find(':');
      if (colon != std::string::npos) {
        if (entry.substr(0, colon) != delay_key) continue;
        entry = entry.substr(colon + 1);
      }
      const size_t equals = entry.find('=');
      if (equals == std::string::npos) throw_user_error("TESSERA_TEST_BACKEND_DELAY_US: '", entry, "' is not OPCODE=US");
      const std::string name = entry.substr(0, equals);
      bool known = false;
      for (uint32_t op = 1; op <= static_cast<uint32_t>(Opcode::kLast); ++op) {
        if (name == test_backend::opcode_name(static_cast<Opcode>(op))) {
          delay_us_[op] = std::strtol(entry.c_str() + equals + 1, nullptr, 10);
          known = true;
        }
      }
      if (!known) throw_user_error("TESSERA_TEST_BACKEND_DELAY_US: no test backend opcode '", name, "'");
    }
  }
};

class TestBackend : public Backend {
 public:
  explicit TestBackend(std::string delay_key)
      : declarations_(test_backend::make_test_declarations()), delay_key_(std::move(delay_key)) {}

  std::string name() const override { return "test"; }
  std::string version() const override { return "1"; }
  std::string compatibility() const override { return "test-device/1"; }
  MemorySpace* memory_space() const override { return &test_device_memory_space(); }
  const Declarations& declarations() const override { return declarations_; }

  CompiledRegion compile(const Graph& region, const RegionOptions& options) const override {
    CompiledRegion compiled;
    compiled.payload = test_backend::serialize_program(test_backend::lower_region(region));
    compiled.executable = load(region, compiled.payload, options);
    return compiled;
  }

  std::unique_ptr<ExecutableRegion> load(const Graph& region, std::span<const uint8_t> payload,
                                         const RegionOptions&) const override {
    Program program = test_backend::parse_program(payload);
    test_backend::check_program_against(program, region);
    return std::make_unique<TestRegion>(region, std::move(program), delay_key_);
  }

 private:
  Declarations declarations_;
  std::string delay_key_;
};

}  // namespace

std::unique_ptr<Backend> make_test_backend(std::string delay_key) { return std::make_unique<TestBackend>(std::move(delay_key)); }

}  // namespace tessera
