//===- FuzzInputFile.h - A private file for harnesses whose code reads paths -===//
//
// The checkpoint loader and the ONNX importer read files: each input is written to a file in a
// private directory, in memory (/dev/shm) where there is one, removed at exit.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace tcc::fuzz {

class InputFile {
public:
  /// Makes the directory; exits with a message if it cannot.
  explicit InputFile(const std::string &name) {
    for (const char *base : {"/dev/shm", "/tmp"}) {
      dir_ = std::string(base) + "/tcc-fuzz-XXXXXX";
      if (::mkdtemp(dir_.data())) {
        path_ = dir_ + "/" + name;
        return;
      }
    }
    std::perror("fuzz harness: mkdtemp");
    std::exit(2);
  }
  ~InputFile() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  /// Writes the input over the file; exits with a message if it cannot.
  void write(const uint8_t *data, size_t size) const {
    FILE *f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror("fuzz harness: writing the input");
      std::exit(2);
    }
  }
  const std::string &path() const { return path_; }

private:
  std::string dir_, path_;
};

} // namespace tcc::fuzz
