//===- tccrt.hpp - A thin header-only C++ wrapper over the tccrt C API ----===//
//
//   tccrt::Program program = tccrt::Program::fromFile("model.tcc");
//   std::vector<tccrt::Tensor> inputs = program.makeInputs();   // tccrt_alloc'd, uninitialised
//   inputs[0].data<float>()[0] = 1.0f;
//   std::vector<tccrt::Tensor> outputs = program.run(inputs);
//
//   // A symbolic program (compiled with size ranges): inputs of the sizes of this run.
//   std::vector<tccrt::Tensor> batch = program.makeInputs({{4, 128}});   // binds batch, seq
//   outputs = program.run(batch);                 // (run binds to its inputs' shapes too)
//
//   tccrt_options options{};                                 // a CUDA artifact, graphs on
//   options.cuda_graph = 1;
//   tccrt::Program gpu = tccrt::Program::fromFile("model-cuda.tcc", options);
//   std::string where = gpu.deviceName();          // "cuda:0 NVIDIA H100 ... (sm_90, cubin)"
//
//   tccrt::Trainer trainer(training_program, /*seed=*/1);    // a `tcc compile --train` artifact
//   std::vector<tccrt::Tensor> batch = trainer.makeBatch();  // fill, then
//   float loss = trainer.step(batch, /*learning_rate=*/0.01f);
//
// Failures throw tccrt::Error (a std::runtime_error) carrying tccrt_last_error(). Program and
// Tensor are move-only RAII owners of a tccrt_program and of tccrt_alloc'd host memory.
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tccrt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(tccrt_status status) {
  if (status != TCCRT_OK)
    throw Error(tccrt_last_error());
}

inline size_t dtypeSize(tccrt_dtype d) {
  static constexpr size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  return (unsigned)d < sizeof(sizes) / sizeof(sizes[0]) ? sizes[d] : 0;
}

/// Whether artifacts for `device` can run in this process; if not, *reason (when given) says why.
inline bool deviceAvailable(tccrt_device device, std::string *reason = nullptr) {
  const char *why = nullptr;
  bool ok = tccrt_device_available(device, &why) != 0;
  if (!ok && reason)
    *reason = why ? why : "";
  return ok;
}

struct TensorInfo {
  std::string name;
  tccrt_dtype dtype = TCCRT_F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

/// A contiguous host tensor in memory from tccrt_alloc (64-byte aligned).
class Tensor {
public:
  Tensor() = default;
  Tensor(tccrt_dtype dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    bytes_ = dtypeSize(dtype);
    for (int64_t s : shape_) {
      if (s < 0)
        throw Error("tccrt::Tensor: negative dim");
      bytes_ *= (size_t)s;
    }
    data_ = tccrt_alloc(bytes_);
    if (!data_)
      throw Error(tccrt_last_error());
  }
  explicit Tensor(const TensorInfo &info) : Tensor(info.dtype, info.shape) {}
  Tensor(Tensor &&o) noexcept { *this = std::move(o); }
  Tensor &operator=(Tensor &&o) noexcept {
    if (this != &o) {
      tccrt_free(data_);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      dtype_ = o.dtype_;
      shape_ = std::move(o.shape_);
    }
    return *this;
  }
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
  ~Tensor() { tccrt_free(data_); }

