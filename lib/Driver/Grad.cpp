//===- Grad.cpp - `tcc grad`: gradients of sum(output 0) ------------------===//
#include "tcc/Driver/Train.h"

#include "tcc/Driver/Execute.h"

#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

namespace tcc {

int runGrad(const GradArgs &args, const CompileOptions &compile) {
  PreparedModel prepared = prepareModel(args.model, args.load);
  const auto &inits = prepared.model.graph().initializer();

  LoadedModel loaded;
  loaded.context = std::make_unique<mlir::MLIRContext>();
  loaded.context->disableMultithreading();
  loaded.imported = buildGradientOfSum(*loaded.context, prepared.model, prepared.importOptions);
  // @main takes the graph inputs, then the initializers it differentiates with respect to.
  loaded.inputs = std::move(prepared.inputs);
  std::vector<std::string> names;
  for (int64_t index : loaded.imported.parameterIndices) {
    loaded.inputs.push_back(tensorFromProto(inits.Get(index)));
    names.push_back(inits.Get(index).name());
    loaded.imported.inputNames.push_back(inits.Get(index).name());
  }
  RunOptions run;
  run.threads = args.threads;
  std::vector<Tensor> grads = execute(loaded, args.givenInputs, args.device, compile, run);
  if (grads.size() != names.size())
    throw Error("the gradient program returned " + std::to_string(grads.size()) +
                " tensors for " + std::to_string(names.size()) + " initializers");

  if (!args.outDir.empty()) {
    std::error_code ec;
    fs::create_directories(args.outDir, ec);
    if (ec)
      throw Error("cannot create output directory '" + args.outDir + "': " + ec.message());
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    int64_t index = loaded.imported.parameterIndices[i];
    const Tensor &g = grads[i];
    double sumAbs = 0;
    for (int64_t k = 0; k < g.numElements(); ++k)
      sumAbs += std::abs(g.getDouble(k));
    std::cout << "grad_" << index << " '" << names[i] << "': " << g.typeString()
              << " sum|g| " << sumAbs << "\n";
    if (!args.outDir.empty())
      writeTensorFile(g, names[i],
                      (fs::path(args.outDir) / ("grad_" + std::to_string(index) + ".pb")).string());
  }
  return 0;
}

} // namespace tcc
