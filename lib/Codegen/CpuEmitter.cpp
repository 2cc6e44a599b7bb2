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
  void emitColumnBlocks(tk::ParallelOp op, std::vector<std::string> idx,
                        std::vector<std::string> names, ArrayRef<int64_t> bounds, bool threaded,
                        const std::string &guard);
  void emitTransposeTiles(tk::ParallelOp op, const std::vector<std::string> &idx,
                          ArrayRef<int64_t> bounds, size_t t, bool threaded,
                          const std::string &guard);
  void openColumnLoop();
  void closeColumnLoop();
  void emitColumnReduce(tk::ReduceOp op);
  void emitColumnArgReduce(tk::ArgReduceOp op);
  void emitColumnNest(tk::ParallelOp op);
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
  // In a column-blocked parallel loop (emitColumnBlocks): the block's column loop index, its
  // trip count and the block size (the arrays' length).
  std::string columnIndex, columnCount;
  int64_t columnBlock = 0;
  // In a transposing loop's vector tiles (emitTransposeTiles): the tile buffer element its one
  // store writes instead of the output.
  std::string tileElement;
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
        if (!tileElement.empty()) {
          line(tileElement + " = " + scalars.name(store.getValue()) + ";");
          return;
        }
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

/// Columns (iterations of a parallel loop's innermost dim) that a column-blocked loop runs as
/// one block, at most: each nested loop's step then reads up to this many contiguous elements
/// (1 KB) of each buffer, and its arrays of partial results (a few KB) stay in L1.
constexpr int64_t kColumnBlock = 256;

/// A column-blocked loop has at least this many columns (one 16-float vector).
constexpr int64_t kMinBlockedColumns = 16;

/// Whether `v`, used in the body `block` of a parallel loop, is the same for every iteration
/// of its innermost dim: a value from outside, another dim's index, or pure scalar arithmetic
/// (no load) on such values.
static bool isColumnInvariant(Value v, Block &block) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() != &block || arg.getArgNumber() + 1 < block.getNumArguments();
  Operation *def = v.getDefiningOp();
  if (def->getBlock() != &block)
    return !block.getParentOp()->isProperAncestor(def);
  return ScalarEmitter::isScalarOp(def) &&
         llvm::all_of(def->getOperands(), [&](Value x) { return isColumnInvariant(x, block); });
}

/// Whether the nested loops of a parallel loop read along its innermost dim (its columns)
/// rather than along their own dims: a reduction over a dim that is not the innermost (a max
/// over the batch, a softmax or argmax over the classes of [N, C, H, W]). Every loop in the
/// body is a tk.reduce, tk.arg_reduce or tk.parallel directly in it with a loop-free body;
/// some load or store in them has the parallel loop's innermost index as its last index, and
/// none has one of the nested loop's own indices there. Run as written, such a nest gives each
/// output its own strided walk (a gather per vector, one cache line per element); blocked by
/// columns (emitColumnBlocks) each step of the nested loop reads a contiguous run instead.
static bool readsAlongColumns(tk::ParallelOp op) {
  Block &block = op.getBody().front();
  if (block.getNumArguments() == 0)
    return false;
  Value column = block.getArgument(block.getNumArguments() - 1);
  bool anyLoop = false, contiguous = false;
  for (Operation &inner : block.without_terminator()) {
    if (!isLoop(&inner))
      continue;
    // Its bounds are computed once per block, before the column loops.
    if (isa<tk::ForOp>(inner) || hasLoops(inner.getRegion(0).front()) ||
        !llvm::all_of(inner.getOperands(),
                      [&](Value bound) { return isColumnInvariant(bound, block); }))
      return false;
    anyLoop = true;
    Block &body = inner.getRegion(0).front();
    bool rows = false;
    body.walk([&](Operation *access) {
      ValueRange indices;
      if (auto load = dyn_cast<tk::LoadOp>(access))
        indices = load.getIndices();
      else if (auto store = dyn_cast<tk::StoreOp>(access))
        indices = store.getIndices();
      if (indices.empty())
        return;
      auto own = dyn_cast<BlockArgument>(indices.back());
      contiguous |= indices.back() == column;
      rows |= own && own.getOwner() == &body;
    });
    if (rows)
      return false;
  }
  return anyLoop && contiguous;
}

