//===- tccrt.hpp - A thin header-only C++ wrapper over the tccrt C API ----===//
//
//   tccrt::Program program = tccrt::Program::fromFile("model.tcc");
//   std::vector<tccrt::Tensor> inputs = program.makeInputs();   // tccrt_alloc'd, uninitialised
//   inputs[0].data<float>()[0] = 1.0f;
//   std::vector<tccrt::Tensor> outputs = program.run(inputs);
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

class Program {
public:
  /// numThreads: CPU threads for kernels and library calls; 0 = all cores.
  static Program fromFile(const std::string &path, int numThreads = 0) {
    tccrt_options options{numThreads};
    tccrt_program *p = nullptr;
    check(tccrt_load_file(path.c_str(), &options, &p));
    return Program(p);
  }
  static Program fromBuffer(const void *data, size_t size, int numThreads = 0) {
    tccrt_options options{numThreads};
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
  size_t numInputs() const { return tccrt_num_inputs(program_); }
  size_t numOutputs() const { return tccrt_num_outputs(program_); }
  TensorInfo input(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_input_info(program_, i, &raw));
    return convert(raw);
  }
  TensorInfo output(size_t i) const {
    tccrt_tensor_info raw;
    check(tccrt_output_info(program_, i, &raw));
    return convert(raw);
  }
  void setNumThreads(int numThreads) { check(tccrt_set_num_threads(program_, numThreads)); }

  /// Input tensors of the program's dtypes and shapes (contents uninitialised).
  std::vector<Tensor> makeInputs() const {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < numInputs(); ++i)
      tensors.emplace_back(input(i));
    return tensors;
  }

  /// Runs on `inputs` (checked against the program's inputs) and returns new output tensors.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) {
    if (inputs.size() != numInputs())
      throw Error("tccrt::Program::run: " + std::to_string(inputs.size()) +
                  " inputs given, the program takes " + std::to_string(numInputs()));
    std::vector<const void *> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      TensorInfo want = input(i);
      if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
        throw Error("tccrt::Program::run: input " + std::to_string(i) + " ('" + want.name +
                    "') has the wrong dtype or shape");
      in.push_back(inputs[i].data());
    }
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
  static TensorInfo convert(const tccrt_tensor_info &raw) {
    return TensorInfo{raw.name ? raw.name : "", raw.dtype,
                      std::vector<int64_t>(raw.shape, raw.shape + raw.rank), raw.bytes};
  }

  tccrt_program *program_ = nullptr;
};

} // namespace tccrt
