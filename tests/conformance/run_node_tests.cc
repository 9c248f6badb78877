// Runs ONNX node conformance cases through the real ONNX frontend and runtime.
// Each case runs in a forked child so that a crash is recorded, not fatal.
//
//   tessera_conformance CASES_DIR [--filter SUBSTRING] [--report FILE]
//                       [--expect-pass LIST] [--expect-random LIST] [--tolerances FILE]
//                       [--write-passing LIST [--drop CASE]...] [--threads N]
//                       [--backends LIST] [--backend-plugin PATH]... [--strict] [--nan-inf] [--verbose]
//
// CASES_DIR/<case>/model.onnx with test_data_set_*/input_*.pb and output_*.pb.
// Outcomes: passed; failed (wrong values, a user error or an internal error:
// the ONNX cases are valid models, so only "not implemented" may excuse one);
// unsupported (a Tessera error of kind unsupported); random (the model draws
// random numbers: dtypes, shapes and the values' range are checked); crashed
// (signal); timeout. Floats compare per dtype (see default_tolerance), with
// per-case overrides from --tolerances. --expect-pass exits 1 when a listed
// case does not pass, --expect-random when the random cases are not exactly
// the listed ones. --write-passing adds the passing cases to the list and
// never drops one unless --drop names it. --nan-inf reruns every passing case
// with NaN, +Inf and -Inf written into its float inputs and requires the
// chosen backends' outputs to be NaN/+Inf/-Inf exactly where native-only's
// are. --backends (comma-separated, highest priority first) and --strict go
// to CompileOptions; the summary counts the passing cases each backend took
// part in.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

enum Outcome { kPassed = 0, kFailed = 1, kUnsupported = 2, kRandom = 3, kCrashed = 4, kTimeout = 5 };
const char* kOutcomeNames[] = {"passed", "failed", "unsupported", "random", "crashed", "timeout"};

/// Elementwise |actual - expected| <= atol + rtol * |expected|; NaN must meet
/// NaN and an infinity the same infinity.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// The tolerance for a float dtype: a few units in the last place of the
/// dtype (ONNX's expected data is mostly computed in float64 or float32 by
/// numpy and rounded once), so a kernel that computes float64 in float32, or
/// float32 in float16, fails. Decided from a full run: see README.md.
Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64: return {1e-9, 1e-12};
    case DType::kFloat16: return {2e-3, 1e-5};   // ulp 9.8e-4
    case DType::kBFloat16: return {1.6e-2, 1e-5};  // ulp 7.8e-3
    default: return {1e-5, 1e-6};                // float32: ulp 1.2e-7
  }
}

/// Per-case overrides (--tolerances FILE), one line per case:
///   CASE rtol=R atol=A  # why the expected data (or the kernel) needs it
/// A line without a reason is refused, so the list stays short and honest.
struct ToleranceOverride {
  Tolerance tolerance;
  std::string why;
};

std::map<std::string, ToleranceOverride> read_tolerance_overrides(const std::string& path) {
  std::map<std::string, ToleranceOverride> out;
  std::ifstream file(path);
  if (!file) {
    std::cerr << "cannot read " << path << "\n";
    std::exit(2);
  }
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    size_t hash = line.find('#');
    std::string why = hash == std::string::npos ? "" : line.substr(hash + 1);
    std::istringstream fields(line.substr(0, hash));
    std::string name, field;
    if (!(fields >> name)) continue;  // blank or comment-only line
    ToleranceOverride entry;
    bool has_rtol = false, has_atol = false;
    while (fields >> field) {
      size_t eq = field.find('=');
      std::string key = field.substr(0, eq);
      double value = eq == std::string::npos ? -1 : std::strtod(field.c_str() + eq + 1, nullptr);
      if (key == "rtol" && value >= 0) entry.tolerance.rtol = value, has_rtol = true;
      else if (key == "atol" && value >= 0) entry.tolerance.atol = value, has_atol = true;
      else {
        std::cerr << path << ":" << number << ": expected rtol=R atol=A, got '" << field << "'\n";
        std::exit(2);
      }
    }
    if (!has_rtol || !has_atol || why.find_first_not_of(" \t") == std::string::npos) {
      std::cerr << path << ":" << number << ": each override needs rtol=, atol= and a '# why' comment\n";
      std::exit(2);
    }
    entry.why = why;
    out[name] = entry;
  }
  return out;
}

