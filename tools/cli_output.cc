// What the CLI writes and prints: output files (names made safe and unique, .npy written through temporary files), value summaries, placement, profiles and reports.
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

namespace {

std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace

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

namespace {

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

}  // namespace

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
void print_profile(const tsr_model* model, const RunProfile& profile, int runs) {
  const std::vector<double>& node_ms = profile.node_ms;
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
  // Nodes inside compiled If / Loop / Scan bodies: part of their node's time above, so listed apart.
  std::vector<Row> inner;
  for (size_t k = 0; k < profile.inner_ms.size(); ++k) {
    size_t row = 0;
    const char *path, *op, *backend, *holder, *ignored;
    check(tsr_model_inner_node(model, k, &row, &path, &op, &backend));
    if (std::string(backend) == "folded") continue;
    check(tsr_model_node_placement(model, row, &holder, &ignored, &ignored));
    inner.push_back({profile.inner_ms[k] / runs, std::string(holder) + "/" + path, op, backend});
  }
  if (inner.empty()) return;
  std::sort(inner.begin(), inner.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  std::printf("  slowest nodes inside control flow (%zu; included in their If / Loop / Scan's time):\n", inner.size());
  for (size_t i = 0; i < inner.size() && i < 15; ++i) {
    std::printf("    %9.3f ms  %s (%s) on %s\n", inner[i].ms, inner[i].name.c_str(), inner[i].op.c_str(), inner[i].backend.c_str());
  }
}

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
  const tsr_run_profile& c = profile.c;
  std::printf("working memory allocated during the runs: %lld times (not reused from an earlier run; outputs not counted)\n",
              static_cast<long long>(c.allocations));
  if (c.binding_copies) {
    std::printf("caller buffers copied (not used in place): %lld times, %lld bytes\n",
                static_cast<long long>(c.binding_copies), static_cast<long long>(c.binding_copy_bytes));
  }
  if (c.shape_cache_hits + c.shape_cache_misses + c.shape_fallbacks + c.shape_deferrals > 0) {
    std::printf("open dims: %lld region runs found their shapes prepared, %lld prepared them (%.3f ms in all), %lld ran "
                "on native at shapes their backend refused, %lld on native at shapes not worth preparing yet\n",
                static_cast<long long>(c.shape_cache_hits), static_cast<long long>(c.shape_cache_misses),
                c.shape_prepare_milliseconds, static_cast<long long>(c.shape_fallbacks),
                static_cast<long long>(c.shape_deferrals));
  }
}

std::string report_text(const tsr_model* model, const char* format, const std::string& name,
                        const tsr_run_profile* profile) {
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

}  // namespace tessera::cli
