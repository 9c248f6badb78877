/* The example accelerator's executable regions: load(), run(), release_region().
 *
 * Contract. load() parses the payload against the region graph (see
 * example_accelerator_program.c) and uploads the constants it reads to device
 * memory once; a failure releases everything it made. run() takes DLTensors in
 * the device's memory space (kDLExtDev), float32, compact, shaped as the region
 * graph says, each pointer inside one live device allocation (checked against
 * the registry before anything reads it: TSRP_INTERNAL otherwise); it
 * allocates the region's intermediate values, queues one kernel per
 * instruction on the device's worker, waits for them, reports node times and
 * frees the intermediates. Several threads may run one region at once: all a
 * run writes is its own. */
#include <stdio.h>
#include <stdlib.h>

#include "example_accelerator.h"

struct tsrp_region {
  const tsrp_graph* graph; /* lives as long as the region (the header's contract) */
  ea_step* steps;
  size_t step_count;
  void** constants;        /* per value: its device copy, or NULL */
  int32_t* intermediates;  /* values written by a step that are not region outputs */
  size_t intermediate_count;
};

void ea_release_region(tsrp_region* region) {
  if (!region) return;
  if (region->constants) {
    for (size_t v = 0; v < region->graph->value_count; ++v) ea_device_deallocate(region->constants[v]);
  }
  free(region->constants);
  free(region->intermediates);
  free(region->steps);
  free(region);
  ea_device_release();
}

/* The device copy of every constant a step reads; values written by steps
 * that the region does not output. */
static tsrp_status* prepare(tsrp_region* region) {
  const tsrp_graph* graph = region->graph;
  region->constants = calloc(graph->value_count + 1, sizeof *region->constants);
  region->intermediates = calloc(region->step_count + 1, sizeof *region->intermediates);
  if (!region->constants || !region->intermediates) return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory");
  for (size_t s = 0; s < region->step_count; ++s) {
    const ea_step* step = &region->steps[s];
    for (int32_t k = 0; k < step->input_count; ++k) {
      const int32_t v = step->inputs[k];
      const tsrp_value* value = graph->values[v];
      if (!value->constant || region->constants[v]) continue;
      /* ea_parse_program checked constant_bytes against the shape. */
      tsrp_status* status = ea_device_allocate(value->constant_bytes, &region->constants[v]);
      if (!status) status = ea_device_copy_from_host(region->constants[v], value->constant, value->constant_bytes);
      if (status) return status;
    }
    int is_output = 0;
    for (size_t o = 0; o < graph->output_count; ++o) is_output |= graph->outputs[o] == step->output;
    if (!is_output) region->intermediates[region->intermediate_count++] = step->output;
  }
  /* The constants' copies stage the host bytes: nothing to wait for. */
  return NULL;
}

tsrp_status* ea_load(tsrp_backend* backend, const tsrp_graph* graph, const void* payload, size_t size,
                     tsrp_region** out_region) {
  (void)backend;
  *out_region = NULL;
  tsrp_status* status = ea_injected_failure("load");
  if (status) return status;
  if (!graph) return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": load without a region graph");
  tsrp_region* region = calloc(1, sizeof *region);
  if (!region) return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory");
  region->graph = graph;
  status = ea_device_acquire();
  if (status) {
    free(region);
    return status;
  }
  status = ea_parse_program(graph, payload, size, &region->steps, &region->step_count);
  if (!status) status = prepare(region);
  if (status) {
    ea_release_region(region);
    return status;
  }
  *out_region = region;
  return NULL;
}

/* ---------------------------------------------------------------- run */

