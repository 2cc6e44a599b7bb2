//===- CompileTrainingTest.cpp - compileTraining end to end vs the interpreter ===//
//
// A TrainingSpec written by hand: a linear model y ~ x W + b with mean squared error, its
// gradient written out as graph ops, gradient accumulation over two micro-batches and an SGD
// update, plus eval. compileTraining compiles it for the CPU; the artifact is loaded and trained
// through the C API and compared, micro-step by micro-step, with the interpreter running the
// same entry functions on the same state (bindings followed the same way).
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/Compiler.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Runtime/tccrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace tcc;

namespace {

// Batch 8, 4 features, 3 targets. loss = mean((x W + b - y)^2) over the 24 elements, so
// dloss/dp = (2 / 24) (p - y); gW = x^T dloss/dp, gb = sum over the batch. accumulate_step adds
// the gradients to the accumulators; train_step applies W -= lr (accW + gW) / 2 (the mean over
// the two micro-batches) and zeroes the accumulators. Both also take the random key, which this
// model does not use (the binding must still pass through).
constexpr const char *kForwardAndGradient = R"(
  %xw = tcc.matmul %x, %W : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<3xf32> -> tensor<8x3xf32>
  %p = tcc.binary add %xw, %bb : tensor<8x3xf32>
  %d = tcc.binary sub %p, %y : tensor<8x3xf32>
  %sq = tcc.binary mul %d, %d : tensor<8x3xf32>
  %s = tcc.reduce sum %sq dims = [0, 1] : tensor<8x3xf32> -> tensor<f32>
  %inv = tcc.constant dense<0.0416666679> : tensor<f32>
  %loss = tcc.binary mul %s, %inv : tensor<f32>
  %two = tcc.constant dense<0.0833333358> : tensor<8x3xf32>
  %dp = tcc.binary mul %d, %two : tensor<8x3xf32>
  %xt = tcc.transpose %x perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %gW = tcc.matmul %xt, %dp : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %gb = tcc.reduce sum %dp dims = [0] : tensor<8x3xf32> -> tensor<3xf32>
  %sW = tcc.binary add %aW, %gW : tensor<4x3xf32>
  %sb = tcc.binary add %ab, %gb : tensor<3xf32>
)";

std::string trainStep() {
  return std::string(R"(
func.func @main(%W: tensor<4x3xf32>, %b: tensor<3xf32>, %aW: tensor<4x3xf32>, %ab: tensor<3xf32>,
                %x: tensor<8x4xf32>, %y: tensor<8x3xf32>, %lr: tensor<f32>, %key: tensor<ui64>)
    -> (tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<f32>) {)") +
         kForwardAndGradient + R"(
  %half = tcc.constant dense<0.5> : tensor<f32>
  %step = tcc.binary mul %lr, %half : tensor<f32>
  %stepW = tcc.broadcast_in_dim %step dims = [] : tensor<f32> -> tensor<4x3xf32>
  %stepb = tcc.broadcast_in_dim %step dims = [] : tensor<f32> -> tensor<3xf32>
  %uW = tcc.binary mul %sW, %stepW : tensor<4x3xf32>
  %ub = tcc.binary mul %sb, %stepb : tensor<3xf32>
  %W2 = tcc.binary sub %W, %uW : tensor<4x3xf32>
  %b2 = tcc.binary sub %b, %ub : tensor<3xf32>
  %zW = tcc.constant dense<0.0> : tensor<4x3xf32>
  %zb = tcc.constant dense<0.0> : tensor<3xf32>
  return %W2, %b2, %zW, %zb, %loss : tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<f32>
})";
}

std::string accumulateStep() {
  return std::string(R"(
func.func @main(%W: tensor<4x3xf32>, %b: tensor<3xf32>, %aW: tensor<4x3xf32>, %ab: tensor<3xf32>,
                %x: tensor<8x4xf32>, %y: tensor<8x3xf32>, %key: tensor<ui64>)
    -> (tensor<4x3xf32>, tensor<3xf32>, tensor<f32>) {)") +
         kForwardAndGradient + R"(
  return %sW, %sb, %loss : tensor<4x3xf32>, tensor<3xf32>, tensor<f32>
})";
}

