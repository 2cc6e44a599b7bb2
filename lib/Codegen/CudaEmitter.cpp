//===- CudaEmitter.cpp - The CUDA loop skeleton of emitted tk kernels -----===//
//
// See CudaEmitter.h for the strategies. Naming follows the CPU emitter (locals `v<n>`, loop
// indices `i<n>`, accumulators `acc<n>`, buffers `arg<position>`); the grid machinery uses
// `tcc_`-prefixed names: `tcc_lane` (a thread's position in its team), `tcc_team` (the outer
// iteration a team works on), `tcc_g<n>` (a loop's group of V iterations), `tcc_l<n>` (the
// lane of a group), `tcc_smem` (dynamic shared memory for combining partial results).
//
// Vector accesses: within a group, the V lanes run as an unrolled loop; a load proven
// contiguous and aligned is read as one `tcc_vec<T, W>` (W <= V elements, at most 16 bytes) in
// the first lane of each W, and the other lanes take their element from it; a store collects
// its W elements and writes them in the last lane. After unrolling, the vectors live in
// registers (checked by the tests: no stack frame).
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/CudaEmitter.h"
#include "tcc/Codegen/ScalarEmitter.h"

#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/SymbolBinding.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <numeric>

using namespace mlir;
using namespace tcc;
using namespace tcc::codegen;

namespace {

/// Threads per block for one-thread-per-iteration loops and sub-warp row teams: 8 warps, the
/// usual sweet spot for memory-bound kernels on sm_80/sm_90 (up to 8 resident blocks per SM).
constexpr uint32_t kBlockThreads = 256;
/// Grids are capped: the kernels' grid-stride loops cover the rest. 8192 blocks of 256 threads
/// are ~8 waves on a 132-SM H100 at full occupancy, enough to hide the tail of the last wave.
constexpr uint64_t kMaxGridBlocks = 8192;
/// The widest vector access.
constexpr unsigned kVectorBytes = 16;
/// Shared memory slot per partial result and thread (accumulators are at most 8 bytes; an
/// arg-reduce partial takes two slots: the value and its index).
constexpr uint32_t kSlotBytes = 8;

bool isLoop(Operation *op) {
  return isa<tk::ParallelOp, tk::ReduceOp, tk::ArgReduceOp, tk::ForOp>(op);
}

std::string str(int64_t v) { return std::to_string(v); }

unsigned elementBytes(Type t) { return t.isInteger(1) ? 1 : (t.getIntOrFloatBitWidth() + 7) / 8; }

uint32_t pow2Ceil(uint64_t v) {
  return (uint32_t)llvm::bit_ceil(std::clamp<uint64_t>(v, 1, uint64_t(1) << 31));
}
uint32_t pow2Floor(uint64_t v) { return (uint32_t)llvm::bit_floor(std::max<uint64_t>(v, 1)); }

/// The buffer and indices of a tk.load / tk.store.
std::pair<Value, OperandRange> accessOf(Operation *op) {
  if (auto load = dyn_cast<tk::LoadOp>(op))
    return {load.getMemref(), load.getIndices()};
  auto store = cast<tk::StoreOp>(op);
  return {store.getMemref(), store.getIndices()};
}

//===----------------------------------------------------------------------===//
// Linear forms of buffer offsets
//===----------------------------------------------------------------------===//

/// An element offset as sum(coef[d] * d) + constant + terms known only by a common factor
/// (values from outside the loop, divisions of them): enough to decide whether consecutive
/// iterations touch consecutive, aligned elements.
struct Linear {
  bool ok = true;
  llvm::SmallVector<std::pair<Value, int64_t>, 4> coef; // (dim, coefficient)
  int64_t constant = 0;
  int64_t opaqueGcd = 0; // gcd of the unknown terms' known factors; 0: none
  /// Dims whose coefficient is known only by a factor (a symbolic stride): (dim, that factor).
  llvm::SmallVector<std::pair<Value, int64_t>, 2> unknownCoef;

  static Linear failure() {
    Linear l;
    l.ok = false;
    return l;
  }
  static Linear opaque() {
    Linear l;
    l.opaqueGcd = 1;
    return l;
  }
  bool hasDims() const {
    return llvm::any_of(coef, [](auto &entry) { return entry.second != 0; });
  }
  bool isConstant() const { return ok && !hasDims() && opaqueGcd == 0; }
  int64_t of(Value dim) const {
    for (auto &[v, c] : coef)
      if (v == dim)
        return c;
    return 0;
  }
  /// The known factor of `dim`'s coefficient when it is not a number (0: it is one).
  int64_t unknownOf(Value dim) const {
    for (auto &[v, g] : unknownCoef)
      if (v == dim)
        return g;
    return 0;
  }
  void addUnknown(Value dim, int64_t factor) {
    auto it = llvm::find_if(unknownCoef, [&](auto &entry) { return entry.first == dim; });
    if (it == unknownCoef.end())
      unknownCoef.push_back({dim, std::abs(factor)});
    else
      it->second = std::gcd(it->second, factor);
  }
  /// Adds `other` times a number known only to be a multiple of `factor`.
  Linear &addTimesUnknown(const Linear &other, int64_t factor) {
    ok = ok && other.ok;
    for (auto &[v, c] : other.coef)
      if (c != 0)
        addUnknown(v, c * factor);
    for (auto &[v, g] : other.unknownCoef)
      addUnknown(v, g * factor);
    opaqueGcd = std::gcd(opaqueGcd, std::gcd(other.constant, other.opaqueGcd) * factor);
    return *this;
  }
  Linear &add(const Linear &other, int64_t scale) {
    ok = ok && other.ok;
    for (auto &[v, c] : other.coef) {
      auto it = llvm::find_if(coef, [&](auto &entry) { return entry.first == v; });
      if (it == coef.end())
        coef.push_back({v, c * scale});
      else
        it->second += c * scale;
    }
    constant += other.constant * scale;
    opaqueGcd = std::gcd(opaqueGcd, other.opaqueGcd * scale);
    for (auto &[v, g] : other.unknownCoef)
      addUnknown(v, g * scale);
    return *this;
  }
};

/// Linear form of the index value `v` over `dims` (block arguments). Values defined outside
/// `scope` are unknown terms; inside it only tk.apply, tk.constant and the dims are understood.
Linear linearOf(Value v, Operation *scope, const llvm::DenseSet<Value> &dims);

Linear linearOfAffine(AffineExpr e, ArrayRef<Linear> operands, unsigned numDims) {
  switch (e.getKind()) {
  case AffineExprKind::Constant: {
    Linear l;
    l.constant = cast<AffineConstantExpr>(e).getValue();
    return l;
  }
  case AffineExprKind::DimId: return operands[cast<AffineDimExpr>(e).getPosition()];
  case AffineExprKind::SymbolId:
    return operands[numDims + cast<AffineSymbolExpr>(e).getPosition()];
  default: break;
  }
  auto bin = cast<AffineBinaryOpExpr>(e);
  Linear lhs = linearOfAffine(bin.getLHS(), operands, numDims);
  Linear rhs = linearOfAffine(bin.getRHS(), operands, numDims);
  if (!lhs.ok || !rhs.ok)
    return Linear::failure();
  switch (e.getKind()) {
  case AffineExprKind::Add: return lhs.add(rhs, 1);
  case AffineExprKind::Mul:
    if (rhs.isConstant())
      return Linear().add(lhs, rhs.constant);
    if (lhs.isConstant())
      return Linear().add(rhs, lhs.constant);
    break;
  default: break; // floordiv, ceildiv, mod
  }
  // A non-linear combination: fine while it does not involve the dims.
  return lhs.hasDims() || rhs.hasDims() ? Linear::failure() : Linear::opaque();
}

Linear linearOf(Value v, Operation *scope, const llvm::DenseSet<Value> &dims) {
  if (dims.contains(v)) {
    Linear l;
    l.coef.push_back({v, 1});
    return l;
  }
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<tk::ConstantOp>(def))
    if (auto i = dyn_cast<IntegerAttr>(c.getValue())) {
      Linear l;
      l.constant = i.getValue().getSExtValue();
      return l;
    }
  Operation *owner = def ? def : v.getParentBlock()->getParentOp();
  if (!scope->isAncestor(owner) || (!def && owner == scope))
    return Linear::opaque(); // outside the loop, or one of its own args that is not a dim
  auto apply = dyn_cast_or_null<tk::ApplyOp>(def);
  if (!apply)
    return Linear::failure();
  AffineMap map = apply.getMap();
  SmallVector<Linear> operands;
  for (Value operand : apply.getOperands())
    operands.push_back(linearOf(operand, scope, dims));
  return linearOfAffine(map.getResult(0), operands, map.getNumDims());
}

