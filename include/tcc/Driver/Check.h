//===- Check.h - `tcc check`: run ONNX backend-test cases ------------------===//
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tcc {

struct CheckOptions {
  std::vector<std::string> caseDirs;
  std::string device = "cpu";       // "cpu" or "cuda" (compiled), or "interp"
  bool useCache = true;              // the kernel cache
  std::vector<std::string> cudaArchs = {"sm_80", "sm_90"}; // cuda: what to compile for
  std::string layout = "auto"; // cpu: the layout pass's mode (CompileOptions::layout)
  std::string expectedFailuresFile; // lines "case-name  reason"; '#' comments
  double rtol = 1e-3, atol = 1e-5;
  unsigned jobs = 0; // 0: one per core
  bool quiet = false; // only failures and the summary
};

/// Runs every case, prints one line per case and a closing summary; returns the exit status
/// (0 when every failure is expected and every expected failure still fails).
int runCheck(const CheckOptions &options);

/// A list of expected failures: one case per line, "NAME  REASON"; blank lines and '#'
/// comments skipped. Name -> reason; empty for an empty path.
std::map<std::string, std::string> readExpectedFailures(const std::string &path);

} // namespace tcc