constexpr const char *kEval = R"(
func.func @main(%W: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<8x4xf32>, %y: tensor<8x3xf32>)
    -> tensor<8x3xf32> {
  %xw = tcc.matmul %x, %W : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %bb = tcc.broadcast_in_dim %b dims = [1] : tensor<3xf32> -> tensor<8x3xf32>
  %p = tcc.binary add %xw, %bb : tensor<8x3xf32>
  %d = tcc.binary sub %p, %y : tensor<8x3xf32>
  %sq = tcc.binary mul %d, %d : tensor<8x3xf32>
  return %sq : tensor<8x3xf32>
})";

enum : int64_t { kW, kB, kAccW, kAccB };

Tensor randomTensor(Shape shape, std::mt19937 &rng) {
  Tensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = dist(rng);
  return t;
}

Binding state(int64_t i) { return {BindingRole::State, i}; }
Binding role(BindingRole r) { return {r, -1}; }

class CompileTrainingTest : public ::testing::Test {
protected:
  CompileTrainingTest() {
    ctx.loadDialect<TccDialect, tk::TkDialect, mlir::func::FuncDialect,
                    mlir::memref::MemRefDialect>();
  }

  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string &text) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module) << "the test IR does not parse";
    return module;
  }

  /// The spec (entries in the order train_step, accumulate_step, eval).
  TrainingSpec makeSpec() {
    std::mt19937 rng(11);
    TrainingSpec spec;
    spec.gradAccumulation = 2;
    spec.configJson = R"({"loss": "mse", "optimizer": "sgd"})";
    spec.state.push_back({"W", StateKind::Parameter, randomTensor({4, 3}, rng), 0});
    spec.state.push_back({"b", StateKind::Parameter, randomTensor({3}, rng), 1});
    spec.state.push_back({"W.grad_acc", StateKind::GradAccumulator, Tensor(DType::F32, {4, 3})});
    spec.state.push_back({"b.grad_acc", StateKind::GradAccumulator, Tensor(DType::F32, {3})});
    Binding data = role(BindingRole::Data);
    auto entry = [&](std::string name, const std::string &text, std::vector<Binding> inputs,
                     std::vector<Binding> outputs, std::vector<std::string> inputNames,
                     std::vector<std::string> outputNames) {
      EntrySpec e;
      e.name = std::move(name);
      e.module = parse(text);
      e.inputs = std::move(inputs);
      e.outputs = std::move(outputs);
      e.inputNames = std::move(inputNames);
      e.outputNames = std::move(outputNames);
      spec.entries.push_back(std::move(e));
    };
    entry("train_step", trainStep(),
          {state(kW), state(kB), state(kAccW), state(kAccB), data, data,
           role(BindingRole::LearningRate), role(BindingRole::RngKey)},
          {state(kW), state(kB), state(kAccW), state(kAccB), role(BindingRole::Loss)},
          {"W", "b", "W.grad_acc", "b.grad_acc", "x", "y", "lr", "key"},
          {"W'", "b'", "W.grad_acc'", "b.grad_acc'", "loss"});
    entry("accumulate_step", accumulateStep(),
          {state(kW), state(kB), state(kAccW), state(kAccB), data, data,
           role(BindingRole::RngKey)},
          {state(kAccW), state(kAccB), role(BindingRole::Loss)},
          {"W", "b", "W.grad_acc", "b.grad_acc", "x", "y", "key"},
          {"W.grad_acc'", "b.grad_acc'", "loss"});
    entry("eval", kEval, {state(kW), state(kB), data, data}, {data}, {"W", "b", "x", "y"},
          {"loss"});
    return spec;
  }

  CompileOptions options() {
    CompileOptions o;
    llvm::SmallString<128> dir;
    llvm::sys::path::system_temp_directory(true, dir);
    llvm::sys::path::append(dir, "tcc-compile-training-test-cache");
    o.cacheDir = dir.str().str();
    return o;
  }

  mlir::MLIRContext ctx;
};

