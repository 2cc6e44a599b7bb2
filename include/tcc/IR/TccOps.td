//===- TccOps.td - The tcc core op set ----------------------------------------===//
//
// The core ops every ONNX operator decomposes into (frontend/onnx), that every pass and backend
// understands, and that the reference interpreter evaluates. Semantics: tcc/Interp/Kernels.h.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_OPS_TD
#define TCC_OPS_TD

include "tcc/IR/TccBase.td"
include "tcc/IR/TccInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

// Ops with a vector-Jacobian product (lib/IR/TccGradients.cpp). Ops without one either have no
// float results that depend smoothly on their operands (compare, arg_reduce, iota, constant) or
// have regions (if, loop, fusion: autodiff runs on graphs before fusion).
defvar Tcc_Differentiable = DeclareOpInterfaceMethods<DifferentiableOpInterface>;

//===--- Constants and elementwise ---------------------------------------===//

def Tcc_ConstantOp : Tcc_Op<"constant", [ConstantLike, Pure, InferTypeOpAdaptor]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Tcc_SymIntsOp : Tcc_Op<"sym_ints", [Pure]> {
  let summary = "integers computed from the size symbols";
  let description = [{
    A 0-d or 1-d i64 tensor whose elements are tcc::SymExpr expressions of the module's size
    symbols, as text: what `Shape` of a tensor with symbolic dims gives, and what the importer
    folds shape arithmetic on it into (tcc/IR/SymbolicShape.h). Its value is known when the
    symbols are bound, before a run starts.
    `%s = tcc.sym_ints ["batch", "seq", "768"] : tensor<3xi64>`
  }];
  let arguments = (ins StrArrayAttr:$values);
  let results = (outs Tcc_TensorOf<[I64]>:$result);
  let assemblyFormat = "$values attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The elements (row-major).
    std::vector<::tcc::SymExpr> getExprs();
  }];
}

