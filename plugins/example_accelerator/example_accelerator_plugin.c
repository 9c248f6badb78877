/* The example accelerator's entry point and what the host asks before it
 * compiles: the tsrp_plugin table, version checks, support() with a reason
 * for every refusal, and the one fused pattern (MatMulAddRelu) as data.
 *
 * Contract: tessera_backend_plugin() refuses (returns NULL) a host of another
 * ABI major version. support() takes float32 nodes of static shapes among
 * Relu, Sigmoid, Add, Mul (numpy broadcasting), MatMul (rank 2) and Gemm
 * (transA 0, alpha = beta = 1); any other node is refused with a reason that
 * names the op, the value and its dtype or shape. EXAMPLE_ACCELERATOR_FAIL=
 * compile|load|run|allocate makes that step fail (for tests), leaking nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_accelerator.h"

const tsrp_host* ea_host;

/* ---------------------------------------------------------------- errors */

tsrp_status* ea_error(tsrp_status_code code, const char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  return ea_host->make_status(code, message);
}

tsrp_status* ea_injected_failure(const char* step) {
  const char* fail = getenv("EXAMPLE_ACCELERATOR_FAIL");
  if (!fail || strcmp(fail, step) != 0) return NULL;
  return ea_error(TSRP_INTERNAL, EA_NAME ": injected failure in %s", step);
}

const char* ea_dtype_name(tsrp_dtype dtype) {
  switch (dtype) {
    case TSRP_FLOAT32: return "float32";
    case TSRP_UINT8: return "uint8";
    case TSRP_INT8: return "int8";
    case TSRP_UINT16: return "uint16";
    case TSRP_INT16: return "int16";
    case TSRP_INT32: return "int32";
    case TSRP_INT64: return "int64";
    case TSRP_STRING: return "string";
    case TSRP_BOOL: return "bool";
    case TSRP_FLOAT16: return "float16";
    case TSRP_FLOAT64: return "float64";
    case TSRP_UINT32: return "uint32";
    case TSRP_UINT64: return "uint64";
    case TSRP_BFLOAT16: return "bfloat16";
    case TSRP_UNDEFINED: break;
  }
  return "of an unknown type";
}

/* ---------------------------------------------------------------- shapes */

int ea_static_float_shape(const tsrp_graph* graph, int32_t index, ea_shape* out, char* why, size_t why_size) {
  if (index < 0 || (size_t)index >= graph->value_count || !graph->values[index]) {
    snprintf(why, why_size, "value index %d is not one of the graph's %zu values", index, graph->value_count);
    return 0;
  }
  const tsrp_value* v = graph->values[index];
  const char* name = v->name ? v->name : "";
  if (v->dtype != TSRP_FLOAT32) {
    snprintf(why, why_size, "'%s' is %s; only float32", name, ea_dtype_name(v->dtype));
    return 0;
  }
  if (v->rank < 0 || (v->rank > 0 && !v->dims)) {
    snprintf(why, why_size, "'%s' has an unknown rank; only static shapes", name);
    return 0;
  }
  if (v->rank > EA_MAX_RANK) {
    snprintf(why, why_size, "'%s' has rank %d; at most %d", name, v->rank, EA_MAX_RANK);
    return 0;
  }
  out->rank = v->rank;
  out->elements = 1;
  for (int32_t i = 0; i < v->rank; ++i) {
    const int64_t d = v->dims[i];
    if (d < 0) {
      snprintf(why, why_size, "'%s' has a dimension known only at run time; only static shapes", name);
      return 0;
    }
    if (d > 0 && out->elements > EA_MAX_ELEMENTS / d) {
      snprintf(why, why_size, "'%s' has more than %lld elements", name, (long long)EA_MAX_ELEMENTS);
      return 0;
    }
    out->dims[i] = d;
    out->elements *= d;
  }
  if (v->constant && v->constant_bytes != (size_t)out->elements * 4) {
    snprintf(why, why_size, "constant '%s' holds %zu bytes, not %lld", name, v->constant_bytes,
             (long long)out->elements * 4);
    return 0;
  }
  return 1;
}