bool draws_random_numbers(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (schema && !schema->deterministic) return true;
  }
  return false;
}

std::vector<fs::path> sorted_pb_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && entry.path().extension() == ".pb") {
      files.emplace_back(std::stoi(name.substr(prefix.size())), entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& f : files) out.push_back(f.second);
  return out;
}

/// numpy has no bfloat16, so the ONNX test data stores bfloat16 values as
/// their uint16 bit patterns; read them back as bfloat16.
Tensor as_bfloat16_if_stored_as_bits(const Tensor& t, DType wanted) {
  if (wanted != DType::kBFloat16 || t.dtype() != DType::kUInt16) return t;
  Tensor out(DType::kBFloat16, t.shape());
  if (t.nbytes()) std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

std::string format_double(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

/// Compares one output. Returns "" when it matches; `worst` grows to the
/// largest |a - b| / (atol + rtol |b|) seen (1 is the limit), so the report
/// shows how close each case is to its tolerance.
std::string compare(const Tensor& actual, const Tensor& expected, const std::string& name, const Tolerance* override,
                    double& worst) {
  if (actual.dtype() != expected.dtype()) {
    return "output '" + name + "' has dtype " + dtype_name(actual.dtype()) + ", expected " + dtype_name(expected.dtype());
  }
  if (actual.shape() != expected.shape()) {
    return "output '" + name + "' has shape " + shape_to_string(actual.shape()) + ", expected " + shape_to_string(expected.shape());
  }
  if (expected.dtype() == DType::kString) {
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const std::string& a = actual.as<std::string>()[i];
      const std::string& b = expected.as<std::string>()[i];
      if (a != b) return "output '" + name + "' element " + std::to_string(i) + " is \"" + a + "\", expected \"" + b + "\"";
    }
    return "";
  }
  const bool exact = !dtype_is_float(expected.dtype());
  const Tolerance tol = override ? *override : default_tolerance(expected.dtype());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    bool ok;
    double a = actual.double_at(i), b = expected.double_at(i);
    if (exact) {
      ok = actual.int_at(i) == expected.int_at(i);
    } else if (std::isnan(b) || std::isnan(a)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(b) || std::isinf(a)) {
      ok = a == b;
    } else {
      double error = std::fabs(a - b), limit = tol.atol + tol.rtol * std::fabs(b);
      ok = error <= limit;
      if (error > 0) worst = std::max(worst, limit > 0 ? error / limit : std::numeric_limits<double>::infinity());
    }
    if (!ok) {
      std::ostringstream s;
      s << "output '" << name << "' element " << i << " is " << format_double(a) << ", expected " << format_double(b);
      if (!exact) s << " (rtol " << tol.rtol << ", atol " << tol.atol << (override ? ", per-case override" : "") << ")";
      return s.str();
    }
  }
  return "";
}

/// The random cases of the suite are all Bernoulli draws (expanded or not),
/// so every output value must be 0 or 1. A new kind of random case fails
/// here until it gets its own check.
std::string check_random_output(const Tensor& actual, const Tensor& expected, const std::string& name) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return "output '" + name + "' has dtype " + dtype_name(actual.dtype()) + " shape " + shape_to_string(actual.shape()) +
           ", expected " + dtype_name(expected.dtype()) + " " + shape_to_string(expected.shape());
  }
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double v = actual.double_at(i);
    if (v != 0.0 && v != 1.0) {
      return "output '" + name + "' element " + std::to_string(i) + " is " + format_double(v) +
             ", a Bernoulli draw must be 0 or 1";
    }
  }
  return "";
}

