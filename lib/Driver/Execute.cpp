//===- Execute.cpp - Compiling loaded models and running them on a device -===//
#include "tcc/Driver/Execute.h"

#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Runtime/artifact_generated.h"
#include "tcc/Runtime/tccrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

namespace tcc {

namespace {

[[noreturn]] void runtimeError(const std::string &what) {
  throw Error(what + ": " + tccrt_last_error());
}

TensorSpec specOf(const tccrt_tensor_info &info) {
  return {info.name, static_cast<DType>(info.dtype), Shape(info.shape, info.shape + info.rank)};
}

} // namespace

static tccrt_options tccrtOptions(const RunOptions &options) {
  tccrt_options o{};
  o.num_threads = options.threads;
  o.cuda_graph = options.cudaGraph ? 1 : 0;
  o.device_ordinal = options.deviceOrdinal;
  return o;
}

RuntimeProgram RuntimeProgram::fromBytes(const std::vector<uint8_t> &artifact,
                                         const RunOptions &run) {
  tccrt_options options = tccrtOptions(run);
  tccrt_program *p = nullptr;
  if (tccrt_load_buffer(artifact.data(), artifact.size(), &options, &p) != TCCRT_OK)
    runtimeError("cannot load the compiled program");
  return RuntimeProgram(p);
}

RuntimeProgram RuntimeProgram::fromFile(const std::string &path, const RunOptions &run) {
  tccrt_options options = tccrtOptions(run);
  tccrt_program *p = nullptr;
  if (tccrt_load_file(path.c_str(), &options, &p) != TCCRT_OK)
    runtimeError("cannot load '" + path + "'");
  return RuntimeProgram(p);
}

std::string RuntimeProgram::deviceName() const {
  const char *name = tccrt_program_device_name(program_);
  return name ? name : "";
}

RuntimeProgram::~RuntimeProgram() {
  if (program_)
    tccrt_program_free(program_);
}

/// The specs of `count` tensors read through `info` (tccrt_input_info or tccrt_output_info).
static std::vector<TensorSpec> specsOf(const tccrt_program *program, size_t count,
                                       tccrt_status (*info)(const tccrt_program *, size_t,
                                                            tccrt_tensor_info *),
                                       const char *what) {
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < count; ++i) {
    tccrt_tensor_info t;
    if (info(program, i, &t) != TCCRT_OK)
      runtimeError(std::string(what) + " " + std::to_string(i));
    out.push_back(specOf(t));
  }
  return out;
}

std::vector<TensorSpec> RuntimeProgram::inputs() const {
  return specsOf(program_, tccrt_num_inputs(program_), tccrt_input_info, "input");
}

std::vector<TensorSpec> RuntimeProgram::outputs() const {
  return specsOf(program_, tccrt_num_outputs(program_), tccrt_output_info, "output");
}

bool RuntimeProgram::isSymbolic() const { return tccrt_num_symbols(program_) > 0; }

std::vector<std::string> RuntimeProgram::inputDims(size_t i) const {
  tccrt_tensor_info t;
  if (tccrt_input_info(program_, i, &t) != TCCRT_OK)
    runtimeError("input " + std::to_string(i));
  std::vector<std::string> dims;
  for (int64_t d = 0; d < t.rank; ++d) {
    const char *e = tccrt_input_dim_expr(program_, i, d);
    dims.push_back(e ? e : std::to_string(t.shape[d]));
  }
  return dims;
}

void RuntimeProgram::setInputShapes(const std::vector<Shape> &shapes) {
  std::vector<const int64_t *> data;
  std::vector<size_t> ranks;
  for (const Shape &s : shapes) {
    data.push_back(s.data());
    ranks.push_back(s.size());
  }
  if (tccrt_set_input_shapes(program_, data.data(), ranks.data()) != TCCRT_OK)
    runtimeError("cannot run at these input shapes");
}

void RuntimeProgram::bindShapesOf(const std::vector<Tensor> &inputs) {
  if (!isSymbolic() || inputs.size() != tccrt_num_inputs(program_))
    return; // (a static program's checks name the input that differs)
  std::vector<Shape> shapes;
  for (const Tensor &t : inputs)
    shapes.push_back(t.shape());
  setInputShapes(shapes);
}

std::vector<Tensor> RuntimeProgram::allocateOutputs() const {
  std::vector<Tensor> outputs;
  for (const TensorSpec &s : this->outputs())
    outputs.emplace_back(s.dtype, s.shape);
  return outputs;
}

void RuntimeProgram::run(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  bindShapesOf(inputs);
  std::vector<TensorSpec> specs = this->inputs();
  if (inputs.size() != specs.size())
    throw Error("the program takes " + std::to_string(specs.size()) + " input(s), " +
                std::to_string(inputs.size()) + " given");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype() != specs[i].dtype || inputs[i].shape() != specs[i].shape)
      throw Error("input " + std::to_string(i) + " ('" + specs[i].name + "') is " +
                  inputs[i].typeString() + ", the program was compiled for " +
                  shapeToString(specs[i].shape) + " " + dtypeName(specs[i].dtype));
  runRaw(inputPointers(inputs), outputPointers(outputs));
}

