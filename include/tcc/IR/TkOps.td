//===- TkOps.td - The tk dialect: kernel IR and compiled programs ---------===//
//
// Two levels live here, both on memrefs (buffers with static shapes, row-major, no strides):
//
// * Kernels: a `func.func` with the `tk.kernel` attribute whose arguments are the buffers it
//   reads and writes. Its body is a loop nest: `tk.parallel` (iterations independent),
//   `tk.reduce` / `tk.arg_reduce` (a combined value over an index space), `tk.for` (sequential,
//   with carried values), with scalar `tk.load`/`tk.store`, `tk.apply` for index arithmetic and
//   the scalar compute ops (`tk.unary`, `tk.binary`, ... with the graph dialect's kinds and
//   therefore the reference kernels' semantics). The CPU and CUDA emitters read this level.
//
// * Programs: a `func.func` with the `tk.program` attribute whose arguments are the graph's
//   inputs then its outputs (destination passing). Its body is the launch list: buffers
//   (`tk.alloc`, placed in one arena by `-tcc-plan-memory`; `memref.get_global` for constants;
//   `tk.view` for free reshapes), kernel launches (`tk.launch`), library calls (`tk.gemm`,
//   `tk.conv`, `tk.topk`) and copies (`tk.copy`). The artifact writer serialises this level.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_TK_OPS_TD
#define TCC_TK_OPS_TD

include "tcc/IR/TccBase.td"
include "tcc/IR/TkEnums.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/ViewLikeInterface.td"

def Tk_Dialect : Dialect {
  let name = "tk";
  let cppNamespace = "::tcc::tk";
  let summary = "tcc kernel IR (loop nests over buffers) and compiled programs (launch lists)";
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect"];
  let hasConstantMaterializer = 1;
}

class Tk_Op<string mnemonic, list<Trait> traits = []> : Op<Tk_Dialect, mnemonic, traits>;

// Scalars a kernel computes with: the graph dialect's element types, plus `index`.
def Tk_Scalar : AnyTypeOf<[Tcc_ElementType, Index]>;
// A contiguous row-major buffer. Its dims are static, or `?` with their sizes given by a
// #tcc.dims memory space (the graph dialect's size expressions, e.g.
// `memref<?x16xf32, #tcc.dims<["batch*seq"]>>`): a kernel reading such a buffer takes the
// program's symbol values (see tk.size).
def Tk_Buffer : Type<And<[MemRefOf<[Tcc_ElementType]>.predicate,
                          CPred<"::tcc::tk::isBufferType(::llvm::cast<::mlir::MemRefType>($_self))">]>,
                     "buffer with static or symbolic (#tcc.dims) dims", "::mlir::MemRefType">;

//===----------------------------------------------------------------------===//
// Kernel level: loops
//===----------------------------------------------------------------------===//

def Tk_YieldOp : Tk_Op<"yield", [Pure, Terminator,
                                 ParentOneOf<["ParallelOp", "ReduceOp", "ArgReduceOp", "ForOp"]>]> {
  let summary = "ends the body of a tk loop (with the reduced or carried values, if any)";
  let arguments = (ins Variadic<Tk_Scalar>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}

def Tk_ParallelOp : Tk_Op<"parallel", [RecursiveMemoryEffects,
                                       SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "independent iterations over the index space `bounds` (one index arg per dim)";
  let description = [{
    The outermost `tk.parallel` of a kernel is split across threads (CPU) or blocks (CUDA);
    a nested one is the inner, vectorised / thread-parallel loop. Iterations must not depend on
    each other: each stores to distinct elements.
  }];
  let arguments = (ins DenseI64ArrayAttr:$bounds, Variadic<Index>:$dynamic_bounds);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "custom<DynamicIndexList>($dynamic_bounds, $bounds) $body attr-dict";
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::ArrayRef<int64_t>":$bounds), [{
    build($_builder, $_state, bounds, ::mlir::ValueRange{});
  }]>];
}

def Tk_ReduceOp : Tk_Op<"reduce", [RecursiveMemoryEffects,
                                   SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "combines the value yielded at every point of `bounds` with `kind`";
  let description = [{
    The body has one index arg per dim of `bounds` and yields one scalar; the result is the
    combination (sum/prod/max/min) of the yielded values, starting from the kind's identity
    (0, 1, the type's lowest, the type's highest). The order of combination is unspecified.
  }];
  let arguments = (ins Tcc_ReduceKind:$kind, DenseI64ArrayAttr:$bounds,
                       Variadic<Index>:$dynamic_bounds);
  let results = (outs Tk_Scalar:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind custom<DynamicIndexList>($dynamic_bounds, $bounds) $body attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::mlir::Type":$result, "::tcc::ReduceKind":$kind,
                                 "::llvm::ArrayRef<int64_t>":$bounds), [{
    build($_builder, $_state, result, kind, bounds, ::mlir::ValueRange{});
  }]>];
}

