/* Tessera C API.
 *
 * Conventions: opaque handles; functions named tsr_<object>_<verb>; every
 * fallible function returns a tsr_status* that is NULL on success, and owned
 * by the caller otherwise (free it with tsr_status_free); output parameters
 * come last and start with out_. No C++ exception crosses this API.
 * Tensors are DLPack DLTensors on the CPU (kDLCPU), contiguous row-major.
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_API __attribute__((visibility("default")))

/* Bool tensors use DLPack's kDLBool type code (6, named from DLPack 0.8 on) with
 * 8 bits a value; older dlpack.h headers, such as Debian 12's 0.6, lack the name. */
#define TSR_DL_BOOL_CODE 6
/* String tensors (ONNX's string type, UTF-8 text) are described with this type
 * code, which DLPack does not use, 8 bits and 1 lane: their elements are reached
 * through tsr_value_string, never through a data pointer (DLPack has no strings). */
#define TSR_DL_STRING_CODE 128

/* What a model input or output, or a tsr_value, is. Sequences hold tensors of
 * one dtype; an optional holds a tensor or a sequence, or nothing. */
typedef enum tsr_value_kind {
  TSR_VALUE_TENSOR = 0,
  TSR_VALUE_SEQUENCE = 1,
  TSR_VALUE_OPTIONAL_TENSOR = 2,
  TSR_VALUE_OPTIONAL_SEQUENCE = 3,
} tsr_value_kind;

typedef enum tsr_status_code {
  TSR_OK = 0,
  TSR_INVALID_ARGUMENT = 1, /* a bad model, input or argument: the caller can fix it */
  TSR_UNSUPPORTED = 2,      /* valid, but not implemented by Tessera */
  TSR_INTERNAL = 3,         /* a bug in Tessera */
} tsr_status_code;

typedef struct tsr_status tsr_status;
typedef struct tsr_options tsr_options;
typedef struct tsr_model tsr_model;

TSR_API tsr_status_code tsr_status_code_of(const tsr_status* status);
/* The message lives as long as the status. */
TSR_API const char* tsr_status_message(const tsr_status* status);

/* The name Tessera gives a DLPack dtype ("float32", "bfloat16", "int64", "bool", "str" for
 * TSR_DL_STRING_CODE), or NULL for one it has no tensors of. The one table of these names: the CLI,
 * Python and PyTorch bridges print them. The string is static. */
TSR_API const char* tsr_dtype_name(DLDataType dtype);
TSR_API void tsr_status_free(tsr_status* status);

/* Options for loading a model. Create, set, pass to tsr_model_load, free. */
TSR_API tsr_status* tsr_options_create(tsr_options** out_options);
TSR_API void tsr_options_free(tsr_options* options);
/* Intra-op threads for the whole session (default 1). */
TSR_API tsr_status* tsr_options_set_threads(tsr_options* options, int32_t num_threads);
/* Binds an input's shape, or a symbolic dimension (name, rank 1: its value).
 * Every dimension must be 0 or more; loading fails when name is neither an
 * input nor a symbolic dimension of the model. */
TSR_API tsr_status* tsr_options_set_input_shape(tsr_options* options, const char* name, const int64_t* dims,
                                                size_t rank);
/* The shape of the data the caller has for input `name` (e.g. read from a
 * file): binds that input's shape like tsr_options_set_input_shape (which wins
 * when both name it), but is ignored when the model has no input of that name,
 * so the caller can report the unknown name itself once it sees the inputs,
 * and for an input that is a sequence or an optional (their data binds nothing). */
TSR_API tsr_status* tsr_options_set_input_data_shape(tsr_options* options, const char* name, const int64_t* dims,
                                                     size_t rank);
/* Keep initializers that are listed as graph inputs as inputs (default: freeze them into constants). */
TSR_API tsr_status* tsr_options_set_freeze_weights(tsr_options* options, int32_t freeze);

/* Backends to partition the model among, highest priority first, as a
 * comma-separated list of names ("test,native"). Default: every built-in
 * backend used by default, in priority order. Unless strict, the native
 * backend is added last when missing, so every op can run. */
