// tessera run: tensors in and out, or (for models with sequences, optionals or strings) values through tsr_model_run_values.
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
#include "ir/utf8.h"
#include "safe_file.h"
#include "tessera/tessera.h"

#include "cli.h"

namespace tessera::cli {

namespace {

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

}  // namespace

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

namespace {

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
    for (const std::string& s : strings) invalid += !tessera::is_valid_utf8(s);
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

}  // namespace

namespace {

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

}  // namespace

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
    print_profile(handle.model, profile, 1);
  }
  if (!args.report_file.empty()) {
    write_text_file(args.report_file, report_text(handle.model, format_for(args.report_file), file_name(args.model),
                                                  args.profile ? &profile.c : nullptr));
    std::cout << "report: " << args.report_file << "\n";
  }
  return 0;
}

}  // namespace tessera::cli