/// The side of the square tiles a transposing loop runs in (transposedDim): 16 floats, one
/// AVX-512 register. A tile's strided reads come from L1, each of its cache lines read from
/// memory once.
constexpr int64_t kTransposeTile = 16;

/// The dim t that a loop-free parallel loop should tile together with its innermost dim L,
/// where it transposes: every store's last index is L (the output runs along L), and a load's
/// last index is t while L indexes another of its dims, at a stride of 16 elements or more.
/// Run as written, each vector of L gathers from as many cache lines (GCC makes scalar code of
/// it, without gathers, on AMD CPUs), and a loop over t walks them all again. Static bounds of
/// at least one tile on both; -1 where the loop is not such a transpose.
static int64_t transposedDim(Block &block, ArrayRef<int64_t> bounds) {
  size_t rank = bounds.size();
  if (rank < 2 || anyDynamic(bounds) || bounds.back() < kTransposeTile)
    return -1;
  Value inner = block.getArgument(rank - 1);
  int64_t found = -1;
  for (Operation &op : block.without_terminator()) {
    if (auto store = dyn_cast<tk::StoreOp>(op)) {
      if (store.getIndices().empty() || store.getIndices().back() != inner)
        return -1;
      continue;
    }
    auto load = dyn_cast<tk::LoadOp>(op);
    if (!load || load.getIndices().empty() || found >= 0)
      continue;
    auto type = cast<MemRefType>(load.getMemref().getType());
    auto last = dyn_cast<BlockArgument>(load.getIndices().back());
    if (!last || last.getOwner() != &block || last == inner || !type.hasStaticShape() ||
        bounds[last.getArgNumber()] < kTransposeTile)
      continue;
    ValueRange indices = load.getIndices();
    int64_t stride = 1;
    for (size_t p = indices.size() - 1; p-- > 0;) {
      stride *= type.getDimSize(p + 1);
      if (indices[p] == inner && stride >= 16)
        found = last.getArgNumber();
    }
  }
  return found;
}

/// The stride (in elements) along dim t of a transposing loop's output, when its tiles can go
/// through a buffer (emitTransposeTiles): the body's one store writes f32 to a static-shape
/// buffer, and t is one of its indices exactly once, the others being other loop indices or
/// constants. 0 otherwise.
static int64_t transposedStoreStride(Block &block, size_t t) {
  tk::StoreOp store;
  for (Operation &op : block.without_terminator())
    if (auto s = dyn_cast<tk::StoreOp>(op)) {
      if (store)
        return 0;
      store = s;
    }
  auto type = cast<MemRefType>(store.getMemref().getType());
  if (!type.getElementType().isF32() || !type.hasStaticShape())
    return 0;
  ValueRange indices = store.getIndices();
  int64_t stride = 1, strideT = 0;
  for (size_t p = indices.size(); p-- > 0;) {
    auto arg = dyn_cast<BlockArgument>(indices[p]);
    if (arg && arg.getOwner() == &block && arg.getArgNumber() == t) {
      if (strideT)
        return 0;
      strideT = stride;
    } else if (!(arg && arg.getOwner() == &block) && !indices[p].getDefiningOp<tk::ConstantOp>()) {
      return 0;
    }
    stride *= type.getDimSize(p);
  }
  return strideT;
}

