// Tutorial 4: a C++ program that embeds Tessera through its C API (libtessera.so).
//
//   tessera_embed MODEL [--threads N] [--input-shape NAME=DIMS ...]
//
// Loads MODEL (an ONNX file, compiled now, or a .tsr artifact from `tessera compile`), prints its
// inputs and outputs, runs it once and prints, per output, the sum of its values and its first ones.
// The inputs live in this program's own std::vector buffers and Tessera reads them in place; element i
// of every input is (i % 256) / 255 for floating-point inputs, i % 128 for integers and i % 2 for bool,
// so another tool can rebuild the same inputs (the tutorial's test does, with numpy).
// Every error is printed with Tessera's message and ends the program with exit code 1.

#include <tessera/tessera.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

// Thrown by check() with Tessera's message; caught once, in main.
struct Failure {
  std::string message;
};

// Every fallible C API call returns NULL or a status that the caller owns.
void check(tsr_status* status, const std::string& what) {
  if (status == nullptr) return;
  Failure failure{what + ": " + tsr_status_message(status)};
  tsr_status_free(status);
  throw failure;
}

struct OptionsDeleter {
  void operator()(tsr_options* options) const { tsr_options_free(options); }
};
struct ModelDeleter {
  void operator()(tsr_model* model) const { tsr_model_free(model); }
};
// Outputs of tsr_model_run_alloc belong to the caller, who frees each with its own deleter.
struct ManagedTensorDeleter {
  void operator()(DLManagedTensor* tensor) const {
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
  }
};
using OutputTensor = std::unique_ptr<DLManagedTensor, ManagedTensorDeleter>;

std::string dtype_name(DLDataType dtype) {
  switch (dtype.code) {
    case kDLFloat: return "float" + std::to_string(dtype.bits);
    case kDLInt: return "int" + std::to_string(dtype.bits);
    case kDLUInt: return "uint" + std::to_string(dtype.bits);
    case kDLBfloat: return "bfloat16";
    case TSR_DL_BOOL_CODE: return "bool";
    default: return "unknown";
  }
}

std::string shape_text(const int64_t* shape, int32_t ndim) {
  if (ndim == 0) return "scalar";
  std::string text;
  for (int32_t i = 0; i < ndim; ++i) text += (i ? "x" : "") + (shape[i] < 0 ? "?" : std::to_string(shape[i]));
  return text;
}

int64_t element_count(const int64_t* shape, int32_t ndim) {
  int64_t count = 1;
  for (int32_t i = 0; i < ndim; ++i) count *= shape[i];
  return count;
}

// One model input: a buffer this program owns, and the DLTensor that describes it to Tessera.
struct InputBuffer {
  std::vector<std::byte> bytes;  // operator new aligns it for every element type
  std::vector<int64_t> shape;
};

template <typename T>
void fill_with(std::vector<std::byte>& bytes, int64_t count, T (*value_at)(int64_t)) {
  bytes.resize(static_cast<size_t>(count) * sizeof(T));
  for (int64_t i = 0; i < count; ++i) {
    const T value = value_at(i);
    std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
  }
}

// Fills input `info` with the pattern described at the top of this file.
void fill_input(const tsr_value_info& info, InputBuffer& buffer) {
  for (int32_t i = 0; i < info.ndim; ++i) {
    if (info.shape[i] < 0) {
      throw Failure{"input '" + std::string(info.name) + "' has an open dimension (" +
                    shape_text(info.shape, info.ndim) + "): bind it with --input-shape"};
    }
  }
  buffer.shape.assign(info.shape, info.shape + info.ndim);
  const int64_t count = element_count(info.shape, info.ndim);
  const std::string type = dtype_name(info.dtype);
  if (type == "float32") {
    fill_with<float>(buffer.bytes, count, [](int64_t i) { return static_cast<float>((i % 256) / 255.0); });
  } else if (type == "float64") {
    fill_with<double>(buffer.bytes, count, [](int64_t i) { return (i % 256) / 255.0; });
  } else if (type == "int64") {
    fill_with<int64_t>(buffer.bytes, count, [](int64_t i) { return static_cast<int64_t>(i % 128); });
  } else if (type == "int32") {
    fill_with<int32_t>(buffer.bytes, count, [](int64_t i) { return static_cast<int32_t>(i % 128); });
  } else if (type == "bool") {
    fill_with<uint8_t>(buffer.bytes, count, [](int64_t i) { return static_cast<uint8_t>(i % 2); });
  } else {
    throw Failure{"input '" + std::string(info.name) + "' is " + type + ", which this example does not fill"};
  }
}

// Element i of a compact CPU tensor, as a double (0 for types this example does not print).
double element_at(const DLTensor& tensor, int64_t i) {
  const auto* base = static_cast<const std::byte*>(tensor.data) + tensor.byte_offset;
  auto read = [&](auto sample) {
    std::memcpy(&sample, base + i * sizeof(sample), sizeof(sample));
    return static_cast<double>(sample);
  };
  const std::string type = dtype_name(tensor.dtype);
  if (type == "float32") return read(float{});
  if (type == "float64") return read(double{});
  if (type == "int64") return read(int64_t{});
  if (type == "int32") return read(int32_t{});
  if (type == "int8") return read(int8_t{});
  if (type == "uint8" || type == "bool") return read(uint8_t{});
  return 0;
}

