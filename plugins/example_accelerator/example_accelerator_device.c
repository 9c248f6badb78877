/* The simulated device of the example accelerator: its memory and its queue.
 *
 * Memory. Allocations come from the host's heap but behave like device
 * memory: every byte is stored XOR EA_SCRAMBLE_MASK (a copy that bypasses
 * copy_from_host/copy_to_host gives wrong numbers), fresh memory is filled
 * with a pattern, and every allocation is kept in a registry, so a pointer
 * the device did not allocate (or a range past an allocation's end) is refused
 * with TSRP_INTERNAL instead of being read. A real driver would ask its page
 * tables; the registry is a plain array searched linearly (regions hold few
 * tensors). Live allocations and bytes are counted for the tests
 * (example_accelerator_live_allocations).
 *
 * Queue. One worker thread runs commands in submission order: copies into the
 * device and kernel launches. copy_from_host copies the host bytes into a
 * staging buffer and returns at once (the host may reuse its buffer); the
 * queue orders the copy before later launches. copy_to_host, synchronize,
 * deallocate and launches wait: each queues a fence and sleeps until the
 * worker passes it, which means everything before it has run. The worker
 * runs while a backend or region holds the device (ea_device_acquire); with
 * no worker, commands run on the caller's thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "example_accelerator.h"

#define EA_ALIGNMENT 64
#define EA_FRESH_FILL 0xCD

typedef enum ea_command_kind { EA_COPY_IN, EA_LAUNCH, EA_FENCE } ea_command_kind;

typedef struct ea_command {
  struct ea_command* next;
  ea_command_kind kind;
  /* EA_COPY_IN */
  uint8_t* device_dst;
  uint8_t* staging; /* owned: freed once copied */
  size_t bytes;
  /* EA_LAUNCH */
  ea_launch* launch;
  /* EA_FENCE: set to 1 by the worker; waiters sleep on done_cond */
  int* passed;
} ea_command;

typedef struct ea_allocation {
  uint8_t* data;
  size_t bytes; /* as asked (the block holds at least one aligned byte more) */
} ea_allocation;

static struct {
  pthread_mutex_t mutex;
  pthread_cond_t work_cond; /* the worker waits for commands */
  pthread_cond_t done_cond; /* waiters wait for their fence */
  ea_command* head;
  ea_command* tail;
  int users;
  int worker_running;
  int stopping;
  pthread_t worker;
  ea_allocation* allocations;
  size_t allocation_count;
  size_t allocation_capacity;
  int64_t live_bytes;
} g_device = {.mutex = PTHREAD_MUTEX_INITIALIZER,
               .work_cond = PTHREAD_COND_INITIALIZER,
               .done_cond = PTHREAD_COND_INITIALIZER};

/* For the tests: live device allocations and their bytes (everything a model
 * left behind once it is released should be zero). */
