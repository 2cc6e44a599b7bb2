//===- ConvBench.cpp - GFLOP/s of the runtime's conv and gemm steps -------===//
//
// tccrt-bench [repeats [mobilenet]]: times ResNet-like convolutions (3x3 and 1x1), MobileNetV2-like
// ones (depthwise 3x3, 1x1 at small spatial sizes) and a square GEMM through
// whole artifacts (load once, run many times) on 1 and 2 threads. Not a test (target
// tccrt-bench, built on request).
#include "ArtifactBuilder.h"
#include "tcc/Runtime/tccrt.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

using namespace tcc::rt::test;

namespace {

struct Case {
  const char *name;
  std::vector<int64_t> x, w, strides, pads;
  double flops;
  ArtifactBuilder art;
};

double timeRun(tccrt::Program &program, std::vector<tccrt::Tensor> &in,
               std::vector<tccrt::Tensor> &out, int repeats) {
  std::vector<const void *> ip;
  std::vector<void *> op;
  for (auto &t : in)
    ip.push_back(t.data());
  for (auto &t : out)
    op.push_back(t.data());
  program.run(ip.data(), op.data()); // warm up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    program.run(ip.data(), op.data());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, s);
  }
  return best;
}

void bench(const char *name, ArtifactBuilder &art, double flops, int repeats) {
  auto bytes = art.finish();
  for (int threads : {1, 2}) {
    tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), threads);
    auto in = program.makeInputs();
    std::mt19937 rng(1);
    for (auto &t : in)
      for (size_t i = 0; i < t.numElements(); ++i)
        t.data<float>()[i] = (float)(rng() % 1000) / 1000.0f - 0.5f;
    std::vector<tccrt::Tensor> out;
    for (size_t i = 0; i < program.numOutputs(); ++i)
      out.emplace_back(program.output(i));
    double s = timeRun(program, in, out, repeats);
    std::printf("%-44s %d thread%s  %8.3f ms  %7.1f GFLOP/s\n", name, threads,
                threads > 1 ? "s" : " ", s * 1e3, flops / s * 1e-9);
  }
}

void convCase(const char *name, std::vector<int64_t> x, std::vector<int64_t> w, int64_t stride,
              int64_t pad, int repeats, int64_t groups = 1) {
  ArtifactBuilder art;
  int64_t oh = (x[2] + 2 * pad - w[2]) / stride + 1, ow = (x[3] + 2 * pad - w[3]) / stride + 1;
  // Weights are constants, as in a compiled model (the Winograd path caches their transform).
  std::vector<float> weights((size_t)(w[0] * w[1] * w[2] * w[3]));
  std::mt19937 rng(2);
  for (float &v : weights)
    v = (float)(rng() % 1000) / 1000.0f - 0.5f;
  uint32_t bx = art.input(fb::DType_F32, x), bw = art.constant(fb::DType_F32, w, weights.data());
  uint32_t by = art.output(fb::DType_F32, {x[0], w[0], oh, ow});
  art.conv(bx, bw, by, {stride, stride}, {pad, pad}, {pad, pad}, {1, 1}, groups);
  double flops = 2.0 * x[0] * w[0] * w[1] * w[2] * w[3] * oh * ow;
  bench(name, art, flops, repeats);
}

} // namespace

int main(int argc, char **argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  bool onlyMobileNet = argc > 2; // "tccrt-bench N mobilenet": only the MobileNet-like cases
  if (!onlyMobileNet) {
  convCase("conv 3x3 64->64 @56x56 (ResNet conv2_x)", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1,
           repeats);
  convCase("conv 3x3 128->128 @28x28 (conv3_x)", {1, 128, 28, 28}, {128, 128, 3, 3}, 1, 1,
           repeats);
  convCase("conv 3x3 256->256 @14x14 (conv4_x)", {1, 256, 14, 14}, {256, 256, 3, 3}, 1, 1,
           repeats);
  convCase("conv 3x3 512->512 @7x7 (conv5_x)", {1, 512, 7, 7}, {512, 512, 3, 3}, 1, 1,
           repeats);
  convCase("conv 3x3 128->128 @28x28 stride 2 in", {1, 128, 56, 56}, {128, 128, 3, 3}, 2, 1,
           repeats);
  convCase("conv 7x7 3->64 @224 stride 2 (stem)", {1, 3, 224, 224}, {64, 3, 7, 7}, 2, 3, repeats);
  convCase("conv 1x1 256->64 @56x56", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, repeats);
  convCase("conv 1x1 64->256 @56x56", {1, 64, 56, 56}, {256, 64, 1, 1}, 1, 0, repeats);
  convCase("conv 3x3 64->64 @56x56 batch 8", {8, 64, 56, 56}, {64, 64, 3, 3}, 1, 1,
           std::max(1, repeats / 4));
  }
  // MobileNetV2-like: depthwise 3x3 (stride 1 and 2) and 1x1 convs at small spatial sizes.
  struct Dw {
    const char *name;
    int64_t c, hw, stride;
  };
  for (Dw d : {Dw{"dw 3x3 s1 32ch @112x112", 32, 112, 1}, Dw{"dw 3x3 s2 96ch @112->56", 96, 112, 2},
               Dw{"dw 3x3 s1 144ch @56x56", 144, 56, 1}, Dw{"dw 3x3 s2 144ch @56->28", 144, 56, 2},
               Dw{"dw 3x3 s1 192ch @28x28", 192, 28, 1}, Dw{"dw 3x3 s2 192ch @28->14", 192, 28, 2},
               Dw{"dw 3x3 s1 576ch @14x14", 576, 14, 1}, Dw{"dw 3x3 s2 576ch @14->7", 576, 14, 2},
               Dw{"dw 3x3 s1 960ch @7x7", 960, 7, 1}})
    convCase(d.name, {1, d.c, d.hw, d.hw}, {d.c, 1, 3, 3}, d.stride, 1, repeats, d.c);
  struct Pw {
    const char *name;
    int64_t cin, cout, hw;
  };
  for (Pw p : {Pw{"1x1 16->96 @112x112", 16, 96, 112}, Pw{"1x1 144->24 @56x56", 144, 24, 56},
               Pw{"1x1 32->192 @28x28", 32, 192, 28}, Pw{"1x1 192->32 @28x28", 192, 32, 28},
               Pw{"1x1 96->576 @14x14", 96, 576, 14}, Pw{"1x1 576->96 @14x14", 576, 96, 14},
               Pw{"1x1 160->960 @7x7", 160, 960, 7}, Pw{"1x1 960->160 @7x7", 960, 160, 7},
               Pw{"1x1 320->1280 @7x7", 320, 1280, 7}})
    convCase(p.name, {1, p.cin, p.hw, p.hw}, {p.cout, p.cin, 1, 1}, 1, 0, repeats);
  if (onlyMobileNet)
    return 0;
  {
    ArtifactBuilder art;
    uint32_t a = art.input(fb::DType_F32, {1024, 1024}), b = art.input(fb::DType_F32, {1024, 1024});
    uint32_t c = art.output(fb::DType_F32, {1024, 1024});
    art.gemm(a, b, c);
    bench("gemm 1024x1024x1024", art, 2.0 * 1024 * 1024 * 1024, repeats);
  }
  return 0;
}
