/*===- tcc.h - The compiler's C API (libtcc) --------------------------------===
 *
 * Compiles an ONNX model, given as a file or as its serialized bytes, into a tcc artifact: the
 * bytes `tcc compile` writes, which libtccrt (tccrt.h) loads and runs. Plain C: the Python
 * package (python/) and other languages' bindings call it. libtcc links the compiler (MLIR,
 * ONNX, protobuf); deployments that only run artifacts need libtccrt alone.
 *
 * Options are "key=value" strings, the long options of `tcc compile` without their leading
 * dashes, with '_' or '-' between words:
 *   device=cpu|cuda|auto        (default cpu; auto: cuda where libtccrt finds a usable GPU)
 *   precision=fp32|bf16|fp16    layout=auto|nhwc|nchw       arch=sm_80,sm_90
 *   input_shape=NAME=D0xD1...   (repeatable: fixes a dynamic input's shape)
 *   cache=0|1  cache_dir=DIR  jobs=N  dump_dir=DIR  explain_fusion=0|1  explain_layout=0|1
 *   progress=0|1                (a progress line on stderr while kernels compile; default 0)
 *   train=0|1 and, for training artifacts, loss, optimizer, batch_size, momentum,
 *   weight_decay, beta1, beta2, eps, nesterov, clip_grad_norm, label_smoothing,
 *   grad_accumulation, loss_scale, loss_scale_growth, remat, memory_budget, trainable and
 *   freeze (repeatable), mesh, zero, bucket_mb, sharding_file, micro_batches,
 *   pipeline_schedule, explain_sharding: as `tcc compile --train --help` describes them.
 * An unknown key, a malformed value or an option that does not apply is an error naming it.
 *
 * Errors: a function returning tcc_status sets a thread-local message on failure, read with
 * tcc_last_error(). Nothing aborts on bad input: a model tcc cannot compile is an error listing
 * every unsupported operator (with the node) or the stage that failed.
 *===--------------------------------------------------------------------------===*/
#ifndef TCC_H
#define TCC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tcc_status { TCC_OK = 0, TCC_ERROR = 1 } tcc_status;

typedef struct tcc_compiled tcc_compiled;

/* The message of the last failed call on this thread ("" if none). */
const char *tcc_last_error(void);

/* The compiler's version, e.g. "tcc 0.2 (artifact version 1)". */
const char *tcc_version(void);

/* Compiles the ONNX model at `path` (external data relative to its folder). */
tcc_status tcc_compile_file(const char *path, const char *const *options, size_t num_options,
                            tcc_compiled **out);

/* Compiles a model given as its serialized bytes; external data, if any, is read relative to
 * `base_dir` (NULL: the current directory). The bytes are not kept. */
tcc_status tcc_compile_buffer(const void *data, size_t size, const char *base_dir,
                              const char *const *options, size_t num_options,
                              tcc_compiled **out);

/* The artifact's bytes (owned by `compiled`): give them to tccrt_load_buffer, or write them to
 * a .tcc file. */
const void *tcc_compiled_artifact(const tcc_compiled *compiled, size_t *size);

/* The compile report as JSON (owned by `compiled`): kernels, library calls, arena and
 * constant bytes, compile time, and per-entry, CUDA and distributed details (`tcc compile
 * --report`'s format). */
const char *tcc_compiled_report(const tcc_compiled *compiled);

void tcc_compiled_free(tcc_compiled *compiled);

/* Trains `model` (an .onnx model, compiled for training with the options given, or a training
 * artifact) on the data folder `data_dir`, as `tcc train MODEL --data DIR` does: IDX or .npy
 * images and labels, shuffled epochs, the test set evaluated after each, a progress bar on
 * stderr. Options: those of tcc_compile_file (train=1 implied) and the run's: lr (required),
 * epochs, seed, threads, max_steps, shuffle=0|1, metrics=FILE.json (per-epoch losses,
 * accuracy, time), step_log=FILE.json, save_model=OUT.onnx, checkpoint=DIR, resume=DIR,
 * collective_timeout=SECONDS. In one process (an artifact compiled with a mesh runs under
 * mpirun, one process per rank). */
tcc_status tcc_train(const char *model, const char *data_dir, const char *const *options,
                     size_t num_options);

#ifdef __cplusplus
}
#endif

#endif /* TCC_H */
