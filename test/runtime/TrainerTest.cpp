//===- TrainerTest.cpp - Training artifacts: loader, trainer, checkpoints -===//
//
// Training artifacts built by hand (TrainingArtifactBuilder) over the test kernels train16,
// accumulate16 and eval16 (TestKernels.cpp: elementwise regression w * x ~ y over 16 features,
// plain SGD with a gradient accumulator, a step counter and the last random key as state),
// checked against a reference written here.
#include "Program.h"
#include "TestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

using namespace tcc::rt::test;

namespace {

using T = ArtifactBuilder::Tensor;
using TB = TrainingArtifactBuilder;

enum StateIndex : uint32_t { kW, kAcc, kStep, kKey };

TB::Binding data() { return {fb::BindingRole_Data}; }
TB::Binding state(uint32_t i) { return {fb::BindingRole_State, i}; }
TB::Binding role(fb::BindingRole r) { return {r}; }

/// The test model with `accumulation` micro-batches per update. State: w f32[16] (random),
/// w.acc f32[16] (zeros), step i64[], last_key u64[]; batch: x f32[16], y f32[16].
TB trainingArtifact(uint32_t accumulation) {
  TB t;
  t.gradAccumulation = accumulation;
  t.addState("w", fb::StateKind_Parameter, fb::DType_F32, {16}, randomFloats(16, 3));
  t.addState("w.acc", fb::StateKind_GradAccumulator, fb::DType_F32, {16},
             std::vector<float>(16, 0.0f));
  t.addState("step", fb::StateKind_Step, fb::DType_I64, {}, std::vector<int64_t>{0});
  t.addState("last_key", fb::StateKind_Buffer, fb::DType_U64, {}, std::vector<uint64_t>{0});
  const T f16{"", fb::DType_F32, {16}}, i64{"", fb::DType_I64, {}}, u64{"", fb::DType_U64, {}},
      f0{"", fb::DType_F32, {}}, l16{"", fb::DType_I64, {16}};
  {
    TB::Entry e{"train_step", {}, {}, {}};
    ArtifactBuilder &a = e.program;
    std::vector<uint32_t> args = {
        a.input(fb::DType_F32, {16}, "w"),       a.input(fb::DType_F32, {16}, "w.acc"),
        a.input(fb::DType_I64, {}, "step"),      a.input(fb::DType_F32, {16}, "x"),
        a.input(fb::DType_F32, {16}, "y"),       a.input(fb::DType_F32, {}, "lr"),
        a.input(fb::DType_U64, {}, "key"),       a.output(fb::DType_F32, {16}, "w'"),
        a.output(fb::DType_F32, {16}, "w.acc'"), a.output(fb::DType_I64, {}, "step'"),
        a.output(fb::DType_U64, {}, "last_key'"), a.output(fb::DType_F32, {}, "loss")};
    // w' goes through the arena (bytes 64..128) and a copy: entries share one arena.
    uint32_t wOut = args[7];
    args[7] = a.arena(64, fb::DType_F32, {16});
    a.launch(a.kernel("train16", {f16, f16, i64, f16, f16, f0, u64, f16, f16, i64, u64, f0}),
             args);
    a.copy(args[7], wOut);
    e.inputs = {state(kW), state(kAcc), state(kStep), data(), data(),
                role(fb::BindingRole_LearningRate), role(fb::BindingRole_RngKey)};
    e.outputs = {state(kW), state(kAcc), state(kStep), state(kKey), role(fb::BindingRole_Loss)};
    t.entries.push_back(std::move(e));
  }
  if (accumulation > 1) {
    TB::Entry e{"accumulate_step", {}, {}, {}};
    ArtifactBuilder &a = e.program;
    std::vector<uint32_t> args = {
        a.input(fb::DType_F32, {16}, "w"),        a.input(fb::DType_F32, {16}, "w.acc"),
        a.input(fb::DType_F32, {16}, "x"),        a.input(fb::DType_F32, {16}, "y"),
        a.input(fb::DType_U64, {}, "key"),        a.output(fb::DType_F32, {16}, "w.acc'"),
        a.output(fb::DType_U64, {}, "last_key'"), a.output(fb::DType_F32, {}, "loss")};
    a.launch(a.kernel("accumulate16", {f16, f16, f16, f16, u64, f16, u64, f0}), args);
    e.inputs = {state(kW), state(kAcc), data(), data(), role(fb::BindingRole_RngKey)};
    e.outputs = {state(kAcc), state(kKey), role(fb::BindingRole_Loss)};
    t.entries.push_back(std::move(e));
  }
  {
    TB::Entry e{"eval", {}, {}, {}};
    ArtifactBuilder &a = e.program;
    std::vector<uint32_t> args = {
        a.input(fb::DType_F32, {16}, "w"), a.input(fb::DType_F32, {16}, "x"),
        a.input(fb::DType_F32, {16}, "y"), a.output(fb::DType_F32, {16}, "loss"),
        a.output(fb::DType_I64, {16}, "above")};
    uint32_t lossOut = args[3];
    args[3] = a.arena(0, fb::DType_F32, {16}); // and eval's temporaries bytes 0..64
    a.launch(a.kernel("eval16", {f16, f16, f16, f16, l16}), args);
    a.copy(args[3], lossOut);
    e.inputs = {state(kW), data(), data()};
    e.outputs = {data(), data()};
    t.entries.push_back(std::move(e));
  }
  return t;
}

/// What the trainer must compute, written out plainly.
struct Reference {
  std::vector<float> w, acc = std::vector<float>(16, 0.0f);
  int64_t step = 0;
  uint64_t microSteps = 0, lastKey = 0;
  uint32_t accumulation;
  uint64_t seed;

