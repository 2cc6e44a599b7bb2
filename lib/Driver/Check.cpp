//===- Check.cpp - `tcc check`: run ONNX backend-test cases -----------------===//
//
// A case is a directory in the ONNX backend-test layout: model.onnx plus test_data_set_*/
// holding input_<i>.pb and output_<i>.pb. It passes when every data set's outputs match within
// |got - ref| <= rtol*|ref| + atol (exact for integers and bools, NaN matches NaN; for bf16
// outputs at least rtol 2^-6, atol 2^-8, for f16 ones rtol 2^-9, atol 2^-12, for float8 ones
// one unit in the last place: toleranceFor).
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/Check.h"
#include "tcc/Driver/Execute.h"
#include "tcc/Driver/Pipeline.h"

#include "tcc/Frontend/OnnxModel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace tcc {
namespace {

enum class Verdict { Pass, Fail, Skip };

struct CaseResult {
  Verdict verdict;
  std::string detail;
};

/// Thrown for cases the check cannot judge (non-tensor data).
struct SkipCase {
  std::string reason;
};

std::vector<fs::path> sortedFiles(const fs::path &dir, const std::string &prefix) {
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      files.push_back(e.path());
  // input_10 after input_9.
  std::sort(files.begin(), files.end(), [&](const fs::path &a, const fs::path &b) {
    auto num = [&](const fs::path &p) {
      return std::stoll(p.stem().string().substr(prefix.size()));
    };
    return num(a) < num(b);
  });
  return files;
}

Tensor readCaseTensor(const fs::path &file) {
  try {
    return readTensorFile(file.string());
  } catch (const Error &e) {
    throw SkipCase{e.what()};
  }
}

/// Empty when equal, else a description of the first mismatch.
std::string compareTensors(const Tensor &got, const Tensor &ref, double rtol, double atol) {
  if (got.dtype() != ref.dtype())
    return std::string("dtype ") + dtypeName(got.dtype()) + " != expected " + dtypeName(ref.dtype());
  if (got.shape() != ref.shape())
    return "shape " + shapeToString(got.shape()) + " != expected " + shapeToString(ref.shape());
  bool exact = !isFloat(ref.dtype()) && !isFloat8(ref.dtype());
  std::tie(rtol, atol) = toleranceFor(ref.dtype(), rtol, atol);
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < ref.numElements(); ++i) {
    double g = got.getDouble(i), r = ref.getDouble(i);
    bool ok;
    if (exact)
      ok = got.getInt(i) == ref.getInt(i) && g == r;
    else if (std::isnan(r) || std::isnan(g))
      ok = std::isnan(r) && std::isnan(g);
    else if (std::isinf(r) || std::isinf(g))
      ok = g == r;
    else
      ok = std::fabs(g - r) <= rtol * std::fabs(r) + atol;
    if (!ok) {
      if (first < 0)
        first = i;
      ++bad;
      if (!exact && !std::isnan(g) && !std::isnan(r))
        worst = std::max(worst, std::fabs(g - r));
    }
  }
  if (!bad)
    return "";
  std::ostringstream os;
  os << bad << " of " << ref.numElements() << " elements differ; first at " << first << ": got "
     << got.getDouble(first) << ", expected " << ref.getDouble(first);
  if (worst > 0)
    os << "; max abs error " << worst;
  return os.str();
}

CaseResult runCase(const fs::path &dir, const CheckOptions &options) {
  try {
    fs::path model = dir / "model.onnx";
    if (!fs::exists(model))
      return {Verdict::Fail, "no model.onnx in " + dir.string()};
    std::vector<fs::path> sets;
    for (const auto &e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty())
      return {Verdict::Skip, "no test_data_set_* directory"};
    for (const auto &set : sets) {
      LoadOptions load;
      for (const auto &f : sortedFiles(set, "input_"))
        load.inputs.push_back(readCaseTensor(f));
      std::vector<Tensor> expected;
      for (const auto &f : sortedFiles(set, "output_"))
        expected.push_back(readCaseTensor(f));
      LoadedModel loaded = loadModel(model.string(), load);
      CompileOptions compile;
      compile.useCache = options.useCache;
      compile.cudaArchs = options.cudaArchs;
      compile.layout = options.layout;
      // Cases run in parallel: one thread each.
      RunOptions run;
      run.threads = 1;
      std::vector<Tensor> got = execute(loaded, load.inputs.size(), options.device, compile, run);
      if (got.size() != expected.size())
        return {Verdict::Fail, set.filename().string() + ": " + std::to_string(got.size()) +
                                   " outputs, expected " + std::to_string(expected.size())};
      for (size_t i = 0; i < got.size(); ++i) {
        std::string diff = compareTensors(got[i], expected[i], options.rtol, options.atol);
        if (!diff.empty())
          return {Verdict::Fail, set.filename().string() + " output " + std::to_string(i) + " ('" +
                                     loaded.imported.outputNames[i] + "'): " + diff};
      }
    }
    return {Verdict::Pass, ""};
  } catch (const SkipCase &s) {
    return {Verdict::Skip, s.reason};
  } catch (const std::exception &e) {
    return {Verdict::Fail, e.what()};
  }
}

