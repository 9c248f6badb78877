// tessera._tessera: the Python bindings, over the C API only (tessera/tessera.h),
// never the core's internals. The user-facing API (InferenceSession, compile,
// per-shape variants, the exceptions) is python/tessera/__init__.py; this file
// converts tensors and errors:
//  - inputs: numpy arrays are read in place through the buffer they expose;
//    objects with __dlpack__ are consumed as DLPack capsules and read in
//    place; both are copied (and counted, copy_count()) only when not compact
//    row-major, not aligned to their element size or not in native byte order;
//  - outputs: Tessera allocates them (tsr_model_run_alloc) and they are handed
//    over without a copy, as numpy arrays owning the memory, or as Tensor
//    objects that export it through __dlpack__ (any number of times: every
//    export shares the one allocation, freed when the last holder lets go);
//  - models with sequence, optional or string inputs or outputs (which
//    tsr_model_run refuses) run through tsr_model_run_values instead: lists
//    become sequences, None an empty optional, numpy str (or object-of-str)
//    arrays string tensors, numeric tensors are copied into tsr_values; outputs
//    come back as lists (sequences), None (empty optionals) and numpy str
//    arrays; the tensors of sequences and optionals are copied out (values are
//    immutable and may share tensors), plain tensor outputs handed over as above;
//  - every tsr_status becomes an exception of the package's classes (set at
//    import by set_error_types), with the C API's message;
//  - the GIL is released while a model runs, and a model stays alive until
//    its last run returns even when its session is closed meanwhile.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/numpy.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace py = pybind11;

namespace {

// ----------------------------------------------------------------- errors --

/// The package's exception classes (never destroyed: they outlive interpreter teardown order).
struct ErrorTypes {
  py::object base, invalid_argument, unsupported, internal;
};
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

/// Calls `call` (a C API function returning a tsr_status*) with the GIL released, then raises its status.
template <typename Call>
void check_without_gil(Call&& call) {
  tsr_status* status;
  {
    py::gil_scoped_release release;
    status = call();
  }
  check(status);
}

/// Copies made to convert inputs (non-contiguous, misaligned, byte-swapped, or not arrays at all).
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

struct Options {
  tsr_options* options = nullptr;
  Options() { check(tsr_options_create(&options)); }
  ~Options() { tsr_options_free(options); }
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;
};

const tsr_options* native(const Options* options) { return options ? options->options : nullptr; }

/// A Python progress(phase, done, total) behind a C tsr_progress_fn: an exception it raises is kept,
/// later calls are skipped, and the caller re-raises it once the C call has returned (no exception
/// crosses the C API).
struct PythonProgress {
  py::object callback;
  std::string error;

