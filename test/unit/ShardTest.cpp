//===- ShardTest.cpp - The sharding pass against the unsharded program --------===//
//
// The oracle of tcc/Passes/Shard.h: every rank's partitioned program, run together by the
// interpreter's simulated mesh (tcc::runSpmd) on its block of fresh random inputs, gives the
// blocks of what the whole program computes. Graphs written here exercise each rule; training
// steps built from the example model exercise every strategy preset (tcc/Training/Parallelism.h).
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Passes/Pipeline.h"
#include "tcc/Passes/Shard.h"
#include "tcc/Training/Parallelism.h"
#include "tcc/Training/TrainingBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>

using namespace tcc;

namespace {

Shape shapeOfType(mlir::Type t) {
  auto r = mlir::cast<mlir::RankedTensorType>(t);
  return Shape(r.getShape().begin(), r.getShape().end());
}

DimSharding shardingOf(mlir::func::FuncOp f, mlir::DictionaryAttr attrs, mlir::Type type) {
  Shape shape = shapeOfType(type);
  auto attr = attrs ? attrs.getAs<ShardingAttr>(TccDialect::kShardingAttrName) : ShardingAttr();
  if (!attr)
    return DimSharding::replicated(shape.size());
  std::string error;
  return *DimSharding::fromAttr(attr, meshOf(f), shape, error);
}

/// Rank r's block of `whole`.
Tensor blockOf(const Tensor &whole, const DimSharding &s, MeshAttr mesh, int64_t rank) {
  std::vector<int64_t> start, limit, stride;
  for (size_t d = 0; d < whole.shape().size(); ++d) {
    start.push_back(s.blockOffset(mesh, whole.shape(), d, rank));
    limit.push_back(start.back() + whole.shape()[d] / s.splits(mesh, d));
    stride.push_back(1);
  }
  return kernels::slice(whole, start, limit, stride);
}

void expectNear(const Tensor &got, const Tensor &want, double rtol, const std::string &what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  double scale = 0;
  for (int64_t i = 0; i < want.numElements(); ++i)
    scale = std::max(scale, std::abs(want.getDouble(i)));
  for (int64_t i = 0; i < want.numElements(); ++i)
    ASSERT_NEAR(got.getDouble(i), want.getDouble(i), rtol * std::max(1.0, scale))
        << what << " element " << i;
}

class ShardTest : public ::testing::Test {
protected:
  ShardTest() {
    ctx.loadDialect<TccDialect, mlir::func::FuncDialect>();
    ctx.allowUnregisteredDialects(false);
  }

  Tensor random(const Shape &shape, DType dtype) {
    if (dtype == DType::I64) {
      std::uniform_int_distribution<int64_t> d(0, 9);
      std::vector<int64_t> v(numElements(shape));
      for (auto &x : v)
        x = d(rng);
      return Tensor::fromVector<int64_t>(shape, v);
    }
    std::uniform_real_distribution<double> d(-1, 1);
    std::vector<double> v(numElements(shape));
    for (double &x : v)
      x = d(rng);
    return kernels::cast(Tensor::fromVector<double>(shape, v), dtype);
  }

  /// A train step's inputs, typed as `f`'s arguments: the initial state, learning rate 1e-3, a
  /// fixed rng key and a random batch.
  std::vector<Tensor> trainStepInputs(const TrainingSpec &spec, const EntrySpec &e,
                                      mlir::func::FuncOp f) {
    std::vector<Tensor> inputs;
    for (auto [i, b] : llvm::enumerate(e.inputs)) {
      auto r = mlir::cast<mlir::RankedTensorType>(f.getArgumentTypes()[i]);
      if (b.role == BindingRole::State)
        inputs.push_back(spec.state[b.state].initial);
      else if (b.role == BindingRole::LearningRate)
        inputs.push_back(kernels::cast(Tensor::scalar<double>(1e-3), dtypeFromType(r.getElementType())));
      else if (b.role == BindingRole::RngKey)
        inputs.push_back(Tensor::scalar<uint64_t>(12345));
      else
        inputs.push_back(random(shapeOfType(r), dtypeFromType(r.getElementType())));
    }
    return inputs;
  }