def Tcc_UnaryOp : Tcc_Op<"unary", [Tcc_Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "elementwise unary function";
  let description = [{
    `%y = tcc.unary exp %x : tensor<4xf32>`. Transcendental kinds need a float type; `not` is
    logical on i1 and bitwise on integers; `neg`, `abs` and `sign` work on numbers.
  }];
  let arguments = (ins Tcc_UnaryKind:$kind, Tcc_ComputeTensor:$x);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$kind $x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Tcc_BinaryOp : Tcc_Op<"binary", [Tcc_Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "elementwise binary function on operands of one type";
  let description = [{
    `%z = tcc.binary add %x, %y : tensor<4xf32>`. Operands have the same shape: broadcasting is
    explicit (`tcc.broadcast_in_dim`). `and`/`or`/`xor` are logical on i1 and bitwise on
    integers; shifts take unsigned integers.
  }];
  let arguments = (ins Tcc_BinaryKind:$kind, Tcc_ComputeTensor:$lhs, Tcc_ComputeTensor:$rhs);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$kind $lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tcc_CompareOp : Tcc_Op<"compare", [Pure, SameTypeOperands, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison giving i1";
  let arguments = (ins Tcc_CompareKind:$kind, Tcc_ComputeTensor:$lhs, Tcc_ComputeTensor:$rhs);
  let results = (outs Tcc_BoolTensor:$result);
  let assemblyFormat = "$kind $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Tcc_SelectOp : Tcc_Op<"select", [Tcc_Differentiable, Pure, AllTypesMatch<["on_true", "on_false"]>, InferTypeOpAdaptor]> {
  let summary = "elementwise choice: cond ? on_true : on_false";
  let arguments = (ins Tcc_BoolTensor:$cond, Tcc_Tensor:$on_true, Tcc_Tensor:$on_false);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($on_true)";
}

def Tcc_CastOp : Tcc_Op<"cast", [Tcc_Differentiable, Pure]> {
  let summary = "elementwise conversion to another element type";
  let arguments = (ins Tcc_Tensor:$x);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tcc_BitcastOp : Tcc_Op<"bitcast", [Pure]> {
  let summary = "elementwise reinterpretation of each element's bits as another type of that width";
  let description = [{
    Bool counts as 8 bits (its byte, 0 or 1; a byte reinterpreted as bool is true unless 0). No
    gradient: the bits of a float are not a differentiable function of it.
  }];
  let arguments = (ins Tcc_Tensor:$x);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

//===--- Layout -------------------------------------------------------------===//

def Tcc_ReshapeOp : Tcc_Op<"reshape", [Tcc_Differentiable, Pure]> {
  let summary = "same elements in row-major order, another shape";
  let arguments = (ins Tcc_Tensor:$x);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tcc_TransposeOp : Tcc_Op<"transpose", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "permutes dimensions: result dim i is operand dim perm[i]";
  let arguments = (ins Tcc_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `perm` `=` $perm attr-dict `:` type($x) `->` type($result)";
  let hasFolder = 1;
}

def Tcc_BroadcastInDimOp : Tcc_Op<"broadcast_in_dim", [Tcc_Differentiable, Pure]> {
  let summary = "broadcasts to the result shape; operand dim i becomes result dim dims[i]";
  let arguments = (ins Tcc_Tensor:$x, DenseI64ArrayAttr:$dims);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `dims` `=` $dims attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tcc_SliceOp : Tcc_Op<"slice", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "strided static slice: start <= i < limit, step stride (>= 1) in each dim";
  let arguments = (ins Tcc_Tensor:$x, DenseI64ArrayAttr:$start, DenseI64ArrayAttr:$limit,
                   DenseI64ArrayAttr:$stride);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = [{
    $x `start` `=` $start `limit` `=` $limit `stride` `=` $stride attr-dict `:` type($x) `->` type($result)
  }];
  let hasFolder = 1;
}

def Tcc_ReverseOp : Tcc_Op<"reverse", [Tcc_Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "reverses the element order along dims";
  let arguments = (ins Tcc_Tensor:$x, DenseI64ArrayAttr:$dims);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `dims` `=` $dims attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Tcc_ConcatOp : Tcc_Op<"concat", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "concatenation along axis";
  let arguments = (ins Variadic<Tcc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)";
  let hasFolder = 1;
}

def Tcc_PadOp : Tcc_Op<"pad", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "pads each dim by low before and high after (both >= 0)";
  let arguments = (ins Tcc_Tensor:$x, Tcc_Tensor:$value, DenseI64ArrayAttr:$low,
                   DenseI64ArrayAttr:$high, Tcc_PadMode:$mode);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = [{
    $mode $x `,` $value `low` `=` $low `high` `=` $high attr-dict `:` type($x) `,` type($value) `->` type($result)
  }];
}

def Tcc_IotaOp : Tcc_Op<"iota", [Pure]> {
  let summary = "result[i...] = i[dim]";
  let arguments = (ins I64Attr:$dim);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "`dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tcc_DynamicSliceOp : Tcc_Op<"dynamic_slice", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "window of static sizes at run-time start indices (clamped to fit)";
  let arguments = (ins Tcc_Tensor:$x, Variadic<Tcc_IndexScalar>:$starts, DenseI64ArrayAttr:$sizes);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = [{
    $x `[` $starts `]` `sizes` `=` $sizes attr-dict `:` type($x) (`,` type($starts)^)? `->` type($result)
  }];
}

def Tcc_DynamicUpdateSliceOp : Tcc_Op<"dynamic_update_slice", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "x with the window at run-time start indices (clamped to fit) replaced";
  let arguments = (ins Tcc_Tensor:$x, Tcc_Tensor:$update, Variadic<Tcc_IndexScalar>:$starts);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = [{
    $x `,` $update `[` $starts `]` attr-dict `:` type($x) `,` type($update) (`,` type($starts)^)?
  }];
}

//===--- Indexing -------------------------------------------------------------===//

def Tcc_GatherOp : Tcc_Op<"gather", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "take along axis: result = x[:axis] ++ indices ++ x[axis+1:]";
  let arguments = (ins Tcc_Tensor:$x, Tcc_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `[` $indices `]` `axis` `=` $axis attr-dict `:` type($x) `,` type($indices) `->` type($result)";
}

def Tcc_GatherElementsOp : Tcc_Op<"gather_elements", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX GatherElements along axis";
  let arguments = (ins Tcc_Tensor:$x, Tcc_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `[` $indices `]` `axis` `=` $axis attr-dict `:` type($x) `,` type($indices) `->` type($result)";
}

def Tcc_GatherNDOp : Tcc_Op<"gather_nd", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX GatherND with batch_dims leading batch dims";
  let arguments = (ins Tcc_Tensor:$x, Tcc_IndexTensor:$indices, I64Attr:$batch_dims);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `[` $indices `]` `batch_dims` `=` $batch_dims attr-dict `:` type($x) `,` type($indices) `->` type($result)";
}

def Tcc_ScatterElementsOp : Tcc_Op<"scatter_elements", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX ScatterElements along axis";
  let arguments = (ins Tcc_ComputeTensor:$x, Tcc_IndexTensor:$indices, Tcc_ComputeTensor:$updates, I64Attr:$axis,
                   Tcc_ScatterReduction:$reduction);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = [{
    $reduction $x `[` $indices `]` `,` $updates `axis` `=` $axis attr-dict `:` type($x) `,` type($indices) `,` type($updates)
  }];
}

def Tcc_ScatterNDOp : Tcc_Op<"scatter_nd", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX ScatterND";
  let arguments = (ins Tcc_ComputeTensor:$x, Tcc_IndexTensor:$indices, Tcc_ComputeTensor:$updates,
                   Tcc_ScatterReduction:$reduction);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = [{
    $reduction $x `[` $indices `]` `,` $updates attr-dict `:` type($x) `,` type($indices) `,` type($updates)
  }];
}