/// The largest number every value of `e` is known to be a multiple of: the gcd of its terms'
/// coefficients (1 for a sum with a constant 1, e.g. 2*seq - 1).
int64_t knownFactor(const SymExpr &e) {
  int64_t g = 0;
  for (const SymExpr::TermView &term : e.terms())
    g = std::gcd(g, term.coeff);
  return g == 0 ? 1 : std::abs(g);
}

/// Row-major element offset of a load/store. Symbolic strides (buffers with #tcc.dims) are
/// known by their factor only.
Linear offsetOf(Operation *access, Operation *scope, const llvm::DenseSet<Value> &dims) {
  auto [memref, indices] = accessOf(access);
  auto type = cast<MemRefType>(memref.getType());
  SymShape shape = type.hasStaticShape() ? toSymShape(type.getShape()) : tk::bufferDims(type);
  Linear offset;
  SymExpr stride(1);
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    Linear index = linearOf(indices[d], scope, dims);
    if (std::optional<int64_t> c = stride.constant())
      offset.add(index, *c);
    else
      offset.addTimesUnknown(index, knownFactor(stride));
    stride *= shape[d];
  }
  return offset;
}

//===----------------------------------------------------------------------===//
// Loop plans: how a loop is cut into groups of V iterations
//===----------------------------------------------------------------------===//

/// A loop's iteration count, or a product of counts: a static factor times run-time factors
/// (index values of the kernel: tk.size results, or arithmetic on them). The upper bound over
/// the module's symbol ranges picks index widths and sizes the grid; the count over the size
/// symbols, where every factor is a tk.size, lets the runtime shrink the grid to a binding.
struct Extent {
  int64_t factor = 1;
  llvm::SmallVector<Value, 2> values;
  int64_t max = 1;                         // the value when static
  std::optional<SymExpr> sym = SymExpr(1); // the count over the size symbols, when known

  static Extent of(int64_t v) {
    Extent e;
    e.factor = v;
    e.max = v;
    e.sym = SymExpr(v);
    return e;
  }
  /// A run-time count `v` (its bound: its expression's range, else unknown: int64's).
  static Extent dynamic(Value v, const SymbolRanges &ranges) {
    Extent e;
    e.values.push_back(v);
    e.max = INT64_MAX;
    e.sym = sizeOf(v);
    if (e.sym)
      e.max = std::max<int64_t>(rangeOf(*e.sym, ranges).max, 0);
    return e;
  }
  /// An index value of a kernel as a size expression: tk.size, index constants, and the
  /// integer arithmetic the lowering builds from them (add, sub, mul, max, min, tk.apply).
  static std::optional<SymExpr> sizeOf(Value v);
  bool isStatic() const { return values.empty(); }
  bool isOne() const { return isStatic() && factor == 1; }
  Extent operator*(const Extent &o) const {
    Extent e;
    e.factor = factor * o.factor;
    e.values = values;
    e.values.append(o.values.begin(), o.values.end());
    if (__builtin_mul_overflow(max, o.max, &e.max))
      e.max = INT64_MAX;
    e.sym = sym && o.sym ? std::optional<SymExpr>(*sym * *o.sym) : std::nullopt;
    return e;
  }
};

std::optional<SymExpr> Extent::sizeOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !v.getType().isIndex())
    return std::nullopt;
  if (auto size = dyn_cast<tk::SizeOp>(def))
    return SymExpr::parse(size.getExpr());
  if (auto c = dyn_cast<tk::ConstantOp>(def))
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return SymExpr(i.getInt());
  if (auto b = dyn_cast<tk::BinaryOp>(def)) {
    std::optional<SymExpr> x = sizeOf(b.getLhs()), y = sizeOf(b.getRhs());
    if (!x || !y)
      return std::nullopt;
    switch (b.getKind()) {
    case BinaryKind::Add: return *x + *y;
    case BinaryKind::Sub: return *x - *y;
    case BinaryKind::Mul: return *x * *y;
    case BinaryKind::Max: return SymExpr::max(*x, *y);
    case BinaryKind::Min: return SymExpr::min(*x, *y);
    default: return std::nullopt;
    }
  }
  if (auto a = dyn_cast<tk::ApplyOp>(def)) {
    AffineMap map = a.getMap();
    std::vector<SymExpr> operands;
    for (Value operand : a.getOperands()) {
      std::optional<SymExpr> x = sizeOf(operand);
      if (!x)
        return std::nullopt;
      operands.push_back(*x);
    }
    std::function<std::optional<SymExpr>(AffineExpr)> eval =
        [&](AffineExpr e) -> std::optional<SymExpr> {
      switch (e.getKind()) {
      case AffineExprKind::Constant: return SymExpr(cast<AffineConstantExpr>(e).getValue());
      case AffineExprKind::DimId: return operands[cast<AffineDimExpr>(e).getPosition()];
      case AffineExprKind::SymbolId:
        return operands[map.getNumDims() + cast<AffineSymbolExpr>(e).getPosition()];
      default: break;
      }
      auto bin = cast<AffineBinaryOpExpr>(e);
      std::optional<SymExpr> x = eval(bin.getLHS()), y = eval(bin.getRHS());
      if (!x || !y)
        return std::nullopt;
      switch (e.getKind()) {
      case AffineExprKind::Add: return *x + *y;
      case AffineExprKind::Mul: return *x * *y;
      case AffineExprKind::FloorDiv: return SymExpr::floorDiv(*x, *y);
      case AffineExprKind::CeilDiv: return SymExpr::ceilDiv(*x, *y);
      case AffineExprKind::Mod: return SymExpr::mod(*x, *y);
      default: return std::nullopt;
      }
    };
    return eval(map.getResult(0));
  }
  return std::nullopt;
}

Extent productOf(ArrayRef<Extent> extents) {
  Extent p = Extent::of(1);
  for (const Extent &e : extents)
    p = p * e;
  return p;
}

/// A loop's extents: `bounds` with ShapedType::kDynamic for each of `dynamicBounds`, in order.
SmallVector<Extent> extentsOf(ArrayRef<int64_t> bounds, ValueRange dynamicBounds,
                              const SymbolRanges &ranges) {
  SmallVector<Extent> out;
  size_t next = 0;
  for (int64_t b : bounds)
    out.push_back(ShapedType::isDynamic(b) ? Extent::dynamic(dynamicBounds[next++], ranges)
                                           : Extent::of(b));
  return out;
}

std::string boundsString(ArrayRef<Extent> bounds) {
  std::string s = "[";
  for (size_t d = 0; d < bounds.size(); ++d)
    s += (d ? ", " : "") + (bounds[d].isStatic() ? str(bounds[d].factor)
                            : bounds[d].sym     ? bounds[d].sym->str()
                                                : std::string("?"));
  return s + "]";
}

struct LoopPlan {
  unsigned vec = 1;              // V: iterations per group, run as unrolled lanes
  size_t merged = 1;             // k: trailing dims whose flat index the lanes walk
  Extent inner = Extent::of(1);  // P_k: iterations of the merged dims (static when V > 1)
  bool tail = false;             // inner % vec != 0: the last group of each row is partial
  Extent groups = Extent::of(0); // total groups
  /// Loads and stores done as vector accesses, with their chunk width W (elements).
  llvm::DenseMap<Operation *, unsigned> vectorized;
};

struct KernelFacts {
  llvm::DenseMap<Value, unsigned> argIndex;
  std::vector<unsigned> alignment; // per argument, bytes
  llvm::DenseSet<Value> loaded, stored;
};

