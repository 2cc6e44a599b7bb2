//===- FuzzOnnxImport.cpp - libFuzzer harness: the ONNX importer ----------===//
//
// What `tcc compile` does with a model file before any of its own passes: parse the protobuf,
// check the graph, run ONNX's checks, version conversion and shape inference, and import into
// the tcc dialect (constant folding included). Any bytes give a module or a tcc::Error that
// names the problem, never a crash. Dynamic input dims are fixed to 2 (as --input-shape
// would) for inputs of even length, and kept as size symbols (as `tcc import` does) for odd
// ones, so both import paths see the mutations. Seeds: the models of Debian's ONNX
// conformance data (scripts/fuzz.sh).
//===----------------------------------------------------------------------===//
#include "FuzzInputFile.h"
#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>

namespace {
const tcc::fuzz::InputFile *modelFile = nullptr;
std::unique_ptr<mlir::MLIRContext> context;
int importsInContext = 0;

/// The graph inputs that are not initializers, each dynamic (or unknown) dim fixed to 2.
tcc::PrepareOptions shapesOf(const onnx::ModelProto &model) {
  tcc::PrepareOptions options;
  std::set<std::string> initializers;
  for (const auto &t : model.graph().initializer())
    initializers.insert(t.name());
  for (const auto &in : model.graph().input()) {
    if (initializers.count(in.name()) || !in.type().has_tensor_type() ||
        !in.type().tensor_type().has_shape())
      continue;
    tcc::Shape shape;
    for (const auto &d : in.type().tensor_type().shape().dim())
      shape.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : 2);
    options.inputShapes[in.name()] = shape;
  }
  return options;
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  static tcc::fuzz::InputFile file("model.onnx");
  modelFile = &file;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  modelFile->write(data, size);
  // A context keeps every type and attribute it has seen: a fresh one now and then bounds that.
  if (!context || ++importsInContext > 500) {
    context = std::make_unique<mlir::MLIRContext>();
    context->disableMultithreading();
    tcc::registerImportDialects(*context);
    importsInContext = 0;
  }
  try {
    onnx::ModelProto model = tcc::loadOnnxModel(modelFile->path());
    tcc::prepareOnnxModel(model, size % 2 ? tcc::PrepareOptions{} : shapesOf(model));
    tcc::ImportedModel imported = tcc::importOnnxModel(*context, model);
  } catch (const tcc::Error &) {
  }
  return 0;
}