//===--- Reductions and scans -------------------------------------------------===//

def Tcc_ReduceOp : Tcc_Op<"reduce", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "reduction over dims (sorted, unique), which are removed";
  let arguments = (ins Tcc_ReduceKind:$kind, Tcc_ComputeTensor:$x, DenseI64ArrayAttr:$dims);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$kind $x `dims` `=` $dims attr-dict `:` type($x) `->` type($result)";
}

def Tcc_ArgReduceOp : Tcc_Op<"arg_reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "i64 index of the max (or min) along dim, which is removed";
  let arguments = (ins BoolAttr:$is_max, Tcc_ComputeTensor:$x, I64Attr:$dim, UnitAttr:$select_last_index);
  let results = (outs Tcc_TensorOf<[I64]>:$result);
  let assemblyFormat = "$x `dim` `=` $dim attr-dict `:` type($x) `->` type($result)";
}

def Tcc_CumsumOp : Tcc_Op<"cumsum", [Tcc_Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "running sum along dim";
  let arguments = (ins Tcc_ComputeTensor:$x, I64Attr:$dim, UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$x `dim` `=` $dim attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Tcc_TopKOp : Tcc_Op<"topk", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "the k largest (or smallest) along dim, sorted, with their i64 indices";
  let arguments = (ins Tcc_ComputeTensor:$x, I64Attr:$dim, I64Attr:$k, BoolAttr:$largest);
  let results = (outs Tcc_ComputeTensor:$values, Tcc_TensorOf<[I64]>:$indices);
  let assemblyFormat = "$x `dim` `=` $dim `k` `=` $k attr-dict `:` type($x) `->` type($values) `,` type($indices)";
}

//===--- Linear algebra and windows ---------------------------------------===//

def Tcc_MatmulOp : Tcc_Op<"matmul", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix product [B..., M, K] x [B..., K, N] -> [B..., M, N]";
  let arguments = (ins Tcc_ComputeTensor:$lhs, Tcc_ComputeTensor:$rhs);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def Tcc_AttentionOp : Tcc_Op<"attention", [Tcc_Differentiable, Pure, AttrSizedOperandSegments,
                                           InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention: softmax(scale q k^T [masked] [+ bias]) v";
  let description = [{
    q [B..., Lq, D], k [B'..., Lk, D], v [B'..., Lk, Dv] -> [B..., Lq, Dv], one float type, one
    rank >= 3. Each batch dim of k and v divides q's (grouped-query attention: query batch index
    i reads key/value index i / (B_d / B'_d), so consecutive query heads share a key/value head;
    B'_d = 1 broadcasts).

    Scores s = scale * q k^T over [B..., Lq, Lk]; then, in this order:
      - `causal`: s[.., i, j] = -inf where j > i (the upper-left-aligned triangle of ONNX
        Attention and PyTorch's is_causal);
      - `mask` (i1): s = mask ? s : masked_value;
      - `bias` (q's type, or f32 when q is 16-bit: the fused kernels' scores are f32):
        s = s + bias;
    then p = softmax(s) along the last dim (max-shifted; a row whose maximum is not finite is
    not shifted, so a fully masked row of -inf gives NaN, as a decomposed softmax does), and the
    result p v. `mask` and `bias` have the scores' rank; each dim is 1 (broadcast) or the
    scores' size.

    The op is recognised from the decomposed form (-tcc-recognize-attention) and decomposed
    back into core ops where no fused kernel applies (-tcc-decompose-attention,
    tcc/IR/Attention.h); the reference interpreter evaluates it directly.
  }];
  let arguments = (ins Tcc_ComputeTensor:$q, Tcc_ComputeTensor:$k, Tcc_ComputeTensor:$v,
                   Optional<Tcc_BoolTensor>:$mask, Optional<Tcc_ComputeTensor>:$bias,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<F64Attr, "-INFINITY">:$masked_value);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` `(` $mask^ `:` type($mask) `)`)? (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($result)
  }];
}

def Tcc_AttentionGradOp : Tcc_Op<"attention_grad", [Pure, AttrSizedOperandSegments,
                                                    InferTypeOpAdaptor]> {
  let summary = "the gradient of tcc.attention with respect to q, k and v";
  let description = [{
    Operands and attributes as tcc.attention's, plus `output`, that attention's result, and
    `grad`, the result's adjoint; results: the adjoints of q, k and v (their types). With
    p = softmax(scores) as tcc.attention defines it:
      dv = p^T grad (summed over the query heads of each key/value head);
      ds = p (grad v^T - rowsum(grad * output)), 0 where `causal` or `mask` replaced the score;
      dq = scale ds k;  dk = scale ds^T q (summed likewise).
    tcc.attention's gradient rule makes it where the bias is not differentiated. The CPU
    runtime runs it without materialising the scores (FlashAttention-2's backward pass);
    elsewhere -tcc-decompose-attention writes it in core ops (tcc/IR/Attention.h). Autodiff
    differentiates it (second order) as that decomposition.
  }];
  let arguments = (ins Tcc_ComputeTensor:$q, Tcc_ComputeTensor:$k, Tcc_ComputeTensor:$v,
                   Tcc_ComputeTensor:$output, Tcc_ComputeTensor:$grad,
                   Optional<Tcc_BoolTensor>:$mask, Optional<Tcc_ComputeTensor>:$bias,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<F64Attr, "-INFINITY">:$masked_value);
  let results = (outs Tcc_ComputeTensor:$grad_q, Tcc_ComputeTensor:$grad_k,
                 Tcc_ComputeTensor:$grad_v);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $output `,` $grad (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:` type($q) `,` type($k) `,` type($v)
    `,` type($output) `,` type($grad) `->` type($grad_q) `,` type($grad_k) `,` type($grad_v)
  }];
}

def Tcc_ConvOp : Tcc_Op<"conv", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "N-d convolution [N, C, S...] * [O, C/groups, K...] -> [N, O, S'...]";
  let description = [{
    Per spatial dim: the input is dilated by `lhs_dilation` (transposed convolution), padded by
    `pad_low`/`pad_high` (may be negative), then windowed with kernel dilation `rhs_dilation`
    and stride `strides`.

    `channels_last`: input and result hold the channel dim last ([N, S..., C] ->
    [N, S'..., O]; the weight is unchanged). Only the layout pass (-tcc-layout) makes it, for
    the CPU's library convolutions; it has no gradient rule.
  }];
  let arguments = (ins Tcc_ComputeTensor:$input, Tcc_ComputeTensor:$weight, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pad_low, DenseI64ArrayAttr:$pad_high,
                   DenseI64ArrayAttr:$lhs_dilation, DenseI64ArrayAttr:$rhs_dilation,
                   I64Attr:$groups, UnitAttr:$channels_last);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)";
}

def Tcc_ReduceWindowOp : Tcc_Op<"reduce_window", [Tcc_Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "sliding-window reduction over every dim (pooling)";
  let arguments = (ins Tcc_ReduceKind:$kind, Tcc_ComputeTensor:$x, DenseI64ArrayAttr:$window,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pad_low,
                   DenseI64ArrayAttr:$pad_high, DenseI64ArrayAttr:$dilations);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$kind $x attr-dict `:` type($x) `->` type($result)";
}

//===--- Control flow ---------------------------------------------------------===//

def Tcc_YieldOp : Tcc_Op<"yield", [Pure, Terminator, ParentOneOf<["IfOp", "LoopOp", "FusionOp"]>]> {
  let summary = "ends a region of tcc.if, tcc.loop or tcc.fusion";
  let arguments = (ins Variadic<Tcc_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def Tcc_IfOp : Tcc_Op<"if", [RecursiveMemoryEffects, NoRegionArguments]> {
  let summary = "runs one of two regions depending on a 0-d i1";
  let arguments = (ins Tcc_BoolScalar:$cond);
  let results = (outs Variadic<Tcc_Tensor>:$results);
  let regions = (region SizedRegion<1>:$then_region, SizedRegion<1>:$else_region);
  let assemblyFormat = "$cond (`->` `(` type($results)^ `)`)? $then_region `else` $else_region attr-dict";
  let hasVerifier = 1;
}

def Tcc_LoopOp : Tcc_Op<"loop", [RecursiveMemoryEffects]> {
  let summary = "ONNX-style loop: up to max_trip iterations while cond holds";
  let description = [{
    The body's arguments are (iteration: tensor<i64>, cond: tensor<i1>, carried...); it yields
    (cond, carried..., scan elements...). Results are the final carried values followed by one
    stacked tensor per scan element, whose static leading dim is the number of iterations run
    (the loop must run exactly that many times).
  }];
  let arguments = (ins Tcc_I64Scalar:$max_trip, Tcc_BoolScalar:$cond, Variadic<Tcc_Tensor>:$inits);
  let results = (outs Variadic<Tcc_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $max_trip `,` $cond `)` (`inits` `(` $inits^ `:` type($inits) `)`)? (`->` `(` type($results)^ `)`)? $body attr-dict
  }];
  let hasVerifier = 1;
}


def Tcc_FusionOp : Tcc_Op<"fusion", [IsolatedFromAbove, RecursiveMemoryEffects,
                                     SingleBlock]> {
  let summary = "a group of core ops that becomes one kernel (or one library call + epilogue)";
  let description = [{
    Made by `-tcc-fuse`. The body's block arguments are the group's inputs (one per operand);
    it yields the values that leave the group. `kind` is `loop` (one generated loop-nest
    kernel: pointwise ops, reductions and the index-remapping layout ops fused into them) or
    `extern` (a library call such as a GEMM or a convolution, plus the pointwise epilogue ops
    that run on its output while it is hot). Values used only inside the group are never
    materialised.
  }];
  let arguments = (ins Variadic<Tcc_Tensor>:$inputs, StrAttr:$kind);
  let results = (outs Variadic<Tcc_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind (`(` $inputs^ `:` type($inputs) `)`)? (`->` `(` type($results)^ `)`)? $body attr-dict
  }];
  let hasVerifier = 1;
}

//===--- Distribution: collectives ---------------------------------------------===//
//
// Each rank of the module's mesh (`tcc.mesh`) runs its own copy of the program. A collective's
// group is the ranks whose mesh coordinates differ from this rank's only on `axes`; a rank's
// position in the group is its coordinate over `axes`, the first axis major. Every rank of a
// group runs the group's collectives in the same order. Collectives have side effects: they are
// never removed, merged or reordered with one another.
//
// Gradients: autodiff of an SPMD program differentiates the sum over ranks of each rank's loss,
// each rank's values being its own variables. Under that reading each collective's VJP is its
// linear transpose: all_reduce(sum/avg) is its own, all_gather and reduce_scatter(sum) are each
// other's, all_to_all's is the all_to_all back, broadcast's a sum onto the root, send's a recv
// and recv's a send back. Max/min split the adjoint equally between the ranks holding the
// extreme (as tcc.reduce does between tied elements).

class Tcc_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Tcc_Op<mnemonic, traits # [Tcc_Differentiable]> {
  code collectiveDecls = [{
    /// The ranks of this op's group (the product of its axes' sizes).
    int64_t getGroupSize();
  }];
  let extraClassDeclaration = collectiveDecls;
  let hasVerifier = 1;
}

