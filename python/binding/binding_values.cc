// tessera._tessera: the inputs of one run, outputs handed over without a copy
// (numpy views, DLPack Tensor objects), and tsr_values for models with
// sequences, optionals or strings (see binding.h).
#include "binding.h"

namespace tessera_py {

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


// ---------------------------------------------------------------- outputs --


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

ValuePtr own_value(tsr_value* value) { return ValuePtr(value, tsr_value_free); }


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

void bind_values(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", "An output Tessera allocated, shared without copies through DLPack")
      .def("__dlpack__", &Tensor::dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &Tensor::dlpack_device)
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("data_ptr", &Tensor::data_ptr)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("numpy", [](const Tensor& t) { return numpy_view(t.output(), "tensor"); },
           "A numpy array over the same memory (no copy)");

}

}  // namespace tessera_py
