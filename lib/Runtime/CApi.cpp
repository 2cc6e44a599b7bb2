//===- CApi.cpp - The C API of tccrt.h over tcc::rt::Program --------------===//
//
// Every entry point catches all exceptions (verification errors, bad_alloc, ...) and turns
// them into TCCRT_ERROR plus a thread-local message.
#include "CudaDriver.h"
#include "HostMemory.h"
#include "Program.h"
#include "Trainer.h"
#include "tcc/Runtime/tccrt.h"
#include "tcc/Support/MeshGeometry.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <new>
#include <string>

struct tccrt_program {
  std::unique_ptr<tcc::rt::Program> program;
  mutable std::string deviceName; // tccrt_program_device_name's storage
};

struct tccrt_trainer {
  std::unique_ptr<tcc::rt::Trainer> trainer;
};

namespace {

thread_local std::string lastError;

tccrt_status fail(std::string message) {
  lastError = std::move(message);
  return TCCRT_ERROR;
}

template <class F> tccrt_status guarded(const char *function, F &&f) {
  try {
    f();
    lastError.clear();
    return TCCRT_OK;
  } catch (const tcc::rt::OutOfMemory &e) { // the caching allocator's account (device memory)
    return fail(std::string(function) + ": " + e.what());
  } catch (const std::bad_alloc &) {
    return fail(std::string(function) + ": out of memory");
  } catch (const std::exception &e) {
    return fail(std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(std::string(function) + ": unknown error");
  }
}

tcc::rt::LoadOptions loadOptions(const tccrt_options *options) {
  tcc::rt::LoadOptions out;
  if (options) {
    out.numThreads = options->num_threads;
    out.cudaGraph = options->cuda_graph != 0;
    out.deviceOrdinal = options->device_ordinal;
  }
  return out;
}

thread_local std::string lastReason, lastSnapshot;

void fillInfo(const tcc::rt::TensorDesc &t, tccrt_tensor_info *info) {
  info->name = t.name.c_str();
  info->dtype = t.dtype;
  info->rank = (int64_t)t.shape.size();
  info->shape = t.shape.data();
  info->bytes = t.bytes;
}

} // namespace

extern "C" {

const char *tccrt_last_error(void) { return lastError.c_str(); }

// 0.2: tccrt_options gained cuda_graph and device_ordinal (CUDA artifacts), and the device
// queries below.
const char *tccrt_version(void) { return "tccrt 0.2 (artifact version 1)"; }

int tccrt_device_available(tccrt_device device, const char **reason) {
  if (device == TCCRT_DEVICE_CPU)
    return 1;
  std::string why;
  bool ok = false;
  if (device == TCCRT_DEVICE_CUDA) {
    try {
      ok = tcc::rt::cuda::cudaAvailable(&why);
    } catch (const std::exception &e) {
      why = e.what();
    }
  } else {
    why = "unknown device " + std::to_string((int)device);
  }
  if (!ok && reason) {
    lastReason = why;
    *reason = lastReason.c_str();
  }
  return ok ? 1 : 0;
}

const char *tccrt_program_device_name(const tccrt_program *program) {
  if (!program)
    return "";
  try {
    program->deviceName = program->program->deviceName();
  } catch (...) {
    program->deviceName = "?";
  }
  return program->deviceName.c_str();
}

tccrt_status tccrt_device_allocator_stats(const tccrt_program *program,
                                          tccrt_allocator_stats *stats) {
  if (!program || !stats)
    return fail(std::string("tccrt_device_allocator_stats: ") + (program ? "stats" : "program") +
                " is null");
  tcc::rt::cuda::CudaDevice *device = program->program->cudaDevice();
  if (!device)
    return fail("tccrt_device_allocator_stats: the program runs on the CPU (host memory: "
                "tccrt_allocator_get_stats)");
  return guarded("tccrt_device_allocator_stats",
                 [&] { *stats = tcc::rt::toAllocatorStats(device->allocator().stats()); });
}

tccrt_status tccrt_device_allocator_snapshot(const tccrt_program *program, const char **json) {
  if (!program || !json)
    return fail(std::string("tccrt_device_allocator_snapshot: ") + (program ? "json" : "program") +
                " is null");
  tcc::rt::cuda::CudaDevice *device = program->program->cudaDevice();
  if (!device)
    return fail("tccrt_device_allocator_snapshot: the program runs on the CPU");
  return guarded("tccrt_device_allocator_snapshot", [&] {
    lastSnapshot = device->allocator().snapshotJson();
    *json = lastSnapshot.c_str();
  });
}

tccrt_status tccrt_load_buffer(const void *data, size_t size, const tccrt_options *options,
                               tccrt_program **out) {
  if (!out)
    return fail("tccrt_load_buffer: out is null");
  *out = nullptr;
  if (!data)
    return fail("tccrt_load_buffer: data is null");
  return guarded("tccrt_load_buffer", [&] {
    auto program = tcc::rt::Program::load(data, size, loadOptions(options));
    *out = new tccrt_program{std::move(program), {}};
  });
}

tccrt_status tccrt_load_file(const char *path, const tccrt_options *options,
                             tccrt_program **out) {
  if (!out)
    return fail("tccrt_load_file: out is null");
  *out = nullptr;
  if (!path)
    return fail("tccrt_load_file: path is null");
  return guarded("tccrt_load_file", [&] {
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file)
      throw tcc::rt::Error(std::string("cannot open '") + path + "'");
    std::streamoff size = file.tellg();
    if (size < 0)
      throw tcc::rt::Error(std::string("cannot read '") + path + "'");
    std::string bytes((size_t)size, '\0');
    file.seekg(0);
    if (!file.read(bytes.data(), size))
      throw tcc::rt::Error(std::string("cannot read '") + path + "'");
    try {
      auto program = tcc::rt::Program::load(bytes.data(), bytes.size(), loadOptions(options));
      *out = new tccrt_program{std::move(program), {}};
    } catch (const tcc::rt::Error &e) {
      throw tcc::rt::Error(std::string(path) + ": " + e.what());
    }
  });
}

void tccrt_program_free(tccrt_program *program) { delete program; }

tccrt_device tccrt_program_device(const tccrt_program *program) {
  return program ? program->program->device() : TCCRT_DEVICE_CPU;
}

size_t tccrt_num_inputs(const tccrt_program *program) {
  return program ? program->program->inputs().size() : 0;
}

size_t tccrt_num_outputs(const tccrt_program *program) {
  return program ? program->program->outputs().size() : 0;
}

tccrt_status tccrt_input_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info) {
  if (!program || !info)
    return fail(std::string("tccrt_input_info: ") + (program ? "info" : "program") + " is null");
  const auto &inputs = program->program->inputs();
  if (i >= inputs.size())
    return fail("tccrt_input_info: input " + std::to_string(i) + " out of range (the program has " +
                std::to_string(inputs.size()) + " inputs)");
  fillInfo(inputs[i], info);
  return TCCRT_OK;
}

