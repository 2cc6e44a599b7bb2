//===- LibraryKernelUtils.h - Helpers of the generated CUDA library kernels -===//
//
// Shared by CudaLibraryKernels.cpp (convolution, top-k) and CudaAttentionKernel.cpp: the
// shapes they specialise on, how those are written in a kernel's description, and the kernel
// name hashed from it (equal descriptions, equal kernels: compiled once).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/SymbolBinding.h"
#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <string>
#include <vector>

namespace tcc::codegen::detail {

/// "[2,3,4]".
inline std::string list(llvm::ArrayRef<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

/// "[a,b]" of code texts or size expressions.
inline std::string textList(llvm::ArrayRef<std::string> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + v[i];
  return s + "]";
}

/// "[batch,seq,64]": a shape's dims as size expressions.
inline std::string symList(const SymShape &dims) {
  std::vector<std::string> texts;
  for (const SymExpr &d : dims)
    texts.push_back(d.str());
  return textList(texts);
}

/// "<prefix>_<16 hex digits of the description's hash>".
inline std::string hashName(const char *prefix, const std::string &description) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << prefix << "_" << llvm::format_hex_no_prefix(llvm::xxh3_64bits(description), 16);
  return name;
}

/// A static, contiguous buffer's shape; throws naming the op and operand otherwise.
inline std::vector<int64_t> shapeOf(const std::string &op, mlir::Value buffer, const char *what) {
  auto type = mlir::cast<mlir::MemRefType>(buffer.getType());
  if (!type.hasStaticShape())
    throw Error(op + ": the " + what + " has a dynamic shape; CUDA kernels need static shapes");
  if (!type.getLayout().isIdentity())
    throw Error(op + ": the " + what + " is not a contiguous row-major buffer");
  return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
}

/// A buffer's dims as size expressions (constants for static ones) in `dims`, and their largest
/// values over `ranges`.
inline std::vector<int64_t> largestDims(const std::string &op, mlir::Value buffer,
                                        const char *what, const SymbolRanges &ranges,
                                        SymShape &dims) {
  auto type = mlir::cast<mlir::MemRefType>(buffer.getType());
  if (type.hasStaticShape() || !tk::isBufferType(type)) { // (`?` without #tcc.dims: an error)
    std::vector<int64_t> shape = shapeOf(op, buffer, what);
    dims = toSymShape(shape);
    return shape;
  }
  dims = tk::bufferDims(type);
  std::vector<int64_t> out;
  for (const SymExpr &d : dims) {
    // The kernels size tiles and index widths for the largest sizes: they must have one.
    int64_t most = rangeOf(d, ranges).max;
    if (most > (int64_t(1) << 40))
      throw Error(op + ": the " + what + "'s dim " + d.str() +
                  " has no upper bound the CUDA kernel can size itself for: declare one "
                  "(--input-shape NAME=LO..HI)");
    out.push_back(most);
  }
  return out;
}
} // namespace tcc::codegen::detail