struct RunSettings {
  int threads = 1;
  std::vector<std::string> backends;
  bool strict = false;
  bool nan_inf = false;
  std::map<std::string, ToleranceOverride> overrides;
};

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// "dnnl,native": the backends of the nodes that executed (folded nodes excluded).
std::string backends_that_ran(const CompiledModel& model) {
  std::vector<std::string> names;
  for (const NodePlacement& p : model.placement()) {
    if (p.region >= 0 && std::find(names.begin(), names.end(), p.backend) == names.end()) names.push_back(p.backend);
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

struct CaseResult {
  Outcome outcome = kFailed;
  std::string message;
  std::string ran_on;  // backends that ran nodes, comma-separated
  double worst = 0;    // largest error as a fraction of the tolerance
};

/// Inputs and expected outputs; a sequence or optional (by the model's
/// declared type) is in the boxed vectors instead (its tensor left empty).
struct DataSet {
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  std::vector<std::optional<BoxedValue>> boxed_inputs;
  std::vector<std::optional<BoxedValue>> boxed_expected;
  bool has_boxed() const {
    for (const auto& b : boxed_inputs) if (b) return true;
    for (const auto& b : boxed_expected) if (b) return true;
    return false;
  }
};

std::vector<Tensor> run_model(const Graph& graph, const std::vector<Tensor>& inputs, CompileOptions options,
                              std::string* ran_on, std::vector<std::string>* output_names,
                              const std::vector<std::optional<BoxedValue>>* boxed_inputs = nullptr,
                              std::vector<BoxedValue>* boxed_outputs = nullptr) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!graph.value(graph.inputs[i]).type.is_tensor()) continue;
    options.input_shapes[graph.value(graph.inputs[i]).name] = inputs[i].shape();
  }
  auto model = CompiledModel::compile(graph, options);
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  BoxedIO boxed;
  if (boxed_inputs) {
    for (const auto& b : *boxed_inputs) boxed.inputs.push_back(b ? &*b : nullptr);
  }
  std::vector<Tensor> outputs = model->run(views, {}, nullptr, &boxed);
  if (boxed_outputs) *boxed_outputs = std::move(boxed.outputs);
  if (ran_on) *ran_on = backends_that_ran(*model);
  if (output_names) {
    for (const ValueDesc& d : model->outputs()) output_names->push_back(d.name);
  }
  return outputs;
}

void set_element(Tensor& t, int64_t i, double value) {
  switch (t.dtype()) {
    case DType::kFloat32: t.as<float>()[i] = static_cast<float>(value); break;
    case DType::kFloat64: t.as<double>()[i] = value; break;
    case DType::kFloat16: t.as<uint16_t>()[i] = float_to_half(static_cast<float>(value)); break;
    case DType::kBFloat16: t.as<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(value)); break;
    default: break;
  }
}

/// Copies of the inputs with NaN at the first element of every float input,
/// +Inf in the middle and -Inf at the last (where the tensor is long enough).
std::vector<Tensor> with_nan_and_inf(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor copy = t.clone();
    const int64_t n = copy.numel();
    if (dtype_is_float(copy.dtype()) && n > 0) {
      set_element(copy, 0, std::numeric_limits<double>::quiet_NaN());
      if (n >= 3) set_element(copy, n / 2, std::numeric_limits<double>::infinity());
      if (n >= 2) set_element(copy, n - 1, -std::numeric_limits<double>::infinity());
    }
    out.push_back(copy);
  }
  return out;
}

int special_class(double v) { return std::isnan(v) ? 1 : std::isinf(v) ? (v > 0 ? 2 : 3) : 0; }
const char* kSpecialNames[] = {"finite", "NaN", "+Inf", "-Inf"};