tccrt_status tccrt_output_info(const tccrt_program *program, size_t i, tccrt_tensor_info *info) {
  if (!program || !info)
    return fail(std::string("tccrt_output_info: ") + (program ? "info" : "program") + " is null");
  const auto &outputs = program->program->outputs();
  if (i >= outputs.size())
    return fail("tccrt_output_info: output " + std::to_string(i) +
                " out of range (the program has " + std::to_string(outputs.size()) + " outputs)");
  fillInfo(outputs[i], info);
  return TCCRT_OK;
}

tccrt_status tccrt_set_num_threads(tccrt_program *program, int num_threads) {
  if (!program)
    return fail("tccrt_set_num_threads: program is null");
  return guarded("tccrt_set_num_threads", [&] { program->program->setNumThreads(num_threads); });
}

tccrt_status tccrt_set_input_shapes(tccrt_program *program, const int64_t *const *shapes,
                                    const size_t *ranks) {
  if (!program)
    return fail("tccrt_set_input_shapes: program is null");
  const std::vector<tcc::rt::TensorDesc> &inputs = program->program->inputs();
  if (!inputs.empty() && (!shapes || !ranks))
    return fail(std::string("tccrt_set_input_shapes: ") + (shapes ? "ranks" : "shapes") +
                " is null");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!shapes[i] && ranks[i] > 0)
      return fail("tccrt_set_input_shapes: the shape of input " + std::to_string(i) + " is null");
  // The per-request path: the shapes already bound cost a comparison, no allocation.
  bool same = program->program->bound();
  for (size_t i = 0; i < inputs.size() && same; ++i)
    same = ranks[i] == inputs[i].shape.size() &&
           std::equal(shapes[i], shapes[i] + ranks[i], inputs[i].shape.begin());
  if (same) {
    lastError.clear();
    return TCCRT_OK;
  }
  return guarded("tccrt_set_input_shapes", [&] {
    std::vector<std::vector<int64_t>> given;
    for (size_t i = 0; i < inputs.size(); ++i)
      given.emplace_back(shapes[i], shapes[i] + ranks[i]);
    program->program->bindInputShapes(given);
  });
}