TSR_API tsr_status* tsr_options_set_backends(tsr_options* options, const char* backend_list);
/* Manual placement "SELECTOR=BACKEND": SELECTOR is a node name, "op:TYPE", or
 * an op type when no node has that name. May be called several times. */
TSR_API tsr_status* tsr_options_add_placement(tsr_options* options, const char* placement);
/* Denial "BACKEND:SELECTOR" (same selectors): that backend never runs those nodes. */
TSR_API tsr_status* tsr_options_add_denial(tsr_options* options, const char* denial);
/* Regions of non-native backends with fewer nodes run on the native backend (default 1). */
TSR_API tsr_status* tsr_options_set_min_region_size(tsr_options* options, int32_t min_nodes);
/* Strict placement: fail, naming each node no listed backend supports, instead of falling back to native. */
TSR_API tsr_status* tsr_options_set_strict(tsr_options* options, int32_t strict);
/* Compute precision: "fp32" (default); "bf16": Conv, MatMul and Gemm in
 * bfloat16 with float32 accumulation on backends that support it (oneDNN on
 * CPUs with AVX512_BF16), the final layer and numerically sensitive ops in
 * float32; "bf16-all": the final layer too. Where no backend runs bf16 the
 * model runs in float32 and tsr_model_warnings says so. */
TSR_API tsr_status* tsr_options_set_precision(tsr_options* options, const char* precision);

/* Backends, highest priority first: the plug-ins loaded so far (in load
 * order), then the built-in ones (native, the fallback, last). Strings are
 * static. When TESSERA_BACKEND_PLUGINS names a plug-in that fails to load,
 * tsr_backend_count counts the others and tsr_backend_info and
 * tsr_backend_details return that error. */
TSR_API size_t tsr_backend_count(void);
TSR_API tsr_status* tsr_backend_info(size_t index, const char** out_name, const char** out_description,
                                     int32_t* out_used_by_default);

typedef struct tsr_backend_details {
  size_t struct_size; /* set by the caller to sizeof(tsr_backend_details) */
  const char* name;
  const char* description;
  const char* version;     /* the backend's payload version */
  int32_t used_by_default; /* taken when no backend list is given */
  int32_t is_fallback;     /* the backend every op falls back to (native) */
  const char* plugin_path; /* "" for a built-in backend */
  const char* plugin_abi;  /* "MAJOR.MINOR" of include/tessera/backend_plugin.h it was built for; "" when built in */
} tsr_backend_details;
TSR_API tsr_status* tsr_backend_get_details(size_t index, tsr_backend_details* out_details);

/* Loads a backend plug-in (a shared library implementing
 * include/tessera/backend_plugin.h) for the rest of the process: its backend
 * then takes part in every later compile (first in priority when no backend
 * list is given) and loads artifacts that name it. The TESSERA_BACKEND_PLUGINS
 * environment variable (paths separated by ':') loads plug-ins the same way
 * on first use. Loading a path again does nothing. *out_name (optional,
 * static) is the backend's name. */
TSR_API tsr_status* tsr_load_backend_plugin(const char* path, const char** out_name);

/* Loads a model: an ONNX file (compiled now, with options) or a .tsr artifact
 * written by tsr_model_save (only the thread count of options applies).
 * options may be NULL. Free with tsr_model_free. path must be a regular file
 * (not a directory or FIFO); an ONNX model's external data must be regular
 * files inside the model's folder, reached without symbolic links. */
TSR_API tsr_status* tsr_model_load(const char* path, const tsr_options* options, tsr_model** out_model);
/* 1 when the file starts like a .tsr artifact, 0 otherwise (or unreadable). */
TSR_API int32_t tsr_file_is_artifact(const char* path);
/* Writes the compiled model as one .tsr artifact (plan, constants, payloads),
 * through a temporary file beside path that is then renamed over it. Only a
 * regular file is replaced: a symbolic link, directory, FIFO or device at path
 * is an error. */
TSR_API tsr_status* tsr_model_save(const tsr_model* model, const char* path);
TSR_API void tsr_model_free(tsr_model* model);

/* Loads a model from bytes in memory, as tsr_model_load does from a file: an
 * ONNX model (compiled now, with options; external data is refused, having no
 * folder to come from) or a .tsr artifact (only the thread count of options
 * applies). The bytes are copied where the model needs them: the caller may
 * free them when this returns. name labels error messages (may be NULL). */
