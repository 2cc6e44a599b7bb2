//===- TrainingBuilderTest.cpp - Losses, optimizers, dropout, training entries ---===//
//
// Every graph here runs on the reference interpreter (tcc::runFunction) and is compared with a
// plain C++ reference: losses in double, optimizers written as PyTorch's single-tensor code in
// float, the dropout generator as its comment in frontend/onnx/ops/Shape.cpp defines it.
//
//===----------------------------------------------------------------------===//
#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Training/TrainingOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include "TestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tcc;
using mlir::Value;

namespace {

// ---- Helpers ----

Tensor randomTensor(const Shape &shape, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = 0;
    while (v == 0)
      v = dist(gen);
    t.data<float>()[i] = v;
  }
  return t;
}

Tensor randomLabels(const Shape &shape, int64_t classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  Tensor t(DType::I64, shape);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<int64_t>()[i] = dist(gen);
  return t;
}

using tcc::test::errorOf;

/// |got - want| <= rtol * |want| + atol, elementwise, with the first mismatch reported.
void expectClose(const Tensor &got, const std::vector<double> &want, double rtol, double atol,
                 const std::string &what) {
  ASSERT_EQ(got.numElements(), (int64_t)want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.getDouble(i);
    if (!(std::abs(g - want[i]) <= rtol * std::abs(want[i]) + atol)) {
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << want[i];
      return;
    }
  }
}

std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[i] = t.getDouble(i);
  return v;
}

/// A context with the importer's dialects, and a way to build and run one-off functions.
class TrainingTest : public ::testing::Test {
public:
  TrainingTest() { registerImportDialects(ctx); }

  /// Builds @main(argTypes) -> body(builder, args) and runs it on `args`.
  std::vector<Tensor>
  runBuilt(const std::vector<Tensor> &args,
           const std::function<llvm::SmallVector<Value>(CoreBuilder &, mlir::ValueRange)> &body) {
    mlir::OpBuilder ob(&ctx);
    module = mlir::ModuleOp::create(ob.getUnknownLoc());
    ob.setInsertionPointToEnd(module->getBody());
    llvm::SmallVector<mlir::Type> types;
    for (const Tensor &t : args)
      types.push_back(tensorTypeOf(&ctx, t));
    auto func = ob.create<mlir::func::FuncOp>(ob.getUnknownLoc(), "main",
                                              ob.getFunctionType(types, {}));
    ob.setInsertionPointToEnd(func.addEntryBlock());
    CoreBuilder b(ob, ob.getUnknownLoc());
    llvm::SmallVector<Value> results = body(b, func.getArguments());
    ob.create<mlir::func::ReturnOp>(ob.getUnknownLoc(), results);
    func.setFunctionType(ob.getFunctionType(types, mlir::ValueRange(results).getTypes()));
    return runFunction(func, args);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// ---- Losses ----

/// Per-sample cross-entropy in double: logits [N, C, S] (S = product of the trailing dims).
std::vector<double> crossEntropyReference(const Tensor &logits, const Tensor &labels,
                                          double smoothing) {
  int64_t n = logits.dim(0), c = logits.dim(1), s = logits.numElements() / (n * c);
  std::vector<double> out(n * s);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < s; ++j) {
      auto at = [&](int64_t k) { return logits.getDouble((i * c + k) * s + j); };
      double mx = -INFINITY;
      for (int64_t k = 0; k < c; ++k)
        mx = std::max(mx, at(k));
      double sum = 0;
      for (int64_t k = 0; k < c; ++k)
        sum += std::exp(at(k) - mx);
      double lse = mx + std::log(sum), all = 0;
      for (int64_t k = 0; k < c; ++k)
        all += at(k) - lse;
      double nll = -(at(labels.getInt(i * s + j)) - lse);
      out[i * s + j] = (1 - smoothing) * nll - smoothing * all / c;
    }
  return out;
}

TEST_F(TrainingTest, CrossEntropyMatchesADoubleReference) {
  for (double smoothing : {0.0, 0.1}) {
    TrainingOptions opts;
    opts.labelSmoothing = smoothing;
    // Large logits: the max shift keeps exp finite.
    Tensor logits = randomTensor({6, 5}, 11, -40, 40);
    Tensor labels = randomLabels({6}, 5, 12);
    auto out = runBuilt({logits, labels}, [&](CoreBuilder &b, mlir::ValueRange a) {
      LossValues l = buildLoss(b, opts, a[0], a[1]);
      return llvm::SmallVector<Value>{l.perSample, l.mean, l.prediction};
    });
    std::vector<double> want = crossEntropyReference(logits, labels, smoothing);
    expectClose(out[0], want, 1e-5, 1e-5, "per-sample loss");
    double mean = 0;
    for (double v : want)
      mean += v / want.size();
    EXPECT_NEAR(out[1].getDouble(0), mean, 1e-5 * std::abs(mean) + 1e-6);
    EXPECT_EQ(out[1].rank(), 0);
    for (int64_t i = 0; i < 6; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < 5; ++k)
        if (logits.getDouble(i * 5 + k) > logits.getDouble(i * 5 + best))
          best = k;
      EXPECT_EQ(out[2].getInt(i), best);
    }
  }
}

TEST_F(TrainingTest, CrossEntropyOverSpatialDimsWithI32Labels) {
  TrainingOptions opts;
  opts.labelType = DType::I32;
  Tensor logits = randomTensor({2, 4, 3, 2}, 21, -3, 3);
  Tensor labels64 = randomLabels({2, 3, 2}, 4, 22);
  Tensor labels(DType::I32, {2, 3, 2});
  for (int64_t i = 0; i < labels.numElements(); ++i)
    labels.data<int32_t>()[i] = (int32_t)labels64.getInt(i);
  auto out = runBuilt({logits, labels}, [&](CoreBuilder &b, mlir::ValueRange a) {
    LossValues l = buildLoss(b, opts, a[0], a[1]);
    return llvm::SmallVector<Value>{l.perSample, l.mean};
  });
  EXPECT_EQ(out[0].shape(), (Shape{2, 3, 2}));
  expectClose(out[0], crossEntropyReference(logits, labels64, 0), 1e-5, 1e-6, "per-sample loss");
}

