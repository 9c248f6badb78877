/* Tessera backend plug-in ABI.
 *
 * A backend built outside Tessera's tree is a shared library that includes
 * only this header (and dlpack/dlpack.h) and exports one function:
 *
 *   TSRP_EXPORT const tsrp_plugin* tessera_backend_plugin(const tsrp_host* host);
 *
 * Tessera loads it with `--backend-plugin PATH.so` (CLI), tsr_load_backend_plugin
 * (C API), tessera.load_backend_plugin (Python) or the TESSERA_BACKEND_PLUGINS
 * environment variable (paths separated by ':').
 *
 * Versioning. Every struct below starts with `struct_size` (sizeof the struct
 * as its writer compiled it) and only ever grows at the end. The ABI has a
 * major and a minor version: a minor version adds members at the end of
 * structs; a major version changes anything else. The host refuses a plug-in
 * whose abi_major differs from its own, with a message naming both. It never
 * reads a member that lies beyond the struct_size the plug-in wrote
 * (TSRP_HAS_MEMBER), so a plug-in built against an older minor version keeps
 * working; a plug-in likewise checks the host's struct_size before using a
 * member newer than the version it requires.
 *
 * Contract (see docs/architecture.md, "Backend plug-ins"). Backends propose,
 * the host decides:
 *  - support(): the host asks, node by node, whether the backend takes a node
 *    of a graph; a refusal carries a reason, which `tessera partition` shows;
 *  - patterns: fused subgraphs the backend prefers to take whole, given as data
 *    (tsrp_pattern) that the host matches; the host still decides the regions
 *    and keeps them free of cycles;
 *  - compile(): a region (a standalone graph, tsrp_graph) → an opaque payload
 *    that the host stores in the .tsr artifact, beside the backend's name,
 *    version and compatibility string;
 *  - load(): payload + the same region graph → an executable region. The
 *    payload may be hostile (it comes from a file): validate it and return an
 *    error status, never crash;
 *  - run(): the region's inputs and outputs as DLPack tensors in the backend's
 *    memory space;
 *  - memory space (optional): where the backend's tensors live when not in host
 *    memory; the host plans and counts the copies between spaces.
 *
 * Errors cross as status objects made with tsrp_host.make_status, never as C++
 * exceptions (a C++ plug-in catches everything at this boundary). A function
 * returning tsrp_status* returns NULL on success; the host takes ownership of
 * a non-null status. Strings passed to the plug-in are NUL-terminated UTF-8
 * and live as long as the object they belong to (a graph view lives as long as
 * the region made from it). Calls on one backend object may come from several
 * threads, but compile() and load() never run concurrently with each other
 * on the same backend; run() on one region may be called from several threads
 * at once unless the region says otherwise (tsrp_plugin.serial_runs).
 */
#ifndef TESSERA_BACKEND_PLUGIN_H_
#define TESSERA_BACKEND_PLUGIN_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSRP_ABI_MAJOR 1
#define TSRP_ABI_MINOR 0

#define TSRP_EXPORT __attribute__((visibility("default")))
/* The name of the one exported function. */
#define TSRP_ENTRY_POINT_NAME "tessera_backend_plugin"

/* True when `s` (a pointer to a struct of `type` whose writer set struct_size)
 * is large enough to hold `member`. */
#define TSRP_HAS_MEMBER(s, type, member) \
  ((s)->struct_size >= offsetof(type, member) + sizeof(((type*)0)->member))

typedef struct tsrp_status tsrp_status; /* opaque; made by the host */
typedef struct tsrp_backend tsrp_backend; /* opaque; the plug-in's backend instance */
typedef struct tsrp_region tsrp_region;   /* opaque; the plug-in's executable region */

typedef enum tsrp_status_code {
  TSRP_OK = 0,
  TSRP_INVALID_ARGUMENT = 1, /* bad input: a hostile payload, a wrong tensor, a bad option */
  TSRP_UNSUPPORTED = 2,      /* valid, but the backend cannot do it */
  TSRP_INTERNAL = 3,         /* a bug or a failure in the backend (out of memory, device lost) */
} tsrp_status_code;

