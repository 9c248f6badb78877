// tessera_torch::Model: loading (an ONNX model with open dims compiles once), input checks, the
// per-shape variant cache (inputs of unknown rank only) and the zero-copy run through DLPack. See model.h.
#include "model.h"

#include <ATen/DLConvertor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <utility>

namespace tessera_torch {
namespace {

constexpr const char* kModelLabel = "torch.classes.tessera.Model";

/// Raises a tsr_status as the torch error Python users expect: ValueError for
/// the caller's mistakes, NotImplementedError for what Tessera lacks,
/// RuntimeError for Tessera's own bugs. The message is the C API's.
void check(tsr_status* raw) {
  if (!raw) return;
  StatusPtr status(raw);
  const std::string message = tsr_status_message(status.get());
  switch (tsr_status_code_of(status.get())) {
    case TSR_INVALID_ARGUMENT:
      TORCH_CHECK_VALUE(false, "Tessera: ", message);
    case TSR_UNSUPPORTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "Tessera: ", message);
    default:
      TORCH_CHECK(false, "Tessera (internal error): ", message);
  }
}

bool same_dtype(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

/// The DLPack dtype Tessera expects for a torch dtype; false for dtypes Tessera has no counterpart of.
/// Bool uses code 6 (kDLBool from DLPack 0.8 on; torch 1.13's DLPack 0.6 has no bool at all).
bool dl_dtype_of(at::ScalarType type, DLDataType* out) {
  switch (type) {
    case at::kFloat: *out = {kDLFloat, 32, 1}; return true;
    case at::kDouble: *out = {kDLFloat, 64, 1}; return true;
    case at::kHalf: *out = {kDLFloat, 16, 1}; return true;
    case at::kBFloat16: *out = {kDLBfloat, 16, 1}; return true;
    case at::kChar: *out = {kDLInt, 8, 1}; return true;
    case at::kShort: *out = {kDLInt, 16, 1}; return true;
    case at::kInt: *out = {kDLInt, 32, 1}; return true;
    case at::kLong: *out = {kDLInt, 64, 1}; return true;
    case at::kByte: *out = {kDLUInt, 8, 1}; return true;
    case at::kBool: *out = {TSR_DL_BOOL_CODE, 8, 1}; return true;
    default: return false;
  }
}

std::string dtype_name(DLDataType t) {
  if (const char* name = tsr_dtype_name(t)) return name;  // the C API's one table of names
  return "dtype(code " + std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " +
         std::to_string(t.lanes) + ")";
}

std::string spec_string(const ValueSpec& spec) {
  std::ostringstream text;
  text << dtype_name(spec.dtype) << "[";
  if (spec.rank < 0) text << "any rank";
  for (int32_t i = 0; i < spec.rank; ++i) {
    if (i) text << ",";
    const auto d = static_cast<size_t>(i);
    if (spec.dims[d] >= 0) {
      text << spec.dims[d];
    } else {
      text << (spec.dim_names[d].empty() ? "?" : spec.dim_names[d]);
    }
  }
  text << "]";
  return text.str();
}

std::string tensor_string(const at::Tensor& tensor) {
  std::ostringstream text;
  DLDataType dtype{};
  text << (dl_dtype_of(tensor.scalar_type(), &dtype) ? dtype_name(dtype) : std::string(c10::toString(tensor.scalar_type())))
       << "[";
  for (int64_t i = 0; i < tensor.dim(); ++i) text << (i ? "," : "") << tensor.size(i);
  text << "]";
  return text.str();
}

ValueSpec spec_of(const tsr_value_info& info) {
  ValueSpec spec;
  spec.name = info.name ? info.name : "";
  spec.dtype = info.dtype;
  spec.rank = info.ndim;
  for (int32_t i = 0; i < info.ndim; ++i) {
    spec.dims.push_back(info.shape[i]);
    spec.dim_names.emplace_back(info.dim_names && info.dim_names[i] ? info.dim_names[i] : "");
  }
  return spec;
}

template <typename Handle, typename CountFn, typename InfoFn>
std::vector<ValueSpec> specs_of(const Handle* handle, CountFn count, InfoFn info_of) {
  std::vector<ValueSpec> specs;
  for (size_t i = 0; i < count(handle); ++i) {
    tsr_value_info info{};
    info.struct_size = sizeof(info);
    check(info_of(handle, i, &info));
    specs.push_back(spec_of(info));
  }
  return specs;
}

/// True when bytes start with the .tsr artifact magic (src/artifact/artifact.h: "TSRARTF\0").
bool is_artifact(const std::string& bytes) {
  static const char kMagic[8] = {'T', 'S', 'R', 'A', 'R', 'T', 'F', '\0'};
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

int64_t parse_int(const std::string& key, const std::string& value, int64_t low, int64_t high) {
  size_t used = 0;
  int64_t number = 0;
  try {
    number = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK_VALUE(used == value.size() && used > 0 && number >= low && number <= high, "Tessera: option '", key,
                    "' must be an integer from ", low, " to ", high, ", got '", value, "'");
  return number;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

/// The torch op's own option (how many compiled shapes to keep); every other
/// key is one of the C API's (tsr_option_names), set through tsr_options_set.
constexpr const char* kCacheSize = "cache_size";

bool is_known_option(const std::string& key) {
  if (key == kCacheSize) return true;
  std::istringstream names(tsr_option_names());
  for (std::string name; std::getline(names, name, ',');) {
    if (name == key) return true;
  }
  return false;
}

/// Frees the outputs Tessera allocated that were not yet handed to torch.
struct OutputsGuard {
  std::vector<DLManagedTensor*>& outputs;
  ~OutputsGuard() {
    for (DLManagedTensor*& output : outputs) {
      if (output && output->deleter) output->deleter(output);
      output = nullptr;
    }
  }
};

}  // namespace

Model::Model(std::string kind, std::string bytes, OptionDict options)
    : kind_(std::move(kind)), bytes_(std::move(bytes)), options_(options.copy()) {
  for (const auto& entry : options_) {
    TORCH_CHECK_VALUE(is_known_option(entry.key()), "Tessera: unknown option '", entry.key(), "' (known: ", tsr_option_names(),
                      ",", kCacheSize, ")");
  }
  if (options_.contains(kCacheSize)) cache_capacity_ = parse_int(kCacheSize, options_.at(kCacheSize), 1, 1 << 20);
  OptionsPtr load_options = make_options();  // checks every option now, not at the first run
  if (kind_ == "tsr") {
    tsr_model* raw = nullptr;
    check(tsr_model_load_from_memory(bytes_.data(), bytes_.size(), kModelLabel, load_options.get(), &raw));
    model_ = SharedModel(raw, ModelDeleter());
    if (!is_artifact(bytes_)) {
      // An ONNX model compiled now: keep the artifact, so a pickle reloads without compiling again.
      void* data = nullptr;
      size_t size = 0;
      check(tsr_model_save_to_memory(model_.get(), &data, &size));
      BufferPtr artifact(data);
      bytes_.assign(static_cast<const char*>(data), size);
    }
    inputs_ = specs_of(model_.get(), tsr_model_input_count, tsr_model_input_info);
    outputs_ = specs_of(model_.get(), tsr_model_output_count, tsr_model_output_info);
    last_variant_ = model_;
  } else if (kind_ == "onnx") {
    tsr_source* raw = nullptr;
    check(tsr_source_load_from_memory(bytes_.data(), bytes_.size(), kModelLabel, load_options.get(), &raw));
    source_.reset(raw);
    inputs_ = specs_of(source_.get(), tsr_source_input_count, tsr_source_input_info);
    outputs_ = specs_of(source_.get(), tsr_source_output_count, tsr_source_output_info);
    // Inputs of known rank: compiled once, now, with their open dims open; the model runs every shape
    // that fits without compiling again. Only an input of unknown rank needs a compile per shape.
    if (std::all_of(inputs_.begin(), inputs_.end(), [](const ValueSpec& spec) { return spec.rank >= 0; })) {
      tsr_model* compiled = nullptr;
      check(tsr_source_compile(source_.get(), load_options.get(), &compiled));
      model_ = SharedModel(compiled, ModelDeleter());
      last_variant_ = model_;
      compiles_ = 1;
    }
  } else {
    TORCH_CHECK_VALUE(false, "Tessera: model kind must be 'tsr' (a compiled artifact) or 'onnx', got '", kind_, "'");
  }
}

Model::~Model() = default;

namespace {

/// CRC-32C (Castagnoli) of `bytes`: every single-bit flip and every burst of up to 32 flipped bits changes it.
uint32_t crc32c(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string checksum_text(const std::string& bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "crc32c:%08x", crc32c(bytes));
  return text;
}

constexpr const char* kChecksumKey = "checksum";

}  // namespace

Model::State Model::state() const {
  OptionDict options = options_.copy();
  options.insert_or_assign(kChecksumKey, checksum_text(bytes_));
  return State(kFormatVersion, kind_, bytes_, std::move(options));
}

c10::intrusive_ptr<Model> Model::from_state(State state) {
  const int64_t version = std::get<0>(state);
  TORCH_CHECK_VALUE(version >= 1 && version <= kFormatVersion, "Tessera: this saved model has format version ",
                    version, ", but this libtessera_torch reads versions 1 to ", kFormatVersion,
                    ": load it with a newer Tessera");
  OptionDict options = std::get<3>(state).copy();
  if (version >= 2) {
    TORCH_CHECK_VALUE(options.contains(kChecksumKey), "Tessera: this saved model (format version ", version,
                      ") has no checksum: the file is damaged");
    const std::string expected = options.at(kChecksumKey);
    const std::string actual = checksum_text(std::get<2>(state));
    TORCH_CHECK_VALUE(expected == actual, "Tessera: the saved model's ", std::get<2>(state).size(),
                      " bytes do not match their checksum (", expected, " saved, ", actual,
                      " now): the file is damaged");
    options.erase(kChecksumKey);
  }
  return c10::make_intrusive<Model>(std::move(std::get<1>(state)), std::move(std::get<2>(state)), std::move(options));
}

OptionsPtr Model::make_options() const {
  tsr_options* raw = nullptr;
  check(tsr_options_create(&raw));
  OptionsPtr options(raw);
  for (const auto& entry : options_) {
    if (entry.key() == kCacheSize) continue;
    // place and deny hold one rule per line; each line is one call.
    const bool rules = entry.key() == "place" || entry.key() == "deny";
    for (const std::string& value : rules ? split_lines(entry.value()) : std::vector<std::string>{entry.value()}) {
      check(tsr_options_set(options.get(), entry.key().c_str(), value.c_str()));
    }
  }
  return options;
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (const ValueSpec& spec : inputs_) names.push_back(spec.name);
  return names;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (const ValueSpec& spec : outputs_) names.push_back(spec.name);
  return names;
}

void Model::check_inputs(at::TensorList inputs) const {
  TORCH_CHECK_VALUE(inputs.size() == inputs_.size(), "Tessera: the model has ", inputs_.size(), " inputs but ",
                    inputs.size(), " were given");
  std::map<std::string, std::pair<int64_t, std::string>> symbols;  // dim name -> (size, where it was bound)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& tensor = inputs[i];
    const ValueSpec& spec = inputs_[i];
    // Messages are built only on failure (TORCH_CHECK evaluates them lazily): this runs on every call.
    auto what = [&] { return "Tessera: input " + std::to_string(i) + " ('" + spec.name + "')"; };
    TORCH_CHECK_VALUE(tensor.defined(), what(), " is an undefined tensor");
    TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, what(), ": only dense (strided) tensors are supported, got layout ",
                      tensor.layout());
    TORCH_CHECK_VALUE(tensor.device().is_cpu(), what(), ": only CPU tensors are supported, got a tensor on ",
                      tensor.device());
    TORCH_CHECK_VALUE(!(tensor.requires_grad() && at::GradMode::is_enabled()), what(),
                      " requires grad: Tessera runs inference only and computes no gradients. Call the model "
                      "under torch.no_grad() or torch.inference_mode(), or pass a detached tensor.");
    DLDataType dtype{};
    const bool known = dl_dtype_of(tensor.scalar_type(), &dtype);
    const bool shape_ok = [&] {
      if (spec.rank < 0) return true;
      if (tensor.dim() != spec.rank) return false;
      for (int32_t d = 0; d < spec.rank; ++d) {
        const auto k = static_cast<size_t>(d);
        if (spec.dims[k] >= 0 && spec.dims[k] != tensor.size(d)) return false;
      }
      return true;
    }();
    TORCH_CHECK_VALUE(known && same_dtype(dtype, spec.dtype) && shape_ok, what(), ": expected ", spec_string(spec),
                      ", got ", tensor_string(tensor));
    for (int32_t d = 0; d < spec.rank; ++d) {
      const auto k = static_cast<size_t>(d);
      if (spec.dims[k] >= 0 || spec.dim_names[k].empty()) continue;
      const std::string where = "input '" + spec.name + "' dimension " + std::to_string(d);
      auto [entry, inserted] = symbols.emplace(spec.dim_names[k], std::make_pair(tensor.size(d), where));
      TORCH_CHECK_VALUE(inserted || entry->second.first == tensor.size(d), "Tessera: dimension '", spec.dim_names[k],
                        "' is ", entry->second.first, " in ", entry->second.second, " but ", tensor.size(d), " in ",
                        where);
    }
  }
}

SharedModel Model::compile_variant(at::TensorList inputs) const {
  OptionsPtr options = make_options();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueSpec& spec = inputs_[i];
    const bool open = spec.rank < 0 || std::any_of(spec.dims.begin(), spec.dims.end(), [](int64_t d) { return d < 0; });
    if (!open) continue;
    // The whole shape binds every open dim of this input, named or not (names were checked to agree).
    check(tsr_options_set_input_shape(options.get(), spec.name.c_str(), inputs[i].sizes().data(),
                                      static_cast<size_t>(inputs[i].dim())));
  }
  tsr_model* raw = nullptr;
  check(tsr_source_compile(source_.get(), options.get(), &raw));
  return SharedModel(raw, ModelDeleter());
}

SharedModel Model::variant_for(at::TensorList inputs) {
  std::vector<int64_t> key;
  for (const at::Tensor& tensor : inputs) {
    key.push_back(tensor.dim());
    for (int64_t size : tensor.sizes()) key.push_back(size);
  }
  std::promise<SharedModel> promise;
  std::shared_future<SharedModel> future;
  bool compile_here = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = variant_index_.find(key);
    if (found != variant_index_.end()) {
      variants_.splice(variants_.begin(), variants_, found->second);
      future = found->second->model;
    } else {
      // Other threads asking for this shape wait on the future instead of compiling it again.
      future = promise.get_future().share();
      variants_.push_front(Variant{key, future});
      variant_index_[key] = variants_.begin();
      compile_here = true;
      while (static_cast<int64_t>(variants_.size()) > cache_capacity_) {
        variant_index_.erase(variants_.back().key);
        variants_.pop_back();  // runs still holding that model keep it alive
      }
    }
  }
  if (compile_here) {
    try {
      SharedModel compiled = compile_variant(inputs);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++compiles_;
      }
      promise.set_value(std::move(compiled));
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = variant_index_.find(key);
      if (found != variant_index_.end()) {  // a failed compile is not cached: the next call reports it again
        variants_.erase(found->second);
        variant_index_.erase(found);
      }
    }
  }
  return future.get();  // rethrows the compile error, in every waiting thread
}