  /// Runs `func` whole and partitioned over its module's mesh on the same inputs; each rank's
  /// results must be its blocks of the whole results. Returns the collectives of rank 0.
  std::vector<CollectiveRecord> expectShardedEqualsWhole(mlir::func::FuncOp func,
                                                         std::vector<Tensor> inputs = {},
                                                         double rtol = 1e-5) {
    if (inputs.empty())
      for (mlir::Type t : func.getArgumentTypes()) {
        auto r = mlir::cast<mlir::RankedTensorType>(t);
        inputs.push_back(random(shapeOfType(t), dtypeFromType(r.getElementType())));
      }
    std::vector<Tensor> whole = runFunction(func, inputs);
    MeshAttr mesh = meshOf(func);
    ShardingReport report;
    auto plan = ShardingPlan::build(func, &report);
    EXPECT_TRUE(mlir::succeeded(plan));
    if (mlir::failed(plan))
      return {};
    std::vector<mlir::func::FuncOp> programs;
    std::vector<CollectiveRecord> rank0;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      programs.push_back(plan->partition(r, (func.getName() + "_rank" + std::to_string(r)).str(),
                                         &report));
      if (r == 0)
        rank0 = report.collectives;
    }
    EXPECT_TRUE(mlir::succeeded(mlir::verify(func->getParentOp())));
    std::vector<std::vector<Tensor>> args(mesh.numRanks());
    for (size_t i = 0; i < inputs.size(); ++i) {
      DimSharding s = shardingOf(func, func.getArgAttrDict(i), func.getArgumentTypes()[i]);
      for (int64_t r = 0; r < mesh.numRanks(); ++r)
        args[r].push_back(blockOf(inputs[i], s, mesh, r));
    }
    auto out = runSpmd(programs, args);
    for (size_t i = 0; i < whole.size(); ++i) {
      DimSharding s = shardingOf(func, func.getResultAttrDict(i), func.getResultTypes()[i]);
      for (int64_t r = 0; r < mesh.numRanks(); ++r)
        expectNear(out[r][i], blockOf(whole[i], s, mesh, r), rtol,
                   "result " + std::to_string(i) + " on rank " + std::to_string(r));
    }
    for (auto p : programs)
      p.erase();
    return rank0;
  }

  mlir::func::FuncOp parse(const std::string &source) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
    EXPECT_TRUE(module);
    return module ? *module->getOps<mlir::func::FuncOp>().begin() : mlir::func::FuncOp();
  }

  static std::string kinds(const std::vector<CollectiveRecord> &cs) {
    std::string s;
    for (auto &c : cs)
      s += (s.empty() ? "" : " ") + c.kind + "(" + c.axes + ")";
    return s;
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::mt19937_64 rng{42};
};

TEST_F(ShardTest, MegatronMlpOnADataByTensorMesh) {
  auto f = parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @mlp(%x: tensor<8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>},
               %w1: tensor<16x32xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>},
               %w2: tensor<32x16xf32> {tcc.sharding = #tcc.sharding<[[tp], []]>})
    -> (tensor<f32>, tensor<8x16xf32> {tcc.sharding = #tcc.sharding<[[dp], []]>}) {
  %h = tcc.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %z = tcc.constant dense<0.0> : tensor<8x32xf32>
  %r = tcc.binary max %h, %z : tensor<8x32xf32>
  %y = tcc.matmul %r, %w2 : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  %t = tcc.unary tanh %y : tensor<8x16xf32>
  %s = tcc.reduce sum %t dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %s, %t : tensor<f32>, tensor<8x16xf32>
}
}
)");
  // One all_reduce per MLP block over tp, one for the loss over dp.
  EXPECT_EQ(kinds(expectShardedEqualsWhole(f)), "all_reduce(tp) all_reduce(dp)");
}