TEST_F(TrainingTest, MeanSquaredErrorMatchesADoubleReference) {
  TrainingOptions opts;
  opts.loss = LossKind::MSE;
  Tensor y = randomTensor({3, 4}, 31), t = randomTensor({3, 4}, 32);
  auto out = runBuilt({y, t}, [&](CoreBuilder &b, mlir::ValueRange a) {
    LossValues l = buildLoss(b, opts, a[0], a[1]);
    EXPECT_FALSE(l.prediction);
    return llvm::SmallVector<Value>{l.perSample, l.mean};
  });
  std::vector<double> want(12);
  double mean = 0;
  for (int i = 0; i < 12; ++i) {
    double d = y.getDouble(i) - t.getDouble(i);
    want[i] = d * d;
    mean += want[i] / 12;
  }
  expectClose(out[0], want, 1e-6, 1e-7, "squared error");
  EXPECT_NEAR(out[1].getDouble(0), mean, 1e-6 * mean);
}

TEST_F(TrainingTest, LossRejectsOutputsItCannotUse) {
  TrainingOptions ce;
  auto f32 = mlir::Float32Type::get(&ctx);
  EXPECT_CONTAINS(errorOf([&] { labelTypeFor(&ctx, ce, mlir::RankedTensorType::get({4}, f32)); }),
                  "cross-entropy needs logits of shape [N, C]");
  EXPECT_CONTAINS(errorOf([&] {
                    labelTypeFor(&ctx, ce,
                                 mlir::RankedTensorType::get({4, 2}, mlir::IntegerType::get(&ctx, 64)));
                  }),
                  "not floating-point");
  auto labels = labelTypeFor(&ctx, ce, mlir::RankedTensorType::get({4, 3, 5}, f32));
  EXPECT_EQ(labels.getShape(), (llvm::ArrayRef<int64_t>{4, 5}));
  EXPECT_TRUE(labels.getElementType().isInteger(64));
}

// ---- Optimizers (PyTorch's single-tensor formulas, written out in float) ----

struct RefState {
  std::vector<float> p, buf, m, v;
  int64_t step = 0;
};

/// One step of torch.optim.SGD / Adam / AdamW on one parameter, as torch/optim computes it.
void referenceStep(const TrainingOptions &o, RefState &s, std::vector<float> g, float lr) {
  size_t n = s.p.size();
  float wd = (float)o.weightDecay;
  s.step += 1;
  if (o.optimizer == OptimizerKind::SGD) {
    float mom = (float)o.momentum;
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i];
      if (o.weightDecay != 0)
        gi = gi + wd * s.p[i];
      if (o.momentum != 0) {
        s.buf[i] = s.step == 1 ? gi : s.buf[i] * mom + gi;
        gi = o.nesterov ? gi + mom * s.buf[i] : s.buf[i];
      }
      s.p[i] = s.p[i] + (-lr) * gi;
    }
    return;
  }
  double t = (double)s.step;
  double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
  double stepSize = (double)lr / bc1, bc2Sqrt = std::sqrt(bc2);
  float w = (float)(1 - o.beta1), b2 = (float)o.beta2, omb2 = (float)(1 - o.beta2);
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i];
    if (o.weightDecay != 0) {
      if (o.optimizer == OptimizerKind::AdamW)
        s.p[i] = s.p[i] * (float)(1 - (double)lr * o.weightDecay);
      else
        gi = gi + wd * s.p[i];
    }
    s.m[i] = s.m[i] + w * (gi - s.m[i]);
    s.v[i] = s.v[i] * b2;
    s.v[i] = s.v[i] + omb2 * gi * gi;
    float denom = std::sqrt(s.v[i]) / (float)bc2Sqrt + (float)o.epsilon;
    s.p[i] = s.p[i] + (float)(-stepSize) * s.m[i] / denom;
  }
}

std::vector<float> floats(const Tensor &t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}

/// Runs `steps` optimizer updates on two parameters with seeded random gradients, through the
/// graph and through referenceStep, and compares parameters and state after each.
void checkOptimizer(TrainingTest &test, const TrainingOptions &o, int steps, double rtol) {
  std::vector<Shape> shapes{{3, 4}, {5}};
  std::vector<std::string> slots = optimizerStateNames(o);
  std::vector<Tensor> params, state;
  std::vector<RefState> ref(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(randomTensor(shapes[i], 100 + i));
    ref[i].p = floats(params[i]);
    size_t n = ref[i].p.size();
    ref[i].buf.assign(n, 0);
    ref[i].m.assign(n, 0);
    ref[i].v.assign(n, 0);
    for (size_t s = 0; s < slots.size(); ++s)
      state.push_back(Tensor(DType::F32, shapes[i]));
  }
  Tensor step = Tensor::scalar<int64_t>(0);
  for (int k = 0; k < steps; ++k) {
    float lr = 0.01f * (1 + k % 3); // the rate may change from step to step
    std::vector<Tensor> grads;
    for (size_t i = 0; i < shapes.size(); ++i)
      grads.push_back(randomTensor(shapes[i], 1000 * k + i, -2, 2));
    std::vector<Tensor> args = params;
    args.insert(args.end(), grads.begin(), grads.end());
    args.insert(args.end(), state.begin(), state.end());
    args.push_back(step);
    args.push_back(Tensor::scalar<float>(lr));
    size_t np = params.size();
    auto out = test.runBuilt(args, [&](CoreBuilder &b, mlir::ValueRange a) {
      llvm::SmallVector<Value> p(a.begin(), a.begin() + np), g(a.begin() + np, a.begin() + 2 * np);
      std::vector<llvm::SmallVector<Value>> st(np);
      for (size_t i = 0; i < np; ++i)
        for (size_t s = 0; s < slots.size(); ++s)
          st[i].push_back(a[2 * np + i * slots.size() + s]);
      OptimizerUpdate u = buildOptimizerUpdate(b, o, p, g, st, a[a.size() - 2], a.back());
      llvm::SmallVector<Value> results(u.params);
      for (auto &s : u.state)
        results.append(s.begin(), s.end());
      results.push_back(u.step);
      return results;
    });
    for (size_t i = 0; i < np; ++i) {
      referenceStep(o, ref[i], floats(grads[i]), lr);
      params[i] = out[i];
      std::vector<double> want(ref[i].p.begin(), ref[i].p.end());
      expectClose(out[i], want, rtol, 1e-7, "parameter " + std::to_string(i) + " after step " +
                                                std::to_string(k + 1));
      for (size_t s = 0; s < slots.size(); ++s) {
        Tensor st = out[np + i * slots.size() + s];
        state[i * slots.size() + s] = st;
        const std::vector<float> &r = slots[s] == "adam_v" ? ref[i].v
                                      : slots[s] == "adam_m" ? ref[i].m
                                                             : ref[i].buf;
        expectClose(st, std::vector<double>(r.begin(), r.end()), rtol, 1e-7, slots[s]);
      }
    }
    step = out.back();
    ASSERT_EQ(step.getInt(0), k + 1);
  }
}