/// Cuts the loop `scope` (body `block`, one index arg per dim of `bounds`) into groups of V
/// consecutive iterations of its flattened index space. V > 1 only where some load or store of
/// the body (not of nested loops) becomes a vector access: its offset steps by one element per
/// iteration within a group and the group's first element is aligned (IR-proven: coefficients,
/// constants and unknown terms are multiples of V, and the buffer is aligned for W elements).
LoopPlan planLoop(Operation *scope, Block &block, ArrayRef<Extent> bounds,
                  const KernelFacts &facts, bool allowVectors) {
  LoopPlan plan;
  size_t n = bounds.size();
  auto finish = [&](LoopPlan &p) {
    if (n == 0) {
      p.groups = Extent::of(1);
      return;
    }
    Extent outer = productOf(bounds.drop_back(p.merged));
    p.groups = outer * (p.vec == 1 ? p.inner : Extent::of(llvm::divideCeil(p.inner.factor, p.vec)));
  };
  plan.inner = n ? bounds.back() : Extent::of(1);
  Extent total = productOf(bounds);
  if (n == 0 || (total.isStatic() && total.factor == 0)) {
    finish(plan);
    return plan;
  }

  // Groups span static trailing dims only: a vector group must not cross a run-time extent.
  size_t staticTrailing = 0;
  while (staticTrailing < n && bounds[n - 1 - staticTrailing].isStatic())
    ++staticTrailing;
  int64_t staticInner = productOf(bounds.take_back(staticTrailing)).factor;

  llvm::DenseSet<Value> dims;
  for (size_t d = 0; d < n; ++d)
    dims.insert(block.getArgument(d));
  Value innermost = block.getArgument(n - 1);

  struct Candidate {
    Operation *op;
    Linear offset;
    unsigned bytes, align;
  };
  std::vector<Candidate> candidates;
  llvm::DenseMap<Value, int> storesTo;
  for (Operation &op : block.without_terminator())
    if (auto s = dyn_cast<tk::StoreOp>(op))
      ++storesTo[s.getMemref()];
  unsigned maxVec = 1;
  for (Operation &op : block.without_terminator()) {
    if (!allowVectors || staticTrailing == 0 || !isa<tk::LoadOp, tk::StoreOp>(op) ||
        (isa<tk::LoadOp>(op) && op.use_empty())) // unused loads are not emitted
      continue;
    auto [memref, indices] = accessOf(&op);
    // A buffer this kernel both reads and writes keeps scalar accesses: a lane's vector load
    // could run before another lane's store to it (and vice versa).
    if (facts.loaded.contains(memref) && facts.stored.contains(memref))
      continue;
    if (isa<tk::StoreOp>(op) && storesTo[memref] != 1)
      continue;
    Linear offset = offsetOf(&op, scope, dims);
    if (!offset.ok || offset.of(innermost) != 1 || offset.unknownOf(innermost))
      continue;
    auto it = facts.argIndex.find(memref);
    if (it == facts.argIndex.end())
      continue;
    unsigned bytes = elementBytes(cast<MemRefType>(memref.getType()).getElementType());
    candidates.push_back({&op, offset, bytes, facts.alignment[it->second]});
    maxVec = std::max(maxVec, kVectorBytes / bytes);
  }

  for (unsigned vec = maxVec; vec >= 2; vec /= 2) {
    if (staticInner < vec)
      continue;
    LoopPlan p;
    p.vec = vec;
    // The fewest trailing dims whose iterations divide into groups (else all static ones,
    // with a tail).
    p.merged = staticTrailing;
    for (size_t k = 1; k <= staticTrailing; ++k)
      if (productOf(bounds.take_back(k)).factor % vec == 0) {
        p.merged = k;
        break;
      }
    p.inner = productOf(bounds.take_back(p.merged));
    p.tail = p.inner.factor % vec != 0;
    for (const Candidate &c : candidates) {
      // Contiguous over the merged dims (row-major in the loop's own order), aligned at the
      // group's first iteration.
      bool ok = c.offset.constant % vec == 0 && c.offset.opaqueGcd % vec == 0;
      int64_t stride = 1;
      for (size_t j = 0; j < n && ok; ++j) {
        size_t d = n - 1 - j;
        Value dim = block.getArgument(d);
        int64_t coef = c.offset.of(dim), unknown = c.offset.unknownOf(dim);
        ok = j < p.merged ? coef == stride && unknown == 0
                          : coef % vec == 0 && unknown % vec == 0;
        if (j < p.merged)
          stride *= bounds[d].factor;
      }
      unsigned width = std::min({vec, kVectorBytes / c.bytes, c.align / c.bytes});
      if (ok && width >= 2)
        p.vectorized[c.op] = width;
    }
    // The widest grouping that vectorises the most accesses.
    if (p.vectorized.size() > plan.vectorized.size())
      plan = std::move(p);
  }
  finish(plan);
  return plan;
}

//===----------------------------------------------------------------------===//
// The emitter
//===----------------------------------------------------------------------===//

enum class Strategy { Pointwise, Row, Column, Thread, Serial };

class CudaKernelEmitter {
public:
  CudaKernelEmitter(func::FuncOp fn, const CudaEmitOptions &options)
      : fn(fn), options(options), scalars(Target::Cuda) {
    if (auto module = fn->getParentOfType<ModuleOp>())
      ranges = symbolRanges(module);
  }

  CudaKernel emit();

private:
  // ---- Output ----
  void line(const std::string &text) {
    body.append(2 * depth, ' ');
    body += text;
    body += '\n';
  }
  void open(const std::string &header) {
    line(header.empty() ? "{" : header + " {");
    ++depth;
  }
  void close() {
    --depth;
    line("}");
  }

  // ---- Layout ----
  void chooseLayout();
  std::vector<Operation *> teamLoops(Block &teamBlock);

  // ---- Emission ----
  /// Emits the ops of `block`. At the team level (`teamLevel`, the body of the outer loop in
  /// row/column strategies) loops are split across the team and stores are made by one thread;
  /// elsewhere everything runs in the calling thread.
  void emitBlock(Block &block, bool teamLevel);
  void emitOp(Operation *op, bool teamLevel);
  void emitScalar(Operation *op);
  void emitLoad(tk::LoadOp load);
  void emitStore(tk::StoreOp store, bool teamLevel);
  void emitSequentialParallel(tk::ParallelOp op);
  void emitSequentialReduce(tk::ReduceOp op);
  void emitSequentialArgReduce(tk::ArgReduceOp op);
  void emitFor(tk::ForOp op);
  void emitSplitParallel(tk::ParallelOp op);
  void emitSplitReduce(tk::ReduceOp op);
  void emitSplitArgReduce(tk::ArgReduceOp op);
  /// A loop over `plan`'s groups of `block`'s index space, starting at group `start` and
  /// stepping by `stride` (C expressions); `perLane` emits one iteration once the block's index
  /// args are bound.
  void emitGroupLoop(Block &block, ArrayRef<Extent> bounds, const LoopPlan &plan,
                     const std::string &start, const std::string &stride,
                     const std::function<void()> &perLane);
  void emitLanes(Block &block, ArrayRef<Extent> bounds, const LoopPlan &plan,
                 const std::string &uint, const std::string &first, bool vectors,
                 const std::function<void()> &perLane);

  /// The accumulator combine for the team reduction: like ScalarEmitter::reduceCombine, but
  /// float max/min propagate NaN (partial results cannot carry a separate flag cheaply).
  std::string combine(ReduceKind kind, Type type, const std::string &acc, const std::string &value);
  /// Combines the per-thread `values` (C names, updated in place) across the team; every team
  /// thread ends with the team's result. `merge(into, other)` emits the combination of one
  /// partial (names of other's values) into `values`.
  void teamCombine(const std::vector<std::pair<std::string, std::string>> &values,
                   const std::function<void(const std::vector<std::string> &)> &merge);
  std::string pointer(Value memref);
  std::vector<std::string> bindIndices(Block &block, size_t count);
  /// The extents of a loop (tk.parallel, tk.reduce, tk.arg_reduce).
  SmallVector<Extent> loopExtents(Operation *loop) const;
  /// `e` as a C expression: a literal, or the product of its run-time factors, converted to
  /// `uint` (a loop index type; "" keeps int64_t).
  std::string count(const Extent &e, const std::string &uint = "") const;

  func::FuncOp fn;
  const CudaEmitOptions &options;
  SymbolRanges ranges; // the module's size symbols (symbolic programs)
  ScalarEmitter scalars;
  KernelFacts facts;
  llvm::DenseMap<Value, std::string> pointers;
  std::string body;
  int depth = 1;

