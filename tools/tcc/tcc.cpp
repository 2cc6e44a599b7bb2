//===- tcc.cpp - The tcc command line -----------------------------------===//
//
//   tcc import MODEL.onnx            print the imported tcc IR
//   tcc run MODEL.onnx [--inputs ...] run a model, write its outputs as TensorProto files
//   tcc check DIR...                  run ONNX backend-test cases and compare outputs
//
//===----------------------------------------------------------------------===//
#include "Check.h"
#include "Pipeline.h"

#include "tcc/Frontend/OnnxModel.h"

#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;
using namespace tcc;

namespace {

struct ModelArgs {
  std::string model;
  std::vector<std::string> inputFiles;
  std::vector<std::string> inputShapes;
  uint64_t seed = 0;
};

void addModelArgs(CLI::App *cmd, ModelArgs &args) {
  cmd->add_option("MODEL", args.model, "ONNX model file (.onnx)")->required();
  cmd->add_option("--inputs", args.inputFiles,
                  "TensorProto (.pb) files, one per graph input in order (initializers "
                  "excluded); inputs not given get seeded random data");
  cmd->add_option("--input-shape", args.inputShapes,
                  "NAME=D0xD1x...: fixes a graph input's dynamic dimensions (repeatable)");
  cmd->add_option("--seed", args.seed, "seed for random inputs")->default_val(0);
}

LoadOptions loadOptions(const ModelArgs &args) {
  LoadOptions load;
  for (const auto &f : args.inputFiles)
    load.inputs.push_back(readTensorFile(f));
  for (const auto &s : args.inputShapes)
    load.inputShapes.insert(parseInputShape(s));
  load.seed = args.seed;
  return load;
}

void checkDevice(const std::string &device) {
  if (device != "interp")
    throw Error("device '" + device + "' is not available: this build of tcc has only the "
                "reference interpreter ('interp')");
}

int runImport(const ModelArgs &args, const std::string &out, int64_t elide) {
  LoadedModel model = loadModel(args.model, loadOptions(args));
  mlir::OpPrintingFlags flags;
  if (elide > 0)
    flags.elideLargeElementsAttrs(elide);
  std::string text;
  llvm::raw_string_ostream os(text);
  model.imported.module->print(os, flags);
  if (out.empty() || out == "-") {
    std::cout << text;
  } else {
    std::ofstream f(out);
    if (!f)
      throw Error("cannot write '" + out + "'");
    f << text;
  }
  if (!model.imported.specializedInputs.empty()) {
    std::cerr << "tcc: note: specialized on the values of input(s)";
    for (const auto &n : model.imported.specializedInputs)
      std::cerr << " '" << n << "'";
    std::cerr << " (their values are needed at compile time)\n";
  }
  return 0;
}

int runRun(const ModelArgs &args, const std::string &device, const std::string &outDir) {
  checkDevice(device);
  LoadedModel model = loadModel(args.model, loadOptions(args));
  std::vector<Tensor> outputs = interpret(model);
  if (!outDir.empty()) {
    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (ec)
      throw Error("cannot create output directory '" + outDir + "': " + ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor &t = outputs[i];
    const std::string &name = model.imported.outputNames[i];
    std::cout << "output " << i << " '" << name << "': " << t.typeString();
    int64_t shown = std::min<int64_t>(t.numElements(), 8);
    std::cout << " [";
    for (int64_t k = 0; k < shown; ++k)
      std::cout << (k ? ", " : "") << t.getDouble(k);
    std::cout << (t.numElements() > shown ? ", ...]" : "]") << "\n";
    if (!outDir.empty())
      writeTensorFile(t, name, (fs::path(outDir) / ("output_" + std::to_string(i) + ".pb")).string());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // MLIR/LLVM report internal invariant violations here: say so in tcc's format.
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    std::cerr << "tcc: error: internal compiler error: " << reason << "\n";
    std::_Exit(2);
  });
  CLI::App app{"tcc: a tensor compiler for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tcc 0.1.0");

  ModelArgs importArgs, runArgs;
  std::string importOut;
  int64_t elide = 16;
  auto *importCmd = app.add_subcommand("import", "Import an ONNX model and print its tcc IR");
  addModelArgs(importCmd, importArgs);
  importCmd->add_option("-o,--output", importOut, "write the IR here instead of stdout");
  importCmd->add_option("--elide-constants", elide,
                        "print constants with more elements than this as placeholders (0: never)")
      ->default_val(16);

  std::string runDevice = "interp", outDir;
  auto *runCmd = app.add_subcommand("run", "Run an ONNX model and write its outputs");
  addModelArgs(runCmd, runArgs);
  runCmd->add_option("--device", runDevice, "where to run: interp (the reference interpreter)")
      ->default_val("interp");
  runCmd->add_option("--out-dir", outDir, "write outputs as DIR/output_<i>.pb (TensorProto)");

  CheckOptions check;
  auto *checkCmd = app.add_subcommand(
      "check", "Run ONNX backend-test cases (DIR/model.onnx, DIR/test_data_set_*/) and compare");
  checkCmd->add_option("DIR", check.caseDirs,
                       "case directories, or suite directories holding case directories")
      ->required();
  checkCmd->add_option("--device", check.device, "where to run: interp")->default_val("interp");
  checkCmd->add_option("--expected-failures", check.expectedFailuresFile,
                       "file listing cases expected to fail, one 'NAME REASON' per line");
  checkCmd->add_option("--rtol", check.rtol, "relative tolerance")->default_val(1e-3);
  checkCmd->add_option("--atol", check.atol, "absolute tolerance")->default_val(1e-5);
  checkCmd->add_option("-j,--jobs", check.jobs, "cases run in parallel (0: one per core)")
      ->default_val(0);
  checkCmd->add_flag("-q,--quiet", check.quiet, "print only failures, skips and the summary");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }

  try {
    if (*importCmd)
      return runImport(importArgs, importOut, elide);
    if (*runCmd)
      return runRun(runArgs, runDevice, outDir);
    if (*checkCmd)
      return runCheck(check);
  } catch (const std::exception &e) {
    std::cerr << "tcc: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