TEST_F(TrainingTest, SgdMatchesTorchFormulas) {
  TrainingOptions o;
  o.optimizer = OptimizerKind::SGD;
  checkOptimizer(*this, o, 5, 1e-6);
  o.momentum = 0.9;
  o.weightDecay = 0.01;
  checkOptimizer(*this, o, 8, 1e-6);
  o.nesterov = true;
  checkOptimizer(*this, o, 8, 1e-6);
  EXPECT_EQ(optimizerStateNames(o), (std::vector<std::string>{"momentum_buffer"}));
}

TEST_F(TrainingTest, AdamMatchesTorchFormulas) {
  TrainingOptions o;
  o.optimizer = OptimizerKind::Adam;
  checkOptimizer(*this, o, 12, 1e-5);
  o.weightDecay = 0.05;
  o.beta1 = 0.6; // lerp weight 0.4: the other branch stays below 0.5 too
  checkOptimizer(*this, o, 6, 1e-5);
  o.beta1 = 0.3; // lerp weight 0.7 >= 0.5: ATen's other form
  checkOptimizer(*this, o, 6, 1e-5);
}

TEST_F(TrainingTest, AdamWDecaysDecoupled) {
  TrainingOptions o;
  o.optimizer = OptimizerKind::AdamW;
  o.weightDecay = 0.1;
  checkOptimizer(*this, o, 12, 1e-5);
  EXPECT_EQ(optimizerStateNames(o), (std::vector<std::string>{"adam_m", "adam_v"}));
}

TEST_F(TrainingTest, ClipGradNormScalesToTheMaxNorm) {
  Tensor g0 = randomTensor({4, 3}, 41, -3, 3), g1 = randomTensor({7}, 42, -3, 3);
  double total = 0;
  for (const Tensor *g : {&g0, &g1})
    for (int64_t i = 0; i < g->numElements(); ++i)
      total += g->getDouble(i) * g->getDouble(i);
  total = std::sqrt(total);
  for (double maxNorm : {0.5, 1e3}) {
    auto out = runBuilt({g0, g1}, [&](CoreBuilder &b, mlir::ValueRange a) {
      return clipGradNorm(b, {a[0], a[1]}, maxNorm);
    });
    double coef = std::min(maxNorm / (total + 1e-6), 1.0);
    for (int k = 0; k < 2; ++k) {
      std::vector<double> want = toDoubles(k ? g1 : g0);
      for (double &w : want)
        w *= coef;
      expectClose(out[k], want, 1e-5, 1e-7, "clipped gradient");
    }
  }
}

// ---- Dropout in training mode ----

/// A model: y = Dropout(x, ratio) and, with `second`, z = Dropout(y, ratio) too; x is [16, 320]
/// (more elements than constant folding materializes from a broadcast).
onnx::ModelProto dropoutModel(float ratio, bool second, int64_t opset = 17) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto *op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  onnx::GraphProto *g = model.mutable_graph();
  g->set_name("dropout");
  auto addInfo = [](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> *list,
                    const std::string &name, int32_t type, std::vector<int64_t> dims) {
    auto *vi = list->Add();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (int64_t d : dims)
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  addInfo(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {16, 320});
  *g->add_initializer() = tensorToProto(Tensor::scalar<float>(ratio), "ratio");
  *g->add_initializer() = tensorToProto(Tensor::scalar<bool>(true), "training_mode");
  auto addDropout = [&](const std::string &in, const std::string &out, const std::string &mask) {
    auto *n = g->add_node();
    n->set_op_type("Dropout");
    n->set_name("drop_" + out);
    n->add_input(in);
    n->add_input("ratio");
    n->add_input("training_mode");
    n->add_output(out);
    n->add_output(mask);
  };
  addDropout("x", "y", "mask");
  addInfo(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {16, 320});
  addInfo(g->mutable_output(), "mask", onnx::TensorProto::BOOL, {16, 320});
  if (second) {
    addDropout("y", "z", "mask2");
    addInfo(g->mutable_output(), "z", onnx::TensorProto::FLOAT, {16, 320});
  }
  prepareOnnxModel(model, {});
  return model;
}

/// splitmix64's finaliser, as the comment at lowerDropout defines it.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The documented generator: element i of Dropout stream `stream` under `key` is kept when this
/// is >= ratio.
float uniformOf(uint64_t key, uint64_t stream, uint64_t i) {
  uint64_t seed = mix(key ^ (stream * 0xD1B54A32D192ED03ULL));
  return (float)(mix(seed + (i + 1) * 0x9E3779B97F4A7C15ULL) >> 40) * std::ldexp(1.0f, -24);
}

