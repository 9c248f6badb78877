// The tessera command line, built on the C API only (see kUsage).
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
#include "omp_wait_defaults.h"
#include "safe_file.h"
#include "tessera/tessera.h"

namespace {

using tessera::tools::NpyArray;

struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(tsr_status* status) {
  if (!status) return;
  std::string message = tsr_status_message(status);
  tsr_status_free(status);
  throw CliError(message);
}

const char* kUsage =
    "usage:\n"
    "  tessera compile MODEL.onnx -o MODEL.tsr [PLACEMENT OPTIONS] [--input-shape NAME=DIMS ...]\n"
    "                  [--report FILE.{txt,json,dot,html}]\n"
    "  tessera partition MODEL.onnx [PLACEMENT OPTIONS] [--input-shape NAME=DIMS ...]\n"
    "                  [--json FILE] [--dot FILE] [--html FILE]\n"
    "  tessera run MODEL [--input NAME=FILE.npy|DIR|none ...] [--input-shape NAME=DIMS ...] [PLACEMENT OPTIONS]\n"
    "              [--output-dir DIR] [--threads N] [--placement] [--profile] [--random-inputs] [--seed S]\n"
    "              [--bfloat16-bits]\n"
    "              [--report FILE.{txt,json,dot,html}]  (with --profile, the report shows the times)\n"
    "  tessera info MODEL [--input-shape NAME=DIMS ...] [PLACEMENT OPTIONS]\n"
    "  tessera bench MODEL [--input NAME=FILE.npy ...] [--input-shape NAME=DIMS ...] [--threads N]\n"
    "              [--warmup W] [--iterations K] [--json] [--profile] [--random-inputs] [PLACEMENT OPTIONS]\n"
    "  tessera check MODEL [--input NAME=FILE.npy ...] [--input-shape NAME=DIMS ...] [PLACEMENT OPTIONS]\n"
    "              [--threads N] [--tolerance R] [--min-cosine C] [--reference native|fp64] [--json FILE] [--html FILE]\n"
    "              [--random-inputs] [--seed S]\n"
    "              runs the model and each region's nodes again on native (float32, or float64 with\n"
    "              --reference fp64) on that region's inputs; prints per region and output the max abs / relative error and cosine, and\n"
    "              exits 2 when a region is over its tolerance (default 1e-4 relative; with bf16\n"
    "              nodes 3e-2 and cosine >= 0.999; with quantized ops 0.1 and cosine >= 0.99)\n"
    "  tessera quantize MODEL.onnx -o MODEL.qdq.onnx [--calibration DIR | --random N] [--method minmax|percentile|entropy]\n"
    "              [--percentile P] [--per-channel] [--exclude NODES] [--input-shape NAME=DIMS ...] [--threads N] [--seed S]\n"
    "              static post-training quantization: writes a QDQ ONNX model (int8 weights, uint8 activations,\n"
    "              int32 biases around Conv, MatMul, Gemm, Add, pooling and Concat) that ONNX Runtime runs too.\n"
    "              Calibration runs the float model on DIR's samples: DIR/*.npy, one file per sample, for a\n"
    "              model with one input, or DIR/SAMPLE/INPUT_NAME.npy, one folder per sample; or on N random\n"
    "              inputs (default 16). --exclude takes node names or op types, comma-separated.\n"
    "  tessera tune MODEL.onnx -o TUNING.json [PLACEMENT OPTIONS] [--threads N] [--budget SECONDS]\n"
    "              [--input-shape NAME=DIMS ...]\n"
    "              measured placement: times the default priority order, each backend alone, then each\n"
    "              region of the fastest moved to each other backend, on random inputs, within the budget\n"
    "              (default 60 s), and writes the fastest placement and every candidate's time. Apply it\n"
    "              with --tuning TUNING.json (compile, run, bench, partition, info, check); a record made\n"
    "              for another model is not applied, one from another machine is, each with a warning.\n"
    "  tessera backends\n"
    "Every command also takes --backend-plugin PATH.so (repeatable): a backend plug-in to load first\n"
    "(include/tessera/backend_plugin.h); TESSERA_BACKEND_PLUGINS=PATH:PATH... does the same.\n"
    "MODEL is an ONNX file or a .tsr artifact from tessera compile.\n"
    "PLACEMENT OPTIONS (ONNX models only):\n"
    "  --backends LIST          backends to use, highest priority first (e.g. test,native); default: the\n"
    "                           loaded plug-ins, then the built-in backends used by default. native is\n"
    "                           added last unless --strict.\n"
    "  --place SELECTOR=BACKEND run the selected nodes on BACKEND (repeatable)\n"
    "  --deny BACKEND:SELECTOR  never run the selected nodes on BACKEND (repeatable)\n"
    "  --min-region-size N      smaller regions of non-native backends run on native instead\n"
    "  --strict                 fail, naming each node the listed backends refuse, instead of falling back\n"
    "  --precision P            fp32 (default); bf16: Conv, MatMul and Gemm in bfloat16 with float32\n"
    "                           accumulation where a backend supports it (oneDNN with AVX512_BF16), the\n"
    "                           final layer and sensitive ops in float32; bf16-all: the final layer too\n"
    "  --tuning TUNING.json     the placement `tessera tune` chose for this model\n"
    "  SELECTOR is a node name, op:TYPE, or an op type when no node has that name.\n"
    "DIMS is like 1x3x224x224 (or 'scalar'); a symbolic dimension can be bound by name: --input-shape batch=4.\n"
    "--keep-weights-as-inputs (ONNX models): initializers that are also graph inputs stay inputs (fed at run\n"
    "time) instead of constants.\n"
    "--threads N: at most the CPUs this process may use (more make every parallel step wait; a warning says so).\n"
    "Strings a model outputs that are not valid UTF-8 are written with each invalid byte as U+DC80 + byte\n"
    "(Python's surrogateescape).\n"
    "bfloat16 in .npy (which has none): a bfloat16 input reads float32 (rounded to nearest even) or uint16\n"
    "(bit patterns); run writes bfloat16 outputs as float32 (exact), or as uint16 bit patterns with --bfloat16-bits.\n"
    "Without --input, inputs are random (seeded, uniform in [-1, 1) for float32/64, 0 otherwise), and run\n"
    "says so. With some --input, every input must be given, unless --random-inputs fills the rest.\n"
    "Files are written through a temporary file and renamed; only regular files are replaced. --output-dir\n"
    "writes DIR/<output name>.npy (characters outside [A-Za-z0-9._-] become _; names that clash get ~2, ~3).\n"
    "Strings are numpy str arrays (dtype '<U'). A sequence input is a folder holding 0.npy, 1.npy, ... (numbered\n"
    "from 0, nothing else); an optional input is a file, a folder, or 'none' (empty). run writes a sequence output\n"
    "as DIR/<output name>/0.npy, 1.npy, ... and nothing for an empty optional (it says so).\n";

struct Args {
  std::string command;
  std::string model;
  std::map<std::string, std::string> inputs;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  std::string output_dir;
  int threads = 1;
  int warmup = 5;
  int iterations = 20;
  bool json = false;
  bool placement = false;
  bool profile = false;
  bool keep_weights = false;
  bool random_inputs = false;  // fill inputs not given with --input
  bool bfloat16_bits = false;  // run: write bfloat16 outputs as uint16 bit patterns (default: float32)
  uint64_t seed = 0;
  std::string backends;
  std::vector<std::string> plugins;  // --backend-plugin, in order
  std::vector<std::string> place;
  std::vector<std::string> deny;
  int min_region_size = 1;
  bool strict = false;
  std::optional<std::string> precision;
  std::string output;       // compile -o
  std::string report_file;  // compile --report
  std::string json_file, dot_file, html_file;  // partition; check (json_file, html_file)
  double tolerance = -1;   // check
  double min_cosine = -1;  // check
  bool float64_reference = false;  // check --reference fp64
  // quantize
  std::string calibration_dir;
  int random_samples = 0;
  std::string method;
  double percentile = 0;
  bool per_channel = false;
  std::string exclude;  // comma-separated; repeated --exclude options are joined
  // tune
  double budget = 0;       // --budget SECONDS (0: the library's default)
  std::string tuning;      // --tuning FILE for compile, run, bench, partition, info, check
};

/// A finite decimal number (check's --tolerance and --min-cosine).
double parse_number(const std::string& text, const std::string& what, double lo, double hi) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) throw CliError(what + ": '" + text + "' is not a number");
  if (v < lo || v > hi) throw CliError(what + ": " + text + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return v;
}

