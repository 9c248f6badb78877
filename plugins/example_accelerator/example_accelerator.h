/* The example accelerator plug-in: what its C files share.
 *
 * This folder is the template a hardware vendor copies to write a Tessera
 * backend plug-in. It is plain C11 and includes only <tessera/backend_plugin.h>,
 * <dlpack/dlpack.h>, the C standard library and pthreads. The files:
 *   example_accelerator_plugin.c   the entry point, the tsrp_plugin table, support() and the fused pattern
 *   example_accelerator_device.c   the simulated device: scrambled memory, an allocation registry and an
 *                                  asynchronous queue run by a worker thread
 *   example_accelerator_program.c  the payload ("device program"): compile() writes it, load() parses it
 *                                  defensively against the region graph
 *   example_accelerator_region.c   load(), run() and release_region()
 *   example_accelerator_kernels.c  the kernels the device runs (Relu, Sigmoid, Add, Mul, MatMul, Gemm,
 *                                  MatMulAddRelu), reading and writing scrambled device memory
 *
 * Contract of the device: its memory is not host memory. Every byte is stored
 * XOR kScrambleMask, so a byte the host moves without copy_from_host or
 * copy_to_host comes out wrong; a pointer it did not allocate is refused
 * (TSRP_INTERNAL) before anything reads it. Work (copies into the device,
 * kernels) runs in submission order on one worker thread. */
#ifndef EXAMPLE_ACCELERATOR_H_
#define EXAMPLE_ACCELERATOR_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tessera/backend_plugin.h>

#define EA_NAME "example_accelerator"
#define EA_VERSION "1" /* the plug-in's and its payload format's version */
#define EA_MAX_RANK 8
/* The largest tensor the device takes (elements): keeps every byte count far from overflow. */
#define EA_MAX_ELEMENTS ((int64_t)1 << 36)

/* ---------------------------------------------------------------- errors (example_accelerator_plugin.c) */

/* The host that loaded the plug-in (set by the entry point). */
extern const tsrp_host* ea_host;

/* A status with a printf-formatted message. */
tsrp_status* ea_error(tsrp_status_code code, const char* format, ...) __attribute__((format(printf, 2, 3)));
/* Non-NULL (an error status) when EXAMPLE_ACCELERATOR_FAIL names `step`. */
tsrp_status* ea_injected_failure(const char* step);
/* The name of a dtype ("float32", "int64", ...). */
const char* ea_dtype_name(tsrp_dtype dtype);

/* ---------------------------------------------------------------- shapes */

typedef struct ea_shape {
  int32_t rank;
  int64_t dims[EA_MAX_RANK];
  int64_t elements;
} ea_shape;

/* Reads value `index` of `graph` as a float32 tensor of a static shape. On
 * failure returns 0 and writes why into `why` (without a prefix). */
int ea_static_float_shape(const tsrp_graph* graph, int32_t index, ea_shape* out, char* why, size_t why_size);
/* numpy broadcasting of a and b into out; 0 when they do not broadcast. */
int ea_broadcast(const ea_shape* a, const ea_shape* b, ea_shape* out);
/* Whether `from` broadcasts to exactly `to` (unidirectional, as Gemm's C). */
int ea_broadcasts_to(const ea_shape* from, const ea_shape* to);
int ea_same_shape(const ea_shape* a, const ea_shape* b);

/* ---------------------------------------------------------------- device (example_accelerator_device.c) */

/* The device is one per process. Each backend and region holds it; the
 * worker thread runs while anyone does. */
tsrp_status* ea_device_acquire(void);
void ea_device_release(void);

/* The memory space handed to the host (tsrp_plugin.memory_space). */
extern const tsrp_memory_space ea_memory_space;

tsrp_status* ea_device_allocate(size_t bytes, void** out_data);
void ea_device_deallocate(void* data);
/* NULL when [data, data + bytes) lies inside one live device allocation; else
 * TSRP_INTERNAL naming `what`. */
