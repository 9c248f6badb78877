// tessera._tessera: errors, dtype names and options (see binding.h), and the
// module's functions that hold no model: exception types, the copy counter,
// backends and plug-ins, Options, option names, artifact detection.
#include "binding.h"

namespace tessera_py {

// ----------------------------------------------------------------- errors --

ErrorTypes& error_types() {
  static ErrorTypes* types = new ErrorTypes();
  return *types;
}

[[noreturn]] void raise(tsr_status_code code, const std::string& message) {
  const ErrorTypes& t = error_types();
  py::handle type = code == TSR_UNSUPPORTED ? t.unsupported : code == TSR_INTERNAL ? t.internal : t.invalid_argument;
  if (!type) type = PyExc_RuntimeError;  // set_error_types not called (the package always calls it)
  // A message may quote bytes that are not UTF-8 (a node or file name): shown escaped, never dropped.
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (!text) {
    PyErr_Clear();
    text = PyUnicode_FromString("(an error message that could not be decoded)");
  }
  PyErr_SetObject(type.ptr(), text);
  Py_XDECREF(text);
  throw py::error_already_set();
}

[[noreturn]] void raise_status(tsr_status* status) {
  const tsr_status_code code = tsr_status_code_of(status);
  const std::string message = tsr_status_message(status);
  tsr_status_free(status);
  raise(code, message);
}

void check(tsr_status* status) {
  if (status) raise_status(status);
}

[[noreturn]] void invalid(const std::string& message) { raise(TSR_INVALID_ARGUMENT, message); }

/// The C string of a path, name or option for the C API; one with a NUL byte inside would be cut
/// there (so "notes.txt\0.tsr" would write notes.txt): an error instead. Call with the GIL held.
const char* c_text(const std::string& s) {
  const size_t nul = s.find('\0');
  if (nul != std::string::npos) {
    std::string shown = s.substr(0, nul) + "\\0" + s.substr(nul + 1);
    for (size_t k = shown.find('\0'); k != std::string::npos; k = shown.find('\0')) shown.replace(k, 1, "\\0");
    invalid("'" + shown + "' contains a NUL byte, which a path, name or option cannot hold");
  }
  return s.c_str();
}


std::atomic<int64_t> g_input_copies{0};
// ----------------------------------------------------------------- dtypes --

std::string dtype_name(DLDataType t) {
  const char* name = tsr_dtype_name(t);  // the C API's one table of names
  return name ? name : "unknown";
}

bool is_bool(DLDataType t) { return t.code == TSR_DL_BOOL_CODE; }
bool is_string(DLDataType t) { return t.code == TSR_DL_STRING_CODE; }

/// tsr_value_kind as the package names it (NodeArg.kind).
const char* kind_name(int32_t kind) {
  switch (kind) {
    case TSR_VALUE_TENSOR: return "tensor";
    case TSR_VALUE_SEQUENCE: return "sequence";
    case TSR_VALUE_OPTIONAL_TENSOR: return "optional_tensor";
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "optional_sequence";
    default: return "unknown";
  }
}

/// "a sequence", for messages.
std::string kind_phrase(int32_t kind) {
  switch (kind) {
    case TSR_VALUE_TENSOR: return "a tensor";
    case TSR_VALUE_SEQUENCE: return "a sequence";
    case TSR_VALUE_OPTIONAL_TENSOR: return "an optional tensor";
    case TSR_VALUE_OPTIONAL_SEQUENCE: return "an optional sequence";
    default: return "a value of kind " + std::to_string(kind);
  }
}

/// The DLPack dtype of a numpy dtype, or false when Tessera has none.
bool dl_dtype_of(const py::dtype& dtype, DLDataType& out) {
  const char kind = dtype.kind();
  const auto bits = static_cast<uint8_t>(dtype.itemsize() * 8);
  switch (kind) {
    case 'f': out = {kDLFloat, bits, 1}; return bits == 16 || bits == 32 || bits == 64;
    case 'i': out = {kDLInt, bits, 1}; return true;
    case 'u': out = {kDLUInt, bits, 1}; return true;
    case 'b': out = {TSR_DL_BOOL_CODE, 8, 1}; return true;
    default: return false;
  }
}

/// numpy's dtype for a Tessera output (bfloat16 has none).
bool numpy_dtype_of(DLDataType t, py::dtype& out) {
  const std::string name = dtype_name(t);
  if (name == "unknown" || name == "bfloat16") return false;
  out = py::dtype(name);
  return true;
}

py::module_& numpy() {
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

// ---------------------------------------------------------------- options --


const tsr_options* native(const Options* options) { return options ? options->options : nullptr; }


/// Options from (name, text) settings, each set through tsr_options_set (the C API's one list of option
/// names; the package turns its typed values into that text), and the shapes to bind.
std::unique_ptr<Options> make_options(const std::vector<std::pair<std::string, std::string>>& settings,
                                      const std::map<std::string, std::vector<int64_t>>& shapes) {
  auto options = std::make_unique<Options>();
  tsr_options* o = options->options;
  for (const auto& [name, value] : settings) check(tsr_options_set(o, c_text(name), c_text(value)));
  for (const auto& [name, dims] : shapes) check(tsr_options_set_input_shape(o, c_text(name), dims.data(), dims.size()));
  return options;
}

bool is_artifact_bytes(const py::bytes& bytes) {
  const std::string_view data = bytes;
  return data.size() >= 8 && std::memcmp(data.data(), "TSRARTF\0", 8) == 0;
}

void bind_common(py::module_& m) {
  m.def("set_error_types", [](py::object base, py::object invalid_argument, py::object unsupported, py::object internal) {
    error_types() = {base, invalid_argument, unsupported, internal};
  });
  m.def("copy_count", [] { return g_input_copies.load(); },
        "Input copies made so far (non-contiguous, misaligned or byte-swapped arrays, and non-arrays)");
  m.def("backends", [] {
    py::list result;
    for (size_t i = 0; i < tsr_backend_count(); ++i) {
      tsr_backend_details d{};
      d.struct_size = sizeof(d);
      check(tsr_backend_get_details(i, &d));
      py::dict entry;
      entry["name"] = d.name;
      entry["description"] = d.description;
      entry["default"] = d.used_by_default != 0;
      entry["version"] = d.version;
      entry["fallback"] = d.is_fallback != 0;
      entry["plugin_path"] = *d.plugin_path ? py::object(py::str(d.plugin_path)) : py::none();
      entry["plugin_abi"] = *d.plugin_abi ? py::object(py::str(d.plugin_abi)) : py::none();
      result.append(entry);
    }
    return result;
  });
  m.def("load_backend_plugin", [](const std::string& path) {
    const char* name = nullptr;
    check(tsr_load_backend_plugin(c_text(path), &name));
    return std::string(name);
  });
  m.def("is_artifact_file", [](const std::string& path) { return tsr_file_is_artifact(c_text(path)) != 0; });
  m.def("is_artifact_bytes", &is_artifact_bytes);

  py::class_<Options>(m, "Options")
      .def(py::init(&make_options), py::arg("settings") = std::vector<std::pair<std::string, std::string>>{},
           py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{});
  m.def("option_names", [] {
    std::vector<std::string> names;
    std::string all = tsr_option_names();
    for (size_t start = 0; start <= all.size();) {
      const size_t comma = std::min(all.find(',', start), all.size());
      names.push_back(all.substr(start, comma - start));
      start = comma + 1;
    }
    return names;
  }, "The compile options the C API takes by name (tsr_option_names).");

}

}  // namespace tessera_py
