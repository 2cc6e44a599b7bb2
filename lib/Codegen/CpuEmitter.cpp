//===- CpuEmitter.cpp - The CPU loop skeleton of emitted tk kernels -------===//
//
// Maps the loops of a tk.kernel to C++ with OpenMP pragmas; all scalar code comes from
// ScalarEmitter. One C++ local per SSA value, loop indices `i<n>`, reduction accumulators
// `acc<n>`, carried values `c<n>`, buffers `arg<position>` (typed restrict pointers with the
// buffer's shape in a comment), so the output reads like the IR it came from.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Codegen/ScalarEmitter.h"

#include "tcc/IR/TkDialect.h"
#include "tcc/Support/Tensor.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace tcc;
using namespace tcc::codegen;

namespace {

/// A loop nest runs on OpenMP threads when it executes at least this many scalar ops
/// (iterations times ops in the body). Waking libgomp's pooled threads and joining them costs
/// a few microseconds (more when they have gone to sleep), while vectorised scalar ops run at
/// roughly 0.3-1 ns each: below ~64K ops (20-60 us of serial work) the fork/join overhead
/// would eat a large part of what a second thread saves.
constexpr double kParallelWorkThreshold = 1 << 16;

/// A threaded pointwise nest whose outer dims have fewer iterations than this splits its
/// innermost dim across threads instead (each thread walks the few outer iterations).
constexpr int64_t kMinOuterIterations = 16;

bool isLoop(Operation *op) {
  return isa<tk::ParallelOp, tk::ReduceOp, tk::ArgReduceOp, tk::ForOp>(op);
}

bool hasLoops(Block &block) {
  bool found = false;
  block.walk([&](Operation *op) {
    if (isLoop(op))
      found = true;
  });
  return found;
}

/// Reductions over at most this many positions (pooling windows) nested in a parallel loop run
/// as plain loops inside it, and the parallel loop's innermost dim is the simd loop instead.
constexpr double kSmallWindow = 64;

double product(ArrayRef<int64_t> bounds);

/// Whether every loop in `block` is a small window reduction directly in it (a loop-free body
/// of at most kSmallWindow iterations): vectorising over 3 or 9 window positions wastes most of
/// the vector and leaves the output row scalar; vectorising over the row does not.
bool onlySmallWindows(Block &block) {
  bool any = false, small = true;
  block.walk([&](Operation *op) {
    if (!isLoop(op))
      return;
    auto r = dyn_cast<tk::ReduceOp>(op);
    if (r && r->getBlock() == &block && !hasLoops(r.getBody().front()) &&
        product(r.getBounds()) <= kSmallWindow)
      any = true;
    else if (!r || r->getBlock() == &block)
      small = false;
  });
  return any && small;
}

/// A loop bound known only at run time (a size symbol's) counts as this many iterations in
/// the decisions made at compile time (vector or threads); threading is then also guarded by
/// the actual work at run time (an OpenMP `if` clause).
constexpr double kAssumedDynamicBound = 256;

double product(ArrayRef<int64_t> bounds) {
  double p = 1;
  for (int64_t b : bounds)
    p *= ShapedType::isDynamic(b) ? kAssumedDynamicBound : (double)b;
  return p;
}

bool anyDynamic(ArrayRef<int64_t> bounds) {
  return llvm::any_of(bounds, [](int64_t b) { return ShapedType::isDynamic(b); });
}

/// Scalar ops the block executes (loops multiply their bodies by their trip counts).
double work(Block &block) {
  double total = 0;
  for (Operation &op : block.without_terminator()) {
    if (auto p = dyn_cast<tk::ParallelOp>(op))
      total += product(p.getBounds()) * work(p.getBody().front());
    else if (auto r = dyn_cast<tk::ReduceOp>(op))
      total += product(r.getBounds()) * (1 + work(r.getBody().front()));
    else if (auto a = dyn_cast<tk::ArgReduceOp>(op))
      total += product({(int64_t)a.getBound()}) * (1 + work(a.getBody().front()));
    else if (auto f = dyn_cast<tk::ForOp>(op))
      total += product({(int64_t)f.getCount()}) * (1 + work(f.getBody().front()));
    else
      total += 1;
  }
  return total;
}

class CpuKernelEmitter {
public:
  explicit CpuKernelEmitter(func::FuncOp fn) : fn(fn), scalars(Target::Cpu) {}

