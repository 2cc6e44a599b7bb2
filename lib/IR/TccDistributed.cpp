//===- TccDistributed.cpp - Meshes, shardings and collective ops -------------===//
#include "tcc/IR/Sharding.h"
#include "tcc/Support/MeshGeometry.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc {

//===--- #tcc.mesh ------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &p, Type) {
  SmallVector<StringAttr> axes;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (p.parseKeywordOrString(&name) || p.parseEqual() || p.parseInteger(size))
      return failure();
    axes.push_back(StringAttr::get(p.getContext(), name));
    sizes.push_back(size);
    return success();
  };
  if (p.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater, parseAxis))
    return {};
  return p.getChecked<MeshAttr>(p.getContext(), axes, sizes);
}

void MeshAttr::print(AsmPrinter &p) const {
  p << "<";
  llvm::interleaveComma(llvm::zip(getAxes(), getSizes()), p, [&](auto axis) {
    p << std::get<0>(axis).getValue() << " = " << std::get<1>(axis);
  });
  p << ">";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axes, ArrayRef<int64_t> sizes) {
  if (axes.empty())
    return emitError() << "a mesh needs at least one axis";
  if (axes.size() != sizes.size())
    return emitError() << "a mesh needs one size per axis";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i] < 1)
      return emitError() << "mesh axis '" << axes[i].getValue() << "' has size " << sizes[i]
                         << "; sizes must be >= 1";
    for (size_t j = 0; j < i; ++j)
      if (axes[j] == axes[i])
        return emitError() << "mesh axis '" << axes[i].getValue() << "' appears twice";
  }
  return success();
}

int MeshAttr::axisIndex(StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    if (axis.getValue() == name)
      return (int)i;
  return -1;
}

int64_t MeshAttr::numRanks() const {
  int64_t n = 1;
  for (int64_t s : getSizes())
    n *= s;
  return n;
}

int64_t MeshAttr::groupSize(ArrayRef<StringRef> names) const {
  int64_t n = 1;
  for (StringRef name : names)
    n *= getSizes()[axisIndex(name)];
  return n;
}

//===--- #tcc.sharding --------------------------------------------------------===//

namespace {

ParseResult parseAxisList(AsmParser &p, SmallVectorImpl<Attribute> &axes) {
  return p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    std::string name;
    if (p.parseKeywordOrString(&name))
      return failure();
    axes.push_back(StringAttr::get(p.getContext(), name));
    return success();
  });
}

void printAxisList(AsmPrinter &p, ArrayAttr axes) {
  p << "[";
  llvm::interleaveComma(axes.getAsRange<StringAttr>(), p,
                        [&](StringAttr a) { p << a.getValue(); });
  p << "]";
}

} // namespace

Attribute ShardingAttr::parse(AsmParser &p, Type) {
  MLIRContext *ctx = p.getContext();
  SmallVector<Attribute> dims, partial;
  if (p.parseLess() ||
      p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        SmallVector<Attribute> axes;
        if (parseAxisList(p, axes))
          return failure();
        dims.push_back(ArrayAttr::get(ctx, axes));
        return success();
      }))
    return {};
  if (succeeded(p.parseOptionalKeyword("partial")) && parseAxisList(p, partial))
    return {};
  if (p.parseGreater())
    return {};
  return ShardingAttr::get(ctx, ArrayAttr::get(ctx, dims), ArrayAttr::get(ctx, partial));
}

void ShardingAttr::print(AsmPrinter &p) const {
  p << "<[";
  llvm::interleaveComma(getDims().getAsRange<ArrayAttr>(), p,
                        [&](ArrayAttr axes) { printAxisList(p, axes); });
  p << "]";
  if (!getPartial().empty()) {
    p << " partial ";
    printAxisList(p, getPartial());
  }
  p << ">";
}

//===--- Mesh geometry --------------------------------------------------------===//

MeshAttr meshOf(Operation *op) {
  for (Operation *o = op; o; o = o->getParentOp())
    if (auto module = dyn_cast<ModuleOp>(o))
      if (auto mesh = module->getAttrOfType<MeshAttr>(TccDialect::kMeshAttrName))
        return mesh;
  return {};
}

namespace {
std::vector<int64_t> sizesOf(MeshAttr mesh) {
  return std::vector<int64_t>(mesh.getSizes().begin(), mesh.getSizes().end());
}
} // namespace

SmallVector<int64_t> meshCoordinates(MeshAttr mesh, int64_t rank) {
  std::vector<int64_t> coords = mesh::coordinates(sizesOf(mesh), rank);
  return SmallVector<int64_t>(coords.begin(), coords.end());
}

int64_t rankAt(MeshAttr mesh, ArrayRef<int64_t> coords) {
  return mesh::rankAt(sizesOf(mesh), std::vector<int64_t>(coords.begin(), coords.end()));
}