/// A decimal integer in [lo, hi]: no spaces, signs only '-', nothing after the digits.
int64_t parse_int(const std::string& text, const std::string& what, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
  const size_t first_digit = !text.empty() && text[0] == '-' ? 1 : 0;
  bool digits = text.size() > first_digit;
  for (size_t i = first_digit; i < text.size(); ++i) digits &= text[i] >= '0' && text[i] <= '9';
  long long v = 0;
  try {
    if (!digits) throw std::invalid_argument(text);
    v = std::stoll(text);
  } catch (const std::out_of_range&) {
    throw CliError(what + ": '" + text + "' is out of range");
  } catch (const std::logic_error&) {
    throw CliError(what + ": '" + text + "' is not an integer");
  }
  if (v < lo || v > hi) {
    throw CliError(what + ": " + text + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  }
  return v;
}

/// DIMS of --input-shape: sizes joined by 'x' (1x3x224x224), one size (a symbolic dimension), or "scalar".
std::vector<int64_t> parse_dims(const std::string& name, const std::string& text) {
  const std::string what = "--input-shape " + name;
  if (text == "scalar") return {};
  std::vector<int64_t> dims;
  size_t start = 0;
  for (;;) {
    const size_t x = text.find('x', start);
    const std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    bool digits = !part.empty();
    for (char c : part) digits &= c >= '0' && c <= '9';
    if (!digits) {
      throw CliError(what + ": '" + text + "' is not a shape; DIMS are sizes (0 or more) joined by x, like 1x3x224x224");
    }
    dims.push_back(parse_int(part, what, 0, INT64_MAX));
    if (x == std::string::npos) return dims;
    start = x + 1;
  }
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) throw CliError(option + " expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Args parse_args(int argc, char** argv) {
  if (argc < 2) throw CliError(kUsage);
  Args args;
  args.command = argv[1];
  if (args.command == "--help" || args.command == "-h" || args.command == "help") {
    std::cout << kUsage;
    std::exit(0);
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw CliError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--input") {
      auto [name, file] = split_assignment(value(), a);
      if (!args.inputs.emplace(name, file).second) throw CliError("--input names '" + name + "' twice");
    } else if (a == "--input-shape") {
      auto [name, dims_text] = split_assignment(value(), a);
      for (const auto& shape : args.shapes) {
        if (shape.first == name) throw CliError("--input-shape names '" + name + "' twice");
      }
      args.shapes.emplace_back(name, parse_dims(name, dims_text));
    } else if (a == "--output-dir") {
      args.output_dir = value();
    } else if (a == "--threads") {
      args.threads = static_cast<int>(parse_int(value(), a, INT32_MIN, INT32_MAX));
    } else if (a == "--warmup") {
      args.warmup = static_cast<int>(parse_int(value(), a, 0, 1000000));
    } else if (a == "--iterations") {
      args.iterations = static_cast<int>(parse_int(value(), a, 1, 1000000));
    } else if (a == "--seed") {
      args.seed = static_cast<uint64_t>(parse_int(value(), a, 0, INT64_MAX));
    } else if (a == "--tolerance" && args.command == "check") {
      args.tolerance = parse_number(value(), a, 0, 1e30);
    } else if (a == "--reference" && args.command == "check") {
      const std::string reference = value();
      if (reference != "native" && reference != "fp64") {
        throw CliError("--reference: '" + reference + "' is not a reference (native: native in float32; fp64: in float64)");
      }
      args.float64_reference = reference == "fp64";
    } else if (a == "--calibration" && args.command == "quantize") {
      args.calibration_dir = value();
    } else if (a == "--random" && args.command == "quantize") {
      args.random_samples = static_cast<int>(parse_int(value(), a, 1, 1000000));
    } else if (a == "--method" && args.command == "quantize") {
      args.method = value();
    } else if (a == "--percentile" && args.command == "quantize") {
      args.percentile = parse_number(value(), a, 50, 100);
    } else if (a == "--per-channel" && args.command == "quantize") {
      args.per_channel = true;
    } else if (a == "--exclude" && args.command == "quantize") {
      args.exclude += (args.exclude.empty() ? "" : ",") + value();
    } else if (a == "--min-cosine" && args.command == "check") {
      args.min_cosine = parse_number(value(), a, -1, 1);
    } else if (a == "--json" && (args.command == "partition" || args.command == "check")) {
      args.json_file = value();
    } else if (a == "--json") {
      args.json = true;
    } else if (a == "--dot") {
      args.dot_file = value();
    } else if (a == "--html") {
      args.html_file = value();
    } else if (a == "-o" || a == "--output") {
      args.output = value();
    } else if (a == "--report") {
      args.report_file = value();
    } else if (a == "--backends") {
      args.backends = value();
    } else if (a == "--backend-plugin") {
      args.plugins.push_back(value());
    } else if (a == "--place") {
      args.place.push_back(value());
    } else if (a == "--deny") {
      args.deny.push_back(value());
    } else if (a == "--min-region-size") {
      args.min_region_size = static_cast<int>(parse_int(value(), a, INT32_MIN, INT32_MAX));
    } else if (a == "--budget" && args.command == "tune") {
      args.budget = parse_number(value(), a, 0.001, 1e6);
    } else if (a == "--tuning" && args.command != "tune" && args.command != "quantize") {
      args.tuning = value();
    } else if (a == "--precision") {
      args.precision = value();
    } else if (a == "--strict") {
      args.strict = true;
    } else if (a == "--bfloat16-bits" && args.command == "run") {
      args.bfloat16_bits = true;
    } else if (a == "--placement") {
      args.placement = true;
    } else if (a == "--profile") {
      args.profile = true;
    } else if (a == "--keep-weights-as-inputs") {
      args.keep_weights = true;
    } else if (a == "--random-inputs") {
      args.random_inputs = true;
    } else if (!a.empty() && a[0] == '-') {
      throw CliError("unknown option '" + a + "'\n" + kUsage);
    } else if (args.model.empty()) {
      args.model = a;
    } else {
      throw CliError("unexpected argument '" + a + "'");
    }
  }
  if (args.model.empty() && args.command != "backends") throw CliError(std::string("no model given\n") + kUsage);
  if (args.command == "compile" && args.output.empty()) throw CliError("compile needs -o FILE.tsr");
  if (args.command == "quantize" && args.output.empty()) throw CliError("quantize needs -o FILE.onnx");
  if (args.command == "tune" && args.output.empty()) throw CliError("tune needs -o TUNING.json");
  if (args.command == "quantize" && !args.calibration_dir.empty() && args.random_samples) {
    throw CliError("quantize: give --calibration DIR or --random N, not both");
  }
  if (args.warmup < 0 || args.iterations < 1) throw CliError("--warmup must be >= 0 and --iterations >= 1");
  return args;
}

