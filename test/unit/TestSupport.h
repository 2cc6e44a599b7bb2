//===- TestSupport.h - Helpers shared by the unit tests -------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tcc::test {

/// Runs `f`, expects it to throw tcc::Error, and returns the message ("" and a test failure if
/// it does not throw).
template <class F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tcc::Error";
  return "";
}

/// Every element of `t` as a double, in row-major order (for EXPECT_EQ on whole tensors).
inline std::vector<double> values(const Tensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numElements(); ++i)
    v.push_back(t.getDouble(i));
  return v;
}

/// Token ids in [0, 100) and a padding mask (ones, the last position of each row zero when
/// the row is longer than 2), as int64.
inline std::vector<Tensor> tokenInputs(int64_t batch, int64_t seq, uint64_t seed, bool withMask) {
  Tensor ids(DType::I64, {batch, seq}), mask(DType::I64, {batch, seq});
  Tensor noise = randomTensor(DType::F32, {batch, seq}, seed);
  for (int64_t i = 0; i < batch * seq; ++i) {
    ids.data<int64_t>()[i] = (int64_t)std::floor(std::fabs(noise.data<float>()[i]) * 1000) % 100;
    mask.data<int64_t>()[i] = seq > 2 && i % seq == seq - 1 ? 0 : 1;
  }
  if (!withMask)
    return {ids};
  return {ids, mask};
}

} // namespace tcc::test

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "message: " << (haystack) << "\nexpected to contain: " << (needle)