/// A loop-free parallel loop that transposes (transposedDim: dims t and L) in square tiles of
/// t and L, the other dims outside; the loops over the other dims and the tiles are collapsed
/// for threads. Where its one f32 store allows (transposedStoreStride), a whole tile is
/// computed along t (the reads contiguous, vectorised) into a buffer, then stored transposed
/// by the prelude's tcc_transpose16 (16 registers shuffled in four stages): measured on a Zen
/// 5, [112, 112, 64] to [64, 112, 112] with a bias and ReLU 629 -> 78 us (2.2x with AVX2 code,
/// 1.8x with SSE2's). Partial tiles at the ends, and other loops, run their elements in the
/// tile's own order.
void CpuKernelEmitter::emitTransposeTiles(tk::ParallelOp op, const std::vector<std::string> &idx,
                                          ArrayRef<int64_t> bounds, size_t t, bool threaded,
                                          const std::string &guard) {
  Block &block = op.getBody().front();
  size_t rank = bounds.size(), inner = rank - 1;
  const std::string tile = std::to_string(kTransposeTile);
  const int64_t strideT = transposedStoreStride(block, t);
  line("// (a transpose: dims " + std::to_string(t) + " and " + std::to_string(inner) +
       " run in tiles of " + tile + " x " + tile +
       (strideT ? ", each computed along the first into a buffer and stored transposed)" : ")"));
  if (threaded)
    line("#pragma omp parallel for collapse(" + std::to_string(rank) +
         ") schedule(static) num_threads(" + threads() + ")" + guard);
  for (size_t d = 0; d < inner; ++d)
    if (d != t) {
      line(loopHeader(idx[d], bounds[d]));
      ++depth;
    }
  const std::string tFirst = scalars.fresh("tb"), innerFirst = scalars.fresh("lb");
  for (auto [d, first] : {std::pair{t, tFirst}, std::pair{inner, innerFirst}}) {
    const std::string bound = std::to_string(bounds[d]);
    line("for (int64_t " + first + " = 0; " + first + " < " + bound + "; " + first +
         " += " + tile + ")" + (d == inner ? " {" : ""));
    ++depth;
  }
  const bool whole = bounds[t] % kTransposeTile == 0 && bounds[inner] % kTransposeTile == 0;
  // The elements of a tile in its own order: the partial tiles at the ends.
  auto elementwise = [&] {
    for (auto [d, first] : {std::pair{t, tFirst}, std::pair{inner, innerFirst}}) {
      const std::string bound = std::to_string(bounds[d]), end = first + " + " + tile;
      if (d == inner)
        line("#pragma omp simd");
      line("for (int64_t " + idx[d] + " = " + first + "; " + idx[d] + " < (" + end + " < " +
           bound + " ? " + end + " : " + bound + "); ++" + idx[d] + ")" +
           (d == inner ? " {" : ""));
      ++depth;
    }
    emitBlock(block);
    closeLoops(2);
  };
  if (!strideT) {
    elementwise();
  } else {
    if (!whole) {
      line("if (" + tFirst + " + " + tile + " <= " + std::to_string(bounds[t]) + " && " +
           innerFirst + " + " + tile + " <= " + std::to_string(bounds[inner]) + ") {");
      ++depth;
    }
    const std::string buffer = scalars.fresh("tile");
    line("alignas(64) float " + buffer + "[" + std::to_string(kTransposeTile * kTransposeTile) +
         "];");
    line("for (int64_t " + idx[inner] + " = " + innerFirst + "; " + idx[inner] + " < " +
         innerFirst + " + " + tile + "; ++" + idx[inner] + ")");
    ++depth;
    line("#pragma omp simd");
    line("for (int64_t " + idx[t] + " = " + tFirst + "; " + idx[t] + " < " + tFirst + " + " +
         tile + "; ++" + idx[t] + ") {");
    ++depth;
    tileElement = buffer + "[(" + idx[inner] + " - " + innerFirst + ") * " + tile + " + " +
                  idx[t] + " - " + tFirst + "]";
    emitBlock(block);
    tileElement.clear();
    closeLoops(2);
    // The tile's corner (t, L) = (tFirst, innerFirst) in the output.
    tk::StoreOp store = *block.getOps<tk::StoreOp>().begin();
    line("{");
    ++depth;
    line("const int64_t " + idx[t] + " = " + tFirst + ", " + idx[inner] + " = " + innerFirst +
         ";");
    line("tcc_transpose16(" + buffer + ", " + pointer(store.getMemref()) + " + " +
         scalars.linearIndex(store.getMemref().getType(), store.getIndices()) + ", " +
         std::to_string(strideT) + ");");
    --depth;
    line("}");
    if (!whole) {
      --depth;
      line("} else {");
      ++depth;
      elementwise();
      --depth;
      line("}");
    }
  }
  closeLoops(rank);
}

