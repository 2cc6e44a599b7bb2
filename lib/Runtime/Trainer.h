//===- Trainer.h - Running a training artifact's entry points on its state -===//
//
// The trainer owns the training state in runtime memory and runs the artifact's entries on it
// (tccrt_trainer_* in tccrt.h is a thin layer over this class).
//
// State is double-buffered: every state tensor that some entry updates has two buffers. A run
// reads the current ones (inputs bound to State i) and writes the spare ones (outputs bound to
// State i); after a successful run the two swap, so an update costs no copy and a failed run
// leaves the state as it was.
//
// Cadence: micro-step m (counting from 0) runs train_step when (m + 1) % grad_accumulation is
// 0, else accumulate_step; train_step counts an optimizer step. Random keys: an entry input
// bound to RngKey receives rngKey(seed, m) (tccrt_rng_key), eval the key of the next
// micro-step (it does not advance the counter).
#pragma once

#include "Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::rt {

class Trainer {
public:
  /// Initial state from the artifact. `program` (a training artifact) must outlive the trainer.
  Trainer(const Program &program, uint64_t seed);
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  const TrainingDesc &training() const { return training_; }
  const std::vector<TensorDesc> &batch() const { return training_.batch; }
  const std::vector<TensorDesc> &evalOutputs() const { return evalOutputs_; }

  /// One micro-batch (see the cadence above); `loss` may be null.
  void step(const void *const *batch, float learningRate, float *loss);
  void eval(const void *const *batch, void *const *outputs);

  uint64_t microSteps() const { return microSteps_; }
  uint64_t steps() const { return steps_; }
  uint64_t seed() const { return seed_; }

  void getState(size_t i, void *out) const;
  void setState(size_t i, const void *data);

  /// Checkpoints (checkpoint.fbs). save writes a temporary file next to `path` and renames it,
  /// so `path` is either the old or the new checkpoint, never a partial one. load verifies the
  /// file completely before changing anything.
  void save(const std::string &path, const void *userData, size_t userSize) const;
  void load(const std::string &path);
  const std::vector<uint8_t> &userData() const { return userData_; }

private:
  const StateDesc &state(size_t i, const char *function) const;
  /// Runs one entry: State inputs from the current buffers, State outputs into the spare ones
  /// (swapped in afterwards), Data inputs from `batch`, Data outputs to `dataOutputs`.
  void run(const EntryDesc &entry, const void *const *batch, float learningRate, uint64_t key,
           float *loss, void *const *dataOutputs);

  const Program &program_;
  const TrainingDesc &training_;
  std::vector<TensorDesc> evalOutputs_;
  /// Per state; spare_ null where no entry writes it, both null where the state is another
  /// pipeline stage's and no entry of this rank binds it (held_ false).
  std::vector<void *> current_, spare_;
  std::vector<bool> held_;
  /// The error for state `i` that this rank does not hold.
  Error notHeld(size_t i, const char *function) const;
  uint64_t microSteps_ = 0, steps_ = 0, seed_ = 0;
  std::vector<uint8_t> userData_;
  std::vector<const void *> inputs_; // per run
  std::vector<void *> outputs_;
};

/// The random key of micro-step `microStep`: splitmix64(splitmix64(seed) ^ microStep). A
/// bijection of the micro-step for a given seed, so no two micro-steps share a key.
uint64_t rngKey(uint64_t seed, uint64_t microStep);

} // namespace tcc::rt