CollectiveGroup collectiveGroup(MeshAttr mesh, ArrayRef<int> axes, int64_t rank) {
  CollectiveGroup group;
  std::vector<int64_t> ranks = mesh::groupRanks(sizesOf(mesh), axes, rank);
  group.ranks.assign(ranks.begin(), ranks.end());
  group.position = mesh::positionOver(sizesOf(mesh), axes, rank);
  return group;
}

FailureOr<SmallVector<int>> axisIndices(MeshAttr mesh, ArrayAttr names, std::string &error) {
  SmallVector<int> axes;
  for (Attribute a : names) {
    auto name = dyn_cast<StringAttr>(a);
    int index = name ? mesh.axisIndex(name.getValue()) : -1;
    if (index < 0) {
      llvm::raw_string_ostream os(error);
      os << "names mesh axis " << a << ", which the mesh " << mesh << " lacks";
      return failure();
    }
    if (llvm::is_contained(axes, index)) {
      error = "names mesh axis '" + name.getValue().str() + "' twice";
      return failure();
    }
    axes.push_back(index);
  }
  return axes;
}

//===--- DimSharding ----------------------------------------------------------===//

bool DimSharding::isReplicated() const {
  return partial.empty() && llvm::all_of(dims, [](const auto &d) { return d.empty(); });
}

bool DimSharding::uses(int axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const auto &d) { return llvm::is_contained(d, axis); });
}

int64_t DimSharding::splits(MeshAttr mesh, int64_t d) const {
  int64_t n = 1;
  for (int a : dims[d])
    n *= mesh.getSizes()[a];
  return n;
}

SmallVector<int64_t> DimSharding::localShape(MeshAttr mesh, ArrayRef<int64_t> global) const {
  SmallVector<int64_t> local(global);
  for (size_t d = 0; d < local.size(); ++d)
    local[d] /= splits(mesh, d);
  return local;
}

int64_t DimSharding::blockOffset(MeshAttr mesh, ArrayRef<int64_t> global, int64_t d,
                                 int64_t rank) const {
  return mesh::positionOver(sizesOf(mesh), dims[d], rank) * (global[d] / splits(mesh, d));
}

ShardingAttr DimSharding::toAttr(MeshAttr mesh) const {
  MLIRContext *ctx = mesh.getContext();
  auto names = [&](ArrayRef<int> axes) {
    SmallVector<Attribute> out;
    for (int a : axes)
      out.push_back(mesh.getAxes()[a]);
    return ArrayAttr::get(ctx, out);
  };
  SmallVector<Attribute> d;
  for (const auto &axes : dims)
    d.push_back(names(axes));
  return ShardingAttr::get(ctx, ArrayAttr::get(ctx, d), names(partial));
}

FailureOr<DimSharding> DimSharding::fromAttr(ShardingAttr attr, MeshAttr mesh,
                                             ArrayRef<int64_t> shape, std::string &error) {
  llvm::raw_string_ostream os(error);
  if ((int64_t)attr.getDims().size() != (int64_t)shape.size()) {
    os << "sharding " << attr << " has " << attr.getDims().size()
       << " dims but the value has rank " << shape.size();
    return failure();
  }
  DimSharding s;
  SmallVector<int> all;
  auto collect = [&](ArrayAttr names, SmallVector<int, 2> &into) -> LogicalResult {
    std::string e;
    auto axes = axisIndices(mesh, names, e);
    if (failed(axes)) {
      os << "sharding " << attr << " " << e;
      return failure();
    }
    for (int a : *axes) {
      if (llvm::is_contained(all, a)) {
        os << "sharding " << attr << " uses mesh axis '" << mesh.getAxes()[a].getValue()
           << "' twice";
        return failure();
      }
      all.push_back(a);
      into.push_back(a);
    }
    return success();
  };
  s.dims.resize(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    auto names = dyn_cast<ArrayAttr>(attr.getDims()[d]);
    if (!names || failed(collect(names, s.dims[d])))
      return failure();
    int64_t n = s.splits(mesh, d);
    if (shape[d] % n != 0) {
      os << "sharding " << attr << " splits dim " << d << " (size " << shape[d] << ") into " << n
         << " blocks, which does not divide it";
      return failure();
    }
  }
  if (failed(collect(attr.getPartial(), s.partial)))
    return failure();
  return s;
}

std::string DimSharding::str(MeshAttr mesh) const {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << toAttr(mesh);
  StringRef text(out);
  text.consume_front("#tcc.sharding<");
  text.consume_back(">");
  return text.str();
}

//===--- Dialect attribute verification --------------------------------------===//