  static void call(void* user, const char* phase, int64_t done, int64_t total) {
    auto* self = static_cast<PythonProgress*>(user);
    py::gil_scoped_acquire gil;
    if (!self->error.empty()) return;
    try {
      self->callback(phase, done, total);
    } catch (py::error_already_set& e) {
      self->error = e.what();
    }
  }
  /// Stops the C work once the callback raised (its exception is re-raised after the call).
  static int32_t stop(void* user) {
    auto* self = static_cast<PythonProgress*>(user);
    py::gil_scoped_acquire gil;
    return self->error.empty() ? 0 : 1;
  }
  /// Sets a C config's progress members when there is a callback.
  void install(tsr_progress_fn& fn, void*& user, tsr_stop_fn& stop_fn) {
    if (callback.is_none()) return;
    fn = &PythonProgress::call;
    user = this;
    stop_fn = &PythonProgress::stop;
  }
  /// The C call's status, after the callback's own exception when it raised (which stopped the call).
  void check_after(tsr_status* status, const char* what) const {
    if (!error.empty()) {
      tsr_status_free(status);
      rethrow(what);
    }
    check(status);
  }
  void rethrow(const char* what) const {
    if (!error.empty()) throw std::runtime_error(std::string(what) + ": the progress callback raised: " + error);
  }
};

/// Options from (name, text) settings, each set through tsr_options_set (the C API's one list of option
/// names; the package turns its typed values into that text), and the shapes to bind.
std::unique_ptr<Options> make_options(const std::vector<std::pair<std::string, std::string>>& settings,
                                      const std::map<std::string, std::vector<int64_t>>& shapes,
                                      const std::map<std::string, std::vector<int64_t>>& data_shapes) {
  auto options = std::make_unique<Options>();
  tsr_options* o = options->options;
  for (const auto& [name, value] : settings) check(tsr_options_set(o, c_text(name), c_text(value)));
  for (const auto& [name, dims] : shapes) check(tsr_options_set_input_shape(o, c_text(name), dims.data(), dims.size()));
  for (const auto& [name, dims] : data_shapes) {
    check(tsr_options_set_input_data_shape(o, c_text(name), dims.data(), dims.size()));
  }
  return options;
}

// ----------------------------------------------------------- value infos --

/// (name, dtype, shape or None, dim names or None, kind) for each input or output; for a sequence or an
/// optional, dtype and shape are those of the tensors it holds.
template <typename Count, typename Info, typename Handle>
py::list value_infos(const Handle* handle, Count count, Info info) {
  py::list result;
  for (size_t i = 0; i < count(handle); ++i) {
    tsr_value_info v{};
    v.struct_size = sizeof(v);
    check(info(handle, i, &v));
    py::object shape = py::none(), names = py::none();
    if (v.ndim >= 0) {
      py::list s, n;
      for (int32_t d = 0; d < v.ndim; ++d) {
        s.append(v.shape[d]);
        n.append(v.dim_names ? py::str(v.dim_names[d]) : py::str(""));
      }
      shape = s;
      names = n;
    }
    result.append(py::make_tuple(v.name, dtype_name(v.dtype), shape, names, kind_name(v.kind)));
  }
  return result;
}

// ----------------------------------------------------------------- inputs --

/// Frees a DLManagedTensor (its producer's deleter).
void free_managed(DLManagedTensor* m) {
  if (m && m->deleter) m->deleter(m);
}

bool compact_row_major(const DLTensor& t) {
  if (!t.strides) return true;
  int64_t expected = 1;
  for (int32_t d = t.ndim; d-- > 0;) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

/// The inputs of one run: DLTensors over the callers' memory, kept alive until the run is over.
class RunInputs {
 public:
  RunInputs() = default;
  RunInputs(const RunInputs&) = delete;
  RunInputs& operator=(const RunInputs&) = delete;
  ~RunInputs() {
    for (DLManagedTensor* m : managed_) free_managed(m);  // with the GIL: a producer's deleter may touch Python objects
  }

  void add(py::handle object, const std::string& name, DLDataType wanted) {
    add_as(object, "input '" + name + "'", wanted);
  }
  /// Same, `what` naming the input in messages ("input 'x'", "input 's' item 2").
  void add_as(py::handle object, const std::string& what, DLDataType wanted) {
    if (object.is_none()) invalid(what + " is None");
    if (py::isinstance<py::array>(object)) return add_array(py::reinterpret_borrow<py::array>(object), what);
    if (py::hasattr(object, "__dlpack__")) return add_dlpack(object, what);
    // Lists, scalars, anything numpy can turn into an array: converted to the input's dtype.
    py::dtype dtype;
    py::object converted;
    try {
      converted = numpy_dtype_of(wanted, dtype) ? numpy().attr("asarray")(object, dtype) : numpy().attr("asarray")(object);
    } catch (py::error_already_set& e) {
      invalid(what + ": cannot convert a " + std::string(py::str(object.get_type().attr("__name__"))) +
              " to an array: " + e.what());
    }
    ++g_input_copies;
    add_array(py::reinterpret_borrow<py::array>(converted), what);
  }

  const std::vector<DLTensor>& tensors() const { return tensors_; }

 private:
  void add_array(py::array array, const std::string& what) {
    DLDataType dtype;
    if (!dl_dtype_of(array.dtype(), dtype)) {
      invalid(what + ": numpy dtype " + std::string(py::str(array.dtype())) + " has no Tessera type");
    }
    const bool native_order = array.dtype().byteorder() != '>';
    const bool aligned = reinterpret_cast<uintptr_t>(array.data()) % static_cast<uintptr_t>(array.itemsize()) == 0;
    if (!(array.flags() & py::array::c_style) || !aligned || !native_order) {
      // (A fresh array: numpy.ascontiguousarray returns a contiguous but misaligned one as it is.)
      array = numpy().attr("array")(array, py::arg("dtype") = array.dtype().attr("newbyteorder")("="),
                                    py::arg("order") = "C", py::arg("copy") = true);
      ++g_input_copies;
    }
    std::vector<int64_t>& shape = shapes_.emplace_back(array.shape(), array.shape() + array.ndim());
    DLTensor t{};
    t.data = const_cast<void*>(array.data());
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(array.ndim());
    t.dtype = dtype;
    t.shape = shape.data();
    tensors_.push_back(t);
    keep_.push_back(std::move(array));
  }

  void add_dlpack(py::handle object, const std::string& what) {
    py::object capsule;
    try {
      capsule = object.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      invalid(what + ": its __dlpack__ failed: " + e.what());
    }
    if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
      invalid(what + ": __dlpack__ did not return an unused DLPack capsule");
    }
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // ours now: its producer's capsule destructor leaves it
    managed_.push_back(managed);
    const DLTensor& t = managed->dl_tensor;
    if (t.device.device_type != kDLCPU) {
      invalid(what + " is on DLPack device type " + std::to_string(t.device.device_type) +
              "; Tessera runs on the CPU (kDLCPU = 1)");
    }
    if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0 || t.dtype.bits == 0) {
      invalid(what + ": unsupported DLPack dtype (code " + std::to_string(t.dtype.code) + ", bits " +
              std::to_string(t.dtype.bits) + ", lanes " + std::to_string(t.dtype.lanes) + ")");
    }
    char* data = static_cast<char*>(t.data) + t.byte_offset;
    const size_t item = t.dtype.bits / 8;
    if (compact_row_major(t) && reinterpret_cast<uintptr_t>(data) % item == 0) {
      DLTensor view = t;
      view.data = data;
      view.byte_offset = 0;
      view.strides = nullptr;
      tensors_.push_back(view);
      return;
    }
    // Strided or misaligned: gathered into a compact buffer.
    int64_t count = 1;
    for (int32_t d = 0; d < t.ndim; ++d) count *= t.shape[d];
    // (numpy.empty: an array pybind11 allocates itself without a base is not writeable.)
    py::array copy = numpy().attr("empty")(count * static_cast<int64_t>(item), "uint8");
    char* out = static_cast<char*>(copy.mutable_data());
    std::vector<int64_t> index(static_cast<size_t>(t.ndim), 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = 0;
      for (int32_t d = 0; d < t.ndim; ++d) offset += index[static_cast<size_t>(d)] * (t.strides ? t.strides[d] : 0);
      std::memcpy(out + i * static_cast<int64_t>(item), data + offset * static_cast<int64_t>(item), item);
      for (int32_t d = t.ndim; d-- > 0;) {
        if (++index[static_cast<size_t>(d)] < t.shape[d]) break;
        index[static_cast<size_t>(d)] = 0;
      }
    }
    ++g_input_copies;
    std::vector<int64_t>& shape = shapes_.emplace_back(t.shape, t.shape + t.ndim);
    DLTensor view{};
    view.data = out;
    view.device = {kDLCPU, 0};
    view.ndim = t.ndim;
    view.dtype = t.dtype;
    view.shape = shape.data();
    tensors_.push_back(view);
    keep_.push_back(std::move(copy));
  }