/// Runs an entry's @main in the interpreter with the runtime's binding rules; updates `state`
/// (outputs bound to State), returns the outputs bound to Loss (first) and Data.
std::vector<Tensor> interpretEntry(const EntrySpec &entry, mlir::ModuleOp module,
                                   std::vector<Tensor> &state, const std::vector<Tensor> &batch,
                                   float lr, uint64_t key) {
  std::vector<Tensor> args;
  size_t data = 0;
  for (const Binding &b : entry.inputs)
    switch (b.role) {
    case BindingRole::Data:
      args.push_back(batch[data++]);
      break;
    case BindingRole::State:
      args.push_back(state[b.state]);
      break;
    case BindingRole::LearningRate:
      args.push_back(Tensor::scalar<float>(lr));
      break;
    case BindingRole::RngKey:
      args.push_back(Tensor::scalar<uint64_t>(key));
      break;
    case BindingRole::Loss:
      ADD_FAILURE() << "Loss input";
    }
  auto main = module.lookupSymbol<mlir::func::FuncOp>("main");
  std::vector<Tensor> results = runFunction(main, args);
  std::vector<Tensor> returned;
  for (size_t i = 0; i < entry.outputs.size(); ++i)
    if (entry.outputs[i].role == BindingRole::State)
      state[entry.outputs[i].state] = results[i];
    else
      returned.push_back(results[i]);
  return returned;
}