  tccrt_dtype dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  size_t bytes() const { return bytes_; }
  size_t numElements() const { return dtypeSize(dtype_) ? bytes_ / dtypeSize(dtype_) : 0; }
  void *data() { return data_; }
  const void *data() const { return data_; }
  template <class T> T *data() { return static_cast<T *>(data_); }
  template <class T> const T *data() const { return static_cast<const T *>(data_); }

private:
  void *data_ = nullptr;
  size_t bytes_ = 0;
  tccrt_dtype dtype_ = TCCRT_F32;
  std::vector<int64_t> shape_;
};

namespace detail {
inline TensorInfo convert(const tccrt_tensor_info &raw) {
  return TensorInfo{raw.name ? raw.name : "", raw.dtype,
                    std::vector<int64_t>(raw.shape, raw.shape + raw.rank), raw.bytes};
}
} // namespace detail

/// The data pointers of `tensors` after checking their count, dtypes and shapes against `want`.
inline std::vector<const void *> checkedPointers(const std::vector<Tensor> &tensors,
                                                 const std::vector<TensorInfo> &want,
                                                 const char *function, const char *what) {
  if (tensors.size() != want.size())
    throw Error(std::string(function) + ": " + std::to_string(tensors.size()) + " " + what +
                "s given, " + std::to_string(want.size()) + " expected");
  std::vector<const void *> pointers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != want[i].dtype || tensors[i].shape() != want[i].shape)
      throw Error(std::string(function) + ": " + what + " " + std::to_string(i) + " ('" +
                  want[i].name + "') has the wrong dtype or shape");
    pointers.push_back(tensors[i].data());
  }
  return pointers;
}

class Program {
public:
  /// numThreads: CPU threads for kernels and library calls; 0 = all cores.
  static Program fromFile(const std::string &path, int numThreads = 0) {
    tccrt_options options{};
    options.num_threads = numThreads;
    return fromFile(path, options);
  }
  static Program fromBuffer(const void *data, size_t size, int numThreads = 0) {
    tccrt_options options{};
    options.num_threads = numThreads;
    return fromBuffer(data, size, options);
  }
  /// With every option (CUDA artifacts: cuda_graph, device_ordinal).
  static Program fromFile(const std::string &path, const tccrt_options &options) {
    tccrt_program *p = nullptr;
    check(tccrt_load_file(path.c_str(), &options, &p));
    return Program(p);
  }
  static Program fromBuffer(const void *data, size_t size, const tccrt_options &options) {
    tccrt_program *p = nullptr;
    check(tccrt_load_buffer(data, size, &options, &p));
    return Program(p);
  }

