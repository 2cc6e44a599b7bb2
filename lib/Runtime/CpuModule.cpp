//===- CpuModule.cpp - Loading a CPU shared object from memory ------------===//
#include "CpuModule.h"
#include "Program.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tcc::rt {
namespace {

bool writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= (size_t)n;
  }
  return true;
}

int createMemfd() {
#if defined(SYS_memfd_create)
  return (int)::syscall(SYS_memfd_create, "tcc-cpu-module", (unsigned)MFD_CLOEXEC);
#else
  errno = ENOSYS;
  return -1;
#endif
}

std::string dlerrorText() {
  const char *e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

} // namespace

CpuModule::CpuModule(const uint8_t *data, size_t size) {
  std::string memfdProblem;
  int fd = createMemfd();
  if (fd >= 0 && writeAll(fd, data, size)) {
    // glibc recognises an already loaded object by its path name: a module closed earlier
    // whose object could not be unloaded may still be registered under /proc/self/fd/N.
    // RTLD_NOLOAD finds such a stale entry; then use another descriptor number.
    for (int attempt = 0; attempt < 8 && fd >= 0; ++attempt) {
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      if (void *stale = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        ::dlclose(stale);
        int other = ::fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
        ::close(fd);
        fd = other;
        continue;
      }
      handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_) {
        fd_ = fd;
        return;
      }
      memfdProblem = dlerrorText();
      break;
    }
  } else {
    memfdProblem = std::string("memfd_create: ") + std::strerror(errno);
  }
  if (fd >= 0)
    ::close(fd);
  // A dlopen failure of a memfd is most likely a bad object; the temporary file also covers
  // systems without memfd or /proc (and noexec /proc mounts).
  const char *tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/tcc-cpu-module-XXXXXX";
  int tmp = ::mkstemp(path.data());
  if (tmp < 0)
    throw Error("cannot load the artifact's CPU module: " + memfdProblem +
                "; cannot create a temporary file " + path + ": " + std::strerror(errno));
  bool written = writeAll(tmp, data, size);
  ::close(tmp);
  if (!written) {
    ::unlink(path.c_str());
    throw Error("cannot write the artifact's CPU module to " + path + ": " + std::strerror(errno));
  }
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ::unlink(path.c_str());
  if (!handle_)
    throw Error("cannot load the artifact's CPU module: " + dlerrorText());
}

CpuModule::~CpuModule() {
  if (handle_)
    ::dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

CpuKernelFn CpuModule::lookup(const std::string &name) const {
  ::dlerror();
  return reinterpret_cast<CpuKernelFn>(::dlsym(handle_, name.c_str()));
}

} // namespace tcc::rt