  std::string emit();

private:
  void line(const std::string &text) {
    body.append(2 * depth, ' ');
    body += text;
    body += '\n';
  }
  std::string loopHeader(const std::string &index, int64_t bound) {
    return loopHeader(index, std::to_string(bound));
  }
  std::string loopHeader(const std::string &index, const std::string &bound) {
    return "for (int64_t " + index + " = 0; " + index + " < " + bound + "; ++" + index + ")";
  }
  /// The C++ bounds of a loop: the static ones as numbers, the others the names of their
  /// values (tk.size results).
  std::vector<std::string> boundNames(ArrayRef<int64_t> bounds, ValueRange dynamicBounds) {
    std::vector<std::string> names;
    size_t next = 0;
    for (int64_t b : bounds)
      names.push_back(ShapedType::isDynamic(b) ? scalars.name(dynamicBounds[next++])
                                               : std::to_string(b));
    return names;
  }
  /// The C++ trip count of a tk.for or bound of a tk.arg_reduce: `count`, or the name of its
  /// run-time value where it has one.
  std::string countName(int64_t count, Value dynamic) {
    return boundNames({count}, dynamic ? ValueRange(dynamic) : ValueRange())[0];
  }
  /// ` if(...)`: an OpenMP clause running the loop on threads only when its iterations times
  /// `bodyWork` reach the threshold, for bounds known at run time; empty for static ones.
  std::string runtimeWorkGuard(ArrayRef<std::string> bounds, ArrayRef<int64_t> staticBounds,
                               double bodyWork) {
    if (!anyDynamic(staticBounds))
      return "";
    std::string iterations;
    for (const std::string &b : bounds)
      iterations += (iterations.empty() ? "(double)" : " * (double)") + b;
    return " if(" + iterations + " * " + std::to_string(std::max(bodyWork, 1.0)) +
           " >= " + std::to_string(kParallelWorkThreshold) + ")";
  }
  /// Binds the first `count` args of `block` to fresh loop index names.
  std::vector<std::string> bindIndices(Block &block, size_t count) {
    std::vector<std::string> indices;
    for (size_t i = 0; i < count; ++i) {
      indices.push_back(scalars.fresh("i"));
      scalars.bind(block.getArgument(i), indices.back());
    }
    return indices;
  }
  /// True for a loop directly in the kernel's body (not nested in another loop).
  bool isTopLevel(Operation *op) { return op->getParentOp() == fn.getOperation(); }
  const std::string &threads() {
    usesThreads = true;
    return threadsName;
  }

  void openLoops(const std::vector<std::string> &idx, ArrayRef<std::string> bounds,
                 const std::vector<std::string> &pragmas);
  void closeLoops(size_t rank);
  void emitBlock(Block &block);
  void emitOp(Operation *op);
  void emitParallel(tk::ParallelOp op);
  void emitReduce(tk::ReduceOp op);
  void emitArgReduce(tk::ArgReduceOp op);
  void emitFor(tk::ForOp op);
  std::string pointer(Value memref);