  Reference(uint32_t accumulation, uint64_t seed)
      : w(randomFloats(16, 3)), accumulation(accumulation), seed(seed) {}

  float microStep(const std::vector<float> &x, const std::vector<float> &y, float lr) {
    float g[16], sum = 0;
    for (int i = 0; i < 16; ++i) {
      float d = w[i] * x[i] - y[i];
      g[i] = 2 * d * x[i] / 16;
      sum += d * d;
    }
    lastKey = tccrt_rng_key(seed, microSteps);
    if (++microSteps % accumulation == 0) {
      for (int i = 0; i < 16; ++i) {
        w[i] -= lr * (acc[i] + g[i]);
        acc[i] = 0;
      }
      ++step;
    } else {
      for (int i = 0; i < 16; ++i)
        acc[i] += g[i];
    }
    return sum / 16;
  }
};

struct Batch {
  std::vector<float> x, y;
  std::vector<const void *> pointers() const { return {x.data(), y.data()}; }
};

Batch randomBatch(unsigned seed) { return {randomFloats(16, seed), randomFloats(16, seed + 1000)}; }

/// A loaded program and a trainer on it, through the C API.
struct Loaded {
  tccrt_program *program = nullptr;
  tccrt_trainer *trainer = nullptr;
  explicit Loaded(const std::vector<uint8_t> &bytes, uint64_t seed = 42, int threads = 1) {
    tccrt_options options{threads};
    EXPECT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), &options, &program), TCCRT_OK)
        << tccrt_last_error();
    if (program) {
      EXPECT_EQ(tccrt_trainer_create(program, seed, &trainer), TCCRT_OK) << tccrt_last_error();
    }
  }
  ~Loaded() {
    tccrt_trainer_free(trainer);
    tccrt_program_free(program);
  }
  template <class V> std::vector<V> get(size_t i) const {
    tccrt_tensor_info info;
    EXPECT_EQ(tccrt_trainer_state_info(trainer, i, &info, nullptr), TCCRT_OK);
    std::vector<V> out(info.bytes / sizeof(V));
    EXPECT_EQ(tccrt_trainer_get_state(trainer, i, out.data()), TCCRT_OK) << tccrt_last_error();
    return out;
  }
  /// Every state tensor's bytes.
  std::vector<std::vector<uint8_t>> snapshot() const {
    std::vector<std::vector<uint8_t>> out;
    for (size_t i = 0; i < tccrt_trainer_num_state(trainer); ++i)
      out.push_back(get<uint8_t>(i));
    return out;
  }
  float step(const Batch &b, float lr) {
    float loss = -1;
    auto in = b.pointers();
    EXPECT_EQ(tccrt_trainer_step(trainer, in.data(), lr, &loss), TCCRT_OK) << tccrt_last_error();
    return loss;
  }
};

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/tccrt-trainer-" + std::to_string(::getpid()) + "-" + name;
}

//===--- Stepping ---------------------------------------------------------===//