struct ModelHandle {
  tsr_model* model = nullptr;
  ~ModelHandle() { tsr_model_free(model); }
};

/// An --input that is not one .npy file: a folder of .npy files (a sequence)
/// or "none" (an empty optional). Read by make_value_inputs.
bool is_value_spec(const std::string& path) { return path == "none" || std::filesystem::is_directory(path); }

/// Reads every --input file (once), by input name.
std::map<std::string, NpyArray> read_input_files(const Args& args) {
  std::map<std::string, NpyArray> arrays;
  for (const auto& [name, file] : args.inputs) {
    if (!is_value_spec(file)) arrays[name] = tessera::tools::read_npy(file);
  }
  return arrays;
}

/// Loads the model. Inputs given as files bind their shape from the file
/// (so a model with symbolic dims runs on whatever the files hold), unless
/// --input-shape names them explicitly.
using OptionsHandle = std::unique_ptr<tsr_options, void (*)(tsr_options*)>;

/// The placement options every command shares (threads, backends, --place, --deny, precision, tuning).
OptionsHandle placement_options(const Args& args) {
  tsr_options* options = nullptr;
  check(tsr_options_create(&options));
  OptionsHandle guard(options, tsr_options_free);
  check(tsr_options_set_threads(options, args.threads));
  if (!args.backends.empty()) check(tsr_options_set_backends(options, args.backends.c_str()));
  for (const std::string& p : args.place) check(tsr_options_add_placement(options, p.c_str()));
  for (const std::string& d : args.deny) check(tsr_options_add_denial(options, d.c_str()));
  if (args.min_region_size != 1) check(tsr_options_set_min_region_size(options, args.min_region_size));
  if (args.strict) check(tsr_options_set_strict(options, 1));
  if (args.precision) check(tsr_options_set_precision(options, args.precision->c_str()));
  if (!args.tuning.empty()) check(tsr_options_set_tuning(options, args.tuning.c_str()));
  for (const auto& [name, dims] : args.shapes) check(tsr_options_set_input_shape(options, name.c_str(), dims.data(), dims.size()));
  return guard;
}