def Tcc_AllReduceOp : Tcc_CollectiveOp<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "every rank of the group gets the elementwise sum (avg, max, min) of their tensors";
  let arguments = (ins Tcc_CollectiveReduceKind:$kind, Tcc_ComputeTensor:$x, StrArrayAttr:$axes);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = "$kind $x `over` $axes attr-dict `:` type($x)";
}

def Tcc_AllGatherOp : Tcc_CollectiveOp<"all_gather"> {
  let summary = "every rank gets the group's tensors concatenated along dim, in group order";
  let arguments = (ins Tcc_Tensor:$x, I64Attr:$dim, StrArrayAttr:$axes);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `dim` `=` $dim `over` $axes attr-dict `:` type($x) `->` type($result)";
}

def Tcc_ReduceScatterOp : Tcc_CollectiveOp<"reduce_scatter"> {
  let summary = "the group's elementwise reduction, split along dim: rank i keeps block i";
  let arguments = (ins Tcc_CollectiveReduceKind:$kind, Tcc_ComputeTensor:$x, I64Attr:$dim,
                   StrArrayAttr:$axes);
  let results = (outs Tcc_ComputeTensor:$result);
  let assemblyFormat = [{
    $kind $x `dim` `=` $dim `over` $axes attr-dict `:` type($x) `->` type($result)
  }];
}

