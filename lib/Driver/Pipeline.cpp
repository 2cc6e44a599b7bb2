//===- Pipeline.cpp - Model loading, import and evaluation for the CLI -----===//
#include "tcc/Driver/Pipeline.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Support/TensorFiles.h" // parseDimension

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <random>
#include <set>

namespace tcc {

std::vector<GraphInput> graphInputs(const onnx::ModelProto &model) {
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  std::vector<GraphInput> out;
  for (const auto &in : model.graph().input()) {
    if (initializers.count(in.name()))
      continue;
    GraphInput g{in.name(), DType::F32, {}};
    if (in.type().has_tensor_type()) {
      const auto &tt = in.type().tensor_type();
      if (auto d = dtypeFromOnnx(tt.elem_type()))
        g.dtype = *d;
      for (const auto &dim : tt.shape().dim())
        g.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    }
    out.push_back(g);
  }
  return out;
}

std::pair<std::string, std::vector<DimRange>> parseInputShapeSpec(const std::string &spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--input-shape '" + spec + "' must look like NAME=D0xD1x... (e.g. x=1x3x224x224; "
                "a range LO..HI keeps a dim symbolic: ids=1..64x16..512)");
  std::vector<DimRange> dims;
  std::string text = spec.substr(eq + 1);
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t next = text.find('x', pos);
    std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    size_t dots = part.find("..");
    std::optional<int64_t> lo = parseDimension(part.substr(0, dots)), hi = lo;
    if (dots != std::string::npos)
      hi = dots + 2 == part.size() ? std::optional<int64_t>(INT64_MAX)
                                   : parseDimension(part.substr(dots + 2));
    if (!lo || !hi)
      throw Error("--input-shape '" + spec + "': '" + part +
                  "' is not a dimension size or a range LO..HI");
    if (*lo > *hi)
      throw Error("--input-shape '" + spec + "': the range '" + part + "' is empty");
    dims.push_back({*lo, *hi});
    if (next == std::string::npos)
      break;
    pos = next + 1;
  }
  return {spec.substr(0, eq), dims};
}

void LoadOptions::addInputShape(const std::string &spec) {
  auto [name, dims] = parseInputShapeSpec(spec);
  if (!llvm::all_of(dims, [](const DimRange &d) { return d.fixed(); })) {
    inputRanges[name] = dims;
    return;
  }
  Shape shape;
  for (const DimRange &d : dims)
    shape.push_back(d.min);
  inputShapes[name] = shape;
}

Tensor randomInput(DType dtype, const Shape &shape, uint64_t seed) {
  return randomTensor(dtype, shape, seed);
}

onnx::ModelProto ModelSource::load() const {
  return data ? parseOnnxModel(data, size, baseDir) : loadOnnxModel(path);
}

namespace {

/// Applies an --input-shape with ranges to graph input `in`: sizes become dim_values, ranges
/// name their dim (its dim_param, else `<input>_d<dim>`) and bound its size symbol.
void declareSymbolicDims(onnx::ModelProto &model, const GraphInput &in,
                         const std::vector<DimRange> &ranges, ImportOptions &import) {
  if (ranges.size() != in.dims.size())
    throw Error("--input-shape " + in.name + "=... gives " + std::to_string(ranges.size()) +
                " dims, the input has rank " + std::to_string(in.dims.size()));
  for (auto &value : *model.mutable_graph()->mutable_input()) {
    if (value.name() != in.name)
      continue;
    auto *shape = value.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int d = 0; d < shape->dim_size(); ++d) {
      auto *dim = shape->mutable_dim(d);
      const DimRange &r = ranges[d];
      if (dim->has_dim_value() && (dim->dim_value() < r.min || dim->dim_value() > r.max))
        throw Error("--input-shape " + in.name + "=...: dim " + std::to_string(d) +
                    " is fixed to " + std::to_string(dim->dim_value()) + " by the model");
      if (dim->has_dim_value())
        continue;
      if (r.fixed()) {
        dim->set_dim_value(r.min);
        continue;
      }
      std::string param = dim->has_dim_param() && !dim->dim_param().empty()
                              ? dim->dim_param()
                              : in.name + "_d" + std::to_string(d);
      dim->set_dim_param(param);
      auto [it, fresh] = import.symbolRanges.try_emplace(param, r.min, r.max);
      if (!fresh) // a dim_param shared by several inputs: the intersection of their ranges
        it->second = {std::max(it->second.first, r.min), std::min(it->second.second, r.max)};
      if (it->second.first > it->second.second)
        throw Error("--input-shape: the ranges given for '" + param + "' do not intersect");
    }
  }
}

} // namespace