TEST_F(TrainingTest, DropoutDropsWithTheDocumentedGenerator) {
  const float ratio = 0.3f;
  onnx::ModelProto model = dropoutModel(ratio, /*second=*/true);
  ImportOptions opts;
  opts.training = true;
  ImportedModel m = importOnnxModel(ctx, model, opts);
  auto main = m.module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_EQ(m.rngKeyArgument, 1);
  ASSERT_EQ(main.getNumArguments(), 2u);
  EXPECT_TRUE(main.getArgumentTypes()[1] ==
              mlir::RankedTensorType::get({}, mlir::IntegerType::get(&ctx, 64, mlir::IntegerType::Unsigned)));

  // The element counter is built from per-dim iotas: no constant as large as the input.
  main.walk([&](ConstantOp c) {
    auto attr = llvm::cast<mlir::DenseElementsAttr>(c.getValue());
    EXPECT_TRUE(attr.isSplat() || attr.getNumElements() <= 320) << "a constant of " << attr.getNumElements();
  });

  Tensor x = randomTensor({16, 320}, 51);
  auto run = [&](uint64_t key) { return runFunction(main, {x, Tensor::scalar<uint64_t>(key)}); };
  auto a = run(7), again = run(7), other = run(8);
  EXPECT_EQ(toDoubles(a[0]), toDoubles(again[0])) << "the same key draws the same mask";
  EXPECT_NE(toDoubles(a[1]), toDoubles(other[1])) << "another key draws another mask";

  const float scale = 1.0f / 0.7f;
  int64_t kept = 0, n = x.numElements(), sameAsFirst = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = a[1].getInt(i) != 0;
    ASSERT_EQ(keep, uniformOf(7, 1, i) >= ratio) << "element " << i;
    kept += keep;
    float y = a[0].data<float>()[i];
    EXPECT_EQ(y, keep ? x.data<float>()[i] * scale : 0.0f) << "element " << i;
    // The second Dropout draws its own stream: its mask is not the first one's.
    bool keepBoth = a[2].data<float>()[i] != 0;
    EXPECT_EQ(keepBoth, keep && uniformOf(7, 2, i) >= ratio);
    sameAsFirst += keepBoth == keep;
  }
  double fraction = (double)kept / n; // ~0.7 +- 0.0064 (one sigma over 5120 draws)
  EXPECT_GT(fraction, 0.67);
  EXPECT_LT(fraction, 0.73);
  EXPECT_LT(sameAsFirst, n - 500); // ~0.21 n differ
}

TEST_F(TrainingTest, DropoutOutsideTrainingIsTheIdentity) {
  onnx::ModelProto model = dropoutModel(0.3f, false, /*opset=*/17);
  // training_mode is a constant true: without training mode that is an error naming the node.
  EXPECT_CONTAINS(errorOf([&] { importOnnxModel(ctx, model, {}); }), "drop_y");
  // A constant false training_mode: the identity, and no key argument.
  model.mutable_graph()->mutable_initializer(1)->CopyFrom(
      tensorToProto(Tensor::scalar<bool>(false), "training_mode"));
  ImportedModel m = importOnnxModel(ctx, model, {});
  EXPECT_EQ(m.rngKeyArgument, -1);
  auto main = m.module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_EQ(main.getNumArguments(), 1u);
  Tensor x = randomTensor({16, 320}, 61);
  auto out = runFunction(main, {x});
  EXPECT_EQ(toDoubles(out[0]), toDoubles(x));
  for (int64_t i = 0; i < x.numElements(); ++i)
    ASSERT_EQ(out[1].getInt(i), 1);
}

TEST_F(TrainingTest, DropoutRatioZeroNeedsNoKey) {
  onnx::ModelProto model = dropoutModel(0.0f, false);
  ImportOptions opts;
  opts.training = true;
  ImportedModel m = importOnnxModel(ctx, model, opts);
  EXPECT_EQ(m.rngKeyArgument, -1);
}

// ---- Parameters as arguments ----

TEST_F(TrainingTest, ParameterInitializersBecomeTrailingArguments) {
  // y = (x + a) * b with initializers a, b (b a parameter, a folded) and a key-less import.
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *g = model.mutable_graph();
  auto *in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  Tensor a = randomTensor({3}, 71), bw = randomTensor({3}, 72), c = randomTensor({3}, 73);
  *g->add_initializer() = tensorToProto(a, "a");
  *g->add_initializer() = tensorToProto(bw, "b");
  *g->add_initializer() = tensorToProto(c, "c");
  for (auto [op, x, y, out] : {std::tuple{"Add", "x", "a", "s"}, {"Mul", "s", "b", "t"},
                               {"Mul", "t", "c", "y"}}) {
    auto *n = g->add_node();
    n->set_op_type(op);
    n->add_input(x);
    n->add_input(y);
    n->add_output(out);
  }
  g->add_output()->set_name("y");
  prepareOnnxModel(model, {});
  ImportOptions opts;
  opts.parameterInitializers = {"c", "b", "not_there"};
  ImportedModel m = importOnnxModel(ctx, model, opts);
  EXPECT_EQ(m.parameterIndices, (std::vector<int64_t>{1, 2})); // initializer order
  auto main = m.module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_EQ(main.getNumArguments(), 3u);
  Tensor b2 = randomTensor({3}, 74), c2 = randomTensor({3}, 75), x = randomTensor({3}, 76);
  auto out = runFunction(main, {x, b2, c2});
  for (int i = 0; i < 3; ++i)
    EXPECT_FLOAT_EQ(out[0].data<float>()[i],
                    (x.data<float>()[i] + a.data<float>()[i]) * b2.data<float>()[i] *
                        c2.data<float>()[i]);
}

// ---- Training entries (buildTraining) ----

