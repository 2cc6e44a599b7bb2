//===- TccBase.td - The tcc dialect, its types and enums --------------------===//
#ifndef TCC_BASE_TD
#define TCC_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Tcc_Dialect : Dialect {
  let name = "tcc";
  let cppNamespace = "::tcc";
  let summary = "The tcc graph dialect: a small core set of tensor ops with static or symbolic shapes";
  let description = [{
    Every ONNX operator is decomposed into these ops by the frontend. Each dim of a shape is
    static, or `?` with its size given as an expression of the module's size symbols by the
    type's `#tcc.dims` encoding (tcc/IR/SymbolicShape.h): `tensor<?x?x768xf32,
    #tcc.dims<["batch", "seq"]>>`. Element types are the builtin ones (i1 is bool, signless integers are signed, `ui*` are
    unsigned). Semantics are defined by the reference kernels in `tcc/Interp/Kernels.h`.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The module attribute holding the device mesh (#tcc.mesh).
    static constexpr ::llvm::StringLiteral kMeshAttrName = "tcc.mesh";
    /// The function argument/result attribute holding a value's sharding (#tcc.sharding).
    static constexpr ::llvm::StringLiteral kShardingAttrName = "tcc.sharding";
    /// The unit attribute on ops -tcc-remat added to recompute forward values in the backward
    /// pass (fusion keeps them apart from the forward ops they copy).
    static constexpr ::llvm::StringLiteral kRecomputedAttrName = "tcc.recomputed";
    /// The unit attribute on the transposes -tcc-layout leaves between channels-first and
    /// channels-last values (the layout copies the report counts).
    static constexpr ::llvm::StringLiteral kLayoutCopyAttrName = "tcc.layout";
    /// The i64 attribute on a micro-batched training step's forward and loss ops: which
    /// micro-batch they compute (tcc/Passes/Pipeline.h cuts them into pipeline stages). In a
    /// stage's program, an op's place in the stage's schedule (2m: the forward of micro-batch m,
    /// 2m+1: its backward), which fusion keeps apart.
    static constexpr ::llvm::StringLiteral kMicroBatchAttrName = "tcc.micro_batch";
    /// The i64 attribute on those forward ops: their place in their micro-batch's forward (the
    /// same for every micro-batch).
    static constexpr ::llvm::StringLiteral kForwardIndexAttrName = "tcc.forward_index";
    /// The i64 attribute autodiff sets on the ops of a vector-Jacobian product of an op with a
    /// forward index: that index (they also get its micro-batch).
    static constexpr ::llvm::StringLiteral kBackwardOfAttrName = "tcc.backward_of";
    /// The module attribute declaring the size symbols that symbolic dims read, each with its
    /// inclusive range: `tcc.symbols = {batch = array<i64: 1, 64>}` (tcc/IR/SymbolicShape.h).
    static constexpr ::llvm::StringLiteral kSymbolsAttrName = "tcc.symbols";
  private:
    void registerAttributes(); // lib/IR/TccDistributed.cpp
  public:
  }];
}

// The types tcc computes on, and the storage-only types (ONNX's float8 variants, 4- and 2-bit
// integers) that tensors may hold, move and cast (tcc::isStorageOnly): arithmetic ops take
// Tcc_ComputeTensor, so the verifier rejects them on storage-only values.
def Tcc_ComputeElementType : AnyTypeOf<[I1, I8, I16, I32, I64, UI8, UI16, UI32, UI64, F16, BF16,
                                        F32, F64]>;
def Tcc_StorageOnlyElementType : AnyTypeOf<[F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, I<4>, UI<4>,
                                            I<2>, UI<2>]>;
def Tcc_ElementType : AnyTypeOf<[Tcc_ComputeElementType, Tcc_StorageOnlyElementType]>;
// A ranked tensor whose dims are static, or `?` with a #tcc.dims encoding giving their sizes.
class Tcc_TensorOf<list<Type> allowed>
  : RankedTensorOf<allowed, [CPred<"::tcc::hasValidDims(::llvm::cast<::mlir::RankedTensorType>($_self))">],
                   "tensor with static or symbolic (#tcc.dims) dims">;
