/* The example accelerator's payload: a little "device program".
 *
 * Format (little-endian; version 1 = the plug-in's version):
 *   char[4] magic "EAPG"; u32 version; u32 value_count; u32 node_count; u32 instruction_count;
 *   per instruction: u32 opcode; u32 node_index; u32 input_count; u32 output_count;
 *                    i32 inputs[input_count]; i32 outputs[output_count];
 *                    u32 param_count; i64 params[param_count]
 * Value indices and node indices are the region graph's. The only parameter
 * is Gemm's trans_b.
 *
 * Contract: ea_compile_program turns a region graph of supported nodes (and
 * MatMulAddRelu composites) into a payload. ea_parse_program trusts nothing in
 * a payload: it checks every length and count against the bytes left, every
 * index against the region graph, every shape its kernel will use (so no
 * kernel can read or write past a tensor), that each value is produced before
 * it is read and at most once, never into a graph input or constant, and that
 * every region output is produced. A bad payload is TSRP_INVALID_ARGUMENT with
 * a message starting "example_accelerator payload: ". */
#include <stdio.h>
#include <stdlib.h>

#include "example_accelerator.h"

#define EA_MAGIC "EAPG"
#define EA_FORMAT_VERSION 1u
#define EA_HEADER_BYTES 20u
#define EA_MIN_INSTRUCTION_BYTES 24u /* four u32, one output, a param count */
#define EA_MAX_PARAMS 4u

/* ---------------------------------------------------------------- one instruction's rules */

static int arity_of(ea_opcode opcode, uint32_t inputs) {
  switch (opcode) {
    case EA_OP_RELU:
    case EA_OP_SIGMOID: return inputs == 1;
    case EA_OP_ADD:
    case EA_OP_MUL:
    case EA_OP_MATMUL: return inputs == 2;
    case EA_OP_GEMM: return inputs == 2 || inputs == 3;
    case EA_OP_MATMUL_ADD_RELU: return inputs == 3;
  }
  return 0;
}

static const char* op_name(ea_opcode opcode) {
  switch (opcode) {
    case EA_OP_RELU: return "Relu";
    case EA_OP_SIGMOID: return "Sigmoid";
    case EA_OP_ADD: return "Add";
    case EA_OP_MUL: return "Mul";
    case EA_OP_MATMUL: return "MatMul";
    case EA_OP_GEMM: return "Gemm";
    case EA_OP_MATMUL_ADD_RELU: return "MatMulAddRelu";
  }
  return "?";
}

/* Whether `node` is what `opcode` runs. */
static int node_is(const tsrp_node* node, ea_opcode opcode) {
  if (opcode == EA_OP_MATMUL_ADD_RELU) {
    if (strcmp(node->op_type, "Composite") != 0 || strcmp(node->domain, "tessera") != 0) return 0;
    for (size_t i = 0; i < node->attribute_count; ++i) {
      const tsrp_attribute* a = node->attributes[i];
      if (a && strcmp(a->name, "pattern") == 0 && a->kind == TSRP_ATTR_STRING) return strcmp(a->s, "MatMulAddRelu") == 0;
    }
    return 0;
  }
  return node->domain[0] == '\0' && strcmp(node->op_type, op_name(opcode)) == 0;
}

/* Fills a step's shapes from the graph and checks what its kernel needs.
 * Returns 0 with `why` set when the shapes do not fit the op. */
