/* A minimal backend plug-in in C for the ABI tests (tests/plugins/abi/). It
 * runs float32 Relu in host memory and declares one pattern, Relu(Relu(x)),
 * run as one step. Compile-time switches make the variants the tests load:
 *   PROBE_NAME        backend name ("abi_probe")
 *   PROBE_VERSION     payload version ("1")
 *   PROBE_COMPAT      compatibility string ("abi-probe/1")
 *   PROBE_ABI_MAJOR   the ABI major it claims (TSRP_ABI_MAJOR)
 *   PROBE_OLD_STRUCT  a table cut before serial_runs, as an older minor version wrote it
 *   PROBE_TINY_TABLE  a table too small to hold a version (struct_size and abi_major only)
 *   PROBE_SHORT_PATTERN  its pattern's struct ends before root
 *   PROBE_SHORT_ENTRY    an op entry of its pattern ends before flags
 *   PROBE_SPACE       keeps its tensors in a memory space of its own (host memory behind it)
 *   PROBE_SPACE_OLD   ... whose struct ends before synchronize (an older minor version's)
 *   PROBE_SPACE_SHORT ... whose struct ends before copy_to_host (unusable)
 * Every struct cut short this way lies in memory whose bytes past struct_size are poisoned
 * (0x5A: junk pointers, flags and sizes), as the next member of a real, older plug-in's
 * would be: a host that reads past struct_size crashes or misbehaves instead of reading zeros.
 *   PROBE_DECLINE     the entry point returns NULL
 *   PROBE_NO_ENTRY    no entry point is exported
 *   PROBE_NO_RUN      the table lacks run
 *   PROBE_DYNAMIC     also claims Relu on shapes known only at run time, and allocates such outputs
 *                     through allocate_output
 * At run time PROBE_FAIL=create|support|compile|load|run makes that step fail. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/backend_plugin.h>

#ifndef PROBE_NAME
#define PROBE_NAME "abi_probe"
#endif
#ifndef PROBE_VERSION
#define PROBE_VERSION "1"
#endif
#ifndef PROBE_COMPAT
#define PROBE_COMPAT "abi-probe/1"
#endif
#ifdef PROBE_DYNAMIC
#define PROBE_ALLOWS_DYNAMIC 1
#else
#define PROBE_ALLOWS_DYNAMIC 0
#endif
#ifndef PROBE_ABI_MAJOR
#define PROBE_ABI_MAJOR TSRP_ABI_MAJOR
#endif

/* A copy of the first `size` bytes of `full` (a struct of `full_size` bytes) with struct_size set
 * to `size`, in `buffer`, whose remaining bytes are poisoned. */
#define POISON_BYTE 0x5A
static void* poisoned_copy(void* buffer, const void* full, size_t full_size, size_t size) {
  memset(buffer, POISON_BYTE, full_size);
  memcpy(buffer, full, size);
  memcpy(buffer, &size, sizeof size); /* every struct starts with size_t struct_size */
  return buffer;
}

static const tsrp_host* g_host;
static long g_live_regions;  /* made by load, not yet released */
static long g_live_backends;

TSRP_EXPORT long abi_probe_live_objects(void) { return g_live_regions + g_live_backends; }

static int failing(const char* step) {
  const char* fail = getenv("PROBE_FAIL");
  return fail && strcmp(fail, step) == 0;
}

static tsrp_status* error(tsrp_status_code code, const char* message) { return g_host->make_status(code, message); }

static tsrp_status* injected(const char* step) {
  char message[128];
  snprintf(message, sizeof message, "injected failure in %s", step);
  return error(TSRP_INTERNAL, message);
}

struct tsrp_backend {
  int32_t threads;
};

struct tsrp_region {
  const tsrp_graph* graph;
};

static tsrp_status* create_backend(const tsrp_backend_options* options, tsrp_backend** out) {
  if (failing("create")) return injected("create");
  tsrp_backend* b = calloc(1, sizeof *b);
  if (!b) return error(TSRP_INTERNAL, "out of memory");
  b->threads = options->num_threads;
  ++g_live_backends;
  *out = b;
  return NULL;
}

static void destroy_backend(tsrp_backend* b) {
  if (b) --g_live_backends;
  free(b);
}

static const char* compatibility(tsrp_backend* b) {
  (void)b;
  return PROBE_COMPAT;
}

#ifdef PROBE_SPACE
/* Host memory behind a memory space of its own: the host must copy region inputs in and outputs out. */
static long g_synchronized;
TSRP_EXPORT long abi_probe_synchronize_calls(void) { return g_synchronized; }
static tsrp_status* space_allocate(void* context, size_t bytes, void** out) {
  (void)context;
  *out = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  return *out ? NULL : g_host->make_status(TSRP_INTERNAL, "out of memory");
}
static void space_deallocate(void* context, void* data) {
  (void)context;
  free(data);
}
static tsrp_status* space_from_host(void* context, void* dst, const void* src, size_t bytes) {
  (void)context;
  memcpy(dst, src, bytes);
  return NULL;
}
static tsrp_status* space_to_host(void* context, void* dst, const void* src, size_t bytes) {
  (void)context;
  memcpy(dst, src, bytes);
  return NULL;
}
static tsrp_status* space_synchronize(void* context) {
  (void)context;
  ++g_synchronized;
  return NULL;
}
static const tsrp_memory_space space_full = {sizeof(tsrp_memory_space), "abi-probe-space", NULL, space_allocate,
                                             space_deallocate, space_from_host, space_to_host, space_synchronize};
