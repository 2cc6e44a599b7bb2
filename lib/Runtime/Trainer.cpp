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
#include <memory>
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
  held_.assign(state.size(), false);
  for (const EntryDesc &e : training_.entries) {
    for (const BindingDesc &b : e.outputs)
      if (b.role == BindingRole::State)
        written[b.state] = held_[b.state] = true;
    for (const BindingDesc &b : e.inputs)
      if (b.role == BindingRole::State)
        held_[b.state] = true;
  }
  // Unbound state is held all the same, but for another pipeline stage's.
  for (size_t i = 0; i < state.size(); ++i)
    held_[i] = held_[i] || state[i].pipelineStage < 0 ||
               state[i].pipelineStage == training_.pipelineStage;
  current_.assign(state.size(), nullptr);
  spare_.assign(state.size(), nullptr);
  try {
    for (size_t i = 0; i < state.size(); ++i) {
      if (!held_[i])
        continue;
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

Error Trainer::notHeld(size_t i, const char *function) const {
  const StateDesc &s = training_.state[i];
  return Error(std::string(function) + ": state '" + s.tensor.name + "' lives on pipeline stage " +
               std::to_string(s.pipelineStage) + "; this rank (stage " +
               std::to_string(training_.pipelineStage) + ") holds none of it");
}

void Trainer::getState(size_t i, void *out) const {
  const StateDesc &s = state(i, "get_state");
  if (!held_[i])
    throw notHeld(i, "get_state");
  if (!out && s.tensor.bytes)
    throw Error("get_state: out is null");
  if (s.tensor.bytes)
    std::memcpy(out, current_[i], s.tensor.bytes);
}

void Trainer::setState(size_t i, const void *data) {
  const StateDesc &s = state(i, "set_state");
  if (!held_[i])
    throw notHeld(i, "set_state");
  if (!data && s.tensor.bytes)
    throw Error("set_state: data is null");
  if (s.tensor.bytes)
    std::memcpy(current_[i], data, s.tensor.bytes);
}

// ---- Checkpoints -----------------------------------------------------------------------------

namespace {

/// A checkpoint file read and verified (structure, identifier, version).
struct CheckpointFile {
  std::string path;
  AlignedBytes bytes;
  const ck::Checkpoint *root = nullptr;
};

void readCheckpoint(const std::string &path, CheckpointFile &out) {
  out.path = path;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    throw Error("cannot open '" + path + "'");
  std::streamoff size = file.tellg();
  if (size < 0)
    throw Error("cannot read '" + path + "'");
  out.bytes.allocate((size_t)size);
  file.seekg(0);
  if (size > 0 && !file.read(reinterpret_cast<char *>(out.bytes.data), size))
    throw Error("cannot read '" + path + "'");
  std::string what = "checkpoint '" + path + "'";
  if (out.bytes.size < 8 || !ck::CheckpointBufferHasIdentifier(out.bytes.data))
    throw Error(what + " is not a tcc checkpoint (expected the file identifier \"TCCK\")");
  if (out.bytes.size >= (size_t(1) << 31))
    throw Error(what + " exceeds the 2 GiB FlatBuffers limit");
  flatbuffers::Verifier verifier(out.bytes.data, out.bytes.size, /*max_depth=*/16,
                                 /*max_tables=*/1u << 24);
  if (!ck::VerifyCheckpointBuffer(verifier))
    throw Error(what + " is damaged: its FlatBuffers structure does not verify");
  out.root = ck::GetCheckpoint(out.bytes.data);
  if (out.root->version() != ck::Version_Current)
    throw Error(what + " has version " + std::to_string(out.root->version()) +
                ", this runtime reads " + std::to_string((unsigned)ck::Version_Current));
}

std::string shardName(const std::string &path, int rank, int world) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  return base + ".shard" + std::to_string(rank) + "of" + std::to_string(world);
}

std::string siblingPath(const std::string &path, const std::string &name) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? name : path.substr(0, slash + 1) + name;
}

} // namespace