  std::vector<py::object> keep_;
  std::vector<DLManagedTensor*> managed_;
  std::vector<std::vector<int64_t>> shapes_;  // tensors_ point into these (moving a vector keeps its buffer)
  std::vector<DLTensor> tensors_;
};

// ---------------------------------------------------------------- outputs --

/// One output allocation, shared by every export of it (numpy arrays, DLPack consumers).
using SharedOutput = std::shared_ptr<DLManagedTensor>;

SharedOutput share(DLManagedTensor* managed) { return SharedOutput(managed, free_managed); }

/// A DLManagedTensor handed to a DLPack consumer: its own shape copy, and a
/// reference to the shared allocation, released by its deleter.
struct Export {
  DLManagedTensor managed{};
  SharedOutput owner;
  std::vector<int64_t> shape;
};

DLManagedTensor* export_of(const SharedOutput& owner, bool bool_as_uint8) {
  auto* e = new Export();
  e->owner = owner;
  const DLTensor& src = owner->dl_tensor;
  e->shape.assign(src.shape, src.shape + src.ndim);
  e->managed.dl_tensor = src;
  e->managed.dl_tensor.shape = e->shape.data();
  e->managed.dl_tensor.strides = nullptr;
  if (bool_as_uint8 && is_bool(src.dtype)) e->managed.dl_tensor.dtype = {kDLUInt, 8, 1};
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); };
  return &e->managed;
}

/// A capsule's destructor: frees the tensor unless a consumer took it (renamed it "used_dltensor").
void dlpack_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    free_managed(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor")));
  }
}

/// A Tessera-allocated output exposed through DLPack (run(..., as_dlpack=True)).
class Tensor {
 public:
  explicit Tensor(SharedOutput output) : output_(std::move(output)) {}

  /// DLPack 0.6 has no bool: torch and numpy refuse code 6, so a bool tensor is exported as uint8 (0 or 1).
  py::capsule dlpack(py::object stream) const {
    if (!stream.is_none()) invalid("Tessera tensors are on the CPU: __dlpack__ takes no stream");
    DLManagedTensor* managed = export_of(output_, true);
    PyObject* capsule = PyCapsule_New(managed, "dltensor", dlpack_capsule_destructor);
    if (!capsule) {
      free_managed(managed);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(capsule);
  }
  py::tuple dlpack_device() const { return py::make_tuple(static_cast<int>(kDLCPU), 0); }
  std::vector<int64_t> shape() const {
    const DLTensor& t = output_->dl_tensor;
    return std::vector<int64_t>(t.shape, t.shape + t.ndim);
  }
  std::string dtype() const { return dtype_name(output_->dl_tensor.dtype); }
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(output_->dl_tensor.data); }
  int64_t nbytes() const {
    int64_t n = output_->dl_tensor.dtype.bits / 8;
    for (int64_t d : shape()) n *= d;
    return n;
  }
  const SharedOutput& output() const { return output_; }

 private:
  SharedOutput output_;
};

/// A numpy array over the output's memory, which it keeps alive.
py::array numpy_view(const SharedOutput& output, const std::string& name) {
  const DLTensor& t = output->dl_tensor;
  py::dtype dtype;
  if (!numpy_dtype_of(t.dtype, dtype)) {
    raise(TSR_UNSUPPORTED, "output '" + name + "' is " + dtype_name(t.dtype) +
                               ", which numpy has no type for: run with as_dlpack=True and read it with torch");
  }
  auto* holder = new SharedOutput(output);
  py::capsule base(holder, [](void* p) { delete static_cast<SharedOutput*>(p); });
  std::vector<py::ssize_t> shape(t.shape, t.shape + t.ndim);
  return py::array(dtype, shape, {}, t.data, base);
}

// ----------------------------------------------------------------- values --
// Models with sequence, optional or string inputs or outputs run through
// tsr_model_run_values: each input becomes a tsr_value (numeric tensors are
// copied into it once), each output a Python object (below).

using ValuePtr = std::unique_ptr<tsr_value, void (*)(tsr_value*)>;
ValuePtr own_value(tsr_value* value) { return ValuePtr(value, tsr_value_free); }

/// A model input or output as tsr_value_info describes it.
struct IoSpec {
  std::string name;
  DLDataType dtype{};
  int32_t kind = TSR_VALUE_TENSOR;
};

template <typename Count, typename Info>
std::vector<IoSpec> io_specs(const tsr_model* model, Count count, Info info) {
  std::vector<IoSpec> specs;
  for (size_t i = 0; i < count(model); ++i) {
    tsr_value_info v{};
    v.struct_size = sizeof(v);
    check(info(model, i, &v));
    specs.push_back({v.name, v.dtype, v.kind});
  }
  return specs;
}

/// Why the model runs through tsr_model_run_values ("input 's' is a sequence"), or "" when it has only
/// numeric and bool tensor inputs and outputs (tsr_model_run refuses the others).
std::string values_reason(const tsr_model* model) {
  const char* what[] = {"input", "output"};
  int k = 0;
  for (const auto& specs : {io_specs(model, tsr_model_input_count, tsr_model_input_info),
                            io_specs(model, tsr_model_output_count, tsr_model_output_info)}) {
    for (const IoSpec& s : specs) {
      if (s.kind != TSR_VALUE_TENSOR) return std::string(what[k]) + " '" + s.name + "' is " + kind_phrase(s.kind);
      if (is_string(s.dtype)) return std::string(what[k]) + " '" + s.name + "' is a string tensor";
    }
    ++k;
  }
  return "";
}

