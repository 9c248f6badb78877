// The C API's handles (the structs behind tsr_status, tsr_options, tsr_model, ...) and the helpers
// its files share: statuses from exceptions (guarded), DLPack <-> Tensor conversions, option checks,
// compiling and importing. Only src/capi/ includes it. Nothing here throws across the C API: every
// entry point runs its body in guarded().
#pragma once
#include <sys/stat.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <algorithm>
#include <map>
#include <mutex>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/safe_file.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "quantize/quantize.h"
#include "report/check_report.h"
#include "report/placement_report.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"
#include "tessera/tessera.h"
#include "tune/tuner.h"

struct tsr_status {
  tsr_status_code code;
  std::string message;
};

struct tsr_options {
  tessera::CompileOptions compile;
  tessera::onnx_frontend::ImportOptions import;
  // tsr_options_set_input_data_shape: bound only to inputs the model has.
  std::map<std::string, tessera::Shape> data_shapes;
};

/// The dim_names arrays tsr_value_info hands out, per input or output.
struct tsr_dim_name_arrays {
  std::vector<std::vector<const char*>> inputs, outputs;

  void build(const std::vector<tessera::ValueDesc>& in, const std::vector<tessera::ValueDesc>& out) {
    auto pointers = [](const std::vector<tessera::ValueDesc>& descs) {
      std::vector<std::vector<const char*>> all;
      for (const tessera::ValueDesc& d : descs) {
        std::vector<const char*> names;
        for (const std::string& n : d.dim_names) names.push_back(n.c_str());
        names.resize(d.shape.size(), "");
        all.push_back(std::move(names));
      }
      return all;
    };
    inputs = pointers(in);
    outputs = pointers(out);
  }
};

/// A value of any kind: a tensor (items[0]), a sequence (items), an optional
/// (present, and then its tensor or sequence in items). Immutable once made.
struct tsr_value {
  tessera::ValueKind kind = tessera::ValueKind::kTensor;
  bool present = true;
  std::vector<tessera::Tensor> items;
  std::vector<DLTensor> dl;  // per item, built once the items are final
};

struct tsr_model {
  std::unique_ptr<tessera::CompiledModel> compiled;
  tsr_dim_name_arrays dim_names;
  std::string warnings;  // compiled->warnings(), one per line
  /// Why the tensor-only run functions refuse this model (its first sequence, optional or string
  /// input or output), or "": decided once here, not on every run.
  std::string tensor_run_refusal;

  explicit tsr_model(std::unique_ptr<tessera::CompiledModel> model) : compiled(std::move(model)) {
    dim_names.build(compiled->inputs(), compiled->outputs());
    for (const std::string& w : compiled->warnings()) warnings += w + "\n";
    auto refuse = [&](const tessera::ValueDesc& d, const char* what) {
      if (!tensor_run_refusal.empty()) return;
      if (d.kind != tessera::ValueKind::kTensor) {
        tensor_run_refusal = tessera::str_cat(what, " '", d.name, "' is ", tessera::value_kind_phrase(d.kind),
                                              "; run the model with tsr_model_run_values");
      } else if (d.dtype == tessera::DType::kString) {
        tensor_run_refusal = tessera::str_cat(what, " '", d.name, "' is a string tensor; run the model with tsr_model_run_values");
      }
    };
    for (const tessera::ValueDesc& d : compiled->inputs()) refuse(d, "input");
    for (const tessera::ValueDesc& d : compiled->outputs()) refuse(d, "output");
  }
};

struct tsr_quantizer {
  std::unique_ptr<tessera::quantize::Quantizer> quantizer;
  std::vector<tessera::ValueDesc> inputs;  // the model's declared inputs (open dims -1)
};

struct tsr_source {
  tessera::Graph graph;  // as imported: input shapes not bound
  std::vector<tessera::ValueDesc> inputs, outputs;
  std::vector<bool> output_rank_known;
  tsr_dim_name_arrays dim_names;
};