  // Layout.
  Strategy strategy = Strategy::Serial;
  tk::ParallelOp outer;          // the outermost tk.parallel (null: the team block is the body)
  Block *teamBlock = nullptr;    // what one team runs (outer's body, or the kernel's body)
  uint32_t team = 1;             // threads per team
  uint32_t blockX = 1, blockY = 1;
  uint64_t teams = 1;            // outer iterations (their upper bound, when symbolic)
  Extent teamsExtent = Extent::of(1);
  std::string gridWork;          // the grid's work over the size symbols (CudaLaunchConfig)
  uint32_t workPerBlock = 0;
  uint64_t gridX = 1;
  uint32_t sharedBytes = 0;
  LoopPlan outerPlan;            // pointwise/thread: the outer loop's groups
  bool clamped = false;          // the last teams of the grid repeat the last iteration
  bool usesLeader = false;
  std::string strategyNote;

  // Lanes of the group being emitted: vector accesses and their buffers.
  struct VectorSlot {
    std::string name;
    unsigned width;
    std::string storage;
  };
  llvm::DenseMap<Operation *, VectorSlot> vectorSlots;
  std::string lane; // the lane index, while emitting vector lanes
};

std::string CudaKernelEmitter::pointer(Value memref) {
  auto it = pointers.find(memref);
  if (it == pointers.end())
    throw Error("tk codegen: kernel '" + fn.getSymName().str() +
                "' accesses a buffer that is not one of its arguments");
  return it->second;
}

std::vector<std::string> CudaKernelEmitter::bindIndices(Block &block, size_t count) {
  std::vector<std::string> indices;
  for (size_t i = 0; i < count; ++i) {
    indices.push_back(scalars.fresh("i"));
    scalars.bind(block.getArgument(i), indices.back());
  }
  return indices;
}

std::vector<Operation *> CudaKernelEmitter::teamLoops(Block &block) {
  std::vector<Operation *> loops;
  for (Operation &op : block.without_terminator())
    if (isLoop(&op))
      loops.push_back(&op);
  return loops;
}

SmallVector<Extent> CudaKernelEmitter::loopExtents(Operation *op) const {
  if (auto p = dyn_cast<tk::ParallelOp>(op))
    return extentsOf(p.getBounds(), p.getDynamicBounds(), ranges);
  if (auto r = dyn_cast<tk::ReduceOp>(op))
    return extentsOf(r.getBounds(), r.getDynamicBounds(), ranges);
  auto a = cast<tk::ArgReduceOp>(op);
  if (Value bound = a.getDynamicBound())
    return {Extent::dynamic(bound, ranges)};
  return {Extent::of(a.getBound())};
}

std::string CudaKernelEmitter::count(const Extent &e, const std::string &uint) const {
  if (e.isStatic())
    return str(e.factor);
  std::string s = e.factor != 1 ? str(e.factor) : "";
  for (Value v : e.values)
    s += (s.empty() ? "" : " * ") + scalars.name(v);
  return uint.empty() ? "(" + s + ")" : "(" + uint + ")(" + s + ")";
}

void CudaKernelEmitter::chooseLayout() {
  Block &fnBody = fn.getBody().front();
  std::vector<Operation *> topLoops = teamLoops(fnBody);
  auto onlyScalarsBesides = [&](Operation *loop) {
    for (Operation &op : fnBody.without_terminator())
      if (&op != loop && !ScalarEmitter::isScalarOp(&op))
        return false;
    return true;
  };

  if (topLoops.size() == 1 && isa<tk::ParallelOp>(topLoops[0]) &&
      onlyScalarsBesides(topLoops[0])) {
    outer = cast<tk::ParallelOp>(topLoops[0]);
    teamBlock = &outer.getBody().front();
    teamsExtent = productOf(loopExtents(outer));
    teams = (uint64_t)teamsExtent.max;
  } else if (topLoops.size() == 1 && isa<tk::ReduceOp, tk::ArgReduceOp>(topLoops[0])) {
    teamBlock = &fnBody; // one team runs the whole body: a reduction of everything
    teams = 1;
  } else {
    strategy = Strategy::Serial;
    strategyNote = topLoops.empty() ? "no loops" : "not one outer loop";
    return;
  }
  if (teamsExtent.isStatic() && teams == 0) {
    strategy = Strategy::Serial;
    strategyNote = "no iterations";
    return;
  }

  std::vector<Operation *> loops = teamLoops(*teamBlock);
  if (outer && loops.empty()) {
    strategy = Strategy::Pointwise;
    outerPlan = planLoop(outer, *teamBlock, loopExtents(outer), facts, /*allowVectors=*/true);
    return;
  }
  bool sequential = llvm::any_of(loops, [](Operation *op) { return isa<tk::ForOp>(op); });

  // What the team-level loops read: contiguous along their own innermost dim (rows), or along
  // the outer loop's innermost dim (columns).
  int rowish = 0, colish = 0;
  int64_t groups = 0;
  Value outerInner;
  if (outer && loopExtents(outer).back().max > 1)
    outerInner = teamBlock->getArgument(outer.getBounds().size() - 1);
  for (Operation *loop : loops) {
    if (isa<tk::ForOp>(loop))
      continue;
    Block &block = loop->getRegion(0).front();
    SmallVector<Extent> bounds = loopExtents(loop);
    groups = std::max(groups, planLoop(loop, block, bounds, facts, true).groups.max);
    if (bounds.empty())
      continue;
    llvm::DenseSet<Value> dims;
    for (size_t d = 0; d < bounds.size(); ++d)
      dims.insert(block.getArgument(d));
    if (outer)
      for (BlockArgument a : teamBlock->getArguments())
        dims.insert(a);
    Value inner = block.getArgument(bounds.size() - 1);
    block.walk([&](tk::LoadOp load) {
      Linear offset = offsetOf(load, outer ? outer.getOperation() : loop, dims);
      if (!offset.ok)
        return;
      if (offset.of(inner) == 1)
        ++rowish;
      else if (outerInner && offset.of(outerInner) == 1)
        ++colish;
    });
  }

  // Teams of one thread: sequential loops, short rows, or columns with plenty of outputs.
  constexpr int64_t kMinRowGroups = 16;
  constexpr uint64_t kManyColumns = 1 << 15;
  if (sequential || groups < kMinRowGroups || (colish > rowish && teams >= kManyColumns) ||
      (rowish == 0 && colish == 0 && teams >= kManyColumns)) {
    strategy = Strategy::Thread;
    team = 1;
    // Without an outer loop: a whole-tensor reduction too short to share, run by one thread.
    if (outer)
      outerPlan = planLoop(outer, *teamBlock, loopExtents(outer), facts, false);
    return;
  }
  if (outer && (colish > rowish || (rowish == 0 && colish == 0))) {
    // Columns: blockDim.x consecutive outputs, blockDim.y threads split each reduced loop.
    strategy = Strategy::Column;
    team = std::clamp<uint32_t>(pow2Floor(groups / 8), 2, 16);
    blockY = team;
    blockX = std::max<uint32_t>(32, kBlockThreads / team);
    return;
  }
  strategy = Strategy::Row;
  if (groups <= 32) {
    team = pow2Ceil(groups);
  } else if (groups <= 256) {
    team = 32;
  } else {
    // A block per row; fewer rows than ~2 per SM get bigger teams.
    uint64_t perThread = teams <= 264 ? 2 : 8;
    team = std::clamp<uint32_t>(pow2Ceil(llvm::divideCeil(groups, perThread)), 64, 1024);
  }
  if (!outer) // one team: the whole (single) block, at least a warp for the shuffles
    team = std::max<uint32_t>(team, 32);
  blockX = team <= 32 && outer ? kBlockThreads : team;
}

std::string CudaKernelEmitter::combine(ReduceKind kind, Type type, const std::string &acc,
                                       const std::string &value) {
  if (ScalarEmitter::reductionTracksNaN(kind, type)) {
    const char *cmp = kind == ReduceKind::Max ? " > " : " < ";
    return "(" + value + " != " + value + " || " + value + cmp + acc + ") ? " + value + " : " +
           acc;
  }
  return scalars.reduceCombine(kind, type, acc, value);
}