/// "a list", "None", "a numpy array", "a float", for messages.
std::string type_phrase(py::handle object) {
  if (object.is_none()) return "None";
  if (py::isinstance<py::array>(object)) return "a numpy array";
  const std::string name = py::str(object.get_type().attr("__name__"));
  const bool vowel = !name.empty() && std::string("aeiouAEIOU").find(name[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + name;
}

bool is_list_or_tuple(py::handle object) { return PyList_Check(object.ptr()) || PyTuple_Check(object.ptr()); }

/// A list or tuple holding an array (numpy or __dlpack__): what a sequence is given as, never one tensor.
bool holds_arrays(py::handle object) {
  if (!is_list_or_tuple(object)) return false;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(object)) {
    if (py::isinstance<py::array>(item) || py::hasattr(item, "__dlpack__")) return true;
  }
  return false;
}

/// A string tensor from a numpy array of dtype kind 'U', or 'O' whose elements are all str.
ValuePtr string_value(const py::array& array, const std::string& what) {
  py::list items = array.attr("ravel")().attr("tolist")();
  std::vector<const char*> bytes(items.size());
  std::vector<size_t> lengths(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    py::handle item = items[i];
    if (!PyUnicode_Check(item.ptr())) {
      invalid(what + ": element " + std::to_string(i) + " of the object array is " + type_phrase(item) +
              "; a string tensor is given as a numpy str array or an object array of str");
    }
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(item.ptr(), &size);  // lives as long as the str, which `items` holds
    if (!utf8) {
      PyErr_Clear();
      invalid(what + ": element " + std::to_string(i) + " cannot be encoded as UTF-8");
    }
    bytes[i] = utf8;
    lengths[i] = static_cast<size_t>(size);
  }
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  tsr_value* value = nullptr;
  check(tsr_value_create_strings(bytes.data(), lengths.data(), shape.data(), static_cast<int32_t>(shape.size()), &value));
  return own_value(value);
}

bool is_string_array(py::handle object) {
  if (!py::isinstance<py::array>(object)) return false;
  const char kind = py::reinterpret_borrow<py::array>(object).dtype().kind();
  return kind == 'U' || kind == 'O';
}

/// A tensor value (numeric, bool or strings) from an array, a __dlpack__ object or an array-like.
ValuePtr tensor_value(py::handle object, const IoSpec& spec, const std::string& what) {
  py::object given = py::reinterpret_borrow<py::object>(object);
  if (!py::isinstance<py::array>(given) && !py::hasattr(given, "__dlpack__")) {
    if (holds_arrays(given)) {
      invalid(what + " is " + kind_phrase(spec.kind) + ", but " + type_phrase(given) +
              " of arrays (a sequence) was given; give one array");
    }
    if (is_string(spec.dtype)) {  // a str, or a (nested) list of str
      try {
        given = numpy().attr("asarray")(given);
      } catch (py::error_already_set& e) {
        invalid(what + ": cannot convert " + type_phrase(object) + " to an array: " + e.what());
      }
    }
  }
  if (is_string_array(given)) return string_value(py::reinterpret_borrow<py::array>(given), what);
  RunInputs held;
  held.add_as(given, what, spec.dtype);
  const DLTensor tensor = held.tensors().back();
  tsr_value* value = nullptr;
  check_without_gil([&] { return tsr_value_create_tensor(&tensor, &value); });  // the copy; `held` keeps the source
  return own_value(value);
}

ValuePtr sequence_value(py::handle object, const IoSpec& spec, const std::string& what) {
  std::vector<ValuePtr> items;
  std::vector<const tsr_value*> raw;
  size_t k = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(object)) {
    const std::string item_what = what + " item " + std::to_string(k++);
    if (item.is_none()) invalid(item_what + " is None; a sequence holds tensors");
    IoSpec tensor_spec = spec;
    tensor_spec.kind = TSR_VALUE_TENSOR;
    items.push_back(tensor_value(item, tensor_spec, item_what));
    raw.push_back(items.back().get());
  }
  tsr_value* value = nullptr;
  tsr_status* status = tsr_value_create_sequence(raw.data(), raw.size(), &value);
  if (status) {
    const std::string message = tsr_status_message(status);
    const tsr_status_code code = tsr_status_code_of(status);
    tsr_status_free(status);
    raise(code, what + ": " + message);
  }
  return own_value(value);
}

/// An input's tsr_value, checked against the input's kind.
ValuePtr input_value(py::handle object, const IoSpec& spec) {
  const std::string what = "input '" + spec.name + "'";
  const bool is_list = is_list_or_tuple(object);
  tsr_value* value = nullptr;
  switch (spec.kind) {
    case TSR_VALUE_TENSOR:
      if (object.is_none()) invalid(what + " is None, but it is a tensor (not optional): give an array");
      return tensor_value(object, spec, what);
    case TSR_VALUE_SEQUENCE:
      if (!is_list) {
        invalid(what + " is a sequence, but " + type_phrase(object) + " was given; give a list or tuple of arrays" +
                (object.is_none() ? " ([] for an empty sequence; the input is not optional)" : ""));
      }
      return sequence_value(object, spec, what);
    case TSR_VALUE_OPTIONAL_TENSOR: {
      if (object.is_none()) {
        check(tsr_value_create_optional(nullptr, TSR_VALUE_OPTIONAL_TENSOR, &value));
        return own_value(value);
      }
      ValuePtr content = tensor_value(object, spec, what);
      check(tsr_value_create_optional(content.get(), TSR_VALUE_OPTIONAL_TENSOR, &value));
      return own_value(value);
    }
    case TSR_VALUE_OPTIONAL_SEQUENCE: {
      if (object.is_none()) {
        check(tsr_value_create_optional(nullptr, TSR_VALUE_OPTIONAL_SEQUENCE, &value));
        return own_value(value);
      }
      if (!is_list) {
        invalid(what + " is an optional sequence, but " + type_phrase(object) +
                " was given; give a list or tuple of arrays, or None");
      }
      ValuePtr content = sequence_value(object, spec, what);
      check(tsr_value_create_optional(content.get(), TSR_VALUE_OPTIONAL_SEQUENCE, &value));
      return own_value(value);
    }
    default:
      raise(TSR_UNSUPPORTED, what + " is of a kind (" + std::to_string(spec.kind) + ") these bindings do not know");
  }
}