  func::FuncOp fn;
  ScalarEmitter scalars;
  std::string body;
  int depth = 1;
  bool usesThreads = false;
  bool inSimdLoop = false; // emitting the body of a simd loop: nested loops stay plain
  const std::string threadsName = "tcc_threads";
  llvm::DenseMap<Value, std::string> pointers;
};

std::string CpuKernelEmitter::pointer(Value memref) {
  auto it = pointers.find(memref);
  if (it == pointers.end())
    throw Error("tk codegen: kernel '" + fn.getSymName().str() +
                "' accesses a buffer that is not one of its arguments");
  return it->second;
}

void CpuKernelEmitter::emitBlock(Block &block) {
  for (Operation &op : block.without_terminator())
    emitOp(&op);
}

void CpuKernelEmitter::emitOp(Operation *op) {
  // Unused pure values (scalar ops, loads) are left out: no dead locals in the output.
  if ((ScalarEmitter::isScalarOp(op) || isa<tk::LoadOp>(op)) && op->use_empty())
    return;
  if (ScalarEmitter::isScalarOp(op)) {
    std::string expr = scalars.expression(op);
    Value result = op->getResult(0);
    if (isa<tk::ConstantOp>(op)) { // literals are used in place
      scalars.bind(result, expr);
      return;
    }
    std::string local = scalars.fresh("v");
    line(scalars.computeType(result.getType()) + " " + local + " = " + expr + ";");
    scalars.bind(result, local);
    return;
  }
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](tk::LoadOp load) {
        Type type = load.getType();
        std::string element =
            pointer(load.getMemref()) + "[" +
            scalars.linearIndex(load.getMemref().getType(), load.getIndices()) + "]";
        std::string local = scalars.fresh("v");
        line(scalars.computeType(type) + " " + local + " = " + scalars.loadValue(type, element) +
             ";");
        scalars.bind(load.getResult(), local);
      })
      .Case([&](tk::StoreOp store) {
        Type type = store.getValue().getType();
        line(pointer(store.getMemref()) + "[" +
             scalars.linearIndex(store.getMemref().getType(), store.getIndices()) +
             "] = " + scalars.storeValue(type, scalars.name(store.getValue())) + ";");
      })
      .Case([&](tk::ParallelOp p) { emitParallel(p); })
      .Case([&](tk::ReduceOp r) { emitReduce(r); })
      .Case([&](tk::ArgReduceOp a) { emitArgReduce(a); })
      .Case([&](tk::ForOp f) { emitFor(f); })
      .Default([&](Operation *other) {
        throw Error("tk codegen: cannot emit '" + other->getName().getStringRef().str() +
                    "' in a CPU kernel");
      });
}

void CpuKernelEmitter::openLoops(const std::vector<std::string> &idx,
                                 ArrayRef<std::string> bounds,
                                 const std::vector<std::string> &pragmas) {
  if (bounds.empty()) {
    line("{");
    ++depth;
    return;
  }
  // Only the innermost loop gets braces, so collapsed loops stay perfectly nested.
  for (size_t d = 0; d < bounds.size(); ++d) {
    if (!pragmas[d].empty())
      line(pragmas[d]);
    line(loopHeader(idx[d], bounds[d]) + (d + 1 == bounds.size() ? " {" : ""));
    ++depth;
  }
}

void CpuKernelEmitter::closeLoops(size_t rank) {
  --depth;
  line("}");
  depth -= rank > 1 ? (int)rank - 1 : 0;
}

static std::string boundsString(ArrayRef<std::string> bounds) {
  std::string s = "[";
  for (size_t d = 0; d < bounds.size(); ++d)
    s += (d ? ", " : "") + bounds[d];
  return s + "]";
}