namespace tessera::capi {

using tessera::DType;

using tessera::str_cat;

tsr_status* make_status(tsr_status_code code, std::string message);

template <typename Fn>
tsr_status* guarded(Fn&& fn) {
  try {
    fn();
    return nullptr;
  } catch (const tessera::Error& e) {
    tsr_status_code code = e.kind() == tessera::ErrorKind::kUser          ? TSR_INVALID_ARGUMENT
                           : e.kind() == tessera::ErrorKind::kUnsupported ? TSR_UNSUPPORTED
                                                                          : TSR_INTERNAL;
    return make_status(code, e.what());
  } catch (const std::bad_alloc&) {
    return make_status(TSR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return make_status(TSR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_status(TSR_INTERNAL, "internal error: unknown exception");
  }
}

using MallocString = std::unique_ptr<char, void (*)(void*)>;

/// `text` in memory the caller frees with tsr_string_free (std::free); throws std::bad_alloc.
MallocString malloc_string(const std::string& text);

DLDataType to_dl(DType dtype);

DType from_dl(DLDataType t, const std::string& what);

/// The caller's tensor for `desc`, checked field by field against what the
/// model has (device, rank before the shape is read, dtype, dims, strides,
/// data and its alignment), so no bad tensor reaches a kernel.
/// `open_dims_free`: the desc's open dims (-1) take any size (a model input, whose
/// dims sharing a name the runtime checks; an open output's buffer); otherwise
/// an open dim is an error (its shape is known only after running).
/// `strided_ok`: non-negative strides are kept in the view (a run's inputs
/// and output buffers, which the run checks further); otherwise only
/// contiguous ones are accepted.
tessera::TensorView view_of(const DLTensor& t, const tessera::ValueDesc& desc, const std::string& what,
                            bool open_dims_free = false, bool strided_ok = false);

/// Throws when a caller's output buffer shares bytes with an input or another
/// output: a kernel would read what it already overwrote, or two outputs would
/// race for the same bytes. The one exception is a key/value cache
/// (tessera::CachePair) whose output buffer grows the input's box in the same
/// memory: same data and strides, longer along the cache's axis only.
void check_no_overlap(const std::vector<tessera::TensorView>& inputs, const std::vector<tessera::TensorView>& outputs,
                      const tsr_model* model);

struct ManagedOutput {
  tessera::Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed;
};

void delete_managed(DLManagedTensor* self);

/// A shape given for input or symbolic dimension `name`: every dimension is a size, >= 0.
tessera::Shape checked_shape(const char* name, const int64_t* dims, size_t rank);

/// Throws unless `path` is a regular file (links followed): a directory gives
/// no bytes, and opening a FIFO would block until a writer comes.
void check_model_file(const char* path);

tsr_status* null_argument(const char* name);

/// `out` from `desc`, as far as the caller's struct_size reaches; fixed_value: a model input's value fixed
/// at compile time (input_values), else null.
tsr_status* fill_info(const tessera::ValueDesc& desc, const std::vector<const char*>& dim_names, bool rank_known,
                      tsr_value_info* out, const void* fixed_value = nullptr);

/// The compile options for `graph`: shapes from data bound only to the tensor inputs the model has
/// (an optional tensor's data says nothing of the shapes the model is compiled for).
tessera::CompileOptions compile_options_for(const tessera::Graph& graph, const tsr_options& opts);

/// Compiles an ONNX graph with the options.
std::unique_ptr<tessera::CompiledModel> compile_graph(tessera::Graph graph, const tsr_options& opts);

/// The ONNX model at `path`, imported; an artifact there is a user error, `if_artifact` ending its message.
tessera::Graph import_model_file(const char* path, const tsr_options& opts, const char* if_artifact);

tsr_source* make_source(tessera::Graph graph);

/// The run's inputs, checked (view_of); `strided_ok` keeps padded row-major strides.
std::vector<tessera::TensorView> input_views(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                             bool strided_ok = false);

/// A DLManagedTensor owning `tensor` (what tsr_model_run_alloc hands out), released to the caller.
std::unique_ptr<ManagedOutput> managed_holder(tessera::Tensor tensor);

/// A caller's tsr_run_profile: big enough, with arrays (where given) of the model's node and region counts.
void check_profile(const tsr_run_profile& profile, const tsr_model* model);

tsr_status* run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLManagedTensor** out_outputs,
                      size_t num_outputs, tsr_run_profile* profile);

/// Finishes a value: the DLTensor view of each item.
tsr_value* finish_value(std::unique_ptr<tsr_value> value);

/// A value's tensor for a tensor input, or throws naming the input.
const tessera::Tensor& tensor_of(const tsr_value* value, const std::string& what);

}  // namespace tessera::capi