/// A DLManagedTensor over one tensor of an output value, which it keeps alive (no copy).
struct ValueExport {
  DLManagedTensor managed{};
  std::shared_ptr<tsr_value> owner;
  std::vector<int64_t> shape;
};

/// A DLManagedTensor owning a copy of a tensor (64-byte aligned).
struct CopiedTensor {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  void* data = nullptr;
  ~CopiedTensor() { ::operator delete(data, std::align_val_t(64)); }
};

SharedOutput shared_tensor(const std::shared_ptr<tsr_value>& owner, const DLTensor& t, bool copy) {
  if (!copy) {
    auto* e = new ValueExport();
    e->owner = owner;
    e->shape.assign(t.shape, t.shape + t.ndim);
    e->managed.dl_tensor = t;
    e->managed.dl_tensor.shape = e->shape.data();
    e->managed.dl_tensor.strides = nullptr;
    e->managed.manager_ctx = e;
    e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<ValueExport*>(self->manager_ctx); };
    return share(&e->managed);
  }
  auto c = std::make_unique<CopiedTensor>();
  c->shape.assign(t.shape, t.shape + t.ndim);
  size_t bytes = (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  for (int64_t d : c->shape) bytes *= static_cast<size_t>(d);
  c->data = ::operator new(bytes ? bytes : 1, std::align_val_t(64));
  if (bytes) std::memcpy(c->data, static_cast<const char*>(t.data) + t.byte_offset, bytes);
  c->managed.dl_tensor = t;
  c->managed.dl_tensor.data = c->data;
  c->managed.dl_tensor.byte_offset = 0;
  c->managed.dl_tensor.shape = c->shape.data();
  c->managed.dl_tensor.strides = nullptr;
  c->managed.manager_ctx = c.get();
  c->managed.deleter = [](DLManagedTensor* self) { delete static_cast<CopiedTensor*>(self->manager_ctx); };
  return share(&c.release()->managed);
}

/// A string tensor of a value as a numpy str array of its shape (UTF-8 decoded; invalid bytes become U+FFFD;
/// numpy drops trailing NULs).
py::object string_array(const tsr_value* value, size_t index, const DLTensor& t) {
  int64_t count = 1;
  for (int32_t d = 0; d < t.ndim; ++d) count *= t.shape[d];
  py::list items;
  for (int64_t e = 0; e < count; ++e) {
    const char* bytes = nullptr;
    size_t length = 0;
    check(tsr_value_string(value, index, e, &bytes, &length));
    PyObject* text = PyUnicode_DecodeUTF8(bytes, static_cast<Py_ssize_t>(length), "replace");
    if (!text) throw py::error_already_set();
    items.append(py::reinterpret_steal<py::str>(text));
  }
  py::tuple shape(t.ndim);
  for (int32_t d = 0; d < t.ndim; ++d) shape[static_cast<size_t>(d)] = t.shape[d];
  return numpy().attr("array")(items, py::arg("dtype") = "str").attr("reshape")(shape);
}

/// The index-th tensor of an output value: a numpy array (a str array for strings) or, as_dlpack, a Tensor
/// (string tensors stay numpy arrays: DLPack has no strings). `copy`: for tensors of sequences and
/// optionals, which may share memory with each other or with the model's constants.
py::object tensor_object(const std::shared_ptr<tsr_value>& value, size_t index, const std::string& name, bool copy,
                         bool as_dlpack) {
  const DLTensor* t = nullptr;
  check(tsr_value_tensor(value.get(), index, &t));
  if (is_string(t->dtype)) return string_array(value.get(), index, *t);
  SharedOutput output = shared_tensor(value, *t, copy);
  if (as_dlpack) return py::cast(Tensor(output));
  return numpy_view(output, name);
}

/// An output value as Python: a tensor as an array, a sequence as a list of arrays, an optional as None or
/// its content.
py::object output_object(tsr_value* raw, const std::string& name, bool as_dlpack) {
  std::shared_ptr<tsr_value> value(raw, tsr_value_free);
  int32_t kind = 0, present = 0;
  size_t count = 0;
  check(tsr_value_describe(value.get(), &kind, &present, &count));
  if (kind == TSR_VALUE_TENSOR) return tensor_object(value, 0, name, false, as_dlpack);
  if (!present) return py::none();
  if (kind == TSR_VALUE_OPTIONAL_TENSOR) return tensor_object(value, 0, name, true, as_dlpack);
  py::list items;
  for (size_t i = 0; i < count; ++i) {
    items.append(tensor_object(value, i, name + "[" + std::to_string(i) + "]", true, as_dlpack));
  }
  return items;
}

// ------------------------------------------------------------------ model --

using ModelPtr = std::shared_ptr<tsr_model>;

/// A loaded model. close() drops this handle's reference; runs in flight
/// hold their own, so the model is freed when the last of them returns.
class Model {
 public:
  explicit Model(tsr_model* model) : model_(model, tsr_model_free), values_reason_(values_reason(model)) {}