const char *tccrt_input_dim_expr(const tccrt_program *program, size_t i, size_t d) {
  if (!program || i >= program->program->inputs().size())
    return nullptr;
  const tcc::rt::TensorDesc &in = program->program->inputs()[i];
  if (d >= in.dimTexts.size() || in.dimTexts[d].empty())
    return nullptr;
  return in.dimTexts[d].c_str();
}

size_t tccrt_num_symbols(const tccrt_program *program) {
  return program ? program->program->symbolNames().size() : 0;
}

size_t tccrt_arena_bytes(const tccrt_program *program) {
  return program ? program->program->boundArenaBytes() : 0;
}

tccrt_status tccrt_symbol_info(const tccrt_program *program, size_t k, const char **name,
                               int64_t *min, int64_t *max) {
  if (!program)
    return fail("tccrt_symbol_info: program is null");
  const auto &names = program->program->symbolNames();
  if (k >= names.size())
    return fail("tccrt_symbol_info: symbol " + std::to_string(k) +
                " out of range (the program has " + std::to_string(names.size()) + ")");
  const tcc::SymbolRange &r = program->program->symbolRanges().at(names[k]);
  if (name)
    *name = names[k].c_str();
  if (min)
    *min = r.min;
  if (max)
    *max = r.max;
  return TCCRT_OK;
}

tccrt_status tccrt_run(tccrt_program *program, const void *const *inputs, void *const *outputs) {
  if (!program)
    return fail("tccrt_run: program is null");
  return guarded("tccrt_run", [&] { program->program->run(inputs, outputs); });
}

tccrt_status tccrt_run_device(tccrt_program *program, const void *const *inputs,
                              void *const *outputs) {
  if (!program)
    return fail("tccrt_run_device: program is null");
  return guarded("tccrt_run_device", [&] { program->program->runOnDevice(inputs, outputs); });
}

void *tccrt_program_cuda_stream(const tccrt_program *program) {
  return program ? program->program->cudaStream() : nullptr;
}

// ---- Profiling -----------------------------------------------------------------------------

tccrt_status tccrt_set_profiling(tccrt_program *program, int enabled) {
  if (!program)
    return fail("tccrt_set_profiling: program is null");
  return guarded("tccrt_set_profiling", [&] { program->program->setProfiling(enabled != 0); });
}

size_t tccrt_num_launches(const tccrt_program *program) {
  return program ? program->program->steps().size() : 0;
}

tccrt_status tccrt_get_launch_profile(const tccrt_program *program, size_t i,
                                      tccrt_launch_profile *out) {
  if (!program || !out)
    return fail("tccrt_get_launch_profile: program or out is null");
  const tcc::rt::Program &p = *program->program;
  if (i >= p.steps().size())
    return fail("tccrt_get_launch_profile: launch " + std::to_string(i) + " is out of range (" +
                std::to_string(p.steps().size()) + " launches)");
  *out = tccrt_launch_profile{};
  out->kind = p.stepKinds()[i].c_str();
  out->name = p.stepNames()[i].c_str();
  out->nodes = p.stepNodes()[i].c_str();
  if (i < p.stepProfiles().size()) {
    const tcc::rt::Program::StepProfile &s = p.stepProfiles()[i];
    out->calls = s.calls;
    out->total_seconds = s.totalSeconds;
    out->last_start_seconds = s.lastStartSeconds;
    out->last_seconds = s.lastSeconds;
  }
  return TCCRT_OK;
}