TEST(Trainer, StepsMatchTheReference) {
  for (uint32_t accumulation : {1u, 3u}) {
    SCOPED_TRACE("grad_accumulation " + std::to_string(accumulation));
    Loaded t(trainingArtifact(accumulation).finish(), /*seed=*/7);
    ASSERT_TRUE(t.trainer);
    EXPECT_EQ(tccrt_is_training(t.program), 1);
    EXPECT_STREQ(tccrt_training_config(t.program), "{\"loss\": \"test\"}");
    EXPECT_EQ(tccrt_trainer_grad_accumulation(t.trainer), (int)accumulation);
    ASSERT_EQ(tccrt_trainer_num_batch_tensors(t.trainer), 2u);
    tccrt_tensor_info info;
    ASSERT_EQ(tccrt_trainer_batch_info(t.trainer, 1, &info), TCCRT_OK);
    EXPECT_STREQ(info.name, "y");
    EXPECT_EQ(info.bytes, 64u);
    ASSERT_EQ(tccrt_trainer_num_state(t.trainer), 4u);
    tccrt_state_kind kind;
    ASSERT_EQ(tccrt_trainer_state_info(t.trainer, 2, &info, &kind), TCCRT_OK);
    EXPECT_STREQ(info.name, "step");
    EXPECT_EQ(kind, TCCRT_STATE_STEP);
    EXPECT_EQ(info.rank, 0);

    Reference ref(accumulation, 7);
    EXPECT_EQ(t.get<float>(kW), ref.w) << "initial state from the artifact";
    for (unsigned m = 0; m < 7; ++m) {
      Batch b = randomBatch(100 + m);
      std::vector<float> wBefore = t.get<float>(kW);
      float lr = 0.1f + 0.05f * m;
      float loss = t.step(b, lr);
      float want = ref.microStep(b.x, b.y, lr);
      EXPECT_NEAR(loss, want, 1e-6 * std::fabs(want) + 1e-7) << "micro-step " << m;
      EXPECT_EQ(tccrt_trainer_micro_steps(t.trainer), m + 1);
      EXPECT_EQ(tccrt_trainer_steps(t.trainer), (m + 1) / accumulation);
      expectClose(t.get<float>(kW).data(), ref.w, 1e-5, 1e-6, "w");
      expectClose(t.get<float>(kAcc).data(), ref.acc, 1e-5, 1e-6, "w.acc");
      EXPECT_EQ(t.get<int64_t>(kStep)[0], ref.step);
      EXPECT_EQ(t.get<uint64_t>(kKey)[0], tccrt_rng_key(7, m)) << "the key of micro-step " << m;
      // Accumulating micro-steps leave the parameters exactly as they were.
      if ((m + 1) % accumulation != 0) {
        EXPECT_EQ(t.get<float>(kW), wBefore);
      }
    }
  }
}

TEST(Trainer, EntriesShareOneArena) {
  auto bytes = trainingArtifact(2).finish();
  auto program = tcc::rt::Program::load(bytes.data(), bytes.size(), 1);
  const tcc::rt::TrainingDesc *training = program->training();
  ASSERT_TRUE(training);
  EXPECT_EQ(training->trainStep->program->arenaBytes(), 128u);
  EXPECT_EQ(training->eval->program->arenaBytes(), 64u);
  EXPECT_EQ(program->arenaBytes(), 128u) << "the largest entry's";
}

TEST(Trainer, RandomKeysPerMicroStepReproducible) {
  auto bytes = trainingArtifact(2).finish();
  auto keys = [&](uint64_t seed) {
    Loaded t(bytes, seed);
    std::vector<uint64_t> out;
    for (unsigned m = 0; m < 6; ++m) {
      t.step(randomBatch(m), 0.01f);
      out.push_back(t.get<uint64_t>(kKey)[0]);
    }
    return out;
  };
  std::vector<uint64_t> a = keys(5), b = keys(5), c = keys(6);
  EXPECT_EQ(a, b) << "same seed, same keys";
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NE(a[i], c[i]) << "another seed, other keys";
    for (size_t j = 0; j < i; ++j)
      EXPECT_NE(a[i], a[j]) << "micro-steps " << j << " and " << i << " share a key";
  }
  // The documented mix.
  auto splitmix = [](uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  EXPECT_EQ(a[3], splitmix(splitmix(5) ^ 3));
}