LogicalResult TccDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == kMeshAttrName) {
    if (!isa<ModuleOp>(op) || !isa<MeshAttr>(attr.getValue()))
      return op->emitError() << "'" << kMeshAttrName << "' must be a #tcc.mesh on a module";
    return success();
  }
  if (attr.getName() == kRecomputedAttrName || attr.getName() == kLayoutCopyAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << attr.getName().getValue() << "' is a unit attribute";
    return success();
  }
  if (attr.getName() == kMicroBatchAttrName || attr.getName() == kForwardIndexAttrName ||
      attr.getName() == kBackwardOfAttrName) {
    auto m = dyn_cast<IntegerAttr>(attr.getValue());
    if (!m || m.getInt() < 0)
      return op->emitError() << "'" << attr.getName().getValue() << "' is a non-negative integer";
    return success();
  }
  if (attr.getName() == kSymbolsAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !dict)
      return op->emitError() << "'" << kSymbolsAttrName << "' must be a dictionary on a module";
    for (NamedAttribute entry : dict) {
      auto range = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
      if (!SymExpr::parse(entry.getName().getValue()) ||
          SymExpr::parse(entry.getName().getValue())->symbolName() != entry.getName().str())
        return op->emitError() << "size symbol '" << entry.getName().getValue()
                               << "' is not an identifier";
      if (!range || range.size() != 2 || range[0] < 0 || range[0] > range[1])
        return op->emitError() << "size symbol '" << entry.getName().getValue()
                               << "' needs a range array<i64: MIN, MAX> with 0 <= MIN <= MAX";
    }
    return success();
  }
  return op->emitError() << "unknown tcc attribute '" << attr.getName().getValue() << "'";
}

static LogicalResult verifyValueSharding(Operation *op, NamedAttribute attr, Type type,
                                         StringRef what) {
  if (attr.getName() != TccDialect::kShardingAttrName)
    return op->emitError() << "unknown tcc attribute '" << attr.getName().getValue() << "' on "
                           << what;
  auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!sharding || !tensor)
    return op->emitError() << "'" << TccDialect::kShardingAttrName
                           << "' must be a #tcc.sharding on a ranked tensor " << what;
  MeshAttr mesh = meshOf(op);
  if (!mesh)
    return op->emitError() << what << " has a sharding but the module has no '"
                           << TccDialect::kMeshAttrName << "'";
  std::string error;
  if (failed(DimSharding::fromAttr(sharding, mesh, tensor.getShape(), error)))
    return op->emitError() << what << ": " << error;
  return success();
}

LogicalResult TccDialect::verifyRegionArgAttribute(Operation *op, unsigned region, unsigned index,
                                                   NamedAttribute attr) {
  Block &entry = op->getRegion(region).front();
  return verifyValueSharding(op, attr, entry.getArgument(index).getType(),
                             "argument " + std::to_string(index));
}

LogicalResult TccDialect::verifyRegionResultAttribute(Operation *op, unsigned, unsigned index,
                                                      NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << "tcc result attributes belong on functions";
  return verifyValueSharding(op, attr, func.getResultTypes()[index],
                             "result " + std::to_string(index));
}

bool isCollective(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, BroadcastOp, SendOp, RecvOp>(op);
}

//===--- Collective ops -------------------------------------------------------===//

namespace {

/// Checks `axes` against the module's mesh; sets `groupSize`.
LogicalResult verifyAxes(Operation *op, ArrayAttr axes, int64_t &groupSize) {
  MeshAttr mesh = meshOf(op);
  if (!mesh)
    return op->emitOpError("needs a module with a '") << TccDialect::kMeshAttrName << "'";
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  std::string error;
  auto indices = axisIndices(mesh, axes, error);
  if (failed(indices))
    return op->emitOpError(error);
  groupSize = 1;
  for (int a : *indices)
    groupSize *= mesh.getSizes()[a];
  return success();
}

LogicalResult verifyDim(Operation *op, StringRef name, int64_t dim, Type type) {
  int64_t rank = cast<RankedTensorType>(type).getRank();
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << name << " " << dim << " is out of range for rank " << rank;
  return success();
}

LogicalResult verifyKind(Operation *op, CollectiveReduceKind kind, Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (kind == CollectiveReduceKind::Avg && !isa<FloatType>(element))
    return op->emitOpError("'avg' needs a float operand");
  if (element.isInteger(1) && kind == CollectiveReduceKind::Sum)
    return op->emitOpError("'sum' needs a numeric operand");
  return success();
}

/// The operand's type with dim `dim` multiplied by `mul` and divided by `div`.
RankedTensorType resized(Type type, int64_t dim, int64_t mul, int64_t div) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = shape[dim] * mul / div;
  return RankedTensorType::get(shape, t.getElementType());
}