/* Element types, as ONNX's TensorProto.DataType numbers them. */
typedef enum tsrp_dtype {
  TSRP_UNDEFINED = 0,
  TSRP_FLOAT32 = 1,
  TSRP_UINT8 = 2,
  TSRP_INT8 = 3,
  TSRP_UINT16 = 4,
  TSRP_INT16 = 5,
  TSRP_INT32 = 6,
  TSRP_INT64 = 7,
  TSRP_STRING = 8,
  TSRP_BOOL = 9,
  TSRP_FLOAT16 = 10,
  TSRP_FLOAT64 = 11,
  TSRP_UINT32 = 12,
  TSRP_UINT64 = 13,
  TSRP_BFLOAT16 = 16,
} tsrp_dtype;

/* ---------------------------------------------------------------- host */

/* What the host gives the plug-in at load time. */
typedef struct tsrp_host {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* tessera_version;
  /* A status the host will own; `message` is copied. code must not be TSRP_OK. */
  tsrp_status* (*make_status)(tsrp_status_code code, const char* message);
} tsrp_host;

/* ---------------------------------------------------------------- graph view */

typedef enum tsrp_attribute_kind {
  TSRP_ATTR_INT = 1,
  TSRP_ATTR_FLOAT = 2,
  TSRP_ATTR_STRING = 3,
  TSRP_ATTR_INTS = 4,
  TSRP_ATTR_FLOATS = 5,
  TSRP_ATTR_STRINGS = 6,
  TSRP_ATTR_TENSOR = 7,
  TSRP_ATTR_GRAPH = 8,
} tsrp_attribute_kind;

struct tsrp_graph;

/* A tensor attribute's value (host memory, row-major). */
typedef struct tsrp_tensor_data {
  size_t struct_size;
  tsrp_dtype dtype;
  int32_t rank;
  const int64_t* dims;
  const void* data; /* NULL for a tensor of strings (not offered) */
  size_t nbytes;
} tsrp_tensor_data;

typedef struct tsrp_attribute {
  size_t struct_size;
  const char* name;
  tsrp_attribute_kind kind;
  int64_t i;            /* INT */
  float f;              /* FLOAT */
  const char* s;        /* STRING (may hold NUL bytes: s_length is its length) */
  size_t s_length;
  size_t count;         /* INTS, FLOATS, STRINGS */
  const int64_t* ints;
  const float* floats;
  const char* const* strings;
  const tsrp_tensor_data* tensor;  /* TENSOR */
  const struct tsrp_graph* graph;  /* GRAPH (e.g. a composite's body) */
} tsrp_attribute;

/* One value: a graph input, a constant or a node output. */
typedef struct tsrp_value {
  size_t struct_size;
  const char* name;
  tsrp_dtype dtype;
  int32_t rank;          /* -1 when not known */
  const int64_t* dims;   /* rank entries; -1 for a dimension not known before running */
  const void* constant;  /* host data of a constant (row-major), NULL otherwise */
  size_t constant_bytes;
} tsrp_value;

/* One node. A composite (a matched fused pattern) has op_type "Composite",
 * domain "tessera", a STRING attribute "pattern" naming the pattern and a
 * GRAPH attribute "body" holding the matched nodes; its inputs and outputs are
 * the body's, in the same order. */
typedef struct tsrp_node {
  size_t struct_size;
  const char* name;
  const char* op_type;
  const char* domain;  /* "" for the default ONNX domain */
  int32_t opset;       /* the opset version of the node's domain in the model */
  size_t input_count;
  const int32_t* inputs;  /* value indices; -1 for an omitted optional input */
  size_t output_count;
  const int32_t* outputs; /* value indices; -1 for an omitted optional output */
  size_t attribute_count;
  const tsrp_attribute* const* attributes;
} tsrp_node;

/* A read-only graph. Nodes are in a topological order. For a region, the
 * inputs are the values it reads from other regions or from the model's
 * inputs (in the order run() receives them), and the outputs are those it
 * gives to other regions or to the model's outputs (the order of run()'s
 * outputs). Constants are values with `constant` set. */
typedef struct tsrp_graph {
  size_t struct_size;
  const char* name;
  size_t value_count;
  const tsrp_value* const* values;
  size_t node_count;
  const tsrp_node* const* nodes;
  size_t input_count;
  const int32_t* inputs;
  size_t output_count;
  const int32_t* outputs;
} tsrp_graph;

/* ---------------------------------------------------------------- patterns */