def Tk_ArgReduceOp : Tk_Op<"arg_reduce", [RecursiveMemoryEffects,
                                          SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "i64 position (0..bound-1) of the max/min of the value yielded at each point";
  let description = [{
    `kind` is max or min; ties go to the first position, or the last with `select_last_index`.
    The bound is a number, or an index value known at run time (`tk.arg_reduce max %n`: a
    tk.size, at least 1), in which case the `bound` attribute is ShapedType::kDynamic.
  }];
  let arguments = (ins Tcc_ReduceKind:$kind, I64Attr:$bound, Optional<Index>:$dynamic_bound,
                       UnitAttr:$select_last_index);
  let results = (outs I64:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind custom<DynamicCount>($dynamic_bound, $bound) $body attr-dict";
  let hasVerifier = 1;
}

def Tk_ForOp : Tk_Op<"for", [RecursiveMemoryEffects, AttrSizedOperandSegments,
                             SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "a sequential loop 0..count-1 with carried scalars";
  let description = [{
    Body args: (index, carried...); it yields the next carried values; the results are the last.
    Used where iterations depend on each other (cumulative sums, scatters with duplicates).
    The count is a number, or an index value known at run time (`tk.for %n`: a tk.size), in
    which case the `count` attribute is ShapedType::kDynamic.
  }];
  let arguments = (ins I64Attr:$count, Optional<Index>:$dynamic_count,
                       Variadic<Tk_Scalar>:$inits);
  let results = (outs Variadic<Tk_Scalar>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    custom<DynamicCount>($dynamic_count, $count)
    (`iter_args` `(` $inits^ `:` type($inits) `)`)? $body attr-dict (`:` type($results)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel level: memory and index arithmetic
//===----------------------------------------------------------------------===//

def Tk_LoadOp : Tk_Op<"load", [TypesMatchWith<"result is the buffer's element type", "memref",
                                   "result", "::llvm::cast<::mlir::MemRefType>($_self).getElementType()">]> {
  let summary = "reads one element (indices must be in bounds)";
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$memref, Variadic<Index>:$indices);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$memref `[` $indices `]` attr-dict `:` type($memref)";
  let hasVerifier = 1;
}

def Tk_StoreOp : Tk_Op<"store", [TypesMatchWith<"value is the buffer's element type", "memref",
                                     "value", "::llvm::cast<::mlir::MemRefType>($_self).getElementType()">]> {
  let summary = "writes one element (indices must be in bounds)";
  let arguments = (ins Tk_Scalar:$value, Arg<Tk_Buffer, "", [MemWrite]>:$memref,
                   Variadic<Index>:$indices);
  let assemblyFormat = "$value `,` $memref `[` $indices `]` attr-dict `:` type($memref)";
  let hasVerifier = 1;
}

def Tk_ApplyOp : Tk_Op<"apply", [Pure]> {
  let summary = "evaluates a one-result affine map on index operands (dims, then symbols)";
  let arguments = (ins AffineMapAttr:$map, Variadic<Index>:$operands);
  let results = (outs Index:$result);
  let assemblyFormat = "$map `(` $operands `)` attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel level: scalar compute (semantics of the tcc ops of the same names, per element)
//===----------------------------------------------------------------------===//

def Tk_SizeOp : Tk_Op<"size", [Pure]> {
  let summary = "the value of a size expression over the program's size symbols";
  let description = [{
    `tk.size "batch*seq"`: the expression (tcc::SymExpr text over the module's `tcc.symbols`)
    evaluated with the symbol values of the run. The enclosing kernel takes them in its
    argument marked `tk.symbols` (an i64 buffer, one value per symbol in `tcc.symbols` order).
    Loop bounds and the strides of buffers with symbolic dims are computed from them.
  }];
  let arguments = (ins StrAttr:$expr);
  let results = (outs Index:$result);
  let assemblyFormat = "$expr attr-dict";
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$expr), [{
    build($_builder, $_state, $_builder.getIndexType(), expr);
  }]>];
}

def Tk_ConstantOp : Tk_Op<"constant", [Pure, ConstantLike,
    TypesMatchWith<"result has the value's type", "value", "result", "$_self">]> {
  let summary = "a scalar constant (integer, float, or index)";
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$value attr-dict";
  let hasVerifier = 1;
  let hasFolder = 1; // ConstantLike ops must fold to their value (MLIR's constant folding)
}

def Tk_UnaryOp : Tk_Op<"unary", [Pure, SameOperandsAndResultType]> {
  let summary = "scalar tcc.unary";
  let arguments = (ins Tcc_UnaryKind:$kind, Tk_Scalar:$x);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$kind $x attr-dict `:` type($result)";
}

def Tk_BinaryOp : Tk_Op<"binary", [Pure, SameOperandsAndResultType]> {
  let summary = "scalar tcc.binary (also on index values: add, sub, mul, div, rem, max, min)";
  let arguments = (ins Tcc_BinaryKind:$kind, Tk_Scalar:$lhs, Tk_Scalar:$rhs);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$kind $lhs `,` $rhs attr-dict `:` type($result)";
}

def Tk_CompareOp : Tk_Op<"compare", [Pure, SameTypeOperands]> {
  let summary = "scalar tcc.compare";
  let arguments = (ins Tcc_CompareKind:$kind, Tk_Scalar:$lhs, Tk_Scalar:$rhs);
  let results = (outs I1:$result);
  let assemblyFormat = "$kind $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Tk_SelectOp : Tk_Op<"select", [Pure, AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "cond ? on_true : on_false";
  let arguments = (ins I1:$cond, Tk_Scalar:$on_true, Tk_Scalar:$on_false);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` type($result)";
}

def Tk_CastOp : Tk_Op<"cast", [Pure]> {
  let summary = "scalar tcc.cast (and index <-> integer conversions)";
  let arguments = (ins Tk_Scalar:$x);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
}

def Tk_BitcastOp : Tk_Op<"bitcast", [Pure]> {
  let summary = "scalar tcc.bitcast: the bits of x (as stored) read as the result type";
  let arguments = (ins Tk_Scalar:$x);
  let results = (outs Tk_Scalar:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Program level
//===----------------------------------------------------------------------===//

def Tk_AllocOp : Tk_Op<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "a temporary buffer in the program's arena";
  let description = [{
    `offset` (bytes, a multiple of 64) is set by `-tcc-plan-memory`; buffers whose lifetimes
    (from the alloc to the last use of it or of a view of it) overlap never overlap in memory.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Tk_Buffer:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tk_ViewOp : Tk_Op<"view", [Pure, DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "the same bytes (from `byte_offset`) seen with another shape/type: a free reshape";
  let arguments = (ins Tk_Buffer:$source, DefaultValuedAttr<I64Attr, "0">:$byte_offset);
  let results = (outs Tk_Buffer:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def Tk_SymbolValuesOp : Tk_Op<"symbol_values", [Pure]> {
  let summary = "the run's size symbol values: i64, one per entry of the module's tcc.symbols";
  let description = [{
    Program level: the buffer passed to kernels as their `tk.symbols` argument. The runtime
    fills it from the input shapes before each run (artifact BufferKind Symbols).
  }];
  let results = (outs Tk_Buffer:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Tk_LaunchOp : Tk_Op<"launch", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs the kernel `callee` on the buffers (it may read and write any of them)";
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<Tk_Buffer>:$args);
  let assemblyFormat = "$callee `(` $args `)` attr-dict `:` type($args)";
}

def Tk_GemmOp : Tk_Op<"gemm"> {
  let summary = "library GEMM: c = act(alpha * op(a) x op(b) + beta * c + bias), batched";
  let description = [{
    Shapes [batch..., M, K] x [batch..., K, N] -> [batch..., M, N] (before transposition when
    `trans_a`/`trans_b` say the operand is stored [.., K, M] / [.., N, K]). Every operand has the
    same rank; a batch dim of size 1 in `a` or `b` broadcasts. Element type f32 or f64, or f16
    or bf16 (accumulated in f32; CUDA only: the CPU runtime's GEMMs are f32 and f64).

    The epilogue: `bias` (optional, c's element type, shape [N]) is added to every row of every
    batch (bias[n] to c[..., m, n]), then `activation` is applied to each element (none;
    relu: max(x, 0); gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))). Only targets
    whose GEMM library computes these get them (tcc/Passes/GemmEpilogue.h); the CPU runtime
    refuses a GEMM with an epilogue.
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$a, Arg<Tk_Buffer, "", [MemRead]>:$b,
                   Arg<Tk_Buffer, "", [MemRead, MemWrite]>:$c,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$bias,
                   UnitAttr:$trans_a, UnitAttr:$trans_b,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F64Attr, "0.0">:$beta,
                   DefaultValuedAttr<Tk_GemmActivation,
                                     "::tcc::tk::GemmActivation::None">:$activation);
  let assemblyFormat = [{
    $a `,` $b `,` $c (`bias` `(` $bias^ `:` type($bias) `)`)? (`activation` $activation^)?
    attr-dict `:` type($a) `,` type($b) `,` type($c)
  }];
  let hasVerifier = 1;
}

def Tk_ConvOp : Tk_Op<"conv", [AttrSizedOperandSegments]> {
  let summary = "library convolution (tcc.conv semantics), f32, f16 or bf16, with an epilogue";
  let description = [{
    `lhs_dilation` (the input dilation of a transposed convolution) is empty when it is 1 in
    every spatial dim; `dilations` is tcc.conv's rhs_dilation.

    The epilogue (f32 only; CPU), applied to each output element as the library writes it, in
    this order: + `bias` (one value per output channel, [C_out]), + `residual` (a buffer of the
    output's type, e.g. a residual connection), then max(x, `clamp_min`) and min(x,
    `clamp_max`) when they are set (ReLU: clamp_min 0; ReLU6: 0 and 6). NaN stays NaN. Then
    `activation`, when set: "silu" (x * sigmoid(x)) or "hard_swish" (x * min(max(
    `activation_alpha` * x + `activation_beta`, 0), 1)).

    `channels_last` (f32): input and output are [N, S..., C] (tcc.conv's channels_last).
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$input, Arg<Tk_Buffer, "", [MemRead]>:$weight,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$bias,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$residual,
                   Arg<Tk_Buffer, "", [MemWrite]>:$output,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pad_low,
                   DenseI64ArrayAttr:$pad_high, DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                   DefaultValuedOptionalAttr<DenseI64ArrayAttr, "{}">:$lhs_dilation,
                   OptionalAttr<F64Attr>:$clamp_min, OptionalAttr<F64Attr>:$clamp_max,
                   UnitAttr:$channels_last, OptionalAttr<StrAttr>:$activation,
                   OptionalAttr<F64Attr>:$activation_alpha,
                   OptionalAttr<F64Attr>:$activation_beta);
  let extraClassDeclaration = [{
    /// lhs_dilation with one entry per spatial dim (ones when the attribute is empty).
    ::llvm::SmallVector<int64_t> getLhsDilationPerDim();
    /// Whether anything is applied after the convolution.
    bool hasEpilogue() {
      return getBias() || getResidual() || getClampMinAttr() || getClampMaxAttr() ||
             getActivationAttr();
    }
    /// The clamp bounds as doubles (none: not clamped on that side).
    std::optional<double> getClampMinValue() {
      return getClampMinAttr() ? std::optional<double>(getClampMinAttr().getValueAsDouble())
                               : std::nullopt;
    }
    std::optional<double> getClampMaxValue() {
      return getClampMaxAttr() ? std::optional<double>(getClampMaxAttr().getValueAsDouble())
                               : std::nullopt;
    }
  }];
  let assemblyFormat = [{
    $input `,` $weight `,` $output (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`residual` `(` $residual^ `:` type($residual) `)`)? attr-dict `:` type($input) `,`
    type($weight) `,` type($output)
  }];
  let hasVerifier = 1;
}

def Tk_PoolOp : Tk_Op<"pool"> {
  let summary = "library pooling (tcc.reduce_window semantics, max or sum), f32, rank 4";
  let description = [{
    At most two adjacent dims have a window, stride, padding or dilation other than the
    identity (NCHW pooling over dims 2, 3; channels-last over 1, 2). Padding contributes the
    identity; a NaN in a max window gives NaN. The CPU runtime's runPool.
  }];
  let arguments = (ins Tcc_ReduceKind:$kind, Arg<Tk_Buffer, "", [MemRead]>:$input,
                   Arg<Tk_Buffer, "", [MemWrite]>:$output, DenseI64ArrayAttr:$window,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pad_low,
                   DenseI64ArrayAttr:$pad_high, DenseI64ArrayAttr:$dilations);
  let assemblyFormat = [{
    $kind $input `,` $output attr-dict `:` type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

def Tk_TopKOp : Tk_Op<"topk"> {
  let summary = "library top-k along `dim` (tcc.topk semantics: sorted), values and i64 indices";
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$input,
                   Arg<Tk_Buffer, "", [MemWrite]>:$values, Arg<Tk_Buffer, "", [MemWrite]>:$indices,
                   I64Attr:$dim, BoolAttr:$largest);
  let assemblyFormat = [{
    $input `,` $values `,` $indices attr-dict `:` type($input) `,` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def Tk_AttentionOp : Tk_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "library attention (tcc.attention semantics): the runtime's fused kernel, f32 or bf16";
  let description = [{
    Reads q, k, v and the optional mask (i1) and bias; writes output. It never materialises the
    scores: the CPU runtime computes them in tiles with an online softmax.
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$q, Arg<Tk_Buffer, "", [MemRead]>:$k,
                   Arg<Tk_Buffer, "", [MemRead]>:$v,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$mask,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$bias,
                   Arg<Tk_Buffer, "", [MemWrite]>:$output,
                   F64Attr:$scale, UnitAttr:$causal, F64Attr:$masked_value);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` `(` $mask^ `:` type($mask) `)`)? (`bias` `(` $bias^ `:` type($bias) `)`)?
    `->` $output attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($output)
  }];
  let hasVerifier = 1;
}