void load_model(const Args& args, const std::map<std::string, NpyArray>& files, ModelHandle& handle) {
  OptionsHandle guard = placement_options(args);
  tsr_options* options = guard.get();
  check(tsr_options_set_freeze_weights(options, args.keep_weights ? 0 : 1));
  // An artifact's input shapes were fixed when it was compiled: files are checked at run time instead.
  const bool artifact = tsr_file_is_artifact(args.model.c_str()) != 0;
  std::map<std::string, bool> explicit_shape;
  for (const auto& shape : args.shapes) explicit_shape[shape.first] = true;
  // Only binds inputs the model has: an unknown --input name is reported by make_inputs, by its option.
  for (const auto& [name, array] : files) {
    if (!artifact && !explicit_shape.count(name)) {
      check(tsr_options_set_input_data_shape(options, name.c_str(), array.shape.data(), array.shape.size()));
    }
  }
  check(tsr_model_load(args.model.c_str(), options, &handle.model));
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

bool same_dtype(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

std::string shape_text(const int64_t* shape, int ndim) {
  if (ndim == 0) return "scalar";
  std::string out;
  for (int i = 0; i < ndim; ++i) out += (i ? "x" : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return out;
}

bool is_string_dtype(DLDataType t) { return t.code == TSR_DL_STRING_CODE; }

/// "a sequence of float32[?]", "a string tensor [2x3]", ... for messages.
std::string value_description(const tsr_value_info& info) {
  const std::string element = (is_string_dtype(info.dtype) ? std::string("str") : tessera::tools::dl_dtype_name(info.dtype)) +
                              "[" + (info.ndim < 0 ? std::string("?") : shape_text(info.shape, info.ndim)) + "]";
  switch (info.kind) {
    case TSR_VALUE_SEQUENCE: return "a sequence of " + element;
    case TSR_VALUE_OPTIONAL_TENSOR: return "an optional " + element;
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "an optional sequence of " + element;
    default: return "a string tensor " + element;
  }
}

/// How such an input is given on the command line.
std::string value_input_form(const tsr_value_info& info) {
  switch (info.kind) {
    case TSR_VALUE_SEQUENCE: return "DIR (a folder of 0.npy, 1.npy, ...)";
    case TSR_VALUE_OPTIONAL_TENSOR: return "FILE.npy, or 'none' for an empty optional";
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "DIR (a folder of 0.npy, 1.npy, ...), or 'none' for an empty optional";
    default: return "FILE.npy (a numpy str array)";
  }
}

/// The --input arrays, in model input order. Inputs without a file are
/// random (seeded) when no --input is given or --random-inputs asks, and an
/// error otherwise: random data a user did not ask for would pass for results.
/// Each random input is named on `notes`.
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
      int64_t n = 1;
      for (int64_t d : array.shape) n *= d;
      array.data.assign(static_cast<size_t>(n) * tessera::tools::dl_dtype_size(info.dtype), 0);
      const bool f32 = info.dtype.code == kDLFloat && info.dtype.bits == 32;
      const bool f64 = info.dtype.code == kDLFloat && info.dtype.bits == 64;
      const bool bf16 = tessera::tools::is_bfloat16(info.dtype);
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
            << shape_text(info.shape, info.ndim) << "] "
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

struct Outputs {
  std::vector<DLManagedTensor*> tensors;
  ~Outputs() {
    for (DLManagedTensor* t : tensors) {
      if (t && t->deleter) t->deleter(t);
    }
  }
};

std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

/// The file name (without .npy) of each output in `dir`: its sanitized name. A tensor output is
/// written to NAME.npy, a sequence output (`is_folder`) to the folder NAME/; where two outputs would
/// take one entry of the folder (a/b and a_b; a sequence "y.npy" and a tensor "y"), the later ones
/// get ~2, ~3, ... in output order, so no output overwrites another. Each renamed one is said on
/// `notes`.
std::vector<std::string> output_file_names(const std::vector<std::string>& names, const std::vector<bool>& is_folder,
                                           std::ostream& notes) {
  const auto entry = [&](const std::string& file, size_t i) { return is_folder[i] ? file + "/" : file + ".npy"; };
  const auto entry_key = [&](const std::string& file, size_t i) { return is_folder[i] ? file : file + ".npy"; };
  std::map<std::string, std::string> owner;  // folder entry -> the output that takes it
  std::set<std::string> wanted;              // every entry some output asks for, so a suffixed one takes none
  for (size_t i = 0; i < names.size(); ++i) wanted.insert(entry_key(sanitize(names[i]), i));
  std::vector<std::string> files;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string base = sanitize(names[i]);
    std::string file = base;
    if (!owner.emplace(entry_key(file, i), names[i]).second) {
      const std::string first = owner[entry_key(base, i)];
      for (int k = 2;; ++k) {
        file = base + "~" + std::to_string(k);
        if (!wanted.count(entry_key(file, i)) && owner.emplace(entry_key(file, i), names[i]).second) break;
      }
      notes << "note: outputs '" << first << "' and '" << names[i] << "' would both be written to " << entry(base, i)
            << "; writing '" << names[i] << "' to " << entry(file, i) << "\n";
    }
    files.push_back(file);
  }
  return files;
}

std::string summarize(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  char buffer[256] = "";
  const bool bf16 = tessera::tools::is_bfloat16(t.dtype);
  if (n > 0 && (bf16 || (t.dtype.code == kDLFloat && (t.dtype.bits == 32 || t.dtype.bits == 64)))) {
    // NaN shows as NaN, never hidden by min/max (which skip it) or printed as "-nan": the min, max and
    // mean of the other values, and how many NaN there are.
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t nans = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = bf16                ? tessera::tools::bfloat16_bits_to_float(static_cast<const uint16_t*>(t.data)[i])
                 : t.dtype.bits == 32 ? static_cast<const float*>(t.data)[i]
                                      : static_cast<const double*>(t.data)[i];
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    if (nans == n) {
      std::snprintf(buffer, sizeof(buffer), " all %lld NaN", static_cast<long long>(n));
    } else {
      std::snprintf(buffer, sizeof(buffer), " min %.6g max %.6g mean %.6g", lo, hi, sum / static_cast<double>(n - nans));
      if (nans > 0) {
        std::snprintf(buffer + std::strlen(buffer), sizeof(buffer) - std::strlen(buffer), " (of the %lld values that are "
                      "not NaN; %lld NaN)", static_cast<long long>(n - nans), static_cast<long long>(nans));
      }
    }
  } else if (n > 0 && (t.dtype.code == kDLInt || t.dtype.code == kDLUInt) && t.dtype.bits == 64) {
    auto* p = static_cast<const int64_t*>(t.data);
    std::snprintf(buffer, sizeof(buffer), " first %lld", static_cast<long long>(p[0]));
  }
  return buffer;
}

void print_placement(const tsr_model* model) {
  std::map<std::string, int> per_backend;
  size_t n = tsr_model_node_count(model);
  std::cout << "placement (" << n << " nodes):\n";
  for (size_t i = 0; i < n; ++i) {
    const char *name, *op, *backend, *note, *why, *precision, *precision_note;
    int64_t region = -1;
    check(tsr_model_node_placement(model, i, &name, &op, &backend));
    check(tsr_model_node_note(model, i, &note));
    check(tsr_model_node_region(model, i, &region, &why));
    check(tsr_model_node_precision(model, i, &precision, &precision_note));
    ++per_backend[backend];
    std::cout << "  " << name << " (" << op << ") -> " << backend
              << (region >= 0 ? " (region " + std::to_string(region) + ")" : std::string())
              << (*precision ? std::string(", ") + precision : "")
              << (*precision_note ? std::string(", float32: ") + precision_note : "")
              << (*note ? std::string(", ") + note : "") << "\n";
  }
  for (const auto& [backend, count] : per_backend) std::cout << "  total on " << backend << ": " << count << "\n";
}

/// Prints where the time went: the slowest nodes and the total per op type.
void print_profile(const tsr_model* model, const std::vector<double>& node_ms, int runs) {
  struct Row {
    double ms;
    std::string name, op, backend;
  };
  std::vector<Row> rows;
  std::map<std::string, std::pair<double, int>> per_op;
  double total = 0;
  for (size_t i = 0; i < node_ms.size(); ++i) {
    const char *name, *op, *backend;
    check(tsr_model_node_placement(model, i, &name, &op, &backend));
    if (std::string(backend) == "folded") continue;
    double ms = node_ms[i] / runs;
    rows.push_back({ms, name, op, backend});
    per_op[op].first += ms;
    per_op[op].second += 1;
    total += ms;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  std::printf("profile (mean of %d run%s): %.3f ms in %zu nodes\n", runs, runs == 1 ? "" : "s", total, rows.size());
  std::printf("  by op type:\n");
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, v] : per_op) ops.emplace_back(v.first, op);
  std::sort(ops.rbegin(), ops.rend());
  for (const auto& [ms, op] : ops) {
    std::printf("    %-24s %9.3f ms %5.1f%%  (%d nodes)\n", op.c_str(), ms, total > 0 ? 100 * ms / total : 0.0,
                per_op[op].second);
  }
  std::printf("  slowest nodes:\n");
  for (size_t i = 0; i < rows.size() && i < 15; ++i) {
    std::printf("    %9.3f ms  %s (%s) on %s\n", rows[i].ms, rows[i].name.c_str(), rows[i].op.c_str(), rows[i].backend.c_str());
  }
}

/// A tsr_run_profile with its arrays, sized for the model.
struct RunProfile {
  explicit RunProfile(const tsr_model* model)
      : node_ms(tsr_model_node_count(model), 0.0), region_ms(tsr_model_region_count(model), 0.0),
        region_fallbacks(region_ms.size(), 0) {
    c.struct_size = sizeof(c);
    c.node_milliseconds = node_ms.data();
    c.num_nodes = node_ms.size();
    c.region_milliseconds = region_ms.data();
    c.num_regions = region_ms.size();
    c.region_fallbacks = region_fallbacks.data();
  }
  std::vector<double> node_ms, region_ms;
  std::vector<int64_t> region_fallbacks;
  tsr_run_profile c{};
};

tsr_region_info region_info(const tsr_model* model, size_t r) {
  tsr_region_info info{};
  info.struct_size = sizeof(info);
  check(tsr_model_region_info(model, r, &info));
  return info;
}

/// Time per region (copies between memory spaces included) and the copies made.
void print_region_profile(const tsr_model* model, const RunProfile& profile, int runs) {
  double total = 0;
  for (double ms : profile.region_ms) total += ms / runs;
  std::printf("regions (mean of %d run%s): %.3f ms in %zu regions, %lld copies (%lld bytes) per run\n", runs,
              runs == 1 ? "" : "s", total, profile.region_ms.size(), static_cast<long long>(profile.c.copies / runs),
              static_cast<long long>(profile.c.copy_bytes / runs));
  for (size_t r = 0; r < profile.region_ms.size(); ++r) {
    tsr_region_info info = region_info(model, r);
    std::printf("  region %-3zu %-8s %-12s %5zu nodes %4zu in %4zu out %9.3f ms\n", r, info.backend, info.memory_space,
                info.node_count, info.input_count, info.output_count, profile.region_ms[r] / runs);
    if (profile.region_fallbacks[r]) {
      std::printf("  region %zu: non-finite input, ran on native (%lld of %d run%s)\n", r,
                  static_cast<long long>(profile.region_fallbacks[r]), runs, runs == 1 ? "" : "s");
    }
  }
}

std::string report_text(const tsr_model* model, const char* format, const std::string& name,
                        const tsr_run_profile* profile = nullptr) {
  char* text = nullptr;
  check(tsr_model_report(model, format, name.c_str(), profile, &text));
  std::string out = text;
  tsr_string_free(text);
  return out;
}

/// Writes `text` to `path` through safe_file (a temporary file renamed over a regular file only).
void write_text_file(const std::string& path, const std::string& text) {
  tessera::safe_file::replace_file(path, [&](const tessera::safe_file::Sink& sink) { sink(text.data(), text.size()); });
}

/// The folder --output-dir names, created if missing and held open, so that
/// each output is written inside it by name (see safe_file.h).
struct OutputFolder {
  explicit OutputFolder(const std::string& path) : path(path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) throw CliError("cannot create --output-dir '" + path + "': " + ec.message());
    fd = tessera::safe_file::open_directory(path);
  }
  ~OutputFolder() { ::close(fd); }
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  std::string path;
  int fd = -1;
};

/// The report format a file name asks for: .json, .dot, .html/.htm, else the text table.
const char* format_for(const std::string& path) {
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (ends_with(".json")) return "json";
  if (ends_with(".dot") || ends_with(".gv")) return "dot";
  if (ends_with(".html") || ends_with(".htm")) return "html";
  return "table";
}

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

