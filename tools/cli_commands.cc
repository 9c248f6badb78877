// The commands other than run: compile, partition, quantize, tune, backends, check, info, bench.
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

namespace {

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

}  // namespace

namespace {

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

}  // namespace

int command_quantize(const Args& args) {
  tsr_options* options = nullptr;
  check(tsr_options_create(&options));
  std::unique_ptr<tsr_options, void (*)(tsr_options*)> guard(options, tsr_options_free);
  check(tsr_options_set_threads(options, args.threads));
  for (const auto& [name, value] : args.settings) check(tsr_options_set(options, name.c_str(), value.c_str()));
  for (const auto& [name, dims] : args.shapes) check(tsr_options_set_input_shape(options, name.c_str(), dims.data(), dims.size()));
  std::string last_phase;
  tsr_quantize_config config{};
  config.struct_size = sizeof(config);
  config.method = args.method.empty() ? nullptr : args.method.c_str();
  config.percentile = args.percentile;
  config.per_channel = args.per_channel ? 1 : 0;
  config.weights_only = args.weights_only ? 1 : 0;
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
  tsr_check_config config{};
  config.struct_size = sizeof(config);
  config.tolerance = args.tolerance;  // -1 unless given
  config.min_cosine = args.min_cosine;
  config.float64_reference = args.float64_reference ? 1 : 0;
  config.model_name = name.c_str();
  check(tsr_model_check(handle.model, inputs.data(), inputs.size(), &config, &table,
                        args.json_file.empty() ? nullptr : &json, args.html_file.empty() ? nullptr : &html, &flagged));
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
    print_profile(handle.model, profile, args.iterations);
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

}  // namespace tessera::cli