int ea_broadcast(const ea_shape* a, const ea_shape* b, ea_shape* out) {
  const int32_t rank = a->rank > b->rank ? a->rank : b->rank;
  out->rank = rank;
  out->elements = 1;
  for (int32_t i = 0; i < rank; ++i) {
    /* Aligned from the right; a missing dimension is 1. */
    const int32_t ia = i - (rank - a->rank), ib = i - (rank - b->rank);
    const int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return 0;
    out->dims[i] = da == 1 ? db : da;
    out->elements *= out->dims[i];
  }
  return 1;
}

int ea_broadcasts_to(const ea_shape* from, const ea_shape* to) {
  ea_shape result;
  return from->rank <= to->rank && ea_broadcast(from, to, &result) && ea_same_shape(&result, to);
}

int ea_same_shape(const ea_shape* a, const ea_shape* b) {
  if (a->rank != b->rank) return 0;
  for (int32_t i = 0; i < a->rank; ++i) {
    if (a->dims[i] != b->dims[i]) return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- support */

static const tsrp_attribute* find_attribute(const tsrp_node* node, const char* name) {
  for (size_t i = 0; i < node->attribute_count; ++i) {
    if (node->attributes[i] && strcmp(node->attributes[i]->name, name) == 0) return node->attributes[i];
  }
  return NULL;
}

/* Every operand a float32 tensor of a static shape; else the reason. */
static int operands_are_static_float(const tsrp_graph* graph, const tsrp_node* node, char* reason, size_t size) {
  char why[256];
  ea_shape shape;
  for (size_t i = 0; i < node->input_count + node->output_count; ++i) {
    const int is_input = i < node->input_count;
    const int32_t index = is_input ? node->inputs[i] : node->outputs[i - node->input_count];
    if (index < 0) continue; /* an omitted optional operand */
    if (!ea_static_float_shape(graph, index, &shape, why, sizeof why)) {
      snprintf(reason, size, EA_NAME ": %s %s", is_input ? "input" : "output", why);
      return 0;
    }
  }
  return 1;
}

static int has_rank_2(const tsrp_graph* graph, const tsrp_node* node, size_t operand, char* reason, size_t size) {
  const tsrp_value* v = graph->values[node->inputs[operand]];
  if (v->rank == 2) return 1;
  snprintf(reason, size, EA_NAME ": %s input '%s' has rank %d; only rank 2", node->op_type, v->name, v->rank);
  return 0;
}

int ea_node_supported(const tsrp_graph* graph, size_t node_index, char* reason, size_t size) {
  const tsrp_node* node = graph->nodes[node_index];
  const char* op = node->op_type;
  const int onnx = node->domain[0] == '\0';
  const int unary = onnx && (strcmp(op, "Relu") == 0 || strcmp(op, "Sigmoid") == 0);
  const int binary = onnx && (strcmp(op, "Add") == 0 || strcmp(op, "Mul") == 0);
  const int matmul = onnx && strcmp(op, "MatMul") == 0;
  const int gemm = onnx && strcmp(op, "Gemm") == 0;
  if (!unary && !binary && !matmul && !gemm) {
    snprintf(reason, size, EA_NAME ": op %s%s%s is not implemented on this device", onnx ? "" : node->domain,
             onnx ? "" : ".", op);
    return 0;
  }
  const size_t want_inputs = unary ? 1 : gemm ? 3 : 2;
  if (node->input_count < (gemm ? 2 : want_inputs) || node->input_count > want_inputs || node->output_count != 1 ||
      node->outputs[0] < 0) {
    snprintf(reason, size, EA_NAME ": %s with %zu inputs and %zu outputs is not implemented", op, node->input_count,
             node->output_count);
    return 0;
  }
  for (size_t i = 0; i < (gemm ? 2 : node->input_count); ++i) {
    if (node->inputs[i] < 0) {
      snprintf(reason, size, EA_NAME ": %s without its input %zu is not implemented", op, i);
      return 0;
    }
  }
  if (!operands_are_static_float(graph, node, reason, size)) return 0;
  if (matmul) return has_rank_2(graph, node, 0, reason, size) && has_rank_2(graph, node, 1, reason, size);
  if (gemm) {
    if (!has_rank_2(graph, node, 0, reason, size) || !has_rank_2(graph, node, 1, reason, size)) return 0;
    const tsrp_attribute* alpha = find_attribute(node, "alpha");
    const tsrp_attribute* beta = find_attribute(node, "beta");
    const tsrp_attribute* trans_a = find_attribute(node, "transA");
    if ((alpha && alpha->f != 1.0f) || (beta && beta->f != 1.0f)) {
      snprintf(reason, size, EA_NAME ": Gemm with alpha %g and beta %g is not implemented; only 1 and 1",
               alpha ? alpha->f : 1.0, beta ? beta->f : 1.0);
      return 0;
    }
    if (trans_a && trans_a->i != 0) {
      snprintf(reason, size, EA_NAME ": Gemm with transA = 1 is not implemented; only transB");
      return 0;
    }
  }
  return 1;
}

static tsrp_status* support(tsrp_backend* backend, const tsrp_graph* graph, size_t node_index, tsrp_support* out) {
  (void)backend;
  if (!graph || node_index >= graph->node_count || !out) {
    return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": support asked about node %zu of a graph of %zu", node_index,
                    graph ? graph->node_count : 0);
  }
  char reason[512] = "";
  out->supported = ea_node_supported(graph, node_index, reason, sizeof reason);
  if (!out->supported && out->reason && out->reason_capacity > 0) snprintf(out->reason, out->reason_capacity, "%s", reason);
  return NULL;
}

/* ---------------------------------------------------------------- the fused pattern */

/* Relu(Add(MatMul(x, W), B)), each node one that support() takes alone; the
 * Add (commutative without a flag) is CHECKED: its MatMul operand must have
 * the Add's shape, so the bias broadcasts into the product, never the other
 * way (the fused kernel writes the product's shape). Entries:
 *   0 x, 1 W, 2 MatMul(0, 1), 3 B, 4 Add(2, 3), 5 Relu(4) (the root). */
#define EA_PATTERN_MATMUL_ADD_RELU 0
#define EA_ENTRY_ADD 4
static const int32_t matmul_inputs[] = {0, 1};
static const int32_t add_inputs[] = {2, 3};
static const int32_t relu_inputs[] = {4};
static const tsrp_pattern_node entry_x = {sizeof(tsrp_pattern_node), TSRP_PATTERN_ANY, NULL, 0, NULL, 0, 0, 0};
static const tsrp_pattern_node entry_w = {sizeof(tsrp_pattern_node), TSRP_PATTERN_ANY, NULL, 0, NULL, 0, 0, 0};
static const tsrp_pattern_node entry_matmul = {sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, "MatMul", 2, matmul_inputs,
                                               TSRP_PATTERN_SUPPORTED, 0, 0};
static const tsrp_pattern_node entry_b = {sizeof(tsrp_pattern_node), TSRP_PATTERN_ANY, NULL, 0, NULL, 0, 0, 0};
static const tsrp_pattern_node entry_add = {sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, "Add", 2, add_inputs,
                                            TSRP_PATTERN_SUPPORTED | TSRP_PATTERN_CHECKED, 0, 0};
static const tsrp_pattern_node entry_relu = {sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, "Relu", 1, relu_inputs,
                                             TSRP_PATTERN_SUPPORTED, 0, 0};
static const tsrp_pattern_node* const matmul_add_relu_entries[] = {&entry_x, &entry_w,   &entry_matmul,
                                                                   &entry_b, &entry_add, &entry_relu};
static const tsrp_pattern matmul_add_relu = {sizeof(tsrp_pattern), "MatMulAddRelu", 6, matmul_add_relu_entries, 5};

static size_t pattern_count(tsrp_backend* backend) {
  (void)backend;
  return 1;
}

static const tsrp_pattern* pattern(tsrp_backend* backend, size_t index) {
  (void)backend;
  return index == EA_PATTERN_MATMUL_ADD_RELU ? &matmul_add_relu : NULL;
}

static int32_t pattern_check(tsrp_backend* backend, const tsrp_graph* graph, size_t pattern_index, size_t entry_index,
                             size_t node_index) {
  (void)backend;
  if (pattern_index != EA_PATTERN_MATMUL_ADD_RELU || entry_index != EA_ENTRY_ADD || node_index >= graph->node_count) {
    return 0;
  }
  const tsrp_node* add = graph->nodes[node_index];
  if (add->input_count != 2 || add->output_count != 1) return 0;
  char why[256];
  ea_shape out, operand;
  if (!ea_static_float_shape(graph, add->outputs[0], &out, why, sizeof why)) return 0;
  /* Some operand is a MatMul's output of the Add's own shape. */
  for (size_t k = 0; k < 2; ++k) {
    for (size_t n = 0; n < graph->node_count; ++n) {
      const tsrp_node* producer = graph->nodes[n];
      if (strcmp(producer->op_type, "MatMul") != 0 || producer->output_count != 1 ||
          producer->outputs[0] != add->inputs[k]) {
        continue;
      }
      if (ea_static_float_shape(graph, add->inputs[k], &operand, why, sizeof why) && ea_same_shape(&operand, &out)) {
        return 1;
      }
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- backend and table */

struct tsrp_backend {
  int32_t num_threads; /* a real device would size its host-side helpers with it */
};

static tsrp_status* create_backend(const tsrp_backend_options* options, tsrp_backend** out_backend) {
  *out_backend = NULL;
  tsrp_backend* backend = calloc(1, sizeof *backend);
  if (!backend) return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory");
  backend->num_threads = options && TSRP_HAS_MEMBER(options, tsrp_backend_options, num_threads) ? options->num_threads : 1;
  tsrp_status* status = ea_device_acquire();
  if (status) {
    free(backend);
    return status;
  }
  *out_backend = backend;
  return NULL;
}

static void destroy_backend(tsrp_backend* backend) {
  if (!backend) return;
  free(backend);
  ea_device_release();
}

static const char* compatibility(tsrp_backend* backend) {
  (void)backend;
  /* What a payload depends on: the program format and the (simulated) device model. */
  return "example-accelerator program 1, simulated device model A";
}

static const tsrp_memory_space* memory_space(tsrp_backend* backend) {
  (void)backend;
  return &ea_memory_space;
}

static tsrp_status* compile(tsrp_backend* backend, const tsrp_graph* region, tsrp_payload* out_payload) {
  (void)backend;
  tsrp_status* injected = ea_injected_failure("compile");
  if (injected) return injected;
  uint8_t* bytes = NULL;
  size_t size = 0;
  tsrp_status* status = ea_compile_program(region, &bytes, &size);
  if (status) return status;
  out_payload->data = bytes;
  out_payload->size = size;
  out_payload->owner = bytes;
  return NULL;
}

static void free_payload(tsrp_backend* backend, void* owner) {
  (void)backend;
  free(owner);
}

static const tsrp_plugin ea_plugin = {
    .struct_size = sizeof(tsrp_plugin),
    .abi_major = TSRP_ABI_MAJOR,
    .abi_minor = TSRP_ABI_MINOR,
    .name = EA_NAME,
    .version = EA_VERSION,
    .description = "example accelerator: a simulated device with its own memory and queue (the plug-in template)",
    .create_backend = create_backend,
    .destroy_backend = destroy_backend,
    .compatibility = compatibility,
    .memory_space = memory_space,
    .support = support,
    .pattern_count = pattern_count,
    .pattern = pattern,
    .compile = compile,
    .free_payload = free_payload,
    .load = ea_load,
    .release_region = ea_release_region,
    .run = ea_run,
    .serial_runs = 0, /* each run has its own intermediates; the queue is shared and ordered */
    .pattern_check = pattern_check,
};

TSRP_EXPORT const tsrp_plugin* tessera_backend_plugin(const tsrp_host* host) {
  /* A host of another major version lays its structs out differently: decline it. */
  if (!host || host->struct_size < offsetof(tsrp_host, make_status) + sizeof(host->make_status) ||
      host->abi_major != TSRP_ABI_MAJOR || !host->make_status) {
    return NULL;
  }
  ea_host = host;
  return &ea_plugin;
}