def Tcc_Tensor : Tcc_TensorOf<[Tcc_ElementType]>;
def Tcc_ComputeTensor : Tcc_TensorOf<[Tcc_ComputeElementType]>;
def Tcc_IndexTensor : Tcc_TensorOf<[I32, I64]>;
def Tcc_BoolTensor : Tcc_TensorOf<[I1]>;
def Tcc_IndexScalar : 0DTensorOf<[I32, I64]>;
def Tcc_BoolScalar : 0DTensorOf<[I1]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI1Type())">;
def Tcc_I64Scalar : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

class Tcc_Op<string mnemonic, list<Trait> traits = []> : Op<Tcc_Dialect, mnemonic, traits>;

// The enums mirror tcc::kernels (same names and order); see Kernels.h for their semantics.
def Tcc_UnaryKind : I32EnumAttr<"UnaryKind", "elementwise unary function", [
    I32EnumAttrCase<"Neg", 0, "neg">,
    I32EnumAttrCase<"Abs", 1, "abs">,
    I32EnumAttrCase<"Exp", 2, "exp">,
    I32EnumAttrCase<"Log", 3, "log">,
    I32EnumAttrCase<"Sqrt", 4, "sqrt">,
    I32EnumAttrCase<"Rsqrt", 5, "rsqrt">,
    I32EnumAttrCase<"Reciprocal", 6, "reciprocal">,
    I32EnumAttrCase<"Sin", 7, "sin">,
    I32EnumAttrCase<"Cos", 8, "cos">,
    I32EnumAttrCase<"Tan", 9, "tan">,
    I32EnumAttrCase<"Asin", 10, "asin">,
    I32EnumAttrCase<"Acos", 11, "acos">,
    I32EnumAttrCase<"Atan", 12, "atan">,
    I32EnumAttrCase<"Sinh", 13, "sinh">,
    I32EnumAttrCase<"Cosh", 14, "cosh">,
    I32EnumAttrCase<"Tanh", 15, "tanh">,
    I32EnumAttrCase<"Asinh", 16, "asinh">,
    I32EnumAttrCase<"Acosh", 17, "acosh">,
    I32EnumAttrCase<"Atanh", 18, "atanh">,
    I32EnumAttrCase<"Erf", 19, "erf">,
    I32EnumAttrCase<"Sigmoid", 20, "sigmoid">,
    I32EnumAttrCase<"Floor", 21, "floor">,
    I32EnumAttrCase<"Ceil", 22, "ceil">,
    I32EnumAttrCase<"Round", 23, "round">,
    I32EnumAttrCase<"Sign", 24, "sign">,
    I32EnumAttrCase<"Not", 25, "not">]> {
  let cppNamespace = "::tcc";
}
def Tcc_BinaryKind : I32EnumAttr<"BinaryKind", "elementwise binary function", [
    I32EnumAttrCase<"Add", 0, "add">,
    I32EnumAttrCase<"Sub", 1, "sub">,
    I32EnumAttrCase<"Mul", 2, "mul">,
    I32EnumAttrCase<"Div", 3, "div">,
    I32EnumAttrCase<"Rem", 4, "rem">,
    I32EnumAttrCase<"Pow", 5, "pow">,
    I32EnumAttrCase<"Max", 6, "max">,
    I32EnumAttrCase<"Min", 7, "min">,
    I32EnumAttrCase<"And", 8, "and">,
    I32EnumAttrCase<"Or", 9, "or">,
    I32EnumAttrCase<"Xor", 10, "xor">,
    I32EnumAttrCase<"ShiftLeft", 11, "shift_left">,
    I32EnumAttrCase<"ShiftRight", 12, "shift_right">]> {
  let cppNamespace = "::tcc";
}
def Tcc_CompareKind : I32EnumAttr<"CompareKind", "comparison", [
    I32EnumAttrCase<"Eq", 0, "eq">,
    I32EnumAttrCase<"Ne", 1, "ne">,
    I32EnumAttrCase<"Lt", 2, "lt">,
    I32EnumAttrCase<"Le", 3, "le">,
    I32EnumAttrCase<"Gt", 4, "gt">,
    I32EnumAttrCase<"Ge", 5, "ge">]> {
  let cppNamespace = "::tcc";
}
def Tcc_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Prod", 1, "prod">,
    I32EnumAttrCase<"Max", 2, "max">,
    I32EnumAttrCase<"Min", 3, "min">]> {
  let cppNamespace = "::tcc";
}
def Tcc_PadMode : I32EnumAttr<"PadMode", "padding mode", [
    I32EnumAttrCase<"Constant", 0, "constant">,
    I32EnumAttrCase<"Reflect", 1, "reflect">,
    I32EnumAttrCase<"Edge", 2, "edge">,
    I32EnumAttrCase<"Wrap", 3, "wrap">]> {
  let cppNamespace = "::tcc";
}
def Tcc_ScatterReduction : I32EnumAttr<"ScatterReduction", "scatter combination", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Add", 1, "add">,
    I32EnumAttrCase<"Mul", 2, "mul">,
    I32EnumAttrCase<"Max", 3, "max">,
    I32EnumAttrCase<"Min", 4, "min">]> {
  let cppNamespace = "::tcc";
}