void Trainer::save(const std::string &path, const void *userData, size_t userSize) const {
  if (!userData && userSize)
    throw Error("user_data is null but user_size is " + std::to_string(userSize));
  int world = training_.worldSize, rank = training_.rank;
  // `blocks`: this rank's data with its place in the whole tensors; else (the manifest) names,
  // dtypes and whole shapes only.
  auto serialize = [&](bool blocks, const std::vector<std::string> &shards) {
    flatbuffers::FlatBufferBuilder fbb(1 << 16);
    std::vector<flatbuffers::Offset<ck::StateTensor>> state;
    for (size_t i = 0; i < training_.state.size(); ++i) {
      const StateDesc &sd = training_.state[i];
      const TensorDesc &t = sd.tensor;
      // A tensor another pipeline stage updates: an empty block (that stage's shard has it).
      bool notMine = blocks && world > 1 &&
                     (!held_[i] || (sd.pipelineStage >= 0 &&
                                    sd.pipelineStage != training_.pipelineStage));
      auto name = fbb.CreateString(t.name);
      auto shape = fbb.CreateVector(notMine  ? std::vector<int64_t>(t.shape.size(), 0)
                                    : blocks ? t.shape
                                             : sd.globalShape);
      flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
      if (blocks) {
        size_t bytes = notMine ? 0 : t.bytes;
        fbb.ForceVectorAlignment(bytes, 1, 64);
        data = fbb.CreateVector(static_cast<const uint8_t *>(current_[i]), bytes);
      }
      flatbuffers::Offset<flatbuffers::Vector<int64_t>> global, offset;
      if (blocks && world > 1) {
        global = fbb.CreateVector(sd.globalShape);
        offset = fbb.CreateVector(
            sd.splits.empty() ? std::vector<int64_t>(sd.globalShape.size(), 0)
                              : blockOffset(sd.globalShape, sd.splits, training_.meshSizes, rank));
      }
      state.push_back(ck::CreateStateTensor(fbb, name, (uint8_t)t.dtype, shape, data, global, offset));
    }
    auto stateVec = fbb.CreateVector(state);
    auto producer = fbb.CreateString("tccrt 0.1");
    auto user = fbb.CreateVector(static_cast<const uint8_t *>(userData), userSize);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> shardList;
    if (!shards.empty())
      shardList = fbb.CreateVectorOfStrings(shards);
    ck::FinishCheckpointBuffer(
        fbb, ck::CreateCheckpoint(fbb, ck::Version_Current, producer, stateVec, microSteps_,
                                  steps_, seed_, training_.gradAccumulation, user, shardList,
                                  (uint32_t)rank, (uint32_t)world));
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  };
  if (world <= 1) {
    std::vector<uint8_t> bytes = serialize(true, {});
    writeFileAtomically(path, bytes.data(), bytes.size());
    return;
  }
  // Every rank writes its shard; once all have, rank 0 commits the manifest (the checkpoint
  // is the old one until that rename).
  Communicator *comm = processCommunicator();
  std::vector<uint8_t> shard = serialize(true, {});
  writeFileAtomically(siblingPath(path, shardName(path, rank, world)), shard.data(), shard.size());
  comm->barrier("saving checkpoint '" + path + "'");
  if (rank == 0) {
    std::vector<std::string> names;
    for (int r = 0; r < world; ++r)
      names.push_back(shardName(path, r, world));
    std::vector<uint8_t> manifest = serialize(false, names);
    writeFileAtomically(path, manifest.data(), manifest.size());
  }
  comm->barrier("committing checkpoint '" + path + "'");
}