std::vector<Tensor> RuntimeProgram::run(const std::vector<Tensor> &inputs) {
  bindShapesOf(inputs);
  std::vector<Tensor> outputs = allocateOutputs();
  run(inputs, outputs);
  return outputs;
}

std::vector<const void *> inputPointers(const std::vector<Tensor> &tensors) {
  std::vector<const void *> out;
  for (const Tensor &t : tensors)
    out.push_back(t.raw());
  return out;
}

std::vector<void *> outputPointers(std::vector<Tensor> &tensors) {
  std::vector<void *> out;
  for (Tensor &t : tensors)
    out.push_back(t.raw());
  return out;
}

void RuntimeProgram::runRaw(const std::vector<const void *> &inputs,
                            const std::vector<void *> &outputs) {
  if (tccrt_run(program_, inputs.data(), outputs.data()) != TCCRT_OK)
    runtimeError("run failed");
}

uint64_t runtimeHostPeakBytes() {
  tccrt_allocator_stats stats;
  tccrt_allocator_get_stats(&stats);
  return stats.peak_allocated_bytes;
}

std::optional<uint64_t> RuntimeProgram::devicePeakBytes() const {
  tccrt_allocator_stats stats;
  if (tccrt_program_device(program_) != TCCRT_DEVICE_CUDA ||
      tccrt_device_allocator_stats(program_, &stats) != TCCRT_OK)
    return std::nullopt;
  return stats.peak_allocated_bytes;
}

void RuntimeProgram::setProfiling(bool enabled) {
  if (tccrt_set_profiling(program_, enabled ? 1 : 0) != TCCRT_OK)
    runtimeError("cannot profile");
}

std::vector<LaunchProfile> RuntimeProgram::launchProfiles() const {
  std::vector<LaunchProfile> out(tccrt_num_launches(program_));
  for (size_t i = 0; i < out.size(); ++i) {
    tccrt_launch_profile p;
    if (tccrt_get_launch_profile(program_, i, &p) != TCCRT_OK)
      runtimeError("cannot read the profile");
    out[i] = {p.kind, p.name, p.nodes, p.calls, p.total_seconds, p.last_start_seconds,
              p.last_seconds};
  }
  return out;
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
                            const CompileOptions &compile, const RunOptions &run) {
  if (device == "interp")
    return interpret(model);
  CompileOptions options = compile;
  options.device = device;
  CompiledModel compiled = compileLoaded(model, givenInputs, options, /*randomValuesRun=*/true);
  RuntimeProgram program = RuntimeProgram::fromBytes(compiled.artifact, run);
  return program.run(model.inputs);
}

std::string cudaUnavailableReason() {
  const char *reason = nullptr;
  if (tccrt_device_available(TCCRT_DEVICE_CUDA, &reason))
    return "";
  std::string why = reason && *reason ? reason : "libtccrt gave no reason";
  // libtccrt's reasons may already say what they are about.
  for (const char *prefix : {"no usable CUDA GPU/driver: ", "no usable CUDA GPU: "})
    if (why.rfind(prefix, 0) == 0)
      why = why.substr(std::strlen(prefix));
  return why;
}

std::string resolveDevice(const std::string &requested) {
  if (requested == "cpu" || requested == "interp")
    return requested;
  if (requested != "auto" && requested != "cuda")
    throw Error("unknown device '" + requested + "': tcc runs models on 'auto' (cuda if usable, "
                "else cpu), 'cuda', 'cpu' (compiled) and 'interp' (the reference interpreter)");
  std::string why = cudaUnavailableReason();
  if (requested == "cuda") {
    if (!why.empty())
      throw Error("no usable CUDA GPU/driver: " + why + "; use --device cpu");
    if (!codegen::nvrtcAvailable())
      throw Error("cannot compile for device 'cuda': this tcc was built without the CUDA "
                  "toolkit (NVRTC); use --device cpu");
    return "cuda";
  }
  if (why.empty() && codegen::nvrtcAvailable())
    return "cuda";
  if (why.empty())
    std::cerr << "tcc: note: a CUDA GPU is usable, but this tcc was built without the CUDA "
                 "toolkit (NVRTC); running on the CPU\n";
  else
    std::cerr << "tcc: note: no usable CUDA GPU (" << why << "); running on the CPU\n";
  return "cpu";
}

std::string artifactDevice(const std::string &path) {
  // One read of the whole file (a byte-at-a-time stream iterator took 35 ms of a ResNet-18
  // artifact's 23 MB).
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::vector<uint8_t> bytes(f ? static_cast<size_t>(f.tellg()) : 0);
  if (!f.seekg(0) || !f.read(reinterpret_cast<char *>(bytes.data()), bytes.size()))
    return "";
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (bytes.empty() || !artifact::VerifyProgramBuffer(verifier))
    return "";
  return artifact::GetProgram(bytes.data())->device() == artifact::Device_CUDA ? "cuda" : "cpu";
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