def Tk_AttentionGradOp : Tk_Op<"attention_grad", [AttrSizedOperandSegments]> {
  let summary = "library attention gradient (tcc.attention_grad semantics): the CPU runtime's "
                "(f32, or bf16 with an f32 bias) or CUDA's generated kernels (f16/bf16)";
  let description = [{
    Reads q, k, v, the forward's output, its adjoint grad and the optional mask (i1) and bias;
    writes grad_q, grad_k and grad_v. It never materialises the scores: the runtime recomputes
    them a block at a time (FlashAttention-2's backward pass). The CUDA kernels also take a
    `workspace`, f32 [B..., Lq, 2] (each query row's log-sum-exp and dO.O, passed from the
    first kernel to the second).
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$q, Arg<Tk_Buffer, "", [MemRead]>:$k,
                   Arg<Tk_Buffer, "", [MemRead]>:$v, Arg<Tk_Buffer, "", [MemRead]>:$output,
                   Arg<Tk_Buffer, "", [MemRead]>:$grad,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$mask,
                   Arg<Optional<Tk_Buffer>, "", [MemRead]>:$bias,
                   Arg<Tk_Buffer, "", [MemWrite]>:$grad_q, Arg<Tk_Buffer, "", [MemWrite]>:$grad_k,
                   Arg<Tk_Buffer, "", [MemWrite]>:$grad_v,
                   Arg<Optional<Tk_Buffer>, "", [MemRead, MemWrite]>:$workspace,
                   F64Attr:$scale, UnitAttr:$causal, F64Attr:$masked_value);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $output `,` $grad (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)? `->` $grad_q `,` $grad_k `,` $grad_v
    (`workspace` `(` $workspace^ `:` type($workspace) `)`)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) `,` type($output) `,` type($grad) `,` type($grad_q) `,`
    type($grad_k) `,` type($grad_v)
  }];
  let hasVerifier = 1;
}

