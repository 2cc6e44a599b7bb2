//===- Collectives.h - Collective steps of a distributed program --------------===//
//
// A collective step (artifact.fbs Collective) on row-major host buffers: its group is resolved
// from the program's mesh and the communicator's rank; collectives along a dim other than the
// first are packed into (or unpacked from) the contiguous blocks the communicator exchanges.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "Communicator.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tcc::rt {

/// Same numbering as artifact.fbs CollectiveKind.
enum class CollectiveKind : uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Send, Recv };

struct CollectiveStep {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Reduction reduction = Reduction::Sum;
  uint32_t input = 0, output = 0;
  std::vector<uint8_t> axes;      // mesh axis indices
  int64_t dim = 0, dim2 = 0;
  tccrt_dtype dtype = TCCRT_F32;
  std::vector<int64_t> inShape, outShape;
  int64_t groupSize = 1;          // product of the axes' sizes
  bool async = false;             // started here, finished by a WaitStep (not all_to_all, broadcast)
};

/// Finishes the async collective launched at step `collective`.
struct WaitStep {
  uint32_t collective = 0;
};

/// The product of shape[from, to) (the elements of a shape, or of its outer dims).
int64_t dimsProduct(const std::vector<int64_t> &shape, size_t from, size_t to);

/// A tensor of `shape` viewed as [outer, n blocks along `dim`, rest], for collectives along a dim
/// other than the first: block b of every outer row is `rowBytes` bytes at (o * n + b) *
/// rowBytes in the tensor and at (b * outer + o) * rowBytes among n contiguous blocks.
struct BlockRows {
  int64_t outer;
  size_t rowBytes;
  BlockRows(const std::vector<int64_t> &shape, int64_t dim, int64_t n, size_t elemBytes)
      : outer(dimsProduct(shape, 0, dim)),
        rowBytes(dimsProduct(shape, dim, shape.size()) / n * elemBytes) {}
};

/// Checks a decoded step against its buffers' shapes and the mesh; sets groupSize. Throws
/// Error with the reason.
void checkCollective(CollectiveStep &step, const std::vector<int64_t> &meshSizes);

/// The world ranks of `rank`'s group over `axes`, in group order.
std::vector<int> collectiveGroup(const std::vector<int64_t> &meshSizes,
                                 const std::vector<uint8_t> &axes, int rank);

/// Runs the step. `comm` may be null only for groups of one rank (then it is a copy).
void runCollective(const CollectiveStep &step, const std::vector<int64_t> &meshSizes,
                   const void *in, void *out, Communicator *comm, std::vector<uint8_t> &scratch,
                   const std::string &what);

/// Starts an async step (groups of one rank are done at once: a copy, and no pending).
std::optional<PendingCollective> startCollective(const CollectiveStep &step,
                                                 const std::vector<int64_t> &meshSizes,
                                                 const void *in, void *out, Communicator *comm,
                                                 const std::string &what);

std::string collectiveName(const CollectiveStep &step);

/// Rank `rank`'s block of a row-major tensor split per dim over mesh axes (tcc.sharding
/// semantics): its shape, and the block copied into `out` when `whole` is given.
std::vector<int64_t> blockShape(const std::vector<int64_t> &shape,
                                const std::vector<std::vector<uint8_t>> &splits,
                                const std::vector<int64_t> &meshSizes);
/// The offset of rank `rank`'s block in the whole tensor, per dim.
std::vector<int64_t> blockOffset(const std::vector<int64_t> &shape,
                                 const std::vector<std::vector<uint8_t>> &splits,
                                 const std::vector<int64_t> &meshSizes, int rank);
/// Copies the elements where two blocks of one tensor overlap (`src` of shape srcShape at
/// srcOffset, `dst` of dstShape at dstOffset, offsets in the whole tensor), and marks them in
/// `covered` (one byte per element of dst). Returns the number of elements copied.
int64_t copyOverlap(const uint8_t *src, const std::vector<int64_t> &srcShape,
                    const std::vector<int64_t> &srcOffset, uint8_t *dst,
                    const std::vector<int64_t> &dstShape, const std::vector<int64_t> &dstOffset,
                    size_t elemBytes, uint8_t *covered);
void copyBlock(const uint8_t *whole, const std::vector<int64_t> &shape, size_t elemBytes,
               const std::vector<std::vector<uint8_t>> &splits,
               const std::vector<int64_t> &meshSizes, int rank, uint8_t *out);

} // namespace tcc::rt