/* Checks one run argument against region value `index`; NULL or why not. */
static tsrp_status* check_tensor(const tsrp_graph* graph, const DLTensor* t, int32_t index, const char* role, size_t k) {
  const tsrp_value* value = graph->values[index];
  if (t->device.device_type != kDLExtDev) {
    return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": %s %zu ('%s') is on device type %d, not the accelerator's (%d)",
                    role, k, value->name, (int)t->device.device_type, (int)kDLExtDev);
  }
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": %s %zu ('%s') is not float32", role, k, value->name);
  }
  if (t->ndim != value->rank || (t->ndim > 0 && !t->shape)) {
    return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": %s %zu ('%s') has rank %d, expected %d", role, k, value->name,
                    t->ndim, value->rank);
  }
  int64_t expected_stride = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] != value->dims[d]) {
      return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": %s %zu ('%s') has dimension %d = %lld, expected %lld", role, k,
                      value->name, d, (long long)t->shape[d], (long long)value->dims[d]);
    }
    if (t->strides && t->shape[d] != 1 && t->strides[d] != expected_stride) {
      return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": %s %zu ('%s') is not compact row-major", role, k, value->name);
    }
    expected_stride *= t->shape[d];
  }
  char what[320];
  snprintf(what, sizeof what, "%s %zu ('%s')", role, k, value->name);
  return ea_device_check((const uint8_t*)t->data + t->byte_offset, (size_t)expected_stride * 4, what);
}

tsrp_status* ea_run(tsrp_region* region, const tsrp_run_args* args) {
  tsrp_status* status = ea_injected_failure("run");
  if (status) return status;
  const tsrp_graph* graph = region->graph;
  if (!args || args->struct_size < offsetof(tsrp_run_args, outputs) + sizeof(args->outputs) ||
      args->input_count != graph->input_count || args->output_count != graph->output_count ||
      (args->input_count && !args->inputs) || (args->output_count && !args->outputs)) {
    return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": run with %zu inputs and %zu outputs; the region has %zu and %zu",
                    args ? args->input_count : 0, args ? args->output_count : 0, graph->input_count,
                    graph->output_count);
  }
  /* Every value's device pointer for this run. */
  void** pointers = calloc(graph->value_count + 1, sizeof *pointers);
  ea_launch* launches = calloc(region->step_count + 1, sizeof *launches);
  if (!pointers || !launches) {
    free(pointers);
    free(launches);
    return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory");
  }
  for (size_t k = 0; !status && k < graph->input_count; ++k) {
    status = check_tensor(graph, &args->inputs[k], graph->inputs[k], "input", k);
    if (!status) pointers[graph->inputs[k]] = (uint8_t*)args->inputs[k].data + args->inputs[k].byte_offset;
  }
  for (size_t k = 0; !status && k < graph->output_count; ++k) {
    DLTensor* t = &args->outputs[k];
    if (!t->data && args->allocate_output) {
      /* Shapes are static here, so the host allocates every output; this is the path for one it did not. */
      const tsrp_value* value = graph->values[graph->outputs[k]];
      status = args->allocate_output(args->host_context, k, value->dims, value->rank);
    }
    if (!status) status = check_tensor(graph, t, graph->outputs[k], "output", k);
    if (!status) pointers[graph->outputs[k]] = (uint8_t*)t->data + t->byte_offset;
  }
  for (size_t v = 0; v < graph->value_count; ++v) {
    if (region->constants[v]) pointers[v] = region->constants[v];
  }
  size_t allocated = 0;
  for (; !status && allocated < region->intermediate_count; ++allocated) {
    const int32_t v = region->intermediates[allocated];
    ea_shape shape;
    char why[256];
    ea_static_float_shape(graph, v, &shape, why, sizeof why); /* checked at load */
    status = ea_device_allocate((size_t)shape.elements * 4, &pointers[v]);
    if (status) break;
  }
  if (!status) {
    for (size_t s = 0; s < region->step_count; ++s) {
      const ea_step* step = &region->steps[s];
      ea_launch* launch = &launches[s];
      launch->run = ea_kernel_for(step->opcode);
      launch->step = step;
      for (int32_t k = 0; k < step->input_count; ++k) launch->operands[k] = pointers[step->inputs[k]];
      launch->operands[step->input_count] = pointers[step->output];
    }
    status = ea_device_launch_and_wait(launches, region->step_count);
  }
  if (!status && TSRP_HAS_MEMBER(args, tsrp_run_args, node_finished) && args->node_finished) {
    for (size_t s = 0; s < region->step_count; ++s) {
      args->node_finished(args->host_context, region->steps[s].node_index, launches[s].milliseconds);
    }
  }
  for (size_t i = 0; i < allocated; ++i) ea_device_deallocate(pointers[region->intermediates[i]]);
  free(pointers);
  free(launches);
  return status;
}