/// The --nan-inf check of one data set: NaN/±Inf where native-only has them.
/// Returns "" when they agree or when native itself rejects the input (then
/// there is nothing to compare).
std::string check_nan_inf(const Graph& graph, const DataSet& set, const CompileOptions& options) {
  if (set.has_boxed()) return "";  // sequences and optionals run on native only: nothing to compare with
  std::vector<Tensor> poisoned = with_nan_and_inf(set.inputs);
  bool any_float = false;
  for (const Tensor& t : poisoned) any_float |= dtype_is_float(t.dtype()) && t.numel() > 0;
  if (!any_float) return "";
  CompileOptions native_options = options;
  native_options.backends = {"native"};
  native_options.strict = true;
  std::vector<Tensor> reference;
  try {
    reference = run_model(graph, poisoned, native_options, nullptr, nullptr);
  } catch (const std::exception&) {
    return "";
  }
  std::string ran_on;
  std::vector<std::string> names;
  std::vector<Tensor> actual;
  try {
    actual = run_model(graph, poisoned, options, &ran_on, &names);
  } catch (const std::exception& e) {
    return std::string("with NaN/Inf inputs native runs, the chosen backends fail: ") + e.what();
  }
  for (size_t o = 0; o < actual.size() && o < reference.size(); ++o) {
    const Tensor& a = actual[o];
    const Tensor& r = reference[o];
    if (a.dtype() != r.dtype() || a.shape() != r.shape()) {
      return "with NaN/Inf inputs output '" + names[o] + "' differs from native-only in dtype or shape (ran on: " + ran_on + ")";
    }
    if (!dtype_is_float(a.dtype())) continue;
    for (int64_t i = 0; i < a.numel(); ++i) {
      int ca = special_class(a.double_at(i)), cr = special_class(r.double_at(i));
      if (ca != cr) {
        return "with NaN/Inf inputs output '" + names[o] + "' element " + std::to_string(i) + " is " +
               format_double(a.double_at(i)) + ", native-only gives " + kSpecialNames[cr] + " (ran on: " + ran_on + ")";
      }
    }
  }
  return "";
}

/// A sequence or optional output: presence, length, then each tensor as compare() does.
std::string compare_boxed(const BoxedValue& actual, const BoxedValue& expected, const std::string& name,
                          const Tolerance* override, double& worst) {
  if (actual.present != expected.present) {
    return "output '" + name + "' is " + (actual.present ? "present" : "empty") + ", expected " +
           (expected.present ? "present" : "empty");
  }
  if (actual.items.size() != expected.items.size()) {
    return "output '" + name + "' holds " + std::to_string(actual.items.size()) + " tensors, expected " +
           std::to_string(expected.items.size());
  }
  for (size_t k = 0; k < actual.items.size(); ++k) {
    std::string diff = compare(actual.items[k], expected.items[k], name + "[" + std::to_string(k) + "]", override, worst);
    if (!diff.empty()) return diff;
  }
  return "";
}

