//===- tcc-cuda-emulate.cpp - Host library of a CUDA artifact's kernels ---===//
//
//   tcc-cuda-emulate ARTIFACT KERNEL_DIR -o LIB.so [--cache-dir DIR]
//
// For end-to-end tests without a GPU: reads a CUDA artifact made by `tcc compile --device cuda
// --dump-dir DUMP` and the kernels' sources from KERNEL_DIR (DUMP/kernels/<name>.cu; for a
// training artifact, KERNEL_DIR is DUMP and each entry's are DUMP/<entry>/kernels), compiles
// them for the host against the CUDA emulation of test/support (CudaHostEmulation.h) and writes
// the shared object the fake CUDA driver (test/runtime/fakecuda) runs kernels from
// ($TCC_FAKE_CUDA_KERNELS): tcc_emu_<name> per kernel and tcc_emu_launch. Kernel parameter
// types come from the artifact's Kernel params.
//
//===----------------------------------------------------------------------===//
#include "CudaHostEmulation.h"
#include "FakeCudaModuleKey.h"

#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Runtime/artifact_generated.h"
#include "tcc/Support/Tensor.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace fb = tcc::artifact;
using namespace tcc;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw Error("cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// The host storage type of a buffer element (ScalarEmitter's storageType for the CPU).
std::string storageType(fb::DType d) {
  switch (d) {
  case fb::DType_Bool: return "uint8_t";
  case fb::DType_I8: return "int8_t";
  case fb::DType_I16: return "int16_t";
  case fb::DType_I32: return "int32_t";
  case fb::DType_I64: return "int64_t";
  case fb::DType_U8: return "uint8_t";
  case fb::DType_U16: return "uint16_t";
  case fb::DType_U32: return "uint32_t";
  case fb::DType_U64: return "uint64_t";
  case fb::DType_F16:
  case fb::DType_BF16: return "uint16_t";
  case fb::DType_F32: return "float";
  case fb::DType_F64: return "double";
  case fb::DType_F8E4M3FN:
  case fb::DType_F8E4M3FNUZ:
  case fb::DType_F8E5M2:
  case fb::DType_F8E5M2FNUZ:
  case fb::DType_U4:
  case fb::DType_U2: return "uint8_t";
  case fb::DType_I4:
  case fb::DType_I2: return "int8_t";
  }
  throw Error("unknown dtype in the artifact");
}

int run(const std::string &artifactPath, const std::string &kernelDir, const std::string &out,
        const std::string &cacheDir) {
  std::string bytes = readFile(artifactPath);
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  if (!fb::VerifyProgramBuffer(verifier))
    throw Error("'" + artifactPath + "' is not a well-formed tcc artifact");
  const fb::Program *program = fb::GetProgram(bytes.data());
  if (program->device() != fb::Device_CUDA)
    throw Error("'" + artifactPath + "' is not a CUDA artifact");
  // Inference: the program's kernels, from KERNEL_DIR, as tcc_emu_<name>. Training: every
  // entry's, from KERNEL_DIR/<entry>/kernels; two entries may each have a kernel of one name
  // with its own body, so each distinct kernel is renamed e<entry>_<name> and found by the fake
  // driver as tcc_emu_m<key>_<name> for each module image of its entry (FakeCudaModuleKey.h).
  std::vector<testsupport::EmulatedKernel> kernels;
  auto kernelOf = [](const fb::Kernel *k, const std::string &dir) {
    testsupport::EmulatedKernel e;
    e.name = k->name()->str();
    e.source = readFile(dir + "/" + e.name + ".cu");
    for (const fb::TensorSpec *param : *k->params())
      e.paramTypes.push_back(storageType(param->dtype()));
    return e;
  };
  std::string aliases;
  if (program->training() && program->training()->entries()) {
    std::map<std::string, std::pair<std::string, std::string>> built; // name -> source, symbol
    std::set<std::string> aliased;
    const auto *entries = program->training()->entries();
    for (flatbuffers::uoffset_t i = 0; i < entries->size(); ++i) {
      const fb::Entry *entry = entries->Get(i);
      const fb::Program *p = entry->program();
      if (!p->kernels())
        continue;
      std::vector<std::string> keys;
      if (const fb::CudaModule *cuda = p->cuda_module()) {
        if (cuda->images())
          for (const fb::CudaImage *image : *cuda->images())
            keys.push_back(fakeCudaModuleKey(image->cubin()->data(), image->cubin()->size()));
        if (cuda->ptx())
          for (const fb::CudaPtx *ptx : *cuda->ptx())
            keys.push_back(fakeCudaModuleKey(ptx->ptx()->data(), ptx->ptx()->size()));
      }
      for (const fb::Kernel *k : *p->kernels()) {
        testsupport::EmulatedKernel e =
            kernelOf(k, kernelDir + "/" + entry->name()->str() + "/kernels");
        std::string name = e.name;
        auto it = built.find(name);
        std::string symbol;
        if (it != built.end() && it->second.first == e.source) {
          symbol = it->second.second; // the same kernel as another entry's
        } else {
          symbol = "e" + std::to_string(i) + "_" + name;
          std::string source = e.source;
          e.source = std::regex_replace(source, std::regex("\\b" + name + "\\b"), symbol);
          e.name = symbol;
          built.try_emplace(name, source, symbol);
          kernels.push_back(std::move(e));
        }
        for (const std::string &key : keys)
          if (aliased.insert(key + "_" + name).second)
            aliases += "extern \"C\" void tcc_emu_m" + key + "_" + name +
                       "(void **args) { tcc_emu_" + symbol + "(args); }\n";
      }
    }
  } else if (program->kernels()) {
    for (const fb::Kernel *k : *program->kernels())
      kernels.push_back(kernelOf(k, kernelDir));
  }
  codegen::CpuCompileOptions options;
  options.cacheDir = cacheDir;
  codegen::CpuModule module =
      codegen::compileCpuModule({{"emulation", testsupport::cudaEmulationSource(kernels) + aliases}}, options);
  std::ofstream f(out, std::ios::binary);
  if (!f.write(reinterpret_cast<const char *>(module.sharedObject.data()),
               module.sharedObject.size()))
    throw Error("cannot write '" + out + "'");
  std::cout << "tcc-cuda-emulate: " << kernels.size() << " kernels in " << out << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> positional;
  std::string out, cacheDir;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if ((a == "-o" || a == "--cache-dir") && i + 1 < argc)
        (a == "-o" ? out : cacheDir) = argv[++i];
      else if (!a.empty() && a[0] == '-')
        throw Error("unknown option '" + a + "'");
      else
        positional.push_back(a);
    }
    if (positional.size() != 2 || out.empty()) {
      std::cerr << "usage: tcc-cuda-emulate ARTIFACT KERNEL_DIR -o LIB.so [--cache-dir DIR]\n";
      return 2;
    }
    return run(positional[0], positional[1], out, cacheDir);
  } catch (const std::exception &e) {
    std::cerr << "tcc-cuda-emulate: " << e.what() << "\n";
    return 1;
  }
}
