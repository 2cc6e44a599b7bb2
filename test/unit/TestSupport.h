//===- TestSupport.h - Helpers shared by the unit tests -------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <gtest/gtest.h>

#include <string>

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

} // namespace tcc::test

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "message: " << (haystack) << "\nexpected to contain: " << (needle)
