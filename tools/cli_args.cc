// The command line's usage text and its parsing into Args (every option, checked).
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
#include <sstream>
#include <string>
#include <vector>

#include "npy.h"
#include "safe_file.h"
#include "tessera/tessera.h"

#include "cli.h"

namespace tessera::cli {

const char* const kUsage =
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
    "              [--percentile P] [--per-channel] [--weights-only] [--exclude NODES] [--input-shape NAME=DIMS ...] [--threads N] [--seed S]\n"
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
    "              A model with open dims is tuned as one plan for every shape, measured at the sizes\n"
    "              --input-shape gives; its record applies with the dims open or bound.\n"
    "  tessera backends\n"
    "  tessera serve --model-repository DIR [--http-port N] [--grpc-port N] [--metrics-port N] ...\n"
    "              the Open Inference Protocol server (REST, gRPC, /metrics) over a Triton-layout model\n"
    "              repository: DIR/MODEL/[config.pbtxt]/VERSION/model.{tsr,onnx}; tessera serve --help\n"
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
    "--input-values NAME=VALUE (repeatable; ONNX models): fixes a one-element input's value at compile time, so\n"
    "what depends on it folds (an If on it takes its branch then); each run checks that the value fed is that one.\n"
    "--dim NAME=MIN..MAX (also --dim-bounds; repeatable): bounds an open dim by name (ONNX dim_param): each run\n"
    "checks the inputs against it, and working memory is sized once for the upper bounds (ONNX models and .tsr\n"
    "artifacts alike).\n"
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

namespace {

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

}  // namespace

namespace {

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

}  // namespace

namespace {

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

}  // namespace

namespace {

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) throw CliError(option + " expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

/// The C API option a flag sets ("--min-region-size" -> "min_region_size"), or "" when it names none.
std::string c_option_name(const std::string& flag) {
  if (flag.size() < 3 || flag.compare(0, 2, "--") != 0) return "";
  std::string name = flag.substr(2);
  for (char& c : name) {
    if (c == '-') c = '_';
    else if (c == '_') return "";  // flags are spelled with '-'
  }
  if (name == "dim") return "dim_bounds";  // --dim NAME=MIN..MAX, the short spelling
  std::istringstream names(tsr_option_names());
  for (std::string known; std::getline(names, known, ',');) {
    if (known == name) return name;
  }
  return "";
}

}  // namespace

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
    } else if (a == "--weights-only" && args.command == "quantize") {
      args.weights_only = true;
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
    } else if (a == "--backend-plugin") {
      args.plugins.push_back(value());
    } else if (a == "--budget" && args.command == "tune") {
      args.budget = parse_number(value(), a, 0.001, 1e6);
    } else if (a == "--strict") {
      args.settings.emplace_back("strict", "1");
    } else if (const std::string name = c_option_name(a);
               !name.empty() && name != "threads" && name != "freeze_weights" &&
               !(name == "tuning" && (args.command == "tune" || args.command == "quantize")) &&
               !(name == "precision" && args.command == "quantize")) {
      // --threads has its own parse (the CLI reads it too); freeze_weights is --keep-weights-as-inputs;
      // tune measures placements itself, and quantize calibrates in float32.
      args.settings.emplace_back(name, value());
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

}  // namespace tessera::cli