typedef enum tsrp_pattern_kind {
  TSRP_PATTERN_OP = 1,       /* a node whose op_type is one of op_types */
  TSRP_PATTERN_ANY = 2,      /* any value */
  TSRP_PATTERN_CONSTANT = 3, /* a constant value */
  TSRP_PATTERN_SCALAR = 4,   /* a one-element constant equal to scalar (± tolerance) */
  TSRP_PATTERN_ABSENT = 5,   /* an omitted optional input */
  TSRP_PATTERN_EITHER = 6,   /* the first of its inputs (alternatives) that matches */
} tsrp_pattern_kind;

enum {
  /* Inputs 0 and 1 may match in either order (Add, Mul, Max, Min, Sum, And,
   * Or, Xor and Equal are commutative without it). */
  TSRP_PATTERN_COMMUTATIVE = 1u << 0,
  /* The matched node must also be one that support() accepts on its own. */
  TSRP_PATTERN_SUPPORTED = 1u << 1,
  /* The host asks tsrp_plugin.pattern_check whether the node may match this
   * entry (attribute values, dtypes, shapes: any condition of the plug-in's). */
  TSRP_PATTERN_CHECKED = 1u << 2,
};

/* One node of a pattern. Patterns are DAGs: an entry used as the input of two
 * entries binds the same value (or node) in both places. */
typedef struct tsrp_pattern_node {
  size_t struct_size;
  tsrp_pattern_kind kind;
  const char* op_types;  /* OP: one or more op types separated by '|', e.g. "Relu|LeakyRelu" */
  int32_t input_count;   /* OP: -1 leaves the inputs unchecked (each becomes a composite input) */
  const int32_t* inputs; /* OP: indices of other entries of the same pattern; EITHER: the alternatives */
  uint32_t flags;        /* OP: TSRP_PATTERN_* flags */
  double scalar;         /* SCALAR */
  double tolerance;      /* SCALAR */
} tsrp_pattern_node;

/* A fused pattern: a name and a DAG rooted at entry `root`. Every output of
 * a matched node but the root's must be read only inside the match. */
typedef struct tsrp_pattern {
  size_t struct_size;
  const char* name;
  size_t node_count;
  const tsrp_pattern_node* const* nodes;
  int32_t root;
} tsrp_pattern;

/* ---------------------------------------------------------------- memory */

/* A memory space other than the host's. The host never reads or writes its
 * memory except through these functions. A backend with an asynchronous queue
 * may return from copy_from_host before the copy is done, as long as its queue
 * orders the copy before later work on that memory; copy_to_host returns once
 * the host bytes are written. The host calls synchronize (when set) after
 * each region of the space has run and its outputs were copied back, before
 * it reuses any host buffer a copy read. deallocate may be called with work
 * on that memory still queued (after a failed run): it must wait for it. */
typedef struct tsrp_memory_space {
  size_t struct_size;
  const char* name;  /* e.g. "example-accelerator" */
  void* context;     /* passed back to each function */
  /* At least `bytes` bytes (bytes may be 0), 64-byte aligned. */
  tsrp_status* (*allocate)(void* context, size_t bytes, void** out_data);
  void (*deallocate)(void* context, void* data);
  tsrp_status* (*copy_from_host)(void* context, void* device_dst, const void* host_src, size_t bytes);
  tsrp_status* (*copy_to_host)(void* context, void* host_dst, const void* device_src, size_t bytes);
  tsrp_status* (*synchronize)(void* context); /* optional (NULL) */
} tsrp_memory_space;

/* ---------------------------------------------------------------- backend */

typedef struct tsrp_backend_options {
  size_t struct_size;
  int32_t num_threads; /* the session's intra-op thread count; the backend uses no more */
} tsrp_backend_options;

/* The answer of support(): supported, or not with a reason. */
typedef struct tsrp_support {
  size_t struct_size;
  int32_t supported;
  /* When not supported: a reason, written NUL-terminated into reason (at most
   * reason_capacity bytes including the NUL; longer reasons are cut). */
  char* reason;
  size_t reason_capacity;
} tsrp_support;

/* A compiled payload, owned by the plug-in until the host calls free_payload. */
typedef struct tsrp_payload {
  size_t struct_size;
  const void* data;
  size_t size;
  void* owner; /* passed to free_payload */
} tsrp_payload;

