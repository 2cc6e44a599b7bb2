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
  TCCRT_U64, TCCRT_F16, TCCRT_BF16, TCCRT_F32, TCCRT_F64,
  /* One byte per element: ONNX's float8 variants, and 4-/2-bit integers (sign-extended for the
     signed ones, zero-extended for the unsigned), as numpy's ml_dtypes holds them. */
  TCCRT_F8E4M3FN, TCCRT_F8E4M3FNUZ, TCCRT_F8E5M2, TCCRT_F8E5M2FNUZ, TCCRT_U4, TCCRT_I4,
  TCCRT_U2, TCCRT_I2
} tccrt_dtype;

typedef enum tccrt_device { TCCRT_DEVICE_CPU = 0, TCCRT_DEVICE_CUDA = 1 } tccrt_device;

typedef struct tccrt_program tccrt_program;

typedef struct tccrt_options {
  int num_threads;    /* CPU threads for kernels and library calls; 0 = all cores */
  int cuda_graph;     /* CUDA artifacts: non-zero captures the whole launch list into a CUDA
                         graph and replays it with one launch per run (the first run launches
                         plainly as a warm-up, the second captures; results are identical) */
  int device_ordinal; /* CUDA artifacts: which GPU (0 = the first) */
} tccrt_options;

/* Whether artifacts for `device` can run in this process. If not and `reason` is non-NULL,
 * *reason says why (e.g. "no usable CUDA GPU/driver: libcuda.so.1 not found"; owned by the
 * library, valid until the next call on this thread). The CPU is always available. */
int tccrt_device_available(tccrt_device device, const char **reason);

/* A one-line description of the device a loaded program runs on, e.g. "cpu (16 threads)" or
 * "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, cubin)" (owned by the program). */
const char *tccrt_program_device_name(const tccrt_program *program);

typedef struct tccrt_tensor_info {
  const char *name;     /* owned by the program */
  tccrt_dtype dtype;
  int64_t rank;
  const int64_t *shape; /* `rank` dims, owned by the program (symbolic programs: the values
                           change with tccrt_set_input_shapes, the pointer stays valid) */
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

/* The runtime's version string, e.g. "tccrt 0.2 (artifact version 1)". */
const char *tccrt_version(void);

/* Loads an artifact from a file or from memory (copied). `options` may be NULL. */
tccrt_status tccrt_load_file(const char *path, const tccrt_options *options, tccrt_program **out);
tccrt_status tccrt_load_buffer(const void *data, size_t size, const tccrt_options *options,
                               tccrt_program **out);
void tccrt_program_free(tccrt_program *program);

tccrt_device tccrt_program_device(const tccrt_program *program);
size_t tccrt_num_inputs(const tccrt_program *program);
size_t tccrt_num_outputs(const tccrt_program *program);
/* Symbolic programs: the shapes bound by tccrt_set_input_shapes (before it, -1 in symbolic
 * dims; see below). */
tccrt_status tccrt_input_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info);
tccrt_status tccrt_output_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info);
tccrt_status tccrt_set_num_threads(tccrt_program *program, int num_threads);

/* ---- Symbolic programs -------------------------------------------------------------------------
 *
 * A program compiled with size ranges (`tcc compile --input-shape ids=1..8x1..512`) runs at any
 * input size within them: its dims are expressions of size symbols ("batch", "seq",
 * "batch*seq") with inclusive ranges. It loads unbound: tccrt_input_info and tccrt_output_info
 * give -1 in its symbolic dims (and bytes 0), tccrt_num_launches 0, and tccrt_run is an error
 * naming the first symbolic input. tccrt_set_input_shapes binds the sizes for the next runs:
 * input i has ranks[i] dims at shapes[i] (every input, in order); the symbols are solved from
 * the dims that are a symbol (or a*symbol + b), and every dim must then agree. tccrt_input_info
 * and tccrt_output_info then give the bound shapes, which tccrt_run's tensors must have. Setting
 * the shapes already set costs a comparison (call it before every run whose sizes may change);
 * a size outside its range, or inputs that disagree about a size, is an error naming the
 * input, the dim and the assumption, and leaves the program unbound. A static program accepts
 * its own shapes only (and needs no call). CPU artifacts only: CUDA artifacts have static
 * shapes. */
tccrt_status tccrt_set_input_shapes(tccrt_program *program, const int64_t *const *shapes,
                                    const size_t *ranks);
/* The size expression of input i's dim d ("batch", "2*seq"), or NULL where the dim is static
 * (and for indices out of range). Owned by the program. */
const char *tccrt_input_dim_expr(const tccrt_program *program, size_t i, size_t d);
/* The program's size symbols (0 for a static program), in the order kernels read their values,
 * and each one's inclusive range (*max is INT64_MAX where the compiler was given no bound).
 * name, min and max may each be NULL. */
size_t tccrt_num_symbols(const tccrt_program *program);
/* Bytes of the arena the program's temporaries live in. A symbolic program's is planned again
 * at each binding for the bound sizes (0 before the first; the memory grows to the largest
 * binding so far and is reused), where a static program's is fixed at compile time. */
