//===- FuzzArtifact.cpp - libFuzzer harness: the artifact loader ----------===//
//
// tccrt_load_buffer on any bytes: a program or an error status, never a crash. A program that
// loads is also run once (inputs zero-filled, when they total at most 1 MiB): what the loader
// accepted must be safe to execute. A symbolic program is bound first, twice (the sizes at
// their minimum, then one more where the range allows), and run at each binding. Seeds:
// artifacts compiled from ONNX conformance cases and the example training artifact
// (scripts/fuzz.sh).
//===----------------------------------------------------------------------===//
#include "tcc/Runtime/tccrt.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

/// Binds a symbolic program's inputs: a dim that is a size symbol at its minimum plus `extra`
/// (at most its maximum), any other symbolic dim at 1 (the binding may refuse that). Returns
/// whether the program is bound.
bool bindSizes(tccrt_program *program, int64_t extra) {
  std::map<std::string, int64_t> sizes;
  for (size_t k = 0; k < tccrt_num_symbols(program); ++k) {
    const char *name = nullptr;
    int64_t min = 0, max = 0;
    if (tccrt_symbol_info(program, k, &name, &min, &max) != TCCRT_OK)
      return false;
    sizes[name] = min + std::min<int64_t>(extra, max - min);
  }
  size_t n = tccrt_num_inputs(program);
  std::vector<std::vector<int64_t>> shapes(n);
  for (size_t i = 0; i < n; ++i) {
    tccrt_tensor_info info;
    tccrt_input_info(program, i, &info);
    for (int64_t d = 0; d < info.rank; ++d) {
      const char *e = tccrt_input_dim_expr(program, i, (size_t)d);
      auto it = e ? sizes.find(e) : sizes.end();
      shapes[i].push_back(!e ? info.shape[d] : it != sizes.end() ? it->second : 1);
    }
  }
  std::vector<const int64_t *> data;
  std::vector<size_t> ranks;
  for (const auto &s : shapes) {
    data.push_back(s.data());
    ranks.push_back(s.size());
  }
  return tccrt_set_input_shapes(program, data.data(), ranks.data()) == TCCRT_OK;
}

/// One run on zero-filled inputs and outputs, when they total at most 1 MiB.
void runOnce(tccrt_program *program) {
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
  if (total > (1u << 20))
    return;
  std::vector<std::vector<uint8_t>> buffers(count);
  std::vector<void *> pointers(count);
  for (size_t i = 0; i < count; ++i) {
    buffers[i].assign(bytes[i], 0);
    pointers[i] = buffers[i].data();
  }
  tccrt_run(program, pointers.data(), pointers.data() + numInputs);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tccrt_options options{};
  options.num_threads = 1;
  tccrt_program *program = nullptr;
  if (tccrt_load_buffer(data, size, &options, &program) != TCCRT_OK)
    return 0;
  if (tccrt_program_device(program) == TCCRT_DEVICE_CPU && !tccrt_is_training(program)) {
    if (tccrt_num_symbols(program) == 0) {
      runOnce(program);
    } else {
      for (int64_t extra : {0, 1})
        if (bindSizes(program, extra))
          runOnce(program);
    }
  }
  tccrt_program_free(program);
  return 0;
}