std::vector<at::Tensor> Model::run(at::TensorList inputs) {
  check_inputs(inputs);
  SharedModel model = model_ ? model_ : variant_for(inputs);

  // Inputs: contiguous, element-aligned tensors are read in place; others are copied once (and counted).
  std::vector<at::Tensor> held;
  held.reserve(inputs.size());
  std::vector<DLTensor> dl_inputs(inputs.size());
  int64_t copies = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor tensor = inputs[i];
    const bool aligned = reinterpret_cast<uintptr_t>(tensor.data_ptr()) % tensor.element_size() == 0;
    if (!tensor.is_contiguous() || !aligned) {
      tensor = tensor.clone(at::MemoryFormat::Contiguous);
      ++copies;
    }
    held.push_back(tensor);
    // The DLTensor at::toDLPack would build, without its heap-allocated manager (it is only borrowed for the call).
    DLTensor& dl = dl_inputs[i];
    dl.data = tensor.data_ptr();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(tensor.dim());
    dl_dtype_of(tensor.scalar_type(), &dl.dtype);  // checked in check_inputs
    dl.shape = const_cast<int64_t*>(tensor.sizes().data());
    dl.strides = nullptr;  // compact row-major
    dl.byte_offset = 0;
  }

  std::vector<DLManagedTensor*> dl_outputs(tsr_model_output_count(model.get()), nullptr);
  OutputsGuard guard{dl_outputs};
  check(tsr_model_run_alloc(model.get(), dl_inputs.data(), dl_inputs.size(), dl_outputs.data(), dl_outputs.size()));

  // Outputs: checked first, so no tensor is handed over when one of them cannot be.
  std::vector<bool> is_bool(dl_outputs.size(), false);
  for (size_t i = 0; i < dl_outputs.size(); ++i) {
    DLTensor& dl = dl_outputs[i]->dl_tensor;
    if (dl.dtype.code == TSR_DL_BOOL_CODE && dl.dtype.bits == 8 && dl.dtype.lanes == 1) {
      // torch 1.13's DLPack has no bool: hand the bytes over as uint8 and view them as bool (same storage).
      dl.dtype = {kDLUInt, 8, 1};
      is_bool[i] = true;
      continue;
    }
    const bool torch_has = (dl.dtype.lanes == 1) &&
                           ((dl.dtype.code == kDLFloat && (dl.dtype.bits == 16 || dl.dtype.bits == 32 || dl.dtype.bits == 64)) ||
                            (dl.dtype.code == kDLBfloat && dl.dtype.bits == 16) ||
                            (dl.dtype.code == kDLInt && (dl.dtype.bits == 8 || dl.dtype.bits == 16 || dl.dtype.bits == 32 || dl.dtype.bits == 64)) ||
                            (dl.dtype.code == kDLUInt && dl.dtype.bits == 8));
    TORCH_CHECK_NOT_IMPLEMENTED(torch_has, "Tessera: output ", i, " ('", outputs_[i].name, "') has dtype ",
                                dtype_name(dl.dtype), ", which PyTorch 1.13 has no tensor type for");
  }
  std::vector<at::Tensor> results;
  std::vector<int64_t> output_pointers;
  results.reserve(dl_outputs.size());
  for (size_t i = 0; i < dl_outputs.size(); ++i) {
    output_pointers.push_back(reinterpret_cast<int64_t>(dl_outputs[i]->dl_tensor.data));
    at::Tensor tensor = at::fromDLPack(dl_outputs[i]);  // takes ownership: the deleter runs with the storage's
    dl_outputs[i] = nullptr;
    results.push_back(is_bool[i] ? tensor.view(at::kBool) : tensor);
  }

  std::vector<int64_t> input_pointers;
  for (const DLTensor& dl : dl_inputs) input_pointers.push_back(reinterpret_cast<int64_t>(dl.data));
  std::lock_guard<std::mutex> lock(mutex_);
  input_copies_ += copies;
  last_input_pointers_ = std::move(input_pointers);
  last_output_pointers_ = std::move(output_pointers);
  last_variant_ = std::move(model);
  return results;
}

std::string Model::report(const std::string& format) const {
  SharedModel model;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    model = last_variant_;
  }
  TORCH_CHECK_VALUE(model, "Tessera: this model is compiled per input shape and has not run yet: run it first");
  char* raw = nullptr;
  check(tsr_model_report(model.get(), format.c_str(), "model", nullptr, &raw));
  StringPtr text(raw);
  return text.get();
}

int64_t Model::cached_variants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_ ? 1 : static_cast<int64_t>(variants_.size());  // one compiled model serves every shape
}

int64_t Model::compile_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiles_;
}

std::vector<int64_t> Model::last_input_pointers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_input_pointers_;
}

std::vector<int64_t> Model::last_output_pointers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_output_pointers_;
}

int64_t Model::input_copies() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return input_copies_;
}

}  // namespace tessera_torch