TSR_API tsr_status* tsr_model_load_from_memory(const void* data, size_t size, const char* name,
                                               const tsr_options* options, tsr_model** out_model);
/* The bytes tsr_model_save would write (a .tsr artifact), e.g. to embed the
 * model in another file. Free *out_data with tsr_buffer_free. */
TSR_API tsr_status* tsr_model_save_to_memory(const tsr_model* model, void** out_data, size_t* out_size);
TSR_API void tsr_buffer_free(void* data);

/* An ONNX model imported but not compiled: what it declares as inputs and
 * outputs (with the dimensions it leaves open, and their names), compiled as
 * often as needed, e.g. once per input shape with tsr_options_set_input_shape
 * or tsr_options_set_input_data_shape. Of the options, only
 * tsr_options_set_freeze_weights applies when loading. tsr_source_compile may
 * be called from several threads at once; each model it returns is
 * independent of the source, which may be freed first. */
typedef struct tsr_source tsr_source;
TSR_API tsr_status* tsr_source_load(const char* path, const tsr_options* options, tsr_source** out_source);
TSR_API tsr_status* tsr_source_load_from_memory(const void* data, size_t size, const char* name,
                                                const tsr_options* options, tsr_source** out_source);
TSR_API void tsr_source_free(tsr_source* source);
TSR_API tsr_status* tsr_source_compile(const tsr_source* source, const tsr_options* options, tsr_model** out_model);

/* Describes input or output i. Strings and shapes live as long as the model
 * (or source). Dims that are only known after running (data-dependent), or
 * that a source leaves open, are -1. */
typedef struct tsr_value_info {
  size_t struct_size; /* set by the caller to sizeof(tsr_value_info) */
  const char* name;
  DLDataType dtype;
  int32_t ndim; /* -1 when a source does not know the rank (shape is then NULL) */
  const int64_t* shape;
  /* ndim entries: the name the ONNX model gives a dimension (dim_param, e.g.
   * "batch"), or "" when it gives none. Absent from callers built before it
   * (a smaller struct_size). */
  const char* const* dim_names;
  /* A tensor, or a sequence or optional (run through tsr_model_run_values);
   * dtype and shape then describe the tensors it holds. Absent from callers
   * built before it (a smaller struct_size). */
  int32_t kind; /* tsr_value_kind */
  /* A model's input fixed at compile time (the input_values option): its one
   * element, of dtype, which every run must feed; NULL for other inputs, for
   * outputs and for sources. Lives as long as the model. Absent from callers
   * built before it (a smaller struct_size). */
  const void* fixed_value;
} tsr_value_info;

TSR_API size_t tsr_model_input_count(const tsr_model* model);
TSR_API size_t tsr_model_output_count(const tsr_model* model);
TSR_API tsr_status* tsr_model_input_info(const tsr_model* model, size_t index, tsr_value_info* out_info);
TSR_API tsr_status* tsr_model_output_info(const tsr_model* model, size_t index, tsr_value_info* out_info);
TSR_API size_t tsr_source_input_count(const tsr_source* source);
TSR_API size_t tsr_source_output_count(const tsr_source* source);
TSR_API tsr_status* tsr_source_input_info(const tsr_source* source, size_t index, tsr_value_info* out_info);
TSR_API tsr_status* tsr_source_output_info(const tsr_source* source, size_t index, tsr_value_info* out_info);

/* Where each node ran. Strings live as long as the model. backend is "native",
 * or "folded" for nodes computed at compile time. */
TSR_API size_t tsr_model_node_count(const tsr_model* model);
TSR_API tsr_status* tsr_model_node_placement(const tsr_model* model, size_t index, const char** out_node_name,
                                             const char** out_op_type, const char** out_backend);
/* Why node `index` runs where it does, or "" : e.g. "fused into 'conv_3'",
 * "computed at compile time". The string lives as long as the model. */
TSR_API tsr_status* tsr_model_node_note(const tsr_model* model, size_t index, const char** out_note);