/// An MLP: x [n, d] -> Gemm(w1 [h, d], b1 [h], transB=1) -> [BatchNormalization(bn_scale,
/// bn_bias, bn_mean, bn_var; momentum 0.8)] -> Tanh -> [Dropout(ratio)] -> MatMul(w2 [h, c]) ->
/// Add(b2 [c]) -> Reshape(shape = [n, c], an i64 initializer) -> logits. Initializers in this
/// order: w1, b1, w2, b2, shape, [ratio], [bn_scale, bn_bias, bn_mean, bn_var].
onnx::ModelProto mlpModel(int64_t n, int64_t d, int64_t h, int64_t c, DType dtype,
                          float dropout = 0, bool batchNorm = false) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *g = model.mutable_graph();
  g->set_name("mlp");
  auto info = [&](onnx::ValueInfoProto *vi, const std::string &name, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtypeToOnnx(dtype));
    for (int64_t dim : dims)
      tt->mutable_shape()->add_dim()->set_dim_value(dim);
  };
  info(g->add_input(), "x", {n, d});
  uint32_t seed = 200;
  auto init = [&](const std::string &name, Shape shape, float range) {
    Tensor t = randomTensor(shape, seed++, -range, range);
    *g->add_initializer() = tensorToProto(kernels::cast(t, dtype), name);
  };
  init("w1", {h, d}, 0.8f);
  init("b1", {h}, 0.3f);
  init("w2", {h, c}, 0.8f);
  init("b2", {c}, 0.3f);
  *g->add_initializer() = tensorToProto(Tensor::fromVector<int64_t>({2}, {n, c}), "shape");
  auto node = [&](const std::string &op, std::vector<std::string> in, const std::string &out) {
    auto *nd = g->add_node();
    nd->set_op_type(op);
    nd->set_name(op + "_" + out);
    for (auto &i : in)
      nd->add_input(i);
    nd->add_output(out);
    return nd;
  };
  auto *gemm = node("Gemm", {"x", "w1", "b1"}, "hidden");
  auto *transB = gemm->add_attribute();
  transB->set_name("transB");
  transB->set_type(onnx::AttributeProto::INT);
  transB->set_i(1);
  std::string hidden = "hidden";
  if (batchNorm) {
    init("bn_scale", {h}, 1.5f);
    init("bn_bias", {h}, 0.5f);
    init("bn_mean", {h}, 0.5f);
    Tensor var = randomTensor({h}, seed++, 0.5f, 2.0f);
    *g->add_initializer() = tensorToProto(kernels::cast(var, dtype), "bn_var");
    auto *bn = node("BatchNormalization", {"hidden", "bn_scale", "bn_bias", "bn_mean", "bn_var"},
                    "normalized");
    auto *momentum = bn->add_attribute();
    momentum->set_name("momentum");
    momentum->set_type(onnx::AttributeProto::FLOAT);
    momentum->set_f(0.8f);
    hidden = "normalized";
  }
  node("Tanh", {hidden}, "act");
  std::string act = "act";
  if (dropout > 0) {
    *g->add_initializer() = tensorToProto(Tensor::scalar<float>(dropout), "ratio");
    node("Dropout", {"act", "ratio"}, "dropped");
    act = "dropped";
  }
  node("MatMul", {act, "w2"}, "mm");
  node("Add", {"mm", "b2"}, "sum");
  node("Reshape", {"sum", "shape"}, "logits");
  info(g->add_output(), "logits", {n, c});
  prepareOnnxModel(model, {});
  return model;
}

const EntrySpec &entryOf(const TrainingSpec &spec, const std::string &name) {
  for (const EntrySpec &e : spec.entries)
    if (e.name == name)
      return e;
  throw Error("no entry " + name);
}

/// Runs entries as the runtime does: State inputs from the current state, State outputs
/// become the next state, the rest comes from / goes to the caller.
struct Runner {
  const TrainingSpec &spec;
  std::vector<Tensor> state;

  explicit Runner(const TrainingSpec &spec) : spec(spec) {
    for (const StateSpec &s : spec.state)
      state.push_back(s.initial);
  }

  /// The entry's Data and Loss outputs, in order.
  std::vector<Tensor> run(const std::string &name, const std::vector<Tensor> &data, float lr = 0,
                          uint64_t key = 0) {
    const EntrySpec &e = entryOf(spec, name);
    std::vector<Tensor> args;
    size_t nextData = 0;
    for (const Binding &in : e.inputs) {
      switch (in.role) {
      case BindingRole::State: args.push_back(state.at(in.state)); break;
      case BindingRole::Data: args.push_back(data.at(nextData++)); break;
      case BindingRole::LearningRate: args.push_back(Tensor::scalar<float>(lr)); break;
      case BindingRole::RngKey: args.push_back(Tensor::scalar<uint64_t>(key)); break;
      case BindingRole::Loss: ADD_FAILURE() << "Loss is not an input role"; break;
      }
    }
    EXPECT_EQ(nextData, data.size()) << name << " takes every batch tensor";
    std::vector<Tensor> outs =
        runFunction(e.module.get().lookupSymbol<mlir::func::FuncOp>("main"), args), caller;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (e.outputs[i].role == BindingRole::State)
        state.at(e.outputs[i].state) = outs[i];
      else
        caller.push_back(outs[i]);
    }
    return caller;
  }
};

std::vector<Tensor> parametersOf(const Runner &r) {
  std::vector<Tensor> p;
  for (size_t i = 0; i < r.spec.state.size(); ++i)
    if (r.spec.state[i].kind == StateKind::Parameter)
      p.push_back(r.state[i]);
  return p;
}

TEST_F(TrainingTest, TrainStepSpecHasTheDocumentedLayout) {
  onnx::ModelProto model = mlpModel(4, 3, 5, 2, DType::F32, 0.2f);
  TrainingOptions o; // Adam, cross-entropy
  o.gradAccumulation = 2;
  o.frozen = {"b2"};
  TrainingSpec spec = buildTraining(ctx, model, o);
  // Parameters first (initializer order, b2 frozen), Adam's m and v per parameter, the step,
  // one accumulator per parameter.
  std::vector<std::string> names;
  for (const StateSpec &s : spec.state)
    names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"w1", "b1", "w2", "w1.adam_m", "w1.adam_v", "b1.adam_m",
                                             "b1.adam_v", "w2.adam_m", "w2.adam_v", "step",
                                             "w1.grad_accum", "b1.grad_accum", "w2.grad_accum"}));
  EXPECT_EQ(spec.state[2].initializerIndex, 2);
  EXPECT_EQ(spec.state[2].kind, StateKind::Parameter);
  EXPECT_EQ(spec.state[3].kind, StateKind::OptimizerState);
  EXPECT_EQ(spec.state[9].kind, StateKind::Step);
  EXPECT_EQ(spec.state[9].initial.dtype(), DType::I64);
  EXPECT_EQ(spec.state[12].kind, StateKind::GradAccumulator);
  EXPECT_EQ(spec.state[4].initial.getDouble(7), 0.0);
  EXPECT_EQ(spec.gradAccumulation, 2);
  EXPECT_CONTAINS(spec.configJson, "\"optimizer\": \"adam\"");
  EXPECT_CONTAINS(spec.configJson, "\"trainable\": [\"w1\", \"b1\", \"w2\"]");

  ASSERT_EQ(spec.entries.size(), 3u);
  const EntrySpec &train = entryOf(spec, "train_step");
  std::vector<BindingRole> roles;
  for (const Binding &b : train.inputs)
    roles.push_back(b.role);
  std::vector<BindingRole> want(13, BindingRole::State);
  want.insert(want.end(), {BindingRole::Data, BindingRole::Data, BindingRole::LearningRate,
                           BindingRole::RngKey});
  EXPECT_EQ(roles, want);
  EXPECT_EQ(train.inputNames[13], "x");
  EXPECT_EQ(train.inputNames[14], "labels");
  EXPECT_EQ(train.outputs.back().role, BindingRole::Loss);
  EXPECT_EQ(train.outputs.size(), 14u); // every state's next value and the loss
  const EntrySpec &acc = entryOf(spec, "accumulate_step");
  EXPECT_EQ(acc.inputs.size(), 3u + 3u + 2u + 1u);
  EXPECT_EQ(acc.outputs.size(), 3u + 1u);
  EXPECT_EQ(acc.outputs[0].state, 10);
  const EntrySpec &eval = entryOf(spec, "eval");
  EXPECT_EQ(eval.inputs.size(), 3u + 2u); // no learning rate, no key
  EXPECT_EQ(eval.outputNames, (std::vector<std::string>{"loss", "prediction"}));
}

