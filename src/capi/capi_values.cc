// The C API: tsr_value: tensors, strings, sequences and optionals as handles, and tsr_model_run_values. Nothing here throws (guarded).
#include "capi/capi_internal.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

extern "C" {

const char* tsr_dtype_name(DLDataType dtype) {
  if (dtype.code == TSR_DL_STRING_CODE && dtype.lanes == 1) return "str";
  try {
    return tessera::dtype_name(from_dl(dtype, "dtype"));
  } catch (...) {
    return nullptr;
  }
}

tsr_status* tsr_value_create_tensor(const DLTensor* tensor, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  if (!tensor) return null_argument("tensor");
  return guarded([&] {
    if (tensor->ndim < 0 || tensor->ndim > 64) tessera::throw_user_error("tensor: ndim ", tensor->ndim, " is out of range");
    if (tensor->ndim > 0 && !tensor->shape) tessera::throw_user_error("tensor: shape is NULL");
    tessera::ValueDesc desc;
    desc.name = "tensor";
    desc.dtype = from_dl(tensor->dtype, "tensor");
    if (desc.dtype == DType::kString) tessera::throw_user_error("tensor: a string tensor is made with tsr_value_create_strings");
    desc.shape.assign(tensor->shape, tensor->shape + tensor->ndim);
    for (int64_t d : desc.shape) {
      if (d < 0) tessera::throw_user_error("tensor: a dimension is negative (", d, ")");
    }
    tessera::check_tensor_size("tensor", desc.shape, desc.dtype);
    const tessera::TensorView view = view_of(*tensor, desc, "tensor");
    auto value = std::make_unique<tsr_value>();
    value->items.push_back(tessera::Tensor::from_view(view));
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_strings(const char* const* strings, const size_t* lengths, const int64_t* shape,
                                     int32_t ndim, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  return guarded([&] {
    if (ndim < 0 || ndim > 64) tessera::throw_user_error("strings: ndim ", ndim, " is out of range");
    if (ndim > 0 && !shape) tessera::throw_user_error("strings: shape is NULL");
    tessera::Shape dims(shape, shape + ndim);
    for (int64_t d : dims) {
      if (d < 0) tessera::throw_user_error("strings: a dimension is negative (", d, ")");
    }
    tessera::check_tensor_size("strings", dims, DType::kString);
    tessera::Tensor t(DType::kString, dims);
    if (t.numel() > 0 && !strings) tessera::throw_user_error("strings is NULL");
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!strings[i]) tessera::throw_user_error("strings: element ", i, " is NULL");
      t.as<std::string>()[i] = lengths ? std::string(strings[i], lengths[i]) : std::string(strings[i]);
    }
    auto value = std::make_unique<tsr_value>();
    value->items.push_back(std::move(t));
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_sequence(const tsr_value* const* items, size_t count, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  if (count && !items) return null_argument("items");
  return guarded([&] {
    auto value = std::make_unique<tsr_value>();
    value->kind = tessera::ValueKind::kSequence;
    for (size_t i = 0; i < count; ++i) {
      if (!items[i]) tessera::throw_user_error("items[", i, "] is NULL");
      const tessera::Tensor& t = tensor_of(items[i], str_cat("items[", i, "]"));
      if (!value->items.empty() && t.dtype() != value->items.front().dtype()) {
        tessera::throw_user_error("items[", i, "] is ", tessera::dtype_name(t.dtype()), " but items[0] is ",
                                  tessera::dtype_name(value->items.front().dtype()), "; a sequence holds one dtype");
      }
      value->items.push_back(t);
    }
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_optional(const tsr_value* content, tsr_value_kind kind, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  return guarded([&] {
    auto value = std::make_unique<tsr_value>();
    if (!content) {
      if (kind != TSR_VALUE_OPTIONAL_TENSOR && kind != TSR_VALUE_OPTIONAL_SEQUENCE) {
        tessera::throw_user_error("kind must be TSR_VALUE_OPTIONAL_TENSOR or TSR_VALUE_OPTIONAL_SEQUENCE, got ",
                                  static_cast<int>(kind));
      }
      value->kind = static_cast<tessera::ValueKind>(kind);
      value->present = false;
    } else if (content->kind == tessera::ValueKind::kTensor || content->kind == tessera::ValueKind::kSequence) {
      value->kind = content->kind == tessera::ValueKind::kTensor ? tessera::ValueKind::kOptionalTensor
                                                                 : tessera::ValueKind::kOptionalSequence;
      value->items = content->items;
    } else {
      tessera::throw_user_error("content is already an optional");
    }
    *out_value = finish_value(std::move(value));
  });
}

void tsr_value_free(tsr_value* value) { delete value; }

tsr_status* tsr_value_describe(const tsr_value* value, int32_t* out_kind, int32_t* out_present, size_t* out_tensor_count) {
  if (!value) return null_argument("value");
  if (out_kind) *out_kind = static_cast<int32_t>(value->kind);
  if (out_present) *out_present = value->present ? 1 : 0;
  if (out_tensor_count) *out_tensor_count = value->items.size();
  return nullptr;
}

tsr_status* tsr_value_tensor(const tsr_value* value, size_t index, const DLTensor** out_tensor) {
  if (!value) return null_argument("value");
  if (!out_tensor) return null_argument("out_tensor");
  *out_tensor = nullptr;
  if (index >= value->dl.size()) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor index ", index, " is out of range: the value holds ",
                                                     value->dl.size(), value->present ? "" : " (an empty optional)"));
  }
  *out_tensor = &value->dl[index];
  return nullptr;
}

tsr_status* tsr_value_string(const tsr_value* value, size_t index, int64_t element, const char** out_bytes,
                             size_t* out_length) {
  if (!value) return null_argument("value");
  if (!out_bytes) return null_argument("out_bytes");
  *out_bytes = nullptr;
  if (index >= value->items.size()) return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor index ", index, " is out of range"));
  const tessera::Tensor& t = value->items[index];
  if (t.dtype() != DType::kString) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor ", index, " is ", tessera::dtype_name(t.dtype()), ", not strings"));
  }
  if (element < 0 || element >= t.numel()) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("element ", element, " is out of range (", t.numel(), " strings)"));
  }
  const std::string& text = t.as<std::string>()[element];
  *out_bytes = text.c_str();
  if (out_length) *out_length = text.size();
  return nullptr;
}

tsr_status* tsr_model_run_values(const tsr_model* model, const tsr_value* const* inputs, size_t num_inputs,
                                 tsr_value** out_outputs, size_t num_outputs) {
  if (!model) return null_argument("model");
  if (!out_outputs) return null_argument("out_outputs");
  for (size_t i = 0; i < num_outputs; ++i) out_outputs[i] = nullptr;
  if (num_inputs && !inputs) return null_argument("inputs");
  return guarded([&] {
    const auto& descs = model->compiled->inputs();
    if (num_inputs != descs.size()) tessera::throw_user_error("the model has ", descs.size(), " inputs but ", num_inputs, " were given");
    if (num_outputs != model->compiled->outputs().size()) {
      tessera::throw_user_error("the model has ", model->compiled->outputs().size(), " outputs but room for ", num_outputs, " was given");
    }
    std::vector<tessera::TensorView> views(num_inputs);
    std::vector<tessera::BoxedValue> boxes(num_inputs);
    tessera::BoxedIO io;
    io.inputs.assign(num_inputs, nullptr);
    for (size_t i = 0; i < num_inputs; ++i) {
      const std::string what = "input '" + descs[i].name + "'";
      if (!inputs[i]) tessera::throw_user_error(what, " is NULL");
      if (descs[i].kind == tessera::ValueKind::kTensor) {
        views[i] = tensor_of(inputs[i], what).view();
        continue;
      }
      if (inputs[i]->kind == tessera::ValueKind::kTensor) {
        tessera::throw_user_error(what, " is ", tessera::value_kind_phrase(descs[i].kind), ", but a tensor was given");
      }
      boxes[i] = tessera::BoxedValue{inputs[i]->kind, inputs[i]->present, inputs[i]->items};
      io.inputs[i] = &boxes[i];
    }
    std::vector<tessera::Tensor> results = model->compiled->run(views, {}, nullptr, &io);
    std::vector<std::unique_ptr<tsr_value>> made;
    for (size_t i = 0; i < num_outputs; ++i) {
      auto value = std::make_unique<tsr_value>();
      if (model->compiled->outputs()[i].kind == tessera::ValueKind::kTensor) {
        value->items.push_back(results[i]);
      } else {
        value->kind = io.outputs[i].kind;
        value->present = io.outputs[i].present;
        value->items = io.outputs[i].items;
      }
      made.push_back(std::move(value));
    }
    // Built in full before any is handed out: on a failure the caller owns nothing.
    std::vector<tsr_value*> done;
    for (auto& v : made) done.push_back(finish_value(std::move(v)));
    for (size_t i = 0; i < done.size(); ++i) out_outputs[i] = done[i];
  });
}

}  // extern "C"