/// How many trailing dims of a loop-free tk.parallel can run as one flat loop: k such that the
/// last k index args are used only as the last k indices of loads and stores whose last k dims
/// have exactly the loop's extents (then their row-major offset is the flat index). 0 or 1:
/// none. A short innermost dim (a 7x7 feature map) otherwise leaves the vector loop starved.
static size_t flattenableTrailingDims(Block &block, ArrayRef<int64_t> bounds) {
  size_t rank = bounds.size();
  size_t best = 0;
  for (size_t k = 2; k <= rank; ++k) {
    bool ok = true;
    for (size_t j = 0; j < k && ok; ++j) {
      BlockArgument arg = block.getArgument(rank - k + j);
      for (OpOperand &use : arg.getUses()) {
        Operation *user = use.getOwner();
        Value memref;
        OperandRange indices = user->getOperands();
        if (auto load = dyn_cast<tk::LoadOp>(user)) {
          memref = load.getMemref();
          indices = load.getIndices();
        } else if (auto store = dyn_cast<tk::StoreOp>(user)) {
          memref = store.getMemref();
          indices = store.getIndices();
        }
        auto type = memref ? cast<MemRefType>(memref.getType()) : MemRefType();
        if (!type || type.getRank() < (int64_t)k) {
          ok = false;
          break;
        }
        size_t first = indices.size() - k;
        for (size_t t = 0; t < k && ok; ++t)
          ok = indices[first + t] == block.getArgument(rank - k + t) &&
               !ShapedType::isDynamic(bounds[rank - k + t]) &&
               type.getDimSize(first + t) == bounds[rank - k + t];
        ok = ok && use.getOperandNumber() >= user->getNumOperands() - k;
      }
    }
    if (!ok)
      break;
    best = k;
  }
  return best;
}

void CpuKernelEmitter::emitParallel(tk::ParallelOp op) {
  Block &block = op.getBody().front();
  SmallVector<int64_t> loopBounds(op.getBounds());
  std::vector<std::string> names = boundNames(loopBounds, op.getDynamicBounds());
  std::vector<std::string> idx = bindIndices(block, loopBounds.size());
  line("// tk.parallel " + boundsString(names));
  if (!hasLoops(block)) {
    // Run the flattenable trailing dims as one loop: the last of them names the flat index
    // (the loads' and stores' offsets reduce to it), the others contribute 0.
    size_t k = flattenableTrailingDims(block, loopBounds);
    if (k >= 2) {
      size_t rank = loopBounds.size();
      for (size_t j = rank - k; j + 1 < rank; ++j)
        scalars.bind(block.getArgument(j), "0");
      int64_t flat = product(ArrayRef<int64_t>(loopBounds).drop_front(rank - k));
      loopBounds.resize(rank - k);
      loopBounds.push_back(flat);
      names.resize(rank - k);
      names.push_back(std::to_string(flat));
      std::string flatName = idx.back();
      idx.resize(rank - k);
      idx.push_back(flatName);
      line("// (the last " + std::to_string(k) + " dims run as one loop of " +
           std::to_string(flat) + ")");
    }
  }
  ArrayRef<int64_t> bounds = loopBounds;
  size_t rank = bounds.size();
  std::string guard = runtimeWorkGuard(names, bounds, work(block));

  // Small window reductions inside count as loop-free: the innermost dim is the simd loop.
  bool windows = onlySmallWindows(block);
  bool loopFree = !hasLoops(block) || windows;
  bool threaded = isTopLevel(op) && rank > 0 &&
                  (anyDynamic(bounds) || (product(bounds) > 1 &&
                                          product(bounds) * work(block) >= kParallelWorkThreshold));
  auto collapse = [](size_t n) {
    return n > 1 ? " collapse(" + std::to_string(n) + ")" : std::string();
  };
  std::vector<std::string> pragmas(rank);
  bool innerTeam = false; // `omp parallel` around serial outer loops, `omp for` on the inner
  if (!threaded) {
    if (loopFree && rank > 0)
      pragmas[rank - 1] = "#pragma omp simd";
  } else if (!loopFree) {
    pragmas[0] = "#pragma omp parallel for" + collapse(rank) + " schedule(static) num_threads(" +
                 threads() + ")" + guard;
  } else if (rank == 1) {
    pragmas[0] = "#pragma omp parallel for simd schedule(static) num_threads(" + threads() + ")" +
                 guard;
  } else if (product(bounds.drop_back()) >= kMinOuterIterations) {
    pragmas[0] = "#pragma omp parallel for" + collapse(rank - 1) +
                 " schedule(static) num_threads(" + threads() + ")" + guard;
    pragmas[rank - 1] = "#pragma omp simd";
  } else {
    innerTeam = true;
    line("#pragma omp parallel num_threads(" + threads() + ")" + guard);
    line("{");
    ++depth;
    pragmas[rank - 1] = "#pragma omp for simd schedule(static)";
  }
  openLoops(idx, names, pragmas);
  bool simdBody = windows && rank > 0 && !pragmas[rank - 1].empty() &&
                  pragmas[rank - 1].find("simd") != std::string::npos;
  simdBody = simdBody || (windows && rank == 1 && pragmas[0].find("simd") != std::string::npos);
  bool outer = inSimdLoop;
  inSimdLoop = inSimdLoop || simdBody;
  emitBlock(block);
  inSimdLoop = outer;
  closeLoops(rank);
  if (innerTeam) {
    --depth;
    line("}");
  }
}