TEST_F(TrainingTest, MlpLossDecreasesOverTwentySteps) {
  onnx::ModelProto model = mlpModel(16, 6, 12, 3, DType::F32, 0.1f);
  TrainingOptions o;
  o.optimizer = OptimizerKind::AdamW;
  o.weightDecay = 0.01;
  TrainingSpec spec = buildTraining(ctx, model, o);
  Runner r(spec);
  Tensor x = randomTensor({16, 6}, 301), labels = randomLabels({16}, 3, 302);
  auto meanEvalLoss = [&] {
    Tensor perSample = r.run("eval", {x, labels})[0];
    double mean = 0;
    for (int64_t i = 0; i < perSample.numElements(); ++i)
      mean += perSample.getDouble(i) / perSample.numElements();
    return mean;
  };
  double before = meanEvalLoss();
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step)
    losses.push_back(r.run("train_step", {x, labels}, 0.05f, 1000 + step)[0].getDouble(0));
  EXPECT_LT(losses.back(), 0.7 * losses.front());
  EXPECT_LT(meanEvalLoss(), 0.7 * before);
  EXPECT_EQ(r.state[spec.state.size() - 1].getInt(0), 20); // the step counter
  // The same key draws the same dropout mask: the loss is a function of (state, batch, key).
  Runner a(spec), b(spec);
  EXPECT_EQ(a.run("train_step", {x, labels}, 0.05f, 5)[0].getDouble(0),
            b.run("train_step", {x, labels}, 0.05f, 5)[0].getDouble(0));
  EXPECT_NE(a.run("train_step", {x, labels}, 0.05f, 6)[0].getDouble(0),
            b.run("train_step", {x, labels}, 0.05f, 7)[0].getDouble(0));
}

/// The train step's gradient (f64 model, so f64 throughout; SGD with lr 1 makes it p - p_next)
/// against central differences of a double reference loss on the training-mode forward model.
void checkTrainStepGradient(TrainingTest &test, bool batchNorm) {
  onnx::ModelProto model = mlpModel(5, 4, 6, 3, DType::F64, 0, batchNorm);
  TrainingOptions o;
  o.optimizer = OptimizerKind::SGD;
  o.labelSmoothing = 0.1;
  TrainingSpec spec = buildTraining(test.ctx, model, o);
  Tensor x = kernels::cast(randomTensor({5, 4}, 401, -2, 2), DType::F64);
  Tensor labels = randomLabels({5}, 3, 402);
  Runner r(spec);
  std::vector<Tensor> params = parametersOf(r);
  ASSERT_EQ(params.size(), batchNorm ? 6u : 4u);
  r.run("train_step", {x, labels}, 1.0f);
  std::vector<Tensor> next = parametersOf(r);

  ImportOptions io;
  io.parameterInitializers = {"w1", "b1", "w2", "b2", "bn_scale", "bn_bias"};
  io.bufferInitializers = {"bn_mean", "bn_var"};
  io.training = true; // batch statistics
  ImportedModel forward = importOnnxModel(test.ctx, model, io);
  auto fwdMain = forward.module->lookupSymbol<mlir::func::FuncOp>("main");
  std::vector<Tensor> buffers;
  for (int64_t i : forward.bufferIndices)
    buffers.push_back(tensorFromProto(model.graph().initializer(i)));
  auto referenceLoss = [&](const std::vector<Tensor> &p, double smoothing) {
    std::vector<Tensor> args{x};
    args.insert(args.end(), p.begin(), p.end());
    args.insert(args.end(), buffers.begin(), buffers.end());
    Tensor logits = runFunction(fwdMain, args)[0];
    double mean = 0;
    std::vector<double> per = crossEntropyReference(logits, labels, smoothing);
    for (double v : per)
      mean += v / per.size();
    return mean;
  };
  const double h = 1e-6;
  for (size_t p = 0; p < params.size(); ++p)
    for (int64_t i = 0; i < params[p].numElements(); ++i) {
      std::vector<Tensor> plus = params, minus = params;
      plus[p] = params[p].clone();
      minus[p] = params[p].clone();
      plus[p].data<double>()[i] += h;
      minus[p].data<double>()[i] -= h;
      double numeric = (referenceLoss(plus, 0.1) - referenceLoss(minus, 0.1)) / (2 * h);
      double analytic = params[p].getDouble(i) - next[p].getDouble(i);
      EXPECT_NEAR(analytic, numeric, 1e-7 + 1e-6 * std::abs(numeric))
          << spec.state[p].name << "[" << i << "]";
    }
}

TEST_F(TrainingTest, TrainStepGradientMatchesFiniteDifferences) {
  checkTrainStepGradient(*this, /*batchNorm=*/false);
}

TEST_F(TrainingTest, TrainStepGradientThroughBatchStatistics) {
  checkTrainStepGradient(*this, /*batchNorm=*/true);
}