tsrp_status* ea_device_check(const void* data, size_t bytes, const char* what);
tsrp_status* ea_device_copy_from_host(void* device_dst, const void* host_src, size_t bytes);
tsrp_status* ea_device_copy_to_host(void* host_dst, const void* device_src, size_t bytes);
tsrp_status* ea_device_synchronize(void);

/* A kernel launch: the worker calls run(arguments) and stores its time. */
typedef struct ea_launch {
  void (*run)(const struct ea_launch* launch);
  const struct ea_step* step;
  void* operands[4]; /* device pointers: inputs in order, then the output */
  double milliseconds;
} ea_launch;

/* Queues the launches in order, then waits until they (and everything queued
 * before them) have run. */
tsrp_status* ea_device_launch_and_wait(ea_launch* launches, size_t count);

/* Device memory as the device's kernels see it. */
#define EA_SCRAMBLE_MASK 0x5Cu
static inline float ea_read_float(const void* device, int64_t index) {
  uint32_t word;
  memcpy(&word, (const uint8_t*)device + 4 * index, 4);
  word ^= EA_SCRAMBLE_MASK * 0x01010101u;
  float value;
  memcpy(&value, &word, 4);
  return value;
}
static inline void ea_write_float(void* device, int64_t index, float value) {
  uint32_t word;
  memcpy(&word, &value, 4);
  word ^= EA_SCRAMBLE_MASK * 0x01010101u;
  memcpy((uint8_t*)device + 4 * index, &word, 4);
}

/* ---------------------------------------------------------------- program (example_accelerator_program.c) */

typedef enum ea_opcode {
  EA_OP_RELU = 1,
  EA_OP_SIGMOID = 2,
  EA_OP_ADD = 3,
  EA_OP_MUL = 4,
  EA_OP_MATMUL = 5,           /* a[M,K] x b[K,N] */
  EA_OP_GEMM = 6,             /* a[M,K] x b[K,N] (or b[N,K] with trans_b) + optional c */
  EA_OP_MATMUL_ADD_RELU = 7,  /* relu(x[M,K] x w[K,N] + bias) */
} ea_opcode;

/* One instruction as load() validated it, with the shapes its kernel needs. */
typedef struct ea_step {
  ea_opcode opcode;
  uint32_t node_index; /* the region-graph node it runs (for node_finished) */
  int32_t input_count;
  int32_t inputs[3];   /* value indices */
  int32_t output;
  ea_shape input_shapes[3];
  ea_shape output_shape;
  int64_t m, k, n;     /* matrix products */
  int32_t trans_b;     /* Gemm */
} ea_step;

/* The region graph's nodes → a payload (malloc'd; the caller frees it). */
tsrp_status* ea_compile_program(const tsrp_graph* region, uint8_t** out_bytes, size_t* out_size);
/* A payload (possibly hostile) → steps checked against `region` (malloc'd). */
tsrp_status* ea_parse_program(const tsrp_graph* region, const void* payload, size_t size, ea_step** out_steps,
                              size_t* out_count);

/* ---------------------------------------------------------------- kernels (example_accelerator_kernels.c) */

/* The kernel of an opcode (for ea_launch.run). */
void (*ea_kernel_for(ea_opcode opcode))(const ea_launch* launch);

/* ---------------------------------------------------------------- plug-in table (example_accelerator_region.c) */

tsrp_status* ea_load(tsrp_backend* backend, const tsrp_graph* region, const void* payload, size_t size,
                     tsrp_region** out_region);
void ea_release_region(tsrp_region* region);
tsrp_status* ea_run(tsrp_region* region, const tsrp_run_args* args);

/* Which op a node is for this device: 0 with a reason when it is none it runs. */
int ea_node_supported(const tsrp_graph* graph, size_t node_index, char* reason, size_t reason_size);

#endif /* EXAMPLE_ACCELERATOR_H_ */
