//===- Passes.td - tcc graph passes ---------------------------------------===//
#ifndef TCC_PASSES_TD
#define TCC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstants : Pass<"tcc-fold-constants"> {
  let summary = "Evaluates tcc ops whose operands are all constants, with the reference kernels";
  let description = [{
    Replaces each region-free tcc op whose operands are all `tcc.constant` by a constant holding
    its result, computed by the reference kernels (the interpreter's semantics, by construction).
    Ops with a result larger than `max-elements` elements are left alone, except a transpose,
    reverse or reshape of a constant with no other use (the fold replaces it: no growth).
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"1 << 20",
           "largest result (in elements) to fold">
  ];
}

def FoldConvAffine : Pass<"tcc-fold-conv-affine", "mlir::func::FuncOp"> {
  let summary = "Folds per-channel scales and shifts after a convolution into its weights and "
                "one bias (batch-norm folding)";
  let description = [{
    lib/Passes/FoldConvAffine.cpp: a chain of +, -, *, / by per-output-channel constants on the
    result of an f32 tcc.conv with constant weights (an inference BatchNormalization, a scale)
    becomes the convolution with scaled weights plus one per-channel bias.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each folded chain as a remark on its convolution">
  ];
}

def TrimConvTaps : Pass<"tcc-trim-conv-taps", "mlir::func::FuncOp"> {
  let summary = "Drops the convolution kernel taps that only ever read padding (dilated "
                "convolutions on small maps), and splits the output into regions by live taps";
  let description = [{
    lib/Passes/TrimConvTaps.cpp: per spatial dim, the leading and trailing taps of a tcc.conv
    that read inside the input at no output position are sliced off the weight, and the padding
    shrinks to match; a convolution whose taps still read padding for most of its
    multiply-adds becomes one convolution per output region with the same live taps (input
    and weight slices, no padding), concatenated. The output is unchanged.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each trimmed kernel as a remark on its convolution">
  ];
}

def Layout : Pass<"tcc-layout", "mlir::func::FuncOp"> {
  let summary = "Channels-last pointwise and depthwise convolutions, with the layout changes "
                "sunk through layout-agnostic ops and cancelled in pairs";
  let description = [{
    lib/Passes/Layout.cpp. The transposes left are marked `tcc.layout` (the layout copies);
    run -tcc-fold-constants after it to re-lay out constants.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "auto (the cost model), nhwc (every candidate), nchw (none)">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each decision as a remark">
  ];
}

def Autodiff : Pass<"tcc-autodiff", "mlir::ModuleOp"> {
  let summary = "Appends to each function returning one 0-d float loss its gradients";
  let description = [{
    For lit tests of tcc::buildGradients (tcc/Passes/Autodiff.h): every func whose single result
    is a 0-d float tensor also returns the gradient of it with respect to each floating-point
    argument, in argument order.
  }];
}

def Shard : Pass<"tcc-shard", "mlir::ModuleOp"> {
  let summary = "Partitions each function into one rank's program of the module's mesh";
  let description = [{
    tcc/Passes/Shard.h: the shardings of each function's arguments and results propagate
    through its ops; the function is replaced by rank `rank`'s program, with local shapes and
    the collectives its consumers need. With `explain`, every propagation decision and every
    inserted collective (with its bytes per rank) is a remark on the function.
  }];
  let options = [
    Option<"rank", "rank", "int64_t", /*default=*/"0", "the rank whose program to write">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each propagation decision and each inserted collective as a remark">
  ];
}

def Pipeline : Pass<"tcc-pipeline", "mlir::ModuleOp"> {
  let summary = "Replaces a micro-batched training step by one pipeline stage's program";
  let description = [{
    tcc/Passes/Pipeline.h: the forward ops of each micro-batch (tcc.micro_batch = m) are cut
    into `stages` pieces of about equal cost, everything else runs on the lowest stage it
    reads; @main becomes stage `stage`'s program in the `schedule`'s order (gpipe or 1f1b),
    with tcc.send/tcc.recv over the mesh axis `pp` for the values that cross stages and
    broadcasts for results computed on one stage. With `explain`, the cuts are remarks.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2", "pipeline stages (the mesh's pp size)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "micro-batches of the step (its ops carry tcc.micro_batch)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"", "gpipe or 1f1b">,
    Option<"stage", "stage", "int64_t", /*default=*/"0", "the stage whose program to write">,
    Option<"explain", "explain", "bool", /*default=*/"false", "report the cuts as remarks">
  ];
}

def RecognizeAttention : Pass<"tcc-recognize-attention", "mlir::func::FuncOp"> {
  let summary = "Replaces decomposed scaled dot-product attention by tcc.attention";
  let description = [{
    lib/Passes/Attention.cpp: matmul(softmax(scale q k^T [masked] [+ bias]), v), with heads
    split by reshape/transpose outside, keys and values repeated for grouped-query attention,
    causal masks (constant triangles or iota comparisons) and every intermediate used only
    inside the pattern, becomes one tcc.attention.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each recognised attention, and each softmax times v that is not one with "
           "the reason, as a remark">
  ];
}

def Autocast : Pass<"tcc-autocast", "mlir::func::FuncOp"> {
  let summary = "Runs matrix products and attention in 16 bits (torch.autocast's inference rule)";
  let description = [{
    With `precision` bf16 or fp16: every tcc.matmul on f32 operands, every f32 tcc.attention
    the `target`'s fused kernel takes in 16 bits, and on the CPU every f32 tcc.conv that is
    neither transposed nor depthwise (16-bit GEMMs of its im2col matrix), reads its float operands
    converted to the 16-bit type and its result is converted back to f32 (the libraries
    accumulate in f32). Everything else (reductions, softmax, normalisation, pointwise math)
    stays f32. A conversion of a value just widened from the same 16-bit type is the value
    itself. fp32: nothing changes.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32, bf16 or fp16">,
    Option<"target", "target", "std::string", /*default=*/"\"cuda\"",
           "cpu or cuda: whose fused attention kernel decides which attention ops run in 16 bits">,
    Option<"allAttention", "all-attention", "bool", /*default=*/"false",
           "every f32 attention runs in 16 bits, whatever the target's kernels (training's "
           "rule: where no fused kernel runs one, its decomposition computes in f32 anyway)">
  ];
}

def Remat : Pass<"tcc-remat", "mlir::func::FuncOp"> {
  let summary = "Activation checkpointing: recomputes forward values in the backward pass";
  let description = [{
    lib/Passes/Remat.cpp, on a training step (forward ops, then autodiff's backward and the
    optimizer, in one block): the values the loss is computed from that the backward pass
    reads (the saved activations) are recomputed just before their first backward use, from
    values that stay saved. Cheap ops (pointwise, data movement, casts, reductions, gathers)
    are recomputed; matrix products, convolutions and attention, ops with regions and ops
    with side effects are kept. With a `budget` (bytes) those kept values exceed, only block
    boundaries are kept (forward values everything later depends on through them alone, as a
    transformer's residual stream between blocks; every k-th one, the densest set that fits)
    and each block is recomputed whole, matrix products included, before its backward pass.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"-1",
           "bytes of saved activations to fit by recomputing whole blocks (-1: none)">,
    Option<"lossResult", "loss-result", "int64_t", /*default=*/"-1",
           "which result of the function is the loss (-1: the last)">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report each saved activation's fate and the totals as remarks">
  ];
}

def DecomposeAttention : Pass<"tcc-decompose-attention", "mlir::func::FuncOp"> {
  let summary = "Writes tcc.attention and tcc.attention_grad as core ops where no fused kernel runs them";
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "leave the attention ops this target runs with a fused kernel: cpu (f32, the "
           "runtime's, forward and gradient; bf16 forward without a bias), cuda (forward in "
           "f16/bf16 with head dims multiples of 16 up to 128, a generated kernel); empty: "
           "decompose every one">
  ];
}

def SinkReshapes : Pass<"tcc-sink-reshapes", "mlir::func::FuncOp"> {
  let summary = "Moves reshapes below the element-wise ops that read them";
  let description = [{
    lib/Passes/SinkReshapes.cpp: an element-wise op (unary, binary, compare, select, cast) whose
    operands are reshapes of values of one shape, splat constants or broadcast scalars, is
    applied to the reshapes' sources and its result reshaped, so that it fuses with their producer (a GELU after a
    product viewed as [1, tokens, d] joins the GEMM's epilogue); reshape pairs that cancel go.
  }];
}

def Fuse : Pass<"tcc-fuse", "mlir::func::FuncOp"> {
  let summary = "Groups graph ops into tcc.fusion ops: the kernels (and library calls) to generate";
  let description = [{
    See lib/Passes/Fuse.cpp: vertical and horizontal fusion of pointwise ops and reductions,
    epilogues kept with GEMMs and convolutions. Legality and profitability are decided in one
    place; with `explain`, every decision is reported as a remark with its reason. `target`
    says which GEMM epilogues the library computes itself (tcc/Passes/GemmEpilogue.h).
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "report every fusion decision and its reason as a remark">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "the device compiled for (cpu, cuda): which GEMM epilogues its library computes "
           "(tcc/Passes/GemmEpilogue.h)">
  ];
}

def LowerToKernels : Pass<"tcc-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "Lowers fused graph functions to tk kernels and a tk program (buffers, launches)";
  let description = [{
    Each tcc.fusion becomes a `tk.kernel` function (a loop nest) launched by the program, or a
    library call (tk.gemm, tk.conv, tk.topk) followed by its epilogue kernel. Tensors become
    buffers: graph inputs/outputs are program arguments, constants memref.globals, temporaries
    tk.alloc, reshapes tk.view. With `target=cuda`, the part of a GEMM's epilogue that cuBLASLt
    computes (a scale, a bias vector, then ReLU or tanh GELU: tcc/Passes/GemmEpilogue.h) goes
    into tk.gemm's `alpha`, `bias` and `activation`; only the rest is a generated kernel.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "the device compiled for (cpu, cuda): which GEMM epilogues its library computes "
           "(tcc/Passes/GemmEpilogue.h)">
  ];
  let dependentDialects = ["tcc::tk::TkDialect", "mlir::memref::MemRefDialect"];
}

def PlanMemory : Pass<"tcc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every tk.alloc in one arena; buffers with disjoint lifetimes share bytes";
  let description = [{
    Lifetimes run from a buffer's alloc to the last use of it or of any view of it, in program
    order. Offsets are assigned greedily, largest buffer first, at the lowest 64-byte aligned
    offset that overlaps no live-overlapping buffer. Sets `offset` on every tk.alloc and
    `tk.arena_bytes` on the program.
  }];
}

def DedupKernels : Pass<"tcc-dedup-kernels", "mlir::ModuleOp"> {
  let summary = "Merges tk kernels that are the same function under different names";
  let description = [{
    Kernels with the same attributes (argument types among them; the name aside) and
    equivalent bodies (mlir::OperationEquivalence, locations ignored) become one: every
    tk.launch of a duplicate calls the first, and the duplicates are erased. The layers of a transformer, and the steps of an unrolled recurrence
    (whose time-step slices are views at their offsets), then compile each distinct kernel
    once. Launches keep their own locations, so the profiler still names each one's nodes.
  }];
}

def EmitCpp : Pass<"tcc-emit-cpp", "mlir::ModuleOp"> {
  let summary = "Prints the C++ source generated for each tk kernel (for inspection and tests)";
}

def EmitCuda : Pass<"tcc-emit-cuda", "mlir::ModuleOp"> {
  let summary = "Prints the CUDA source and launch configuration generated for each tk kernel";
}

#endif // TCC_PASSES_TD
