// Runs ONNX node conformance cases through the real ONNX frontend and runtime.
// Each case runs in a forked child so that a crash is recorded, not fatal.
//
//   tessera_conformance CASES_DIR [--filter SUBSTRING] [--report FILE]
//                       [--expect-pass LIST] [--write-passing LIST] [--threads N]
//                       [--backends LIST] [--strict]
//
// CASES_DIR/<case>/model.onnx with test_data_set_*/input_*.pb and output_*.pb.
// Outcomes: passed, failed (wrong values or an unexpected error), unsupported
// (a clear Tessera error saying what is not supported), crashed (signal),
// timeout. With --expect-pass, exits 1 when a listed case does not pass.
// --backends (comma-separated, highest priority first) and --strict go to
// CompileOptions; a passing case then reports which backends ran its nodes,
// so the summary can count the cases a backend other than native took.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

// kRandom: the model draws random numbers (Bernoulli, RandomUniform...), so
// only dtypes and shapes can be compared with the recorded draw; such cases
// are counted apart and never listed as passing.
enum Outcome { kPassed = 0, kFailed = 1, kUnsupported = 2, kRandom = 3, kCrashed = 4, kTimeout = 5 };
const char* kOutcomeNames[] = {"passed", "failed", "unsupported", "random", "crashed", "timeout"};

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

/// Compares like onnx.backend.test: rtol 1e-3, atol 1e-7, NaN equal to NaN.
std::string compare(const Tensor& actual, const Tensor& expected, const std::string& name) {
  if (actual.dtype() != expected.dtype()) {
    return "output '" + name + "' has dtype " + dtype_name(actual.dtype()) + ", expected " + dtype_name(expected.dtype());
  }
  if (actual.shape() != expected.shape()) {
    return "output '" + name + "' has shape " + shape_to_string(actual.shape()) + ", expected " + shape_to_string(expected.shape());
  }
  bool exact = !dtype_is_float(expected.dtype());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double a = actual.double_at(i), b = expected.double_at(i);
    bool ok;
    if (exact) {
      ok = actual.int_at(i) == expected.int_at(i);
    } else if (std::isnan(b) || std::isnan(a)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(b) || std::isinf(a)) {
      ok = a == b;
    } else {
      double rtol = expected.dtype() == DType::kFloat16 ? 1e-3 : 1e-3;
      ok = std::fabs(a - b) <= 1e-7 + rtol * std::fabs(b);
    }
    if (!ok) {
      std::ostringstream s;
      s << "output '" << name << "' element " << i << " is " << a << ", expected " << b;
      return s.str();
    }
  }
  return "";
}

struct RunSettings {
  int threads = 1;
  std::vector<std::string> backends;
  bool strict = false;
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

/// "ran on: dnnl,native" — the backends of the nodes that executed (folded nodes excluded).
std::string backends_that_ran(const CompiledModel& model) {
  std::vector<std::string> names;
  for (const NodePlacement& p : model.placement()) {
    if (p.region >= 0 && std::find(names.begin(), names.end(), p.backend) == names.end()) names.push_back(p.backend);
  }
  std::string out = "ran on: ";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

/// Runs one case in this process. Returns the outcome and writes a message.
Outcome run_case(const fs::path& dir, const RunSettings& settings, std::string& message) {
  try {
    Graph graph = onnx_frontend::import_onnx_file((dir / "model.onnx").string());
    const bool random = draws_random_numbers(graph);
    CompileOptions options;
    options.num_threads = settings.threads;
    options.backends = settings.backends;
    options.strict = settings.strict;
    // Node tests give every input's shape in the model; datasets fix them anyway.
    std::vector<fs::path> sets;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(entry.path());
    }
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
      message = "no test data set";
      return kFailed;
    }
    for (const fs::path& set : sets) {
      std::vector<Tensor> inputs;
      for (const fs::path& p : sorted_pb_files(set, "input_")) {
        Tensor t = onnx_frontend::load_tensor_proto_file(p.string());
        size_t i = inputs.size();
        if (i < graph.inputs.size()) t = as_bfloat16_if_stored_as_bits(t, graph.value(graph.inputs[i]).type.dtype);
        inputs.push_back(t);
      }
      std::vector<Tensor> expected;
      for (const fs::path& p : sorted_pb_files(set, "output_")) expected.push_back(onnx_frontend::load_tensor_proto_file(p.string()));
      if (inputs.size() != graph.inputs.size()) {
        message = "test data has " + std::to_string(inputs.size()) + " inputs, the model " + std::to_string(graph.inputs.size());
        return kFailed;
      }
      CompileOptions set_options = options;
      for (size_t i = 0; i < inputs.size(); ++i) set_options.input_shapes[graph.value(graph.inputs[i]).name] = inputs[i].shape();
      auto model = CompiledModel::compile(graph, set_options);
      std::vector<TensorView> views;
      for (const Tensor& t : inputs) views.push_back(t.view());
      std::vector<Tensor> actual = model->run(views);
      if (actual.size() != expected.size()) {
        message = "produced " + std::to_string(actual.size()) + " outputs, expected " + std::to_string(expected.size());
        return kFailed;
      }
      for (size_t i = 0; i < actual.size(); ++i) {
        if (random) {
          if (actual[i].dtype() != expected[i].dtype() || actual[i].shape() != expected[i].shape()) {
            message = "output '" + model->outputs()[i].name + "' has the wrong dtype or shape";
            return kFailed;
          }
          continue;
        }
        std::string diff = compare(actual[i], as_bfloat16_if_stored_as_bits(expected[i], actual[i].dtype()),
                                   model->outputs()[i].name);
        if (!diff.empty()) {
          message = diff + " (" + backends_that_ran(*model) + ")";
          return kFailed;
        }
      }
      if (!settings.backends.empty()) message = backends_that_ran(*model);
    }
    return random ? kRandom : kPassed;
  } catch (const Error& e) {
    message = e.what();
    return e.kind() == ErrorKind::kInternal ? kFailed : kUnsupported;
  } catch (const std::exception& e) {
    message = std::string("exception: ") + e.what();
    return kFailed;
  }
}

