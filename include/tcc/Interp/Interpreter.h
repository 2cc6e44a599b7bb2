//===- Interpreter.h - Reference interpreter for the tcc dialect ----------===//
//
// Evaluates tcc dialect functions on the host, op by op, with the reference kernels. It is the
// oracle every pass and backend is tested against: plain and obviously correct, not fast.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <chrono>
#include <vector>

namespace mlir::func {
class FuncOp;
}

namespace tcc {

/// Element type <-> DType. Throws tcc::Error for a type the core op set does not use.
DType dtypeFromType(mlir::Type elementType);
mlir::Type typeFromDType(mlir::MLIRContext *ctx, DType dtype);
mlir::RankedTensorType tensorTypeOf(mlir::MLIRContext *ctx, const Tensor &t);

/// Constant attribute <-> Tensor (copies the data).
Tensor tensorFromAttr(mlir::ElementsAttr attr);
mlir::DenseElementsAttr attrFromTensor(mlir::MLIRContext *ctx, const Tensor &t);

/// Evaluates one region-free core op on operand values. Throws tcc::Error.
std::vector<Tensor> evaluateOp(mlir::Operation *op, const std::vector<Tensor> &operands);

/// How one rank's collectives reach the others: the interpreter evaluates every collective op
/// (tcc/IR/TccOps.td) from these two primitives. SimulatedMesh below implements them for ranks
/// that are threads of this process.
class CollectiveTransport {
public:
  virtual ~CollectiveTransport() = default;
  virtual int64_t rank() const = 0;
  /// Every member of the group `ranks` (which contains this rank) calls this in the same order;
  /// each gets every member's tensor, in the order of `ranks`. `what` names the collective in
  /// errors (a deadline passed, a peer failed).
  virtual std::vector<Tensor> exchange(llvm::ArrayRef<int64_t> ranks, const Tensor &mine,
                                       const std::string &what) = 0;
  /// Point to point; a send and the peer's recv with the same tag pair in program order.
  virtual void send(int64_t peer, int64_t tag, const Tensor &value, const std::string &what) = 0;
  virtual Tensor recv(int64_t peer, int64_t tag, const std::string &what) = 0;
};

/// Runs a function whose body is tcc ops (and func.return). Argument count, shapes and dtypes
/// are checked. Errors are tcc::Error naming the op and its location (the ONNX node).
/// Collectives need `transport`, except over groups of one rank (which they leave unchanged).
std::vector<Tensor> runFunction(mlir::func::FuncOp func, const std::vector<Tensor> &args,
                                CollectiveTransport *transport = nullptr);

/// Runs one program per rank of the mesh of their module (`programs[r]` on rank r, each in its
/// own thread) with the collectives simulated in this process: the oracle for sharded
/// programs. Returns each rank's results. A collective that waits longer than `deadline` for
/// the other ranks, or any rank's error, ends every rank; the tcc::Error thrown names the first
/// failing rank, the op and the reason.
std::vector<std::vector<Tensor>>
runSpmd(llvm::ArrayRef<mlir::func::FuncOp> programs, const std::vector<std::vector<Tensor>> &args,
        std::chrono::milliseconds deadline = std::chrono::seconds(60));

} // namespace tcc