void CudaKernelEmitter::teamCombine(
    const std::vector<std::pair<std::string, std::string>> &values,
    const std::function<void(const std::vector<std::string> &)> &merge) {
  if (team == 1)
    return;
  auto shuffled = [&](const std::string &type, const std::string &name, uint32_t offset,
                      uint32_t width) {
    // 8- and 16-bit values and bools travel as int.
    bool narrow = type == "bool" || type == "int8_t" || type == "uint8_t" || type == "int16_t" ||
                  type == "uint16_t";
    std::string arg = narrow ? "(int)" + name : name;
    std::string call = "__shfl_xor_sync(0xffffffffu, " + arg + ", " + str(offset) + ", " +
                       str(width) + ")";
    return narrow ? "(" + type + ")" + call : call;
  };
  auto butterfly = [&](uint32_t width) {
    for (uint32_t offset = width / 2; offset > 0; offset /= 2) {
      open("");
      std::vector<std::string> others;
      for (auto &[type, name] : values) {
        others.push_back(name + "_o");
        line("const " + type + " " + others.back() + " = " + shuffled(type, name, offset, width) +
             ";");
      }
      merge(others);
      close();
    }
  };
  // Shared memory: one slot per warp (row blocks) or per thread (columns) and value.
  uint32_t slots = strategy == Strategy::Row ? team / 32 : blockX * blockY;
  auto smemArray = [&](size_t i, const std::string &type) {
    std::string base = i == 0 ? "tcc_smem" : "tcc_smem + " + str(i * kSlotBytes * slots);
    return "((" + type + " *)(" + base + "))";
  };
  auto fromSmem = [&](const std::string &slot) {
    open("");
    std::vector<std::string> others;
    for (size_t i = 0; i < values.size(); ++i) {
      auto &[type, name] = values[i];
      others.push_back(name + "_o");
      line("const " + type + " " + others.back() + " = " + smemArray(i, type) + "[" + slot + "];");
    }
    merge(others);
    close();
  };
  if (strategy == Strategy::Row && team <= 32) {
    line("// combine across the team (" + str(team) + " lanes)");
    butterfly(team);
    return;
  }
  sharedBytes = std::max<uint32_t>(sharedBytes, (uint32_t)values.size() * kSlotBytes * slots);
  if (strategy == Strategy::Row) {
    uint32_t warps = team / 32;
    line("// combine across the block: warps, then " + str(warps) + " warp results");
    butterfly(32);
    open("if ((threadIdx.x & 31u) == 0)");
    for (size_t i = 0; i < values.size(); ++i)
      line(smemArray(i, values[i].first) + "[threadIdx.x >> 5] = " + values[i].second + ";");
    close();
    line("__syncthreads();");
    for (size_t i = 0; i < values.size(); ++i)
      line(values[i].second + " = " + smemArray(i, values[i].first) + "[0];");
    open("for (uint32_t tcc_w = 1; tcc_w < " + str(warps) + "; ++tcc_w)");
    fromSmem("tcc_w");
    close();
    line("__syncthreads();");
    return;
  }
  // Column teams: the blockDim.y threads of one threadIdx.x.
  line("// combine across the team (the " + str(team) + " threads of a column)");
  for (size_t i = 0; i < values.size(); ++i)
    line(smemArray(i, values[i].first) + "[threadIdx.y * " + str(blockX) + " + threadIdx.x] = " +
         values[i].second + ";");
  line("__syncthreads();");
  for (size_t i = 0; i < values.size(); ++i)
    line(values[i].second + " = " + smemArray(i, values[i].first) + "[threadIdx.x];");
  open("for (uint32_t tcc_w = 1; tcc_w < " + str(team) + "; ++tcc_w)");
  fromSmem("tcc_w * " + str(blockX) + " + threadIdx.x");
  close();
  line("__syncthreads();");
}

// ---- Ops --------------------------------------------------------------------------------------

void CudaKernelEmitter::emitBlock(Block &block, bool teamLevel) {
  for (Operation &op : block.without_terminator())
    emitOp(&op, teamLevel);
}

void CudaKernelEmitter::emitScalar(Operation *op) {
  std::string expr = scalars.expression(op);
  Value result = op->getResult(0);
  if (isa<tk::ConstantOp>(op)) { // literals are used in place
    scalars.bind(result, expr);
    return;
  }
  std::string local = scalars.fresh("v");
  line("const " + scalars.computeType(result.getType()) + " " + local + " = " + expr + ";");
  scalars.bind(result, local);
}

void CudaKernelEmitter::emitLoad(tk::LoadOp load) {
  Type type = load.getType();
  std::string address = pointer(load.getMemref()) + " + " +
                        scalars.linearIndex(load.getMemref().getType(), load.getIndices());
  std::string element = "*(" + address + ")";
  auto slot = vectorSlots.find(load);
  if (slot != vectorSlots.end() && !lane.empty()) {
    const VectorSlot &v = slot->second;
    std::string w = str(v.width), vecType = "tcc_vec<" + v.storage + ", " + w + ">";
    line("if (" + lane + " % " + w + " == 0) " + v.name + "[" + lane + " / " + w +
         "] = *reinterpret_cast<const " + vecType + " *>(" + address + ");");
    element = v.name + "[" + lane + " / " + w + "].v[" + lane + " % " + w + "]";
  }
  std::string local = scalars.fresh("v");
  line("const " + scalars.computeType(type) + " " + local + " = " +
       scalars.loadValue(type, element) + ";");
  scalars.bind(load.getResult(), local);
}


void CudaKernelEmitter::emitStore(tk::StoreOp store, bool teamLevel) {
  Type type = store.getValue().getType();
  std::string address = pointer(store.getMemref()) + " + " +
                        scalars.linearIndex(store.getMemref().getType(), store.getIndices());
  std::string value = scalars.storeValue(type, scalars.name(store.getValue()));
  auto slot = vectorSlots.find(store);
  if (slot != vectorSlots.end() && !lane.empty()) {
    const VectorSlot &v = slot->second;
    std::string w = str(v.width), vecType = "tcc_vec<" + v.storage + ", " + w + ">";
    std::string chunk = v.name + "[" + lane + " / " + w + "]";
    line(chunk + ".v[" + lane + " % " + w + "] = " + value + ";");
    line("if (" + lane + " % " + w + " == " + str(v.width - 1) + ") *reinterpret_cast<" +
         vecType + " *>(" + address + " - " + str(v.width - 1) + ") = " + chunk + ";");
    return;
  }
  std::string text = "*(" + address + ") = " + value + ";";
  if (teamLevel) { // one thread of the team stores what all of them computed
    usesLeader = true;
    text = "if (tcc_leader) " + text;
  }
  line(text);
}

void CudaKernelEmitter::emitOp(Operation *op, bool teamLevel) {
  // Unused pure values (scalar ops, loads) are left out: no dead locals in the output.
  if ((ScalarEmitter::isScalarOp(op) || isa<tk::LoadOp>(op)) && op->use_empty())
    return;
  if (ScalarEmitter::isScalarOp(op))
    return emitScalar(op);
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](tk::LoadOp load) { emitLoad(load); })
      .Case([&](tk::StoreOp store) { emitStore(store, teamLevel); })
      .Case([&](tk::ParallelOp p) {
        teamLevel ? emitSplitParallel(p) : emitSequentialParallel(p);
      })
      .Case([&](tk::ReduceOp r) { teamLevel ? emitSplitReduce(r) : emitSequentialReduce(r); })
      .Case([&](tk::ArgReduceOp a) {
        teamLevel ? emitSplitArgReduce(a) : emitSequentialArgReduce(a);
      })
      .Case([&](tk::ForOp f) {
        if (teamLevel) // chooseLayout gives kernels with sequential loops one-thread teams
          throw Error("tk codegen: internal error: tk.for split across a team in kernel '" +
                      fn.getSymName().str() + "'");
        emitFor(f);
      })
      .Default([&](Operation *other) {
        throw Error("tk codegen: cannot emit '" + other->getName().getStringRef().str() +
                    "' in a CUDA kernel");
      });
}

// ---- Loops run by one thread -------------------------------------------------------------------

void CudaKernelEmitter::emitSequentialParallel(tk::ParallelOp op) {
  Block &block = op.getBody().front();
  SmallVector<Extent> bounds = loopExtents(op);
  std::vector<std::string> idx = bindIndices(block, bounds.size());
  line("// tk.parallel " + boundsString(bounds));
  open("");
  for (size_t d = 0; d < bounds.size(); ++d)
    open("for (int64_t " + idx[d] + " = 0; " + idx[d] + " < " + count(bounds[d]) + "; ++" +
         idx[d] + ")");
  emitBlock(block, false);
  for (size_t d = 0; d < bounds.size(); ++d)
    close();
  close();
}