TEST_F(ShardTest, ReshardingGathersMovesScattersAndCuts) {
  auto f = parse(R"(
module attributes {tcc.mesh = #tcc.mesh<a = 2, b = 2>} {
func.func @f(%x: tensor<8x4xf32> {tcc.sharding = #tcc.sharding<[[a], []]>},
             %v: tensor<4x4xf32>)
    -> (tensor<8x4xf32> {tcc.sharding = #tcc.sharding<[[], [a]]>},
        tensor<4x4xf32> {tcc.sharding = #tcc.sharding<[[a, b], []]>},
        tensor<4x8xf32>, tensor<4x4xf32> {tcc.sharding = #tcc.sharding<[[b], [a]]>}) {
  %t = tcc.transpose %x perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %g = tcc.matmul %t, %x : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %s = tcc.binary add %g, %v : tensor<4x4xf32>
  return %x, %s, %t, %v : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>
}
}
)");
  // The Gram matrix's pending sum over `a` is scattered along the rows its consumer wants split
  // (reduce_scatter), then cut over `b`; x moves its split from dim 0 to dim 1 (all_to_all);
  // the whole transpose is gathered; v is cut locally.
  EXPECT_EQ(kinds(expectShardedEqualsWhole(f)), "reduce_scatter(a) all_to_all(a) all_gather(a)");
}

TEST_F(ShardTest, ReshapesTransposesReductionsAndAttentionHeads) {
  // Two heads of attention on tensor-parallel Q/K/V and output projections.
  auto f = parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @attn(%x: tensor<2x4x8xf32> {tcc.sharding = #tcc.sharding<[[dp], [], []]>},
                %wq: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>},
                %wk: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>},
                %wv: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>},
                %wo: tensor<8x8xf32> {tcc.sharding = #tcc.sharding<[[tp], []]>}) -> tensor<2x4x8xf32> {
  %xq = tcc.broadcast_in_dim %wq dims = [1, 2] : tensor<8x8xf32> -> tensor<2x8x8xf32>
  %xk = tcc.broadcast_in_dim %wk dims = [1, 2] : tensor<8x8xf32> -> tensor<2x8x8xf32>
  %xv = tcc.broadcast_in_dim %wv dims = [1, 2] : tensor<8x8xf32> -> tensor<2x8x8xf32>
  %xo = tcc.broadcast_in_dim %wo dims = [1, 2] : tensor<8x8xf32> -> tensor<2x8x8xf32>
  %q = tcc.matmul %x, %xq : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %k = tcc.matmul %x, %xk : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %v = tcc.matmul %x, %xv : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %q4 = tcc.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k4 = tcc.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v4 = tcc.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qh = tcc.transpose %q4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kh = tcc.transpose %k4 perm = [0, 2, 3, 1] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vh = tcc.transpose %v4 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %s = tcc.matmul %qh, %kh : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %mx = tcc.reduce max %s dims = [3] : tensor<2x2x4x4xf32> -> tensor<2x2x4xf32>
  %mb = tcc.broadcast_in_dim %mx dims = [0, 1, 2] : tensor<2x2x4xf32> -> tensor<2x2x4x4xf32>
  %d = tcc.binary sub %s, %mb : tensor<2x2x4x4xf32>
  %e = tcc.unary exp %d : tensor<2x2x4x4xf32>
  %sum = tcc.reduce sum %e dims = [3] : tensor<2x2x4x4xf32> -> tensor<2x2x4xf32>
  %sb = tcc.broadcast_in_dim %sum dims = [0, 1, 2] : tensor<2x2x4xf32> -> tensor<2x2x4x4xf32>
  %p = tcc.binary div %e, %sb : tensor<2x2x4x4xf32>
  %c = tcc.matmul %p, %vh : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %ct = tcc.transpose %c perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %cm = tcc.reshape %ct : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %o = tcc.matmul %cm, %xo : tensor<2x4x8xf32>, tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
}
)");
  // Heads stay split from the projections to the output projection: one all_reduce over tp
  // (of the output projection's partial sums), then the batch is gathered for the result.
  EXPECT_EQ(kinds(expectShardedEqualsWhole(f)), "all_reduce(tp) all_gather(dp)");
}

TEST_F(ShardTest, ConvolutionsPoolingAndMaxReductions) {
  auto f = parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @cnn(%x: tensor<4x4x6x6xf32> {tcc.sharding = #tcc.sharding<[[dp], [tp], [], []]>},
               %w: tensor<8x4x3x3xf32> {tcc.sharding = #tcc.sharding<[[], [tp], [], []]>})
    -> (tensor<4x8x2x2xf32>, tensor<4xf32> {tcc.sharding = #tcc.sharding<[[dp]]>}) {
  %c = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<4x4x6x6xf32>, tensor<8x4x3x3xf32> -> tensor<4x8x4x4xf32>
  %p = tcc.reduce_window max %c {window = array<i64: 1, 1, 2, 2>, strides = array<i64: 1, 1, 2, 2>, pad_low = array<i64: 0, 0, 0, 0>, pad_high = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>} : tensor<4x8x4x4xf32> -> tensor<4x8x2x2xf32>
  %m = tcc.reduce max %x dims = [1, 2, 3] : tensor<4x4x6x6xf32> -> tensor<4xf32>
  return %p, %m : tensor<4x8x2x2xf32>, tensor<4xf32>
}
}
)");
  std::string got = kinds(expectShardedEqualsWhole(f));
  EXPECT_CONTAINS(got, "all_reduce(tp)"); // the input channels' partial sums, and the max
}

TEST_F(ShardTest, VocabularyParallelEmbeddingAndCrossEntropy) {
  // The table and the head split by vocabulary over tp, the batch over dp: each rank looks up
  // the tokens in its rows (the rest zero, summed over tp), and the log-softmax over the split
  // vocabulary combines its max and its sum across tp.
  auto f = parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @lm(%ids: tensor<4x3xi64> {tcc.sharding = #tcc.sharding<[[dp], []]>},
              %wte: tensor<8x4xf32> {tcc.sharding = #tcc.sharding<[[tp], []]>},
              %head: tensor<4x8xf32> {tcc.sharding = #tcc.sharding<[[], [tp]]>}) -> tensor<4x3xf32> {
  %e = tcc.gather %wte[%ids] axis = 0 : tensor<8x4xf32>, tensor<4x3xi64> -> tensor<4x3x4xf32>
  %hb = tcc.broadcast_in_dim %head dims = [1, 2] : tensor<4x8xf32> -> tensor<4x4x8xf32>
  %l = tcc.matmul %e, %hb : tensor<4x3x4xf32>, tensor<4x4x8xf32> -> tensor<4x3x8xf32>
  %m = tcc.reduce max %l dims = [2] : tensor<4x3x8xf32> -> tensor<4x3xf32>
  %mb = tcc.broadcast_in_dim %m dims = [0, 1] : tensor<4x3xf32> -> tensor<4x3x8xf32>
  %d = tcc.binary sub %l, %mb : tensor<4x3x8xf32>
  %x = tcc.unary exp %d : tensor<4x3x8xf32>
  %s = tcc.reduce sum %x dims = [2] : tensor<4x3x8xf32> -> tensor<4x3xf32>
  %ls = tcc.unary log %s : tensor<4x3xf32>
  return %ls : tensor<4x3xf32>
}
}
)");
  mlir::func::FuncOp main = f;
  std::vector<Tensor> inputs;
  std::vector<int64_t> ids(12);
  for (int64_t i = 0; i < 12; ++i)
    ids[i] = (i * 5 + 3) % 8;
  inputs.push_back(Tensor::fromVector<int64_t>({4, 3}, ids));
  inputs.push_back(random({8, 4}, DType::F32));
  inputs.push_back(random({4, 8}, DType::F32));
  std::string got = kinds(expectShardedEqualsWhole(main, inputs));
  EXPECT_CONTAINS(got, "all_reduce(tp)");
  EXPECT_EQ(got.find("all_gather(tp)"), std::string::npos) << got;
}

//===--- Training steps under every strategy ------------------------------------===//

struct StrategyCase {
  const char *name;
  const char *mesh;
  int zero;
};

class ShardTrainingTest : public ShardTest, public ::testing::WithParamInterface<StrategyCase> {};

TEST_P(ShardTrainingTest, TrainStepEqualsTheSingleRankStep) {
  const StrategyCase &c = GetParam();
  onnx::ModelProto model = loadOnnxModel(TCC_SOURCE_DIR "/examples/fashion-mnist/model.onnx");
  PrepareOptions prep;
  prep.inputShapes[model.graph().input(0).name()] = {8, 1, 28, 28};
  prepareOnnxModel(model, prep);
  TrainingOptions options;
  options.optimizer = OptimizerKind::Adam;
  options.weightDecay = 1e-4;
  TrainingSpec spec = buildTraining(ctx, model, options);
  EntrySpec &train = spec.entries[0];
  ASSERT_EQ(train.name, "train_step");
  ParallelOptions parallel = parseMesh(c.mesh);
  parallel.zero = c.zero;
  std::vector<std::string> notes;
  annotateParallelism(spec, parallel, &notes);
  auto main = train.module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*train.module)));
  // Inputs: the initial state, a random batch, the learning rate and the rng key.
  std::vector<Tensor> inputs = trainStepInputs(spec, train, main);
  auto collectives = expectShardedEqualsWhole(main, inputs, 2e-5);
  std::string got = kinds(collectives);
  if (parallel.dp > 1)
    EXPECT_CONTAINS(got, c.zero >= 1 ? "reduce_scatter(dp)" : "all_reduce(dp)");
  if (c.zero >= 3)
    EXPECT_CONTAINS(got, "all_gather(dp)");
  if (parallel.tp > 1) {
    EXPECT_CONTAINS(got, "all_reduce(tp)");
    EXPECT_FALSE(notes.empty()) << "no tensor-parallel pair found";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, ShardTrainingTest,
                         ::testing::Values(StrategyCase{"dp2", "dp=2", 0},
                                           StrategyCase{"dp4", "dp=4", 0},
                                           StrategyCase{"zero1", "dp=2", 1},
                                           StrategyCase{"zero2", "dp=2", 2},
                                           StrategyCase{"zero3", "dp=2", 3},
                                           StrategyCase{"tp2", "tp=2", 0},
                                           StrategyCase{"dp2tp2", "dp=2,tp=2", 0},
                                           StrategyCase{"dp2tp2zero3", "dp=2,tp=2", 3}),
                         [](const auto &info) { return std::string(info.param.name); });

//===--- Pipeline stages -----------------------------------------------------------===//

struct PipelineCase {
  const char *name;
  int64_t stages, microBatches;
  PipelineSchedule schedule;
};

class PipelineTrainingTest : public ShardTest, public ::testing::WithParamInterface<PipelineCase> {};

/// The oracle for pipeline parallelism: the stages' programs, run together by the interpreter
/// with send/recv simulated, give the micro-batched step's results (each result on the stage
/// that computes it, broadcast ones on every stage), and that step gives the whole-batch step's
/// loss and updated state. FashionMNIST MLP with dropout and Adam, batch 8.
TEST_P(PipelineTrainingTest, StagesEqualTheWholeStep) {
  const PipelineCase &c = GetParam();
  onnx::ModelProto raw = loadOnnxModel(TCC_SOURCE_DIR "/examples/fashion-mnist/model.onnx");
  std::string input = raw.graph().input(0).name();
  onnx::ModelProto whole = raw, micro = raw;
  PrepareOptions prep;
  prep.inputShapes[input] = {8, 1, 28, 28};
  prepareOnnxModel(whole, prep);
  prep.inputShapes[input] = {8 / c.microBatches, 1, 28, 28};
  prepareOnnxModel(micro, prep);
  TrainingOptions options;
  options.optimizer = OptimizerKind::Adam;
  TrainingSpec reference = buildTraining(ctx, whole, options);
  options.microBatches = c.microBatches;
  TrainingSpec spec = buildTraining(ctx, whole, options, {}, &micro);
  EntrySpec &train = spec.entries[0];
  auto main = train.module->lookupSymbol<mlir::func::FuncOp>("main");
  auto wholeMain = reference.entries[0].module->lookupSymbol<mlir::func::FuncOp>("main");
  std::vector<Tensor> inputs = trainStepInputs(spec, train, main);
  // Micro-batches change nothing but the order of sums (Dropout included).
  std::vector<Tensor> want = runFunction(wholeMain, inputs), stepped = runFunction(main, inputs);
  ASSERT_EQ(want.size(), stepped.size());
  for (size_t i = 0; i < want.size(); ++i)
    expectNear(stepped[i], want[i], 2e-5, "micro-batched result " + std::to_string(i));

  (*train.module)->setAttr(TccDialect::kMeshAttrName,
                           MeshAttr::get(&ctx, {mlir::StringAttr::get(&ctx, "pp")}, {c.stages}));
  auto plan = PipelinePlan::build(main, c.stages, c.microBatches, c.schedule);
  ASSERT_TRUE(mlir::succeeded(plan));
  std::vector<mlir::func::FuncOp> programs;
  for (int64_t s = 0; s < c.stages; ++s)
    programs.push_back(plan->partition(s, "stage" + std::to_string(s)));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*train.module)));
  std::vector<std::vector<Tensor>> args(c.stages, inputs);
  auto out = runSpmd(programs, args);
  int sends = 0;
  for (auto p : programs)
    p.walk([&](SendOp) { ++sends; });
  EXPECT_GT(sends, 0);
  // Without state arguments named to return unchanged, every stage gets every result (computed
  // there, or broadcast from the stage that computes it).
  for (size_t i = 0; i < want.size(); ++i)
    for (int64_t s = 0; s < c.stages; ++s)
      expectNear(out[s][i], want[i], 2e-5,
                 "result " + std::to_string(i) + " on stage " + std::to_string(s));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineTrainingTest,
    ::testing::Values(PipelineCase{"pp2_1f1b", 2, 4, PipelineSchedule::OneFOneB},
                      PipelineCase{"pp2_gpipe", 2, 4, PipelineSchedule::GPipe},
                      PipelineCase{"pp3_1f1b_2micro", 3, 2, PipelineSchedule::OneFOneB}),
    [](const auto &info) { return std::string(info.param.name); });