void expectClose(const float *got, const Tensor &want, const std::string &what) {
  size_t bad = 0;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    float w = want.data<float>()[i];
    if (!(std::fabs(got[i] - w) <= 1e-5f + 1e-4f * std::fabs(w)) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << w;
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST_F(CompileTrainingTest, TrainsLikeTheInterpreter) {
  // The interpreter runs its own copies of the entry functions (compiling rewrites the spec's).
  TrainingSpec reference = makeSpec();
  TrainingSpec spec = makeSpec();
  CompiledModel compiled = compileTraining(spec, options());

  // The report: sums over the entries, and each entry's share.
  const CompileReport &report = compiled.report;
  ASSERT_EQ(report.entries.size(), 3u);
  size_t kernels = 0, launches = 0;
  uint64_t arena = 0;
  for (const auto &e : report.entries) {
    EXPECT_GT(e.kernels, 0u) << e.name;
    kernels += e.kernels;
    launches += e.launches;
    arena += e.arenaBytes;
  }
  EXPECT_EQ(report.entries[1].name, "accumulate_step");
  EXPECT_EQ(kernels, report.kernels);
  EXPECT_EQ(report.kernelNames.size(), report.kernels);
  EXPECT_EQ(report.kernelNames[0].rfind("train_step/", 0), 0u) << report.kernelNames[0];
  EXPECT_EQ(launches, report.launches);
  EXPECT_EQ(arena, report.arenaBytes);
  EXPECT_EQ(report.externCalls, 5u) << "GEMMs: two in each training entry, one in eval";
  EXPECT_EQ(report.artifactBytes, compiled.artifact.size());
  std::string json = report.toJson();
  EXPECT_NE(json.find("\"entries\": [\n    {\"name\": \"train_step\", \"kernels\": "),
            std::string::npos)
      << json;

  tccrt_options one{1};
  tccrt_program *program = nullptr;
  ASSERT_EQ(tccrt_load_buffer(compiled.artifact.data(), compiled.artifact.size(), &one, &program),
            TCCRT_OK)
      << tccrt_last_error();
  ASSERT_EQ(tccrt_is_training(program), 1);
  EXPECT_STREQ(tccrt_training_config(program), R"({"loss": "mse", "optimizer": "sgd"})");
  const uint64_t seed = 5;
  tccrt_trainer *trainer = nullptr;
  ASSERT_EQ(tccrt_trainer_create(program, seed, &trainer), TCCRT_OK) << tccrt_last_error();
  EXPECT_EQ(tccrt_trainer_grad_accumulation(trainer), 2);
  ASSERT_EQ(tccrt_trainer_num_batch_tensors(trainer), 2u);
  tccrt_tensor_info info;
  ASSERT_EQ(tccrt_trainer_batch_info(trainer, 0, &info), TCCRT_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.bytes, 8u * 4 * 4);
  ASSERT_EQ(tccrt_trainer_num_state(trainer), 4u);
  tccrt_state_kind kind;
  ASSERT_EQ(tccrt_trainer_state_info(trainer, kAccB, &info, &kind), TCCRT_OK);
  EXPECT_STREQ(info.name, "b.grad_acc");
  EXPECT_EQ(kind, TCCRT_STATE_GRAD_ACCUMULATOR);

  std::vector<Tensor> state;
  for (const StateSpec &s : reference.state)
    state.push_back(s.initial.clone());
  auto checkState = [&](const std::string &when) {
    for (size_t i = 0; i < state.size(); ++i) {
      std::vector<float> got(state[i].numElements());
      ASSERT_EQ(tccrt_trainer_get_state(trainer, i, got.data()), TCCRT_OK);
      expectClose(got.data(), state[i], reference.state[i].name + " " + when);
    }
  };
  checkState("initially");

  std::mt19937 rng(99);
  for (uint64_t m = 0; m < 6; ++m) {
    std::vector<Tensor> batch = {randomTensor({8, 4}, rng), randomTensor({8, 3}, rng)};
    const void *in[] = {batch[0].raw(), batch[1].raw()};
    float lr = 0.2f + 0.1f * (float)m, loss = -1;
    ASSERT_EQ(tccrt_trainer_step(trainer, in, lr, &loss), TCCRT_OK) << tccrt_last_error();
    const EntrySpec &entry = reference.entries[m % 2 == 1 ? 0 : 1];
    std::vector<Tensor> want = interpretEntry(entry, *entry.module, state, batch, lr,
                                              tccrt_rng_key(seed, m));
    std::string when = "after micro-step " + std::to_string(m) + " (" + entry.name + ")";
    expectClose(&loss, want[0], "loss " + when);
    checkState(when);
    EXPECT_EQ(tccrt_trainer_micro_steps(trainer), m + 1);
    EXPECT_EQ(tccrt_trainer_steps(trainer), (m + 1) / 2);
  }

  // Eval: per-sample loss from the current state.
  std::vector<Tensor> batch = {randomTensor({8, 4}, rng), randomTensor({8, 3}, rng)};
  const void *in[] = {batch[0].raw(), batch[1].raw()};
  ASSERT_EQ(tccrt_trainer_num_eval_outputs(trainer), 1u);
  std::vector<float> perSample(24);
  void *out[] = {perSample.data()};
  ASSERT_EQ(tccrt_trainer_eval(trainer, in, out), TCCRT_OK) << tccrt_last_error();
  std::vector<Tensor> want =
      interpretEntry(reference.entries[2], *reference.entries[2].module, state, batch, 0, 0);
  expectClose(perSample.data(), want[0], "eval loss");
  checkState("after eval");

  tccrt_trainer_free(trainer);
  tccrt_program_free(program);
}

TEST_F(CompileTrainingTest, BadSpecsAreRejectedBeforeCompiling) {
  auto expectError = [&](TrainingSpec spec, const std::string &expected) {
    try {
      compileTraining(spec, options());
      ADD_FAILURE() << "compiled; expected: " << expected;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  {
    TrainingSpec spec = makeSpec();
    spec.entries[0].inputs.pop_back();
    expectError(std::move(spec), "training entry 'train_step': 7 input and 5 output bindings for "
                                 "@main with 8 arguments and 5 results");
  }
  {
    TrainingSpec spec = makeSpec();
    spec.entries[1].outputs[0] = state(kB);
    expectError(std::move(spec), "training entry 'accumulate_step' output 0 (state 'b') is "
                                 "f32[4, 3], expected f32[3]");
  }
  {
    TrainingSpec spec = makeSpec();
    spec.entries[0].inputs[6] = role(BindingRole::RngKey);
    expectError(std::move(spec), "input 6 (rng key) is f32[], expected u64[]");
  }
  {
    TrainingSpec spec = makeSpec();
    spec.entries[2].inputs[0] = state(7);
    expectError(std::move(spec), "input 0 is bound to state 7; there are 4 state tensors");
  }
  {
    TrainingSpec spec = makeSpec();
    spec.entries[2].name = "train_step";
    expectError(std::move(spec), "training entry 'train_step' appears twice");
  }
  {
    TrainingSpec spec = makeSpec();
    CompileOptions o = options();
    o.device = "tpu";
    try {
      compileTraining(spec, o);
      ADD_FAILURE() << "compiled for a tpu";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("cannot compile for device 'tpu'"), std::string::npos);
    }
  }
}

} // namespace
