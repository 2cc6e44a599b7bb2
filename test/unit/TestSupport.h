//===- TestSupport.h - Helpers shared by the unit tests -------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <gtest/gtest.h>

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

} // namespace tcc::test

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "message: " << (haystack) << "\nexpected to contain: " << (needle)