/* The precision node i computes in: "bf16" (float32 accumulation) or "" (its
 * values' own types); and under --precision bf16, for a Conv/MatMul/Gemm kept
 * in float32, why ("" otherwise). Strings live as long as the model. */
TSR_API tsr_status* tsr_model_node_precision(const tsr_model* model, size_t index, const char** out_precision,
                                             const char** out_note);
/* The nodes inside compiled control-flow bodies (If, Loop, Scan), over every
 * node in order: each with the node that holds it (`out_row`, an index for
 * tsr_model_node_placement), its path below that node ("then_branch/Conv_3",
 * "body/If_2/else_branch/Add"), op type and backend. Strings live as long as
 * the model. */
TSR_API size_t tsr_model_inner_node_count(const tsr_model* model);
TSR_API tsr_status* tsr_model_inner_node(const tsr_model* model, size_t index, size_t* out_row, const char** out_path,
                                         const char** out_op_type, const char** out_backend);
/* Compile-time warnings, one per line ("" when none); lives as long as the model. */
TSR_API const char* tsr_model_warnings(const tsr_model* model);

/* The region (index into tsr_model_region_info) node i ran in, -1 for
 * folded nodes, and why the partitioner put it on its backend. */
TSR_API tsr_status* tsr_model_node_region(const tsr_model* model, size_t index, int64_t* out_region,
                                          const char** out_reason);

/* Regions: parts of the graph each run by one backend, in execution order. */
typedef struct tsr_region_info {
  size_t struct_size; /* set by the caller to sizeof(tsr_region_info) */
  const char* backend;
  const char* memory_space; /* "host" or the backend's device space */
  size_t node_count;
  size_t input_count;  /* boundary tensors read from other regions or the graph's inputs */
  size_t output_count; /* boundary tensors read by later regions or the graph's outputs */
  size_t payload_bytes;
} tsr_region_info;
TSR_API size_t tsr_model_region_count(const tsr_model* model);
TSR_API tsr_status* tsr_model_region_info(const tsr_model* model, size_t index, tsr_region_info* out_info);
/* Tensor copies between memory spaces that one run makes, and their bytes. */
TSR_API tsr_status* tsr_model_copies_per_run(const tsr_model* model, int64_t* out_copies, int64_t* out_bytes);

/* The model's metadata (producer_name, producer_version, ir_version, doc_string,
 * metadata_props, ...), sorted by key. Strings live as long as the model. */
TSR_API size_t tsr_model_metadata_count(const tsr_model* model);
TSR_API tsr_status* tsr_model_metadata(const tsr_model* model, size_t index, const char** out_key,
                                       const char** out_value);
/* Peak bytes of the planned arena that one run uses, and bytes of constants. */
TSR_API int64_t tsr_model_arena_bytes(const tsr_model* model);
TSR_API int64_t tsr_model_constant_bytes(const tsr_model* model);
/* Elements in the model's initializers (weights), as imported. */
TSR_API int64_t tsr_model_parameter_count(const tsr_model* model);

/* Runs the model. inputs: one DLTensor per model input, in model order; read
 * in place, never copied. outputs: one DLTensor per model output whose data,
 * dtype and shape the caller set; written in place where the part of the
 * model making it can write there, else made and copied in (an output with
 * open dims must be given the shape the run makes; checked). Every tensor is
 * checked before anything runs: CPU device, the model's dtype and shape, data
 * not NULL (unless empty) and aligned to its element size; strides NULL,
 * compact, or padded row-major (a box of a larger row-major buffer: the last
 * dimension of stride 1, each other one of a stride at least the span of those
 * after it), which a part of the model that reads only contiguous memory gets
 * a copy of. An output may not overlap an input or another output, except a
 * key/value cache (below). Safe to call from several threads at once on one
 * model.
 *
 * I/O binding of a key/value cache: where a model output is Concat(a model
 * input, new positions) along an axis (a decoder's present = past + this
 * step's keys), the caller may keep both in one buffer with room to grow
 * along that axis: the input a box of it (strides of the whole buffer), the
 * output the same box longer along the axis (same data and strides). The run
 * then writes only the new positions, and attention reads the cache in place
 * (tsr_run_profile's and tsr_model_stats' binding_copies stay 0 where
 * nothing needed a copy). */
