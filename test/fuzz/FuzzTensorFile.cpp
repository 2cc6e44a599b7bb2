//===- FuzzTensorFile.cpp - libFuzzer harness: .npy and TensorProto readers ===//
//
// The readers tccrt-run and `tcc train` use on files users hand them (lib/Support/TensorFiles):
// any bytes give a tensor or a tcc::Error, never a crash, a hang or an allocation the input's
// size does not justify. Seeds: the .pb files of Debian's ONNX test data (scripts/fuzz.sh).
//===----------------------------------------------------------------------===//
#include "tcc/Support/TensorFiles.h"

#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  try {
    std::string name;
    tcc::Tensor t = tcc::isNpy(bytes) ? tcc::parseNpy(bytes, "input")
                                      : tcc::parseTensorProto(bytes, "input", &name);
    // Touch every byte of the result: a size that disagrees with the data shows up under ASan.
    volatile uint8_t sink = 0;
    const uint8_t *p = static_cast<const uint8_t *>(t.raw());
    for (size_t i = 0; i < t.byteSize(); ++i)
      sink = sink ^ p[i];
  } catch (const tcc::Error &) {
  }
  return 0;
}