/* Per-run arguments of run(). Tensors are in the backend's memory space
 * (device kDLCPU for host memory, kDLExtDev for a plug-in memory space),
 * contiguous row-major, with dtypes and shapes as the region graph says. */
typedef struct tsrp_run_args {
  size_t struct_size;
  size_t input_count;      /* == the region graph's input_count */
  const DLTensor* inputs;
  size_t output_count;     /* == the region graph's output_count */
  /* Outputs whose shapes the plan knows have data set. An output whose shape
   * is known only at run time has data NULL: call allocate_output with its
   * shape once the backend knows it; data is then set. */
  DLTensor* outputs;
  /* A non-null status it returns belongs to the plug-in, which returns it from run() (or passes it on
   * inside another status's message and drops it by returning it): the host takes it back from run(). */
  tsrp_status* (*allocate_output)(void* host_context, size_t output_index, const int64_t* shape, int32_t ndim);
  void* host_context;
  /* When set, report each region-graph node's time in milliseconds after running it. */
  void (*node_finished)(void* host_context, size_t node_index, double milliseconds);
} tsrp_run_args;

/* What a plug-in exports. Members after those of the plug-in's ABI version
 * are absent (the host checks struct_size). */
typedef struct tsrp_plugin {
  size_t struct_size;
  uint32_t abi_major; /* TSRP_ABI_MAJOR the plug-in was built against */
  uint32_t abi_minor;
  const char* name;        /* the backend's name: [a-z][a-z0-9_]*, not a built-in backend's */
  const char* version;     /* the plug-in's version, and of its payload format: load() reads this version */
  const char* description; /* one line for `tessera backends` */

  tsrp_status* (*create_backend)(const tsrp_backend_options* options, tsrp_backend** out_backend);
  void (*destroy_backend)(tsrp_backend* backend);
  /* What a payload depends on (library version, CPU features, device model).
   * An artifact whose region was compiled for another string is refused. Lives
   * as long as the backend. */
  const char* (*compatibility)(tsrp_backend* backend);
  /* NULL for host memory; otherwise lives as long as the backend. */
  const tsrp_memory_space* (*memory_space)(tsrp_backend* backend);

  tsrp_status* (*support)(tsrp_backend* backend, const tsrp_graph* graph, size_t node_index, tsrp_support* out);
  /* The backend's fused patterns, larger ones first (tried in order). They
   * live as long as the backend. */
  size_t (*pattern_count)(tsrp_backend* backend);
  const tsrp_pattern* (*pattern)(tsrp_backend* backend, size_t index);

  /* A region graph (its composites are this backend's patterns) → payload. */
  tsrp_status* (*compile)(tsrp_backend* backend, const tsrp_graph* region, tsrp_payload* out_payload);
  void (*free_payload)(tsrp_backend* backend, void* owner);
  /* Payload (possibly hostile) + the same region graph → an executable region. */
  tsrp_status* (*load)(tsrp_backend* backend, const tsrp_graph* region, const void* payload, size_t payload_size,
                       tsrp_region** out_region);
  void (*release_region)(tsrp_region* region);
  tsrp_status* (*run)(tsrp_region* region, const tsrp_run_args* args);
  /* Nonzero when run() on one region must not be called from two threads at once. */
  int32_t serial_runs;
  /* Whether node `node_index` of `graph` may match entry `entry_index` of
   * pattern `pattern_index` (entries flagged TSRP_PATTERN_CHECKED); nonzero
   * accepts. Needed only by plug-ins that flag entries so. */
  int32_t (*pattern_check)(tsrp_backend* backend, const tsrp_graph* graph, size_t pattern_index, size_t entry_index,
                           size_t node_index);
  /* Optional. Nonzero when the region computes NaN and +-Inf as numpy does
   * only while its inputs are finite (a clamp that turns NaN into a bound, a
   * max that drops it, ...). The host then scans the region's floating-point
   * inputs before each run (its constants once) and runs the same nodes on
   * its native backend when one holds NaN or +-Inf. */
  int32_t (*finite_inputs_only)(tsrp_region* region);
} tsrp_plugin;

/* The entry point's type. Return NULL to refuse the host (e.g. its abi_major);
 * the host then reports that the plug-in declined. */
typedef const tsrp_plugin* (*tsrp_entry_point)(const tsrp_host* host);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_BACKEND_PLUGIN_H_ */