// ---- Training ------------------------------------------------------------------------------

int tccrt_is_training(const tccrt_program *program) {
  return program && program->program->training() ? 1 : 0;
}

const char *tccrt_training_config(const tccrt_program *program) {
  return program && program->program->training() ? program->program->training()->config.c_str()
                                                  : "";
}

uint64_t tccrt_rng_key(uint64_t seed, uint64_t micro_step) {
  return tcc::rt::rngKey(seed, micro_step);
}

tccrt_status tccrt_trainer_create(tccrt_program *program, uint64_t seed, tccrt_trainer **out) {
  if (!out)
    return fail("tccrt_trainer_create: out is null");
  *out = nullptr;
  if (!program)
    return fail("tccrt_trainer_create: program is null");
  if (!program->program->training())
    return fail("tccrt_trainer_create: the program is not a training artifact (make one with "
                "tcc compile --train)");
  return guarded("tccrt_trainer_create", [&] {
    *out = new tccrt_trainer{std::make_unique<tcc::rt::Trainer>(*program->program, seed)};
  });
}

void tccrt_trainer_free(tccrt_trainer *trainer) { delete trainer; }

size_t tccrt_trainer_num_batch_tensors(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->batch().size() : 0;
}

tccrt_status tccrt_trainer_batch_info(const tccrt_trainer *trainer, size_t i,
                                      tccrt_tensor_info *info) {
  if (!trainer || !info)
    return fail(std::string("tccrt_trainer_batch_info: ") + (trainer ? "info" : "trainer") +
                " is null");
  const auto &batch = trainer->trainer->batch();
  if (i >= batch.size())
    return fail("tccrt_trainer_batch_info: batch tensor " + std::to_string(i) +
                " out of range (the model takes " + std::to_string(batch.size()) + ")");
  fillInfo(batch[i], info);
  return TCCRT_OK;
}

tccrt_status tccrt_trainer_step(tccrt_trainer *trainer, const void *const *batch,
                                float learning_rate, float *loss) {
  if (!trainer)
    return fail("tccrt_trainer_step: trainer is null");
  return guarded("tccrt_trainer_step",
                 [&] { trainer->trainer->step(batch, learning_rate, loss); });
}

int tccrt_trainer_grad_accumulation(const tccrt_trainer *trainer) {
  return trainer ? (int)trainer->trainer->training().gradAccumulation : 0;
}

uint64_t tccrt_trainer_micro_steps(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->microSteps() : 0;
}

uint64_t tccrt_trainer_steps(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->steps() : 0;
}

uint64_t tccrt_trainer_seed(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->seed() : 0;
}

int tccrt_trainer_rank(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->training().rank : 0;
}

int tccrt_trainer_world_size(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->training().worldSize : 1;
}

namespace {
/// The mesh axis the batch is split over ("dp"), or -1.
int dataAxis(const tcc::rt::TrainingDesc &t) {
  for (size_t i = 0; i < t.meshAxes.size() && i < t.meshSizes.size(); ++i)
    if (t.meshAxes[i] == "dp")
      return (int)i;
  return -1;
}
} // namespace

int tccrt_trainer_data_parallel(const tccrt_trainer *trainer) {
  if (!trainer)
    return 1;
  const auto &t = trainer->trainer->training();
  int axis = dataAxis(t);
  return axis < 0 ? 1 : (int)t.meshSizes[axis];
}

int tccrt_trainer_data_position(const tccrt_trainer *trainer) {
  if (!trainer)
    return 0;
  const auto &t = trainer->trainer->training();
  int axis = dataAxis(t);
  if (axis < 0)
    return 0;
  return (int)tcc::mesh::coordinates(t.meshSizes, t.rank)[axis];
}

size_t tccrt_trainer_num_eval_outputs(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->evalOutputs().size() : 0;
}