/// Runs one case in this process.
CaseResult run_case(const fs::path& dir, const RunSettings& settings) {
  CaseResult result;
  auto fail = [&](Outcome outcome, std::string message) {
    result.outcome = outcome;
    result.message = std::move(message);
    return result;
  };
  try {
    Graph graph = onnx_frontend::import_onnx_file((dir / "model.onnx").string());
    const bool random = draws_random_numbers(graph);
    CompileOptions options;
    options.num_threads = settings.threads;
    options.backends = settings.backends;
    options.strict = settings.strict;
    auto override_it = settings.overrides.find(dir.filename().string());
    const Tolerance* override = override_it == settings.overrides.end() ? nullptr : &override_it->second.tolerance;
    std::vector<fs::path> set_dirs;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) set_dirs.push_back(entry.path());
    }
    std::sort(set_dirs.begin(), set_dirs.end());
    if (set_dirs.empty()) return fail(kFailed, "no test data set");
    std::vector<DataSet> sets;
    for (const fs::path& set_dir : set_dirs) {
      DataSet set;
      for (const fs::path& p : sorted_pb_files(set_dir, "input_")) {
        size_t i = set.inputs.size();
        const ValueKind kind = i < graph.inputs.size() ? graph.value(graph.inputs[i]).type.kind : ValueKind::kTensor;
        if (kind != ValueKind::kTensor) {
          set.inputs.emplace_back();
          set.boxed_inputs.push_back(onnx_frontend::load_boxed_proto_file(p.string(), kind));
          continue;
        }
        Tensor t = onnx_frontend::load_tensor_proto_file(p.string());
        if (i < graph.inputs.size()) t = as_bfloat16_if_stored_as_bits(t, graph.value(graph.inputs[i]).type.dtype);
        set.inputs.push_back(t);
        set.boxed_inputs.emplace_back();
      }
      for (const fs::path& p : sorted_pb_files(set_dir, "output_")) {
        size_t i = set.expected.size();
        const ValueKind kind = i < graph.outputs.size() ? graph.value(graph.outputs[i]).type.kind : ValueKind::kTensor;
        if (kind != ValueKind::kTensor) {
          set.expected.emplace_back();
          set.boxed_expected.push_back(onnx_frontend::load_boxed_proto_file(p.string(), kind));
          continue;
        }
        set.expected.push_back(onnx_frontend::load_tensor_proto_file(p.string()));
        set.boxed_expected.emplace_back();
      }
      if (set.inputs.size() != graph.inputs.size()) {
        return fail(kFailed, "test data has " + std::to_string(set.inputs.size()) + " inputs, the model " +
                                 std::to_string(graph.inputs.size()));
      }
      sets.push_back(std::move(set));
    }
    for (const DataSet& set : sets) {
      std::vector<std::string> names;
      std::vector<BoxedValue> actual_boxed;
      std::vector<Tensor> actual = run_model(graph, set.inputs, options, &result.ran_on, &names, &set.boxed_inputs, &actual_boxed);
      if (actual.size() != set.expected.size()) {
        return fail(kFailed, "produced " + std::to_string(actual.size()) + " outputs, expected " + std::to_string(set.expected.size()));
      }
      for (size_t i = 0; i < actual.size(); ++i) {
        if (set.boxed_expected[i]) {
          std::string diff = compare_boxed(actual_boxed[i], *set.boxed_expected[i], names[i], override, result.worst);
          if (!diff.empty()) return fail(kFailed, diff + " (ran on: " + result.ran_on + ")");
          continue;
        }
        Tensor expected = as_bfloat16_if_stored_as_bits(set.expected[i], actual[i].dtype());
        std::string diff = random ? check_random_output(actual[i], expected, names[i])
                                  : compare(actual[i], expected, names[i], override, result.worst);
        if (!diff.empty()) return fail(kFailed, diff + " (ran on: " + result.ran_on + ")");
      }
    }
    if (settings.nan_inf && !random) {
      for (const DataSet& set : sets) {
        std::string diff = check_nan_inf(graph, set, options);
        if (!diff.empty()) return fail(kFailed, diff);
      }
    }
    result.outcome = random ? kRandom : kPassed;
    return result;
  } catch (const Error& e) {
    // The cases are valid ONNX: a user error here is Tessera rejecting a good model.
    return fail(e.kind() == ErrorKind::kUnsupported ? kUnsupported : kFailed,
                std::string(e.kind() == ErrorKind::kUser ? "user error: " : e.kind() == ErrorKind::kInternal ? "internal error: " : "") +
                    e.what());
  } catch (const std::exception& e) {
    return fail(kFailed, std::string("exception: ") + e.what());
  }
}

