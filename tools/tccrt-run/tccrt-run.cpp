//===- tccrt-run.cpp - Run a tcc artifact with libtccrt alone -------------===//
//
// Loads an artifact made by `tcc compile` (CPU or CUDA) through libtccrt's C API, feeds it
// inputs from .npy or TensorProto (.pb) files or seeded random values, checks its outputs
// against reference files, times runs and reports the device. A symbolic artifact (compiled
// with size ranges) runs at the sizes of its input files, or of --input-shape for random inputs. It links libtccrt and the plain
// C++ support library (tensors, .npy/TensorProto files) only: no MLIR, LLVM or protobuf, so it
// runs wherever libtccrt does (the GPU machine of scripts/gpu-session.sh included).
//
// Exit status: 0 success (and every output within tolerance with --compare), 1 an error
// (bad arguments or files, the artifact cannot load or run: the runtime's message is printed),
// 2 outputs differ from the references.
//
//===----------------------------------------------------------------------===//

#include "tcc/Runtime/tccrt.h"
#include "tcc/Support/Tensor.h"
#include "tcc/Support/TensorFiles.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace fs = std::filesystem;
using namespace tcc;

namespace {

struct Options {
  std::string artifact;
  std::vector<std::string> inputs;
  std::vector<std::string> inputShapes; // NAME=D0xD1x...
  std::optional<uint64_t> randomSeed;
  std::string outputsDir;
  std::string outputFormat = "pb";
  std::string compareDir;
  double rtol = 1e-3, atol = 1e-5;
  int warmup = 5, iters = 0;
  bool cudaGraph = false;
  int deviceOrdinal = 0;
  int threads = 0;
  bool json = false;
};

[[noreturn]] void runtimeError(const std::string &what) {
  throw Error(what + ": " + tccrt_last_error());
}

std::string inQuotes(const std::string &s) { return "'" + s + "'"; }

std::string typeOf(DType dtype, const Shape &shape) {
  return (shape.empty() ? std::string("") : shapeToString(shape) + "x") + dtypeName(dtype);
}

struct Spec {
  std::string name;
  DType dtype;
  Shape shape;
};

Spec specOf(const tccrt_tensor_info &info) {
  return {info.name, static_cast<DType>(info.dtype), Shape(info.shape, info.shape + info.rank)};
}

/// A JSON string literal.
std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += (char)c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out + "\"";
}

/// A JSON number (finite) or null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string humanBytes(uint64_t b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  os.precision(u == 0 ? 0 : 1);
  os << std::fixed << v << " " << units[u];
  return os.str();
}

/// The result of comparing one output with its reference.
struct Comparison {
  std::string reference; // the file
  int64_t mismatches = 0;
  int64_t firstMismatch = -1;
  double got = 0, expected = 0; // at the first mismatch
  double maxAbs = 0, maxRel = 0;
  std::string error; // a type/shape disagreement (then nothing else is meaningful)
  bool ok() const { return error.empty() && mismatches == 0; }
};

/// |got - ref| <= atol + rtol * |ref| for floats (NaN matches NaN, infinities must be equal;
/// f16/bf16: at least two units in the last place, float8: one, toleranceFor); exact for
/// integers and bools.
/// maxRel is over elements whose reference is not zero.
Comparison compare(const Tensor &got, const Tensor &ref, double rtol, double atol) {
  Comparison c;
  if (got.dtype() != ref.dtype() || got.shape() != ref.shape()) {
    c.error = "the output is " + got.typeString() + ", the reference " + ref.typeString();
    return c;
  }
  bool exact = !isFloat(got.dtype()) && !isFloat8(got.dtype());
  std::tie(rtol, atol) = toleranceFor(got.dtype(), rtol, atol); // 16-bit floats: two ulps
  for (int64_t i = 0; i < got.numElements(); ++i) {
    double g = got.getDouble(i), r = ref.getDouble(i);
    bool ok;
    if (exact) {
      ok = got.getInt(i) == ref.getInt(i);
    } else if (std::isnan(g) || std::isnan(r)) {
      ok = std::isnan(g) && std::isnan(r);
    } else if (std::isinf(g) || std::isinf(r)) {
      ok = g == r;
    } else {
      double d = std::fabs(g - r);
      ok = d <= atol + rtol * std::fabs(r);
      c.maxAbs = std::max(c.maxAbs, d);
      if (r != 0)
        c.maxRel = std::max(c.maxRel, d / std::fabs(r));
    }
    if (exact && g != r) {
      c.maxAbs = std::max(c.maxAbs, std::fabs(g - r));
      if (r != 0)
        c.maxRel = std::max(c.maxRel, std::fabs(g - r) / std::fabs(r));
    }
    if (!ok) {
      if (c.mismatches++ == 0) {
        c.firstMismatch = i;
        c.got = g;
        c.expected = r;
      }
    }
  }
  return c;
}