tccrt_status tccrt_trainer_eval_info(const tccrt_trainer *trainer, size_t i,
                                     tccrt_tensor_info *info) {
  if (!trainer || !info)
    return fail(std::string("tccrt_trainer_eval_info: ") + (trainer ? "info" : "trainer") +
                " is null");
  const auto &outputs = trainer->trainer->evalOutputs();
  if (i >= outputs.size())
    return fail("tccrt_trainer_eval_info: eval output " + std::to_string(i) +
                " out of range (there are " + std::to_string(outputs.size()) + ")");
  fillInfo(outputs[i], info);
  return TCCRT_OK;
}

tccrt_status tccrt_trainer_eval(tccrt_trainer *trainer, const void *const *batch,
                                void *const *outputs) {
  if (!trainer)
    return fail("tccrt_trainer_eval: trainer is null");
  return guarded("tccrt_trainer_eval", [&] { trainer->trainer->eval(batch, outputs); });
}

size_t tccrt_trainer_num_state(const tccrt_trainer *trainer) {
  return trainer ? trainer->trainer->training().state.size() : 0;
}

tccrt_status tccrt_trainer_state_info(const tccrt_trainer *trainer, size_t i,
                                      tccrt_tensor_info *info, tccrt_state_kind *kind) {
  if (!trainer)
    return fail("tccrt_trainer_state_info: trainer is null");
  const auto &state = trainer->trainer->training().state;
  if (i >= state.size())
    return fail("tccrt_trainer_state_info: state " + std::to_string(i) +
                " out of range (there are " + std::to_string(state.size()) + ")");
  if (info)
    fillInfo(state[i].tensor, info);
  if (kind)
    *kind = state[i].kind;
  return TCCRT_OK;
}

tccrt_status tccrt_trainer_get_state(const tccrt_trainer *trainer, size_t i, void *out) {
  if (!trainer)
    return fail("tccrt_trainer_get_state: trainer is null");
  return guarded("tccrt_trainer_get_state", [&] { trainer->trainer->getState(i, out); });
}

tccrt_status tccrt_trainer_set_state(tccrt_trainer *trainer, size_t i, const void *data) {
  if (!trainer)
    return fail("tccrt_trainer_set_state: trainer is null");
  return guarded("tccrt_trainer_set_state", [&] { trainer->trainer->setState(i, data); });
}

tccrt_status tccrt_trainer_save(const tccrt_trainer *trainer, const char *path,
                                const void *user_data, size_t user_size) {
  if (!trainer || !path)
    return fail(std::string("tccrt_trainer_save: ") + (trainer ? "path" : "trainer") +
                " is null");
  return guarded("tccrt_trainer_save",
                 [&] { trainer->trainer->save(path, user_data, user_size); });
}

tccrt_status tccrt_trainer_load(tccrt_trainer *trainer, const char *path) {
  if (!trainer || !path)
    return fail(std::string("tccrt_trainer_load: ") + (trainer ? "path" : "trainer") +
                " is null");
  return guarded("tccrt_trainer_load", [&] { trainer->trainer->load(path); });
}

void tccrt_trainer_user_data(const tccrt_trainer *trainer, const void **data, size_t *size) {
  const std::vector<uint8_t> *user = trainer ? &trainer->trainer->userData() : nullptr;
  bool some = user && !user->empty();
  if (data)
    *data = some ? user->data() : nullptr;
  if (size)
    *size = some ? user->size() : 0;
}

// ---- Host memory -----------------------------------------------------------------------------

void *tccrt_alloc(size_t bytes) {
  try {
    return tcc::rt::hostAllocate(bytes);
  } catch (const std::bad_alloc &) {
    fail("tccrt_alloc: out of memory (" + std::to_string(bytes) + " bytes)");
    return nullptr;
  } catch (const std::exception &e) {
    fail(std::string("tccrt_alloc: ") + e.what());
    return nullptr;
  }
}

void tccrt_free(void *ptr) { tcc::rt::hostFree(ptr); }

void tccrt_allocator_get_stats(tccrt_allocator_stats *stats) {
  if (stats)
    *stats = tcc::rt::hostAllocatorStats();
}

void tccrt_allocator_empty_cache(void) { tcc::rt::hostEmptyCache(); }

} // extern "C"