void CpuKernelEmitter::emitParallel(tk::ParallelOp op) {
  Block &block = op.getBody().front();
  SmallVector<int64_t> loopBounds(op.getBounds());
  std::vector<std::string> names = boundNames(loopBounds, op.getDynamicBounds());
  std::vector<std::string> idx = bindIndices(block, loopBounds.size());
  line("// tk.parallel " + boundsString(names));
  bool columns = isTopLevel(op) && hasLoops(block) && readsAlongColumns(op);
  if (!hasLoops(block) || columns) {
    // Run the flattenable trailing dims as one loop: the last of them names the flat index
    // (the loads' and stores' offsets reduce to it), the others contribute 0.
    size_t k = flattenableTrailingDims(block, loopBounds);
    int64_t width =
        k >= 2 ? (int64_t)product(ArrayRef<int64_t>(loopBounds).take_back(k)) : loopBounds.back();
    columns = columns && (ShapedType::isDynamic(width) || width >= kMinBlockedColumns);
    if (k >= 2 && (!hasLoops(block) || columns)) {
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
  bool threaded = isTopLevel(op) && rank > 0 &&
                  (anyDynamic(bounds) || (product(bounds) > 1 &&
                                          product(bounds) * work(block) >= kParallelWorkThreshold));
  if (columns) {
    emitColumnBlocks(op, idx, names, bounds, threaded, guard);
    return;
  }

  if (!hasLoops(block))
    if (int64_t t = transposedDim(block, bounds); t >= 0)
      return emitTransposeTiles(op, idx, bounds, (size_t)t, threaded, guard);

  // Small window reductions inside count as loop-free: the innermost dim is the simd loop.
  bool windows = onlySmallWindows(block);
  bool loopFree = !hasLoops(block) || windows;
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

/// A parallel loop whose nested loops read along its columns (readsAlongColumns), with its
/// innermost dim strip-mined into blocks of kColumnBlock columns and its body split in
/// segments run one after the other over the block: each nested loop, and each run of the
/// scalar ops between them. A nested loop runs its own dims outside and a simd loop over the
/// block's columns inside, with one accumulator per column in an array (the interchange: each
/// step reads a contiguous run of the columns); a value that one segment computes and another
/// uses goes through an array over the block. The parallel loop's iterations are independent,
/// so running a block's iterations segment by segment keeps every iteration's own order.
void CpuKernelEmitter::emitColumnBlocks(tk::ParallelOp op, std::vector<std::string> idx,
                                        std::vector<std::string> names,
                                        ArrayRef<int64_t> bounds, bool threaded,
                                        const std::string &guard) {
  Block &block = op.getBody().front();
  size_t rank = bounds.size();
  int64_t columns = bounds.back();
  // Static: blocks of equal size, rounded up to whole 16-float vectors (960 columns: 4 of
  // 240; 144: one of 144), so no block is a short remainder.
  columnBlock = kColumnBlock;
  if (!ShapedType::isDynamic(columns)) {
    int64_t blocks = (columns + kColumnBlock - 1) / kColumnBlock;
    columnBlock = std::min(columns, ((columns + blocks - 1) / blocks + 15) / 16 * 16);
  }
  std::string first = scalars.fresh("jb"), blockSize = std::to_string(columnBlock);
  line("// (nested loops read along the last dim: it runs in blocks of " + blockSize +
       " columns, each nested loop's dims outside a simd loop over the block)");
  for (size_t d = 0; d + 1 < rank; ++d) {
    if (d == 0 && threaded)
      line("#pragma omp parallel for collapse(" + std::to_string(rank) +
           ") schedule(static) num_threads(" + threads() + ")" + guard);
    line(loopHeader(idx[d], names[d]));
    ++depth;
  }
  if (rank == 1 && threaded)
    line("#pragma omp parallel for schedule(static) num_threads(" + threads() + ")" + guard);
  line("for (int64_t " + first + " = 0; " + first + " < " + names.back() + "; " + first +
       " += " + blockSize + ") {");
  ++depth;
  if (!ShapedType::isDynamic(columns) && columns % columnBlock == 0) {
    columnCount = blockSize;
  } else {
    columnCount = scalars.fresh("jn");
    line("const int64_t " + columnCount + " = " + names.back() + " - " + first + " < " + blockSize +
         " ? " + names.back() + " - " + first + " : " + blockSize + ";");
  }
  columnIndex = scalars.fresh("j");
  scalars.bind(block.getArgument(block.getNumArguments() - 1),
               "(" + first + " + " + columnIndex + ")");

  // Scalar values the same for the whole block (nested loops' bounds among them) once, first;
  // then segments: each loop alone, each run of other ops together.
  llvm::DenseMap<Operation *, int> segmentOf;
  std::vector<std::vector<Operation *>> segments;
  for (Operation &inner : block.without_terminator()) {
    if (ScalarEmitter::isScalarOp(&inner) && isColumnInvariant(inner.getResult(0), block)) {
      emitOp(&inner);
      segmentOf[&inner] = -1;
      continue;
    }
    if (isLoop(&inner) || segments.empty() || isLoop(segments.back().back()))
      segments.emplace_back();
    segments.back().push_back(&inner);
    segmentOf[&inner] = (int)segments.size() - 1;
  }
  auto usedElsewhere = [&](Value v, int segment) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      Operation *top = block.findAncestorOpInBlock(*user);
      return top && segmentOf.lookup(top) != (int)segment;
    });
  };
  bool outer = inSimdLoop;
  inSimdLoop = true;
  for (auto [segment, ops] : llvm::enumerate(segments)) {
    Operation *head = ops.front();
    if (auto r = dyn_cast<tk::ReduceOp>(head)) {
      emitColumnReduce(r);
      continue;
    }
    if (auto a = dyn_cast<tk::ArgReduceOp>(head)) {
      emitColumnArgReduce(a);
      continue;
    }
    if (auto p = dyn_cast<tk::ParallelOp>(head)) {
      emitColumnNest(p);
      continue;
    }
    // Scalar ops, loads and stores: one simd loop over the block; the values later segments
    // use are kept in arrays over it.
    std::vector<std::pair<Value, std::string>> kept;
    for (Operation *o : ops)
      if (!isa<tk::ConstantOp>(o) && !o->use_empty() && usedElsewhere(o->getResult(0), segment)) {
        kept.emplace_back(o->getResult(0), scalars.fresh("col"));
        line(scalars.computeType(o->getResult(0).getType()) + " " + kept.back().second + "[" +
             blockSize + "];");
      }
    openColumnLoop();
    for (Operation *o : ops)
      emitOp(o);
    for (auto &[value, array] : kept)
      line(array + "[" + columnIndex + "] = " + scalars.name(value) + ";");
    closeColumnLoop();
    for (auto &[value, array] : kept)
      scalars.bind(value, array + "[" + columnIndex + "]");
  }
  inSimdLoop = outer;
  --depth;
  line("}");
  depth -= (int)rank - 1;
}