def Tcc_AllToAllOp : Tcc_CollectiveOp<"all_to_all"> {
  let summary = "block j of split_dim goes to rank j, which concatenates what it gets along concat_dim";
  let arguments = (ins Tcc_Tensor:$x, I64Attr:$split_dim, I64Attr:$concat_dim, StrArrayAttr:$axes);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = [{
    $x `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim `over` $axes attr-dict `:` type($x) `->` type($result)
  }];
}

def Tcc_BroadcastOp : Tcc_CollectiveOp<"broadcast", [SameOperandsAndResultType]> {
  let summary = "every rank of the group gets the tensor of the rank at position root";
  let arguments = (ins Tcc_Tensor:$x, I64Attr:$root, StrArrayAttr:$axes);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "$x `root` `=` $root `over` $axes attr-dict `:` type($x)";
}

def Tcc_SendOp : Tcc_CollectiveOp<"send"> {
  let summary = "sends x to the rank at coordinate peer along axis (other coordinates equal)";
  let description = [{
    Pairs with the peer's `tcc.recv` from this rank with the same `tag`; sends and receives
    between two ranks with one tag pair in program order. For pipeline stages (each value that
    crosses stages gets its own tag, so stages may receive in another order than they send).
  }];
  let arguments = (ins Tcc_Tensor:$x, I64Attr:$peer, StrAttr:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = "$x `to` $peer `over` $axis (`tag` $tag^)? attr-dict `:` type($x)";
}

def Tcc_RecvOp : Tcc_CollectiveOp<"recv"> {
  let summary = "receives the tensor the rank at coordinate peer along axis sends to this rank";
  let arguments = (ins I64Attr:$peer, StrAttr:$axis, DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs Tcc_Tensor:$result);
  let assemblyFormat = "`from` $peer `over` $axis (`tag` $tag^)? attr-dict `:` type($result)";
}

def Tcc_AxisIndexOp : Tcc_Op<"axis_index", [Pure]> {
  let summary = "this rank's position in its group over axes (i64, 0-d)";
  let arguments = (ins StrArrayAttr:$axes);
  let results = (outs Tcc_I64Scalar:$result);
  let assemblyFormat = "`over` $axes attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // TCC_OPS_TD