static unsigned char space_bytes[sizeof(tsrp_memory_space)];
#endif

static const tsrp_memory_space* memory_space(tsrp_backend* b) {
  (void)b;
#if defined(PROBE_SPACE_OLD)
  return poisoned_copy(space_bytes, &space_full, sizeof space_full, offsetof(tsrp_memory_space, synchronize));
#elif defined(PROBE_SPACE_SHORT)
  return poisoned_copy(space_bytes, &space_full, sizeof space_full, offsetof(tsrp_memory_space, copy_to_host));
#elif defined(PROBE_SPACE)
  return &space_full;
#else
  return NULL;
#endif
}

static int is_static_float(const tsrp_value* v) {
  if (v->dtype != TSRP_FLOAT32 || v->rank < 0) return 0;
  for (int32_t i = 0; i < v->rank; ++i) {
    if (v->dims[i] < 0) return 0;
  }
  return 1;
}

static tsrp_status* support(tsrp_backend* b, const tsrp_graph* g, size_t node_index, tsrp_support* out) {
  (void)b;
  if (failing("support")) return injected("support");
  const tsrp_node* node = g->nodes[node_index];
  const char* reason = NULL;
  char buffer[256];
  if (strcmp(node->op_type, "Relu") != 0 || node->domain[0] != '\0') {
    snprintf(buffer, sizeof buffer, "abi_probe runs only Relu, not %s", node->op_type);
    reason = buffer;
  } else if (!is_static_float(g->values[node->inputs[0]]) &&
             !(PROBE_ALLOWS_DYNAMIC && g->values[node->inputs[0]]->dtype == TSRP_FLOAT32)) {
    snprintf(buffer, sizeof buffer, "abi_probe: input '%s' is not float32 of a static shape", g->values[node->inputs[0]]->name);
    reason = buffer;
  }
  out->supported = reason == NULL;
  if (reason) snprintf(out->reason, out->reason_capacity, "%s", reason);
  return NULL;
}

/* Relu(Relu(x)): entries 0 = x, 1 = inner Relu, 2 = outer Relu (the root). */
static const int32_t inner_inputs[] = {0};
static const int32_t outer_inputs[] = {1};
static const tsrp_pattern_node entry_x = {sizeof(tsrp_pattern_node), TSRP_PATTERN_ANY, NULL, 0, NULL, 0, 0, 0};
static const tsrp_pattern_node entry_inner = {sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, "Relu", 1, inner_inputs,
                                              TSRP_PATTERN_SUPPORTED, 0, 0};
static const tsrp_pattern_node entry_outer = {sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, "Relu", 1, outer_inputs,
                                              TSRP_PATTERN_SUPPORTED, 0, 0};
#ifdef PROBE_SHORT_ENTRY
static unsigned char entry_inner_bytes[sizeof(tsrp_pattern_node)];
static const tsrp_pattern_node* double_relu_entries[] = {&entry_x, NULL, &entry_outer};
#else
static const tsrp_pattern_node* const double_relu_entries[] = {&entry_x, &entry_inner, &entry_outer};
#endif
static const tsrp_pattern double_relu = {sizeof(tsrp_pattern), "DoubleRelu", 3, double_relu_entries, 2};
static unsigned char pattern_bytes[sizeof(tsrp_pattern)];

static size_t pattern_count(tsrp_backend* b) {
  (void)b;
  return 1;
}

static const tsrp_pattern* pattern(tsrp_backend* b, size_t index) {
  (void)b;
  (void)pattern_bytes;
  if (index != 0) return NULL;
#ifdef PROBE_SHORT_ENTRY
  double_relu_entries[1] =
      poisoned_copy(entry_inner_bytes, &entry_inner, sizeof entry_inner, offsetof(tsrp_pattern_node, flags));
#endif
#ifdef PROBE_SHORT_PATTERN
  return poisoned_copy(pattern_bytes, &double_relu, sizeof double_relu, offsetof(tsrp_pattern, root));
#else
  return &double_relu;
#endif
}

/* The payload: "ABIP", then the node count as 4 little-endian bytes. */
static tsrp_status* compile(tsrp_backend* b, const tsrp_graph* region, tsrp_payload* out) {
  (void)b;
  if (failing("compile")) return injected("compile");
  uint8_t* bytes = malloc(8);
  if (!bytes) return error(TSRP_INTERNAL, "out of memory");
  memcpy(bytes, "ABIP", 4);
  uint32_t count = (uint32_t)region->node_count;
  for (int i = 0; i < 4; ++i) bytes[4 + i] = (uint8_t)(count >> (8 * i));
  out->data = bytes;
  out->size = 8;
  out->owner = bytes;
  return NULL;
}

