// Loading the model with the placement options, and the run's inputs: --input files, random inputs, model input and output descriptions.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <iostream>
#include <optional>
#include <map>
#include <set>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "npy.h"
#include "safe_file.h"
#include "tessera/tessera.h"

#include "cli.h"

namespace tessera::cli {

void check(tsr_status* status) {
  if (!status) return;
  std::string message = tsr_status_message(status);
  tsr_status_free(status);
  throw CliError(message);
}

namespace {

/// An --input that is not one .npy file: a folder of .npy files (a sequence)
/// or "none" (an empty optional). Read by make_value_inputs.
bool is_value_spec(const std::string& path) { return path == "none" || std::filesystem::is_directory(path); }

}  // namespace

/// Reads every --input file (once), by input name.
std::map<std::string, NpyArray> read_input_files(const Args& args) {
  std::map<std::string, NpyArray> arrays;
  for (const auto& [name, file] : args.inputs) {
    if (!is_value_spec(file)) arrays[name] = tessera::tools::read_npy(file);
  }
  return arrays;
}

/// The placement options every command shares (threads, backends, --place, --deny, precision, tuning),
/// and the --input-shape bindings unless `with_shapes` is false.
OptionsHandle placement_options(const Args& args, bool with_shapes) {
  tsr_options* options = nullptr;
  check(tsr_options_create(&options));
  OptionsHandle guard(options, tsr_options_free);
  check(tsr_options_set_threads(options, args.threads));
  for (const auto& [name, value] : args.settings) check(tsr_options_set(options, name.c_str(), value.c_str()));
  if (with_shapes) {
    for (const auto& [name, dims] : args.shapes) check(tsr_options_set_input_shape(options, name.c_str(), dims.data(), dims.size()));
  }
  return guard;
}

void load_model(const Args& args, const std::map<std::string, NpyArray>& files, ModelHandle& handle) {
  // An artifact's input shapes were fixed when it was compiled: files are checked at run time instead,
  // and --input-shape gives the size of random inputs where its dims are open (make_inputs).
  const bool artifact = tsr_file_is_artifact(args.model.c_str()) != 0;
  OptionsHandle guard = placement_options(args, !artifact);
  tsr_options* options = guard.get();
  check(tsr_options_set_freeze_weights(options, args.keep_weights ? 0 : 1));
  std::map<std::string, bool> explicit_shape;
  for (const auto& shape : args.shapes) explicit_shape[shape.first] = true;
  // Only binds inputs the model has: an unknown --input name is reported by make_inputs, by its option.
  for (const auto& [name, array] : files) {
    if (!artifact && !explicit_shape.count(name)) {
      check(tsr_options_set_input_data_shape(options, name.c_str(), array.shape.data(), array.shape.size()));
    }
  }
  check(tsr_model_load(args.model.c_str(), options, &handle.model));
  if (artifact) {
    // --input-shape on an artifact sizes random inputs at its open dims; its other dims were fixed
    // when it was compiled.
    for (const auto& [name, dims] : args.shapes) {
      bool open = false;
      for (size_t i = 0; i < tsr_model_input_count(handle.model); ++i) {
        const tsr_value_info info = input_info(handle.model, i);
        for (int d = 0; d < info.ndim; ++d) {
          if (info.shape[d] >= 0) continue;
          open |= name == info.name && static_cast<int>(dims.size()) == info.ndim;
          open |= info.dim_names && info.dim_names[d] && name == info.dim_names[d] && dims.size() == 1;
        }
      }
      if (!open) {
        throw CliError("'" + args.model + "' is a compiled artifact: its input shapes were fixed when it was compiled, " +
                       "and --input-shape " + name + " names no open dim of it (an artifact compiled with open dims " +
                       "takes --input-shape for the size of random inputs there)");
      }
    }
  }
  // Warnings go to stderr, one line each, so that a script reading stdout sees them too.
  std::string warnings = tsr_model_warnings(handle.model);
  for (size_t start = 0; start < warnings.size();) {
    size_t end = warnings.find('\n', start);
    if (end == std::string::npos) end = warnings.size();
    std::cerr << "warning: " << warnings.substr(start, end - start) << "\n";
    start = end + 1;
  }
}

tsr_value_info input_info(const tsr_model* model, size_t i) {
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  check(tsr_model_input_info(model, i, &info));
  return info;
}

tsr_value_info output_info(const tsr_model* model, size_t i) {
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  check(tsr_model_output_info(model, i, &info));
  return info;
}

namespace {

bool same_dtype(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

}  // namespace

std::string shape_text(const int64_t* shape, int ndim) {
  if (ndim < 0) return "any rank";  // not even the rank is known before running
  if (ndim == 0) return "scalar";
  std::string out;
  for (int i = 0; i < ndim; ++i) out += (i ? "x" : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return out;
}

bool is_string_dtype(DLDataType t) { return t.code == TSR_DL_STRING_CODE; }

/// "a sequence of float32[any rank]", "a string tensor [2x3]", ... for messages.
std::string value_description(const tsr_value_info& info) {
  const std::string element = (is_string_dtype(info.dtype) ? std::string("str") : tessera::tools::dl_dtype_name(info.dtype)) +
                              "[" + shape_text(info.shape, info.ndim) + "]";
  switch (info.kind) {
    case TSR_VALUE_SEQUENCE: return "a sequence of " + element;
    case TSR_VALUE_OPTIONAL_TENSOR: return "an optional " + element;
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "an optional sequence of " + element;
    default: return "a string tensor " + element;
  }
}

namespace {

/// How such an input is given on the command line.
std::string value_input_form(const tsr_value_info& info) {
  switch (info.kind) {
    case TSR_VALUE_SEQUENCE: return "DIR (a folder of 0.npy, 1.npy, ...)";
    case TSR_VALUE_OPTIONAL_TENSOR: return "FILE.npy, or 'none' for an empty optional";
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "DIR (a folder of 0.npy, 1.npy, ...), or 'none' for an empty optional";
    default: return "FILE.npy (a numpy str array)";
  }
}

}  // namespace

/// The --input arrays, in model input order. Inputs without a file are
/// random (seeded) when no --input is given or --random-inputs asks, and an
/// error otherwise: random data a user did not ask for would pass for results.
/// Each random input is named on `notes`. An input fixed at compile time
/// (--input-values) takes that value instead.
std::vector<NpyArray> make_inputs(const Args& args, std::map<std::string, NpyArray>& files, const tsr_model* model,
                                  std::ostream& notes) {
  std::vector<tsr_value_info> infos;
  std::string names;
  for (size_t i = 0; i < tsr_model_input_count(model); ++i) {
    infos.push_back(input_info(model, i));
    names += (i ? ", " : "") + std::string(infos.back().name);
  }
  for (const auto& [name, file] : args.inputs) {
    bool known = false;
    for (const tsr_value_info& info : infos) known |= name == info.name;
    if (!known) {
      throw CliError("--input names '" + name + "', which is not an input of the model (its inputs: " +
                     (names.empty() ? "none" : names) + ")");
    }
  }
  std::string missing;
  for (const tsr_value_info& info : infos) {
    if (!args.inputs.count(info.name)) missing += (missing.empty() ? "'" : ", '") + std::string(info.name) + "'";
  }
  if (!missing.empty() && !args.inputs.empty() && !args.random_inputs) {
    throw CliError("no --input given for " + missing + "; give each input as --input NAME=FILE.npy, or add --random-inputs "
                   "to fill the rest with random data");
  }
  std::vector<NpyArray> arrays;
  std::mt19937_64 rng(args.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (const tsr_value_info& info : infos) {
    auto it = args.inputs.find(info.name);
    NpyArray array;
    const bool strings = is_string_dtype(info.dtype);
    if (info.kind != TSR_VALUE_TENSOR || strings) {
      // Sequences, optionals and strings are read by make_value_inputs; nothing random stands in for them.
      if (it == args.inputs.end()) {
        throw CliError("input '" + std::string(info.name) + "' is " + value_description(info) + "; give it as --input " +
                       info.name + "=" + value_input_form(info));
      }
      arrays.emplace_back();
      continue;
    }
    if (it != args.inputs.end()) {
      if (is_value_spec(it->second)) {
        throw CliError("input '" + std::string(info.name) + "' is a tensor; give it as --input " + info.name + "=FILE.npy (" +
                       (it->second == "none" ? std::string("only an optional input can be 'none'")
                                             : "'" + it->second + "' is a directory") + ")");
      }
      array = std::move(files.at(it->first));
      if (tessera::tools::is_bfloat16(info.dtype) && !same_dtype(array.dtype, info.dtype)) {
        // .npy has no bfloat16: float32 values are rounded to it, uint16 ones are its bit patterns.
        const bool bits = array.dtype.code == kDLUInt && array.dtype.bits == 16;
        try {
          array = tessera::tools::to_bfloat16(array, "input '" + std::string(info.name) + "': " + it->second);
        } catch (const std::runtime_error& e) {
          throw CliError(e.what());
        }
        notes << "input " << info.name << ": " << (bits ? "uint16 bit patterns read as bfloat16" : "float32 rounded to bfloat16 (nearest even)")
              << "\n";
      }
      if (!same_dtype(array.dtype, info.dtype)) {
        throw CliError("input '" + std::string(info.name) + "': " + it->second + " holds " +
                       tessera::tools::dl_dtype_name(array.dtype) + ", the model expects " +
                       tessera::tools::dl_dtype_name(info.dtype));
      }
    } else {
      array.dtype = info.dtype;
      array.shape.assign(info.shape, info.shape + info.ndim);
      // Open dims (a model compiled with symbolic dims) take their size from --input-shape: the input's
      // whole shape, or the dim's name.
      for (size_t d = 0; d < array.shape.size(); ++d) {
        if (array.shape[d] >= 0) continue;
        const std::string symbol = info.dim_names && info.dim_names[d] ? info.dim_names[d] : "";
        for (const auto& [name, dims] : args.shapes) {
          if (name == info.name && dims.size() == array.shape.size()) array.shape[d] = dims[d];
          if (!symbol.empty() && name == symbol && dims.size() == 1) array.shape[d] = dims[0];
        }
        if (array.shape[d] < 0) {
          throw CliError("input '" + std::string(info.name) + "' dimension " + std::to_string(d) +
                         (symbol.empty() ? "" : " ('" + symbol + "')") +
                         " is open; give the random input's size with --input-shape " + info.name + "=DIMS" +
                         (symbol.empty() ? "" : " or " + symbol + "=N"));
        }
      }
      int64_t n = 1;
      for (int64_t d : array.shape) n *= d;
      array.data.assign(static_cast<size_t>(n) * tessera::tools::dl_dtype_size(info.dtype), 0);
      const bool f32 = info.dtype.code == kDLFloat && info.dtype.bits == 32;
      const bool f64 = info.dtype.code == kDLFloat && info.dtype.bits == 64;
      const bool bf16 = tessera::tools::is_bfloat16(info.dtype);
      if (info.fixed_value) {
        // Fixed at compile time (--input-values): every run must feed that value, so it is the input.
        std::memcpy(array.data.data(), info.fixed_value, array.data.size());
        notes << "input " << info.name << ": " << tessera::tools::dl_dtype_name(info.dtype) << "["
              << shape_text(array.shape.data(), static_cast<int32_t>(array.shape.size()))
              << "] the value it was compiled with (input_values), not read from a file\n";
        arrays.push_back(std::move(array));
        continue;
      }
      if (bf16) {
        auto* p = reinterpret_cast<uint16_t*>(array.data.data());
        for (int64_t k = 0; k < n; ++k) p[k] = tessera::tools::float_to_bfloat16_bits(static_cast<float>(uniform(rng)));
      } else if (f32) {
        auto* p = reinterpret_cast<float*>(array.data.data());
        for (int64_t k = 0; k < n; ++k) p[k] = static_cast<float>(uniform(rng));
      } else if (f64) {
        auto* p = reinterpret_cast<double*>(array.data.data());
        for (int64_t k = 0; k < n; ++k) p[k] = uniform(rng);
      }
      notes << "input " << info.name << ": " << tessera::tools::dl_dtype_name(info.dtype) << "["
            << shape_text(array.shape.data(), static_cast<int32_t>(array.shape.size())) << "] "
            << (f32 || f64 || bf16 ? "random, uniform in [-1, 1) (seed " + std::to_string(args.seed) + ")" : std::string("zeros"))
            << ", not read from a file\n";
    }
    arrays.push_back(std::move(array));
  }
  return arrays;
}

/// A numeric array as a DLTensor over its own bytes (no copy).
DLTensor dl_view(NpyArray& a) {
  DLTensor t{};
  t.data = a.data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = a.dtype;
  t.shape = a.shape.data();
  return t;
}

std::vector<DLTensor> as_dl(std::vector<NpyArray>& arrays) {
  std::vector<DLTensor> out;
  for (NpyArray& a : arrays) out.push_back(dl_view(a));
  return out;
}

}  // namespace tessera::cli