  static Model load_path(const std::string& path, const Options* options) {
    tsr_model* model = nullptr;
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_model_load(file, native(options), &model); });
    return Model(model);
  }
  static Model load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;  // bytes are immutable: safe to read without the GIL
    tsr_model* model = nullptr;
    const char* label = c_text(name);
    check_without_gil([&] { return tsr_model_load_from_memory(data.data(), data.size(), label, native(options), &model); });
    return Model(model);
  }

  ModelPtr get() const {
    ModelPtr model = model_;
    if (!model) invalid("the session is closed");
    return model;
  }
  void close() { model_.reset(); }
  bool closed() const { return !model_; }

  py::list inputs() const { return value_infos(get().get(), tsr_model_input_count, tsr_model_input_info); }
  py::list outputs() const { return value_infos(get().get(), tsr_model_output_count, tsr_model_output_info); }

  void save(const std::string& path) const {
    ModelPtr model = get();
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_model_save(model.get(), file); });
  }
  py::bytes to_bytes() const {
    ModelPtr model = get();
    void* data = nullptr;
    size_t size = 0;
    check(tsr_model_save_to_memory(model.get(), &data, &size));
    py::bytes result(static_cast<const char*>(data), size);
    tsr_buffer_free(data);
    return result;
  }

  py::list placement() const {
    ModelPtr model = get();
    py::list nodes;
    for (size_t i = 0; i < tsr_model_node_count(model.get()); ++i) {
      const char *name = nullptr, *op = nullptr, *backend = nullptr, *note = nullptr, *reason = nullptr;
      int64_t region = -1;
      check(tsr_model_node_placement(model.get(), i, &name, &op, &backend));
      check(tsr_model_node_note(model.get(), i, &note));
      check(tsr_model_node_region(model.get(), i, &region, &reason));
      py::dict node;
      node["node"] = name;
      node["op_type"] = op;
      node["backend"] = backend;
      node["region"] = region;
      node["reason"] = reason;
      node["note"] = note;
      const char *precision = nullptr, *precision_note = nullptr;
      check(tsr_model_node_precision(model.get(), i, &precision, &precision_note));
      node["precision"] = precision;
      node["precision_note"] = precision_note;
      nodes.append(node);
    }
    return nodes;
  }
  py::list regions() const {
    ModelPtr model = get();
    py::list regions;
    for (size_t i = 0; i < tsr_model_region_count(model.get()); ++i) {
      tsr_region_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_region_info(model.get(), i, &info));
      py::dict r;
      r["backend"] = info.backend;
      r["memory_space"] = info.memory_space;
      r["nodes"] = info.node_count;
      r["inputs"] = info.input_count;
      r["outputs"] = info.output_count;
      r["payload_bytes"] = info.payload_bytes;
      regions.append(r);
    }
    return regions;
  }
  py::dict summary() const {
    ModelPtr model = get();
    py::dict s;
    int64_t copies = 0, bytes = 0;
    check(tsr_model_copies_per_run(model.get(), &copies, &bytes));
    s["arena_bytes"] = tsr_model_arena_bytes(model.get());
    s["constant_bytes"] = tsr_model_constant_bytes(model.get());
    s["parameter_count"] = tsr_model_parameter_count(model.get());
    s["copies_per_run"] = copies;
    s["copy_bytes_per_run"] = bytes;
    py::dict metadata;
    for (size_t i = 0; i < tsr_model_metadata_count(model.get()); ++i) {
      const char *key = nullptr, *value = nullptr;
      check(tsr_model_metadata(model.get(), i, &key, &value));
      metadata[key] = value;
    }
    s["metadata"] = metadata;
    return s;
  }

  /// Runs on `inputs` (one object per model input, in model order).
  /// Returns numpy arrays, or Tensor objects when as_dlpack.
  py::list run(const py::sequence& inputs, bool as_dlpack) const {
    ModelPtr model = get();
    if (!values_reason_.empty()) return run_values(model, inputs, as_dlpack);
    std::vector<SharedOutput> outputs = run_raw(model, inputs, nullptr);
    return wrap_outputs(model, outputs, as_dlpack);
  }

  /// Runs `runs` times and returns (outputs of the last run, per-node ms,
  /// per-region ms, per-region fallbacks, copies, copy bytes), all summed over the runs.
  py::tuple profile(const py::sequence& inputs, int runs, bool as_dlpack) const {
    if (runs < 1) invalid("runs must be at least 1");
    ModelPtr model = get();
    refuse_values("profile");
    std::vector<double> nodes(tsr_model_node_count(model.get()), 0.0), regions(tsr_model_region_count(model.get()), 0.0);
    std::vector<int64_t> fallbacks(regions.size(), 0);
    tsr_run_profile profile{};
    profile.struct_size = sizeof(profile);
    profile.node_milliseconds = nodes.data();
    profile.num_nodes = nodes.size();
    profile.region_milliseconds = regions.data();
    profile.num_regions = regions.size();
    profile.region_fallbacks = fallbacks.data();
    std::vector<SharedOutput> outputs;
    for (int r = 0; r < runs; ++r) outputs = run_raw(model, inputs, &profile);
    return py::make_tuple(wrap_outputs(model, outputs, as_dlpack), nodes, regions, fallbacks, profile.copies,
                          profile.copy_bytes);
  }

  /// The accuracy check (tsr_model_check): (table text, JSON text, HTML page, regions over tolerance).
  py::tuple check_accuracy(const py::sequence& inputs, double tolerance, double min_cosine, bool float64_reference,
                           const std::string& name) const {
    ModelPtr model = get();
    refuse_values("check");
    RunInputs held;
    hold_inputs(model, inputs, held);
    const std::vector<DLTensor>& in = held.tensors();
    char* table = nullptr;
    char* json = nullptr;
    char* html = nullptr;
    size_t flagged = 0;
    tsr_check_config config{};
    config.struct_size = sizeof(config);
    config.tolerance = tolerance;
    config.min_cosine = min_cosine;
    config.float64_reference = float64_reference ? 1 : 0;
    config.model_name = c_text(name);  // with the GIL held: a NUL byte raises
    check_without_gil([&] { return tsr_model_check(model.get(), in.data(), in.size(), &config, &table, &json, &html, &flagged); });
    const std::string table_text = table, json_text = json, html_text = html;
    tsr_string_free(table);
    tsr_string_free(json);
    tsr_string_free(html);
    return py::make_tuple(table_text, json_text, html_text, flagged);
  }

  std::string report(const std::string& format, const std::string& name) const {
    ModelPtr model = get();
    char* text = nullptr;
    check(tsr_model_report(model.get(), c_text(format), c_text(name), nullptr, &text));
    std::string result = text;
    tsr_string_free(text);
    return result;
  }

 private:
  /// Profiles and accuracy checks take numeric tensors only.
  void refuse_values(const std::string& what) const {
    if (!values_reason_.empty()) {
      raise(TSR_UNSUPPORTED, what + " runs models with tensor inputs and outputs of numbers and bools only, but " +
                                 values_reason_ + " (run() takes it)");
    }
  }

  /// A run through tsr_model_run_values: inputs converted to values (checked against each input's kind),
  /// outputs to arrays, lists (sequences) and None (empty optionals).
  static py::list run_values(const ModelPtr& model, const py::sequence& inputs, bool as_dlpack) {
    const std::vector<IoSpec> in = io_specs(model.get(), tsr_model_input_count, tsr_model_input_info);
    const std::vector<IoSpec> out = io_specs(model.get(), tsr_model_output_count, tsr_model_output_info);
    if (inputs.size() != in.size()) {
      invalid("the model has " + std::to_string(in.size()) + " inputs but " + std::to_string(inputs.size()) +
              " were given");
    }
    std::vector<ValuePtr> values;
    std::vector<const tsr_value*> raw;
    for (size_t i = 0; i < in.size(); ++i) {
      values.push_back(input_value(inputs[i], in[i]));
      raw.push_back(values.back().get());
    }
    std::vector<tsr_value*> results(out.size(), nullptr);
    check_without_gil([&] {  // on failure every output is NULL
      return tsr_model_run_values(model.get(), raw.data(), raw.size(), results.data(), results.size());
    });
    std::vector<ValuePtr> owned;
    owned.reserve(results.size());
    for (tsr_value* r : results) owned.push_back(own_value(r));
    values.clear();
    py::list objects;
    for (size_t i = 0; i < owned.size(); ++i) objects.append(output_object(owned[i].release(), out[i].name, as_dlpack));
    return objects;
  }

  /// One DLTensor per model input (in model order), checked against the model's count and dtypes.
  static void hold_inputs(const ModelPtr& model, const py::sequence& inputs, RunInputs& held) {
    const size_t num_inputs = tsr_model_input_count(model.get());
    if (inputs.size() != num_inputs) {
      invalid("the model has " + std::to_string(num_inputs) + " inputs but " + std::to_string(inputs.size()) +
              " were given");
    }
    for (size_t i = 0; i < num_inputs; ++i) {
      tsr_value_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_input_info(model.get(), i, &info));
      held.add(inputs[i], info.name, info.dtype);
    }
  }

  std::vector<SharedOutput> run_raw(const ModelPtr& model, const py::sequence& inputs, tsr_run_profile* profile) const {
    const size_t num_outputs = tsr_model_output_count(model.get());
    RunInputs held;
    hold_inputs(model, inputs, held);
    std::vector<DLManagedTensor*> raw(num_outputs, nullptr);
    const std::vector<DLTensor>& in = held.tensors();
    check_without_gil([&] {  // on failure every output is NULL
      return profile ? tsr_model_run_with_profile(model.get(), in.data(), in.size(), raw.data(), raw.size(), profile)
                     : tsr_model_run_alloc(model.get(), in.data(), in.size(), raw.data(), raw.size());
    });
    std::vector<SharedOutput> outputs;
    outputs.reserve(raw.size());
    for (DLManagedTensor* m : raw) outputs.push_back(share(m));
    return outputs;
  }

  py::list wrap_outputs(const ModelPtr& model, const std::vector<SharedOutput>& outputs, bool as_dlpack) const {
    py::list result;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (as_dlpack) {
        result.append(Tensor(outputs[i]));
      } else {
        tsr_value_info info{};
        info.struct_size = sizeof(info);
        check(tsr_model_output_info(model.get(), i, &info));
        result.append(numpy_view(outputs[i], info.name));
      }
    }
    return result;
  }

  ModelPtr model_;
  std::string values_reason_;  // why runs go through tsr_model_run_values, "" when they need not
};