int command_compile(const Args& args) {
  ModelHandle handle;
  load_model(args, {}, handle);
  check(tsr_model_save(handle.model, args.output.c_str()));
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(args.output, ec);
  std::printf("wrote %s (%llu bytes): %zu regions\n", args.output.c_str(), static_cast<unsigned long long>(ec ? 0 : bytes),
              tsr_model_region_count(handle.model));
  for (size_t r = 0; r < tsr_model_region_count(handle.model); ++r) {
    tsr_region_info info = region_info(handle.model, r);
    std::printf("  region %-3zu %-8s %5zu nodes, payload %zu bytes\n", r, info.backend, info.node_count, info.payload_bytes);
  }
  if (!args.report_file.empty()) {
    write_text_file(args.report_file, report_text(handle.model, format_for(args.report_file), file_name(args.model)));
    std::printf("report: %s\n", args.report_file.c_str());
  }
  return 0;
}

int command_partition(const Args& args) {
  ModelHandle handle;
  load_model(args, {}, handle);
  const std::string name = file_name(args.model);
  std::cout << report_text(handle.model, "table", name);
  const std::pair<const std::string*, const char*> files[] = {
      {&args.json_file, "json"}, {&args.dot_file, "dot"}, {&args.html_file, "html"}};
  for (const auto& [path, format] : files) {
    if (path->empty()) continue;
    write_text_file(*path, report_text(handle.model, format, name));
    std::cout << format << ": " << *path << "\n";
  }
  return 0;
}

/// A progress bar on stderr, redrawn in place on a terminal, a line per phase otherwise.
void draw_progress(void* user, const char* phase, int64_t done, int64_t total) {
  auto* last_phase = static_cast<std::string*>(user);
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!tty && done != total) return;
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
  std::cerr << (tty ? "\r" : "") << phase << " [" << std::string(static_cast<size_t>(filled), '#')
            << std::string(static_cast<size_t>(width - filled), '.') << "] " << done << "/" << total;
  if (done == total) std::cerr << "\n";
  std::cerr.flush();
  *last_phase = phase;
}

/// The calibration samples of DIR, each as one array per model input (in input order).
std::vector<std::vector<NpyArray>> read_calibration_dir(const std::string& dir, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw CliError("--calibration: '" + dir + "' is not a folder");
  std::vector<fs::path> files, folders;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory()) folders.push_back(entry.path());
    else if (entry.path().extension() == ".npy") files.push_back(entry.path());
  }
  if (ec) throw CliError("--calibration: cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  std::sort(folders.begin(), folders.end());
  std::vector<std::vector<NpyArray>> samples;
  if (!files.empty() && !folders.empty()) {
    throw CliError("--calibration: '" + dir + "' holds both .npy files and folders; use one layout (DIR/*.npy or DIR/SAMPLE/INPUT.npy)");
  }
  if (!files.empty()) {
    if (inputs.size() != 1) {
      throw CliError("--calibration: the model has " + std::to_string(inputs.size()) +
                     " inputs, so each sample is a folder DIR/SAMPLE/ holding INPUT_NAME.npy for each input");
    }
    for (const fs::path& f : files) samples.push_back({tessera::tools::read_npy(f.string())});
  }
  for (const fs::path& folder : folders) {
    std::vector<NpyArray> sample;
    for (const std::string& name : inputs) {
      const fs::path f = folder / (name + ".npy");
      if (!fs::exists(f, ec)) throw CliError("--calibration: sample '" + folder.string() + "' has no " + name + ".npy");
      sample.push_back(tessera::tools::read_npy(f.string()));
    }
    samples.push_back(std::move(sample));
  }
  if (samples.empty()) throw CliError("--calibration: '" + dir + "' holds no .npy file and no sample folder");
  return samples;
}

int command_quantize(const Args& args) {
  tsr_options* options = nullptr;
  check(tsr_options_create(&options));
  std::unique_ptr<tsr_options, void (*)(tsr_options*)> guard(options, tsr_options_free);
  check(tsr_options_set_threads(options, args.threads));
  if (!args.backends.empty()) check(tsr_options_set_backends(options, args.backends.c_str()));
  for (const std::string& p : args.place) check(tsr_options_add_placement(options, p.c_str()));
  for (const std::string& d : args.deny) check(tsr_options_add_denial(options, d.c_str()));
  for (const auto& [name, dims] : args.shapes) check(tsr_options_set_input_shape(options, name.c_str(), dims.data(), dims.size()));
  std::string last_phase;
  tsr_quantize_config config{};
  config.struct_size = sizeof(config);
  config.method = args.method.empty() ? nullptr : args.method.c_str();
  config.percentile = args.percentile;
  config.per_channel = args.per_channel ? 1 : 0;
  config.exclude = args.exclude.empty() ? nullptr : args.exclude.c_str();
  config.random_samples = args.random_samples;
  config.seed = args.seed;
  config.progress = draw_progress;
  config.progress_user = &last_phase;
  tsr_quantizer* raw = nullptr;
  check(tsr_quantizer_create(args.model.c_str(), options, &config, &raw));
  std::unique_ptr<tsr_quantizer, void (*)(tsr_quantizer*)> quantizer(raw, tsr_quantizer_free);
  if (!args.calibration_dir.empty()) {
    tsr_source* source = nullptr;
    check(tsr_source_load(args.model.c_str(), options, &source));
    std::unique_ptr<tsr_source, void (*)(tsr_source*)> source_guard(source, tsr_source_free);
    std::vector<std::string> names;
    for (size_t i = 0; i < tsr_source_input_count(source); ++i) {
      tsr_value_info info{};
      info.struct_size = sizeof(info);
      check(tsr_source_input_info(source, i, &info));
      names.push_back(info.name);
    }
    std::vector<std::vector<NpyArray>> samples = read_calibration_dir(args.calibration_dir, names);
    for (auto& sample : samples) {
      std::vector<DLTensor> tensors = as_dl(sample);
      check(tsr_quantizer_add_sample(quantizer.get(), tensors.data(), tensors.size()));
    }
  }
  char* summary = nullptr;
  check(tsr_quantizer_write(quantizer.get(), args.output.c_str(), &summary));
  std::cout << "wrote " << args.output << "\n" << summary;
  tsr_string_free(summary);
  return 0;
}

/// Measured placement: times candidates and writes the tuning record (tsr_tune).
int command_tune(const Args& args) {
  OptionsHandle options = placement_options(args);
  std::string last_phase;
  tsr_tune_config config{};
  config.struct_size = sizeof(config);
  config.budget_seconds = args.budget;
  config.progress = draw_progress;
  config.progress_user = &last_phase;
  char* summary = nullptr;
  check(tsr_tune(args.model.c_str(), options.get(), &config, args.output.c_str(), &summary));
  std::cout << summary << "wrote " << args.output << " (apply it with --tuning " << args.output << ")\n";
  tsr_string_free(summary);
  return 0;
}

int command_backends() {
  std::cout << "backends, highest priority first:\n";
  const size_t count = tsr_backend_count();
  for (size_t i = 0; i < count; ++i) {
    tsr_backend_details d{};
    d.struct_size = sizeof(d);
    check(tsr_backend_get_details(i, &d));
    std::printf("  %-20s version %-4s %s%s%s\n", d.name, d.version, d.description,
                d.used_by_default ? "" : " (only when named with --backends)", d.is_fallback ? " (the fallback)" : "");
    if (*d.plugin_path) std::printf("  %-20s plug-in %s (ABI %s)\n", "", d.plugin_path, d.plugin_abi);
  }
  return 0;
}

