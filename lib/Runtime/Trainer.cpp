//===- Trainer.cpp - Training state, entry points and checkpoints ---------===//
#include "Trainer.h"
#include "Communicator.h"

#include "DType.h"
#include "HostMemory.h"
#include "tcc/Runtime/checkpoint_generated.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tcc::rt {

namespace ck = tcc::checkpoint;

namespace {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Writes all of `bytes` to `path` through a temporary file in the same directory, flushed to
/// disk before it replaces `path`.
void writeFileAtomically(const std::string &path, const uint8_t *bytes, size_t size) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot write '" + temp + "': " + std::strerror(errno));
  auto failWith = [&](const std::string &what) {
    int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw Error(what + " '" + temp + "': " + std::strerror(err));
  };
  for (size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      failWith("cannot write");
    done += (size_t)n;
  }
  if (::fsync(fd) != 0)
    failWith("cannot flush");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw Error("cannot write '" + temp + "': " + std::strerror(err));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw Error("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(err));
  }
}

} // namespace

uint64_t rngKey(uint64_t seed, uint64_t microStep) {
  return splitmix64(splitmix64(seed) ^ microStep);
}

Trainer::Trainer(const Program &program, uint64_t seed)
    : program_(program), training_(program.training() ? *program.training()
                                                       : throw Error("the artifact is not a "
                                                                     "training artifact")),
      seed_(seed) {
  const std::vector<StateDesc> &state = training_.state;
  std::vector<bool> written(state.size(), false);
  for (const EntryDesc &e : training_.entries)
    for (const BindingDesc &b : e.outputs)
      if (b.role == BindingRole::State)
        written[b.state] = true;
  current_.assign(state.size(), nullptr);
  spare_.assign(state.size(), nullptr);
  try {
    for (size_t i = 0; i < state.size(); ++i) {
      current_[i] = hostAllocate(state[i].tensor.bytes);
      if (state[i].tensor.bytes)
        std::memcpy(current_[i], state[i].initial, state[i].tensor.bytes);
      if (written[i])
        spare_[i] = hostAllocate(state[i].tensor.bytes);
    }
  } catch (...) {
    for (size_t i = 0; i < state.size(); ++i) {
      hostFree(current_[i]);
      hostFree(spare_[i]);
    }
    throw;
  }
  const EntryDesc &eval = *training_.eval;
  for (size_t j = 0; j < eval.outputs.size(); ++j)
    evalOutputs_.push_back(eval.program->outputs()[j]); // the loader allows only Data here
}

Trainer::~Trainer() {
  for (size_t i = 0; i < current_.size(); ++i) {
    hostFree(current_[i]);
    hostFree(spare_[i]);
  }
}

void Trainer::run(const EntryDesc &entry, const void *const *batch, float learningRate,
                  uint64_t key, float *loss, void *const *dataOutputs) {
  const Program &program = *entry.program;
  inputs_.assign(entry.inputs.size(), nullptr);
  outputs_.assign(entry.outputs.size(), nullptr);
  size_t data = 0;
  for (size_t j = 0; j < entry.inputs.size(); ++j) {
    const BindingDesc &b = entry.inputs[j];
    switch (b.role) {
    case BindingRole::Data:
      inputs_[j] = batch[data++];
      break;
    case BindingRole::State:
      inputs_[j] = current_[b.state];
      break;
    case BindingRole::LearningRate:
      inputs_[j] = &learningRate;
      break;
    case BindingRole::RngKey:
      inputs_[j] = &key;
      break;
    case BindingRole::Loss: // the loader rejects Loss inputs
      throw Error("entry '" + entry.name + "' input " + std::to_string(j) + " is bound to Loss");
    }
  }
  data = 0;
  for (size_t j = 0; j < entry.outputs.size(); ++j) {
    const BindingDesc &b = entry.outputs[j];
    switch (b.role) {
    case BindingRole::Data:
      outputs_[j] = dataOutputs[data++];
      break;
    case BindingRole::State:
      outputs_[j] = spare_[b.state];
      break;
    case BindingRole::Loss:
      outputs_[j] = loss;
      break;
    case BindingRole::LearningRate:
    case BindingRole::RngKey: // the loader rejects these outputs
      throw Error("entry '" + entry.name + "' output " + std::to_string(j) +
                  " is bound to an input role");
    }
  }
  try {
    const_cast<Program &>(program).run(inputs_.data(), outputs_.data());
  } catch (const Error &e) {
    throw Error(entry.name + ": " + e.what());
  }
  for (const BindingDesc &b : entry.outputs)
    if (b.role == BindingRole::State)
      std::swap(current_[b.state], spare_[b.state]);
}

