//===- FuzzArtifact.cpp - libFuzzer harness: the artifact loader ----------===//
//
// tccrt_load_buffer on any bytes: a program or an error status, never a crash. A program that
// loads is also run once (inputs zero-filled, when they total at most 1 MiB): what the loader
// accepted must be safe to execute. Seeds: artifacts compiled from ONNX conformance cases and
// the example training artifact (scripts/fuzz.sh).
//===----------------------------------------------------------------------===//
#include "tcc/Runtime/tccrt.h"

#include <algorithm>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tccrt_options options{};
  options.num_threads = 1;
  tccrt_program *program = nullptr;
  if (tccrt_load_buffer(data, size, &options, &program) != TCCRT_OK)
    return 0;
  if (tccrt_program_device(program) == TCCRT_DEVICE_CPU && !tccrt_is_training(program)) {
    std::vector<std::vector<uint8_t>> in(tccrt_num_inputs(program)),
        out(tccrt_num_outputs(program));
    size_t total = 0;
    auto bytesOf = [](const tccrt_tensor_info &info) { return info.bytes; };
    std::vector<const void *> inPtrs;
    std::vector<void *> outPtrs;
    tccrt_tensor_info info;
    for (size_t i = 0; i < in.size(); ++i) {
      tccrt_input_info(program, i, &info);
      total += std::min<size_t>(bytesOf(info), 1u << 30);
    }
    for (size_t i = 0; i < out.size(); ++i) {
      tccrt_output_info(program, i, &info);
      total += std::min<size_t>(bytesOf(info), 1u << 30);
    }
    if (total <= (1u << 20)) {
      for (size_t i = 0; i < in.size(); ++i) {
        tccrt_input_info(program, i, &info);
        in[i].assign(bytesOf(info), 0);
        inPtrs.push_back(in[i].data());
      }
      for (size_t i = 0; i < out.size(); ++i) {
        tccrt_output_info(program, i, &info);
        out[i].assign(bytesOf(info), 0);
        outPtrs.push_back(out[i].data());
      }
      tccrt_run(program, inPtrs.data(), outPtrs.data());
    }
  }
  tccrt_program_free(program);
  return 0;
}
