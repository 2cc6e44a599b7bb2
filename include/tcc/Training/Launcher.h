//===- Launcher.h - Starting the ranks of a distributed job --------------------===//
//
// `tcc train --nproc N` (and later the Python package) starts N copies of a command under the
// machine's MPI launcher (Open MPI's mpirun), waits for them and returns the job's exit status.
// Across machines, call mpirun yourself with a hostfile: the command is the same.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace tcc {

/// Whether this process is a rank of a job an MPI launcher started (OMPI_COMM_WORLD_SIZE set).
bool startedByMpiLauncher();

/// Runs `command` (argv) as `ranks` processes under mpirun, oversubscribing the cores when
/// there are fewer than `ranks` (as on a 2-core CI machine), and returns the exit status of the
/// job (mpirun ends every rank when one fails). Throws tcc::Error when mpirun cannot be found or
/// started.
int launchRanks(int ranks, const std::vector<std::string> &command);

} // namespace tcc
