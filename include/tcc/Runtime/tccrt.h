/*===- tccrt.h - The tcc runtime's C API -------------------------------------===
 *
 * Loads a tcc artifact (made by `tcc compile`) and runs it. Plain C, stable: link libtccrt.
 * The library depends on no MLIR, LLVM or protobuf; CUDA libraries are loaded at run time.
 *
 * Errors: every function returning tccrt_status sets a thread-local message on failure, read
 * with tccrt_last_error(). Nothing aborts on bad input (a damaged artifact is an error).
 *===--------------------------------------------------------------------------===*/
#ifndef TCCRT_H
#define TCCRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tccrt_status { TCCRT_OK = 0, TCCRT_ERROR = 1 } tccrt_status;

/* Element types; same numbering as the artifact schema. */
typedef enum tccrt_dtype {
  TCCRT_BOOL, TCCRT_I8, TCCRT_I16, TCCRT_I32, TCCRT_I64, TCCRT_U8, TCCRT_U16, TCCRT_U32,
  TCCRT_U64, TCCRT_F16, TCCRT_BF16, TCCRT_F32, TCCRT_F64
} tccrt_dtype;

typedef enum tccrt_device { TCCRT_DEVICE_CPU = 0, TCCRT_DEVICE_CUDA = 1 } tccrt_device;

typedef struct tccrt_program tccrt_program;

typedef struct tccrt_options {
  int num_threads; /* CPU threads for kernels and library calls; 0 = all cores */
} tccrt_options;

typedef struct tccrt_tensor_info {
  const char *name;     /* owned by the program */
  tccrt_dtype dtype;
  int64_t rank;
  const int64_t *shape; /* `rank` dims, owned by the program */
  size_t bytes;         /* bytes of a contiguous row-major tensor of this shape */
} tccrt_tensor_info;

typedef struct tccrt_allocator_stats {
  uint64_t allocated_bytes;      /* in use by callers now */
  uint64_t reserved_bytes;       /* held from the system (in use + cached) */
  uint64_t peak_allocated_bytes;
  uint64_t num_allocs;           /* tccrt_alloc-equivalent requests */
  uint64_t num_cache_hits;       /* requests served from the cache */
  uint64_t num_system_allocs;    /* requests that went to the system */
  uint64_t num_system_frees;
} tccrt_allocator_stats;

/* The message of the last failed call on this thread ("" if none). */
const char *tccrt_last_error(void);

/* The runtime's version string, e.g. "tccrt 0.1 (artifact version 1)". */
const char *tccrt_version(void);

/* Loads an artifact from a file or from memory (copied). `options` may be NULL. */
tccrt_status tccrt_load_file(const char *path, const tccrt_options *options, tccrt_program **out);
tccrt_status tccrt_load_buffer(const void *data, size_t size, const tccrt_options *options,
                               tccrt_program **out);
void tccrt_program_free(tccrt_program *program);

tccrt_device tccrt_program_device(const tccrt_program *program);
size_t tccrt_num_inputs(const tccrt_program *program);
size_t tccrt_num_outputs(const tccrt_program *program);
tccrt_status tccrt_input_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info);
tccrt_status tccrt_output_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info);
tccrt_status tccrt_set_num_threads(tccrt_program *program, int num_threads);

/* Runs the program. inputs[i] / outputs[i] point to contiguous host tensors of the sizes
 * tccrt_input_info / tccrt_output_info give; outputs are written. Not reentrant per program
 * (one run at a time); different programs may run concurrently. */
tccrt_status tccrt_run(tccrt_program *program, const void *const *inputs, void *const *outputs);

/* Host memory through the runtime's caching allocator (64-byte aligned). */
void *tccrt_alloc(size_t bytes);
void tccrt_free(void *ptr);
void tccrt_allocator_get_stats(tccrt_allocator_stats *stats);
/* Returns cached, unused blocks to the system. */
void tccrt_allocator_empty_cache(void);

#ifdef __cplusplus
}
#endif

#endif /* TCCRT_H */
