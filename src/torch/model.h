// tessera_torch::Model: a Tessera model held by PyTorch as the TorchBind class
// torch.classes.tessera.Model, and run by the op torch.ops.tessera.run.
//
// Two kinds, both built on the C API only (tessera/tessera.h):
//  - "tsr":  a compiled .tsr artifact (fixed input shapes), loaded once.
//  - "onnx": an ONNX model imported once (tsr_source) and compiled per input
//            shape signature, for models exported with dynamic axes. Compiled
//            variants are kept in a bounded LRU cache shared by all threads.
// Tensors cross without copies: contiguous CPU inputs are handed to Tessera in
// place, and the outputs Tessera allocates become torch tensors through DLPack
// (their deleter frees Tessera's buffer when torch drops the storage).
#ifndef TESSERA_TORCH_MODEL_H_
#define TESSERA_TORCH_MODEL_H_

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "capi_handles.h"

namespace tessera_torch {

/// What the bridge knows of one input or output before any shape is bound:
/// dims are -1 where the model leaves them open (dim_names then say which
/// symbol, or "" for an anonymous one); rank is -1 when unknown.
struct ValueSpec {
  std::string name;
  DLDataType dtype{};
  int32_t rank = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_names;
};

/// The load options a Model keeps, as strings so they travel in its pickle.
/// Keys: threads, backends, place, deny (lists joined by '\n'),
/// min_region_size, strict ("0"/"1"), cache_size (compiled variants kept), precision ("fp32", "bf16", "bf16-all").
using OptionDict = c10::Dict<std::string, std::string>;

class Model : public torch::CustomClassHolder {
 public:
  /// The pickle's layout: [format version, kind, bytes, options]. A newer
  /// version than kFormatVersion is refused with a message, never misread.
  /// Version 2 adds options["checksum"] = "crc32c:XXXXXXXX" of the bytes, checked
  /// when loading (an ONNX model's bytes have no checksum of their own; an
  /// artifact's is checked again when it loads). Version 1 pickles still load.
  static constexpr int64_t kFormatVersion = 2;
  using State = std::tuple<int64_t, std::string, std::string, OptionDict>;

  /// kind is "tsr" (bytes: a .tsr artifact) or "onnx" (bytes: an ONNX model).
  /// Throws c10::ValueError for a bad kind, option or model.
  Model(std::string kind, std::string bytes, OptionDict options);
  ~Model() override;

  State state() const;
  static c10::intrusive_ptr<Model> from_state(State state);

  /// Runs the model: one tensor per model input, in order; returns one tensor
  /// per output. Inputs must be dense CPU tensors of the model's dtypes and
  /// shapes (open dims free), not requiring grad while grad mode is on.
  std::vector<at::Tensor> run(at::TensorList inputs);

  const std::string& kind() const { return kind_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  OptionDict options() const { return options_.copy(); }
  /// The placement report (tsr_model_report) of the variant run last ("tsr":
  /// the model). format: table, json, dot or html.
  std::string report(const std::string& format) const;

  // Cache and zero-copy introspection, for tests and debugging.
  int64_t cache_capacity() const { return cache_capacity_; }
  int64_t cached_variants() const;
  int64_t compile_count() const;
  std::vector<int64_t> last_input_pointers() const;   // data pointers handed to Tessera
  std::vector<int64_t> last_output_pointers() const;  // data pointers Tessera allocated
  int64_t input_copies() const;                       // inputs copied (non-contiguous or misaligned)

 private:
  struct Variant {
    std::vector<int64_t> key;
    std::shared_future<SharedModel> model;
  };

  OptionsPtr make_options() const;
  void check_inputs(at::TensorList inputs) const;
  SharedModel variant_for(at::TensorList inputs);
  SharedModel compile_variant(at::TensorList inputs) const;

  std::string kind_;
  std::string bytes_;
  OptionDict options_;
  int64_t cache_capacity_ = 8;
  std::vector<ValueSpec> inputs_;
  std::vector<ValueSpec> outputs_;
  SharedModel model_;  // "tsr"
  SourcePtr source_;   // "onnx"

  mutable std::mutex mutex_;  // guards everything below
  std::list<Variant> variants_;  // most recently used first
  std::map<std::vector<int64_t>, std::list<Variant>::iterator> variant_index_;
  SharedModel last_variant_;
  int64_t compiles_ = 0;
  int64_t input_copies_ = 0;
  std::vector<int64_t> last_input_pointers_;
  std::vector<int64_t> last_output_pointers_;
};

}  // namespace tessera_torch

#endif  // TESSERA_TORCH_MODEL_H_