TSR_API tsr_status* tsr_model_run(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                  DLTensor* outputs, size_t num_outputs);

/* Runs the model with some outputs written into caller buffers as
 * tsr_model_run does (outputs[i] non-NULL) and the others allocated by Tessera
 * and returned in out_allocated[i] (NULL where the output was bound), which the
 * caller frees with its deleter. On failure every out_allocated pointer is NULL. */
TSR_API tsr_status* tsr_model_run_bound(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                        const DLTensor* const* outputs, DLManagedTensor** out_allocated,
                                        size_t num_outputs);

/* Runs the model and returns outputs that Tessera allocated (for outputs whose
 * shape is only known after running). out_outputs must have room for
 * tsr_model_output_count pointers; the caller frees each with its deleter.
 * On failure every pointer is NULL and nothing needs freeing. */
TSR_API tsr_status* tsr_model_run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                        DLManagedTensor** out_outputs, size_t num_outputs);

/* Values of any kind (tsr_value_kind), and string tensors: what
 * tsr_model_run_values takes and returns. A tsr_value owns its data and is
 * immutable; free it with tsr_value_free. The tsr_model_run* functions above
 * take numeric and bool tensors only and refuse a model with other inputs or
 * outputs, naming them. */
typedef struct tsr_value tsr_value;
/* A tensor value holding a copy of `tensor` (CPU, compact). */
TSR_API tsr_status* tsr_value_create_tensor(const DLTensor* tensor, tsr_value** out_value);
/* A string tensor of `shape` (ndim entries; ndim 0 is a scalar) from
 * shape_numel UTF-8 strings, copied; lengths[i] bytes each, or NUL-terminated
 * when lengths is NULL. */
TSR_API tsr_status* tsr_value_create_strings(const char* const* strings, const size_t* lengths, const int64_t* shape,
                                             int32_t ndim, tsr_value** out_value);
/* A sequence of `count` tensor values (numeric or string) of one dtype; the
 * tensors are shared, not copied (the items may be freed afterwards). */
TSR_API tsr_status* tsr_value_create_sequence(const tsr_value* const* items, size_t count, tsr_value** out_value);
/* An optional: `content` (a tensor or a sequence value, shared) or, when NULL,
 * an empty optional of `kind` (TSR_VALUE_OPTIONAL_TENSOR or _SEQUENCE). */
TSR_API tsr_status* tsr_value_create_optional(const tsr_value* content, tsr_value_kind kind, tsr_value** out_value);
TSR_API void tsr_value_free(tsr_value* value);
/* What a value is: its kind, whether it holds something (0 only for an empty
 * optional), and how many tensors it holds (1 for a tensor, a sequence's length). */
TSR_API tsr_status* tsr_value_describe(const tsr_value* value, int32_t* out_kind, int32_t* out_present,
                                       size_t* out_tensor_count);
/* The index-th tensor the value holds (0 for a tensor or an optional tensor),
 * valid as long as the value. A string tensor has dtype TSR_DL_STRING_CODE and
 * data NULL: read its elements with tsr_value_string. */
TSR_API tsr_status* tsr_value_tensor(const tsr_value* value, size_t index, const DLTensor** out_tensor);
/* Element `element` (row-major) of the value's index-th tensor, a string
 * tensor: its UTF-8 bytes (NUL-terminated, may hold NULs) and length, valid as long as the value. */
TSR_API tsr_status* tsr_value_string(const tsr_value* value, size_t index, int64_t element, const char** out_bytes,
                                     size_t* out_length);
/* Runs the model on values of any kind: one per model input, in model order
 * (inputs are copied where they are not already Tessera's). out_outputs must
 * have room for tsr_model_output_count pointers; each output is a new value the
 * caller frees. On failure every pointer is NULL. */
TSR_API tsr_status* tsr_model_run_values(const tsr_model* model, const tsr_value* const* inputs, size_t num_inputs,
                                         tsr_value** out_outputs, size_t num_outputs);

/* Same as tsr_model_run_alloc, and adds each node's run time in milliseconds
 * to out_node_milliseconds[i], for node i in tsr_model_node_placement order
 * (num_nodes must be tsr_model_node_count; folded nodes get nothing added).
 * The caller zeroes the array once and may sum over several runs. */