void CudaKernelEmitter::emitSequentialReduce(tk::ReduceOp op) {
  Block &block = op.getBody().front();
  SmallVector<Extent> bounds = loopExtents(op);
  ReduceKind kind = op.getKind();
  Type type = op.getType();
  std::string acc = scalars.fresh("acc");
  std::vector<std::string> idx = bindIndices(block, bounds.size());
  line("// tk.reduce " + stringifyReduceKind(kind).str() + " " + boundsString(bounds) + " : " +
       typeString(type));
  line(scalars.accumulatorType(kind, type) + " " + acc + " = " +
       scalars.reduceIdentity(kind, type) + ";");
  open("");
  for (size_t d = 0; d < bounds.size(); ++d)
    open("for (int64_t " + idx[d] + " = 0; " + idx[d] + " < " + count(bounds[d]) + "; ++" +
         idx[d] + ")");
  emitBlock(block, false);
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  line(acc + " = " + combine(kind, type, acc, scalars.name(yielded)) + ";");
  for (size_t d = 0; d < bounds.size(); ++d)
    close();
  close();
  std::string result = scalars.fresh("v");
  line("const " + scalars.computeType(type) + " " + result + " = " +
       scalars.reduceResult(kind, type, acc) + ";");
  scalars.bind(op.getResult(), result);
}

void CudaKernelEmitter::emitSequentialArgReduce(tk::ArgReduceOp op) {
  Block &block = op.getBody().front();
  std::string index = bindIndices(block, 1)[0];
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  Type type = yielded.getType();
  bool largest = op.getKind() == ReduceKind::Max;
  std::string result = scalars.fresh("v");
  std::string best = result + "_best";
  Extent bound = loopExtents(op)[0];
  line("// tk.arg_reduce " + stringifyReduceKind(op.getKind()).str() + " " +
       boundsString(bound) + (op.getSelectLastIndex() ? " (last index)" : ""));
  line("int64_t " + result + " = 0;");
  line(scalars.computeType(type) + " " + best + " = (" + scalars.computeType(type) + ")0;");
  open("for (int64_t " + index + " = 0; " + index + " < " + count(bound) + "; ++" + index +
       ")");
  emitBlock(block, false);
  std::string y = scalars.name(yielded);
  std::string better = scalars.argReplaces(type, largest, op.getSelectLastIndex(), y, best);
  open("if (" + index + " == 0 || " + better + ")");
  line(best + " = " + y + ";");
  line(result + " = " + index + ";");
  close();
  close();
  scalars.bind(op.getResult(), result);
}

void CudaKernelEmitter::emitFor(tk::ForOp op) {
  Block &block = op.getBody().front();
  std::vector<std::string> carried;
  std::string count = op.getDynamicCount() ? scalars.name(op.getDynamicCount()) : str(op.getCount());
  line("// tk.for " + count);
  for (auto [init, result] : llvm::zip(op.getInits(), op.getResults())) {
    carried.push_back(scalars.fresh("c"));
    line(scalars.computeType(init.getType()) + " " + carried.back() + " = " +
         scalars.name(init) + ";");
  }
  std::string index = bindIndices(block, 1)[0];
  for (size_t i = 0; i < carried.size(); ++i)
    scalars.bind(block.getArgument(i + 1), carried[i]);
  open("for (int64_t " + index + " = 0; " + index + " < " + count + "; ++" + index + ")");
  emitBlock(block, false);
  auto yielded = cast<tk::YieldOp>(block.getTerminator()).getValues();
  // Through temporaries: a yielded value may be another carried value.
  std::vector<std::string> next;
  for (Value v : yielded) {
    next.push_back(scalars.fresh("n"));
    line("const " + scalars.computeType(v.getType()) + " " + next.back() + " = " +
         scalars.name(v) + ";");
  }
  for (size_t i = 0; i < carried.size(); ++i)
    line(carried[i] + " = " + next[i] + ";");
  close();
  for (auto [result, name] : llvm::zip(op.getResults(), carried))
    scalars.bind(result, name);
}

// ---- Loops split across a team -----------------------------------------------------------------

/// "vec=V" when the loop runs in vector groups.
static std::string vecNote(const LoopPlan &plan) {
  if (plan.vec == 1)
    return "";
  return ", groups of " + str(plan.vec) + (plan.vectorized.empty() ? "" : ", vector accesses");
}

void CudaKernelEmitter::emitSplitParallel(tk::ParallelOp op) {
  Block &block = op.getBody().front();
  SmallVector<Extent> bounds = loopExtents(op);
  LoopPlan plan = planLoop(op, block, bounds, facts, true);
  line("// tk.parallel " + boundsString(bounds) + " (split across the team" + vecNote(plan) +
       ")");
  // Repeated teams compute but must not store twice (no team syncs inside: they may skip).
  if (clamped)
    open("if (tcc_active)");
  emitGroupLoop(block, bounds, plan, "tcc_lane", str(team), [&] { emitBlock(block, false); });
  if (clamped)
    close();
}

void CudaKernelEmitter::emitSplitReduce(tk::ReduceOp op) {
  Block &block = op.getBody().front();
  ReduceKind kind = op.getKind();
  Type type = op.getType();
  SmallVector<Extent> bounds = loopExtents(op);
  LoopPlan plan = planLoop(op, block, bounds, facts, true);
  std::string acc = scalars.fresh("acc");
  std::string accType = scalars.accumulatorType(kind, type);
  line("// tk.reduce " + stringifyReduceKind(kind).str() + " " + boundsString(bounds) +
       " : " + typeString(type) + " (split across the team" + vecNote(plan) + ")");
  line(accType + " " + acc + " = " + scalars.reduceIdentity(kind, type) + ";");
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  emitGroupLoop(block, bounds, plan, "tcc_lane", str(team), [&] {
    emitBlock(block, false);
    line(acc + " = " + combine(kind, type, acc, scalars.name(yielded)) + ";");
  });
  teamCombine({{accType, acc}}, [&](const std::vector<std::string> &other) {
    line(acc + " = " + combine(kind, type, acc, other[0]) + ";");
  });
  std::string result = scalars.fresh("v");
  line("const " + scalars.computeType(type) + " " + result + " = " +
       scalars.reduceResult(kind, type, acc) + ";");
  scalars.bind(op.getResult(), result);
}

void CudaKernelEmitter::emitSplitArgReduce(tk::ArgReduceOp op) {
  Block &block = op.getBody().front();
  Value yielded = cast<tk::YieldOp>(block.getTerminator()).getValues()[0];
  Type type = yielded.getType();
  bool largest = op.getKind() == ReduceKind::Max, last = op.getSelectLastIndex();
  SmallVector<Extent> bound = loopExtents(op);
  LoopPlan plan = planLoop(op, block, bound, facts, true);
  std::string result = scalars.fresh("v");
  std::string best = result + "_best", at = result + "_at", t = scalars.computeType(type);
  line("// tk.arg_reduce " + stringifyReduceKind(op.getKind()).str() + " " + boundsString(bound) +
       (last ? " (last index)" : "") + " (split across the team" + vecNote(plan) + ")");
  // Each thread sees its positions in increasing order, so the sequential tie rule holds per
  // thread; across threads, ties go to the lower (or, last index, the higher) position.
  line("int64_t " + at + " = -1;");
  line(t + " " + best + " = (" + t + ")0;");
  emitGroupLoop(block, bound, plan, "tcc_lane", str(team), [&] {
    emitBlock(block, false);
    std::string y = scalars.name(yielded), j = scalars.name(block.getArgument(0));
    std::string better = scalars.argReplaces(type, largest, last, y, best);
    open("if (" + at + " < 0 || " + better + ")");
    line(best + " = " + y + ";");
    line(at + " = " + j + ";");
    close();
  });
  teamCombine({{t, best}, {"int64_t", at}}, [&](const std::vector<std::string> &other) {
    std::string tie = other[1] + (last ? " > " : " < ") + at;
    open("if (" + other[1] + " >= 0 && (" + at + " < 0 || " +
         scalars.moreExtreme(type, largest, other[0], best) + " || (!" +
         scalars.moreExtreme(type, largest, best, other[0]) + " && " + tie + ")))");
    line(best + " = " + other[0] + ";");
    line(at + " = " + other[1] + ";");
    close();
  });
  line("const int64_t " + result + " = " + at + " < 0 ? 0 : " + at + ";");
  scalars.bind(op.getResult(), result);
}