TSRP_EXPORT void example_accelerator_live_allocations(int64_t* count, int64_t* bytes) {
  pthread_mutex_lock(&g_device.mutex);
  if (count) *count = (int64_t)g_device.allocation_count;
  if (bytes) *bytes = g_device.live_bytes;
  pthread_mutex_unlock(&g_device.mutex);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Runs one command (on the worker, or on the caller when there is none). */
static void execute(ea_command* command) {
  switch (command->kind) {
    case EA_COPY_IN:
      for (size_t i = 0; i < command->bytes; ++i) command->device_dst[i] = command->staging[i] ^ EA_SCRAMBLE_MASK;
      free(command->staging);
      command->staging = NULL;
      break;
    case EA_LAUNCH: {
      const double start = now_ms();
      command->launch->run(command->launch);
      command->launch->milliseconds = now_ms() - start;
      break;
    }
    case EA_FENCE: break;
  }
}

static void* worker_main(void* unused) {
  (void)unused;
  pthread_mutex_lock(&g_device.mutex);
  for (;;) {
    while (!g_device.head && !g_device.stopping) pthread_cond_wait(&g_device.work_cond, &g_device.mutex);
    if (!g_device.head) break; /* stopping, and the queue is drained */
    ea_command* command = g_device.head;
    g_device.head = command->next;
    if (!g_device.head) g_device.tail = NULL;
    if (command->kind == EA_FENCE) {
      *command->passed = 1;
      pthread_cond_broadcast(&g_device.done_cond);
      free(command);
      continue;
    }
    pthread_mutex_unlock(&g_device.mutex);
    execute(command);
    free(command);
    pthread_mutex_lock(&g_device.mutex);
  }
  pthread_mutex_unlock(&g_device.mutex);
  return NULL;
}

tsrp_status* ea_device_acquire(void) {
  pthread_mutex_lock(&g_device.mutex);
  if (!g_device.worker_running) {
    g_device.stopping = 0;
    if (pthread_create(&g_device.worker, NULL, worker_main, NULL) != 0) {
      pthread_mutex_unlock(&g_device.mutex);
      return ea_error(TSRP_INTERNAL, EA_NAME ": cannot start the device's worker thread");
    }
    g_device.worker_running = 1;
  }
  ++g_device.users;
  pthread_mutex_unlock(&g_device.mutex);
  return NULL;
}

void ea_device_release(void) {
  pthread_mutex_lock(&g_device.mutex);
  if (--g_device.users > 0 || !g_device.worker_running) {
    pthread_mutex_unlock(&g_device.mutex);
    return;
  }
  g_device.stopping = 1;
  g_device.worker_running = 0;
  pthread_t worker = g_device.worker;
  pthread_cond_broadcast(&g_device.work_cond);
  pthread_mutex_unlock(&g_device.mutex);
  pthread_join(worker, NULL); /* it drains the queue first */
}

/* Queues `command` (taking it) or, with no worker, runs it now. Call without the mutex. */
static void submit(ea_command* command) {
  command->next = NULL;
  pthread_mutex_lock(&g_device.mutex);
  if (!g_device.worker_running) {
    pthread_mutex_unlock(&g_device.mutex);
    if (command->kind == EA_FENCE) *command->passed = 1;
    else execute(command);
    free(command);
    return;
  }
  if (g_device.tail) g_device.tail->next = command;
  else g_device.head = command;
  g_device.tail = command;
  pthread_cond_signal(&g_device.work_cond);
  pthread_mutex_unlock(&g_device.mutex);
}

static ea_command* new_command(ea_command_kind kind) {
  ea_command* command = calloc(1, sizeof *command);
  if (command) command->kind = kind;
  return command;
}

/* Everything queued so far has run when this returns NULL. */
static tsrp_status* wait_for_queue(void) {
  int passed = 0;
  ea_command* fence = new_command(EA_FENCE);
  if (!fence) return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory for a queue command");
  fence->passed = &passed;
  submit(fence);
  pthread_mutex_lock(&g_device.mutex);
  while (!passed) pthread_cond_wait(&g_device.done_cond, &g_device.mutex);
  pthread_mutex_unlock(&g_device.mutex);
  return NULL;
}

tsrp_status* ea_device_synchronize(void) { return wait_for_queue(); }

/* ---------------------------------------------------------------- memory */

tsrp_status* ea_device_allocate(size_t bytes, void** out_data) {
  *out_data = NULL;
  tsrp_status* injected = ea_injected_failure("allocate");
  if (injected) return injected;
  if (bytes > ((size_t)1 << 40)) return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": cannot allocate %zu bytes", bytes);
  /* At least one aligned block, so that a 0-byte allocation is a distinct, registered address. */
  const size_t rounded = (bytes / EA_ALIGNMENT + 1) * EA_ALIGNMENT;
  uint8_t* data = aligned_alloc(EA_ALIGNMENT, rounded);
  if (!data) return ea_error(TSRP_INTERNAL, EA_NAME ": out of device memory allocating %zu bytes", bytes);
  memset(data, EA_FRESH_FILL, rounded);
  pthread_mutex_lock(&g_device.mutex);
  if (g_device.allocation_count == g_device.allocation_capacity) {
    const size_t capacity = g_device.allocation_capacity ? 2 * g_device.allocation_capacity : 64;
    ea_allocation* grown = realloc(g_device.allocations, capacity * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&g_device.mutex);
      free(data);
      return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory for the allocation registry");
    }
    g_device.allocations = grown;
    g_device.allocation_capacity = capacity;
  }
  g_device.allocations[g_device.allocation_count].data = data;
  g_device.allocations[g_device.allocation_count].bytes = bytes;
  ++g_device.allocation_count;
  g_device.live_bytes += (int64_t)bytes;
  pthread_mutex_unlock(&g_device.mutex);
  *out_data = data;
  return NULL;
}