/// The first of the reduce's trailing dims that run as one loop: dims [first, rank) whose
/// induction variables are used only as consecutive indices, in order, of loads and stores of
/// row-major buffers whose sizes there equal the reduce's bounds (a global average pool's
/// [H, W] over a [N, C, H, W] buffer). Their elements are then contiguous, and one loop over
/// them has one reduction at its end; nested, the innermost simd loop summed its vector
/// across lanes, in order, at every outer step (16 dependent adds per 16 elements: a 16x16
/// pool 4x slower). rank when no two dims qualify.
static size_t flattenedReduceDims(tk::ReduceOp op) {
  ArrayRef<int64_t> bounds = op.getBounds();
  size_t rank = bounds.size();
  Block &block = op.getBody().front();
  if (rank < 2 || llvm::any_of(bounds, [](int64_t b) { return ShapedType::isDynamic(b); }))
    return rank;
  for (size_t first = 0; first + 1 < rank; ++first) {
    size_t count = rank - first;
    bool ok = true;
    for (size_t d = first; d < rank && ok; ++d) {
      for (OpOperand &use : block.getArgument(d).getUses()) {
        Operation *user = use.getOwner();
        ValueRange indices;
        MemRefType type;
        if (auto l = dyn_cast<tk::LoadOp>(user)) {
          indices = l.getIndices();
          type = l.getMemref().getType();
        } else if (auto st = dyn_cast<tk::StoreOp>(user); st && use.get() != st.getValue()) {
          indices = st.getIndices();
          type = st.getMemref().getType();
        } else {
          ok = false;
          break;
        }
        // Where the first flattened variable sits; the others follow it, in order.
        auto at = llvm::find(indices, block.getArgument(first));
        size_t p = at - indices.begin();
        if (!type.hasStaticShape() || at == indices.end() || p + count > indices.size()) {
          ok = false;
          break;
        }
        for (size_t q = 0; q < count && ok; ++q)
          ok = indices[p + q] == block.getArgument(first + q) &&
               (q == 0 || type.getDimSize(p + q) == bounds[first + q]) &&
               llvm::count(indices, block.getArgument(first + q)) == 1;
      }
    }
    if (ok)
      return first;
  }
  return rank;
}