PreparedModel prepareModel(const ModelSource &source, const LoadOptions &options) {
  PreparedModel prepared;
  onnx::ModelProto &model = prepared.model;
  model = source.load();
  std::vector<GraphInput> inputs = graphInputs(model);
  if (options.inputs.size() > inputs.size())
    throw Error("the model takes " + std::to_string(inputs.size()) + " input(s), but " +
                std::to_string(options.inputs.size()) + " were given");

  PrepareOptions prepare;
  for (const auto &[name, ranges] : options.inputRanges)
    if (!llvm::any_of(inputs, [&](const GraphInput &in) { return in.name == name; }))
      throw Error("--input-shape names '" + name + "', which is not a graph input");
  for (const auto &[name, shape] : options.inputShapes) {
    bool known = false;
    for (const auto &in : inputs)
      known |= in.name == name;
    if (!known)
      throw Error("--input-shape names '" + name + "', which is not a graph input");
    prepare.inputShapes[name] = shape;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GraphInput &in = inputs[i];
    if (i < options.inputs.size()) {
      const Tensor &t = options.inputs[i];
      if (t.dtype() != in.dtype)
        throw Error("input " + std::to_string(i) + " ('" + in.name + "') is " +
                    dtypeName(t.dtype()) + ", the model expects " + dtypeName(in.dtype));
      if (t.rank() != (int64_t)in.dims.size())
        throw Error("input " + std::to_string(i) + " ('" + in.name + "') has shape " +
                    shapeToString(t.shape()) + ", the model expects rank " +
                    std::to_string(in.dims.size()));
      for (size_t d = 0; d < in.dims.size(); ++d)
        if (in.dims[d] >= 0 && in.dims[d] != t.dim(d))
          throw Error("input " + std::to_string(i) + " ('" + in.name + "') has shape " +
                      shapeToString(t.shape()) + ", but the model fixes dim " + std::to_string(d) +
                      " to " + std::to_string(in.dims[d]));
      prepare.inputShapes[in.name] = t.shape();
      prepared.inputs.push_back(t);
      continue;
    }
    Shape shape;
    if (auto it = prepare.inputShapes.find(in.name); it != prepare.inputShapes.end()) {
      shape = it->second;
    } else if (auto r = options.inputRanges.find(in.name); r != options.inputRanges.end()) {
      declareSymbolicDims(model, in, r->second, prepared.importOptions);
      prepared.inputs.emplace_back();
      continue;
    } else if (options.keepSymbolicDims && llvm::is_contained(in.dims, -1)) {
      prepared.inputs.emplace_back();
      continue;
    } else {
      for (int64_t d : in.dims) {
        if (d < 0)
          throw Error("input '" + in.name + "' has a dynamic shape and no data was given: pass "
                      "--inputs or --input-shape " + in.name + "=D0xD1x... (Python: "
                      "input_shapes={'" + in.name + "': (D0, D1, ...)})");
        shape.push_back(d);
      }
    }
    prepared.inputs.push_back(randomInput(in.dtype, shape, options.seed + i));
    prepare.inputShapes[in.name] = shape;
  }

  prepareOnnxModel(model, prepare);
  for (size_t i = 0; i < inputs.size(); ++i)
    if ((i < options.inputs.size() || options.specializeOnRandomInputs) &&
        prepare.inputShapes.count(inputs[i].name))
      prepared.importOptions.inputValues[inputs[i].name] = prepared.inputs[i];
  return prepared;
}

LoadedModel loadModel(const ModelSource &source, const LoadOptions &options) {
  PreparedModel prepared = prepareModel(source, options);
  LoadedModel loaded;
  loaded.context = std::make_unique<mlir::MLIRContext>();
  loaded.context->disableMultithreading();
  loaded.imported = importOnnxModel(*loaded.context, prepared.model, prepared.importOptions);
  loaded.inputs = std::move(prepared.inputs);
  return loaded;
}

std::vector<Tensor> interpret(LoadedModel &model) {
  auto func = model.imported.module->lookupSymbol<mlir::func::FuncOp>("main");
  return runFunction(func, model.inputs);
}

} // namespace tcc