TEST(Trainer, EvalLeavesTheStateUnchanged) {
  Loaded t(trainingArtifact(2).finish());
  t.step(randomBatch(1), 0.5f); // accumulator non-zero now
  auto before = t.snapshot();
  ASSERT_EQ(tccrt_trainer_num_eval_outputs(t.trainer), 2u);
  tccrt_tensor_info info;
  ASSERT_EQ(tccrt_trainer_eval_info(t.trainer, 1, &info), TCCRT_OK);
  EXPECT_STREQ(info.name, "above");
  EXPECT_EQ(info.dtype, TCCRT_I64);
  EXPECT_EQ(tccrt_trainer_eval_info(t.trainer, 2, &info), TCCRT_ERROR);
  Batch b = randomBatch(9);
  std::vector<float> loss(16);
  std::vector<int64_t> above(16);
  void *outs[] = {loss.data(), above.data()};
  auto in = b.pointers();
  ASSERT_EQ(tccrt_trainer_eval(t.trainer, in.data(), outs), TCCRT_OK) << tccrt_last_error();
  EXPECT_EQ(t.snapshot(), before);
  EXPECT_EQ(tccrt_trainer_micro_steps(t.trainer), 1u);
  std::vector<float> w = t.get<float>(kW);
  for (int i = 0; i < 16; ++i) {
    float d = w[i] * b.x[i] - b.y[i];
    EXPECT_FLOAT_EQ(loss[i], d * d);
    EXPECT_EQ(above[i], d > 0 ? 1 : 0);
  }
  EXPECT_EQ(tccrt_trainer_eval(t.trainer, in.data(), nullptr), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("outputs is null"), std::string::npos);
}

TEST(Trainer, SetStateIsUsedByTheNextStep) {
  Loaded t(trainingArtifact(1).finish());
  std::vector<float> w = randomFloats(16, 77);
  ASSERT_EQ(tccrt_trainer_set_state(t.trainer, kW, w.data()), TCCRT_OK);
  EXPECT_EQ(t.get<float>(kW), w);
  Reference ref(1, 42);
  ref.w = w;
  Batch b = randomBatch(3);
  t.step(b, 0.25f);
  ref.microStep(b.x, b.y, 0.25f);
  expectClose(t.get<float>(kW).data(), ref.w, 1e-5, 1e-6, "w after set_state and a step");
  EXPECT_EQ(tccrt_trainer_set_state(t.trainer, 4, w.data()), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("state 4 out of range"), std::string::npos);
  EXPECT_EQ(tccrt_trainer_get_state(t.trainer, 0, nullptr), TCCRT_ERROR);
}

TEST(Trainer, FailedStepLeavesTheStateUnchanged) {
  Loaded t(trainingArtifact(1).finish());
  t.step(randomBatch(1), 0.1f);
  auto before = t.snapshot();
  Batch b = randomBatch(2);
  const void *in[] = {b.x.data(), nullptr};
  float loss;
  EXPECT_EQ(tccrt_trainer_step(t.trainer, in, 0.1f, &loss), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("train_step: input 4 ('y') is null"),
            std::string::npos)
      << tccrt_last_error();
  EXPECT_EQ(tccrt_trainer_step(t.trainer, nullptr, 0.1f, &loss), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("batch is null"), std::string::npos);
  EXPECT_EQ(t.snapshot(), before);
  EXPECT_EQ(tccrt_trainer_micro_steps(t.trainer), 1u);
}

TEST(Trainer, CppWrapper) {
  auto bytes = trainingArtifact(2).finish();
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1);
  EXPECT_TRUE(program.isTraining());
  tccrt::Trainer trainer(program, 3);
  std::vector<tccrt::Tensor> batch = trainer.makeBatch();
  ASSERT_EQ(batch.size(), 2u);
  Batch b = randomBatch(5);
  std::memcpy(batch[0].data(), b.x.data(), 64);
  std::memcpy(batch[1].data(), b.y.data(), 64);
  Reference ref(2, 3);
  for (int m = 0; m < 4; ++m)
    EXPECT_NEAR(trainer.step(batch, 0.2f), ref.microStep(b.x, b.y, 0.2f), 1e-6);
  EXPECT_EQ(trainer.steps(), 2u);
  tccrt::Tensor w = trainer.getState(kW);
  expectClose(w.data<float>(), ref.w, 1e-5, 1e-6, "w");
  std::vector<tccrt::Tensor> out = trainer.eval(batch);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{16}));
  batch.pop_back();
  EXPECT_THROW(trainer.step(batch, 0.1f), tccrt::Error);
  EXPECT_THROW(trainer.setState(kW, tccrt::Tensor(TCCRT_F32, {15})), tccrt::Error);
}

//===--- Checkpoints ------------------------------------------------------===//