/// Runs one case in a forked child with a 120 s alarm and an 8 GiB address
/// space limit (the machine is shared; a runaway shape must not take it down).
CaseResult run_case_isolated(const fs::path& dir, const RunSettings& settings) {
  CaseResult result;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    result.outcome = kCrashed;
    result.message = "pipe failed";
    return result;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    alarm(120);
#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_UNDER_ASAN 1
#endif
#endif
#ifndef TESSERA_UNDER_ASAN
    // Not under AddressSanitizer: its shadow memory reserves terabytes of address space,
    // so there the limit is ASan's own (scripts/sanitize.sh sets max_allocation_size_mb).
    struct rlimit limit = {8ull << 30, 8ull << 30};
    setrlimit(RLIMIT_AS, &limit);
#endif
    CaseResult r = run_case(dir, settings);
    if (r.message.size() > 4000) r.message.resize(4000);
    std::string packet = r.ran_on + "\t" + format_double(r.worst) + "\t" + r.message;
    ssize_t written = write(pipe_fds[1], packet.data(), packet.size());
    (void)written;
    close(pipe_fds[1]);
    _exit(r.outcome);
  }
  close(pipe_fds[1]);
  std::string packet;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) packet.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t tab1 = packet.find('\t'), tab2 = tab1 == std::string::npos ? tab1 : packet.find('\t', tab1 + 1);
  if (tab2 != std::string::npos) {
    result.ran_on = packet.substr(0, tab1);
    result.worst = std::strtod(packet.c_str() + tab1 + 1, nullptr);
    result.message = packet.substr(tab2 + 1);
  }
  if (WIFSIGNALED(status)) {
    result.message = std::string("signal ") + strsignal(WTERMSIG(status)) + (result.message.empty() ? "" : ": " + result.message);
    result.outcome = WTERMSIG(status) == SIGALRM ? kTimeout : kCrashed;
    return result;
  }
  int code = WEXITSTATUS(status);
  result.outcome = code >= 0 && code <= kRandom ? static_cast<Outcome>(code) : kCrashed;
  return result;
}

std::set<std::string> read_list(const std::string& path, bool missing_is_empty = false) {
  std::set<std::string> out;
  std::ifstream file(path);
  if (!file) {
    if (missing_is_empty) return out;
    std::cerr << "cannot read " << path << "\n";
    std::exit(2);
  }
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty() && line[0] != '#') out.insert(line);
  }
  return out;
}