// ----------------------------------------------------------------- source --

class Source {
 public:
  static Source load_path(const std::string& path, const Options* options) {
    tsr_source* source = nullptr;
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_source_load(file, native(options), &source); });
    return Source(source);
  }
  static Source load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;
    tsr_source* source = nullptr;
    const char* label = c_text(name);
    check_without_gil([&] { return tsr_source_load_from_memory(data.data(), data.size(), label, native(options), &source); });
    return Source(source);
  }

  py::list inputs() const { return value_infos(source_.get(), tsr_source_input_count, tsr_source_input_info); }
  py::list outputs() const { return value_infos(source_.get(), tsr_source_output_count, tsr_source_output_info); }

  Model compile(const Options* options) const {
    tsr_model* model = nullptr;
    check_without_gil([&] { return tsr_source_compile(source_.get(), native(options), &model); });
    return Model(model);
  }

 private:
  explicit Source(tsr_source* source) : source_(source, tsr_source_free) {}
  std::shared_ptr<tsr_source> source_;
};

bool is_artifact_bytes(const py::bytes& bytes) {
  const std::string_view data = bytes;
  return data.size() >= 8 && std::memcmp(data.data(), "TSRARTF\0", 8) == 0;
}

}  // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's bindings over its C API (use the tessera package, not this module)";

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
  // Static quantization (tessera.quantize): samples is a list of lists of arrays (one per model input,
  // in input order), or empty for `random` random samples; progress(phase, done, total) may be None.
  m.def("quantize", [](const std::string& model, const std::string& output, const Options* options, py::list samples,
                       const std::string& method, double percentile, bool per_channel, const std::string& exclude,
                       int random, uint64_t seed, py::object progress) {
    PythonProgress state{progress, ""};
    tsr_quantize_config config{};
    config.struct_size = sizeof(config);
    config.method = c_text(method);
    config.percentile = percentile;
    config.per_channel = per_channel ? 1 : 0;
    config.exclude = exclude.empty() ? nullptr : c_text(exclude);
    config.random_samples = random;
    config.seed = seed;
    state.install(config.progress, config.progress_user, config.stop);
    tsr_quantizer* raw = nullptr;
    check(tsr_quantizer_create(c_text(model), native(options), &config, &raw));
    std::unique_ptr<tsr_quantizer, void (*)(tsr_quantizer*)> quantizer(raw, tsr_quantizer_free);
    for (size_t k = 0; k < samples.size(); ++k) {
      RunInputs inputs;
      py::list tensors = py::reinterpret_borrow<py::list>(samples[k]);
      for (size_t i = 0; i < tensors.size(); ++i) {
        inputs.add(tensors[i], "sample " + std::to_string(k) + " input " + std::to_string(i), DLDataType{kDLFloat, 32, 1});
      }
      check(tsr_quantizer_add_sample(quantizer.get(), inputs.tensors().data(), inputs.tensors().size()));
    }
    char* summary = nullptr;
    const char* file = c_text(output);
    tsr_status* status = nullptr;
    {
      py::gil_scoped_release release;
      status = tsr_quantizer_write(quantizer.get(), file, &summary);
    }
    state.check_after(status, "quantize");  // a raising callback stopped it: nothing was written
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    return text;
  });
  // Measured placement (tessera.tune): writes the tuning record, returns the summary table.
  m.def("tune", [](const std::string& model, const std::string& output, const Options* options, double budget,
                   py::object progress) {
    PythonProgress state{progress, ""};
    tsr_tune_config config{};
    config.struct_size = sizeof(config);
    config.budget_seconds = budget;
    state.install(config.progress, config.progress_user, config.stop);
    char* summary = nullptr;
    const char* model_file = c_text(model);
    const char* file = c_text(output);
    tsr_status* status = nullptr;
    {
      py::gil_scoped_release release;
      status = tsr_tune(model_file, native(options), &config, file, &summary);
    }
    state.check_after(status, "tune");  // a raising callback stopped it: no record was written
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    return text;
  });
  m.def("is_artifact_file", [](const std::string& path) { return tsr_file_is_artifact(c_text(path)) != 0; });
  m.def("is_artifact_bytes", &is_artifact_bytes);

  py::class_<Options>(m, "Options")
      .def(py::init(&make_options), py::arg("settings") = std::vector<std::pair<std::string, std::string>>{},
           py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
           py::arg("data_shapes") = std::map<std::string, std::vector<int64_t>>{});
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

  py::class_<Tensor>(m, "Tensor", "An output Tessera allocated, shared without copies through DLPack")
      .def("__dlpack__", &Tensor::dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &Tensor::dlpack_device)
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("data_ptr", &Tensor::data_ptr)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("numpy", [](const Tensor& t) { return numpy_view(t.output(), "tensor"); },
           "A numpy array over the same memory (no copy)");

  py::class_<Model>(m, "Model")
      .def_static("load_path", &Model::load_path, py::arg("path"), py::arg("options").none(true))
      .def_static("load_bytes", &Model::load_bytes, py::arg("data"), py::arg("name"), py::arg("options").none(true))
      .def("inputs", &Model::inputs)
      .def("outputs", &Model::outputs)
      .def("save", &Model::save)
      .def("to_bytes", &Model::to_bytes)
      .def("placement", &Model::placement)
      .def("warnings", [](const Model& m) {
        py::list result;
        const std::string text = tsr_model_warnings(m.get().get());
        for (size_t start = 0; start < text.size();) {
          size_t end = text.find('\n', start);
          if (end == std::string::npos) end = text.size();
          result.append(text.substr(start, end - start));
          start = end + 1;
        }
        return result;
      })
      .def("regions", &Model::regions)
      .def("summary", &Model::summary)
      .def("run", &Model::run, py::arg("inputs"), py::arg("as_dlpack") = false)
      .def("profile", &Model::profile, py::arg("inputs"), py::arg("runs"), py::arg("as_dlpack") = false)
      .def("report", &Model::report)
      .def("check", &Model::check_accuracy, py::arg("inputs"), py::arg("tolerance"), py::arg("min_cosine"),
           py::arg("float64_reference"), py::arg("name"))
      .def("close", &Model::close)
      .def_property_readonly("closed", &Model::closed);

  py::class_<Source>(m, "Source")
      .def_static("load_path", &Source::load_path, py::arg("path"), py::arg("options").none(true))
      .def_static("load_bytes", &Source::load_bytes, py::arg("data"), py::arg("name"), py::arg("options").none(true))
      .def("inputs", &Source::inputs)
      .def("outputs", &Source::outputs)
      .def("compile", &Source::compile, py::arg("options").none(true));
}