TEST(TrainerCheckpoint, ResumedRunContinuesBitIdentically) {
  auto bytes = trainingArtifact(3).finish();
  std::string path = tempPath("resume.tcck");
  std::vector<Batch> batches;
  for (unsigned m = 0; m < 8; ++m)
    batches.push_back(randomBatch(200 + m));
  std::vector<float> lossesA;
  Loaded a(bytes, /*seed=*/11);
  for (unsigned m = 0; m < 8; ++m) {
    if (m == 4) { // mid-accumulation: the accumulator holds one micro-batch
      const char user[] = "epoch 1, batch 4";
      ASSERT_EQ(tccrt_trainer_save(a.trainer, path.c_str(), user, sizeof user), TCCRT_OK)
          << tccrt_last_error();
    }
    lossesA.push_back(a.step(batches[m], 0.3f));
  }
  Loaded b(bytes, /*seed=*/999); // the checkpoint's seed replaces this one
  const void *data = reinterpret_cast<const void *>(1);
  size_t size = 1;
  tccrt_trainer_user_data(b.trainer, &data, &size);
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(size, 0u);
  ASSERT_EQ(tccrt_trainer_load(b.trainer, path.c_str()), TCCRT_OK) << tccrt_last_error();
  EXPECT_EQ(tccrt_trainer_micro_steps(b.trainer), 4u);
  EXPECT_EQ(tccrt_trainer_steps(b.trainer), 1u);
  EXPECT_EQ(tccrt_trainer_seed(b.trainer), 11u);
  tccrt_trainer_user_data(b.trainer, &data, &size);
  ASSERT_EQ(size, sizeof "epoch 1, batch 4");
  EXPECT_STREQ(static_cast<const char *>(data), "epoch 1, batch 4");
  for (unsigned m = 4; m < 8; ++m) {
    float loss = b.step(batches[m], 0.3f);
    EXPECT_EQ(std::memcmp(&loss, &lossesA[m], 4), 0) << "micro-step " << m;
  }
  EXPECT_EQ(b.snapshot(), a.snapshot()) << "the resumed run ends in the same state, bit for bit";
  EXPECT_EQ(tccrt_trainer_steps(b.trainer), tccrt_trainer_steps(a.trainer));
  // The C++ wrapper reads the same file.
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1);
  tccrt::Trainer c(program, 0);
  c.load(path);
  EXPECT_EQ(c.microSteps(), 4u);
  std::vector<uint8_t> user = c.userData();
  EXPECT_EQ(user.size(), sizeof "epoch 1, batch 4");
  c.save(path); // overwrites atomically, no user data
  c.load(path);
  EXPECT_TRUE(c.userData().empty());
  std::remove(path.c_str());
}