  Program(Program &&o) noexcept : program_(std::exchange(o.program_, nullptr)) {}
  Program &operator=(Program &&o) noexcept {
    if (this != &o) {
      tccrt_program_free(program_);
      program_ = std::exchange(o.program_, nullptr);
    }
    return *this;
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() { tccrt_program_free(program_); }

  tccrt_program *get() const { return program_; }
  tccrt_device device() const { return tccrt_program_device(program_); }
  /// "cpu (16 threads)", "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, cubin)", ...
  std::string deviceName() const { return tccrt_program_device_name(program_); }
  /// CUDA programs: their GPU's caching allocator (throws for a CPU program).
  tccrt_allocator_stats deviceAllocatorStats() const {
    tccrt_allocator_stats stats{};
    check(tccrt_device_allocator_stats(program_, &stats));
    return stats;
  }
  std::string deviceAllocatorSnapshot() const {
    const char *json = nullptr;
    check(tccrt_device_allocator_snapshot(program_, &json));
    return json ? json : "";
  }
  size_t numInputs() const { return tccrt_num_inputs(program_); }
  size_t numOutputs() const { return tccrt_num_outputs(program_); }
  TensorInfo input(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_input_info(program_, i, &raw));
    return detail::convert(raw);
  }
  TensorInfo output(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_output_info(program_, i, &raw));
    return detail::convert(raw);
  }
  bool isTraining() const { return tccrt_is_training(program_) != 0; }
  std::string trainingConfig() const { return tccrt_training_config(program_); }
  void setNumThreads(int numThreads) { check(tccrt_set_num_threads(program_, numThreads)); }
  /// Symbolic programs (tccrt_set_input_shapes): binds the sizes of the next runs to these
  /// input shapes; input() and output() then give the bound shapes.
  void setInputShapes(const std::vector<std::vector<int64_t>> &shapes) {
    if (shapes.size() != numInputs()) // (the C API reads one shape per input)
      throw Error("tccrt::Program::setInputShapes: " + std::to_string(shapes.size()) +
                  " shapes given, the program has " + std::to_string(numInputs()) + " inputs");
    std::vector<const int64_t *> data;
    std::vector<size_t> ranks;
    for (const auto &s : shapes) {
      data.push_back(s.data());
      ranks.push_back(s.size());
    }
    check(tccrt_set_input_shapes(program_, data.data(), ranks.data()));
  }
  /// Input i's dims as size expressions ("batch", "2*seq"), "" where a dim is static.
  std::vector<std::string> inputDims(size_t i) const {
    std::vector<std::string> dims;
    for (size_t d = 0; d < input(i).shape.size(); ++d) {
      const char *e = tccrt_input_dim_expr(program_, i, d);
      dims.push_back(e ? e : "");
    }
    return dims;
  }
  struct SymbolInfo {
    std::string name;
    int64_t min = 0, max = 0; // inclusive
  };
  /// The size symbols (none for a static program).
  std::vector<SymbolInfo> symbols() const {
    std::vector<SymbolInfo> out(numSymbols());
    for (size_t k = 0; k < out.size(); ++k) {
      const char *name = nullptr;
      check(tccrt_symbol_info(program_, k, &name, &out[k].min, &out[k].max));
      out[k].name = name ? name : "";
    }
    return out;
  }
  size_t numSymbols() const { return tccrt_num_symbols(program_); }
  /// tccrt_arena_bytes: the arena of the current binding (a symbolic program's).
  size_t arenaBytes() const { return tccrt_arena_bytes(program_); }
  bool isSymbolic() const { return numSymbols() > 0; }

  /// Input tensors of the program's dtypes and shapes (contents uninitialised).
  std::vector<Tensor> makeInputs() const {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < numInputs(); ++i) {
      TensorInfo info = input(i);
      for (int64_t d : info.shape)
        if (d < 0) // an unbound symbolic program
          throw Error("tccrt::Program::makeInputs: input '" + info.name +
                      "' has symbolic dims: give the input shapes (makeInputs(shapes))");
      tensors.emplace_back(info);
    }
    return tensors;
  }

  /// Input tensors of `shapes` (a symbolic program's sizes are bound to them first).
  std::vector<Tensor> makeInputs(const std::vector<std::vector<int64_t>> &shapes) {
    setInputShapes(shapes);
    return makeInputs();
  }

  /// Runs on `inputs` (checked against the program's inputs; a symbolic program's sizes are
  /// bound to their shapes first) and returns new output tensors.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) {
    if (isSymbolic() && inputs.size() == numInputs()) {
      std::vector<std::vector<int64_t>> shapes;
      for (const Tensor &t : inputs)
        shapes.push_back(t.shape());
      setInputShapes(shapes);
    }
    std::vector<TensorInfo> want;
    for (size_t i = 0; i < numInputs(); ++i)
      want.push_back(input(i));
    std::vector<const void *> in = checkedPointers(inputs, want, "tccrt::Program::run", "input");
    std::vector<Tensor> outputs;
    std::vector<void *> out;
    for (size_t i = 0; i < numOutputs(); ++i) {
      outputs.emplace_back(output(i));
      out.push_back(outputs.back().data());
    }
    run(in.data(), out.data());
    return outputs;
  }

  /// Runs on caller memory (contiguous tensors of the sizes input()/output() give).
  void run(const void *const *inputs, void *const *outputs) {
    check(tccrt_run(program_, inputs, outputs));
  }

private:
  explicit Program(tccrt_program *p) : program_(p) {}

  tccrt_program *program_ = nullptr;
};

/// Trains with a training artifact (tccrt_trainer_*). The Program must outlive the Trainer.
class Trainer {
public:
  Trainer(Program &program, uint64_t seed) {
    check(tccrt_trainer_create(program.get(), seed, &trainer_));
  }
  Trainer(Trainer &&o) noexcept : trainer_(std::exchange(o.trainer_, nullptr)) {}
  Trainer &operator=(Trainer &&o) noexcept {
    if (this != &o) {
      tccrt_trainer_free(trainer_);
      trainer_ = std::exchange(o.trainer_, nullptr);
    }
    return *this;
  }
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;
  ~Trainer() { tccrt_trainer_free(trainer_); }

  tccrt_trainer *get() const { return trainer_; }

