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
  PyErr_SetString(type.ptr(), message.c_str());
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
  if (t.lanes != 1) return "unknown";
  switch (t.code) {
    case kDLFloat: return t.bits == 16 ? "float16" : t.bits == 32 ? "float32" : t.bits == 64 ? "float64" : "unknown";
    case kDLBfloat: return t.bits == 16 ? "bfloat16" : "unknown";
    case kDLInt: return "int" + std::to_string(t.bits);
    case kDLUInt: return "uint" + std::to_string(t.bits);
    case TSR_DL_BOOL_CODE: return "bool";
    default: return "unknown";
  }
}

bool is_bool(DLDataType t) { return t.code == TSR_DL_BOOL_CODE; }

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
  /// Sets a C config's progress members when there is a callback.
  void install(tsr_progress_fn& fn, void*& user) {
    if (callback.is_none()) return;
    fn = &PythonProgress::call;
    user = this;
  }
  void rethrow(const char* what) const {
    if (!error.empty()) throw std::runtime_error(std::string(what) + ": the progress callback raised: " + error);
  }
};

/// Options from the package's plain values (None = the default).
std::unique_ptr<Options> make_options(py::object threads, py::object backends, const std::vector<std::string>& place,
                                      const std::vector<std::string>& deny, py::object min_region_size,
                                      py::object strict, const std::map<std::string, std::vector<int64_t>>& shapes,
                                      const std::map<std::string, std::vector<int64_t>>& data_shapes,
                                      py::object freeze_weights, py::object precision, py::object tuning) {
  auto options = std::make_unique<Options>();
  tsr_options* o = options->options;
  if (!threads.is_none()) check(tsr_options_set_threads(o, threads.cast<int32_t>()));
  if (!backends.is_none()) check(tsr_options_set_backends(o, backends.cast<std::string>().c_str()));
  for (const std::string& p : place) check(tsr_options_add_placement(o, p.c_str()));
  for (const std::string& d : deny) check(tsr_options_add_denial(o, d.c_str()));
  if (!min_region_size.is_none()) check(tsr_options_set_min_region_size(o, min_region_size.cast<int32_t>()));
  if (!strict.is_none()) check(tsr_options_set_strict(o, strict.cast<bool>() ? 1 : 0));
  for (const auto& [name, dims] : shapes) check(tsr_options_set_input_shape(o, name.c_str(), dims.data(), dims.size()));
  for (const auto& [name, dims] : data_shapes) {
    check(tsr_options_set_input_data_shape(o, name.c_str(), dims.data(), dims.size()));
  }
  if (!freeze_weights.is_none()) check(tsr_options_set_freeze_weights(o, freeze_weights.cast<bool>() ? 1 : 0));
  if (!precision.is_none()) check(tsr_options_set_precision(o, precision.cast<std::string>().c_str()));
  if (!tuning.is_none()) check(tsr_options_set_tuning(o, tuning.cast<std::string>().c_str()));
  return options;
}

// ----------------------------------------------------------- value infos --