static void free_payload(tsrp_backend* b, void* owner) {
  (void)b;
  free(owner);
}

static tsrp_status* load(tsrp_backend* b, const tsrp_graph* region, const void* payload, size_t size, tsrp_region** out) {
  (void)b;
  if (failing("load")) return injected("load");
  const uint8_t* bytes = payload;
  if (size != 8 || memcmp(bytes, "ABIP", 4) != 0) return error(TSRP_INVALID_ARGUMENT, "abi_probe payload: not an ABIP payload");
  uint32_t count = 0;
  for (int i = 0; i < 4; ++i) count |= (uint32_t)bytes[4 + i] << (8 * i);
  if (count != region->node_count) return error(TSRP_INVALID_ARGUMENT, "abi_probe payload: node count differs from the region's");
  tsrp_region* r = calloc(1, sizeof *r);
  if (!r) return error(TSRP_INTERNAL, "out of memory");
  r->graph = region;
  ++g_live_regions;
  *out = r;
  return NULL;
}

static void release_region(tsrp_region* r) {
  if (r) --g_live_regions;
  free(r);
}

/* Every value's data and shape for one run: region inputs and outputs point
 * at the host's tensors, the rest at buffers of this run. Relu keeps its
 * input's shape, so shapes known only at run time follow from the inputs'. */
__attribute__((unused)) static tsrp_status* run(tsrp_region* r, const tsrp_run_args* args) {
  if (failing("run")) return injected("run");
  const tsrp_graph* g = r->graph;
  float** data = calloc(g->value_count, sizeof *data);
  const DLTensor** shape_of = calloc(g->value_count, sizeof *shape_of);
  char* owned = calloc(g->value_count, 1);
  if (!data || !shape_of || !owned) {
    free(data);
    free(shape_of);
    free(owned);
    return error(TSRP_INTERNAL, "out of memory");
  }
  for (size_t k = 0; k < args->input_count; ++k) {
    data[g->inputs[k]] = args->inputs[k].data;
    shape_of[g->inputs[k]] = &args->inputs[k];
  }
  tsrp_status* status = NULL;
  for (size_t n = 0; n < g->node_count && !status; ++n) {
    const tsrp_node* node = g->nodes[n];
    const int32_t in = node->inputs[0], out = node->outputs[0];
    if (!data[in] || !shape_of[in]) {
      status = error(TSRP_INTERNAL, "abi_probe: a value has no data");
      break;
    }
    size_t count = 1;
    for (int32_t d = 0; d < shape_of[in]->ndim; ++d) count *= (size_t)shape_of[in]->shape[d];
    shape_of[out] = shape_of[in];
    for (size_t k = 0; k < args->output_count; ++k) {
      if (g->outputs[k] != out) continue;
      if (!args->outputs[k].data) {  /* its shape was known only now */
        status = args->allocate_output(args->host_context, k, shape_of[in]->shape, shape_of[in]->ndim);
        if (status) break;
      }
      data[out] = args->outputs[k].data;
    }
    if (status) break;
    if (!data[out]) {
      data[out] = malloc(count * sizeof(float) + 1);
      owned[out] = 1;
      if (!data[out]) {
        status = error(TSRP_INTERNAL, "out of memory");
        break;
      }
    }
    /* Relu twice is Relu: a DoubleRelu composite needs one pass too. */
    for (size_t i = 0; i < count; ++i) data[out][i] = data[in][i] > 0 ? data[in][i] : 0.0f;
    if (args->node_finished) args->node_finished(args->host_context, n, 0.001);
  }
  for (size_t v = 0; v < g->value_count; ++v) {
    if (owned[v]) free(data[v]);
  }
  free(data);
  free(shape_of);
  free(owned);
  return status;
}

__attribute__((unused)) static const tsrp_plugin probe = {
    sizeof(tsrp_plugin),
    PROBE_ABI_MAJOR,
    TSRP_ABI_MINOR,
    PROBE_NAME,
    PROBE_VERSION,
    "ABI probe: float32 Relu on the host (tests only)",
    create_backend,
    destroy_backend,
    compatibility,
    memory_space,
    support,
    pattern_count,
    pattern,
    compile,
    free_payload,
    load,
    release_region,
#ifdef PROBE_NO_RUN
    NULL,
#else
    run,
#endif
    0,
};

#ifndef PROBE_NO_ENTRY
TSRP_EXPORT const tsrp_plugin* tessera_backend_plugin(const tsrp_host* host) {
#ifdef PROBE_DECLINE
  (void)host;
  return NULL;
#else
  if (host->abi_major != TSRP_ABI_MAJOR) return NULL;
  g_host = host;
  static unsigned char table_bytes[sizeof(tsrp_plugin)];
  (void)table_bytes;
#if defined(PROBE_OLD_STRUCT)
  return poisoned_copy(table_bytes, &probe, sizeof probe, offsetof(tsrp_plugin, serial_runs));
#elif defined(PROBE_TINY_TABLE)
  return poisoned_copy(table_bytes, &probe, sizeof probe, offsetof(tsrp_plugin, abi_minor));
#else
  return &probe;
#endif
#endif
}
#endif
