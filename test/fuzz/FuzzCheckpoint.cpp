//===- FuzzCheckpoint.cpp - libFuzzer harness: the checkpoint loader ------===//
//
// tccrt_trainer_load on any bytes: the trainer's state replaced by a verified checkpoint's, or
// an error status with the state unchanged, never a crash. The trainer comes from a training
// artifact named by $TCC_FUZZ_TRAINING_ARTIFACT (scripts/fuzz.sh compiles the FashionMNIST
// example); $TCC_FUZZ_SEED_OUT, when set, receives a checkpoint of it to seed the corpus. Each
// input is written to a file in a private directory (FuzzInputFile.h; the loader reads paths: a
// manifest's shards are files beside it, which fuzzed names cannot reach outside of).
//===----------------------------------------------------------------------===//
#include "FuzzInputFile.h"
#include "tcc/Runtime/tccrt.h"


#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
tccrt_program *program = nullptr;
tccrt_trainer *trainer = nullptr;
const tcc::fuzz::InputFile *checkpoint = nullptr;

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "FuzzCheckpoint: %s: %s\n", what, tccrt_last_error());
  std::exit(2);
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *artifact = std::getenv("TCC_FUZZ_TRAINING_ARTIFACT");
  if (!artifact)
    fail("set TCC_FUZZ_TRAINING_ARTIFACT to a training artifact");
  tccrt_options options{};
  options.num_threads = 1;
  if (tccrt_load_file(artifact, &options, &program) != TCCRT_OK)
    fail("loading the training artifact");
  if (tccrt_trainer_create(program, 1, &trainer) != TCCRT_OK)
    fail("creating the trainer");
  if (const char *seed = std::getenv("TCC_FUZZ_SEED_OUT"))
    if (tccrt_trainer_save(trainer, seed, "seed", 4) != TCCRT_OK)
      fail("writing the seed checkpoint");
  static tcc::fuzz::InputFile file("checkpoint");
  checkpoint = &file;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  checkpoint->write(data, size);
  tccrt_trainer_load(trainer, checkpoint->path().c_str());
  return 0;
}