/// `#pragma omp simd` and the opening of the loop over a column block's columns.
void CpuKernelEmitter::openColumnLoop() {
  line("#pragma omp simd");
  line(loopHeader(columnIndex, columnCount) + " {");
  ++depth;
}

/// The end of a loop openColumnLoop opened.
void CpuKernelEmitter::closeColumnLoop() {
  --depth;
  line("}");
}

/// A tk.reduce in a column-blocked loop: its dims outside, the block's columns inside, one
/// accumulator per column; its result reads the column's accumulator. A max or min takes a NaN
/// into the accumulator, where it stays (every comparison with it is false): no flag on the
/// side, as the OpenMP reduction clause of emitReduce needs.
void CpuKernelEmitter::emitColumnReduce(tk::ReduceOp op) {
  Block &body = op.getBody().front();
  ReduceKind kind = op.getKind();
  Type type = op.getType();
  bool tracksNaN = ScalarEmitter::reductionTracksNaN(kind, type);
  std::string acc = scalars.fresh("acc"), at = "[" + columnIndex + "]";
  std::vector<std::string> names = boundNames(op.getBounds(), op.getDynamicBounds());
  std::vector<std::string> idx = bindIndices(body, names.size());
  line("// tk.reduce " + stringifyReduceKind(kind).str() + " " + boundsString(names) + " : " +
       typeString(type) + " (per column)");
  line(scalars.accumulatorType(kind, type) + " " + acc + "[" + std::to_string(columnBlock) +
       "];");
  openColumnLoop();
  line(acc + at + " = " + scalars.reduceIdentity(kind, type) + ";");
  closeColumnLoop();
  openLoops(idx, names, std::vector<std::string>(names.size()));
  openColumnLoop();
  emitBlock(body);
  std::string y = scalars.name(cast<tk::YieldOp>(body.getTerminator()).getValues()[0]);
  std::string combined = scalars.reduceCombine(kind, type, acc + at, y);
  if (tracksNaN) // `y > acc ? y : acc` with a NaN y taken too
    combined = scalars.isNaNExpr(y) + " ? " + y + " : " + combined;
  line(acc + at + " = " + combined + ";");
  closeColumnLoop();
  closeLoops(names.size());
  std::string value = scalars.reduceResult(kind, type, acc + at);
  if (tracksNaN)
    value = scalars.isNaNExpr(acc + at) + " ? " + scalars.quietNaN(type) + " : " + value;
  scalars.bind(op.getResult(), "(" + value + ")");
}