TEST_F(TrainingTest, BatchNormRunningStatisticsAreBuffers) {
  onnx::ModelProto model = mlpModel(8, 3, 4, 2, DType::F32, 0, /*batchNorm=*/true);
  TrainingOptions o;
  o.optimizer = OptimizerKind::SGD;
  o.gradAccumulation = 2;
  TrainingSpec spec = buildTraining(ctx, model, o);
  std::vector<std::pair<std::string, StateKind>> layout;
  for (const StateSpec &st : spec.state)
    layout.push_back({st.name, st.kind});
  // No optimizer state for plain SGD; bn_mean and bn_var are buffers after the parameters.
  auto P = StateKind::Parameter, B = StateKind::Buffer, A = StateKind::GradAccumulator;
  using L = std::vector<std::pair<std::string, StateKind>>;
  EXPECT_EQ(layout, (L{{"w1", P}, {"b1", P}, {"w2", P}, {"b2", P}, {"bn_scale", P}, {"bn_bias", P},
                       {"bn_mean", B}, {"bn_var", B}, {"step", StateKind::Step},
                       {"w1.grad_accum", A}, {"b1.grad_accum", A}, {"w2.grad_accum", A},
                       {"b2.grad_accum", A}, {"bn_scale.grad_accum", A}, {"bn_bias.grad_accum", A}}));
  EXPECT_EQ(spec.state[6].initializerIndex, 7);
  o.trainable = {"bn_mean"};
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }),
                  "'bn_mean' (trainable) is a BatchNormalization running statistic");

  // Each micro-batch (accumulate_step and train_step alike) moves the running statistics:
  // running = running * 0.8 + batch * 0.2, population variance of the Gemm's output.
  Runner r(spec);
  Tensor x = randomTensor({8, 3}, 801, -2, 2), labels = randomLabels({8}, 2, 802);
  for (const char *entry : {"accumulate_step", "train_step"}) {
    std::vector<Tensor> p = parametersOf(r);
    std::vector<double> mean(4, 0), var(4, 0), hidden(8 * 4);
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double acc = p[1].getDouble(j);
        for (int64_t k = 0; k < 3; ++k)
          acc += x.getDouble(i * 3 + k) * p[0].getDouble(j * 3 + k);
        hidden[i * 4 + j] = acc;
        mean[j] += acc / 8;
      }
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 4; ++j)
        var[j] += (hidden[i * 4 + j] - mean[j]) * (hidden[i * 4 + j] - mean[j]) / 8;
    std::vector<double> wantMean(4), wantVar(4);
    for (int64_t j = 0; j < 4; ++j) {
      wantMean[j] = r.state[6].getDouble(j) * 0.8 + mean[j] * 0.2;
      wantVar[j] = r.state[7].getDouble(j) * 0.8 + var[j] * 0.2;
    }
    r.run(entry, {x, labels}, 0.1f);
    expectClose(r.state[6], wantMean, 1e-5, 1e-6, std::string(entry) + " running mean");
    expectClose(r.state[7], wantVar, 1e-5, 1e-6, std::string(entry) + " running variance");
  }

  // eval normalizes with the running statistics: the same as the inference import given them.
  ImportOptions io;
  io.parameterInitializers = {"w1", "b1", "w2", "b2", "bn_scale", "bn_bias"};
  io.bufferInitializers = {"bn_mean", "bn_var"};
  ImportedModel inference = importOnnxModel(ctx, model, io);
  std::vector<Tensor> args{x};
  for (size_t i = 0; i < 8; ++i)
    args.push_back(r.state[i]);
  Tensor logits = runFunction(inference.module->lookupSymbol<mlir::func::FuncOp>("main"), args)[0];
  expectClose(r.run("eval", {x, labels})[0], crossEntropyReference(logits, labels, 0), 1e-5, 1e-6,
              "eval loss");
}

TEST_F(TrainingTest, AccumulatingFourMicroBatchesEqualsOneBatch) {
  TrainingOptions o;
  o.optimizer = OptimizerKind::SGD;
  o.momentum = 0.9;
  o.clipGradNorm = 0.5; // applies to the averaged gradient
  TrainingSpec whole = buildTraining(ctx, mlpModel(32, 6, 8, 4, DType::F32), o);
  o.gradAccumulation = 4;
  TrainingSpec micro = buildTraining(ctx, mlpModel(8, 6, 8, 4, DType::F32), o);
  Tensor x = randomTensor({32, 6}, 501), labels = randomLabels({32}, 4, 502);
  Runner a(whole), b(micro);
  std::vector<Tensor> start = parametersOf(a);
  for (int update = 0; update < 2; ++update) {
    double wholeLoss = a.run("train_step", {x, labels}, 0.5f)[0].getDouble(0), microLoss = 0;
    for (int k = 0; k < 4; ++k) {
      Tensor xk = kernels::slice(x, {8 * k, 0}, {8 * k + 8, 6}, {1, 1});
      Tensor lk = kernels::slice(labels, {8 * k}, {8 * k + 8}, {1});
      microLoss += b.run(k < 3 ? "accumulate_step" : "train_step", {xk, lk}, 0.5f)[0].getDouble(0) / 4;
    }
    EXPECT_NEAR(microLoss, wholeLoss, 1e-6 * wholeLoss);
    std::vector<Tensor> pa = parametersOf(a), pb = parametersOf(b);
    for (size_t p = 0; p < pa.size(); ++p) {
      std::vector<double> deltaA, deltaB;
      for (int64_t i = 0; i < pa[p].numElements(); ++i) {
        deltaA.push_back(pa[p].getDouble(i) - start[p].getDouble(i));
        deltaB.push_back(pb[p].getDouble(i) - start[p].getDouble(i));
      }
      expectClose(Tensor::fromVector<double>({(int64_t)deltaB.size()}, deltaB), deltaA, 1e-4, 1e-7,
                  micro.state[p].name + " update");
    }
  }
  // train_step leaves the accumulators at zero.
  for (size_t i = 0; i < micro.state.size(); ++i) {
    if (micro.state[i].kind != StateKind::GradAccumulator)
      continue;
    for (int64_t j = 0; j < b.state[i].numElements(); ++j)
      ASSERT_EQ(b.state[i].getDouble(j), 0.0);
  }
}