TEST(TrainerCheckpoint, BadCheckpointsAreRejectedAndChangeNothing) {
  auto bytes = trainingArtifact(3).finish();
  std::string path = tempPath("good.tcck"), bad = tempPath("bad.tcck");
  Loaded a(bytes, 1);
  a.step(randomBatch(1), 0.1f);
  ASSERT_EQ(tccrt_trainer_save(a.trainer, path.c_str(), "u", 1), TCCRT_OK) << tccrt_last_error();
  std::vector<uint8_t> good = readFile(path);

  Loaded b(bytes, 2);
  b.step(randomBatch(2), 0.1f);
  b.step(randomBatch(3), 0.1f);
  auto before = b.snapshot();
  auto expectRejected = [&](const std::vector<uint8_t> &file, const std::string &expected) {
    FILE *f = std::fopen(bad.c_str(), "wb");
    ASSERT_TRUE(f);
    if (!file.empty())
      std::fwrite(file.data(), 1, file.size(), f);
    std::fclose(f);
    EXPECT_EQ(tccrt_trainer_load(b.trainer, bad.c_str()), TCCRT_ERROR);
    std::string message = tccrt_last_error();
    EXPECT_NE(message.find(expected), std::string::npos)
        << "message: " << message << "\nexpected to contain: " << expected;
    EXPECT_EQ(b.snapshot(), before);
    EXPECT_EQ(tccrt_trainer_micro_steps(b.trainer), 2u);
    EXPECT_EQ(tccrt_trainer_seed(b.trainer), 2u);
  };
  expectRejected({}, "is not a tcc checkpoint");
  expectRejected(bytes, "is not a tcc checkpoint"); // an artifact is not a checkpoint
  expectRejected(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2),
                 "does not verify");

  // Checkpoints of other artifacts: another state name, shape, dtype, count, accumulation.
  auto saveOf = [&](TB t) {
    Loaded other(t.finish());
    std::string p = tempPath("other.tcck");
    EXPECT_EQ(tccrt_trainer_save(other.trainer, p.c_str(), nullptr, 0), TCCRT_OK);
    std::vector<uint8_t> file = readFile(p);
    std::remove(p.c_str());
    return file;
  };
  {
    TB t = trainingArtifact(3);
    t.state[kKey].name = "key";
    expectRejected(saveOf(t), "state 3 is 'key', the artifact's is 'last_key'");
  }
  {
    // An extra, unbound state tensor in both, with another shape or dtype in one.
    TB mine = trainingArtifact(3), other = trainingArtifact(3);
    mine.addState("extra", fb::StateKind_Buffer, fb::DType_F32, {2}, std::vector<float>{1, 2});
    other.addState("extra", fb::StateKind_Buffer, fb::DType_F32, {1, 2},
                   std::vector<float>{1, 2});
    Loaded c(mine.finish());
    std::string p = tempPath("extra.tcck");
    std::vector<uint8_t> file = saveOf(other);
    FILE *f = std::fopen(p.c_str(), "wb");
    std::fwrite(file.data(), 1, file.size(), f);
    std::fclose(f);
    EXPECT_EQ(tccrt_trainer_load(c.trainer, p.c_str()), TCCRT_ERROR);
    EXPECT_NE(std::string(tccrt_last_error())
                  .find("state 4 'extra' is f32[1, 2], the artifact's is f32[2]"),
              std::string::npos)
        << tccrt_last_error();
    TB other2 = trainingArtifact(3);
    other2.addState("extra", fb::StateKind_Buffer, fb::DType_I32, {2}, std::vector<int32_t>{1, 2});
    file = saveOf(other2);
    f = std::fopen(p.c_str(), "wb");
    std::fwrite(file.data(), 1, file.size(), f);
    std::fclose(f);
    EXPECT_EQ(tccrt_trainer_load(c.trainer, p.c_str()), TCCRT_ERROR);
    EXPECT_NE(std::string(tccrt_last_error()).find("is i32[2], the artifact's is f32[2]"),
              std::string::npos)
        << tccrt_last_error();
    std::remove(p.c_str());
    expectRejected(saveOf(mine), "has 5 state tensors, the artifact 4");
  }
  expectRejected(saveOf(trainingArtifact(2)),
                 "was saved with grad_accumulation 2, this artifact has 3");

  // Flipped bytes: rejected cleanly, or (a flipped data byte) loaded whole.
  std::mt19937 rng(77);
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> damaged = good;
    damaged[rng() % damaged.size()] ^= (uint8_t)(1 + rng() % 255);
    FILE *f = std::fopen(bad.c_str(), "wb");
    std::fwrite(damaged.data(), 1, damaged.size(), f);
    std::fclose(f);
    if (tccrt_trainer_load(b.trainer, bad.c_str()) != TCCRT_OK) {
      ++rejected;
      EXPECT_STRNE(tccrt_last_error(), "");
      EXPECT_EQ(b.snapshot(), before);
    } else {
      before = b.snapshot(); // whatever loaded is the state now
      b.step(randomBatch(4), 0.1f); // and it runs
      before = b.snapshot();
    }
  }
  EXPECT_GT(rejected, 0);

  EXPECT_EQ(tccrt_trainer_load(b.trainer, "/nonexistent/x.tcck"), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("cannot open '/nonexistent/x.tcck'"),
            std::string::npos);
  EXPECT_EQ(tccrt_trainer_save(b.trainer, "/nonexistent/x.tcck", nullptr, 0), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("cannot write"), std::string::npos);
  EXPECT_EQ(tccrt_trainer_save(b.trainer, path.c_str(), nullptr, 3), TCCRT_ERROR);
  EXPECT_EQ(readFile(path), good) << "a failed save leaves the old checkpoint";
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

//===--- Verification -----------------------------------------------------===//

void expectRejected(const std::vector<uint8_t> &bytes, const std::string &expected) {
  tccrt_program *p = reinterpret_cast<tccrt_program *>(0x1);
  EXPECT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_ERROR);
  EXPECT_EQ(p, nullptr);
  std::string message = tccrt_last_error();
  EXPECT_NE(message.find(expected), std::string::npos)
      << "message: " << message << "\nexpected to contain: " << expected;
}

