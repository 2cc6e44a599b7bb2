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
    // One zero-filled buffer per input and output, when they total at most 1 MiB.
    size_t numInputs = tccrt_num_inputs(program), count = numInputs + tccrt_num_outputs(program);
    std::vector<size_t> bytes(count);
    size_t total = 0;
    tccrt_tensor_info info;
    for (size_t i = 0; i < count; ++i) {
      if (i < numInputs)
        tccrt_input_info(program, i, &info);
      else
        tccrt_output_info(program, i - numInputs, &info);
      bytes[i] = info.bytes;
      total += std::min<size_t>(info.bytes, 1u << 30);
    }
    if (total <= (1u << 20)) {
      std::vector<std::vector<uint8_t>> buffers(count);
      std::vector<void *> pointers(count);
      for (size_t i = 0; i < count; ++i) {
        buffers[i].assign(bytes[i], 0);
        pointers[i] = buffers[i].data();
      }
      tccrt_run(program, pointers.data(), pointers.data() + numInputs);
    }
  }
  tccrt_program_free(program);
  return 0;
}
