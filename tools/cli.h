// The tessera command line's shared types and helpers (tools/cli_*.cc; main in tessera_main.cc).
// Built on the C API only. Each cli_*.cc holds one seam: arguments, inputs, outputs, run, the
// other commands.
#pragma once
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

namespace tessera::cli {

using tessera::tools::NpyArray;

struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
  std::vector<std::string> plugins;  // --backend-plugin, in order
  /// The C API's options by name (tsr_option_names: --backends, --place, --deny, --min-region-size,
  /// --strict, --precision, --tuning, ...), in the order given, as tsr_options_set takes them.
  std::vector<std::pair<std::string, std::string>> settings;
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
  bool weights_only = false;  // quantize --weights-only
  std::string exclude;  // comma-separated; repeated --exclude options are joined
  // tune
  double budget = 0;       // --budget SECONDS (0: the library's default)
};

struct ModelHandle {
  tsr_model* model = nullptr;
  ~ModelHandle() { tsr_model_free(model); }
};

/// Loads the model. Inputs given as files bind their shape from the file
/// (so a model with symbolic dims runs on whatever the files hold), unless
/// --input-shape names them explicitly.
using OptionsHandle = std::unique_ptr<tsr_options, void (*)(tsr_options*)>;

struct Outputs {
  std::vector<DLManagedTensor*> tensors;
  ~Outputs() {
    for (DLManagedTensor* t : tensors) {
      if (t && t->deleter) t->deleter(t);
    }
  }
};

/// A tsr_run_profile with its arrays, sized for the model.
struct RunProfile {
  explicit RunProfile(const tsr_model* model)
      : node_ms(tsr_model_node_count(model), 0.0), region_ms(tsr_model_region_count(model), 0.0),
        region_fallbacks(region_ms.size(), 0),
        inner_ms(tsr_model_inner_node_count(model), 0.0) {
    c.struct_size = sizeof(c);
    c.inner_node_milliseconds = inner_ms.empty() ? nullptr : inner_ms.data();
    c.num_inner_nodes = inner_ms.size();
    c.node_milliseconds = node_ms.data();
    c.num_nodes = node_ms.size();
    c.region_milliseconds = region_ms.data();
    c.num_regions = region_ms.size();
    c.region_fallbacks = region_fallbacks.data();
  }
  std::vector<double> node_ms, region_ms;
  std::vector<int64_t> region_fallbacks;
  std::vector<double> inner_ms;  // per node inside compiled control-flow bodies (tsr_model_inner_node)
  tsr_run_profile c{};
};

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

using ValuePtr = std::unique_ptr<tsr_value, void (*)(tsr_value*)>;

inline ValuePtr own(tsr_value* v) { return ValuePtr(v, tsr_value_free); }

void check(tsr_status* status);

extern const char* const kUsage;

Args parse_args(int argc, char** argv);

/// Reads every --input file (once), by input name.
std::map<std::string, NpyArray> read_input_files(const Args& args);

/// The placement options every command shares (threads, backends, --place, --deny, precision, tuning).
OptionsHandle placement_options(const Args& args, bool with_shapes = true);

void load_model(const Args& args, const std::map<std::string, NpyArray>& files, ModelHandle& handle);

tsr_value_info input_info(const tsr_model* model, size_t i);

tsr_value_info output_info(const tsr_model* model, size_t i);

std::string shape_text(const int64_t* shape, int ndim);

bool is_string_dtype(DLDataType t);

/// "a sequence of float32[any rank]", "a string tensor [2x3]", ... for messages.
std::string value_description(const tsr_value_info& info);

/// The --input arrays, in model input order. Inputs without a file are
/// random (seeded) when no --input is given or --random-inputs asks, and an
/// error otherwise: random data a user did not ask for would pass for results.
/// Each random input is named on `notes`.
std::vector<NpyArray> make_inputs(const Args& args, std::map<std::string, NpyArray>& files, const tsr_model* model,
                                  std::ostream& notes);

/// A numeric array as a DLTensor over its own bytes (no copy).
DLTensor dl_view(NpyArray& a);

std::vector<DLTensor> as_dl(std::vector<NpyArray>& arrays);

/// The file name (without .npy) of each output in `dir`: its sanitized name. A tensor output is
/// written to NAME.npy, a sequence output (`is_folder`) to the folder NAME/; where two outputs would
/// take one entry of the folder (a/b and a_b; a sequence "y.npy" and a tensor "y"), the later ones
/// get ~2, ~3, ... in output order, so no output overwrites another. Each renamed one is said on
/// `notes`.
std::vector<std::string> output_file_names(const std::vector<std::string>& names, const std::vector<bool>& is_folder,
                                           std::ostream& notes);

void print_placement(const tsr_model* model);

/// Prints where the time went: the slowest nodes, the total per op type, and the slowest nodes inside
/// compiled control-flow bodies.
void print_profile(const tsr_model* model, const RunProfile& profile, int runs);

tsr_region_info region_info(const tsr_model* model, size_t r);

/// Time per region (copies between memory spaces included) and the copies made.
void print_region_profile(const tsr_model* model, const RunProfile& profile, int runs);

std::string report_text(const tsr_model* model, const char* format, const std::string& name,
                        const tsr_run_profile* profile = nullptr);

/// Writes `text` to `path` through safe_file (a temporary file renamed over a regular file only).
void write_text_file(const std::string& path, const std::string& text);

/// The report format a file name asks for: .json, .dot, .html/.htm, else the text table.
const char* format_for(const std::string& path);

std::string file_name(const std::string& path);

int command_compile(const Args& args);

int command_partition(const Args& args);

int command_quantize(const Args& args);

/// Measured placement: times candidates and writes the tuning record (tsr_tune).
int command_tune(const Args& args);

int command_backends();

void write_npy_at(int folder_fd, const std::string& folder_path, const std::string& file_base, const NpyArray& a);

/// Prints a tensor output's dtype, shape and summary and, with a folder, writes
/// it to FILE_BASE.npy there (bfloat16 as float32 or bit patterns).
void emit_tensor(const Args& args, const DLTensor& t, int folder_fd, const std::string& folder_path,
                 const std::string& file_base);

/// Accuracy region by region (tsr_model_check): the table on stdout, JSON to
/// --json FILE; exit 2 when a region is over its tolerance.
int command_check(const Args& args);

/// Every input as a value: tensors from make_inputs' arrays, sequences from
/// folders, optionals from a file, a folder or 'none', strings from str .npy files.
std::vector<ValuePtr> make_value_inputs(const Args& args, std::vector<NpyArray>& arrays, const tsr_model* model);

int command_run(const Args& args);

int command_info(const Args& args);

int command_bench(const Args& args);

}  // namespace tessera::cli