void write_npy_at(int folder_fd, const std::string& folder_path, const std::string& file_base, const NpyArray& a) {
  const std::string name = file_base + ".npy";
  const std::string path = (std::filesystem::path(folder_path) / name).string();
  const std::string bytes = tessera::tools::encode_npy(a, path);
  tessera::safe_file::replace_file_at(folder_fd, name, path, [&](const tessera::safe_file::Sink& sink) {
    sink(bytes.data(), bytes.size());
  });
  std::cout << " -> " << path;
}

/// Prints a tensor output's dtype, shape and summary and, with a folder, writes
/// it to FILE_BASE.npy there (bfloat16 as float32 or bit patterns).
void emit_tensor(const Args& args, const DLTensor& t, int folder_fd, const std::string& folder_path,
                 const std::string& file_base) {
  std::cout << tessera::tools::dl_dtype_name(t.dtype) << "[" << shape_text(t.shape, t.ndim) << "]" << summarize(t);
  if (folder_fd < 0) return;
  NpyArray a;
  a.dtype = t.dtype;
  a.shape.assign(t.shape, t.shape + t.ndim);
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  const auto* p = static_cast<const unsigned char*>(t.data);
  a.data.assign(p, p + static_cast<size_t>(n) * tessera::tools::dl_dtype_size(t.dtype));
  if (tessera::tools::is_bfloat16(a.dtype)) {
    a = tessera::tools::from_bfloat16(a, args.bfloat16_bits);  // .npy has no bfloat16
    std::cout << (args.bfloat16_bits ? " (as uint16 bit patterns)" : " (as float32, exactly)");
  }
  write_npy_at(folder_fd, folder_path, file_base, a);
}

/// Accuracy region by region (tsr_model_check): the table on stdout, JSON to
/// --json FILE; exit 2 when a region is over its tolerance.
int command_check(const Args& args) {
  ModelHandle handle;
  std::map<std::string, NpyArray> files = read_input_files(args);
  load_model(args, files, handle);
  std::vector<NpyArray> arrays = make_inputs(args, files, handle.model, std::cout);
  std::vector<DLTensor> inputs = as_dl(arrays);
  const std::string name = file_name(args.model);
  size_t flagged = 0;
  char* table = nullptr;
  char* json = nullptr;
  char* html = nullptr;
  check(tsr_model_check(handle.model, inputs.data(), inputs.size(), args.tolerance, args.min_cosine,
                        args.float64_reference ? 1 : 0, name.c_str(), &table, args.json_file.empty() ? nullptr : &json,
                        args.html_file.empty() ? nullptr : &html, &flagged));
  const std::string table_text = table, json_text = json ? json : "", html_text = html ? html : "";
  tsr_string_free(table);
  tsr_string_free(json);
  tsr_string_free(html);
  std::cout << table_text;
  if (!args.json_file.empty()) {
    write_text_file(args.json_file, json_text);
    std::cout << "json: " << args.json_file << "\n";
  }
  if (!args.html_file.empty()) {
    write_text_file(args.html_file, html_text);
    std::cout << "html: " << args.html_file << "\n";
  }
  return flagged ? 2 : 0;
}

using ValuePtr = std::unique_ptr<tsr_value, void (*)(tsr_value*)>;

ValuePtr own(tsr_value* v) { return ValuePtr(v, tsr_value_free); }

/// A tensor value of a numeric or string .npy array.
ValuePtr value_of_array(NpyArray& a) {
  tsr_value* v = nullptr;
  if (a.is_string) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lengths;
    for (const std::string& text : a.strings) {
      ptrs.push_back(text.data());
      lengths.push_back(text.size());
    }
    check(tsr_value_create_strings(ptrs.data(), lengths.data(), a.shape.data(), static_cast<int32_t>(a.shape.size()), &v));
  } else {
    const DLTensor t = dl_view(a);
    check(tsr_value_create_tensor(&t, &v));
  }
  return own(v);
}

/// A sequence from a folder holding exactly 0.npy, 1.npy, ..., N-1.npy (N may be 0).
ValuePtr sequence_of_folder(const std::string& dir, const std::string& what) {
  std::map<int64_t, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string stem = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0 ? name.substr(0, name.size() - 4) : "";
    const bool digits = !stem.empty() && stem.size() <= 9 && stem.find_first_not_of("0123456789") == std::string::npos &&
                        (stem == "0" || stem[0] != '0');
    if (!digits) throw CliError(what + ": " + dir + " holds '" + name + "'; a sequence folder holds only 0.npy, 1.npy, ...");
    files[std::stoll(stem)] = entry.path().string();
  }
  std::vector<ValuePtr> items;
  int64_t expected = 0;
  for (auto& [index, path] : files) {
    if (index != expected) throw CliError(what + ": " + dir + " has no " + std::to_string(expected) + ".npy (the files must be numbered from 0 without gaps)");
    NpyArray a = tessera::tools::read_npy(path);
    items.push_back(value_of_array(a));
    ++expected;
  }
  std::vector<const tsr_value*> raw;
  for (const ValuePtr& item : items) raw.push_back(item.get());
  tsr_value* v = nullptr;
  check(tsr_value_create_sequence(raw.data(), raw.size(), &v));
  return own(v);
}

/// Every input as a value: tensors from make_inputs' arrays, sequences from
/// folders, optionals from a file, a folder or 'none', strings from str .npy files.
std::vector<ValuePtr> make_value_inputs(const Args& args, std::vector<NpyArray>& arrays, const tsr_model* model) {
  std::vector<ValuePtr> values;
  for (size_t i = 0; i < tsr_model_input_count(model); ++i) {
    const tsr_value_info info = input_info(model, i);
    const std::string what = "input '" + std::string(info.name) + "'";
    auto given = args.inputs.find(info.name);
    if (info.kind == TSR_VALUE_TENSOR && !is_string_dtype(info.dtype)) {
      values.push_back(value_of_array(arrays[i]));
      continue;
    }
    const std::string& spec = given->second;  // make_inputs made sure it is given
    const bool optional = info.kind == TSR_VALUE_OPTIONAL_TENSOR || info.kind == TSR_VALUE_OPTIONAL_SEQUENCE;
    const bool sequence = info.kind == TSR_VALUE_SEQUENCE || info.kind == TSR_VALUE_OPTIONAL_SEQUENCE;
    if (spec == "none") {
      if (!optional) throw CliError(what + " is " + value_description(info) + ", which cannot be 'none'");
      tsr_value* v = nullptr;
      check(tsr_value_create_optional(nullptr, static_cast<tsr_value_kind>(info.kind), &v));
      values.push_back(own(v));
      continue;
    }
    ValuePtr content = own(nullptr);
    if (sequence) {
      if (!std::filesystem::is_directory(spec)) throw CliError(what + " is " + value_description(info) + "; give a folder of 0.npy, 1.npy, ..., not '" + spec + "'");
      content = sequence_of_folder(spec, what);
    } else {
      if (std::filesystem::is_directory(spec)) throw CliError(what + " is " + value_description(info) + "; give a .npy file, not the folder '" + spec + "'");
      NpyArray a = tessera::tools::read_npy(spec);
      if (is_string_dtype(info.dtype) != a.is_string) {
        throw CliError(what + ": " + spec + " holds " + (a.is_string ? "str" : tessera::tools::dl_dtype_name(a.dtype)) +
                       ", the model expects " + (is_string_dtype(info.dtype) ? "str" : tessera::tools::dl_dtype_name(info.dtype)));
      }
      content = value_of_array(a);
    }
    if (optional) {
      tsr_value* v = nullptr;
      check(tsr_value_create_optional(content.get(), static_cast<tsr_value_kind>(info.kind), &v));
      content = own(v);
    }
    values.push_back(std::move(content));
  }
  return values;
}