TEST(TrainerVerify, RejectsBadTrainingArtifacts) {
  auto broken = [](auto &&edit) {
    TB t = trainingArtifact(2);
    edit(t);
    return t.finish();
  };
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs.pop_back(); }),
                 "training entry 'train_step' has 6 input bindings for 7 program inputs");
  expectRejected(broken([](TB &t) { t.entry("eval")->outputs.push_back(data()); }),
                 "training entry 'eval' has 3 output bindings for 2 program outputs");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[0].state = 4; }),
                 "input 0 ('w', f32[16]) is bound to State 4; there are 4 state tensors");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[0].state = kAcc + 1; }),
                 "is bound to State 'step', which is i64[]");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[5] = role(fb::BindingRole_RngKey); }),
                 "input 5 ('lr', f32[]) is bound to RngKey, which must be u64[]");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[6] = role(fb::BindingRole_LearningRate); }),
                 "input 6 ('key', u64[]) is bound to LearningRate, which must be f32[]");
  expectRejected(broken([](TB &t) { t.entry("accumulate_step")->outputs[2] = data(); }),
                 "is bound to Data: only eval returns data to the caller");
  expectRejected(broken([](TB &t) {
                   t.entry("accumulate_step")->outputs[1] = role(fb::BindingRole_Loss);
                 }),
                 "output 1 ('last_key'', u64[]) is bound to Loss, which must be f32[]");
  expectRejected(broken([](TB &t) { t.entry("train_step")->outputs[1] = state(kW); }),
                 "output 1 ('w.acc'', f32[16]) is bound to State 'w', which another output "
                 "already updates");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[3] = role(fb::BindingRole_Loss); }),
                 "is bound to Loss, which only outputs can be");
  expectRejected(broken([](TB &t) { t.entry("eval")->outputs[0] = role(fb::BindingRole_Loss); }),
                 "eval returns its per-sample loss as Data");
  expectRejected(broken([](TB &t) { t.entry("train_step")->inputs[3].role = (fb::BindingRole)9; }),
                 "has an invalid role (9)");
  expectRejected(broken([](TB &t) {
                   // The batch's names must agree across entries.
                   t.entry("eval")->program.inputs[1].name = "features";
                 }),
                 "training entry 'eval' takes the batch (features: f32[16], y: f32[16]), entry "
                 "'train_step' takes (x: f32[16], y: f32[16])");
  expectRejected(broken([](TB &t) { t.entries.erase(t.entries.begin() + 1); }),
                 "grad_accumulation 2 but no 'accumulate_step' entry");
  expectRejected(broken([](TB &t) { t.gradAccumulation = 1; }),
                 "grad_accumulation 1 has an 'accumulate_step' entry");
  expectRejected(broken([](TB &t) { t.gradAccumulation = 0; }), "grad_accumulation is 0");
  expectRejected(broken([](TB &t) { t.entries.pop_back(); }),
                 "training artifact without a 'eval' entry");
  expectRejected(broken([](TB &t) { t.entries.erase(t.entries.begin()); }),
                 "training artifact without a 'train_step' entry");
  expectRejected(broken([](TB &t) { t.entries[1].name = "predict"; }),
                 "training entry 'predict': unknown entry point");
  expectRejected(broken([](TB &t) { t.entries[1].name = "train_step"; }),
                 "training entry 'train_step' appears twice");
  expectRejected(broken([](TB &t) { t.state[kAcc].initialOffset = 32; }),
                 "state 1 'w.acc' has initial_offset 32, not a multiple of 64");
  expectRejected(broken([](TB &t) { t.state[kKey].initialOffset = 1 << 20; }),
                 "ends past initial_data");
  expectRejected(broken([](TB &t) { t.state[kKey].name = "w"; }),
                 "two state tensors have this name");
  expectRejected(broken([](TB &t) { t.state[kKey].dtype = (fb::DType)200; }),
                 "state 3 'last_key' has an invalid dtype (200)");
  expectRejected(broken([](TB &t) { t.root.input(fb::DType_F32, {4}); }),
                 "root program has inputs, outputs or launches");
  expectRejected(broken([](TB &t) {
                   // Entry programs are verified like root programs.
                   t.entry("eval")->program.kernels[0].params[0].shape = {8};
                 }),
                 "training entry 'eval': launch 0 (kernel 'eval16') passes buffer 0 (f32[16]) "
                 "as parameter 0, which is f32[8]");
  expectRejected(broken([](TB &t) { t.entry("eval")->program.version = 9; }),
                 "training entry 'eval': artifact version 9");
}

TEST(TrainerVerify, TrainingAndInferenceApisDoNotMix) {
  auto bytes = trainingArtifact(1).finish();
  tccrt_program *p = nullptr;
  ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_OK)
      << tccrt_last_error();
  EXPECT_EQ(tccrt_num_inputs(p), 0u);
  EXPECT_EQ(tccrt_run(p, nullptr, nullptr), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("training artifact: it runs through the trainer "
                                                 "API"),
            std::string::npos)
      << tccrt_last_error();
  EXPECT_EQ(tccrt_set_num_threads(p, 2), TCCRT_OK);
  tccrt_program_free(p);

  // An inference artifact has no trainer.
  ArtifactBuilder a;
  a.copy(a.input(fb::DType_F32, {4}), a.output(fb::DType_F32, {4}));
  bytes = a.finish();
  ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_OK);
  EXPECT_EQ(tccrt_is_training(p), 0);
  EXPECT_STREQ(tccrt_training_config(p), "");
  tccrt_trainer *t = reinterpret_cast<tccrt_trainer *>(0x1);
  EXPECT_EQ(tccrt_trainer_create(p, 1, &t), TCCRT_ERROR);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(std::string(tccrt_last_error()).find("not a training artifact"), std::string::npos);
  tccrt_program_free(p);

  EXPECT_EQ(tccrt_trainer_create(nullptr, 1, &t), TCCRT_ERROR);
  EXPECT_EQ(tccrt_trainer_step(nullptr, nullptr, 0, nullptr), TCCRT_ERROR);
  EXPECT_EQ(tccrt_trainer_num_state(nullptr), 0u);
  EXPECT_EQ(tccrt_trainer_micro_steps(nullptr), 0u);
  tccrt_trainer_free(nullptr);
}