/// A tk.arg_reduce in a column-blocked loop: its positions outside, the block's columns
/// inside, the best value and its position per column.
void CpuKernelEmitter::emitColumnArgReduce(tk::ArgReduceOp op) {
  Block &body = op.getBody().front();
  std::string index = bindIndices(body, 1)[0];
  Value yielded = cast<tk::YieldOp>(body.getTerminator()).getValues()[0];
  Type type = yielded.getType();
  std::string result = scalars.fresh("v"), best = result + "_best";
  std::string at = "[" + columnIndex + "]", size = "[" + std::to_string(columnBlock) + "]";
  std::string bound = countName(op.getBound(), op.getDynamicBound());
  line("// tk.arg_reduce " + stringifyReduceKind(op.getKind()).str() + " [" + bound + "]" +
       (op.getSelectLastIndex() ? " (last index)" : "") + " (per column)");
  line("int64_t " + result + size + ";");
  line(scalars.computeType(type) + " " + best + size + ";");
  openColumnLoop();
  line(result + at + " = 0;");
  line(best + at + " = 0;");
  closeColumnLoop();
  line(loopHeader(index, bound) + " {");
  ++depth;
  openColumnLoop();
  emitBlock(body);
  std::string y = scalars.name(yielded);
  std::string better = scalars.fresh("better");
  line("const bool " + better + " = " + index + " == 0 || " +
       scalars.argReplaces(type, op.getKind() == ReduceKind::Max, op.getSelectLastIndex(), y,
                           best + at) +
       ";");
  line(best + at + " = " + better + " ? " + y + " : " + best + at + ";");
  line(result + at + " = " + better + " ? " + index + " : " + result + at + ";");
  closeColumnLoop();
  --depth; // the positions' loop
  line("}");
  scalars.bind(op.getResult(), result + at);
}

/// A tk.parallel nested in a column-blocked loop: its dims outside, the block's columns in a
/// simd loop inside.
void CpuKernelEmitter::emitColumnNest(tk::ParallelOp op) {
  Block &body = op.getBody().front();
  std::vector<std::string> names = boundNames(op.getBounds(), op.getDynamicBounds());
  std::vector<std::string> idx = bindIndices(body, names.size());
  line("// tk.parallel " + boundsString(names) + " (per column)");
  openLoops(idx, names, std::vector<std::string>(names.size()));
  openColumnLoop();
  emitBlock(body);
  closeColumnLoop();
  closeLoops(names.size());
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