void Trainer::load(const std::string &path) {
  CheckpointFile manifest;
  readCheckpoint(path, manifest);
  const ck::Checkpoint *c = manifest.root;
  std::string what = "checkpoint '" + path + "'";
  if (c->grad_accumulation() != training_.gradAccumulation)
    throw Error(what + " was saved with grad_accumulation " +
                std::to_string(c->grad_accumulation()) + ", this artifact has " +
                std::to_string(training_.gradAccumulation));
  // The files holding blocks: the shards a manifest lists, or the checkpoint itself.
  std::vector<std::unique_ptr<CheckpointFile>> shards;
  if (const auto *list = c->shards()) {
    for (unsigned k = 0; k < list->size(); ++k) {
      std::string name = list->Get(k) ? list->Get(k)->str() : "";
      if (name.empty() || name.find('/') != std::string::npos)
        throw Error(what + " lists a shard without a plain file name");
      shards.push_back(std::make_unique<CheckpointFile>());
      readCheckpoint(siblingPath(path, name), *shards[k]);
      const ck::Checkpoint *s = shards[k]->root;
      if (s->micro_step() != c->micro_step() || s->steps() != c->steps() || s->seed() != c->seed())
        throw Error("checkpoint shard '" + shards[k]->path + "' belongs to another save than " +
                    what + " (its step differs)");
    }
  }
  std::vector<const ck::Checkpoint *> sources;
  std::vector<std::string> sourceNames;
  if (shards.empty()) {
    sources.push_back(c);
    sourceNames.push_back(what);
  }
  for (const auto &f : shards) {
    sources.push_back(f->root);
    sourceNames.push_back("checkpoint shard '" + f->path + "'");
  }
  // This rank's block of every state tensor, assembled from the blocks that overlap it; the
  // trainer is changed only once every tensor is complete.
  size_t count = training_.state.size();
  std::vector<std::vector<uint8_t>> blocks(count);
  for (size_t i = 0; i < count; ++i) {
    const StateDesc &sd = training_.state[i];
    const TensorDesc &want = sd.tensor;
    bool held = held_[i];
    std::vector<int64_t> myOffset =
        sd.splits.empty() ? std::vector<int64_t>(sd.globalShape.size(), 0)
                          : blockOffset(sd.globalShape, sd.splits, training_.meshSizes,
                                        training_.rank);
    blocks[i].resize(held ? want.bytes : 0);
    int64_t elements = 1;
    for (int64_t d : want.shape)
      elements *= d;
    std::vector<uint8_t> covered(std::max<int64_t>(elements, 1), 0);
    for (size_t k = 0; k < sources.size(); ++k) {
      const auto *state = sources[k]->state();
      std::string where = sourceNames[k] + " state " + std::to_string(i);
      if (!state || state->size() != count)
        throw Error(sourceNames[k] + " has " + std::to_string(state ? state->size() : 0) +
                    " state tensors, the artifact " + std::to_string(count));
      const ck::StateTensor *t = state->Get((unsigned)i);
      if (!t || !t->name() || t->name()->str() != want.name)
        throw Error(where + " is '" + (t && t->name() ? t->name()->str() : "") +
                    "', the artifact's is '" + want.name + "'");
      where += " '" + want.name + "'";
      tccrt_dtype dtype = checkDType(t->dtype(), where);
      Shape shape = readShape(t->shape());
      Shape global = t->global_shape() ? readShape(t->global_shape()) : shape;
      Shape offset = t->offset() ? readShape(t->offset()) : Shape(shape.size(), 0);
      if (dtype != want.dtype || global != sd.globalShape)
        throw Error(where + " is " + shapeString(dtype, global) + ", the artifact's is " +
                    shapeString(want.dtype, sd.globalShape));
      if (offset.size() != global.size() || shape.size() != global.size())
        throw Error(where + ": its block does not fit its shape");
      for (size_t d = 0; d < global.size(); ++d)
        if (offset[d] < 0 || shape[d] < 0 || shape[d] > global[d] ||
            offset[d] > global[d] - shape[d]) // (no overflow: global[d] - shape[d] >= 0)
          throw Error(where + ": its block lies outside the tensor");
      size_t bytes = tensorBytes(dtype, shape, where);
      size_t got = t->data() ? t->data()->size() : 0;
      if (got != bytes)
        throw Error(where + " has " + std::to_string(got) + " bytes of data, its block takes " +
                    std::to_string(bytes));
      if (bytes && held)
        copyOverlap(t->data()->Data(), shape, offset, blocks[i].data(), want.shape, myOffset,
                    dtypeSize(dtype), covered.data());
    }
    for (int64_t e = 0; held && e < elements; ++e)
      if (!covered[e])
        throw Error(what + " does not hold all of state '" + want.name + "' (element " +
                    std::to_string(e) + " of this rank's block is in no shard)");
  }
  // Verified: only now change the trainer.
  for (size_t i = 0; i < count; ++i)
    if (held_[i] && training_.state[i].tensor.bytes)
      std::memcpy(current_[i], blocks[i].data(), training_.state[i].tensor.bytes);
  microSteps_ = c->micro_step();
  steps_ = c->steps();
  seed_ = c->seed();
  if (const auto *user = c->user_data())
    userData_.assign(user->begin(), user->end());
  else
    userData_.clear();
}

} // namespace tcc::rt
