//===- Launcher.cpp - Starting the ranks of a distributed job -------------------===//
#include "tcc/Training/Launcher.h"
#include "tcc/Support/Tensor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

namespace tcc {

bool startedByMpiLauncher() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

namespace {

std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  }
  return "";
}

} // namespace

int launchRanks(int ranks, const std::vector<std::string> &command) {
  if (ranks < 1)
    throw Error("--nproc must be at least 1");
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty())
    throw Error("--nproc " + std::to_string(ranks) + " starts the ranks with mpirun, which is not "
                "on PATH (Debian: apt-get install openmpi-bin)");
  std::vector<std::string> args{mpirun, "-np", std::to_string(ranks)};
  if ((unsigned)ranks > std::thread::hardware_concurrency())
    args.push_back("--oversubscribe");
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0)
    throw Error("cannot start mpirun: fork failed");
  if (pid == 0) {
    execv(mpirun.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw Error("waiting for mpirun failed");
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 127 ? throw Error("cannot run " + mpirun), 127
                                      : WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

} // namespace tcc