void CpuKernelEmitter::emitReduce(tk::ReduceOp op) {
  ArrayRef<int64_t> bounds = op.getBounds();
  Block &block = op.getBody().front();
  size_t rank = bounds.size();
  ReduceKind kind = op.getKind();
  Type type = op.getType();
  bool isBool = type.isInteger(1);
  bool tracksNaN = ScalarEmitter::reductionTracksNaN(kind, type);

  std::string acc = scalars.fresh("acc");
  std::string nan = acc + "_nan";
  std::vector<std::string> names = boundNames(bounds, op.getDynamicBounds());
  std::vector<std::string> idx = bindIndices(block, rank);
  line("// tk.reduce " + stringifyReduceKind(kind).str() + " " + boundsString(names) + " : " +
       typeString(type));
  line(scalars.accumulatorType(kind, type) + " " + acc + " = " +
       scalars.reduceIdentity(kind, type) + ";");
  if (tracksNaN) // max/min ignore NaN in the vector loop; NaN is tracked on the side
    line("bool " + nan + " = false;");

  const char *opName = kind == ReduceKind::Sum    ? "+"
                       : kind == ReduceKind::Prod ? "*"
                       : kind == ReduceKind::Max  ? (isBool ? "||" : "max")
                                                  : (isBool ? "&&" : "min");
  std::string clause = std::string(" reduction(") + opName + ":" + acc + ")";
  if (tracksNaN)
    clause += " reduction(||:" + nan + ")";

  bool loopFree = !hasLoops(block);
  bool threaded = isTopLevel(op) && rank > 0 &&
                  (anyDynamic(bounds) ||
                   product(bounds) * (1 + work(block)) >= kParallelWorkThreshold);
  if (size_t first = loopFree && !threaded ? flattenedReduceDims(op) : rank; first < rank) {
    // Dims [first, rank) as one loop: their variables but the last read as 0, the last as the
    // flattened index (the buffers' offsets are then the flattened index's: see above).
    int64_t flat = 1;
    for (size_t d = first; d < rank; ++d) {
      flat *= bounds[d];
      scalars.bind(block.getArgument(d), "0");
    }
    scalars.bind(block.getArgument(rank - 1), idx[rank - 1]);
    idx.erase(idx.begin() + first, idx.end() - 1);
    names.erase(names.begin() + first, names.end());
    names.push_back(std::to_string(flat));
    rank = first + 1;
  }
  std::vector<std::string> pragmas(rank);
  if (loopFree && rank > 0 && !inSimdLoop)
    pragmas[rank - 1] = "#pragma omp simd" + clause;
  if (threaded) {
    // Threads split the outer dims (all of them when the body has loops); the innermost stays
    // a simd loop when the body is loop-free.
    size_t split = !loopFree ? rank : rank == 1 ? 1 : rank - 1;
    bool simdToo = loopFree && rank == 1;
    pragmas[0] = std::string("#pragma omp parallel for") + (simdToo ? " simd" : "") +
                 (split > 1 ? " collapse(" + std::to_string(split) + ")" : "") +
                 " schedule(static)" + clause + " num_threads(" + threads() + ")" +
                 runtimeWorkGuard(names, bounds, 1 + work(block));
  }
  openLoops(idx, names, pragmas);
  emitBlock(block);
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  std::string y = scalars.name(yielded);
  line(acc + " = " + scalars.reduceCombine(kind, type, acc, y) + ";");
  if (tracksNaN)
    line(nan + " = " + nan + " || " + scalars.isNaNExpr(y) + ";");
  closeLoops(rank);

  std::string result = scalars.fresh("v");
  std::string value = scalars.reduceResult(kind, type, acc);
  if (tracksNaN)
    value = nan + " ? " + scalars.quietNaN(type) + " : " + value;
  line(scalars.computeType(type) + " " + result + " = " + value + ";");
  scalars.bind(op.getResult(), result);
}

void CpuKernelEmitter::emitArgReduce(tk::ArgReduceOp op) {
  Block &block = op.getBody().front();
  std::string index = bindIndices(block, 1)[0];
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  Type type = yielded.getType();
  bool largest = op.getKind() == ReduceKind::Max;
  std::string result = scalars.fresh("v");
  std::string best = result + "_best";
  std::string bound = countName(op.getBound(), op.getDynamicBound());
  line("// tk.arg_reduce " + stringifyReduceKind(op.getKind()).str() + " [" + bound + "]" +
       (op.getSelectLastIndex() ? " (last index)" : ""));
  line("int64_t " + result + " = 0;");
  line(scalars.computeType(type) + " " + best + " = 0;");
  line(loopHeader(index, bound) + " {");
  ++depth;
  emitBlock(block);
  std::string y = scalars.name(yielded);
  std::string better = scalars.argReplaces(type, largest, op.getSelectLastIndex(), y, best);
  line("if (" + index + " == 0 || " + better + ") {");
  line("  " + best + " = " + y + ";");
  line("  " + result + " = " + index + ";");
  line("}");
  --depth;
  line("}");
  scalars.bind(op.getResult(), result);
}

