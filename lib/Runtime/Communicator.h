//===- Communicator.h - Collectives between the processes of a job -----------===//
//
// A distributed program's collective steps run on the process's communicator. The one backend
// today is an existing MPI library (Open MPI, as Debian ships it), loaded with dlopen when the
// process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE): a single-process
// deployment needs no MPI. Groups are sub-communicators made once per distinct group.
//
// Every collective has a deadline (TCC_COLLECTIVE_TIMEOUT seconds, 300 by default, or
// setDeadline): it is started non-blocking and polled; when the deadline passes, the rank
// prints which collective, step and group it was waiting on and aborts the whole job
// (MPI_Abort), so a dead or hung rank ends every rank with a non-zero exit, never a hang. The
// blocking calls MPI offers no other form of (MPI_Init, MPI_Comm_split) run under a watchdog
// with the same deadline that ends the rank, and mpirun the job.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tcc::rt {

/// Same numbering as artifact.fbs CollectiveReduction.
enum class Reduction : uint8_t { Sum, Avg, Max, Min };

/// A collective started and not finished: its buffers must stay untouched until finish().
struct PendingCollective {
  void *request = nullptr;          // the library's handle
  std::vector<int> group;
  std::string what;
  std::vector<uint8_t> staging;     // packed input that must outlive the request
  std::function<void()> then;       // after completion (e.g. avg's division)
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  /// `group`: world ranks in group order, containing this rank. `what` names the collective in
  /// a deadline error. Buffers are host memory; `in` and `out` may not overlap.
  virtual void allReduce(const std::vector<int> &group, const void *in, void *out, size_t count,
                         tccrt_dtype dtype, Reduction op, const std::string &what) = 0;
  /// out = the group's `bytes`-byte blocks concatenated in group order.
  virtual void allGather(const std::vector<int> &group, const void *in, void *out, size_t bytes,
                         const std::string &what) = 0;
  /// in = group-size blocks of `count` elements; out = the reduction of every rank's block at
  /// this rank's position.
  virtual void reduceScatter(const std::vector<int> &group, const void *in, void *out,
                             size_t count, tccrt_dtype dtype, Reduction op,
                             const std::string &what) = 0;
  /// Block j of `in` (each `bytes` bytes) goes to group position j; out holds the blocks
  /// received, in group order.
  virtual void allToAll(const std::vector<int> &group, const void *in, void *out, size_t bytes,
                        const std::string &what) = 0;
  /// Every rank's `buffer` gets the bytes of the rank at group position `root`.
  virtual void broadcast(const std::vector<int> &group, void *buffer, size_t bytes, int root,
                         const std::string &what) = 0;

  /// Non-blocking forms (gradients reduced while the backward pass goes on, parameters gathered
  /// while the previous layer computes): start, then
  /// finish() before the output is read or the input written; poke() lets the library progress
  /// a started collective meanwhile (MPI progresses only inside its calls).
  virtual PendingCollective startAllReduce(const std::vector<int> &group, const void *in,
                                           void *out, size_t count, tccrt_dtype dtype,
                                           Reduction op, const std::string &what) = 0;
  virtual PendingCollective startReduceScatter(const std::vector<int> &group, const void *in,
                                               void *out, size_t count, tccrt_dtype dtype,
                                               Reduction op, const std::string &what) = 0;
  /// out = the group's `bytes`-byte blocks in group order (ZeRO-3's parameter gathers, started
  /// one layer ahead of their use).
  virtual PendingCollective startAllGather(const std::vector<int> &group, const void *in,
                                           void *out, size_t bytes, const std::string &what) = 0;
  /// Point to point within `group` (pipeline stages): to or from the rank at group position
  /// `peer`; a send and a recv pair by `tag`. The send copies `in` (it may change at once) and
  /// completes at finish(); recv returns once the bytes are in `out`.
  virtual PendingCollective startSend(const std::vector<int> &group, int peer, int tag,
                                      const void *in, size_t bytes, const std::string &what) = 0;
  virtual void recv(const std::vector<int> &group, int peer, int tag, void *out, size_t bytes,
                    const std::string &what) = 0;
  virtual void finish(PendingCollective &pending) = 0;
  virtual void poke(PendingCollective &pending) = 0;

  /// Every rank of the job waits for the others (with the deadline).
  virtual void barrier(const std::string &what) = 0;

  /// Prints "tcc: error: rank R: <message> [in <context>]; aborting every rank" and ends the
  /// whole job with exit code 3 (a deadline missed outside this communicator, e.g. NCCL's).
  [[noreturn]] virtual void abortJob(const std::string &message) = 0;

  /// Names the current training step (or anything) in deadline errors.
  void setContext(const std::string &context) { context_ = context; }
  void setDeadline(double seconds) { deadlineSeconds_ = seconds; }
  double deadline() const { return deadlineSeconds_; }

protected:
  std::string context_;
  double deadlineSeconds_ = 300;
};

/// The collective deadline in seconds: $TCC_COLLECTIVE_TIMEOUT if positive, else 300.
double collectiveTimeout();

/// Runs `call`, a blocking call that has no non-blocking form (start-up, making a
/// communicator), under a watchdog: if it has not returned within `seconds`, the process prints
/// "tcc: error: <what> did not complete within S s ..." and exits with code 3 (mpirun then ends
/// the other ranks).
void runWithDeadline(double seconds, const std::string &what, const std::function<void()> &call);

/// The process's communicator: MPI when an MPI launcher started this process with more than
/// one rank, else null. Throws tcc::rt::Error when the launcher is there but MPI is not usable.
Communicator *processCommunicator();

} // namespace tcc::rt