void Trainer::step(const void *const *batch, float learningRate, float *loss) {
  if (!batch && !training_.batch.empty())
    throw Error("batch is null; the model takes " + std::to_string(training_.batch.size()) +
                " batch tensors");
  bool update = (microSteps_ + 1) % training_.gradAccumulation == 0;
  const EntryDesc &entry = update ? *training_.trainStep : *training_.accumulateStep;
  if (training_.worldSize > 1)
    if (Communicator *comm = processCommunicator())
      comm->setContext(entry.name + " of micro-step " + std::to_string(microSteps_ + 1));
  float lossValue = 0;
  run(entry, batch, learningRate, rngKey(seed_, microSteps_), &lossValue, nullptr);
  ++microSteps_;
  if (update)
    ++steps_;
  if (loss)
    *loss = lossValue;
}

void Trainer::eval(const void *const *batch, void *const *outputs) {
  if (!batch && !training_.batch.empty())
    throw Error("batch is null; the model takes " + std::to_string(training_.batch.size()) +
                " batch tensors");
  if (!outputs && !evalOutputs_.empty())
    throw Error("outputs is null; eval has " + std::to_string(evalOutputs_.size()) + " outputs");
  if (training_.worldSize > 1)
    if (Communicator *comm = processCommunicator())
      comm->setContext("eval after micro-step " + std::to_string(microSteps_));
  run(*training_.eval, batch, 0.0f, rngKey(seed_, microSteps_), nullptr, outputs);
}

const StateDesc &Trainer::state(size_t i, const char *function) const {
  if (i >= training_.state.size())
    throw Error(std::string(function) + ": state " + std::to_string(i) +
                " out of range (there are " + std::to_string(training_.state.size()) + ")");
  return training_.state[i];
}

void Trainer::getState(size_t i, void *out) const {
  const StateDesc &s = state(i, "get_state");
  if (!out && s.tensor.bytes)
    throw Error("get_state: out is null");
  if (s.tensor.bytes)
    std::memcpy(out, current_[i], s.tensor.bytes);
}

void Trainer::setState(size_t i, const void *data) {
  const StateDesc &s = state(i, "set_state");
  if (!data && s.tensor.bytes)
    throw Error("set_state: data is null");
  if (s.tensor.bytes)
    std::memcpy(current_[i], data, s.tensor.bytes);
}

// ---- Checkpoints -----------------------------------------------------------------------------

void Trainer::save(const std::string &path, const void *userData, size_t userSize) const {
  if (!userData && userSize)
    throw Error("user_data is null but user_size is " + std::to_string(userSize));
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  std::vector<flatbuffers::Offset<ck::StateTensor>> state;
  for (size_t i = 0; i < training_.state.size(); ++i) {
    const TensorDesc &t = training_.state[i].tensor;
    auto name = fbb.CreateString(t.name);
    auto shape = fbb.CreateVector(t.shape);
    fbb.ForceVectorAlignment(t.bytes, 1, 64);
    auto data = fbb.CreateVector(static_cast<const uint8_t *>(current_[i]), t.bytes);
    state.push_back(ck::CreateStateTensor(fbb, name, (uint8_t)t.dtype, shape, data));
  }
  auto stateVec = fbb.CreateVector(state);
  auto producer = fbb.CreateString("tccrt 0.1");
  auto user = fbb.CreateVector(static_cast<const uint8_t *>(userData), userSize);
  ck::FinishCheckpointBuffer(
      fbb, ck::CreateCheckpoint(fbb, ck::Version_Current, producer, stateVec, microSteps_, steps_,
                                seed_, training_.gradAccumulation, user));
  writeFileAtomically(path, fbb.GetBufferPointer(), fbb.GetSize());
}