static int check_step(const tsrp_graph* region, ea_step* step, char* why, size_t size) {
  char detail[256];
  for (int32_t i = 0; i < step->input_count; ++i) {
    if (!ea_static_float_shape(region, step->inputs[i], &step->input_shapes[i], detail, sizeof detail)) {
      snprintf(why, size, "input %d: %s", i, detail);
      return 0;
    }
  }
  if (!ea_static_float_shape(region, step->output, &step->output_shape, detail, sizeof detail)) {
    snprintf(why, size, "output: %s", detail);
    return 0;
  }
  const ea_shape* a = &step->input_shapes[0];
  const ea_shape* b = &step->input_shapes[1];
  const ea_shape* out = &step->output_shape;
  ea_shape expected;
  switch (step->opcode) {
    case EA_OP_RELU:
    case EA_OP_SIGMOID: expected = *a; break;
    case EA_OP_ADD:
    case EA_OP_MUL:
      if (!ea_broadcast(a, b, &expected)) {
        snprintf(why, size, "inputs of ranks %d and %d do not broadcast", a->rank, b->rank);
        return 0;
      }
      break;
    case EA_OP_MATMUL:
    case EA_OP_GEMM:
    case EA_OP_MATMUL_ADD_RELU: {
      if (a->rank != 2 || b->rank != 2) {
        snprintf(why, size, "a matrix product of ranks %d and %d; only 2 and 2", a->rank, b->rank);
        return 0;
      }
      const int transposed = step->opcode == EA_OP_GEMM && step->trans_b;
      step->m = a->dims[0];
      step->k = a->dims[1];
      step->n = transposed ? b->dims[0] : b->dims[1];
      if ((transposed ? b->dims[1] : b->dims[0]) != step->k) {
        snprintf(why, size, "inner dimensions %lld and %lld differ", (long long)step->k,
                 (long long)(transposed ? b->dims[1] : b->dims[0]));
        return 0;
      }
      expected.rank = 2;
      expected.dims[0] = step->m;
      expected.dims[1] = step->n;
      expected.elements = step->m * step->n;
      if (step->input_count == 3 && !ea_broadcasts_to(&step->input_shapes[2], &expected)) {
        snprintf(why, size, "the bias (rank %d) does not broadcast to [%lld, %lld]", step->input_shapes[2].rank,
                 (long long)step->m, (long long)step->n);
        return 0;
      }
      break;
    }
    default: snprintf(why, size, "unknown opcode %d", (int)step->opcode); return 0;
  }
  if (!ea_same_shape(&expected, out)) {
    snprintf(why, size, "the output's shape (rank %d) is not what %s of its inputs gives", out->rank,
             op_name(step->opcode));
    return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- compile */

typedef struct writer {
  uint8_t* data;
  size_t size, capacity;
  int failed;
} writer;

static void put(writer* w, const void* bytes, size_t n) {
  if (w->failed) return;
  if (w->size + n > w->capacity) {
    size_t capacity = w->capacity ? 2 * w->capacity : 256;
    while (capacity < w->size + n) capacity *= 2;
    uint8_t* grown = realloc(w->data, capacity);
    if (!grown) {
      w->failed = 1;
      return;
    }
    w->data = grown;
    w->capacity = capacity;
  }
  memcpy(w->data + w->size, bytes, n);
  w->size += n;
}

/* Little-endian whatever the host's order is. */
static void put_u32(writer* w, uint32_t v) {
  const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(w, b, 4);
}
static void put_i64(writer* w, int64_t v) {
  put_u32(w, (uint32_t)((uint64_t)v & 0xFFFFFFFFu));
  put_u32(w, (uint32_t)((uint64_t)v >> 32));
}

static const tsrp_attribute* attribute(const tsrp_node* node, const char* name, tsrp_attribute_kind kind) {
  for (size_t i = 0; i < node->attribute_count; ++i) {
    const tsrp_attribute* a = node->attributes[i];
    if (a && a->kind == kind && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

/* The composite input that is body value `body_value`, or -1. */
static int32_t composite_operand(const tsrp_node* composite, const tsrp_graph* body, int32_t body_value) {
  for (size_t p = 0; p < body->input_count && p < composite->input_count; ++p) {
    if (body->inputs[p] == body_value) return composite->inputs[p];
  }
  return -1;
}

/* A MatMulAddRelu composite → (x, w, bias): read from its body, since the
 * host orders a composite's inputs as it matched them. */
static int fused_operands(const tsrp_node* node, int32_t operands[3]) {
  const tsrp_attribute* body_attribute = attribute(node, "body", TSRP_ATTR_GRAPH);
  const tsrp_graph* body = body_attribute ? body_attribute->graph : NULL;
  if (!body || body->node_count != 3) return 0;
  const tsrp_node *matmul = NULL, *add = NULL;
  for (size_t i = 0; i < body->node_count; ++i) {
    if (strcmp(body->nodes[i]->op_type, "MatMul") == 0) matmul = body->nodes[i];
    if (strcmp(body->nodes[i]->op_type, "Add") == 0) add = body->nodes[i];
  }
  if (!matmul || !add || matmul->input_count != 2 || add->input_count != 2 || matmul->output_count != 1) return 0;
  const int bias_slot = add->inputs[0] == matmul->outputs[0] ? 1 : 0;
  if (add->inputs[1 - bias_slot] != matmul->outputs[0]) return 0;
  operands[0] = composite_operand(node, body, matmul->inputs[0]);
  operands[1] = composite_operand(node, body, matmul->inputs[1]);
  operands[2] = composite_operand(node, body, add->inputs[bias_slot]);
  return operands[0] >= 0 && operands[1] >= 0 && operands[2] >= 0;
}

/* One node → a step (opcode, operands, trans_b). Returns a status when the
 * node is not one the device runs. */
static tsrp_status* lower_node(const tsrp_graph* region, size_t index, ea_step* step) {
  const tsrp_node* node = region->nodes[index];
  memset(step, 0, sizeof *step);
  step->node_index = (uint32_t)index;
  if (node->output_count != 1 || node->outputs[0] < 0) {
    return ea_error(TSRP_UNSUPPORTED, EA_NAME ": node '%s' (%s) has %zu outputs; only 1", node->name, node->op_type,
                    node->output_count);
  }
  step->output = node->outputs[0];
  if (node_is(node, EA_OP_MATMUL_ADD_RELU)) {
    step->opcode = EA_OP_MATMUL_ADD_RELU;
    step->input_count = 3;
    if (!fused_operands(node, step->inputs)) {
      return ea_error(TSRP_UNSUPPORTED, EA_NAME ": composite '%s' is not Relu(Add(MatMul(x, W), B))", node->name);
    }
    return NULL;
  }
  char reason[512];
  if (!ea_node_supported(region, index, reason, sizeof reason)) {
    return ea_error(TSRP_UNSUPPORTED, "%s (node '%s')", reason, node->name);
  }
  static const ea_opcode opcodes[] = {EA_OP_RELU, EA_OP_SIGMOID, EA_OP_ADD, EA_OP_MUL, EA_OP_MATMUL, EA_OP_GEMM};
  for (size_t i = 0; i < sizeof opcodes / sizeof opcodes[0]; ++i) {
    if (node_is(node, opcodes[i])) step->opcode = opcodes[i];
  }
  step->input_count = (int32_t)node->input_count;
  for (size_t i = 0; i < node->input_count; ++i) step->inputs[i] = node->inputs[i];
  if (step->opcode == EA_OP_GEMM) {
    if (node->input_count == 3 && node->inputs[2] < 0) step->input_count = 2; /* C omitted */
    const tsrp_attribute* trans_b = attribute(node, "transB", TSRP_ATTR_INT);
    step->trans_b = trans_b && trans_b->i != 0;
  }
  return NULL;
}

tsrp_status* ea_compile_program(const tsrp_graph* region, uint8_t** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  writer w = {0};
  put(&w, EA_MAGIC, 4);
  put_u32(&w, EA_FORMAT_VERSION);
  put_u32(&w, (uint32_t)region->value_count);
  put_u32(&w, (uint32_t)region->node_count);
  put_u32(&w, (uint32_t)region->node_count); /* one instruction per node */
  for (size_t i = 0; i < region->node_count; ++i) {
    ea_step step;
    tsrp_status* status = lower_node(region, i, &step);
    char why[512];
    if (!status && !check_step(region, &step, why, sizeof why)) {
      status = ea_error(TSRP_UNSUPPORTED, EA_NAME ": node '%s' (%s): %s", region->nodes[i]->name,
                        region->nodes[i]->op_type, why);
    }
    if (status) {
      free(w.data);
      return status;
    }
    put_u32(&w, (uint32_t)step.opcode);
    put_u32(&w, step.node_index);
    put_u32(&w, (uint32_t)step.input_count);
    put_u32(&w, 1);
    for (int32_t k = 0; k < step.input_count; ++k) put_u32(&w, (uint32_t)step.inputs[k]);
    put_u32(&w, (uint32_t)step.output);
    put_u32(&w, step.opcode == EA_OP_GEMM ? 1 : 0);
    if (step.opcode == EA_OP_GEMM) put_i64(&w, step.trans_b);
  }
  if (w.failed) {
    free(w.data);
    return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory writing the program");
  }
  *out_bytes = w.data;
  *out_size = w.size;
  return NULL;
}

/* ---------------------------------------------------------------- parse */

typedef struct reader {
  const uint8_t* p;
  size_t left;
} reader;

static int get_u32(reader* r, uint32_t* v) {
  if (r->left < 4) return 0;
  *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
  r->p += 4;
  r->left -= 4;
  return 1;
}

static int get_i64(reader* r, int64_t* v) {
  uint32_t low, high;
  if (!get_u32(r, &low) || !get_u32(r, &high)) return 0;
  *v = (int64_t)((uint64_t)high << 32 | low);
  return 1;
}

#define BAD_PAYLOAD(...) ea_error(TSRP_INVALID_ARGUMENT, EA_NAME " payload: " __VA_ARGS__)

/* Reads instruction `i` into `step`; NULL or why it is bad. `defined[v]` says
 * whether value v holds data by then: 1 for inputs and constants, 2 for the
 * outputs of earlier instructions. */
static tsrp_status* parse_instruction(const tsrp_graph* region, reader* r, size_t i, uint8_t* defined, ea_step* step) {
  uint32_t opcode, node_index, input_count, output_count, param_count;
  memset(step, 0, sizeof *step);
  if (!get_u32(r, &opcode) || !get_u32(r, &node_index) || !get_u32(r, &input_count) || !get_u32(r, &output_count)) {
    return BAD_PAYLOAD("instruction %zu is cut short", i);
  }
  if (opcode < EA_OP_RELU || opcode > EA_OP_MATMUL_ADD_RELU) return BAD_PAYLOAD("instruction %zu: unknown opcode %u", i, opcode);
  step->opcode = (ea_opcode)opcode;
  if (!arity_of(step->opcode, input_count) || output_count != 1) {
    return BAD_PAYLOAD("instruction %zu: %s with %u inputs and %u outputs", i, op_name(step->opcode), input_count,
                       output_count);
  }
  if (node_index >= region->node_count) {
    return BAD_PAYLOAD("instruction %zu: node %u of a region of %zu nodes", i, node_index, region->node_count);
  }
  const tsrp_node* node = region->nodes[node_index];
  if (!node_is(node, step->opcode)) {
    return BAD_PAYLOAD("instruction %zu: %s for node '%s', which is %s", i, op_name(step->opcode), node->name,
                       node->op_type);
  }
  step->node_index = node_index;
  step->input_count = (int32_t)input_count;
  for (uint32_t k = 0; k < input_count + 1; ++k) {
    uint32_t raw;
    if (!get_u32(r, &raw)) return BAD_PAYLOAD("instruction %zu is cut short", i);
    const int32_t index = (int32_t)raw;
    if (index < 0 || (size_t)index >= region->value_count) {
      return BAD_PAYLOAD("instruction %zu: value index %d of a region of %zu values", i, index, region->value_count);
    }
    if (k < input_count) step->inputs[k] = index;
    else step->output = index;
  }
  if (!get_u32(r, &param_count)) return BAD_PAYLOAD("instruction %zu is cut short", i);
  const uint32_t want_params = step->opcode == EA_OP_GEMM ? 1 : 0;
  if (param_count != want_params) return BAD_PAYLOAD("instruction %zu: %u parameters, expected %u", i, param_count, want_params);
  if (want_params) {
    int64_t trans_b;
    if (!get_i64(r, &trans_b)) return BAD_PAYLOAD("instruction %zu is cut short", i);
    if (trans_b != 0 && trans_b != 1) return BAD_PAYLOAD("instruction %zu: trans_b %lld", i, (long long)trans_b);
    step->trans_b = (int32_t)trans_b;
  }
  if (node->output_count < 1 || node->outputs[0] != step->output) {
    return BAD_PAYLOAD("instruction %zu writes value %d, which node '%s' does not produce", i, step->output, node->name);
  }
  for (int32_t k = 0; k < step->input_count; ++k) {
    if (!defined[step->inputs[k]]) {
      return BAD_PAYLOAD("instruction %zu reads value %d before anything writes it", i, step->inputs[k]);
    }
  }
  if (defined[step->output]) {
    return BAD_PAYLOAD("instruction %zu writes value %d, which is an input, a constant or written before", i, step->output);
  }
  char why[512];
  if (!check_step(region, step, why, sizeof why)) return BAD_PAYLOAD("instruction %zu (%s): %s", i, op_name(step->opcode), why);
  defined[step->output] = 2;
  return NULL;
}

tsrp_status* ea_parse_program(const tsrp_graph* region, const void* payload, size_t size, ea_step** out_steps,
                              size_t* out_count) {
  *out_steps = NULL;
  *out_count = 0;
  if (!payload && size > 0) return BAD_PAYLOAD("no data for %zu bytes", size);
  reader r = {payload, size};
  uint32_t version, value_count, node_count, count;
  if (size < EA_HEADER_BYTES || memcmp(payload, EA_MAGIC, 4) != 0) {
    return BAD_PAYLOAD("not a device program (%zu bytes, no '" EA_MAGIC "' header)", size);
  }
  r.p += 4;
  r.left -= 4;
  get_u32(&r, &version);
  get_u32(&r, &value_count);
  get_u32(&r, &node_count);
  get_u32(&r, &count);
  if (version != EA_FORMAT_VERSION) return BAD_PAYLOAD("program version %u; this plug-in reads %u", version, EA_FORMAT_VERSION);
  if (value_count != region->value_count || node_count != region->node_count) {
    return BAD_PAYLOAD("compiled for a region of %u values and %u nodes, given one of %zu and %zu", value_count,
                       node_count, region->value_count, region->node_count);
  }
  if (count > node_count || count > r.left / EA_MIN_INSTRUCTION_BYTES) {
    return BAD_PAYLOAD("%u instructions do not fit %zu bytes and %u nodes", count, r.left, node_count);
  }
  uint8_t* defined = calloc(region->value_count + 1, 1);
  ea_step* steps = calloc((size_t)count + 1, sizeof *steps);
  if (!defined || !steps) {
    free(defined);
    free(steps);
    return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory reading the program");
  }
  tsrp_status* status = NULL;
  char why[256];
  ea_shape shape;
  /* The region's boundary tensors: float32 of static shapes, as run() checks its arguments against them. */
  for (size_t i = 0; !status && i < region->input_count + region->output_count; ++i) {
    const int32_t v = i < region->input_count ? region->inputs[i] : region->outputs[i - region->input_count];
    if (!ea_static_float_shape(region, v, &shape, why, sizeof why)) status = BAD_PAYLOAD("region boundary value: %s", why);
    else if (i < region->input_count) defined[v] = 1;
  }
  for (size_t v = 0; !status && v < region->value_count; ++v) {
    if (region->values[v] && region->values[v]->constant) defined[v] = 1;
  }
  for (size_t i = 0; !status && i < count; ++i) status = parse_instruction(region, &r, i, defined, &steps[i]);
  if (!status && r.left != 0) status = BAD_PAYLOAD("%zu bytes after the last instruction", r.left);
  for (size_t i = 0; !status && i < region->output_count; ++i) {
    if (defined[region->outputs[i]] != 2) status = BAD_PAYLOAD("no instruction writes region output %d", region->outputs[i]);
  }
  free(defined);
  if (status) {
    free(steps);
    return status;
  }
  *out_steps = steps;
  *out_count = count;
  return NULL;
}