size_t tccrt_arena_bytes(const tccrt_program *program);
tccrt_status tccrt_symbol_info(const tccrt_program *program, size_t k, const char **name,
                               int64_t *min, int64_t *max);

/* Runs the program. inputs[i] / outputs[i] point to contiguous host tensors of the sizes
 * tccrt_input_info / tccrt_output_info give (a symbolic program's: at the shapes set with
 * tccrt_set_input_shapes); outputs are written. Not reentrant per program
 * (one run at a time); different programs may run concurrently. A training artifact is an
 * error here (see the trainer below). */
tccrt_status tccrt_run(tccrt_program *program, const void *const *inputs, void *const *outputs);

/* CUDA programs: runs on tensors already in the memory of the program's GPU. inputs[i] and
 * outputs[i] are device addresses (CUdeviceptr) of contiguous tensors of the sizes above; they
 * are copied device to device into and out of the program's own buffers (its launch list, and
 * a captured CUDA graph, keep fixed addresses), with no host staging. The work is enqueued on
 * the program's stream (tccrt_program_cuda_stream): inputs written on another stream must be
 * ready for it (a DLPack producer given that stream arranges this). Returns when the outputs
 * are written. A CPU program is an error. */
tccrt_status tccrt_run_device(tccrt_program *program, const void *const *inputs,
                              void *const *outputs);
/* The CUstream a CUDA program's runs are enqueued on (NULL for CPU programs). */
void *tccrt_program_cuda_stream(const tccrt_program *program);

/* ---- Profiling ---------------------------------------------------------------------------------
 *
 * While profiling is on, every tccrt_run times each launch of the program's launch list
 * (generated kernels, library calls, copies): a CPU program with the wall clock around it, a
 * CUDA program with timing events recorded around it on the program's stream (its GPU time;
 * while profiling, a CUDA program launches plainly, without its captured graph). Turning it on
 * clears the counts. The strings live as
 * long as the program (a symbolic program's: until its next new binding, which names its
 * launches at the new sizes; the counts carry over, launch by launch). */
tccrt_status tccrt_set_profiling(tccrt_program *program, int enabled);
size_t tccrt_num_launches(const tccrt_program *program);
typedef struct tccrt_launch_profile {
  const char *kind;          /* "kernel", "gemm", "conv", "topk" or "copy" */
  const char *name;          /* the kernel's name, or the library call and its shape */
  const char *nodes;         /* the model nodes it computes, ", "-separated ("" if unknown) */
  uint64_t calls;            /* runs timed since profiling was turned on */
  double total_seconds;      /* over those runs */
  double last_start_seconds; /* in the last run: when it started, from the run's start */
  double last_seconds;       /* in the last run: how long it took */
} tccrt_launch_profile;
tccrt_status tccrt_get_launch_profile(const tccrt_program *program, size_t i,
                                      tccrt_launch_profile *out);

/* ---- Training (artifacts made by `tcc compile --train`) -------------------------------------
 *
 * A trainer owns the training state (parameters, optimizer state, step counter, gradient
 * accumulators), initialised from the artifact, and runs the artifact's entry points on it.
 * Batches are the same list of host tensors for tccrt_trainer_step and tccrt_trainer_eval: the
 * model's inputs, then the labels (cross-entropy: integer class indices; MSE: targets), with the
 * shapes tccrt_trainer_batch_info gives. Dropout and other random ops draw from a counter-based
 * generator keyed by (seed, micro-step), so a run is reproducible and a resumed run continues
 * bit-identically on the same device and thread count.
 *
 * The state lives in runtime memory, double-buffered: an entry point reads the current buffers
 * and writes the spare ones, which become current after the run (no copies; a failed step
 * leaves the state unchanged). tccrt_run on a training artifact is an error. */

typedef struct tccrt_trainer tccrt_trainer;

typedef enum tccrt_state_kind {
  TCCRT_STATE_PARAMETER, TCCRT_STATE_OPTIMIZER, TCCRT_STATE_STEP, TCCRT_STATE_GRAD_ACCUMULATOR,
  TCCRT_STATE_BUFFER,
  TCCRT_STATE_LOSS_SCALE /* fp16 training: loss_scale, loss_scale.good_steps, .skipped_steps */
} tccrt_state_kind;

/* 1 if the program is a training artifact. */
int tccrt_is_training(const tccrt_program *program);
/* JSON describing loss, optimizer and hyperparameters (owned by the program; "" if none). */
const char *tccrt_training_config(const tccrt_program *program);

/* The random key micro-step `micro_step` (counting from 0) of a trainer with `seed` gets:
 * splitmix64(splitmix64(seed) ^ micro_step), where splitmix64(x): z = x + 0x9e3779b97f4a7c15;
 * z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9; z = (z ^ z >> 27) * 0x94d049bb133111eb; z ^ z >> 31.
 * Distinct for every micro-step of a seed. Eval gets the key of the next micro-step. */
uint64_t tccrt_rng_key(uint64_t seed, uint64_t micro_step);

