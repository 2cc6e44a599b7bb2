//===- TestUtil.h - Shared helpers of the runtime tests --------------------===//
#pragma once

#include "ArtifactBuilder.h"
#include "tcc/Runtime/tccrt.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tcc::rt::test {

inline std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

/// Loads the artifact, runs it on `inputs` (raw bytes, one vector per input) and returns the
/// outputs; fails the test with the runtime's message on error.
inline std::vector<tccrt::Tensor> runArtifact(const std::vector<uint8_t> &artifact,
                                              const std::vector<const void *> &inputs,
                                              int numThreads = 1) {
  tccrt::Program program = tccrt::Program::fromBuffer(artifact.data(), artifact.size(), numThreads);
  std::vector<tccrt::Tensor> in = program.makeInputs();
  EXPECT_EQ(in.size(), inputs.size());
  for (size_t i = 0; i < in.size() && i < inputs.size(); ++i)
    if (in[i].bytes())
      std::memcpy(in[i].data(), inputs[i], in[i].bytes());
  return program.run(in);
}

/// |got - want| <= atol + rtol * |want| elementwise.
template <class T>
void expectClose(const T *got, const std::vector<T> &want, double rtol, double atol,
                 const std::string &what) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      if (++bad <= 5)
        ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " elements differ";
}

} // namespace tcc::rt::test