/// "case-name  reason" per line; blank lines and '#' comments ignored.

/// The case's name: its directory name (suites share no names in the ONNX test data).
std::string caseName(const fs::path &dir) {
  fs::path p = dir;
  if (p.filename().empty())
    p = p.parent_path();
  return p.filename().string();
}

} // namespace

std::map<std::string, std::string> readExpectedFailures(const std::string &path) {
  std::map<std::string, std::string> out;
  if (path.empty())
    return out;
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open expected-failures file '" + path + "'");
  std::string line;
  while (std::getline(in, line)) {
    auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#')
      continue;
    auto end = line.find_first_of(" \t", start);
    std::string name = line.substr(start, end - start);
    std::string reason;
    if (end != std::string::npos) {
      auto r = line.find_first_not_of(" \t", end);
      if (r != std::string::npos)
        reason = line.substr(r);
    }
    out[name] = reason;
  }
  return out;
}

int runCheck(const CheckOptions &options) {
  if (options.device != "interp" && options.device != "cpu" && options.device != "cuda")
    throw Error("unknown device '" + options.device +
                "': tcc check runs on 'cpu', 'cuda' or 'interp'");
  auto expected = readExpectedFailures(options.expectedFailuresFile);
  std::vector<fs::path> cases;
  for (const auto &d : options.caseDirs) {
    if (!fs::is_directory(d))
      throw Error("'" + d + "' is not a directory");
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.push_back(d);
      continue;
    }
    // A suite: every subdirectory holding a model.onnx, in name order.
    std::vector<fs::path> suite;
    for (const auto &e : fs::directory_iterator(d))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx"))
        suite.push_back(e.path());
    if (suite.empty())
      throw Error("'" + d + "' holds no model.onnx, nor case directories that do");
    std::sort(suite.begin(), suite.end());
    cases.insert(cases.end(), suite.begin(), suite.end());
  }
  std::vector<CaseResult> results(cases.size());
  std::atomic<size_t> next{0};
  std::mutex printMutex;
  size_t printed = 0;
  std::vector<bool> done(cases.size(), false);
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  int passed = 0, failed = 0, skipped = 0, xfailed = 0, xpassed = 0;

  auto report = [&](size_t i) {
    std::string name = caseName(cases[i]);
    const CaseResult &r = results[i];
    auto xf = expected.find(name);
    std::string line;
    switch (r.verdict) {
    case Verdict::Pass:
      if (xf != expected.end()) {
        ++xpassed;
        line = "XPASS " + name + ": listed as an expected failure but passes; remove it from the list";
      } else {
        ++passed;
        line = options.quiet ? "" : "PASS  " + name;
      }
      break;
    case Verdict::Fail:
      if (xf != expected.end()) {
        ++xfailed;
        line = options.quiet ? "" : "XFAIL " + name + " (" + xf->second + ")";
      } else {
        ++failed;
        line = "FAIL  " + name + ": " + r.detail;
      }
      break;
    case Verdict::Skip:
      ++skipped;
      line = "SKIP  " + name + ": " + r.detail;
      break;
    }
    if (!line.empty())
      std::cout << line << "\n" << std::flush;
  };

  auto worker = [&] {
    for (size_t i; (i = next++) < cases.size();) {
      results[i] = runCase(cases[i], options);
      std::lock_guard<std::mutex> lock(printMutex);
      done[i] = true;
      while (printed < cases.size() && done[printed])
        report(printed++);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<size_t>(jobs, cases.size()); ++t)
    threads.emplace_back(worker);
  for (auto &t : threads)
    t.join();

  std::cout << passed << " passed, " << failed + xpassed << " failed, " << skipped << " skipped";
  if (xfailed)
    std::cout << ", " << xfailed << " xfailed";
  std::cout << "\n";
  return failed + xpassed ? 1 : 0;
}

} // namespace tcc