void CpuKernelEmitter::emitFor(tk::ForOp op) {
  Block &block = op.getBody().front();
  std::vector<std::string> carried;
  std::string count = countName(op.getCount(), op.getDynamicCount());
  line("// tk.for " + count);
  for (auto [init, result] : llvm::zip(op.getInits(), op.getResults())) {
    carried.push_back(scalars.fresh("c"));
    line(scalars.computeType(init.getType()) + " " + carried.back() + " = " +
         scalars.name(init) + ";");
  }
  std::string index = bindIndices(block, 1)[0];
  for (size_t i = 0; i < carried.size(); ++i)
    scalars.bind(block.getArgument(i + 1), carried[i]);
  line(loopHeader(index, count) + " {");
  ++depth;
  emitBlock(block);
  auto yielded = cast<tk::YieldOp>(block.getTerminator()).getValues();
  if (carried.size() == 1) {
    line(carried[0] + " = " + scalars.name(yielded[0]) + ";");
  } else {
    // Through temporaries: a yielded value may be another carried value.
    std::vector<std::string> next;
    for (Value v : yielded) {
      next.push_back(scalars.fresh("n"));
      line(scalars.computeType(v.getType()) + " " + next.back() + " = " + scalars.name(v) + ";");
    }
    for (size_t i = 0; i < carried.size(); ++i)
      line(carried[i] + " = " + next[i] + ";");
  }
  --depth;
  line("}");
  for (auto [result, name] : llvm::zip(op.getResults(), carried))
    scalars.bind(result, name);
}

std::string CpuKernelEmitter::emit() {
  std::string name = fn.getSymName().str();
  bool valid = !name.empty() && !std::isdigit((unsigned char)name[0]);
  for (char c : name)
    valid = valid && (std::isalnum((unsigned char)c) || c == '_');
  if (!valid)
    throw Error("tk codegen: kernel name '" + name + "' is not a C identifier");
  if (fn.isExternal())
    throw Error("tk codegen: kernel '" + name + "' has no body");

  // Buffers: typed restrict pointers; const where the kernel never stores to them.
  std::string header;
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type)
      throw Error("tk codegen: argument " + std::to_string(i) + " of kernel '" + name +
                  "' is not a buffer");
    bool written = llvm::any_of(arg.getUsers(), [&](Operation *user) {
      auto store = dyn_cast<tk::StoreOp>(user);
      return store && store.getMemref() == arg;
    });
    std::string ptr = "arg" + std::to_string(i);
    std::string elem = scalars.storageType(type.getElementType());
    header += "  // arg " + std::to_string(i) + ": " + typeString(type) +
              (written ? " (written)" : " (read)") + "\n";
    header += "  " + std::string(written ? "" : "const ") + elem + " *__restrict " + ptr + " = (" +
              (written ? "" : "const ") + elem + " *)args[" + std::to_string(i) + "];\n";
    pointers[arg] = ptr;
    if (fn.getArgAttr(i, tk::kSymbolsArgAttr))
      header += ScalarEmitter::symbolLocals(fn, ptr);
  }

  emitBlock(fn.getBody().front());
  for (const std::string &declaration : scalars.sizeDeclarations())
    header += "  " + declaration + "\n";

  std::string out = scalars.prelude();
  out += "\n// tk.kernel @" + name + "\n";
  out += "TCC_EXPORT void " + name + "(void *const *args, int32_t num_threads) {\n";
  out += header;
  if (usesThreads)
    out += "  const int " + threadsName + " = num_threads > 0 ? num_threads : omp_get_max_threads();\n";
  else
    out += "  (void)num_threads;\n";
  out += body;
  out += "}\n";
  return out;
}

} // namespace

std::string tcc::codegen::emitCpuKernel(func::FuncOp kernel) {
  return CpuKernelEmitter(kernel).emit();
}