/// The index type of a loop over `plan`'s groups: 32-bit where the iteration count allows
/// (64-bit division is slow).
static std::string loopIndexType(const LoopPlan &plan) {
  int64_t total = 0;
  if (__builtin_mul_overflow(plan.groups.max, (int64_t)plan.vec, &total))
    total = INT64_MAX;
  return total < (1ll << 31) - (1ll << 24) ? "uint32_t" : "uint64_t";
}

void CudaKernelEmitter::emitGroupLoop(Block &block, ArrayRef<Extent> bounds,
                                      const LoopPlan &plan, const std::string &start,
                                      const std::string &stride,
                                      const std::function<void()> &perLane) {
  size_t n = bounds.size();
  std::string uint = loopIndexType(plan);
  std::string g = scalars.fresh("tcc_g");
  std::vector<std::string> idx = bindIndices(block, n);
  open("for (" + uint + " " + g + " = " + start + "; " + g + " < " + count(plan.groups, uint) +
       "; " + g + " += " + stride + ")");
  if (n == 0) {
    perLane();
    close();
    return;
  }
  size_t outerDims = n - plan.merged;
  Extent groupsPerRow =
      plan.vec == 1 ? plan.inner : Extent::of(llvm::divideCeil(plan.inner.factor, plan.vec));
  bool splitRows = !groupsPerRow.isStatic() || groupsPerRow.factor > 1;
  if (outerDims > 0) {
    std::string rest = g;
    if (splitRows) {
      rest = scalars.fresh("tcc_r");
      line("const " + uint + " " + rest + " = " + g + " / " + count(groupsPerRow, uint) + ";");
    }
    for (size_t j = 0; j < outerDims; ++j) {
      size_t d = outerDims - 1 - j;
      if (bounds[d].isOne()) {
        scalars.bind(block.getArgument(d), "0");
        continue;
      }
      if (d == 0) {
        line("const int64_t " + idx[d] + " = (int64_t)" + rest + ";");
        break;
      }
      line("const int64_t " + idx[d] + " = (int64_t)(" + rest + " % " + count(bounds[d], uint) +
           ");");
      std::string next = scalars.fresh("tcc_r");
      line("const " + uint + " " + next + " = " + rest + " / " + count(bounds[d], uint) + ";");
      rest = next;
    }
  }
  std::string first = scalars.fresh("tcc_f");
  std::string inGroup = outerDims > 0 && splitRows
                            ? "(" + g + " % " + count(groupsPerRow, uint) + ")"
                        : outerDims > 0 ? "0"
                                        : g;
  line("const " + uint + " " + first + " = " + inGroup +
       (plan.vec > 1 ? " * " + str(plan.vec) : "") + ";");
  if (plan.tail) {
    open("if (" + first + " + " + str(plan.vec) + " <= " + count(plan.inner) + ")");
    emitLanes(block, bounds, plan, uint, first, true, perLane);
    --depth;
    line("} else {");
    ++depth;
    emitLanes(block, bounds, plan, uint, first, false, perLane);
    close();
  } else {
    emitLanes(block, bounds, plan, uint, first, true, perLane);
  }
  close();
}

void CudaKernelEmitter::emitLanes(Block &block, ArrayRef<Extent> bounds, const LoopPlan &plan,
                                  const std::string &uint, const std::string &first, bool vectors,
                                  const std::function<void()> &perLane) {
  size_t n = bounds.size();
  // Binds the merged dims from the flat position `flat` within them.
  auto bindMerged = [&](const std::string &flat) {
    std::string rest = flat;
    for (size_t j = 0; j < plan.merged; ++j) {
      size_t d = n - 1 - j;
      std::string name = scalars.fresh("i");
      scalars.bind(block.getArgument(d), name);
      if (j + 1 == plan.merged) {
        line("const int64_t " + name + " = (int64_t)" + rest + ";");
        break;
      }
      line("const int64_t " + name + " = (int64_t)(" + rest + " % " + count(bounds[d], uint) +
           ");");
      std::string next = scalars.fresh("tcc_r");
      line("const " + uint + " " + next + " = " + rest + " / " + count(bounds[d], uint) + ";");
      rest = next;
    }
  };
  if (plan.vec == 1) {
    bindMerged(first);
    perLane();
    return;
  }
  std::vector<Operation *> slots;
  if (vectors) {
    // In program order (the map's order depends on pointers): the same source every time.
    for (Operation &access : block.without_terminator()) {
      auto found = plan.vectorized.find(&access);
      if (found == plan.vectorized.end())
        continue;
      Operation *op = &access;
      unsigned width = found->second;
      auto [memref, indices] = accessOf(op);
      std::string storage = scalars.storageType(cast<MemRefType>(memref.getType()).getElementType());
      std::string name = scalars.fresh("tcc_v");
      line("tcc_vec<" + storage + ", " + str(width) + "> " + name + "[" +
           str(plan.vec / width) + "];");
      vectorSlots[op] = {name, width, storage};
      slots.push_back(op);
    }
  }
  std::string l = scalars.fresh("tcc_l");
  line("#pragma unroll");
  open("for (int " + l + " = 0; " + l + " < " + str(plan.vec) + "; ++" + l + ")");
  std::string flat = scalars.fresh("tcc_f");
  line("const " + uint + " " + flat + " = " + first + " + " + l + ";");
  if (!vectors)
    open("if (" + flat + " < " + count(plan.inner) + ")");
  bindMerged(flat);
  std::string savedLane = lane;
  lane = vectors && !slots.empty() ? l : "";
  perLane();
  lane = savedLane;
  if (!vectors)
    close();
  close();
  for (Operation *op : slots)
    vectorSlots.erase(op);
}

// ---- The kernel ----------------------------------------------------------------------------------