TSR_API tsr_status* tsr_model_run_profiled(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                           DLManagedTensor** out_outputs, size_t num_outputs,
                                           double* out_node_milliseconds, size_t num_nodes);

/* What a profiled run measured. The caller sets struct_size, points the
 * arrays at tsr_model_node_count / tsr_model_region_count zeroed doubles
 * (either may be NULL with a count of 0); runs add to them, so they may sum
 * over several runs. With node_milliseconds NULL, nodes are not timed: the
 * backends run as they do without a profile, and only regions are timed (a
 * server can time every run by region this way). */
typedef struct tsr_run_profile {
  size_t struct_size; /* sizeof(tsr_run_profile) */
  double* node_milliseconds;
  size_t num_nodes;
  double* region_milliseconds; /* copies into and out of the region included */
  size_t num_regions;
  int64_t copies; /* tensor copies between memory spaces (added) */
  int64_t copy_bytes;
  /* Per region (num_regions of them; may be NULL; added): runs on the native
   * backend because an input held NaN or +-Inf and the region's backend is
   * exact only for finite inputs. Absent from callers built before it (a
   * smaller struct_size). */
  int64_t* region_fallbacks;
  /* Regions compiled with open dims (a model with symbolic dims; added, absent
   * from callers built before them): how often such a region found what it
   * prepares per input shape (oneDNN primitives) ready (hits), had to prepare
   * it for a new shape (misses) and the milliseconds that took, and how often
   * it could not run at the call's shapes and its nodes ran on native. */
  int64_t shape_cache_hits;
  int64_t shape_cache_misses;
  double shape_prepare_milliseconds;
  int64_t shape_fallbacks;
  /* Working memory allocated during the run, not reused from earlier runs
   * (values of shapes known only at run time, backends' workspaces; not the
   * outputs handed to the caller): 0 once warmed up at shapes seen before (added). */
  int64_t allocations;
  /* Caller buffers the run could not use in place (a strided input copied
   * contiguous for a part of the model that reads only such memory, an output
   * made elsewhere and copied into its buffer), and their bytes (added;
   * absent from callers built before them). */
  int64_t binding_copies;
  int64_t binding_copy_bytes;
  /* Regions compiled with open dims, at input shapes their backend had not
   * prepared: runs that went to native instead, as preparing those shapes was
   * measured to cost more than running them there once; a shape that comes
   * back is prepared (added; absent from callers built before it). */
  int64_t shape_deferrals;
  /* Per node inside compiled control-flow bodies (tsr_model_inner_node's
   * order; num_inner_nodes of them; may be NULL; added): its time, which the
   * If / Loop / Scan holding it includes in its own (a Loop's trips summed). */
  double* inner_node_milliseconds;
  size_t num_inner_nodes;
} tsr_run_profile;

/* Counts over every run of a model since it was compiled or loaded, profiled
 * or not (tsr_model_stats). */
typedef struct tsr_model_stats_t {
  size_t struct_size; /* set by the caller to sizeof(tsr_model_stats_t) */
  int64_t runs;
  int64_t shape_cache_hits;   /* as tsr_run_profile's, summed over the runs */
  int64_t shape_cache_misses;
  double shape_prepare_milliseconds;
  int64_t shape_fallbacks;
  int64_t allocations;
  int64_t binding_copies; /* as tsr_run_profile's (absent from callers built before them) */
  int64_t binding_copy_bytes;
  int64_t shape_deferrals; /* as tsr_run_profile's (absent from callers built before it) */
} tsr_model_stats_t;
TSR_API tsr_status* tsr_model_stats(const tsr_model* model, tsr_model_stats_t* out_stats);

/* Same as tsr_model_run_alloc, and fills profile. */
TSR_API tsr_status* tsr_model_run_with_profile(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                               DLManagedTensor** out_outputs, size_t num_outputs,
                                               tsr_run_profile* profile);

/* A placement report: format "table", "json", "dot" (Graphviz) or "html" (a
 * self-contained page with an SVG of the graph coloured by backend).
 * model_name labels it; profile (may be NULL) adds times. Free the text with
 * tsr_string_free. */