//===--- Pipelines with data and tensor parallelism -------------------------------===//

struct CombinedCase {
  const char *name;
  const char *mesh;
  int zero;
  const char *model = TCC_SOURCE_DIR "/examples/fashion-mnist/model.onnx";
};

class PipelineCombinedTest : public ShardTest, public ::testing::WithParamInterface<CombinedCase> {};

/// A pipeline on a 2-D mesh: the train step built with micro-batches over the data-parallel
/// ranks' rows, sharded over dp (and tp, ZeRO), then each rank's program cut into stages. Every
/// rank's program, run together by the interpreter, gives its block of the whole-batch step's
/// results (the state a stage does not update comes back unchanged there: skipped), Dropout
/// masks included. FashionMNIST MLP with dropout and Adam, batch 8, 4 micro-batches (of one row
/// a rank under dp=2).
TEST_P(PipelineCombinedTest, RanksEqualTheWholeStep) {
  const CombinedCase &c = GetParam();
  ParallelOptions parallel = parseMesh(c.mesh);
  parallel.zero = c.zero;
  const int64_t batch = 8, microBatches = 4;
  onnx::ModelProto raw = loadOnnxModel(c.model);
  std::string input = raw.graph().input(0).name();
  Shape shape;
  for (const auto &d : raw.graph().input(0).type().tensor_type().shape().dim())
    shape.push_back(d.has_dim_value() ? d.dim_value() : 1);
  onnx::ModelProto whole = raw, micro = raw;
  PrepareOptions prep;
  shape[0] = batch;
  prep.inputShapes[input] = shape;
  prepareOnnxModel(whole, prep);
  shape[0] = batch / microBatches;
  prep.inputShapes[input] = shape;
  prepareOnnxModel(micro, prep);
  TrainingOptions options;
  options.optimizer = OptimizerKind::Adam;
  // Adam's first step moves a parameter by lr * g / (|g| + epsilon): with the default 1e-8, a
  // gradient of about 1e-8 turns its last bits (which the order of sums changes) into a
  // visible update. A larger epsilon keeps the comparison about the gradients.
  options.epsilon = 1e-4;
  TrainingSpec reference = buildTraining(ctx, whole, options);
  options.microBatches = microBatches;
  options.microBatchShards = parallel.dp;
  TrainingSpec spec = buildTraining(ctx, whole, options, {}, &micro);
  auto wholeMain = reference.entries[0].module->lookupSymbol<mlir::func::FuncOp>("main");
  std::vector<Tensor> inputs = trainStepInputs(spec, spec.entries[0], wholeMain);
  std::vector<Tensor> want = runFunction(wholeMain, inputs);

  annotateParallelism(spec, parallel);
  auto main = spec.entries[0].module->lookupSymbol<mlir::func::FuncOp>("main");
  MeshAttr inner = meshOf(main);
  std::vector<DimSharding> argSharding, resultSharding;
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    argSharding.push_back(shardingOf(main, main.getArgAttrDict(i), main.getArgumentTypes()[i]));
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    resultSharding.push_back(shardingOf(main, main.getResultAttrDict(i), main.getResultTypes()[i]));
  std::vector<std::string> inputNames = spec.entries[0].inputNames,
                           outputNames = spec.entries[0].outputNames;
  auto indexIn = [](const std::vector<std::string> &names, const std::string &name) {
    auto it = std::find(names.begin(), names.end(), name);
    EXPECT_NE(it, names.end()) << name;
    return static_cast<size_t>(it - names.begin());
  };
  partitionTraining(spec, parallel);
  pipelineTraining(spec, parallel);
  int64_t stages = parallel.pp, ranks = parallel.dp * parallel.tp * stages;
  ASSERT_EQ(spec.meshAxes.back(), "pp");
  std::vector<mlir::func::FuncOp> programs;
  std::vector<std::vector<Tensor>> args;
  for (int64_t r = 0; r < ranks; ++r) {
    EntrySpec &e = spec.entries[r];
    ASSERT_EQ(e.name, "train_step");
    ASSERT_EQ(e.rank, r);
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*e.module)));
    programs.push_back(e.module->lookupSymbol<mlir::func::FuncOp>("main"));
    // Each stage binds only the state it reads or updates: every parameter here lives on one
    // stage, so a stage holds fewer than all of them.
    int64_t held = 0;
    args.emplace_back();
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      size_t i = indexIn(inputNames, e.inputNames[k]);
      args.back().push_back(blockOf(inputs[i], argSharding[i], inner, r / stages));
      held += e.inputs[k].role == BindingRole::State &&
              spec.state[e.inputs[k].state].kind == StateKind::Parameter;
    }
    int64_t parameters = llvm::count_if(spec.state, [](const StateSpec &s) {
      return s.kind == StateKind::Parameter;
    });
    EXPECT_GT(held, 0);
    EXPECT_LT(held, parameters) << "rank " << r << " holds every parameter";
  }
  auto out = runSpmd(programs, args);
  std::string kinds;
  programs[0].walk([&](mlir::Operation *op) {
    if (isCollective(op))
      kinds += op->getName().stripDialect().str() + " ";
  });
  if (parallel.dp > 1)
    EXPECT_CONTAINS(kinds, c.zero >= 1 ? "reduce_scatter" : "all_reduce");
  EXPECT_CONTAINS(kinds, "send");
  for (int64_t r = 0; r < ranks; ++r)
    for (size_t k = 0; k < out[r].size(); ++k) {
      const Binding &b = spec.entries[r].outputs[k];
      if (b.role == BindingRole::State && spec.state[b.state].pipelineStage >= 0 &&
          spec.state[b.state].pipelineStage != r % stages)
        continue;
      size_t i = indexIn(outputNames, spec.entries[r].outputNames[k]);
      expectNear(out[r][k], blockOf(want[i], resultSharding[i], inner, r / stages), 2e-5,
                 spec.entries[r].outputNames[k] + " on rank " + std::to_string(r));
    }
}

INSTANTIATE_TEST_SUITE_P(Meshes, PipelineCombinedTest,
                         ::testing::Values(CombinedCase{"dp2pp2", "dp=2,pp=2", 0},
                                           CombinedCase{"dp2pp2zero1", "dp=2,pp=2", 1},
                                           CombinedCase{"dp2pp2zero3", "dp=2,pp=2", 3},
                                           CombinedCase{"tp2pp2", "tp=2,pp=2", 0},
                                           CombinedCase{"dp2tp2pp2", "dp=2,tp=2,pp=2", 0}),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