/// The reference for output `i` in `dir`: output_<i>.npy, else output_<i>.pb.
std::string referenceFile(const std::string &dir, size_t i) {
  for (const char *ext : {".npy", ".pb"}) {
    fs::path p = fs::path(dir) / ("output_" + std::to_string(i) + ext);
    if (fs::is_regular_file(p))
      return p.string();
  }
  throw Error("--compare " + inQuotes(dir) + ": no reference for output " + std::to_string(i) +
              " (expected output_" + std::to_string(i) + ".npy or output_" + std::to_string(i) +
              ".pb)");
}

double percentile(std::vector<double> sorted, double q) {
  if (sorted.empty())
    return 0;
  double pos = q * (sorted.size() - 1);
  size_t lo = (size_t)std::floor(pos), hi = (size_t)std::ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

class Program {
public:
  Program(const Options &o) {
    tccrt_options options{};
    options.num_threads = o.threads;
    options.cuda_graph = o.cudaGraph ? 1 : 0;
    options.device_ordinal = o.deviceOrdinal;
    if (tccrt_load_file(o.artifact.c_str(), &options, &p_) != TCCRT_OK)
      runtimeError("cannot load " + inQuotes(o.artifact));
  }
  ~Program() { tccrt_program_free(p_); }
  tccrt_program *get() const { return p_; }

private:
  tccrt_program *p_ = nullptr;
};

std::vector<Spec> specs(tccrt_program *p, bool inputs) {
  std::vector<Spec> out;
  size_t n = inputs ? tccrt_num_inputs(p) : tccrt_num_outputs(p);
  for (size_t i = 0; i < n; ++i) {
    tccrt_tensor_info info;
    if ((inputs ? tccrt_input_info(p, i, &info) : tccrt_output_info(p, i, &info)) != TCCRT_OK)
      runtimeError(std::string(inputs ? "input " : "output ") + std::to_string(i));
    out.push_back(specOf(info));
  }
  return out;
}

/// --input-shape NAME=D0xD1x... (sizes only; NAME= for a 0-d input).
std::pair<std::string, Shape> parseInputShape(const std::string &spec) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--input-shape " + inQuotes(spec) + " must look like NAME=D0xD1x... (e.g. "
                "ids=4x128)");
  Shape shape;
  std::string dims = spec.substr(eq + 1);
  for (size_t pos = 0; pos < dims.size();) {
    size_t next = std::min(dims.find('x', pos), dims.size());
    std::string part = dims.substr(pos, next - pos);
    if (part.empty() || part.size() > 18 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      throw Error("--input-shape " + inQuotes(spec) + ": " + inQuotes(part) +
                  " is not a dimension size");
    shape.push_back(std::stoll(part));
    pos = next + 1;
  }
  return {spec.substr(0, eq), shape};
}

/// Input i's dims as text: "m x 16" (size expressions where symbolic).
std::string dimsText(tccrt_program *p, size_t i, const Spec &s) {
  std::string out;
  for (size_t d = 0; d < s.shape.size(); ++d) {
    const char *e = tccrt_input_dim_expr(p, i, d);
    out += (d ? " x " : "") + (e ? std::string(e) : std::to_string(s.shape[d]));
  }
  return out;
}

/// The inputs: the files given, then (with --random) seeded random values. A symbolic
/// program's sizes are bound first, to the files' shapes and --input-shape's.
std::vector<Tensor> loadInputs(const Options &o, tccrt_program *p) {
  std::vector<Spec> inSpecs = specs(p, true);
  if (o.inputs.size() > inSpecs.size())
    throw Error("the artifact takes " + std::to_string(inSpecs.size()) + " input(s), " +
                std::to_string(o.inputs.size()) + " given");
  if (o.inputs.size() < inSpecs.size() && !o.randomSeed)
    throw Error("the artifact takes " + std::to_string(inSpecs.size()) + " input(s), " +
                std::to_string(o.inputs.size()) +
                " given (pass --random SEED to fill the others with seeded random values)");
  std::vector<Tensor> files;
  for (const std::string &path : o.inputs)
    files.push_back(loadTensorFile(path));
  bool symbolic = tccrt_num_symbols(p) > 0;
  if (symbolic || !o.inputShapes.empty()) {
    std::map<std::string, Shape> given;
    for (const std::string &spec : o.inputShapes) {
      auto [name, shape] = parseInputShape(spec);
      auto named = [&](const Spec &s) { return s.name == name; };
      if (std::none_of(inSpecs.begin(), inSpecs.end(), named))
        throw Error("--input-shape names " + inQuotes(name) +
                    ", which is not an input of the artifact");
      given[name] = shape;
    }
    std::vector<Shape> shapes;
    for (size_t i = 0; i < inSpecs.size(); ++i) {
      const Spec &s = inSpecs[i];
      auto it = given.find(s.name);
      if (i < files.size())
        shapes.push_back(files[i].shape());
      else if (it != given.end())
        shapes.push_back(it->second);
      else if (std::any_of(s.shape.begin(), s.shape.end(), [](int64_t d) { return d < 0; }))
        throw Error("input " + inQuotes(s.name) + " has symbolic dims " + dimsText(p, i, s) +
                    ": give --input-shape " + s.name + "=D0xD1x... or an input file");
      else
        shapes.push_back(s.shape);
    }
    std::vector<const int64_t *> data;
    std::vector<size_t> ranks;
    for (const Shape &shape : shapes) {
      data.push_back(shape.data());
      ranks.push_back(shape.size());
    }
    if (tccrt_set_input_shapes(p, data.data(), ranks.data()) != TCCRT_OK)
      runtimeError("cannot run at these input shapes");
    inSpecs = specs(p, true); // at the bound sizes
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < inSpecs.size(); ++i) {
    const Spec &s = inSpecs[i];
    if (i >= files.size()) {
      inputs.push_back(randomTensor(s.dtype, s.shape, *o.randomSeed + i));
      continue;
    }
    if (files[i].dtype() != s.dtype || files[i].shape() != s.shape)
      throw Error("input " + std::to_string(i) + " (" + inQuotes(s.name) + ") from " +
                  inQuotes(o.inputs[i]) + " is " + files[i].typeString() +
                  ", the artifact takes " + typeOf(s.dtype, s.shape));
    inputs.push_back(std::move(files[i]));
  }
  return inputs;
}

int run(const Options &o) {
  if (!fs::exists(o.artifact))
    throw Error("cannot load " + inQuotes(o.artifact) + ": no such file");
  if (o.iters < 0 || o.warmup < 0)
    throw Error("--iters and --warmup must not be negative");
  if (!o.compareDir.empty() && !fs::is_directory(o.compareDir))
    throw Error("--compare " + inQuotes(o.compareDir) + ": not a directory");
  Program program(o);
  tccrt_program *p = program.get();
  if (tccrt_is_training(p))
    throw Error(inQuotes(o.artifact) + " is a training artifact (made by tcc compile --train): "
                "run it with tcc train");
  tccrt_device device = tccrt_program_device(p);
  if (device != TCCRT_DEVICE_CUDA && o.cudaGraph)
    throw Error("--cuda-graph applies to CUDA artifacts; " + inQuotes(o.artifact) +
                " runs on the CPU");
  if (device != TCCRT_DEVICE_CUDA && o.deviceOrdinal != 0)
    throw Error("--device-ordinal applies to CUDA artifacts; " + inQuotes(o.artifact) +
                " runs on the CPU");
  std::string deviceName = tccrt_program_device_name(p);

  std::vector<Tensor> inputs = loadInputs(o, p);
  std::vector<Spec> outSpecs = specs(p, false); // (a symbolic program's: at the bound sizes)
  std::vector<Tensor> outputs;
  for (const Spec &s : outSpecs)
    outputs.emplace_back(s.dtype, s.shape);
  std::vector<const void *> inPtrs;
  for (const Tensor &t : inputs)
    inPtrs.push_back(t.raw());
  std::vector<void *> outPtrs;
  for (Tensor &t : outputs)
    outPtrs.push_back(t.raw());

  // The first run: its outputs are the ones written and compared.
  auto runOnce = [&] {
    if (tccrt_run(p, inPtrs.data(), outPtrs.data()) != TCCRT_OK)
      runtimeError("run failed");
  };
  auto t0 = std::chrono::steady_clock::now();
  runOnce();
  double firstMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  if (!o.outputsDir.empty()) {
    std::error_code ec;
    fs::create_directories(o.outputsDir, ec);
    if (ec)
      throw Error("--outputs: cannot create " + inQuotes(o.outputsDir) + ": " + ec.message());
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string path = (fs::path(o.outputsDir) / ("output_" + std::to_string(i) + "." +
                                                    o.outputFormat)).string();
      writeFileBytes(path, o.outputFormat == "npy" ? toNpyBytes(outputs[i])
                                                   : toTensorProtoBytes(outputs[i], outSpecs[i].name));
    }
  }

  std::vector<Comparison> comparisons;
  if (!o.compareDir.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string file = referenceFile(o.compareDir, i);
      Comparison c = compare(outputs[i], loadTensorFile(file), o.rtol, o.atol);
      c.reference = file;
      comparisons.push_back(c);
    }
  }

  // Timing: warm-up runs, then each timed run's wall time (tccrt_run is synchronous: a CUDA
  // run includes the host<->device copies of inputs and outputs).
  std::vector<double> times;
  if (o.iters > 0) {
    for (int i = 0; i < o.warmup; ++i)
      runOnce();
    for (int i = 0; i < o.iters; ++i) {
      auto s = std::chrono::steady_clock::now();
      runOnce();
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    }
    std::sort(times.begin(), times.end());
  }

  std::optional<tccrt_allocator_stats> deviceStats;
  if (device == TCCRT_DEVICE_CUDA) {
    tccrt_allocator_stats s;
    if (tccrt_device_allocator_stats(p, &s) != TCCRT_OK)
      runtimeError("device allocator statistics");
    deviceStats = s;
  }

  bool allOk = std::all_of(comparisons.begin(), comparisons.end(),
                           [](const Comparison &c) { return c.ok(); });
  double maxAbs = 0, maxRel = 0;
  for (const Comparison &c : comparisons) {
    maxAbs = std::max(maxAbs, c.maxAbs);
    maxRel = std::max(maxRel, c.maxRel);
  }

  if (o.json) {
    std::ostringstream js;
    js << "{\"artifact\": " << jsonString(o.artifact)
       << ", \"device\": " << jsonString(device == TCCRT_DEVICE_CUDA ? "cuda" : "cpu")
       << ", \"device_name\": " << jsonString(deviceName)
       << ", \"cuda_graph\": " << (o.cudaGraph ? "true" : "false")
       << ", \"inputs\": " << inputs.size() << ", \"outputs\": [";
    for (size_t i = 0; i < outputs.size(); ++i)
      js << (i ? ", " : "") << "{\"name\": " << jsonString(outSpecs[i].name)
         << ", \"type\": " << jsonString(typeOf(outSpecs[i].dtype, outSpecs[i].shape)) << "}";
    js << "], \"first_run_ms\": " << jsonNumber(firstMs);
    if (!comparisons.empty()) {
      js << ", \"compare\": {\"ok\": " << (allOk ? "true" : "false") << ", \"rtol\": "
         << jsonNumber(o.rtol) << ", \"atol\": " << jsonNumber(o.atol) << ", \"max_abs_error\": "
         << jsonNumber(maxAbs) << ", \"max_rel_error\": " << jsonNumber(maxRel)
         << ", \"outputs\": [";
      for (size_t i = 0; i < comparisons.size(); ++i) {
        const Comparison &c = comparisons[i];
        js << (i ? ", " : "") << "{\"reference\": " << jsonString(c.reference)
           << ", \"ok\": " << (c.ok() ? "true" : "false") << ", \"mismatches\": " << c.mismatches
           << ", \"max_abs_error\": " << jsonNumber(c.maxAbs)
           << ", \"max_rel_error\": " << jsonNumber(c.maxRel);
        if (!c.error.empty())
          js << ", \"error\": " << jsonString(c.error);
        js << "}";
      }
      js << "]}";
    }
    if (!times.empty())
      js << ", \"warmup\": " << o.warmup << ", \"iters\": " << o.iters
         << ", \"median_ms\": " << jsonNumber(percentile(times, 0.5))
         << ", \"p10_ms\": " << jsonNumber(percentile(times, 0.1))
         << ", \"p90_ms\": " << jsonNumber(percentile(times, 0.9))
         << ", \"min_ms\": " << jsonNumber(times.front())
         << ", \"max_ms\": " << jsonNumber(times.back());
    if (deviceStats)
      js << ", \"device_allocator\": {\"allocated_bytes\": " << deviceStats->allocated_bytes
         << ", \"reserved_bytes\": " << deviceStats->reserved_bytes
         << ", \"peak_allocated_bytes\": " << deviceStats->peak_allocated_bytes
         << ", \"num_allocs\": " << deviceStats->num_allocs
         << ", \"num_cache_hits\": " << deviceStats->num_cache_hits
         << ", \"num_system_allocs\": " << deviceStats->num_system_allocs
         << ", \"num_system_frees\": " << deviceStats->num_system_frees << "}";
    js << "}";
    std::cout << js.str() << "\n";
  } else {
    for (size_t i = 0; i < comparisons.size(); ++i) {
      const Comparison &c = comparisons[i];
      if (c.ok())
        continue;
      std::cerr << "output " << i << " (" << inQuotes(outSpecs[i].name) << ") vs "
                << inQuotes(c.reference) << ": ";
      if (!c.error.empty())
        std::cerr << c.error << "\n";
      else
        std::cerr << c.mismatches << " of " << outputs[i].numElements()
                  << " elements differ; first at " << c.firstMismatch << ": got " << c.got
                  << ", expected " << c.expected << "\n";
    }
    std::ostringstream line;
    line.precision(4);
    line << (comparisons.empty() ? "ran" : allOk ? "PASS" : "FAIL") << " " << o.artifact << " on "
         << deviceName << (o.cudaGraph ? " (CUDA graph)" : "") << ": " << inputs.size()
         << " input(s), " << outputs.size() << " output(s)";
    if (!comparisons.empty())
      line << "; max abs err " << maxAbs << ", max rel err " << maxRel << " (rtol " << o.rtol
           << ", atol " << o.atol << ")";
    if (!times.empty())
      line << "; median " << percentile(times, 0.5) << " ms (p10 "
           << percentile(times, 0.1) << ", p90 " << percentile(times, 0.9) << "; " << o.iters
           << " iters after " << o.warmup << " warm-up)";
    else
      line << "; first run " << firstMs << " ms";
    if (deviceStats)
      line << "; device memory: peak " << humanBytes(deviceStats->peak_allocated_bytes)
           << ", reserved " << humanBytes(deviceStats->reserved_bytes) << ", "
           << deviceStats->num_allocs << " allocs (" << deviceStats->num_cache_hits
           << " from the cache)";
    std::cout << line.str() << "\n";
  }
  return allOk ? 0 : 2;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"tccrt-run: load a tcc artifact with libtccrt, run it on its device (CPU or CUDA), "
               "check its outputs and time it. Exit status: 0 ok, 1 error, 2 outputs differ."};
  Options o;
  app.add_option("ARTIFACT", o.artifact, "artifact made by tcc compile (.tcc)");
  std::string availability;
  app.add_option("--device-available", availability,
                 "print whether artifacts for a device (cpu or cuda) can run here and why not; "
                 "exit 0 if they can, 1 if not (no ARTIFACT then)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--inputs", o.inputs,
                 "input files in the artifact's input order: .npy or ONNX TensorProto (.pb)");
  app.add_option("--input-shape", o.inputShapes,
                 "NAME=D0xD1x...: the shape of a random input of an artifact compiled with size "
                 "ranges (repeatable; inputs from files have their files' shapes)");
  uint64_t seed = 0;
  auto *random = app.add_option("--random", seed,
                                "fill inputs not given with seeded random values (input i: seed "
                                "SEED+i, the values `tcc run --seed SEED` uses)");
  app.add_option("--outputs", o.outputsDir, "write outputs as DIR/output_<i>.pb (or .npy)");
  app.add_option("--output-format", o.outputFormat, "pb (TensorProto, named) or npy")
      ->check(CLI::IsMember({"pb", "npy"}));
  app.add_option("--compare", o.compareDir,
                 "compare outputs with DIR/output_<i>.npy or .pb; exit 2 if any differs");
  app.add_option("--rtol", o.rtol, "relative tolerance: |got-ref| <= atol + rtol*|ref| (f16/bf16 outputs: at least two units in the last place, float8: one)")
      ->default_val(1e-3);
  app.add_option("--atol", o.atol, "absolute tolerance")->default_val(1e-5);
  app.add_option("--warmup", o.warmup, "untimed runs before the timed ones")->default_val(5);
  app.add_option("--iters", o.iters, "timed runs (0: run once, untimed)")->default_val(0);
  app.add_flag("--cuda-graph", o.cudaGraph,
               "CUDA artifacts: capture the launch list into a CUDA graph and replay it");
  app.add_option("--device-ordinal", o.deviceOrdinal, "CUDA artifacts: which GPU")->default_val(0);
  app.add_option("--threads", o.threads, "CPU threads (0: all cores)")->default_val(0);
  app.add_flag("--json", o.json, "print one JSON object instead of the summary line");
  CLI11_PARSE(app, argc, argv);
  if (!availability.empty()) {
    if (!o.artifact.empty()) {
      std::cerr << "tccrt-run: error: --device-available takes no ARTIFACT\n";
      return 1;
    }
    const char *reason = nullptr;
    tccrt_device device = availability == "cuda" ? TCCRT_DEVICE_CUDA : TCCRT_DEVICE_CPU;
    if (tccrt_device_available(device, &reason)) {
      std::cout << availability << ": available\n";
      return 0;
    }
    std::cout << availability << ": unavailable: " << (reason ? reason : "no reason given") << "\n";
    return 1;
  }
  if (o.artifact.empty()) {
    std::cerr << "tccrt-run: error: ARTIFACT is required\n" << app.help();
    return 1;
  }
  if (random->count())
    o.randomSeed = seed;
  try {
    return run(o);
  } catch (const Error &e) {
    std::cerr << "tccrt-run: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "tccrt-run: error: " << e.what() << "\n";
    return 1;
  }
}