TSR_API tsr_status* tsr_model_report(const tsr_model* model, const char* format, const char* model_name,
                                     const tsr_run_profile* profile, char** out_text);
TSR_API void tsr_string_free(char* text);

/* Accuracy check, region by region: runs the model once on `inputs` and,
 * after each region, the same region's nodes on the native backend in float32
 * (float64_reference = 0) or float64 (1: every float32 value of the region
 * widened; native regions are compared too) on the inputs the region just read, and compares every region output (max
 * abs and relative error, cosine similarity, NaN/Inf placement; exact for
 * integers). A region is flagged when an output's relative error (max abs
 * error over max |reference|) exceeds `tolerance` or its cosine is below
 * `min_cosine`; a negative value picks the default by precision (1e-4 and no
 * cosine for float32 regions, 3e-2 and 0.999 for regions with bf16 nodes, 0.1 and
 * 0.99 for regions with quantized ops, whose 8-bit outputs are then compared as numbers).
 * Writes the report as a text table to *out_table, as JSON to *out_json and
 * as a self-contained HTML page to *out_html (each may be NULL; free each
 * with tsr_string_free), and the number of flagged regions to *out_flagged
 * (may be NULL). config may be NULL (every default). */
typedef struct tsr_check_config {
  size_t struct_size;         /* sizeof(tsr_check_config); members past it read as their defaults */
  double tolerance;           /* relative error allowed; negative: by precision (set -1; 0 means exact) */
  double min_cosine;          /* cosine similarity required; negative: by precision (set -1) */
  int32_t float64_reference;  /* 1: the reference computes in float64 (default 0) */
  const char* model_name;     /* labels the report (NULL: none) */
} tsr_check_config;
TSR_API tsr_status* tsr_model_check(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                    const tsr_check_config* config, char** out_table, char** out_json, char** out_html,
                                    size_t* out_flagged);

/* Static post-training quantization (`tessera quantize`): writes a QDQ ONNX
 * model (QuantizeLinear / DequantizeLinear around Conv, MatMul, Gemm, Add,
 * pooling and Concat; int8 weights, uint8 activations, int32 biases) that
 * Tessera and ONNX Runtime both run. Calibration runs the float model on the
 * samples added with tsr_quantizer_add_sample or, when none is, on
 * `random_samples` random inputs. */
typedef struct tsr_quantizer tsr_quantizer;
typedef void (*tsr_progress_fn)(void* user, const char* phase, int64_t done, int64_t total);
/* Whether to stop a long task (quantize, tune); `user` is the config's progress_user. */
typedef int32_t (*tsr_stop_fn)(void* user);
typedef struct tsr_quantize_config {
  size_t struct_size;      /* sizeof(tsr_quantize_config); members past it read as their defaults */
  const char* method;      /* "minmax" (NULL), "percentile" or "entropy" */
  double percentile;       /* for "percentile": the share of values kept, in percent (0: 99.99) */
  int32_t per_channel;     /* 1: a weight scale per output channel (needs opset 13) */
  const char* exclude;     /* comma-separated node names or op types left in float (NULL: none) */
  int32_t random_samples;  /* random inputs when no sample was added (0: 16) */
  uint64_t seed;           /* for the random inputs */
  tsr_progress_fn progress;  /* called after each calibration run (may be NULL) */
  void* progress_user;
  /* Asked after each progress call (may be NULL): nonzero stops the calibration with an error
   * ("stopped by the caller"), and nothing is written. */
  tsr_stop_fn stop;
  /* 1: weight-only int8: the constant weights of MatMul and Gemm become int8 (symmetric, a scale per
   * output column) behind a DequantizeLinear; activations stay float, nothing is calibrated (samples
   * and method are ignored). Native runs products of few rows (a decoder's token step) reading the
   * 8-bit weights. */
  int32_t weights_only;
} tsr_quantize_config;
/* config may be NULL (the defaults); options set threads, backends and the
 * shapes of open input dims for the calibration runs. */
TSR_API tsr_status* tsr_quantizer_create(const char* model_path, const tsr_options* options,
                                         const tsr_quantize_config* config, tsr_quantizer** out_quantizer);
