/* The example accelerator's kernels: what the simulated device runs for each
 * opcode, on the worker thread.
 *
 * Contract: a kernel reads and writes device memory only through
 * ea_read_float/ea_write_float (the memory is scrambled), and trusts its step:
 * ea_parse_program checked every shape against the region graph and run()
 * checked every pointer against the device's registry, so the loops here do
 * no checks of their own. Kernels are plain loops: a vendor replaces them with
 * its device's launches. No kernel allocates or fails. */
#include <math.h>

#include "example_accelerator.h"

static void relu_kernel(const ea_launch* launch) {
  const int64_t n = launch->step->output_shape.elements;
  for (int64_t i = 0; i < n; ++i) {
    const float x = ea_read_float(launch->operands[0], i);
    /* x > 0 ? x : 0 would turn NaN into 0; numpy keeps it. */
    ea_write_float(launch->operands[1], i, x < 0.0f ? 0.0f : x);
  }
}

static void sigmoid_kernel(const ea_launch* launch) {
  const int64_t n = launch->step->output_shape.elements;
  for (int64_t i = 0; i < n; ++i) {
    const float x = ea_read_float(launch->operands[0], i);
    /* Both branches stay finite: exp of a non-positive number. */
    const float y = x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    ea_write_float(launch->operands[1], i, y);
  }
}

/* Element strides of `shape` read as `out` (numpy broadcasting: 0 along a broadcast dimension). */
static void broadcast_strides(const ea_shape* shape, const ea_shape* out, int64_t strides[EA_MAX_RANK]) {
  int64_t stride = 1;
  for (int32_t i = out->rank - 1; i >= 0; --i) {
    const int32_t j = i - (out->rank - shape->rank);
    const int64_t d = j >= 0 ? shape->dims[j] : 1;
    strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
}

static void binary_kernel(const ea_launch* launch, int multiply) {
  const ea_step* step = launch->step;
  const ea_shape* out = &step->output_shape;
  int64_t stride_a[EA_MAX_RANK], stride_b[EA_MAX_RANK], index[EA_MAX_RANK] = {0};
  broadcast_strides(&step->input_shapes[0], out, stride_a);
  broadcast_strides(&step->input_shapes[1], out, stride_b);
  int64_t offset_a = 0, offset_b = 0;
  for (int64_t i = 0; i < out->elements; ++i) {
    const float a = ea_read_float(launch->operands[0], offset_a);
    const float b = ea_read_float(launch->operands[1], offset_b);
    ea_write_float(launch->operands[2], i, multiply ? a * b : a + b);
    /* The next output index, carrying into outer dimensions. */
    for (int32_t d = out->rank - 1; d >= 0; --d) {
      offset_a += stride_a[d];
      offset_b += stride_b[d];
      if (++index[d] < out->dims[d]) break;
      offset_a -= stride_a[d] * out->dims[d];
      offset_b -= stride_b[d] * out->dims[d];
      index[d] = 0;
    }
  }
}

static void add_kernel(const ea_launch* launch) { binary_kernel(launch, 0); }
static void mul_kernel(const ea_launch* launch) { binary_kernel(launch, 1); }

/* out[M,N] = a[M,K] x b (b[K,N], or b[N,K] with trans_b) [+ bias broadcast to [M,N]] [then relu].
 * operands: a, b, [bias,] out. */
static void matrix_product(const ea_launch* launch, int has_bias, int relu) {
  const ea_step* step = launch->step;
  const int64_t m = step->m, k = step->k, n = step->n;
  const void* a = launch->operands[0];
  const void* b = launch->operands[1];
  const void* bias = has_bias ? launch->operands[2] : NULL;
  void* out = launch->operands[has_bias ? 3 : 2];
  int64_t bias_strides[EA_MAX_RANK] = {0, 0};
  if (has_bias) broadcast_strides(&step->input_shapes[2], &step->output_shape, bias_strides);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        const float bv = step->trans_b ? ea_read_float(b, j * k + p) : ea_read_float(b, p * n + j);
        sum += ea_read_float(a, i * k + p) * bv;
      }
      if (has_bias) sum += ea_read_float(bias, i * bias_strides[0] + j * bias_strides[1]);
      if (relu && sum < 0.0f) sum = 0.0f;
      ea_write_float(out, i * n + j, sum);
    }
  }
}

static void matmul_kernel(const ea_launch* launch) { matrix_product(launch, 0, 0); }
static void gemm_kernel(const ea_launch* launch) { matrix_product(launch, launch->step->input_count == 3, 0); }
static void matmul_add_relu_kernel(const ea_launch* launch) { matrix_product(launch, 1, 1); }

void (*ea_kernel_for(ea_opcode opcode))(const ea_launch* launch) {
  switch (opcode) {
    case EA_OP_RELU: return relu_kernel;
    case EA_OP_SIGMOID: return sigmoid_kernel;
    case EA_OP_ADD: return add_kernel;
    case EA_OP_MUL: return mul_kernel;
    case EA_OP_MATMUL: return matmul_kernel;
    case EA_OP_GEMM: return gemm_kernel;
    case EA_OP_MATMUL_ADD_RELU: return matmul_add_relu_kernel;
  }
  return NULL;
}