/// True when an input or output is a sequence, an optional or a string tensor (tsr_model_run_values runs it).
bool needs_values(const tsr_model* model) {
  for (size_t i = 0; i < tsr_model_input_count(model); ++i) {
    const tsr_value_info info = input_info(model, i);
    if (info.kind != TSR_VALUE_TENSOR || is_string_dtype(info.dtype)) return true;
  }
  for (size_t i = 0; i < tsr_model_output_count(model); ++i) {
    const tsr_value_info info = output_info(model, i);
    if (info.kind != TSR_VALUE_TENSOR || is_string_dtype(info.dtype)) return true;
  }
  return false;
}

/// Prints (and with a folder writes) the index-th tensor of a value: numeric as emit_tensor, strings as a str .npy.
void emit_value_tensor(const Args& args, const tsr_value* value, size_t index, int folder_fd, const std::string& folder_path,
                       const std::string& file_base) {
  const DLTensor* t = nullptr;
  check(tsr_value_tensor(value, index, &t));
  if (!is_string_dtype(t->dtype)) return emit_tensor(args, *t, folder_fd, folder_path, file_base);
  int64_t n = 1;
  for (int k = 0; k < t->ndim; ++k) n *= t->shape[k];
  std::vector<std::string> strings;
  for (int64_t e = 0; e < n; ++e) {
    const char* bytes = nullptr;
    size_t length = 0;
    check(tsr_value_string(value, index, e, &bytes, &length));
    strings.emplace_back(bytes, length);
  }
  std::cout << "str[" << shape_text(t->shape, t->ndim) << "]";
  for (int64_t e = 0; e < n && e < 4; ++e) std::cout << (e ? ", " : " ") << '"' << strings[static_cast<size_t>(e)] << '"';
  if (n > 4) std::cout << ", ...";
  if (folder_fd >= 0) {
    size_t invalid = 0;
    for (const std::string& s : strings) invalid += !tessera::tools::is_valid_utf8(s);
    NpyArray array = tessera::tools::make_string_array(std::vector<int64_t>(t->shape, t->shape + t->ndim), std::move(strings));
    // A model may make any bytes; numpy's str holds code points. Kept exactly, as Python keeps such bytes.
    array.escape_invalid_utf8 = true;
    write_npy_at(folder_fd, folder_path, file_base, array);
    if (invalid > 0) {
      std::cout << " (" << invalid << " string" << (invalid == 1 ? " is" : "s are")
                << " not valid UTF-8: each such byte written as U+DC80 + byte, Python's surrogateescape; "
                   "s.encode('utf-8', 'surrogateescape') gives the bytes back)";
    }
  }
}

/// run for a model with sequences, optionals or strings: values in and out.
/// A sequence output is written as a folder NAME/ of 0.npy, 1.npy, ...; an empty optional writes nothing.
void run_values(const Args& args, const tsr_model* model, std::vector<NpyArray>& arrays) {
  std::vector<ValuePtr> inputs = make_value_inputs(args, arrays, model);
  std::vector<const tsr_value*> raw;
  for (const ValuePtr& v : inputs) raw.push_back(v.get());
  const size_t n_out = tsr_model_output_count(model);
  std::vector<tsr_value*> made(n_out, nullptr);
  check(tsr_model_run_values(model, raw.data(), raw.size(), made.data(), n_out));
  std::vector<ValuePtr> outputs;
  for (tsr_value* v : made) outputs.push_back(own(v));
  std::unique_ptr<OutputFolder> folder;
  std::vector<std::string> file_names;
  if (!args.output_dir.empty()) {
    folder = std::make_unique<OutputFolder>(args.output_dir);
    std::vector<std::string> names;
    std::vector<bool> is_folder;
    for (size_t i = 0; i < n_out; ++i) {
      names.push_back(output_info(model, i).name);
      int32_t kind = 0, present = 0;
      size_t count = 0;
      check(tsr_value_describe(outputs[i].get(), &kind, &present, &count));
      is_folder.push_back(kind != TSR_VALUE_TENSOR && kind != TSR_VALUE_OPTIONAL_TENSOR);  // a sequence: a folder
    }
    file_names = output_file_names(names, is_folder, std::cout);
  }
  for (size_t i = 0; i < n_out; ++i) {
    const tsr_value_info info = output_info(model, i);
    int32_t kind = 0, present = 0;
    size_t count = 0;
    check(tsr_value_describe(outputs[i].get(), &kind, &present, &count));
    std::cout << "output " << info.name << ": ";
    if (!present) {
      std::cout << "empty optional (nothing written)\n";
      continue;
    }
    if (kind == TSR_VALUE_TENSOR || kind == TSR_VALUE_OPTIONAL_TENSOR) {
      emit_value_tensor(args, outputs[i].get(), 0, folder ? folder->fd : -1, args.output_dir, file_names.empty() ? "" : file_names[i]);
      std::cout << "\n";
      continue;
    }
    std::cout << "sequence of " << count << " tensor" << (count == 1 ? "" : "s");
    int sub_fd = -1;
    std::string sub_path;
    if (folder) {
      sub_path = (std::filesystem::path(args.output_dir) / file_names[i]).string();
      if (::mkdirat(folder->fd, file_names[i].c_str(), 0777) != 0 && errno != EEXIST) {
        throw CliError("cannot create " + sub_path + ": " + std::strerror(errno));
      }
      sub_fd = ::openat(folder->fd, file_names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub_fd < 0) throw CliError("cannot open " + sub_path + " as a folder: " + std::strerror(errno));
      std::cout << " -> " << sub_path << "/";
    }
    std::cout << "\n";
    for (size_t k = 0; k < count; ++k) {
      std::cout << "  [" << k << "] ";
      emit_value_tensor(args, outputs[i].get(), k, sub_fd, sub_path, std::to_string(k));
      std::cout << "\n";
    }
    if (sub_fd >= 0) {
      // Files of a longer sequence written there before would read as part of this one.
      for (size_t k = count; ::unlinkat(sub_fd, (std::to_string(k) + ".npy").c_str(), 0) == 0; ++k) {
      }
      ::close(sub_fd);
    }
  }
}

