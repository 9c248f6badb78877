// What the files of tessera._tessera share (python/tessera_python.cc says what
// the module does): raising the package's exceptions from a tsr_status, dtype
// names, options, the inputs of one run, shared outputs and their DLPack
// exports, tsr_values for models with sequences, optionals or strings. Each
// file registers its own classes: bind_common (binding_common.cc),
// bind_values (binding_values.cc), bind_model (binding_model.cc).
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/numpy.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace tessera_py {

namespace py = pybind11;

// ----------------------------------------------------------------- errors --

/// The package's exception classes (never destroyed: they outlive interpreter teardown order).
struct ErrorTypes {
  py::object base, invalid_argument, unsupported, internal;
};
ErrorTypes& error_types();
[[noreturn]] void raise(tsr_status_code code, const std::string& message);
[[noreturn]] void raise_status(tsr_status* status);
void check(tsr_status* status);
[[noreturn]] void invalid(const std::string& message);
/// The C string of a path, name or option for the C API; one with a NUL byte inside would be cut
/// there (so "notes.txt\0.tsr" would write notes.txt): an error instead. Call with the GIL held.
const char* c_text(const std::string& s);

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
extern std::atomic<int64_t> g_input_copies;

// ----------------------------------------------------------------- dtypes --

std::string dtype_name(DLDataType t);
bool is_bool(DLDataType t);
bool is_string(DLDataType t);
/// tsr_value_kind as the package names it (NodeArg.kind).
const char* kind_name(int32_t kind);
/// "a sequence", for messages.
std::string kind_phrase(int32_t kind);
/// The DLPack dtype of a numpy dtype, or false when Tessera has none.
bool dl_dtype_of(const py::dtype& dtype, DLDataType& out);
/// numpy's dtype for a Tessera output (bfloat16 has none).
bool numpy_dtype_of(DLDataType t, py::dtype& out);
py::module_& numpy();

// ---------------------------------------------------------------- options --

struct Options {
  tsr_options* options = nullptr;
  Options() { check(tsr_options_create(&options)); }
  ~Options() { tsr_options_free(options); }
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;
};

const tsr_options* native(const Options* options);

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
void free_managed(DLManagedTensor* m);
bool compact_row_major(const DLTensor& t);

/// The inputs of one run: DLTensors over the callers' memory, kept alive until the run is over.
class RunInputs {
 public:
  /// `keep_strides` (I/O binding): strided arrays go as they are (the run copies what a region cannot read
  /// strided); otherwise they are gathered into contiguous copies here.
  explicit RunInputs(bool keep_strides = false) : keep_strides_(keep_strides) {}
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
    std::vector<int64_t> strides;  // elements, kept for a strided array under keep_strides
    if (keep_strides_ && aligned && native_order && !(array.flags() & py::array::c_style)) {
      for (py::ssize_t d = 0; d < array.ndim(); ++d) {
        const py::ssize_t bytes = array.strides(d);
        if (bytes < 0 || bytes % array.itemsize() != 0) {
          strides.clear();
          break;
        }
        strides.push_back(bytes / array.itemsize());
      }
    }
    if (strides.empty() && (!(array.flags() & py::array::c_style) || !aligned || !native_order)) {
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
    if (!strides.empty()) t.strides = strides_.emplace_back(std::move(strides)).data();
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
    bool non_negative = true;
    for (int32_t d = 0; t.strides && d < t.ndim; ++d) non_negative &= t.strides[d] >= 0;
    if ((compact_row_major(t) || (keep_strides_ && non_negative)) && reinterpret_cast<uintptr_t>(data) % item == 0) {
      DLTensor view = t;
      view.data = data;
      view.byte_offset = 0;
      if (compact_row_major(t)) view.strides = nullptr;
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

  bool keep_strides_ = false;
  std::vector<py::object> keep_;
  std::vector<DLManagedTensor*> managed_;
  std::vector<std::vector<int64_t>> shapes_;  // tensors_ point into these (moving a vector keeps its buffer)
  std::deque<std::vector<int64_t>> strides_;
  std::vector<DLTensor> tensors_;
};

// ---------------------------------------------------------------- outputs --

/// The caller's output buffers of one run (I/O binding): DLTensors over writeable numpy arrays (strides
/// kept) or over what an object's __dlpack__ hands out, kept alive until the run is over.
class OutputBuffers {
 public:
  OutputBuffers() = default;
  OutputBuffers(const OutputBuffers&) = delete;
  OutputBuffers& operator=(const OutputBuffers&) = delete;
  ~OutputBuffers() {
    for (DLManagedTensor* m : managed_) free_managed(m);
  }

  /// The buffer for `what` ("output 'y'"): valid until this object dies.
  const DLTensor* add(py::handle object, const std::string& what) {
    auto& t = tensors_.emplace_back();
    t.device = {kDLCPU, 0};
    if (py::isinstance<py::array>(object)) {
      py::array array = py::reinterpret_borrow<py::array>(object);
      if (!array.writeable()) invalid(what + ": the numpy array bound to it is read-only");
      if (!dl_dtype_of(array.dtype(), t.dtype)) {
        invalid(what + ": numpy dtype " + std::string(py::str(array.dtype())) + " has no Tessera type");
      }
      if (array.dtype().byteorder() == '>') invalid(what + ": the array bound to it is not in native byte order");
      auto& shape = shapes_.emplace_back(array.shape(), array.shape() + array.ndim());
      auto& strides = strides_.emplace_back();
      for (py::ssize_t d = 0; d < array.ndim(); ++d) {
        if (array.strides(d) < 0 || array.strides(d) % array.itemsize() != 0) {
          invalid(what + ": the array bound to it has strides that are not whole, non-negative element counts");
        }
        strides.push_back(array.strides(d) / array.itemsize());
      }
      t.data = array.mutable_data();
      t.ndim = static_cast<int32_t>(array.ndim());
      t.shape = shape.data();
      t.strides = strides.data();
      keep_.push_back(array);
      return &t;
    }
    if (!py::hasattr(object, "__dlpack__")) {
      invalid(what + ": bind a numpy array or a tensor with __dlpack__ (e.g. torch), not a " +
              std::string(py::str(object.get_type().attr("__name__"))));
    }
    py::object capsule;
    try {
      capsule = object.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      invalid(what + ": its __dlpack__ failed: " + e.what());
    }
    if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) invalid(what + ": __dlpack__ did not return an unused DLPack capsule");
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    managed_.push_back(managed);
    t = managed->dl_tensor;
    t.data = static_cast<char*>(t.data) + t.byte_offset;
    t.byte_offset = 0;
    return &t;
  }

 private:
  std::vector<py::object> keep_;
  std::vector<DLManagedTensor*> managed_;
  std::deque<std::vector<int64_t>> shapes_;
  std::deque<std::vector<int64_t>> strides_;
  std::deque<DLTensor> tensors_;
};

/// One output allocation, shared by every export of it (numpy arrays, DLPack consumers).
using SharedOutput = std::shared_ptr<DLManagedTensor>;
SharedOutput share(DLManagedTensor* managed);
DLManagedTensor* export_of(const SharedOutput& owner, bool bool_as_uint8);
/// A capsule's destructor: frees the tensor unless a consumer took it (renamed it "used_dltensor").
void dlpack_capsule_destructor(PyObject* capsule);

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
py::array numpy_view(const SharedOutput& output, const std::string& name);

// ----------------------------------------------------------------- values --

using ValuePtr = std::unique_ptr<tsr_value, void (*)(tsr_value*)>;
ValuePtr own_value(tsr_value* value);

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
std::string values_reason(const tsr_model* model);
/// The tsr_value for one input object, checked against the model's input `spec`.
ValuePtr input_value(py::handle object, const IoSpec& spec);
/// A Python object for an output tsr_value (which it takes): an array, list (sequence) or None.
py::object output_object(tsr_value* raw, const std::string& name, bool as_dlpack);

// ------------------------------------------------------------ registration --

void bind_common(py::module_& m);
void bind_values(py::module_& m);
void bind_model(py::module_& m);

}  // namespace tessera_py