void ea_device_deallocate(void* data) {
  if (!data) return;
  /* Work queued on this memory (after a failed run, say) must finish first. */
  tsrp_status* waited = wait_for_queue();
  if (waited) {
    /* Out of memory for a fence: free nothing rather than free memory in use. */
    return;
  }
  pthread_mutex_lock(&g_device.mutex);
  for (size_t i = 0; i < g_device.allocation_count; ++i) {
    if (g_device.allocations[i].data == data) {
      g_device.live_bytes -= (int64_t)g_device.allocations[i].bytes;
      g_device.allocations[i] = g_device.allocations[--g_device.allocation_count];
      pthread_mutex_unlock(&g_device.mutex);
      free(data);
      return;
    }
  }
  /* Not ours: deallocate returns nothing to report it with; leave it alone. */
  pthread_mutex_unlock(&g_device.mutex);
}

tsrp_status* ea_device_check(const void* data, size_t bytes, const char* what) {
  const uint8_t* p = data;
  pthread_mutex_lock(&g_device.mutex);
  for (size_t i = 0; i < g_device.allocation_count; ++i) {
    const ea_allocation* a = &g_device.allocations[i];
    /* Compare as integers: p may point anywhere. */
    const uintptr_t start = (uintptr_t)a->data, at = (uintptr_t)p;
    if (at >= start && at - start <= a->bytes && bytes <= a->bytes - (at - start)) {
      pthread_mutex_unlock(&g_device.mutex);
      return NULL;
    }
  }
  pthread_mutex_unlock(&g_device.mutex);
  return ea_error(TSRP_INTERNAL, EA_NAME ": %s: %p (%zu bytes) is not memory this device allocated", what, data, bytes);
}

tsrp_status* ea_device_copy_from_host(void* device_dst, const void* host_src, size_t bytes) {
  tsrp_status* bad = ea_device_check(device_dst, bytes, "copy_from_host destination");
  if (bad) return bad;
  if (bytes == 0) return NULL;
  if (!host_src) return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": copy_from_host from a NULL host pointer");
  ea_command* command = new_command(EA_COPY_IN);
  uint8_t* staging = malloc(bytes);
  if (!command || !staging) {
    free(command);
    free(staging);
    return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory staging %zu bytes", bytes);
  }
  /* The host may reuse its buffer once this returns: keep a copy for the queue. */
  memcpy(staging, host_src, bytes);
  command->device_dst = device_dst;
  command->staging = staging;
  command->bytes = bytes;
  submit(command);
  return NULL;
}

tsrp_status* ea_device_copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  tsrp_status* bad = ea_device_check(device_src, bytes, "copy_to_host source");
  if (bad) return bad;
  if (bytes == 0) return NULL;
  if (!host_dst) return ea_error(TSRP_INVALID_ARGUMENT, EA_NAME ": copy_to_host into a NULL host pointer");
  /* Earlier copies and kernels may still write the source. */
  tsrp_status* waited = wait_for_queue();
  if (waited) return waited;
  const uint8_t* src = device_src;
  uint8_t* dst = host_dst;
  for (size_t i = 0; i < bytes; ++i) dst[i] = src[i] ^ EA_SCRAMBLE_MASK;
  return NULL;
}

tsrp_status* ea_device_launch_and_wait(ea_launch* launches, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    ea_command* command = new_command(EA_LAUNCH);
    if (!command) {
      /* Those queued reference `launches`: let them finish before the caller frees it. */
      tsrp_status* waited = wait_for_queue();
      if (waited) return waited;
      return ea_error(TSRP_INTERNAL, EA_NAME ": out of host memory for a queue command");
    }
    command->launch = &launches[i];
    submit(command);
  }
  return wait_for_queue();
}

/* ---------------------------------------------------------------- the space handed to the host */

static tsrp_status* space_allocate(void* context, size_t bytes, void** out_data) {
  (void)context;
  return ea_device_allocate(bytes, out_data);
}
static void space_deallocate(void* context, void* data) {
  (void)context;
  ea_device_deallocate(data);
}
static tsrp_status* space_copy_from_host(void* context, void* device_dst, const void* host_src, size_t bytes) {
  (void)context;
  return ea_device_copy_from_host(device_dst, host_src, bytes);
}
static tsrp_status* space_copy_to_host(void* context, void* host_dst, const void* device_src, size_t bytes) {
  (void)context;
  return ea_device_copy_to_host(host_dst, device_src, bytes);
}
static tsrp_status* space_synchronize(void* context) {
  (void)context;
  return ea_device_synchronize();
}

const tsrp_memory_space ea_memory_space = {
    .struct_size = sizeof(tsrp_memory_space),
    .name = "example-accelerator",
    .context = NULL,
    .allocate = space_allocate,
    .deallocate = space_deallocate,
    .copy_from_host = space_copy_from_host,
    .copy_to_host = space_copy_to_host,
    .synchronize = space_synchronize,
};