int command_run(const Args& args) {
  ModelHandle handle;
  std::map<std::string, NpyArray> files = read_input_files(args);
  load_model(args, files, handle);
  std::vector<NpyArray> arrays = make_inputs(args, files, handle.model, std::cout);
  if (needs_values(handle.model)) {
    if (args.profile) throw CliError("--profile is not available for models with sequence, optional or string inputs or outputs yet");
    run_values(args, handle.model, arrays);
    if (args.placement) print_placement(handle.model);
    if (!args.report_file.empty()) {
      write_text_file(args.report_file, report_text(handle.model, format_for(args.report_file), file_name(args.model), nullptr));
      std::cout << "report: " << args.report_file << "\n";
    }
    return 0;
  }
  std::vector<DLTensor> inputs = as_dl(arrays);
  Outputs outputs;
  size_t n_out = tsr_model_output_count(handle.model);
  outputs.tensors.assign(n_out, nullptr);
  RunProfile profile(handle.model);
  if (args.profile) {
    check(tsr_model_run_with_profile(handle.model, inputs.data(), inputs.size(), outputs.tensors.data(), n_out,
                                     &profile.c));
  } else {
    check(tsr_model_run_alloc(handle.model, inputs.data(), inputs.size(), outputs.tensors.data(), n_out));
  }
  std::unique_ptr<OutputFolder> folder;
  std::vector<std::string> file_names;
  if (!args.output_dir.empty()) {
    folder = std::make_unique<OutputFolder>(args.output_dir);
    std::vector<std::string> names;
    for (size_t i = 0; i < n_out; ++i) names.push_back(output_info(handle.model, i).name);
    file_names = output_file_names(names, std::vector<bool>(n_out, false), std::cout);
  }
  for (size_t i = 0; i < n_out; ++i) {
    tsr_value_info info = output_info(handle.model, i);
    std::cout << "output " << info.name << ": ";
    emit_tensor(args, outputs.tensors[i]->dl_tensor, folder ? folder->fd : -1, args.output_dir, file_names.empty() ? "" : file_names[i]);
    std::cout << "\n";
  }
  if (args.placement) print_placement(handle.model);
  if (args.profile) {
    print_region_profile(handle.model, profile, 1);
    print_profile(handle.model, profile.node_ms, 1);
  }
  if (!args.report_file.empty()) {
    write_text_file(args.report_file, report_text(handle.model, format_for(args.report_file), file_name(args.model),
                                                  args.profile ? &profile.c : nullptr));
    std::cout << "report: " << args.report_file << "\n";
  }
  return 0;
}

int command_info(const Args& args) {
  ModelHandle handle;
  load_model(args, {}, handle);
  const tsr_model* model = handle.model;
  std::cout << "model: " << args.model << "\n";
  for (size_t i = 0; i < tsr_model_metadata_count(model); ++i) {
    const char *key, *value;
    check(tsr_model_metadata(model, i, &key, &value));
    std::string text = value;
    if (text.size() > 120) text = text.substr(0, 117) + "...";
    std::cout << "metadata " << key << ": " << text << "\n";
  }
  auto describe = [](const tsr_value_info& info) {
    if (info.kind != TSR_VALUE_TENSOR || is_string_dtype(info.dtype)) return value_description(info);
    return tessera::tools::dl_dtype_name(info.dtype) + "[" + shape_text(info.shape, info.ndim) + "]";
  };
  for (size_t i = 0; i < tsr_model_input_count(model); ++i) std::cout << "input  " << input_info(model, i).name << ": " << describe(input_info(model, i)) << "\n";
  for (size_t i = 0; i < tsr_model_output_count(model); ++i) std::cout << "output " << output_info(model, i).name << ": " << describe(output_info(model, i)) << "\n";
  std::map<std::string, int> histogram;
  std::map<std::string, int> per_backend;
  for (size_t i = 0; i < tsr_model_node_count(model); ++i) {
    const char *op, *backend;
    check(tsr_model_node_placement(model, i, nullptr, &op, &backend));
    ++histogram[op];
    ++per_backend[backend];
  }
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [op, count] : histogram) sorted.emplace_back(-count, op);
  std::sort(sorted.begin(), sorted.end());
  std::cout << "nodes: " << tsr_model_node_count(model);
  bool first = true;
  for (const auto& [backend, count] : per_backend) {
    std::cout << (first ? " (" : ", ") << count << (backend == "folded" ? " folded at compile time" : " on " + backend);
    first = false;
  }
  std::cout << (first ? "" : ")") << "\n";
  for (const auto& [count, op] : sorted) std::cout << "  " << op << ": " << -count << "\n";
  std::cout << "parameters: " << tsr_model_parameter_count(model) << "\n";
  std::cout << "constant bytes: " << tsr_model_constant_bytes(model) << "\n";
  std::cout << "arena bytes (peak per run): " << tsr_model_arena_bytes(model) << "\n";
  int64_t copies = 0, copy_bytes = 0;
  check(tsr_model_copies_per_run(model, &copies, &copy_bytes));
  std::cout << "regions: " << tsr_model_region_count(model) << " (copies between memory spaces per run: " << copies
            << ", " << copy_bytes << " bytes)\n";
  for (size_t r = 0; r < tsr_model_region_count(model); ++r) {
    tsr_region_info info = region_info(model, r);
    std::printf("  region %-3zu %-8s %-12s %5zu nodes %4zu in %4zu out\n", r, info.backend, info.memory_space,
                info.node_count, info.input_count, info.output_count);
  }
  return 0;
}

int command_bench(const Args& args) {
  ModelHandle handle;
  std::map<std::string, NpyArray> files = read_input_files(args);
  load_model(args, files, handle);
  std::vector<NpyArray> arrays = make_inputs(args, files, handle.model, std::cerr);  // stdout may be --json
  std::vector<DLTensor> inputs = as_dl(arrays);
  size_t n_out = tsr_model_output_count(handle.model);
  std::vector<double> times;
  for (int i = 0; i < args.warmup + args.iterations; ++i) {
    Outputs outputs;
    outputs.tensors.assign(n_out, nullptr);
    auto start = std::chrono::steady_clock::now();
    check(tsr_model_run_alloc(handle.model, inputs.data(), inputs.size(), outputs.tensors.data(), n_out));
    auto end = std::chrono::steady_clock::now();
    if (i >= args.warmup) times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  if (args.profile) {  // separate runs, so that timing each node does not disturb the latencies above
    RunProfile profile(handle.model);
    for (int i = 0; i < args.iterations; ++i) {
      Outputs outputs;
      outputs.tensors.assign(n_out, nullptr);
      check(tsr_model_run_with_profile(handle.model, inputs.data(), inputs.size(), outputs.tensors.data(), n_out,
                                       &profile.c));
    }
    print_region_profile(handle.model, profile, args.iterations);
    print_profile(handle.model, profile.node_ms, args.iterations);
  }
  std::sort(times.begin(), times.end());
  auto pct = [&](double p) {
    double pos = p * static_cast<double>(times.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, times.size() - 1);
    return times[lo] + (times[hi] - times[lo]) * (pos - static_cast<double>(lo));
  };
  if (args.json) {
    std::printf("{\"model\": \"%s\", \"threads\": %d, \"warmup\": %d, \"iterations\": %d, \"median_ms\": %.4f, "
                "\"p10_ms\": %.4f, \"p90_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f}\n",
                args.model.c_str(), args.threads, args.warmup, args.iterations, pct(0.5), pct(0.1), pct(0.9),
                times.front(), times.back());
  } else {
    std::printf("%s: threads %d, %d iterations: median %.3f ms, p10 %.3f ms, p90 %.3f ms\n", args.model.c_str(),
                args.threads, args.iterations, pct(0.5), pct(0.1), pct(0.9));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::cli::apply_omp_wait_defaults(argv);
  try {
    Args args = parse_args(argc, argv);
    for (const std::string& plugin : args.plugins) check(tsr_load_backend_plugin(plugin.c_str(), nullptr));
    if (args.command == "run") return command_run(args);
    if (args.command == "info") return command_info(args);
    if (args.command == "bench") return command_bench(args);
    if (args.command == "compile") return command_compile(args);
    if (args.command == "partition") return command_partition(args);
    if (args.command == "check") return command_check(args);
    if (args.command == "quantize") return command_quantize(args);
    if (args.command == "tune") return command_tune(args);
    if (args.command == "backends") return command_backends();
    throw CliError("unknown command '" + args.command + "'\n" + kUsage);
  } catch (const std::exception& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 1;
  }
}