/* One calibration sample: one tensor per model input, in input order (copied). */
TSR_API tsr_status* tsr_quantizer_add_sample(tsr_quantizer* quantizer, const DLTensor* inputs, size_t num_inputs);
/* Calibrates and writes the QDQ model; *out_summary (may be NULL; free with
 * tsr_string_free) says what was quantized and what stayed float and why. */
TSR_API tsr_status* tsr_quantizer_write(tsr_quantizer* quantizer, const char* output_path, char** out_summary);
TSR_API void tsr_quantizer_free(tsr_quantizer* quantizer);

/* Measured placement (`tessera tune`): compiles and times whole-model
 * candidates on random inputs of the model's shapes (the default priority
 * order, each backend alone, then each region of the best so far moved to
 * each other backend) and writes a tuning record (JSON) naming the fastest
 * placement and every candidate's time. The options give threads, backends,
 * precision, denials and input shapes (open dims must be bound). config may
 * be NULL (a 60 s budget). *out_summary (may be NULL; free with
 * tsr_string_free) is a table of the candidates. */
typedef struct tsr_tune_config {
  size_t struct_size;      /* sizeof(tsr_tune_config); members past it read as their defaults */
  double budget_seconds;   /* for the search after the single-backend candidates (0: 60) */
  tsr_progress_fn progress;  /* called before each candidate (may be NULL) */
  void* progress_user;
  /* Asked after each progress call (may be NULL): nonzero stops the search with an error ("stopped
   * by the caller"), and no record is written. */
  tsr_stop_fn stop;
} tsr_tune_config;
TSR_API tsr_status* tsr_tune(const char* model_path, const tsr_options* options, const tsr_tune_config* config,
                             const char* record_path, char** out_summary);
/* Applies a tuning record when compiling: its placement when it was made for
 * this model and input shapes (else a warning, and the default placement);
 * a record from another CPU, ISA, thread count or precision is applied with a
 * warning naming what differs. A malformed record is an error here. */
TSR_API tsr_status* tsr_options_set_tuning(tsr_options* options, const char* record_path);
/* Bounds an open dimension by its name (ONNX dim_param): every run checks that
 * the inputs' dims of that name lie in min_size..max_size (a user error names
 * the input and dim otherwise), and values whose size follows from bounded
 * dims take memory for their size at the upper bounds, so that after one run
 * no run within the bounds allocates working memory. Applies to artifacts
 * too (it does not change the plan). A name the model has no open dim of is
 * an error when the model is compiled or loaded. */
TSR_API tsr_status* tsr_options_set_dim_bounds(tsr_options* options, const char* name, int64_t min_size,
                                               int64_t max_size);
/* Fixes the value of input `name` (one element, numeric or bool) at compile
 * time: `value` is its text ("16000", "0.5", "true"), parsed for the input's
 * dtype when the model compiles (a user error names the input otherwise).
 * What depends on it folds: an If on it takes its branch at compile time, and
 * that branch's nodes are placed and fused like the rest. The input stays an
 * input: each run checks that the caller feeds that value (TSR_INVALID_ARGUMENT
 * otherwise). An artifact keeps the value and the check. */
TSR_API tsr_status* tsr_options_set_input_value(tsr_options* options, const char* name, const char* value);
/* Sets an option by name from its text: the one list of option names, which
 * the CLI (--NAME, '_' written '-'), Python (keyword arguments) and the torch
 * op (its option dict) all take. "threads" (1..1024), "backends",
 * "place" and "deny" (each call adds one), "min_region_size" (>= 1),
 * "strict" and "freeze_weights" (1/0/true/false), "precision", "tuning" (a
 * record's path), "dim_bounds" ("NAME=MIN..MAX"; each call adds one),
 * "input_values" ("NAME=VALUE"; each call adds one), as the
 * setters above take them. An unknown name or a bad
 * value is TSR_INVALID_ARGUMENT naming the option. */
TSR_API tsr_status* tsr_options_set(tsr_options* options, const char* name, const char* value);
/* The names tsr_options_set takes, comma-separated ("threads,backends,...").
 * The string is static. */
TSR_API const char* tsr_option_names(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_H_ */