  size_t numBatchTensors() const { return tccrt_trainer_num_batch_tensors(trainer_); }
  TensorInfo batchInfo(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_trainer_batch_info(trainer_, i, &raw));
    return detail::convert(raw);
  }
  /// Batch tensors of the model's dtypes and shapes (contents uninitialised).
  std::vector<Tensor> makeBatch() const {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < numBatchTensors(); ++i)
      tensors.emplace_back(batchInfo(i));
    return tensors;
  }

  /// One micro-batch; returns its loss.
  float step(const std::vector<Tensor> &batch, float learningRate) {
    std::vector<const void *> in = checkedPointers(batch, batchInfos(), "tccrt::Trainer::step",
                                                   "batch tensor");
    float loss = 0;
    check(tccrt_trainer_step(trainer_, in.data(), learningRate, &loss));
    return loss;
  }
  int gradAccumulation() const { return tccrt_trainer_grad_accumulation(trainer_); }
  uint64_t microSteps() const { return tccrt_trainer_micro_steps(trainer_); }
  uint64_t steps() const { return tccrt_trainer_steps(trainer_); }
  uint64_t seed() const { return tccrt_trainer_seed(trainer_); }
  int rank() const { return tccrt_trainer_rank(trainer_); }
  int worldSize() const { return tccrt_trainer_world_size(trainer_); }
  int dataParallel() const { return tccrt_trainer_data_parallel(trainer_); }
  int dataPosition() const { return tccrt_trainer_data_position(trainer_); }

  size_t numEvalOutputs() const { return tccrt_trainer_num_eval_outputs(trainer_); }
  TensorInfo evalInfo(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_trainer_eval_info(trainer_, i, &raw));
    return detail::convert(raw);
  }
  std::vector<Tensor> eval(const std::vector<Tensor> &batch) {
    std::vector<const void *> in = checkedPointers(batch, batchInfos(), "tccrt::Trainer::eval",
                                                   "batch tensor");
    std::vector<Tensor> outputs;
    std::vector<void *> out;
    for (size_t i = 0; i < numEvalOutputs(); ++i) {
      outputs.emplace_back(evalInfo(i));
      out.push_back(outputs.back().data());
    }
    check(tccrt_trainer_eval(trainer_, in.data(), out.data()));
    return outputs;
  }

  size_t numState() const { return tccrt_trainer_num_state(trainer_); }
  TensorInfo stateInfo(size_t i, tccrt_state_kind *kind = nullptr) const {
    tccrt_tensor_info raw;
    check(tccrt_trainer_state_info(trainer_, i, &raw, kind));
    return detail::convert(raw);
  }
  Tensor getState(size_t i) const {
    Tensor t(stateInfo(i));
    check(tccrt_trainer_get_state(trainer_, i, t.data()));
    return t;
  }
  void setState(size_t i, const Tensor &value) {
    TensorInfo want = stateInfo(i);
    if (value.dtype() != want.dtype || value.shape() != want.shape)
      throw Error("tccrt::Trainer::setState: state " + std::to_string(i) + " ('" + want.name +
                  "') has another dtype or shape");
    check(tccrt_trainer_set_state(trainer_, i, value.data()));
  }

  void save(const std::string &path, const std::vector<uint8_t> &userData = {}) const {
    check(tccrt_trainer_save(trainer_, path.c_str(), userData.data(), userData.size()));
  }
  void load(const std::string &path) { check(tccrt_trainer_load(trainer_, path.c_str())); }
  std::vector<uint8_t> userData() const {
    const void *data = nullptr;
    size_t size = 0;
    tccrt_trainer_user_data(trainer_, &data, &size);
    const uint8_t *bytes = static_cast<const uint8_t *>(data);
    return std::vector<uint8_t>(bytes, bytes + size);
  }

private:
  std::vector<TensorInfo> batchInfos() const {
    std::vector<TensorInfo> infos;
    for (size_t i = 0; i < numBatchTensors(); ++i)
      infos.push_back(batchInfo(i));
    return infos;
  }

  tccrt_trainer *trainer_ = nullptr;
};

} // namespace tccrt