/// Cases listed in `list_path` that did not end as `wanted`; with `exact`,
/// also cases that ended as `wanted` without being listed.
int check_list(const std::string& list_path, const std::map<std::string, Outcome>& outcomes, Outcome wanted,
               bool filtered, bool exact) {
  int bad = 0;
  std::set<std::string> listed = read_list(list_path);
  for (const std::string& name : listed) {
    auto it = outcomes.find(name);
    if (it == outcomes.end()) {
      if (!filtered) {
        std::cout << "regressed: " << name << " (case missing)\n";
        ++bad;
      }
    } else if (it->second != wanted) {
      std::cout << "regressed: " << name << " (" << kOutcomeNames[it->second] << ", listed as " << kOutcomeNames[wanted] << ")\n";
      ++bad;
    }
  }
  if (exact) {
    for (const auto& [name, outcome] : outcomes) {
      if (outcome == wanted && !listed.count(name)) {
        std::cout << "unlisted: " << name << " is " << kOutcomeNames[wanted] << " but not in " << list_path << "\n";
        ++bad;
      }
    }
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tessera_conformance CASES_DIR [--filter S] [--report FILE] [--expect-pass LIST] "
                 "[--expect-random LIST] [--tolerances FILE] [--write-passing LIST [--drop CASE]...] [--threads N] "
                 "[--backends LIST] [--backend-plugin PATH]... [--strict] [--nan-inf] [--verbose]\n";
    return 2;
  }
  fs::path cases_dir = argv[1];
  std::string filter, report_path, expect_path, random_path, write_path, tolerances_path;
  std::set<std::string> drop;
  RunSettings settings;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--filter") filter = value();
    else if (a == "--report") report_path = value();
    else if (a == "--expect-pass") expect_path = value();
    else if (a == "--expect-random") random_path = value();
    else if (a == "--tolerances") tolerances_path = value();
    else if (a == "--write-passing") write_path = value();
    else if (a == "--drop") drop.insert(value());
    else if (a == "--threads") settings.threads = std::stoi(value());
    else if (a == "--backends") settings.backends = split_commas(value());
    else if (a == "--backend-plugin") {
      const std::string path = value();
      try {
        tessera::load_backend_plugin(path);
      } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 2;
      }
    } else if (a == "--strict") settings.strict = true;
    else if (a == "--nan-inf") settings.nan_inf = true;
    else if (a == "--verbose") verbose = true;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  if (!drop.empty() && write_path.empty()) {
    std::cerr << "--drop needs --write-passing\n";
    return 2;
  }
  if (!fs::is_directory(cases_dir)) {
    std::cerr << cases_dir << " is not a directory (generate it with tests/conformance/generate_node_tests.py)\n";
    return 2;
  }
  if (!tolerances_path.empty()) settings.overrides = read_tolerance_overrides(tolerances_path);
  std::vector<fs::path> cases;
  std::set<std::string> case_names;
  for (const auto& entry : fs::directory_iterator(cases_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx")) {
      case_names.insert(entry.path().filename().string());
      if (filter.empty() || entry.path().filename().string().find(filter) != std::string::npos) cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  int status = 0;
  for (const auto& [name, entry] : settings.overrides) {
    if (!case_names.count(name)) {
      std::cout << "stale tolerance override: no case " << name << " in " << cases_dir << "\n";
      status = 1;
    }
  }
  std::map<std::string, Outcome> outcomes;
  int counts[6] = {0, 0, 0, 0, 0, 0};
  std::map<std::string, int> passed_on;  // backend → passing cases that ran at least one node on it
  std::ofstream report;
  if (!report_path.empty()) report.open(report_path);
  for (const fs::path& dir : cases) {
    CaseResult r = run_case_isolated(dir, settings);
    std::string name = dir.filename().string();
    if (r.outcome == kPassed) {
      for (const std::string& backend : split_commas(r.ran_on)) ++passed_on[backend];
    }
    outcomes[name] = r.outcome;
    ++counts[r.outcome];
    std::string message = r.message;
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::replace(message.begin(), message.end(), '\t', ' ');
    std::ostringstream worst;
    worst.precision(3);
    worst << r.worst;
    // Columns: case, outcome, backends that ran, largest error / tolerance, message.
    if (report) report << name << "\t" << kOutcomeNames[r.outcome] << "\t" << r.ran_on << "\t" << worst.str() << "\t" << message << "\n";
    if (verbose || r.outcome == kFailed || r.outcome == kCrashed || r.outcome == kTimeout) {
      std::cout << kOutcomeNames[r.outcome] << ": " << name << (message.empty() ? "" : ": " + message) << "\n";
    }
  }
  std::cout << "conformance: " << counts[kPassed] << " passed, " << counts[kFailed] << " failed, "
            << counts[kUnsupported] << " unsupported, " << counts[kRandom] << " random (dtype, shape and {0, 1} checked), "
            << counts[kCrashed] << " crashed, " << counts[kTimeout] << " timed out, of " << cases.size() << " cases"
            << (settings.nan_inf ? " (passing cases rerun with NaN and Inf inputs)" : "") << "\n";
  for (const auto& [backend, count] : passed_on) {
    std::cout << "conformance: " << count << " passing cases ran nodes on " << backend << "\n";
  }
  if (!write_path.empty()) {
    // Only grows: a case leaves the list only when --drop names it.
    std::set<std::string> list = read_list(write_path, /*missing_is_empty=*/true);
    size_t before = list.size();
    for (const auto& [name, outcome] : outcomes) {
      if (outcome == kPassed) list.insert(name);
    }
    size_t added = list.size() - before;
    size_t dropped = 0;
    for (const std::string& name : drop) dropped += list.erase(name);
    std::ofstream out(write_path);
    out << "# ONNX node conformance cases that pass (tests/conformance/README.md). Only grows (--drop removes).\n";
    for (const std::string& name : list) out << name << "\n";
    std::cout << write_path << ": " << added << " cases added, " << dropped << " dropped, " << list.size() << " listed\n";
  }
  if (counts[kCrashed]) status = 1;
  if (!expect_path.empty()) {
    int regressed = check_list(expect_path, outcomes, kPassed, !filter.empty(), false);
    if (regressed) {
      std::cout << regressed << " listed cases no longer pass\n";
      status = 1;
    }
  }
  if (!random_path.empty()) {
    int wrong = check_list(random_path, outcomes, kRandom, !filter.empty(), true);
    if (wrong) {
      std::cout << wrong << " random cases differ from " << random_path << "\n";
      status = 1;
    }
  }
  return status;
}