void Trainer::load(const std::string &path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    throw Error("cannot open '" + path + "'");
  std::streamoff size = file.tellg();
  if (size < 0)
    throw Error("cannot read '" + path + "'");
  AlignedBytes bytes;
  bytes.allocate((size_t)size);
  file.seekg(0);
  if (size > 0 && !file.read(reinterpret_cast<char *>(bytes.data), size))
    throw Error("cannot read '" + path + "'");

  std::string what = "checkpoint '" + path + "'";
  if (bytes.size < 8 || !ck::CheckpointBufferHasIdentifier(bytes.data))
    throw Error(what + " is not a tcc checkpoint (expected the file identifier \"TCCK\")");
  if (bytes.size >= (size_t(1) << 31))
    throw Error(what + " exceeds the 2 GiB FlatBuffers limit");
  flatbuffers::Verifier verifier(bytes.data, bytes.size, /*max_depth=*/16,
                                 /*max_tables=*/1u << 24);
  if (!ck::VerifyCheckpointBuffer(verifier))
    throw Error(what + " is damaged: its FlatBuffers structure does not verify");
  const ck::Checkpoint *c = ck::GetCheckpoint(bytes.data);
  if (c->version() != ck::Version_Current)
    throw Error(what + " has version " + std::to_string(c->version()) + ", this runtime reads " +
                std::to_string((unsigned)ck::Version_Current));
  if (c->grad_accumulation() != training_.gradAccumulation)
    throw Error(what + " was saved with grad_accumulation " +
                std::to_string(c->grad_accumulation()) + ", this artifact has " +
                std::to_string(training_.gradAccumulation));
  const auto *state = c->state();
  size_t count = state ? state->size() : 0;
  if (count != training_.state.size())
    throw Error(what + " has " + std::to_string(count) + " state tensors, the artifact " +
                std::to_string(training_.state.size()));
  std::vector<const uint8_t *> data(count);
  for (size_t i = 0; i < count; ++i) {
    const ck::StateTensor *s = state->Get((unsigned)i);
    const TensorDesc &want = training_.state[i].tensor;
    std::string where = what + " state " + std::to_string(i);
    if (!s || !s->name())
      throw Error(where + " has no name");
    if (s->name()->str() != want.name)
      throw Error(where + " is '" + s->name()->str() + "', the artifact's is '" + want.name +
                  "'");
    where += " '" + want.name + "'";
    tccrt_dtype dtype = checkDType(s->dtype(), where);
    Shape shape = readShape(s->shape());
    if (dtype != want.dtype || shape != want.shape)
      throw Error(where + " is " + shapeString(dtype, shape) + ", the artifact's is " +
                  shapeString(want.dtype, want.shape));
    size_t got = s->data() ? s->data()->size() : 0;
    if (got != want.bytes)
      throw Error(where + " has " + std::to_string(got) + " bytes of data, " +
                  shapeString(want.dtype, want.shape) + " takes " + std::to_string(want.bytes));
    data[i] = got ? s->data()->Data() : nullptr;
  }
  // Verified: only now change the trainer.
  for (size_t i = 0; i < count; ++i)
    if (training_.state[i].tensor.bytes)
      std::memcpy(current_[i], data[i], training_.state[i].tensor.bytes);
  microSteps_ = c->micro_step();
  steps_ = c->steps();
  seed_ = c->seed();
  if (const auto *user = c->user_data())
    userData_.assign(user->begin(), user->end());
  else
    userData_.clear();
}

} // namespace tcc::rt