def Tcc_CollectiveReduceKind : I32EnumAttr<"CollectiveReduceKind", "how a collective combines the group's tensors", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Avg", 1, "avg">,
    I32EnumAttrCase<"Max", 2, "max">,
    I32EnumAttrCase<"Min", 3, "min">]> {
  let cppNamespace = "::tcc";
}

//===--- Distribution: device mesh and shardings ------------------------------===//

class Tcc_Attr<string name, string attrMnemonic> : AttrDef<Tcc_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Tcc_DimsAttr : Tcc_Attr<"Dims", "dims"> {
  let summary = "the sizes of a tensor type's symbolic dims";
  let description = [{
    The encoding of a tensor type with `?` dims: one expression per `?` dim, in order, over the
    size symbols the module declares (`tcc.symbols`), in the text form of tcc::SymExpr:
    `tensor<?x12x?x64xf32, #tcc.dims<["batch", "seq + 1"]>>`. Types with equal dims are equal
    (the expressions are kept canonical).
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$exprs);
  let assemblyFormat = "`<` `[` $exprs `]` `>`";
}

def Tcc_MeshAttr : Tcc_Attr<"Mesh", "mesh"> {
  let summary = "a device mesh: named axes with sizes, ranks numbered row-major over them";
  let description = [{
    `#tcc.mesh<dp = 2, tp = 4>`: 8 ranks; rank r has coordinate (r / 4, r % 4). Set on the
    module as `tcc.mesh`; collectives and shardings name its axes.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$axes,
                        ArrayRefParameter<"int64_t">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Index of the axis named `name`, or -1.
    int axisIndex(::llvm::StringRef name) const;
    int64_t numRanks() const;
    /// The product of the sizes of the named axes (which must exist).
    int64_t groupSize(::llvm::ArrayRef<::llvm::StringRef> names) const;
  }];
}

def Tcc_ShardingAttr : Tcc_Attr<"Sharding", "sharding"> {
  let summary = "how a value is laid out over the mesh";
  let description = [{
    `#tcc.sharding<[[dp], [], [tp]]>` splits dim 0 into mesh-axis-`dp` many blocks (rank with
    `dp` coordinate i holds block i), keeps dim 1 whole and splits dim 2 over `tp`. A dim split
    over several axes (`[dp, tp]`) is split by their combined coordinate, the first axis major.
    `partial = [tp]` says each rank holds a summand: the value is the sum over the `tp` axis of
    what the ranks hold (a reduction still pending). An axis appears at most once. Axes not
    named anywhere replicate the value.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial);
  let hasCustomAssemblyFormat = 1;
}

#endif // TCC_BASE_TD