TEST_F(TrainingTest, MseTrainsTowardsTargets) {
  TrainingOptions o;
  o.loss = LossKind::MSE;
  o.optimizer = OptimizerKind::SGD;
  TrainingSpec spec = buildTraining(ctx, mlpModel(6, 3, 5, 2, DType::F32), o);
  EXPECT_EQ(entryOf(spec, "eval").outputNames, (std::vector<std::string>{"loss"}));
  EXPECT_EQ(entryOf(spec, "train_step").inputNames.end()[-2], "targets");
  Runner r(spec);
  Tensor x = randomTensor({6, 3}, 601), t = randomTensor({6, 2}, 602);
  double first = r.run("train_step", {x, t}, 0.1f)[0].getDouble(0), last = first;
  for (int i = 0; i < 10; ++i)
    last = r.run("train_step", {x, t}, 0.1f)[0].getDouble(0);
  EXPECT_LT(last, first);
  EXPECT_EQ(r.run("eval", {x, t})[0].shape(), (Shape{6, 2}));
}

TEST_F(TrainingTest, BuildTrainingRejectsWhatItCannotTrain) {
  onnx::ModelProto model = mlpModel(4, 3, 5, 2, DType::F32);
  TrainingOptions o;
  o.outputIndex = 1;
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }),
                  "loss output index 1 is out of range: the model has 1 output(s)");
  o = {};
  o.trainable = {"w1", "nope"};
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }),
                  "'nope' (trainable) is not a floating-point initializer");
  o = {};
  o.frozen = {"shape"}; // an i64 initializer
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }),
                  "'shape' (frozen) is not a floating-point initializer");
  o = {};
  o.trainable = {"w1", "ratio"}; // a float initializer that Dropout needs at compile time
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, mlpModel(4, 3, 5, 2, DType::F32, 0.5f), o); }),
                  "'ratio' cannot be trained: the model needs its value at compile time");
  o = {};
  o.frozen = {"w1", "b1", "w2", "b2"};
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }), "no trainable parameters");
  o = {};
  o.momentum = 0.9; // Adam has no momentum option: nesterov needs SGD
  o.nesterov = true;
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, model, o); }), "nesterov needs SGD");
  // Cross-entropy on a rank-1 output: the loss names the output.
  onnx::ModelProto flat = mlpModel(4, 3, 5, 2, DType::F32);
  auto *shape = flat.mutable_graph()->mutable_initializer(4);
  *shape = tensorToProto(Tensor::fromVector<int64_t>({1}, {8}), "shape");
  flat.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  prepareOnnxModel(flat, {});
  EXPECT_CONTAINS(errorOf([&] { buildTraining(ctx, flat, {}); }),
                  "cannot build the loss on model output 'logits': cross-entropy needs logits");
}

TEST_F(TrainingTest, AnOpWithoutAGradientIsAnErrorNamingItsNode) {
  // logits = ScatterElements(w, indices, x, reduction=max): no gradient for w through it.
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(18);
  onnx::GraphProto *g = model.mutable_graph();
  auto info = [](onnx::ValueInfoProto *vi, const std::string &name, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  info(g->add_input(), "x", {1, 3});
  *g->add_initializer() = tensorToProto(randomTensor({2, 3}, 901), "w");
  *g->add_initializer() = tensorToProto(Tensor::fromVector<int64_t>({1, 3}, {1, 0, 1}), "indices");
  auto *n = g->add_node();
  n->set_op_type("ScatterElements");
  n->set_name("scatter_max");
  for (const char *in : {"w", "indices", "x"})
    n->add_input(in);
  n->add_output("logits");
  auto *reduction = n->add_attribute();
  reduction->set_name("reduction");
  reduction->set_type(onnx::AttributeProto::STRING);
  reduction->set_s("max");
  info(g->add_output(), "logits", {2, 3});
  prepareOnnxModel(model, {});
  std::string msg = errorOf([&] { buildTraining(ctx, model, {}); });
  EXPECT_CONTAINS(msg, "cannot differentiate the model: node 'scatter_max'");
}

TEST_F(TrainingTest, GradientOfSumMatchesFiniteDifferences) {
  onnx::ModelProto model = mlpModel(3, 4, 5, 2, DType::F64);
  ImportedModel g = buildGradientOfSum(ctx, model, {});
  EXPECT_EQ(g.parameterIndices, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.outputNames, (std::vector<std::string>{"grad_0", "grad_1", "grad_2", "grad_3"}));
  auto gradMain = g.module->lookupSymbol<mlir::func::FuncOp>("main");
  Tensor x = kernels::cast(randomTensor({3, 4}, 701), DType::F64);
  std::vector<Tensor> params;
  for (int i = 0; i < 4; ++i)
    params.push_back(tensorFromProto(model.graph().initializer(i)));
  std::vector<Tensor> args{x};
  args.insert(args.end(), params.begin(), params.end());
  std::vector<Tensor> grads = runFunction(gradMain, args);
  ASSERT_EQ(grads.size(), 4u);

  ImportOptions io;
  io.parameterInitializers = {"w1", "b1", "w2", "b2"};
  ImportedModel forward = importOnnxModel(ctx, model, io);
  auto fwd = forward.module->lookupSymbol<mlir::func::FuncOp>("main");
  auto sumAt = [&](const std::vector<Tensor> &p) {
    std::vector<Tensor> a{x};
    a.insert(a.end(), p.begin(), p.end());
    Tensor y = runFunction(fwd, a)[0];
    double s = 0;
    for (int64_t i = 0; i < y.numElements(); ++i)
      s += y.getDouble(i);
    return s;
  };
  const double h = 1e-6;
  for (size_t p = 0; p < params.size(); ++p)
    for (int64_t i = 0; i < params[p].numElements(); ++i) {
      std::vector<Tensor> plus = params, minus = params;
      plus[p] = params[p].clone();
      minus[p] = params[p].clone();
      plus[p].data<double>()[i] += h;
      minus[p].data<double>()[i] -= h;
      double numeric = (sumAt(plus) - sumAt(minus)) / (2 * h);
      EXPECT_NEAR(grads[p].getDouble(i), numeric, 1e-7 + 1e-6 * std::abs(numeric));
    }
}

} // namespace
