//===- Execute.cpp - Compiling loaded models and running them on a device -===//
#include "Execute.h"

#include "tcc/Runtime/tccrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstring>
#include <fstream>

namespace tcc {

namespace {

[[noreturn]] void runtimeError(const std::string &what) {
  throw Error(what + ": " + tccrt_last_error());
}

TensorSpec specOf(const tccrt_tensor_info &info) {
  return {info.name, static_cast<DType>(info.dtype), Shape(info.shape, info.shape + info.rank)};
}

} // namespace

RuntimeProgram RuntimeProgram::fromBytes(const std::vector<uint8_t> &artifact, int numThreads) {
  tccrt_options options{numThreads};
  tccrt_program *p = nullptr;
  if (tccrt_load_buffer(artifact.data(), artifact.size(), &options, &p) != TCCRT_OK)
    runtimeError("cannot load the compiled program");
  return RuntimeProgram(p);
}

RuntimeProgram RuntimeProgram::fromFile(const std::string &path, int numThreads) {
  tccrt_options options{numThreads};
  tccrt_program *p = nullptr;
  if (tccrt_load_file(path.c_str(), &options, &p) != TCCRT_OK)
    runtimeError("cannot load '" + path + "'");
  return RuntimeProgram(p);
}

RuntimeProgram::~RuntimeProgram() {
  if (program_)
    tccrt_program_free(program_);
}

std::vector<TensorSpec> RuntimeProgram::inputs() const {
  std::vector<TensorSpec> out;
  for (size_t i = 0, n = tccrt_num_inputs(program_); i < n; ++i) {
    tccrt_tensor_info info;
    if (tccrt_input_info(program_, i, &info) != TCCRT_OK)
      runtimeError("input " + std::to_string(i));
    out.push_back(specOf(info));
  }
  return out;
}

std::vector<TensorSpec> RuntimeProgram::outputs() const {
  std::vector<TensorSpec> out;
  for (size_t i = 0, n = tccrt_num_outputs(program_); i < n; ++i) {
    tccrt_tensor_info info;
    if (tccrt_output_info(program_, i, &info) != TCCRT_OK)
      runtimeError("output " + std::to_string(i));
    out.push_back(specOf(info));
  }
  return out;
}

std::vector<Tensor> RuntimeProgram::run(const std::vector<Tensor> &inputs) {
  std::vector<TensorSpec> specs = this->inputs();
  if (inputs.size() != specs.size())
    throw Error("the program takes " + std::to_string(specs.size()) + " input(s), " +
                std::to_string(inputs.size()) + " given");
  std::vector<const void *> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != specs[i].dtype || inputs[i].shape() != specs[i].shape)
      throw Error("input " + std::to_string(i) + " ('" + specs[i].name + "') is " +
                  inputs[i].typeString() + ", the program was compiled for " +
                  shapeToString(specs[i].shape) + " " + dtypeName(specs[i].dtype));
    in.push_back(inputs[i].raw());
  }
  std::vector<Tensor> outputs;
  std::vector<void *> out;
  for (const TensorSpec &s : this->outputs()) {
    outputs.emplace_back(s.dtype, s.shape);
    out.push_back(outputs.back().raw());
  }
  runRaw(in, out);
  return outputs;
}

void RuntimeProgram::runRaw(const std::vector<const void *> &inputs,
                            const std::vector<void *> &outputs) {
  if (tccrt_run(program_, inputs.data(), outputs.data()) != TCCRT_OK)
    runtimeError("run failed");
}

CompiledModel compileLoaded(LoadedModel &model, size_t givenInputs, CompileOptions options,
                            bool randomValuesRun) {
  const auto &names = model.imported.inputNames;
  std::vector<std::string> arbitrary;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!model.imported.specializedInputs.count(names[i]))
      continue;
    if (i >= givenInputs && !randomValuesRun)
      arbitrary.push_back(names[i]);
    else
      options.specializedInputs[names[i]] = model.inputs[i];
  }
  if (!arbitrary.empty()) {
    std::string list;
    for (const auto &n : arbitrary)
      list += (list.empty() ? "'" : ", '") + n + "'";
    throw Error("the model needs the value(s) of input(s) " + list +
                " at compile time (e.g. a shape or a count computed from them): pass them with "
                "--inputs; the program will then accept only those values");
  }
  options.inputNames = model.imported.inputNames;
  options.outputNames = model.imported.outputNames;
  return compileModule(*model.imported.module, options);
}

std::vector<Tensor> execute(LoadedModel &model, size_t givenInputs, const std::string &device,
                            const CompileOptions &compile, int numThreads) {
  if (device == "interp")
    return interpret(model);
  CompileOptions options = compile;
  options.device = device;
  CompiledModel compiled = compileLoaded(model, givenInputs, options, /*randomValuesRun=*/true);
  RuntimeProgram program = RuntimeProgram::fromBytes(compiled.artifact, numThreads);
  return program.run(model.inputs);
}

bool isArtifactFile(const std::string &path) {
  // By name too, so that a damaged artifact gets the runtime's diagnosis.
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".tcc") == 0)
    return true;
  std::ifstream f(path, std::ios::binary);
  char header[8] = {};
  if (!f.read(header, sizeof header))
    return false;
  return std::memcmp(header + 4, "TCCA", 4) == 0;
}

} // namespace tcc