//===--- Damaged training artifacts ---------------------------------------===//

/// Loads a possibly damaged training artifact; when it loads, trains and evaluates on it (which
/// may fail, must not crash). Returns whether it loaded.
bool loadAndTrain(const std::vector<uint8_t> &bytes) {
  tccrt_program *p = nullptr;
  tccrt_options one{1};
  if (tccrt_load_buffer(bytes.data(), bytes.size(), &one, &p) != TCCRT_OK) {
    EXPECT_EQ(p, nullptr);
    EXPECT_STRNE(tccrt_last_error(), "");
    return false;
  }
  tccrt_trainer *t = nullptr;
  if (tccrt_trainer_create(p, 1, &t) == TCCRT_OK) {
    std::vector<std::vector<uint8_t>> batch(tccrt_trainer_num_batch_tensors(t));
    std::vector<const void *> in;
    for (size_t i = 0; i < batch.size(); ++i) {
      tccrt_tensor_info info;
      EXPECT_EQ(tccrt_trainer_batch_info(t, i, &info), TCCRT_OK);
      batch[i].assign(std::min<size_t>(info.bytes, 1 << 24), 0x3f);
      in.push_back(info.bytes <= (1 << 24) ? batch[i].data() : nullptr);
    }
    std::vector<std::vector<uint8_t>> out(tccrt_trainer_num_eval_outputs(t));
    std::vector<void *> outPtr;
    for (size_t i = 0; i < out.size(); ++i) {
      tccrt_tensor_info info;
      EXPECT_EQ(tccrt_trainer_eval_info(t, i, &info), TCCRT_OK);
      out[i].assign(std::min<size_t>(info.bytes, 1 << 24), 0);
      outPtr.push_back(info.bytes <= (1 << 24) ? out[i].data() : nullptr);
    }
    float loss;
    for (int s = 0; s < 3; ++s)
      tccrt_trainer_step(t, in.data(), 0.1f, &loss);
    tccrt_trainer_eval(t, in.data(), outPtr.data());
    tccrt_trainer_free(t);
  }
  tccrt_program_free(p);
  return true;
}

TEST(TrainerDamaged, TruncatedAndFlippedTrainingArtifacts) {
  auto bytes = trainingArtifact(2).finish();
  ASSERT_TRUE(loadAndTrain(bytes));
  size_t step = std::max<size_t>(1, bytes.size() / 200);
  for (size_t length = 0; length + 64 < bytes.size(); length += step) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    EXPECT_FALSE(loadAndTrain(cut)) << "truncated to " << length << " of " << bytes.size();
  }
  const char *trialsEnv = std::getenv("TCCRT_FUZZ_TRIALS");
  int trials = trialsEnv ? std::atoi(trialsEnv) : 1500;
  std::mt19937 rng(4321);
  // The FlatBuffers tables of a training artifact sit between and after its entries' shared
  // objects; aim half the flips at the bytes outside them.
  const std::vector<uint8_t> &so = testKernelModule();
  std::vector<size_t> tableBytes;
  for (size_t at = 0; at < bytes.size();) {
    if (at + so.size() <= bytes.size() && std::memcmp(&bytes[at], so.data(), 64) == 0 &&
        std::memcmp(&bytes[at], so.data(), so.size()) == 0) {
      at += so.size();
      continue;
    }
    tableBytes.push_back(at++);
  }
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> damaged = bytes;
    int flips = trial % 3 != 2 ? 1 : 1 + (int)(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t at = trial % 2 == 0 ? tableBytes[rng() % tableBytes.size()] : rng() % damaged.size();
      damaged[at] ^= (uint8_t)(1 + rng() % 255);
    }
    (loadAndTrain(damaged) ? loaded : rejected)++;
  }
  EXPECT_GT(rejected, 0);
  std::printf("damaged training artifacts: %d loaded, %d rejected\n", loaded, rejected);
}

} // namespace