// "NAME=1x3x64x64" (an input's shape) or "NAME=8" (a symbolic dimension).
void add_input_shape(tsr_options* options, const std::string& argument) {
  const size_t equals = argument.find('=');
  if (equals == std::string::npos) throw Failure{"--input-shape wants NAME=DIMS, got '" + argument + "'"};
  const std::string name = argument.substr(0, equals);
  std::vector<int64_t> dims;
  for (size_t start = equals + 1; start <= argument.size();) {
    size_t end = argument.find('x', start);
    if (end == std::string::npos) end = argument.size();
    char* parsed_end = nullptr;
    const std::string dim = argument.substr(start, end - start);
    dims.push_back(std::strtoll(dim.c_str(), &parsed_end, 10));
    if (dim.empty() || *parsed_end != '\0') throw Failure{"--input-shape: bad dimension '" + dim + "'"};
    start = end + 1;
  }
  check(tsr_options_set_input_shape(options, name.c_str(), dims.data(), dims.size()), "--input-shape " + argument);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [--threads N] [--input-shape NAME=DIMS ...]\n", argv[0]);
    return 2;
  }
  const char* model_path = argv[1];

  tsr_options* raw_options = nullptr;
  check(tsr_options_create(&raw_options), "creating options");
  std::unique_ptr<tsr_options, OptionsDeleter> options(raw_options);
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 == argc) throw Failure{flag + " needs a value"};
    const std::string value = argv[++i];
    if (flag == "--threads") {
      check(tsr_options_set_threads(options.get(), std::atoi(value.c_str())), "--threads " + value);
    } else if (flag == "--input-shape") {
      add_input_shape(options.get(), value);
    } else {
      throw Failure{"unknown option " + flag};
    }
  }

  tsr_model* raw_model = nullptr;
  check(tsr_model_load(model_path, options.get(), &raw_model), std::string("loading ") + model_path);
  std::unique_ptr<tsr_model, ModelDeleter> model(raw_model);
  options.reset();  // only read while loading
  std::printf("model: %s\n", model_path);

  // Inputs: a buffer per input, filled here, and a DLTensor over it that Tessera reads in place.
  const size_t input_count = tsr_model_input_count(model.get());
  std::vector<InputBuffer> buffers(input_count);
  std::vector<DLTensor> inputs(input_count);
  for (size_t i = 0; i < input_count; ++i) {
    tsr_value_info info{};
    info.struct_size = sizeof(info);
    check(tsr_model_input_info(model.get(), i, &info), "input " + std::to_string(i));
    std::printf("input  %s: %s[%s]\n", info.name, dtype_name(info.dtype).c_str(),
                shape_text(info.shape, info.ndim).c_str());
    fill_input(info, buffers[i]);
    DLTensor& tensor = inputs[i];
    tensor.data = buffers[i].bytes.data();
    tensor.device = {kDLCPU, 0};
    tensor.ndim = info.ndim;
    tensor.dtype = info.dtype;
    tensor.shape = buffers[i].shape.data();
    tensor.strides = nullptr;  // compact row-major
    tensor.byte_offset = 0;
  }

  const size_t output_count = tsr_model_output_count(model.get());
  for (size_t i = 0; i < output_count; ++i) {
    tsr_value_info info{};
    info.struct_size = sizeof(info);
    check(tsr_model_output_info(model.get(), i, &info), "output " + std::to_string(i));
    std::printf("output %s: %s[%s]\n", info.name, dtype_name(info.dtype).c_str(),
                shape_text(info.shape, info.ndim).c_str());
  }

  // Outputs: Tessera allocates them; each pointer is handed to a unique_ptr that calls its deleter.
  std::vector<DLManagedTensor*> raw_outputs(output_count, nullptr);
  check(tsr_model_run_alloc(model.get(), inputs.data(), inputs.size(), raw_outputs.data(), raw_outputs.size()),
        "running the model");
  std::vector<OutputTensor> outputs;
  for (DLManagedTensor* output : raw_outputs) outputs.emplace_back(output);

  for (size_t i = 0; i < output_count; ++i) {
    tsr_value_info info{};
    info.struct_size = sizeof(info);
    check(tsr_model_output_info(model.get(), i, &info), "output " + std::to_string(i));
    const DLTensor& tensor = outputs[i]->dl_tensor;
    const int64_t count = element_count(tensor.shape, tensor.ndim);
    double sum = 0;
    for (int64_t k = 0; k < count; ++k) sum += element_at(tensor, k);
    std::printf("result %s: %s[%s] sum=%.9g first=", info.name, dtype_name(tensor.dtype).c_str(),
                shape_text(tensor.shape, tensor.ndim).c_str(), sum);
    for (int64_t k = 0; k < count && k < 8; ++k) std::printf("%s%.9g", k ? "," : "", element_at(tensor, k));
    std::printf("\n");
  }
  return 0;  // the outputs are freed here, then the model
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Failure& failure) {
    std::fprintf(stderr, "error: %s\n", failure.message.c_str());
    return 1;
  }
}