Outcome run_case_isolated(const fs::path& dir, const RunSettings& settings, std::string& message) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    message = "pipe failed";
    return kCrashed;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    alarm(120);
    std::string msg;
    Outcome outcome = run_case(dir, settings, msg);
    if (msg.size() > 4000) msg.resize(4000);
    ssize_t written = write(pipe_fds[1], msg.data(), msg.size());
    (void)written;
    close(pipe_fds[1]);
    _exit(outcome);
  }
  close(pipe_fds[1]);
  std::string msg;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) msg.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  message = msg;
  if (WIFSIGNALED(status)) {
    message = std::string("signal ") + strsignal(WTERMSIG(status)) + (msg.empty() ? "" : ": " + msg);
    return WTERMSIG(status) == SIGALRM ? kTimeout : kCrashed;
  }
  int code = WEXITSTATUS(status);
  return code >= 0 && code <= kRandom ? static_cast<Outcome>(code) : kCrashed;
}

std::set<std::string> read_list(const std::string& path) {
  std::set<std::string> out;
  std::ifstream file(path);
  if (!file) {
    std::cerr << "cannot read " << path << "\n";
    std::exit(2);
  }
  std::string line;
  while (std::getline(file, line)) {
    if (!line.empty() && line[0] != '#') out.insert(line);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tessera_conformance CASES_DIR [--filter S] [--report FILE] [--expect-pass LIST] "
                 "[--write-passing LIST] [--threads N] [--backends LIST] [--strict] [--verbose]\n";
    return 2;
  }
  fs::path cases_dir = argv[1];
  std::string filter, report_path, expect_path, write_path;
  RunSettings settings;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--filter") filter = value();
    else if (a == "--report") report_path = value();
    else if (a == "--expect-pass") expect_path = value();
    else if (a == "--write-passing") write_path = value();
    else if (a == "--threads") settings.threads = std::stoi(value());
    else if (a == "--backends") settings.backends = split_commas(value());
    else if (a == "--strict") settings.strict = true;
    else if (a == "--verbose") verbose = true;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  if (!fs::is_directory(cases_dir)) {
    std::cerr << cases_dir << " is not a directory (generate it with tests/conformance/generate_node_tests.py)\n";
    return 2;
  }
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(cases_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx")) {
      if (filter.empty() || entry.path().filename().string().find(filter) != std::string::npos) cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  std::map<std::string, Outcome> outcomes;
  int counts[6] = {0, 0, 0, 0, 0, 0};
  std::map<std::string, int> passed_on;  // backend → passing cases that ran at least one node on it
  std::ofstream report;
  if (!report_path.empty()) report.open(report_path);
  for (const fs::path& dir : cases) {
    std::string message;
    Outcome outcome = run_case_isolated(dir, settings, message);
    std::string name = dir.filename().string();
    if (outcome == kPassed && message.rfind("ran on: ", 0) == 0) {
      for (const std::string& backend : split_commas(message.substr(8))) ++passed_on[backend];
    }
    outcomes[name] = outcome;
    ++counts[outcome];
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::replace(message.begin(), message.end(), '\t', ' ');
    if (report) report << name << "\t" << kOutcomeNames[outcome] << "\t" << message << "\n";
    if (verbose || outcome == kFailed || outcome == kCrashed || outcome == kTimeout) {
      std::cout << kOutcomeNames[outcome] << ": " << name << (message.empty() ? "" : ": " + message) << "\n";
    }
  }
  std::cout << "conformance: " << counts[kPassed] << " passed, " << counts[kFailed] << " failed, "
            << counts[kUnsupported] << " unsupported, " << counts[kRandom] << " random (dtype and shape checked), "
            << counts[kCrashed] << " crashed, " << counts[kTimeout]
            << " timed out, of " << cases.size() << " cases\n";
  for (const auto& [backend, count] : passed_on) {
    std::cout << "conformance: " << count << " passing cases ran nodes on " << backend << "\n";
  }
  if (!write_path.empty()) {
    std::ofstream out(write_path);
    out << "# ONNX node conformance cases that pass (tests/conformance/README.md). Only grows.\n";
    for (const auto& [name, outcome] : outcomes) {
      if (outcome == kPassed) out << name << "\n";
    }
  }
  int status = counts[kCrashed] ? 1 : 0;
  if (!expect_path.empty()) {
    int regressed = 0;
    for (const std::string& name : read_list(expect_path)) {
      auto it = outcomes.find(name);
      if (it == outcomes.end()) {
        if (filter.empty()) {
          std::cout << "regressed: " << name << " (case missing)\n";
          ++regressed;
        }
      } else if (it->second != kPassed) {
        std::cout << "regressed: " << name << " (" << kOutcomeNames[it->second] << ")\n";
        ++regressed;
      }
    }
    if (regressed) {
      std::cout << regressed << " listed cases no longer pass\n";
      status = 1;
    }
  }
  return status;
}