/// (name, dtype, shape or None, dim names or None) for each input or output.
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
    result.append(py::make_tuple(v.name, dtype_name(v.dtype), shape, names));
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
    if (object.is_none()) invalid("input '" + name + "' is None");
    if (py::isinstance<py::array>(object)) return add_array(py::reinterpret_borrow<py::array>(object), name);
    if (py::hasattr(object, "__dlpack__")) return add_dlpack(object, name);
    // Lists, scalars, anything numpy can turn into an array: converted to the input's dtype.
    py::dtype dtype;
    py::object converted;
    try {
      converted = numpy_dtype_of(wanted, dtype) ? numpy().attr("asarray")(object, dtype) : numpy().attr("asarray")(object);
    } catch (py::error_already_set& e) {
      invalid("input '" + name + "': cannot convert a " + std::string(py::str(object.get_type().attr("__name__"))) +
              " to an array: " + e.what());
    }
    ++g_input_copies;
    add_array(py::reinterpret_borrow<py::array>(converted), name);
  }

  const std::vector<DLTensor>& tensors() const { return tensors_; }

 private:
  void add_array(py::array array, const std::string& name) {
    DLDataType dtype;
    if (!dl_dtype_of(array.dtype(), dtype)) {
      invalid("input '" + name + "': numpy dtype " + std::string(py::str(array.dtype())) + " has no Tessera type");
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

  void add_dlpack(py::handle object, const std::string& name) {
    py::object capsule;
    try {
      capsule = object.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      invalid("input '" + name + "': its __dlpack__ failed: " + e.what());
    }
    if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
      invalid("input '" + name + "': __dlpack__ did not return an unused DLPack capsule");
    }
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // ours now: its producer's capsule destructor leaves it
    managed_.push_back(managed);
    const DLTensor& t = managed->dl_tensor;
    if (t.device.device_type != kDLCPU) {
      invalid("input '" + name + "' is on DLPack device type " + std::to_string(t.device.device_type) +
              "; Tessera runs on the CPU (kDLCPU = 1)");
    }
    if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0 || t.dtype.bits == 0) {
      invalid("input '" + name + "': unsupported DLPack dtype (code " + std::to_string(t.dtype.code) + ", bits " +
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

// ------------------------------------------------------------------ model --

using ModelPtr = std::shared_ptr<tsr_model>;

/// A loaded model. close() drops this handle's reference; runs in flight
/// hold their own, so the model is freed when the last of them returns.
class Model {
 public:
  explicit Model(tsr_model* model) : model_(model, tsr_model_free) {}

  static Model load_path(const std::string& path, const Options* options) {
    tsr_model* model = nullptr;
    check_without_gil([&] { return tsr_model_load(path.c_str(), native(options), &model); });
    return Model(model);
  }
  static Model load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;  // bytes are immutable: safe to read without the GIL
    tsr_model* model = nullptr;
    check_without_gil(
        [&] { return tsr_model_load_from_memory(data.data(), data.size(), name.c_str(), native(options), &model); });
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
    check_without_gil([&] { return tsr_model_save(model.get(), path.c_str()); });
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
    std::vector<SharedOutput> outputs = run_raw(model, inputs, nullptr);
    return wrap_outputs(model, outputs, as_dlpack);
  }

  /// Runs `runs` times and returns (outputs of the last run, per-node ms,
  /// per-region ms, per-region fallbacks, copies, copy bytes), all summed over the runs.
  py::tuple profile(const py::sequence& inputs, int runs, bool as_dlpack) const {
    if (runs < 1) invalid("runs must be at least 1");
    ModelPtr model = get();
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
    RunInputs held;
    hold_inputs(model, inputs, held);
    const std::vector<DLTensor>& in = held.tensors();
    char* table = nullptr;
    char* json = nullptr;
    char* html = nullptr;
    size_t flagged = 0;
    check_without_gil([&] {
      return tsr_model_check(model.get(), in.data(), in.size(), tolerance, min_cosine, float64_reference ? 1 : 0,
                             name.c_str(), &table, &json, &html, &flagged);
    });
    const std::string table_text = table, json_text = json, html_text = html;
    tsr_string_free(table);
    tsr_string_free(json);
    tsr_string_free(html);
    return py::make_tuple(table_text, json_text, html_text, flagged);
  }

  std::string report(const std::string& format, const std::string& name) const {
    ModelPtr model = get();
    char* text = nullptr;
    check(tsr_model_report(model.get(), format.c_str(), name.c_str(), nullptr, &text));
    std::string result = text;
    tsr_string_free(text);
    return result;
  }

 private:
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
};

// ----------------------------------------------------------------- source --

class Source {
 public:
  static Source load_path(const std::string& path, const Options* options) {
    tsr_source* source = nullptr;
    check_without_gil([&] { return tsr_source_load(path.c_str(), native(options), &source); });
    return Source(source);
  }
  static Source load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;
    tsr_source* source = nullptr;
    check_without_gil(
        [&] { return tsr_source_load_from_memory(data.data(), data.size(), name.c_str(), native(options), &source); });
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
    check(tsr_load_backend_plugin(path.c_str(), &name));
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
    config.method = method.c_str();
    config.percentile = percentile;
    config.per_channel = per_channel ? 1 : 0;
    config.exclude = exclude.empty() ? nullptr : exclude.c_str();
    config.random_samples = random;
    config.seed = seed;
    state.install(config.progress, config.progress_user);
    tsr_quantizer* raw = nullptr;
    check(tsr_quantizer_create(model.c_str(), native(options), &config, &raw));
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
    check_without_gil([&] { return tsr_quantizer_write(quantizer.get(), output.c_str(), &summary); });
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    state.rethrow("quantize");
    return text;
  });
  // Measured placement (tessera.tune): writes the tuning record, returns the summary table.
  m.def("tune", [](const std::string& model, const std::string& output, const Options* options, double budget,
                   py::object progress) {
    PythonProgress state{progress, ""};
    tsr_tune_config config{};
    config.struct_size = sizeof(config);
    config.budget_seconds = budget;
    state.install(config.progress, config.progress_user);
    char* summary = nullptr;
    check_without_gil([&] { return tsr_tune(model.c_str(), native(options), &config, output.c_str(), &summary); });
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    state.rethrow("tune");
    return text;
  });
  m.def("is_artifact_file", [](const std::string& path) { return tsr_file_is_artifact(path.c_str()) != 0; });
  m.def("is_artifact_bytes", &is_artifact_bytes);

  py::class_<Options>(m, "Options")
      .def(py::init(&make_options), py::arg("threads") = py::none(), py::arg("backends") = py::none(),
           py::arg("place") = std::vector<std::string>{}, py::arg("deny") = std::vector<std::string>{},
           py::arg("min_region_size") = py::none(), py::arg("strict") = py::none(),
           py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
           py::arg("data_shapes") = std::map<std::string, std::vector<int64_t>>{},
           py::arg("freeze_weights") = py::none(), py::arg("precision") = py::none(), py::arg("tuning") = py::none());

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