/* A trainer with the artifact's initial state. `program` must outlive the trainer. */
tccrt_status tccrt_trainer_create(tccrt_program *program, uint64_t seed, tccrt_trainer **out);
void tccrt_trainer_free(tccrt_trainer *trainer);

size_t tccrt_trainer_num_batch_tensors(const tccrt_trainer *trainer);
tccrt_status tccrt_trainer_batch_info(const tccrt_trainer *trainer, size_t i, tccrt_tensor_info *info);

/* One micro-batch: computes the loss and gradients; every grad_accumulation micro-batches (see
 * tccrt_trainer_grad_accumulation) also applies the optimizer update with `learning_rate`.
 * `loss` (may be NULL) receives the micro-batch's mean loss. Micro-step m (counting from 0)
 * runs the artifact's train_step when (m + 1) % grad_accumulation == 0, else accumulate_step. */
tccrt_status tccrt_trainer_step(tccrt_trainer *trainer, const void *const *batch,
                                float learning_rate, float *loss);
int tccrt_trainer_grad_accumulation(const tccrt_trainer *trainer);
/* Micro-batches run so far, and optimizer updates applied so far. */
uint64_t tccrt_trainer_micro_steps(const tccrt_trainer *trainer);
uint64_t tccrt_trainer_steps(const tccrt_trainer *trainer);
/* The seed random keys derive from (the one given at creation, or a loaded checkpoint's). */
uint64_t tccrt_trainer_seed(const tccrt_trainer *trainer);

/* Distributed artifacts (`tcc compile --train --mesh ...`, run under mpirun): this process's
 * rank and the job's size (0 and 1 otherwise). Batches given to step and eval are this rank's
 * block of the global batch: the global batch is `data_parallel` blocks of the size
 * tccrt_trainer_batch_info gives, and this rank takes block `data_position` (its coordinate on
 * the mesh axis dp). Every rank gets the global batch's loss, and eval's outputs for the whole
 * global batch. */
int tccrt_trainer_rank(const tccrt_trainer *trainer);
int tccrt_trainer_world_size(const tccrt_trainer *trainer);
int tccrt_trainer_data_parallel(const tccrt_trainer *trainer);
int tccrt_trainer_data_position(const tccrt_trainer *trainer);

/* Evaluation (no dropout, no state change). Outputs, described by tccrt_trainer_eval_info:
 * output 0 is the per-sample loss (f32, the labels' shape); with cross-entropy, output 1 is the
 * predicted class (i64, the labels' shape). */
size_t tccrt_trainer_num_eval_outputs(const tccrt_trainer *trainer);
tccrt_status tccrt_trainer_eval_info(const tccrt_trainer *trainer, size_t i, tccrt_tensor_info *info);
tccrt_status tccrt_trainer_eval(tccrt_trainer *trainer, const void *const *batch,
                                void *const *outputs);

/* The state tensors, in the artifact's order (parameters first). */
size_t tccrt_trainer_num_state(const tccrt_trainer *trainer);
tccrt_status tccrt_trainer_state_info(const tccrt_trainer *trainer, size_t i,
                                      tccrt_tensor_info *info, tccrt_state_kind *kind);
tccrt_status tccrt_trainer_get_state(const tccrt_trainer *trainer, size_t i, void *out);
tccrt_status tccrt_trainer_set_state(tccrt_trainer *trainer, size_t i, const void *data);

/* Checkpoints: one file with every state tensor, the micro-step and step counts, the seed and
 * `user_data` (opaque bytes for the caller, e.g. its epoch and position in the data); the
 * schema is include/tcc/Runtime/checkpoint.fbs. Saving writes a temporary file beside `path`
 * and renames it over `path` (never a partial checkpoint). Loading verifies the whole file and
 * checks that the checkpoint's state has the trainer's names, dtypes and shapes and its
 * grad_accumulation before changing anything; it restores the counters and the seed.
 * Distributed trainers: both are collective (every rank calls them with the same path); each
 * rank writes its blocks to `path.shard<R>of<N>`, then rank 0 writes `path` as the manifest that
 * commits them. Loading takes the blocks this rank needs from every shard (or from a whole
 * checkpoint), so the state may come from another mesh or world size; getState/setState are
 * this rank's block. */
tccrt_status tccrt_trainer_save(const tccrt_trainer *trainer, const char *path,
                                const void *user_data, size_t user_size);
tccrt_status tccrt_trainer_load(tccrt_trainer *trainer, const char *path);
/* The user_data of the last loaded checkpoint (NULL, 0 if none); owned by the trainer. */
void tccrt_trainer_user_data(const tccrt_trainer *trainer, const void **data, size_t *size);

/* CUDA device memory: the caching allocator of the GPU a CUDA program runs on. Statistics,
 * and a JSON snapshot of its segments and blocks (owned by the library, valid until the next
 * call on this thread). Errors for a CPU program. */
tccrt_status tccrt_device_allocator_stats(const tccrt_program *program,
                                          tccrt_allocator_stats *stats);
tccrt_status tccrt_device_allocator_snapshot(const tccrt_program *program, const char **json);

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