CudaKernel CudaKernelEmitter::emit() {
  std::string name = fn.getSymName().str();
  bool valid = !name.empty() && !std::isdigit((unsigned char)name[0]);
  for (char c : name)
    valid = valid && (std::isalnum((unsigned char)c) || c == '_');
  if (!valid)
    throw Error("tk codegen: kernel name '" + name + "' is not a C identifier");
  if (fn.isExternal())
    throw Error("tk codegen: kernel '" + name + "' has no body");

  // Buffers: typed restrict pointers; const where the kernel never stores to them.
  fn.walk([&](Operation *op) {
    if (auto load = dyn_cast<tk::LoadOp>(op))
      facts.loaded.insert(load.getMemref());
    if (auto store = dyn_cast<tk::StoreOp>(op))
      facts.stored.insert(store.getMemref());
  });
  std::vector<std::string> params;
  std::string argNotes, symbolLocals;
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type)
      throw Error("tk codegen: argument " + str(i) + " of kernel '" + name +
                  "' is not a buffer");
    bool written = facts.stored.contains(arg);
    unsigned align = i < options.argAlignment.size() ? options.argAlignment[i]
                                                     : options.defaultAlignment;
    facts.argIndex[arg] = i;
    facts.alignment.push_back(std::max(1u, align));
    std::string ptr = "arg" + str(i);
    params.push_back(std::string(written ? "" : "const ") +
                     scalars.storageType(type.getElementType()) + " *__restrict__ " + ptr);
    argNotes += "// arg " + str(i) + ": " + typeString(type) + (written ? " (written)" : " (read)") +
                ", " + str(align) + "-byte aligned\n";
    pointers[arg] = ptr;
    if (fn.getArgAttr(i, tk::kSymbolsArgAttr))
      symbolLocals += ScalarEmitter::symbolLocals(fn, ptr);
  }

  chooseLayout();
  Block &fnBody = fn.getBody().front();
  uint32_t threads = 1;
  switch (strategy) {
  case Strategy::Serial:
    open("if (blockIdx.x == 0 && threadIdx.x == 0)");
    emitBlock(fnBody, false);
    close();
    break;
  case Strategy::Pointwise:
  case Strategy::Thread: {
    if (!outer) { // a small whole-tensor reduction: one thread
      open("if (blockIdx.x == 0 && threadIdx.x == 0)");
      emitBlock(fnBody, false);
      close();
      break;
    }
    for (Operation &op : fnBody.without_terminator())
      if (&op != outer.getOperation())
        emitOp(&op, false);
    int64_t groups = outerPlan.groups.max;
    threads = (uint32_t)std::min<int64_t>(kBlockThreads, std::max<int64_t>(32, pow2Ceil(groups)));
    gridX = std::min<uint64_t>(kMaxGridBlocks, llvm::divideCeil((uint64_t)groups, threads));
    if (!outerPlan.groups.isStatic() && outerPlan.groups.sym) {
      gridWork = outerPlan.groups.sym->str();
      workPerBlock = threads;
    }
    SmallVector<Extent> bounds = loopExtents(outer);
    line("// tk.parallel " + boundsString(bounds) + " (" +
         (strategy == Strategy::Pointwise ? "one thread per group" : "one thread per iteration") +
         vecNote(outerPlan) + ")");
    std::string uint = loopIndexType(outerPlan);
    emitGroupLoop(*teamBlock, bounds, outerPlan,
                  "(" + uint + ")blockIdx.x * blockDim.x + threadIdx.x",
                  "(" + uint + ")gridDim.x * blockDim.x", [&] { emitBlock(*teamBlock, false); });
    blockX = threads;
    break;
  }
  case Strategy::Row:
  case Strategy::Column: {
    bool row = strategy == Strategy::Row;
    uint32_t teamsPerBlock = row ? blockX / team : blockX;
    threads = blockX * blockY;
    gridX = std::min<uint64_t>(kMaxGridBlocks, llvm::divideCeil(teams, teamsPerBlock));
    clamped = teamsExtent.isStatic() ? teams % teamsPerBlock != 0 : teamsPerBlock > 1;
    if (outer && !teamsExtent.isStatic() && teamsExtent.sym) {
      gridWork = teamsExtent.sym->str();
      workPerBlock = teamsPerBlock;
    }
    uint64_t threadSlots = 0;
    std::string uint = !__builtin_mul_overflow(teams, (uint64_t)threads, &threadSlots) &&
                               threadSlots < (1ull << 31)
                           ? "uint32_t"
                           : "uint64_t";
    line("const uint32_t tcc_lane = " +
         std::string(row ? (team == blockX ? "threadIdx.x" : "threadIdx.x % " + str(team))
                         : "threadIdx.y") +
         ";");
    for (Operation &op : fnBody.without_terminator())
      if (outer && &op != outer.getOperation())
        emitOp(&op, false);
    if (outer) {
      std::string slot = teamsPerBlock == 1 ? "" : row ? " + threadIdx.x / " + str(team) : " + threadIdx.x";
      SmallVector<Extent> bounds = loopExtents(outer);
      std::string teamCount = count(teamsExtent, uint);
      line("// tk.parallel " + boundsString(bounds) + " (" +
           (teamsExtent.isStatic() ? str(teams) : "up to " + str(teams)) + " teams of " +
           str(team) + (row ? " consecutive threads" : " threads of a column") + ", " +
           str(teamsPerBlock) + " per block)");
      open("for (" + uint + " tcc_base = (" + uint + ")blockIdx.x * " + str(teamsPerBlock) +
           "; tcc_base < " + teamCount + "; tcc_base += (" + uint + ")gridDim.x * " +
           str(teamsPerBlock) + ")");
      if (clamped) {
        // Teams past the end repeat the last iteration (every thread must reach the team's
        // shuffles and barriers) and store nothing.
        line("const bool tcc_active = tcc_base" + slot + " < " + teamCount + ";");
        line("const " + uint + " tcc_team = tcc_active ? tcc_base" + slot + " : " +
             (teamsExtent.isStatic() ? str(teams - 1) : teamCount + " - 1") + ";");
      } else if (!teamsExtent.isOne()) {
        line("const " + uint + " tcc_team = tcc_base" + slot + ";");
      }
      std::vector<std::string> idx = bindIndices(*teamBlock, bounds.size());
      std::string rest = "tcc_team";
      for (size_t j = 0; j < bounds.size(); ++j) {
        size_t d = bounds.size() - 1 - j;
        if (bounds[d].isOne()) {
          scalars.bind(teamBlock->getArgument(d), "0");
          continue;
        }
        if (d == 0 || productOf(ArrayRef<Extent>(bounds).take_front(d)).isOne()) {
          line("const int64_t " + idx[d] + " = (int64_t)" + rest + ";");
          for (size_t e = 0; e < d; ++e)
            scalars.bind(teamBlock->getArgument(e), "0");
          break;
        }
        line("const int64_t " + idx[d] + " = (int64_t)(" + rest + " % " + count(bounds[d], uint) +
             ");");
        std::string next = scalars.fresh("tcc_r");
        line("const " + uint + " " + next + " = " + rest + " / " + count(bounds[d], uint) + ";");
        rest = next;
      }
    }
    size_t leaderAt = body.size();
    int leaderDepth = depth;
    emitBlock(*teamBlock, true);
    if (usesLeader)
      body.insert(leaderAt, std::string(2 * leaderDepth, ' ') +
                                "const bool tcc_leader = tcc_lane == 0" +
                                (clamped ? " && tcc_active" : "") + ";\n");
    if (outer)
      close();
    break;
  }
  }

  CudaKernel out;
  out.name = name;
  out.launch.grid = {(uint32_t)std::max<uint64_t>(gridX, 1), 1, 1};
  out.launch.block = {std::max(blockX, 1u), std::max(blockY, 1u), 1};
  out.launch.sharedBytes = sharedBytes;
  out.launch.gridWork = gridWork;
  out.launch.workPerBlock = workPerBlock;
  threads = out.launch.block[0] * out.launch.block[1];
  switch (strategy) {
  case Strategy::Pointwise: out.strategy = "pointwise"; break;
  case Strategy::Row: out.strategy = "row team=" + str(team); break;
  case Strategy::Column: out.strategy = "column team=" + str(team); break;
  case Strategy::Thread: out.strategy = "thread"; break;
  case Strategy::Serial: out.strategy = "serial (" + strategyNote + ")"; break;
  }
  if (outerPlan.vec > 1)
    out.strategy += " vec=" + str(outerPlan.vec);

  std::string src = scalars.prelude();
  src += "\n// tk.kernel @" + name + ": " + out.strategy + "; launch grid [" +
         str(out.launch.grid[0]) + ", 1, 1], block [" + str(out.launch.block[0]) + ", " +
         str(out.launch.block[1]) + ", 1], " + str(sharedBytes) + " bytes of shared memory\n";
  src += argNotes;
  src += "TCC_EXPORT void __launch_bounds__(" + str(threads) + ") " + name + "(";
  for (size_t i = 0; i < params.size(); ++i)
    src += (i ? ", " : "") + params[i];
  src += ") {\n";
  if (sharedBytes)
    src += "  extern __shared__ __align__(16) unsigned char tcc_smem[];\n";
  src += symbolLocals;
  for (const std::string &declaration : scalars.sizeDeclarations())
    src += "  " + declaration + "\n";
  src += body;
  src += "}\n";
  out.source = std::move(src);
  return out;
}

} // namespace

unsigned tcc::codegen::cudaBufferAlignment(Value buffer) {
  Operation *def = buffer.getDefiningOp();
  if (!def || isa<tk::AllocOp, memref::GetGlobalOp>(def))
    return kVectorBytes; // program arguments (runtime contract), arena offsets, constants
  if (auto view = dyn_cast<tk::ViewOp>(def)) {
    unsigned source = cudaBufferAlignment(view.getSource());
    uint64_t offset = (uint64_t)view.getByteOffset();
    return offset == 0 ? source : (unsigned)std::gcd<uint64_t>(source, offset);
  }
  auto type = cast<MemRefType>(buffer.getType());
  return elementBytes(type.getElementType());
}

CudaKernel tcc::codegen::emitCudaKernel(func::FuncOp kernel, const CudaEmitOptions &options) {
  return CudaKernelEmitter(kernel, options).emit();
}

std::vector<unsigned> tcc::codegen::cudaArgumentAlignments(func::FuncOp kernel) {
  std::vector<unsigned> align(kernel.getNumArguments(), kVectorBytes);
  auto module = kernel->getParentOfType<ModuleOp>();
  if (!module)
    return align;
  auto uses = SymbolTable::getSymbolUses(kernel, module);
  if (!uses)
    return align;
  for (const SymbolTable::SymbolUse &use : *uses)
    if (auto launch = dyn_cast<tk::LaunchOp>(use.getUser()))
      for (auto [i, arg] : llvm::enumerate(launch.getArgs()))
        if (i < align.size())
          align[i] = std::min(align[i], cudaBufferAlignment(arg));
  return align;
}
