//===- GuardedSchemas.cpp - ONNX shape inference that cannot crash on bad input ===//
//
// See GuardedSchemas.h.
//===----------------------------------------------------------------------===//
#include "GuardedSchemas.h"

#include <onnx/defs/shape_inference.h>

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace tcc {
namespace {

/// The rank of input `i` when its shape is known, else -1.
int64_t knownRank(onnx::InferenceContext &ctx, size_t i) {
  if (i >= ctx.getNumInputs())
    return -1;
  const onnx::TypeProto *t = ctx.getInputType(i);
  if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape())
    return -1;
  return t->tensor_type().shape().dim_size();
}

/// The ints of attribute `name` must number `count` and each be >= `least` (when present).
void checkInts(onnx::InferenceContext &ctx, const char *name, int64_t count, int64_t least) {
  const onnx::AttributeProto *a = ctx.getAttribute(name);
  if (!a)
    return;
  if (count >= 0 && a->ints_size() != count)
    fail_shape_inference("attribute ", name, " has ", a->ints_size(), " values, expected ",
                         count);
  for (int64_t v : a->ints())
    if (v < least)
      fail_shape_inference("attribute ", name, " has the value ", v, ", expected >= ", least);
}

/// What ONNX's convolution/pooling inference (convPoolShapeInference,
/// convTransposeShapeInference) assumes: input x of rank >= 2, a weight (when the op has one) of
/// the same rank, and spatial attributes with one value per spatial dim (pads two), kernel
/// dims, strides and dilations >= 1, no negative dims in x or the weight.
void guardConvPool(onnx::InferenceContext &ctx, int64_t weightInput) {
  int64_t rank = knownRank(ctx, 0);
  if (rank < 0)
    return; // nothing is computed from an unknown shape
  if (rank < 2)
    fail_shape_inference("input 0 has rank ", rank, ", expected at least 2");
  for (int64_t i : {int64_t(0), weightInput}) {
    int64_t r = i < 0 ? -1 : knownRank(ctx, (size_t)i);
    if (r < 0)
      continue;
    if (r != rank)
      fail_shape_inference("input ", i, " has rank ", r, ", input 0 rank ", rank);
    for (const auto &d : ctx.getInputType((size_t)i)->tensor_type().shape().dim())
      if (d.has_dim_value() && d.dim_value() < 0)
        fail_shape_inference("input ", i, " has a negative dim");
  }
  int64_t spatial = rank - 2;
  checkInts(ctx, "kernel_shape", spatial, 1);
  checkInts(ctx, "strides", spatial, 1);
  checkInts(ctx, "dilations", spatial, 1);
  checkInts(ctx, "pads", 2 * spatial, std::numeric_limits<int64_t>::min());
  checkInts(ctx, "output_padding", spatial, 0);
  checkInts(ctx, "output_shape", -1, 0);
  if (const onnx::AttributeProto *g = ctx.getAttribute("group"); g && g->i() < 1)
    fail_shape_inference("attribute group is ", g->i(), ", expected >= 1");
}

/// Input `i`, when its shape is known, must have rank `rank`.
void checkRank(onnx::InferenceContext &ctx, size_t i, int64_t rank) {
  int64_t r = knownRank(ctx, i);
  if (r >= 0 && r != rank)
    fail_shape_inference("input ", i, " has rank ", r, ", expected ", rank);
}

using Guard = std::function<void(onnx::InferenceContext &)>;

/// The guard of each guarded op type (ONNX domain).
const std::map<std::string, Guard> &guardedOps() {
  auto convPool = [](int64_t weight) -> Guard {
    return [weight](onnx::InferenceContext &ctx) { guardConvPool(ctx, weight); };
  };
  static const std::map<std::string, Guard> ops = {
      {"Conv", convPool(1)},
      {"ConvInteger", convPool(1)},
      {"QLinearConv", convPool(3)},
      {"ConvTranspose", convPool(1)},
      {"AveragePool", convPool(-1)},
      {"MaxPool", convPool(-1)},
      {"LpPool", convPool(-1)},
      {"MaxUnpool", convPool(-1)},
      // LayerNormalization's indexes X's dims by its axis (fuzzer: a rank-0 X crashed it).
      {"LayerNormalization",
       [](onnx::InferenceContext &ctx) {
         int64_t rank = knownRank(ctx, 0);
         if (rank < 0)
           return;
         const onnx::AttributeProto *a = ctx.getAttribute("axis");
         int64_t axis = a ? a->i() : -1;
         if (rank < 1 || axis < -rank || axis >= rank)
           fail_shape_inference("axis ", axis, " is out of range for input 0 of rank ", rank);
       }},
      // STFT's inference reads dims 0..2 of the signal (fuzzer: a rank-1 signal crashed it).
      {"STFT",
       [](onnx::InferenceContext &ctx) {
         checkRank(ctx, 0, 3);
         checkRank(ctx, 1, 0);
         checkRank(ctx, 2, 1);
         checkRank(ctx, 3, 0);
       }},
  };
  return ops;
}

/// Operators whose data propagation reads its input's type without checking that there is one
/// (Shape's, in 1.12): a value with no type at all (the output of a node ONNX skipped: an
/// operator it does not know, or a newer version of one) crashed it. Guarded, it propagates
/// nothing there.
bool dataPropagationNeedsTypes(const std::string &op) { return op == "Shape" || op == "Size"; }

class GuardedRegistry final : public onnx::ISchemaRegistry {
public:
  const onnx::OpSchema *GetSchema(const std::string &key, const int maxInclusiveVersion,
                                  const std::string &domain) const override {
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Instance()->GetSchema(key, maxInclusiveVersion, domain);
    auto op = guardedOps().find(key);
    bool guardInference = op != guardedOps().end();
    bool guardPropagation = dataPropagationNeedsTypes(key);
    if (!schema || !(guardInference || guardPropagation) ||
        (!domain.empty() && domain != "ai.onnx"))
      return schema;
    std::lock_guard<std::mutex> lock(mutex_);
    auto &guarded = schemas_[{domain, key, schema->SinceVersion()}];
    if (!guarded) {
      guarded = std::make_unique<onnx::OpSchema>(*schema);
      if (guardInference) {
        onnx::InferenceFunction infer = schema->GetTypeAndShapeInferenceFunction();
        const Guard &guard = op->second;
        guarded->TypeAndShapeInferenceFunction([infer, &guard](onnx::InferenceContext &ctx) {
          guard(ctx);
          infer(ctx);
        });
      }
      if (guardPropagation) {
        onnx::DataPropagationFunction propagate = schema->GetDataPropagationFunction();
        guarded->PartialDataPropagationFunction(
            [propagate](onnx::DataPropagationContext &ctx) {
              for (size_t i = 0; i < ctx.getNumInputs(); ++i)
                if (!ctx.getInputType(i))
                  return;
              propagate(ctx);
            });
      }
    }
    return guarded.get();
  }

private:
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<std::string, std::string, int>, std::unique_ptr<onnx::OpSchema>>
      schemas_;
};

} // namespace

const onnx::ISchemaRegistry *guardedSchemaRegistry() {
  static const GuardedRegistry registry;
  return &registry;
}

} // namespace tcc