def Tk_CollectiveOp : Tk_Op<"collective"> {
  let summary = "a collective over this rank's group on the module's mesh (tcc collective semantics)";
  let description = [{
    `kind` is all_reduce, all_gather, reduce_scatter, all_to_all or broadcast, with the
    attributes of the tcc op it lowers: `reduction` (all_reduce, reduce_scatter), `dim` (the
    gathered/scattered dim, all_to_all's split_dim), `dim2` (all_to_all's concat_dim,
    broadcast's root), `axes` (the group). The runtime runs it on its communicator.
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$input, Arg<Tk_Buffer, "", [MemWrite]>:$output,
                   StrAttr:$kind, Tcc_CollectiveReduceKind:$reduction, I64Attr:$dim, I64Attr:$dim2,
                   StrArrayAttr:$axes, UnitAttr:$async);
  let assemblyFormat = [{
    $kind $reduction $input `,` $output `dim` `=` $dim `dim2` `=` $dim2 `over` $axes attr-dict `:` type($input) `,` type($output)
  }];
}

def Tk_WaitOp : Tk_Op<"wait"> {
  let summary = "finishes the async tk.collective that reads `input` and writes `output`";
  let description = [{
    Placed before the first later op that reads or writes either buffer (or a view of it), so
    the collective overlaps everything in between. Its uses keep both buffers alive to here.
  }];
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$input, Arg<Tk_Buffer, "", [MemWrite]>:$output);
  let assemblyFormat = "$input `,` $output attr-dict `:` type($input) `,` type($output)";
}

def Tk_CopyOp : Tk_Op<"copy"> {
  let summary = "copies all bytes of `source` into `target` (same size)";
  let arguments = (ins Arg<Tk_Buffer, "", [MemRead]>:$source, Arg<Tk_Buffer, "", [MemWrite]>:$target);
  let assemblyFormat = "$source `,` $target attr-dict `:` type($source) `,` type($target)";
  let hasVerifier = 1;
}

#endif // TCC_TK_OPS_TD