LogicalResult verifyResult(Operation *op, Type expected, StringRef why) {
  if (op->getResult(0).getType() != expected)
    return op->emitOpError("result must be ")
           << expected << " (" << why << "), got " << op->getResult(0).getType();
  return success();
}

LogicalResult verifyDivisible(Operation *op, Type type, int64_t dim, int64_t groupSize) {
  int64_t size = cast<RankedTensorType>(type).getDimSize(dim);
  if (size % groupSize != 0)
    return op->emitOpError() << "dim " << dim << " (size " << size
                             << ") is not divisible by the group size " << groupSize;
  return success();
}

LogicalResult verifyPeer(Operation *op, StringAttr axis, int64_t peer) {
  int64_t size;
  if (failed(verifyAxes(op, ArrayAttr::get(op->getContext(), {axis}), size)))
    return failure();
  if (peer < 0 || peer >= size)
    return op->emitOpError() << "peer " << peer << " is outside mesh axis '" << axis.getValue()
                             << "' of size " << size;
  return success();
}

int64_t groupSizeOf(Operation *op, ArrayAttr axes) {
  MeshAttr mesh = meshOf(op);
  SmallVector<StringRef> names;
  for (auto a : axes.getAsRange<StringAttr>())
    names.push_back(a.getValue());
  return mesh ? mesh.groupSize(names) : 1;
}

} // namespace

int64_t AllReduceOp::getGroupSize() { return groupSizeOf(*this, getAxes()); }
int64_t AllGatherOp::getGroupSize() { return groupSizeOf(*this, getAxes()); }
int64_t ReduceScatterOp::getGroupSize() { return groupSizeOf(*this, getAxes()); }
int64_t AllToAllOp::getGroupSize() { return groupSizeOf(*this, getAxes()); }
int64_t BroadcastOp::getGroupSize() { return groupSizeOf(*this, getAxes()); }
int64_t SendOp::getGroupSize() { return 2; }
int64_t RecvOp::getGroupSize() { return 2; }

LogicalResult AllReduceOp::verify() {
  int64_t n;
  if (failed(verifyAxes(*this, getAxes(), n)))
    return failure();
  return verifyKind(*this, getKind(), getX().getType());
}

LogicalResult AllGatherOp::verify() {
  int64_t n;
  if (failed(verifyAxes(*this, getAxes(), n)) ||
      failed(verifyDim(*this, "dim", getDim(), getX().getType())))
    return failure();
  return verifyResult(*this, resized(getX().getType(), getDim(), n, 1),
                      "dim " + std::to_string(getDim()) + " times the group size " +
                          std::to_string(n));
}

LogicalResult ReduceScatterOp::verify() {
  int64_t n;
  if (failed(verifyAxes(*this, getAxes(), n)) ||
      failed(verifyKind(*this, getKind(), getX().getType())) ||
      failed(verifyDim(*this, "dim", getDim(), getX().getType())) ||
      failed(verifyDivisible(*this, getX().getType(), getDim(), n)))
    return failure();
  return verifyResult(*this, resized(getX().getType(), getDim(), 1, n),
                      "dim " + std::to_string(getDim()) + " divided by the group size " +
                          std::to_string(n));
}

LogicalResult AllToAllOp::verify() {
  int64_t n;
  Type x = getX().getType();
  if (failed(verifyAxes(*this, getAxes(), n)) ||
      failed(verifyDim(*this, "split_dim", getSplitDim(), x)) ||
      failed(verifyDim(*this, "concat_dim", getConcatDim(), x)) ||
      failed(verifyDivisible(*this, x, getSplitDim(), n)))
    return failure();
  return verifyResult(*this, resized(resized(x, getSplitDim(), 1, n), getConcatDim(), n, 1),
                      "split_dim divided by and concat_dim multiplied by the group size " +
                          std::to_string(n));
}

LogicalResult BroadcastOp::verify() {
  int64_t n;
  if (failed(verifyAxes(*this, getAxes(), n)))
    return failure();
  int64_t root = static_cast<int64_t>(getRoot());
  if (root < 0 || root >= n)
    return emitOpError() << "root " << root << " is outside the group of " << n << " ranks";
  return success();
}

LogicalResult AxisIndexOp::verify() {
  int64_t n;
  return verifyAxes(*this, getAxes(), n);
}

LogicalResult SendOp::verify() { return verifyPeer(*this, getAxisAttr(), getPeer()); }
LogicalResult RecvOp::verify() { return verifyPeer(*this, getAxisAttr(), getPeer()); }

} // namespace tcc

#define GET_ATTRDEF_CLASSES
#include "tcc/IR/TccAttrs.cpp.inc"

void tcc::TccDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tcc/IR/TccAttrs.cpp.inc"
      >();
}
