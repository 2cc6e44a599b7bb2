//===- KernelsTest.cpp - Unit tests of the reference kernels --------------===//
//
// Small explicit cases, one or more per kernel, that read as the specification of the core op
// set: expected values are written out by hand (or computed by an independent naive formula
// for the window ops).
//
//===----------------------------------------------------------------------===//

#include "tcc/Interp/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

using namespace tcc;
using namespace tcc::kernels;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T> Tensor make(Shape shape, std::vector<T> values) {
  return Tensor::fromVector<T>(std::move(shape), values);
}
Tensor f32(Shape shape, std::vector<float> values) { return make<float>(shape, values); }
Tensor f64(Shape shape, std::vector<double> values) { return make<double>(shape, values); }
Tensor i32(Shape shape, std::vector<int32_t> values) { return make<int32_t>(shape, values); }
Tensor i64(Shape shape, std::vector<int64_t> values) { return make<int64_t>(shape, values); }
Tensor boolean(Shape shape, std::vector<bool> values) { return make<bool>(shape, values); }

Tensor f16(Shape shape, std::vector<float> values) {
  std::vector<Half> halves;
  for (float v : values)
    halves.push_back(Half(v));
  return make<Half>(shape, halves);
}

Tensor bf16(Shape shape, std::vector<float> values) {
  std::vector<BFloat16> converted;
  for (float v : values)
    converted.push_back(BFloat16(v));
  return make<BFloat16>(shape, converted);
}

/// Checks dtype, shape and every element (as double; NaN matches NaN; `tolerance` is
/// relative to max(1, |expected|)).
void expectTensor(const Tensor &t, DType dtype, const Shape &shape,
                  const std::vector<double> &expected, double tolerance = 0) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(dtypeName(t.dtype()), std::string(dtypeName(dtype)));
  ASSERT_EQ(shapeToString(t.shape()), shapeToString(shape));
  ASSERT_EQ(t.numElements(), (int64_t)expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    double actual = t.getDouble((int64_t)i);
    if (std::isnan(expected[i]))
      EXPECT_TRUE(std::isnan(actual)) << "element " << i << " is " << actual;
    else if (tolerance == 0)
      EXPECT_EQ(actual, expected[i]) << "element " << i;
    else
      EXPECT_NEAR(actual, expected[i], tolerance * std::max(1.0, std::fabs(expected[i])))
          << "element " << i;
  }
}

template <class T> std::vector<T> values(const Tensor &t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numElements());
}

uint16_t halfBitsAt(const Tensor &t, int64_t i) { return t.data<Half>()[i].bits; }
uint16_t bf16BitsAt(const Tensor &t, int64_t i) { return t.data<BFloat16>()[i].bits; }

/// Runs f and checks that it throws tcc::Error whose message contains every fragment.
void expectError(const std::function<void()> &f, std::vector<std::string> fragments = {}) {
  try {
    f();
    ADD_FAILURE() << "expected tcc::Error";
  } catch (const Error &e) {
    for (const std::string &fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message '" << e.what() << "' lacks '" << fragment << "'";
  }
}

} // namespace

// ================================ Unary ========================================================

TEST(UnaryTest, BasicFloatOps) {
  Tensor x = f32({4}, {0.25f, 2.0f, 9.0f, 6.25f});
  expectTensor(unary(UnaryKind::Neg, x), DType::F32, {4}, {-0.25, -2, -9, -6.25});
  expectTensor(unary(UnaryKind::Sqrt, x), DType::F32, {4}, {0.5, std::sqrt(2.0f), 3, 2.5});
  expectTensor(unary(UnaryKind::Rsqrt, x), DType::F32, {4},
               {2, 1 / std::sqrt(2.0f), 1.0f / 3, 0.4f});
  expectTensor(unary(UnaryKind::Reciprocal, x), DType::F32, {4}, {4, 0.5, 1.0f / 9, 0.16f});
  expectTensor(unary(UnaryKind::Abs, f32({3}, {-1.5f, 0.0f, 7.0f})), DType::F32, {3}, {1.5, 0, 7});
  expectTensor(unary(UnaryKind::Exp, f32({2}, {1.0f, -2.0f})), DType::F32, {2},
               {std::exp(1.0f), std::exp(-2.0f)});
  expectTensor(unary(UnaryKind::Log, f32({3}, {1.0f, 10.0f, -1.0f})), DType::F32, {3},
               {0, std::log(10.0f), kNaN});
}

TEST(UnaryTest, TranscendentalsMatchTheC99Functions) {
  struct Case {
    UnaryKind kind;
    double (*reference)(double);
    double input;
  };
  const Case cases[] = {
      {UnaryKind::Sin, std::sin, 0.7},     {UnaryKind::Cos, std::cos, -2.1},
      {UnaryKind::Tan, std::tan, 1.2},     {UnaryKind::Asin, std::asin, 0.35},
      {UnaryKind::Acos, std::acos, -0.6},  {UnaryKind::Atan, std::atan, 3.5},
      {UnaryKind::Sinh, std::sinh, 1.4},   {UnaryKind::Cosh, std::cosh, -0.9},
      {UnaryKind::Tanh, std::tanh, 0.45},  {UnaryKind::Asinh, std::asinh, -2.5},
      {UnaryKind::Acosh, std::acosh, 3.0}, {UnaryKind::Atanh, std::atanh, 0.8},
      {UnaryKind::Erf, std::erf, 0.6},     {UnaryKind::Exp, std::exp, 2.2},
  };
  for (const Case &c : cases) {
    Tensor out = unary(c.kind, f64({1}, {c.input}));
    EXPECT_DOUBLE_EQ(out.getDouble(0), c.reference(c.input)) << (int)c.kind;
    Tensor out32 = unary(c.kind, f32({1}, {(float)c.input}));
    EXPECT_NEAR(out32.getDouble(0), c.reference(c.input), 1e-5 * std::fabs(c.reference(c.input)));
  }
}

TEST(UnaryTest, Sigmoid) {
  Tensor out = unary(UnaryKind::Sigmoid, f64({4}, {0.0, 2.0, -100.0, 800.0}));
  expectTensor(out, DType::F64, {4}, {0.5, 1 / (1 + std::exp(-2.0)), 1 / (1 + std::exp(100.0)), 1});
}

TEST(UnaryTest, RoundingOps) {
  Tensor x = f32({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f, -7.2f});
  expectTensor(unary(UnaryKind::Round, x), DType::F32, {8}, {-2, -2, -0.0, 0, 2, 2, 3, -7});
  expectTensor(unary(UnaryKind::Floor, x), DType::F32, {8}, {-3, -2, -1, 0, 1, 2, 2, -8});
  expectTensor(unary(UnaryKind::Ceil, x), DType::F32, {8}, {-2, -1, -0.0, 1, 2, 3, 3, -7});
  EXPECT_TRUE(std::signbit(unary(UnaryKind::Round, x).getDouble(2))); // round(-0.5) == -0
}

TEST(UnaryTest, SignOfFloatsKeepsZerosAndNaN) {
  Tensor out = unary(UnaryKind::Sign, f32({5}, {-3.5f, -0.0f, 0.0f, 5e-30f, NAN}));
  expectTensor(out, DType::F32, {5}, {-1, 0, 0, 1, kNaN});
  EXPECT_TRUE(std::signbit(out.getDouble(1)));
  EXPECT_FALSE(std::signbit(out.getDouble(2)));
}

TEST(UnaryTest, SignOfIntegers) {
  expectTensor(unary(UnaryKind::Sign, i32({3}, {-7, 0, 9})), DType::I32, {3}, {-1, 0, 1});
  expectTensor(unary(UnaryKind::Sign, make<uint8_t>({2}, {0, 200})), DType::U8, {2}, {0, 1});
}

TEST(UnaryTest, NaNPropagates) {
  Tensor x = f32({1}, {NAN});
  for (UnaryKind kind : {UnaryKind::Neg, UnaryKind::Abs, UnaryKind::Exp, UnaryKind::Sqrt,
                         UnaryKind::Tanh, UnaryKind::Sigmoid, UnaryKind::Floor, UnaryKind::Round})
    EXPECT_TRUE(std::isnan(unary(kind, x).getDouble(0))) << (int)kind;
}

TEST(UnaryTest, IntegerNegAndAbsWrap) {
  expectTensor(unary(UnaryKind::Neg, make<int8_t>({3}, {-128, 5, -7})), DType::I8, {3},
               {-128, -5, 7});
  expectTensor(unary(UnaryKind::Abs, make<int16_t>({3}, {-300, 42, -32768})), DType::I16, {3},
               {300, 42, -32768});
  expectTensor(unary(UnaryKind::Abs, i32({1}, {std::numeric_limits<int32_t>::min()})), DType::I32,
               {1}, {(double)std::numeric_limits<int32_t>::min()});
  EXPECT_EQ(values<uint32_t>(unary(UnaryKind::Neg, make<uint32_t>({2}, {1, 3}))),
            (std::vector<uint32_t>{0xFFFFFFFFu, 0xFFFFFFFDu}));
  expectTensor(unary(UnaryKind::Abs, make<uint64_t>({1}, {12345})), DType::U64, {1}, {12345});
}

TEST(UnaryTest, NotIsLogicalOnBoolAndBitwiseOnIntegers) {
  EXPECT_EQ(values<bool>(unary(UnaryKind::Not, boolean({2}, {true, false}))),
            (std::vector<bool>{false, true}));
  expectTensor(unary(UnaryKind::Not, make<int8_t>({2}, {0x0F, -1})), DType::I8, {2}, {-16, 0});
  expectTensor(unary(UnaryKind::Not, make<uint16_t>({1}, {0x00FF})), DType::U16, {1}, {0xFF00});
}

TEST(UnaryTest, UnsupportedDTypesThrow) {
  expectError([] { unary(UnaryKind::Exp, i32({1}, {2})); }, {"Exp", "i32"});
  expectError([] { unary(UnaryKind::Not, f32({1}, {2.0f})); }, {"Not", "f32"});
  expectError([] { unary(UnaryKind::Neg, boolean({1}, {true})); }, {"Neg", "bool"});
  expectError([] { unary(UnaryKind::Sqrt, make<uint8_t>({1}, {4})); }, {"Sqrt", "u8"});
  expectError([] { unary(UnaryKind::Neg, Tensor()); });
}

TEST(UnaryTest, HalfIsComputedInFloatAndRoundedOnce) {
  Tensor out = unary(UnaryKind::Sqrt, f16({2}, {2.0f, 0.01f}));
  EXPECT_EQ(out.dtype(), DType::F16);
  EXPECT_EQ(halfBitsAt(out, 0), Half(std::sqrt(2.0f)).bits);
  EXPECT_EQ(halfBitsAt(out, 1), Half(std::sqrt((float)Half(0.01f))).bits);
  Tensor b = unary(UnaryKind::Exp, bf16({1}, {1.0f}));
  EXPECT_EQ(bf16BitsAt(b, 0), BFloat16(std::exp(1.0f)).bits);
}

TEST(UnaryTest, ScalarsAndEmptyTensors) {
  expectTensor(unary(UnaryKind::Neg, Tensor::scalar<float>(3.5f)), DType::F32, {}, {-3.5});
  expectTensor(unary(UnaryKind::Exp, Tensor(DType::F32, {0, 3})), DType::F32, {0, 3}, {});
}

// ================================ Binary =======================================================

TEST(BinaryTest, FloatArithmetic) {
  Tensor a = f32({4}, {1.5f, -2.0f, 7.0f, 1.0f});
  Tensor b = f32({4}, {0.25f, 4.0f, -2.0f, 0.0f});
  expectTensor(binary(BinaryKind::Add, a, b), DType::F32, {4}, {1.75, 2, 5, 1});
  expectTensor(binary(BinaryKind::Sub, a, b), DType::F32, {4}, {1.25, -6, 9, 1});
  expectTensor(binary(BinaryKind::Mul, a, b), DType::F32, {4}, {0.375, -8, -14, 0});
  expectTensor(binary(BinaryKind::Div, a, b), DType::F32, {4}, {6, -0.5, -3.5, kInf});
}

TEST(BinaryTest, FloatRemainderHasTheSignOfTheDividend) {
  Tensor out = binary(BinaryKind::Rem, f64({4}, {-7.5, 7.5, 5.0, 1.0}), f64({4}, {2, -2, 2.5, 0}));
  expectTensor(out, DType::F64, {4}, {-1.5, 1.5, 0, kNaN});
}

TEST(BinaryTest, FloatPow) {
  Tensor out = binary(BinaryKind::Pow, f32({4}, {2, 9, 4, -8}), f32({4}, {10, 0.5, -1, 0.5}));
  expectTensor(out, DType::F32, {4}, {1024, 3, 0.25, kNaN});
}

TEST(BinaryTest, IntegerArithmeticWraps) {
  expectTensor(
      binary(BinaryKind::Add, make<int8_t>({2}, {100, -100}), make<int8_t>({2}, {100, -29})),
      DType::I8, {2}, {-56, 127});
  expectTensor(
      binary(BinaryKind::Mul, i32({1}, {std::numeric_limits<int32_t>::max()}), i32({1}, {2})),
      DType::I32, {1}, {-2});
  expectTensor(binary(BinaryKind::Sub, make<uint8_t>({1}, {3}), make<uint8_t>({1}, {5})), DType::U8,
               {1}, {254});
  expectTensor(binary(BinaryKind::Mul, make<uint16_t>({1}, {65535}), make<uint16_t>({1}, {65535})),
               DType::U16, {1}, {1});
  Tensor big = make<int64_t>({1}, {std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(binary(BinaryKind::Add, big, i64({1}, {3})).getInt(0),
            std::numeric_limits<int64_t>::min() + 2);
}

TEST(BinaryTest, IntegerDivisionTruncatesTowardZero) {
  Tensor a = i32({4}, {7, -7, 7, -7}), b = i32({4}, {2, 2, -2, -2});
  expectTensor(binary(BinaryKind::Div, a, b), DType::I32, {4}, {3, -3, -3, 3});
  expectTensor(binary(BinaryKind::Rem, a, b), DType::I32, {4}, {1, -1, 1, -1});
  expectTensor(binary(BinaryKind::Div, make<uint8_t>({1}, {250}), make<uint8_t>({1}, {7})),
               DType::U8, {1}, {35});
}

TEST(BinaryTest, IntegerDivisionOverflowWraps) {
  int32_t min = std::numeric_limits<int32_t>::min();
  expectTensor(binary(BinaryKind::Div, i32({1}, {min}), i32({1}, {-1})), DType::I32, {1},
               {(double)min});
  expectTensor(binary(BinaryKind::Rem, i32({1}, {min}), i32({1}, {-1})), DType::I32, {1}, {0});
}

TEST(BinaryTest, IntegerDivisionByZeroThrows) {
  expectError([] { binary(BinaryKind::Div, i32({2}, {4, 5}), i32({2}, {1, 0})); }, {"zero"});
  expectError([] { binary(BinaryKind::Rem, make<uint64_t>({1}, {4}), make<uint64_t>({1}, {0})); },
              {"zero"});
}

TEST(BinaryTest, IntegerPowIsExactWithWrapping) {
  Tensor base = i32({8}, {3, 2, -2, 1, -1, -1, 5, 0});
  Tensor exponent = i32({8}, {4, 31, 3, -5, -3, -4, -1, 0});
  expectTensor(binary(BinaryKind::Pow, base, exponent), DType::I32, {8},
               {81, (double)std::numeric_limits<int32_t>::min(), -8, 1, -1, 1, 0, 1});
  expectTensor(binary(BinaryKind::Pow, make<int8_t>({1}, {3}), make<int8_t>({1}, {5})), DType::I8,
               {1}, {-13}); // 243 wraps
  EXPECT_EQ(values<uint64_t>(
                binary(BinaryKind::Pow, make<uint64_t>({1}, {3}), make<uint64_t>({1}, {40}))),
            (std::vector<uint64_t>{12157665459056928801ull}));
}

TEST(BinaryTest, MaxMinPropagateNaN) {
  Tensor a = f32({4}, {1, NAN, 3, -0.5f}), b = f32({4}, {NAN, 2, 1, -4});
  expectTensor(binary(BinaryKind::Max, a, b), DType::F32, {4}, {kNaN, kNaN, 3, -0.5});
  expectTensor(binary(BinaryKind::Min, a, b), DType::F32, {4}, {kNaN, kNaN, 1, -4});
}

TEST(BinaryTest, MaxMinOnIntegersAndBool) {
  Tensor a = make<uint32_t>({2}, {0xFFFFFFF0u, 4}), b = make<uint32_t>({2}, {7, 9});
  expectTensor(binary(BinaryKind::Max, a, b), DType::U32, {2}, {0xFFFFFFF0u, 9});
  expectTensor(binary(BinaryKind::Min, i64({2}, {-5, 8}), i64({2}, {3, 2})), DType::I64, {2},
               {-5, 2});
  Tensor p = boolean({4}, {true, true, false, false}), q = boolean({4}, {true, false, true, false});
  EXPECT_EQ(values<bool>(binary(BinaryKind::Max, p, q)), (std::vector<bool>{1, 1, 1, 0}));
  EXPECT_EQ(values<bool>(binary(BinaryKind::Min, p, q)), (std::vector<bool>{1, 0, 0, 0}));
}

TEST(BinaryTest, LogicalAndBitwise) {
  Tensor p = boolean({4}, {true, true, false, false}), q = boolean({4}, {true, false, true, false});
  EXPECT_EQ(values<bool>(binary(BinaryKind::And, p, q)), (std::vector<bool>{1, 0, 0, 0}));
  EXPECT_EQ(values<bool>(binary(BinaryKind::Or, p, q)), (std::vector<bool>{1, 1, 1, 0}));
  EXPECT_EQ(values<bool>(binary(BinaryKind::Xor, p, q)), (std::vector<bool>{0, 1, 1, 0}));
  Tensor a = i32({2}, {0b1100, -1}), b = i32({2}, {0b1010, 0x0F0F});
  expectTensor(binary(BinaryKind::And, a, b), DType::I32, {2}, {0b1000, 0x0F0F});
  expectTensor(binary(BinaryKind::Or, a, b), DType::I32, {2}, {0b1110, -1});
  expectTensor(binary(BinaryKind::Xor, a, b), DType::I32, {2}, {0b0110, ~0x0F0F});
  expectError([] { binary(BinaryKind::And, f32({1}, {1}), f32({1}, {1})); }, {"And", "f32"});
}

TEST(BinaryTest, ShiftsOnUnsignedIntegers) {
  Tensor a = make<uint8_t>({4}, {1, 0x81, 7, 255}), s = make<uint8_t>({4}, {3, 1, 8, 200});
  expectTensor(binary(BinaryKind::ShiftLeft, a, s), DType::U8, {4}, {8, 0x02, 0, 0});
  expectTensor(binary(BinaryKind::ShiftRight, a, s), DType::U8, {4}, {0, 0x40, 0, 0});
  Tensor w = make<uint32_t>({3}, {0x80000000u, 5, 0xF0}), t = make<uint32_t>({3}, {31, 32, 4});
  expectTensor(binary(BinaryKind::ShiftRight, w, t), DType::U32, {3}, {1, 0, 0xF});
  EXPECT_EQ(values<uint64_t>(
                binary(BinaryKind::ShiftLeft, make<uint64_t>({1}, {1}), make<uint64_t>({1}, {63}))),
            (std::vector<uint64_t>{1ull << 63}));
  expectTensor(
      binary(BinaryKind::ShiftLeft, make<uint16_t>({1}, {0xFFFF}), make<uint16_t>({1}, {15})),
      DType::U16, {1}, {0x8000});
  expectError([] { binary(BinaryKind::ShiftLeft, i32({1}, {1}), i32({1}, {1})); },
              {"ShiftLeft", "i32"});
}

TEST(BinaryTest, UnsupportedAndMismatchedOperandsThrow) {
  expectError([] { binary(BinaryKind::Add, boolean({1}, {true}), boolean({1}, {true})); },
              {"Add", "bool"});
  expectError([] { binary(BinaryKind::Add, f32({2}, {1, 2}), f32({3}, {1, 2, 3})); }, {"shape"});
  expectError([] { binary(BinaryKind::Add, f32({1}, {1}), f64({1}, {1})); }, {"dtype"});
}

TEST(BinaryTest, HalfSumIsRoundedOnce) {
  // 1 + 2^-11 is exactly halfway between two halves: rounding to even gives 1.
  Tensor out =
      binary(BinaryKind::Add, f16({2}, {1.0f, 1.0f}), f16({2}, {0.00048828125f, 0.0009765625f}));
  EXPECT_EQ(halfBitsAt(out, 0), 0x3C00);
  EXPECT_EQ(halfBitsAt(out, 1), 0x3C01);
  Tensor prod = binary(BinaryKind::Mul, bf16({1}, {3.0f}), bf16({1}, {1.0078125f}));
  EXPECT_EQ(bf16BitsAt(prod, 0), BFloat16(3.0f * 1.0078125f).bits);
}

TEST(BinaryTest, ScalarsAndEmptyTensors) {
  expectTensor(binary(BinaryKind::Sub, Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(9)),
               DType::I64, {}, {-4});
  expectTensor(binary(BinaryKind::Div, Tensor(DType::I32, {2, 0}), Tensor(DType::I32, {2, 0})),
               DType::I32, {2, 0}, {});
}

// ================================ Compare and select ===========================================

TEST(CompareTest, NaNComparesUnequalToEverything) {
  Tensor a = f32({3}, {1, 2, NAN}), b = f32({3}, {2, 2, NAN});
  auto check = [&](CompareKind kind, std::vector<bool> expected) {
    Tensor out = compare(kind, a, b);
    EXPECT_EQ(out.dtype(), DType::Bool);
    EXPECT_EQ(values<bool>(out), expected) << (int)kind;
  };
  check(CompareKind::Eq, {0, 1, 0});
  check(CompareKind::Ne, {1, 0, 1});
  check(CompareKind::Lt, {1, 0, 0});
  check(CompareKind::Le, {1, 1, 0});
  check(CompareKind::Gt, {0, 0, 0});
  check(CompareKind::Ge, {0, 1, 0});
}

TEST(CompareTest, IntegersCompareByValue) {
  EXPECT_EQ(values<bool>(compare(CompareKind::Gt, make<uint32_t>({2}, {0xFFFFFFFFu, 1}),
                                 make<uint32_t>({2}, {1, 2}))),
            (std::vector<bool>{1, 0}));
  EXPECT_EQ(values<bool>(compare(CompareKind::Lt, make<int8_t>({2}, {-128, 5}),
                                 make<int8_t>({2}, {127, 5}))),
            (std::vector<bool>{1, 0}));
  EXPECT_EQ(values<bool>(compare(CompareKind::Ge, f16({2}, {0.5f, -1.0f}), f16({2}, {0.5f, 1.0f}))),
            (std::vector<bool>{1, 0}));
  EXPECT_EQ(values<bool>(
                compare(CompareKind::Eq, boolean({2}, {true, false}), boolean({2}, {true, true}))),
            (std::vector<bool>{1, 0}));
  expectError([] { compare(CompareKind::Eq, i32({1}, {1}), i64({1}, {1})); });
}

TEST(SelectTest, PicksPerElement) {
  Tensor cond = boolean({2, 2}, {true, false, false, true});
  Tensor out = select(cond, f32({2, 2}, {1.5f, 2.5f, 3.5f, 4.5f}), f32({2, 2}, {-1, -2, -3, -4}));
  expectTensor(out, DType::F32, {2, 2}, {1.5, -2, -3, 4.5});
  Tensor h = select(boolean({2}, {false, true}), f16({2}, {1, 2}), f16({2}, {7, 8}));
  expectTensor(h, DType::F16, {2}, {7, 2});
  expectTensor(
      select(Tensor::scalar<bool>(false), Tensor::scalar<int64_t>(3), Tensor::scalar<int64_t>(-3)),
      DType::I64, {}, {-3});
}

TEST(SelectTest, BadOperandsThrow) {
  expectError([] { select(i32({1}, {1}), f32({1}, {1}), f32({1}, {2})); }, {"bool"});
  expectError([] { select(boolean({2}, {1, 0}), f32({1}, {1}), f32({1}, {2})); }, {"shape"});
  expectError([] { select(boolean({1}, {1}), f32({1}, {1}), f64({1}, {2})); }, {"dtype"});
}

// ================================ Cast =========================================================

TEST(CastTest, FloatToIntTruncatesAndSaturates) {
  Tensor x = f32({7}, {2.9f, -2.9f, 1e10f, -1e10f, NAN, 0.5f, -INFINITY});
  expectTensor(cast(x, DType::I32), DType::I32, {7},
               {2, -2, 2147483647, -2147483648.0, 0, 0, -2147483648.0});
  expectTensor(cast(f32({5}, {-1.5f, 255.9f, 256.0f, 300.0f, INFINITY}), DType::U8), DType::U8, {5},
               {0, 255, 255, 255, 255});
  expectTensor(cast(f32({2}, {-129.0f, 127.99f}), DType::I8), DType::I8, {2}, {-128, 127});
}

TEST(CastTest, SaturationAtTheSixtyFourBitLimits) {
  Tensor x = f64({4}, {9.3e18, -9.3e18, 9223372036854775808.0, -9223372036854775808.0});
  EXPECT_EQ(values<int64_t>(cast(x, DType::I64)),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN}));
  Tensor u = f64({3}, {18446744073709551616.0, 1e19, -3.0});
  EXPECT_EQ(values<uint64_t>(cast(u, DType::U64)),
            (std::vector<uint64_t>{UINT64_MAX, 10000000000000000000ull, 0}));
}

TEST(CastTest, IntToIntWraps) {
  expectTensor(cast(i32({3}, {300, -129, 65}), DType::I8), DType::I8, {3}, {44, 127, 65});
  expectTensor(cast(make<int8_t>({1}, {-1}), DType::U32), DType::U32, {1}, {4294967295.0});
  expectTensor(cast(make<uint16_t>({1}, {40000}), DType::I16), DType::I16, {1}, {40000 - 65536});
  expectTensor(cast(make<uint32_t>({1}, {4000000000u}), DType::I64), DType::I64, {1},
               {4000000000.0});
}

TEST(CastTest, BoolConversions) {
  EXPECT_EQ(values<bool>(cast(f32({4}, {0.0f, -0.0f, 0.1f, NAN}), DType::Bool)),
            (std::vector<bool>{0, 0, 1, 1}));
  EXPECT_EQ(values<bool>(cast(i32({3}, {0, 7, -2}), DType::Bool)), (std::vector<bool>{0, 1, 1}));
  EXPECT_EQ(values<bool>(cast(f16({2}, {0.0f, 3.0f}), DType::Bool)), (std::vector<bool>{0, 1}));
  Tensor flags = boolean({2}, {true, false});
  expectTensor(cast(flags, DType::F32), DType::F32, {2}, {1, 0});
  expectTensor(cast(flags, DType::I64), DType::I64, {2}, {1, 0});
  EXPECT_EQ(halfBitsAt(cast(flags, DType::F16), 0), 0x3C00);
  EXPECT_EQ(bf16BitsAt(cast(flags, DType::BF16), 0), 0x3F80);
}

TEST(CastTest, FloatToFloatRoundsToNearestEven) {
  Tensor h = cast(f32({3}, {65520.0f, 1.00048828125f, -1.00146484375f}), DType::F16);
  EXPECT_EQ(halfBitsAt(h, 0), 0x7C00);
  EXPECT_EQ(halfBitsAt(h, 1), 0x3C00);
  EXPECT_EQ(halfBitsAt(h, 2), 0xBC02);
  Tensor b = cast(f32({1}, {1.01171875f}), DType::BF16); // 1 + 3*2^-8: tie, up to even
  EXPECT_EQ(bf16BitsAt(b, 0), 0x3F82);
  expectTensor(cast(f64({2}, {0.1, 1e300}), DType::F32), DType::F32, {2}, {(double)0.1f, kInf});
  expectTensor(cast(f16({2}, {0.333251953125f, -65504.0f}), DType::F64), DType::F64, {2},
               {0.333251953125, -65504});
  EXPECT_TRUE(std::isnan(cast(f64({1}, {kNaN}), DType::F16).getDouble(0)));
  EXPECT_TRUE(std::isnan(cast(bf16({1}, {NAN}), DType::F32).getDouble(0)));
}

TEST(CastTest, DoubleToHalfRoundsOnlyOnce) {
  // Just above a half / bfloat16 tie; rounding to float first would land exactly on the tie.
  double aboveHalfTie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(halfBitsAt(cast(f64({1}, {aboveHalfTie}), DType::F16), 0), 0x3C01);
  double aboveBf16Tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(bf16BitsAt(cast(f64({1}, {aboveBf16Tie}), DType::BF16), 0), 0x3F81);
  double belowTie = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  EXPECT_EQ(halfBitsAt(cast(f64({1}, {belowTie}), DType::F16), 0), 0x3C00);
}

TEST(CastTest, IntToFloat) {
  expectTensor(cast(i32({2}, {16777217, -3}), DType::F32), DType::F32, {2}, {16777216, -3});
  EXPECT_EQ(cast(make<uint64_t>({1}, {UINT64_MAX}), DType::F32).getDouble(0),
            18446744073709551616.0);
  // 2^24 + 2^16 + 1 is just above a bfloat16 tie; int -> float -> bf16 would round down.
  EXPECT_EQ(bf16BitsAt(cast(i64({1}, {(1 << 24) + (1 << 16) + 1}), DType::BF16), 0), 0x4B81);
  EXPECT_EQ(bf16BitsAt(cast(i64({1}, {-((1 << 24) + (1 << 16))}), DType::BF16), 0), 0xCB80);
  expectTensor(cast(i32({3}, {2049, 70000, -2051}), DType::F16), DType::F16, {3},
               {2048, kInf, -2052});
}

TEST(CastTest, SameTypeScalarsAndEmpty) {
  expectTensor(cast(i32({2}, {5, -6}), DType::I32), DType::I32, {2}, {5, -6});
  expectTensor(cast(Tensor::scalar<float>(-2.5f), DType::I16), DType::I16, {}, {-2});
  expectTensor(cast(Tensor(DType::F32, {0}), DType::U8), DType::U8, {0}, {});
}

// ================================ Layout =======================================================

TEST(ReshapeTest, KeepsRowMajorOrder) {
  Tensor x = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(reshape(x, {3, 2}), DType::I32, {3, 2}, {1, 2, 3, 4, 5, 6});
  expectTensor(reshape(i32({1, 1}, {8}), {}), DType::I32, {}, {8});
  expectTensor(reshape(Tensor(DType::F32, {0, 4}), {2, 0}), DType::F32, {2, 0}, {});
  expectError([&] { reshape(x, {4}); }, {"reshape"});
}

TEST(TransposeTest, PermutesDims) {
  expectTensor(transpose(i32({2, 3}, {1, 2, 3, 4, 5, 6}), {1, 0}), DType::I32, {3, 2},
               {1, 4, 2, 5, 3, 6});
  // x[a][b][c] = 100a + 10b + c; result[c][a][b] = x[a][b][c].
  std::vector<int32_t> v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        v.push_back(100 * a + 10 * b + c);
  Tensor out = transpose(i32({2, 3, 4}, v), {2, 0, 1});
  ASSERT_EQ(out.shape(), (Shape{4, 2, 3}));
  for (int c = 0; c < 4; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        EXPECT_EQ(out.getInt(c * 6 + a * 3 + b), 100 * a + 10 * b + c);
  expectTensor(transpose(Tensor::scalar<float>(1.5f), {}), DType::F32, {}, {1.5});
  expectError([] { transpose(i32({2, 2}, {1, 2, 3, 4}), {0, 0}); }, {"permutation"});
  expectError([] { transpose(i32({2, 2}, {1, 2, 3, 4}), {0}); });
}

TEST(BroadcastInDimTest, ExpandsSizeOneAndNewDims) {
  expectTensor(broadcastInDim(i32({3}, {1, 2, 3}), {2, 3}, {1}), DType::I32, {2, 3},
               {1, 2, 3, 1, 2, 3});
  expectTensor(broadcastInDim(i32({3}, {1, 2, 3}), {3, 2}, {0}), DType::I32, {3, 2},
               {1, 1, 2, 2, 3, 3});
  // [2, 1] -> [2, 2, 3] with dims {0, 2}: result[i][j][k] = x[i][0].
  expectTensor(broadcastInDim(f32({2, 1}, {7.5f, -1.5f}), {2, 2, 3}, {0, 2}), DType::F32, {2, 2, 3},
               {7.5, 7.5, 7.5, 7.5, 7.5, 7.5, -1.5, -1.5, -1.5, -1.5, -1.5, -1.5});
  expectTensor(broadcastInDim(Tensor::scalar<int64_t>(9), {2, 2}, {}), DType::I64, {2, 2},
               {9, 9, 9, 9});
  expectTensor(broadcastInDim(i32({1}, {4}), {0}, {0}), DType::I32, {0}, {});
}

TEST(BroadcastInDimTest, InvalidArgumentsThrow) {
  Tensor x = i32({2}, {1, 2});
  expectError([&] { broadcastInDim(x, {3}, {0}); }, {"broadcast"});
  expectError([&] { broadcastInDim(x, {2, 2}, {2}); });
  expectError([&] { broadcastInDim(i32({1, 1}, {1}), {2, 2}, {1, 0}); }, {"sorted"});
  expectError([&] { broadcastInDim(x, {2, 2}, {}); });
}

TEST(SliceTest, StartLimitStride) {
  Tensor x = i32({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectTensor(slice(x, {1}, {8}, {3}), DType::I32, {3}, {1, 4, 7});
  expectTensor(slice(x, {2}, {9}, {3}), DType::I32, {3}, {2, 5, 8});
  expectTensor(slice(x, {4}, {4}, {1}), DType::I32, {0}, {});
  Tensor m = i32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  expectTensor(slice(m, {1, 0}, {3, 4}, {1, 2}), DType::I32, {2, 2}, {5, 7, 9, 11});
}

TEST(SliceTest, InvalidBoundsThrow) {
  Tensor x = i32({4}, {1, 2, 3, 4});
  expectError([&] { slice(x, {0}, {5}, {1}); }, {"slice"});
  expectError([&] { slice(x, {3}, {2}, {1}); });
  expectError([&] { slice(x, {-1}, {2}, {1}); });
  expectError([&] { slice(x, {0}, {2}, {0}); });
  expectError([&] { slice(x, {0, 0}, {1, 1}, {1, 1}); });
}

TEST(ReverseTest, ReversesSelectedDims) {
  Tensor m = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(reverse(m, {1}), DType::I32, {2, 3}, {3, 2, 1, 6, 5, 4});
  expectTensor(reverse(m, {0}), DType::I32, {2, 3}, {4, 5, 6, 1, 2, 3});
  expectTensor(reverse(m, {0, 1}), DType::I32, {2, 3}, {6, 5, 4, 3, 2, 1});
  expectTensor(reverse(m, {}), DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(reverse(Tensor(DType::I32, {0, 2}), {0}), DType::I32, {0, 2}, {});
  expectError([&] { reverse(m, {2}); });
  expectError([&] { reverse(m, {1, 1}); });
}

TEST(ConcatTest, JoinsAlongAxis) {
  Tensor a = i32({2, 1}, {1, 2}), b = i32({2, 2}, {3, 4, 5, 6});
  expectTensor(concat({a, b}, 1), DType::I32, {2, 3}, {1, 3, 4, 2, 5, 6});
  expectTensor(concat({b, i32({1, 2}, {7, 8}), Tensor(DType::I32, {0, 2})}, 0), DType::I32, {3, 2},
               {3, 4, 5, 6, 7, 8});
  expectTensor(concat({f16({1}, {0.5f})}, 0), DType::F16, {1}, {0.5});
}

TEST(ConcatTest, MismatchesThrow) {
  expectError([] { concat({}, 0); });
  expectError([] { concat({i32({2, 1}, {1, 2}), i32({3, 1}, {1, 2, 3})}, 1); }, {"concat"});
  expectError([] { concat({i32({1}, {1}), i64({1}, {1})}, 0); }, {"dtype"});
  expectError([] { concat({i32({1}, {1}), i32({1}, {1})}, 1); }, {"axis"});
  expectError([] { concat({Tensor::scalar<int32_t>(1)}, 0); });
}

TEST(PadTest, ConstantMode) {
  Tensor value = Tensor::scalar<int32_t>(9);
  expectTensor(pad(i32({3}, {1, 2, 3}), value, {2}, {1}, PadMode::Constant), DType::I32, {6},
               {9, 9, 1, 2, 3, 9});
  expectTensor(pad(i32({2, 2}, {1, 2, 3, 4}), value, {1, 0}, {0, 1}, PadMode::Constant), DType::I32,
               {3, 3}, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  expectTensor(pad(Tensor(DType::I32, {0}), value, {1}, {2}, PadMode::Constant), DType::I32, {3},
               {9, 9, 9});
  Tensor h = pad(f16({1}, {2.5f}), Tensor::scalar<Half>(Half(-0.5f)), {1}, {0}, PadMode::Constant);
  expectTensor(h, DType::F16, {2}, {-0.5, 2.5});
}

TEST(PadTest, ReflectEdgeWrap) {
  Tensor none;
  expectTensor(pad(i32({4}, {1, 2, 3, 4}), none, {2}, {3}, PadMode::Reflect), DType::I32, {9},
               {3, 2, 1, 2, 3, 4, 3, 2, 1});
  expectTensor(pad(i32({3}, {1, 2, 3}), none, {2}, {1}, PadMode::Edge), DType::I32, {6},
               {1, 1, 1, 2, 3, 3});
  expectTensor(pad(i32({3}, {1, 2, 3}), none, {2}, {4}, PadMode::Wrap), DType::I32, {9},
               {2, 3, 1, 2, 3, 1, 2, 3, 1});
  // 2-D reflect pads every dim.
  expectTensor(pad(i32({2, 3}, {1, 2, 3, 4, 5, 6}), none, {1, 1}, {0, 1}, PadMode::Reflect),
               DType::I32, {3, 5}, {5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5});
  expectTensor(pad(i32({2, 2}, {1, 2, 3, 4}), none, {1, 0}, {1, 1}, PadMode::Edge), DType::I32,
               {4, 3}, {1, 2, 2, 1, 2, 2, 3, 4, 4, 3, 4, 4});
}

TEST(PadTest, InvalidPaddingThrows) {
  Tensor x = i32({3}, {1, 2, 3});
  expectError([&] { pad(x, Tensor(), {3}, {0}, PadMode::Reflect); }, {"reflect"});
  expectError([&] { pad(x, Tensor::scalar<int32_t>(0), {-1}, {0}, PadMode::Constant); });
  expectError([&] { pad(x, Tensor::scalar<float>(0), {1}, {0}, PadMode::Constant); }, {"dtype"});
  expectError([&] { pad(x, i32({1}, {0}), {1}, {0}, PadMode::Constant); }, {"0-d"});
  expectError([] { pad(Tensor(DType::I32, {0}), Tensor(), {1}, {0}, PadMode::Edge); }, {"empty"});
  expectTensor(pad(x, Tensor(), {0}, {0}, PadMode::Reflect), DType::I32, {3}, {1, 2, 3});
}

TEST(IotaTest, CountsAlongOneDim) {
  expectTensor(iota(DType::I32, {2, 3}, 1), DType::I32, {2, 3}, {0, 1, 2, 0, 1, 2});
  expectTensor(iota(DType::F16, {3, 2}, 0), DType::F16, {3, 2}, {0, 0, 1, 1, 2, 2});
  expectTensor(iota(DType::U8, {300}, 0).reshaped({300}), DType::U8, {300}, [] {
    std::vector<double> v;
    for (int i = 0; i < 300; ++i)
      v.push_back(i % 256); // wraps like any int -> u8 conversion
    return v;
  }());
  EXPECT_EQ(values<bool>(iota(DType::Bool, {3}, 0)), (std::vector<bool>{0, 1, 1}));
  expectError([] { iota(DType::I32, {2}, 1); });
  expectError([] { iota(DType::I32, {}, 0); });
}

TEST(DynamicSliceTest, StartsAreClamped) {
  Tensor x = i32({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectTensor(dynamicSlice(x, {8}, {4}), DType::I32, {4}, {6, 7, 8, 9});
  expectTensor(dynamicSlice(x, {-3}, {2}), DType::I32, {2}, {0, 1});
  expectTensor(dynamicSlice(x, {3}, {3}), DType::I32, {3}, {3, 4, 5});
  Tensor m = i32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectTensor(dynamicSlice(m, {1, 5}, {2, 2}), DType::I32, {2, 2}, {5, 6, 8, 9});
  expectError([&] { dynamicSlice(x, {0}, {11}); }, {"fit"});
  expectError([&] { dynamicSlice(x, {0, 0}, {1}); });
}

TEST(DynamicUpdateSliceTest, WritesAClampedWindowIntoACopy) {
  Tensor x = i32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor out = dynamicUpdateSlice(x, i32({2, 2}, {-1, -2, -3, -4}), {2, -1});
  expectTensor(out, DType::I32, {3, 3}, {1, 2, 3, -1, -2, 6, -3, -4, 9});
  expectTensor(x, DType::I32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}); // operand untouched
  expectTensor(dynamicUpdateSlice(x, Tensor(DType::I32, {0, 3}), {1, 1}), DType::I32, {3, 3},
               {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectError([&] { dynamicUpdateSlice(x, i32({4}, {1, 2, 3, 4}), {0}); }, {"rank"});
  expectError([&] { dynamicUpdateSlice(x, i64({1, 1}, {1}), {0, 0}); }, {"dtype"});
}

// ================================ Indexing =====================================================

TEST(GatherTest, TakesAlongAxis) {
  Tensor x = f32({3, 2}, {1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f});
  expectTensor(gather(x, i64({2}, {2, 0}), 0), DType::F32, {2, 2}, {5.5, 6.5, 1.5, 2.5});
  expectTensor(gather(x, i32({2, 2}, {1, 0, 0, 0}), 1), DType::F32, {3, 2, 2},
               {2.5, 1.5, 1.5, 1.5, 4.5, 3.5, 3.5, 3.5, 6.5, 5.5, 5.5, 5.5});
  expectTensor(gather(x, Tensor::scalar<int64_t>(1), 0), DType::F32, {2}, {3.5, 4.5});
  expectTensor(gather(x, Tensor(DType::I64, {0}), 0), DType::F32, {0, 2}, {});
}

TEST(GatherTest, BadIndicesThrow) {
  Tensor x = f32({3}, {1, 2, 3});
  expectError([&] { gather(x, i64({1}, {3}), 0); }, {"out of range"});
  expectError([&] { gather(x, i64({1}, {-1}), 0); }, {"out of range"});
  expectError([&] { gather(x, f32({1}, {0}), 0); }, {"i32 or i64"});
  expectError([&] { gather(x, i64({1}, {0}), 1); }, {"axis"});
}

TEST(GatherElementsTest, IndexesOneAxisPerElement) {
  Tensor x = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(gatherElements(x, i64({2, 2}, {2, 0, 1, 1}), 1), DType::I32, {2, 2}, {3, 1, 5, 5});
  expectTensor(gatherElements(x, i64({1, 3}, {1, 0, 1}), 0), DType::I32, {1, 3}, {4, 2, 6});
  expectError([&] { gatherElements(x, i64({2, 1}, {0, 3}), 1); }, {"out of range"});
  expectError([&] { gatherElements(x, i64({3, 1}, {0, 0, 0}), 1); }, {"exceed"});
  expectError([&] { gatherElements(x, i64({2}, {0, 0}), 1); }, {"rank"});
}

TEST(GatherNDTest, OnnxExamples) {
  Tensor x = i32({2, 2}, {0, 1, 2, 3});
  expectTensor(gatherND(x, i64({2, 2}, {0, 0, 1, 1}), 0), DType::I32, {2}, {0, 3});
  expectTensor(gatherND(x, i64({2, 1}, {1, 0}), 0), DType::I32, {2, 2}, {2, 3, 0, 1});
  Tensor cube = i32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expectTensor(gatherND(cube, i64({2, 2}, {0, 1, 1, 0}), 0), DType::I32, {2, 2}, {2, 3, 4, 5});
  expectTensor(gatherND(cube, i64({2, 1, 2}, {0, 1, 1, 0}), 0), DType::I32, {2, 1, 2},
               {2, 3, 4, 5});
}

TEST(GatherNDTest, BatchDims) {
  Tensor cube = i32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expectTensor(gatherND(cube, i64({2, 1}, {1, 0}), 1), DType::I32, {2, 2}, {2, 3, 4, 5});
  expectTensor(gatherND(cube, i64({2, 2}, {1, 0, 0, 1}), 1), DType::I32, {2}, {2, 5});
  expectError([&] { gatherND(cube, i64({3, 1}, {0, 0, 0}), 1); }, {"batch"});
  expectError([&] { gatherND(cube, i64({2, 1}, {2, 0}), 1); }, {"out of range"});
  expectError([&] { gatherND(cube, i64({2, 3}, {0, 0, 0, 0, 0, 0}), 1); }, {"tuple"});
}

TEST(ScatterElementsTest, OnnxExample) {
  Tensor x = f32({1, 5}, {1, 2, 3, 4, 5});
  Tensor out =
      scatterElements(x, i64({1, 2}, {1, 3}), f32({1, 2}, {1.1f, 2.1f}), 1, ScatterReduction::None);
  expectTensor(out, DType::F32, {1, 5}, {1, 1.1f, 3, 2.1f, 5});
  expectTensor(x, DType::F32, {1, 5}, {1, 2, 3, 4, 5}); // operand untouched
  Tensor m = i32({3, 2}, {1, 2, 3, 4, 5, 6});
  expectTensor(
      scatterElements(m, i64({1, 2}, {2, 0}), i32({1, 2}, {-7, -8}), 0, ScatterReduction::None),
      DType::I32, {3, 2}, {1, -8, 3, 4, -7, 6});
}

TEST(ScatterElementsTest, ReductionsCombineDuplicates) {
  Tensor x = i32({4}, {1, 2, 3, 4});
  Tensor idx = i64({3}, {1, 1, 3});
  Tensor up = i32({3}, {10, -5, 20});
  expectTensor(scatterElements(x, idx, up, 0, ScatterReduction::None), DType::I32, {4},
               {1, -5, 3, 20});
  expectTensor(scatterElements(x, idx, up, 0, ScatterReduction::Add), DType::I32, {4},
               {1, 7, 3, 24});
  expectTensor(scatterElements(x, idx, up, 0, ScatterReduction::Mul), DType::I32, {4},
               {1, -100, 3, 80});
  expectTensor(scatterElements(x, idx, up, 0, ScatterReduction::Max), DType::I32, {4},
               {1, 10, 3, 20});
  expectTensor(scatterElements(x, idx, up, 0, ScatterReduction::Min), DType::I32, {4},
               {1, -5, 3, 4});
  Tensor wrapped = scatterElements(make<int8_t>({1}, {120}), i64({2}, {0, 0}),
                                   make<int8_t>({2}, {5, 10}), 0, ScatterReduction::Add);
  expectTensor(wrapped, DType::I8, {1}, {-121});
  Tensor nan =
      scatterElements(f32({2}, {1, 2}), i64({1}, {0}), f32({1}, {NAN}), 0, ScatterReduction::Max);
  expectTensor(nan, DType::F32, {2}, {kNaN, 2});
}

TEST(ScatterElementsTest, HalfReductionRoundsOnce) {
  // 2048 + 1 + 1 in float is 2050; adding one at a time in half would stay at 2048.
  Tensor out = scatterElements(f16({1}, {2048}), i64({2}, {0, 0}), f16({2}, {1, 1}), 0,
                               ScatterReduction::Add);
  expectTensor(out, DType::F16, {1}, {2050});
}

TEST(ScatterElementsTest, InvalidOperandsThrow) {
  Tensor x = i32({3}, {1, 2, 3});
  expectError([&] { scatterElements(x, i64({1}, {3}), i32({1}, {0}), 0, ScatterReduction::None); },
              {"out of range"});
  expectError(
      [&] {
        scatterElements(x, i64({2}, {0, 1}), i32({1}, {0}), 0, ScatterReduction::None);
      },
      {"shape"});
  expectError([&] { scatterElements(x, i64({1}, {0}), f32({1}, {0}), 0, ScatterReduction::None); },
              {"dtype"});
  expectError(
      [] {
        scatterElements(boolean({2}, {1, 0}), i64({1}, {0}), boolean({1}, {1}), 0,
                        ScatterReduction::Add);
      },
      {"bool"});
  expectTensor(scatterElements(boolean({2}, {1, 0}), i64({1}, {1}), boolean({1}, {1}), 0,
                               ScatterReduction::Max),
               DType::Bool, {2}, {1, 1});
}

TEST(ScatterNDTest, OnnxExamples) {
  Tensor x = i32({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectTensor(
      scatterND(x, i64({4, 1}, {4, 3, 1, 7}), i32({4}, {9, 10, 11, 12}), ScatterReduction::None),
      DType::I32, {8}, {1, 11, 3, 10, 9, 6, 7, 12});
  // Whole rows of a [3, 2, 2] tensor.
  std::vector<int32_t> data;
  for (int i = 1; i <= 12; ++i)
    data.push_back(i);
  Tensor out = scatterND(i32({3, 2, 2}, data), i64({2, 1}, {0, 2}),
                         i32({2, 2, 2}, {-1, -2, -3, -4, -5, -6, -7, -8}), ScatterReduction::None);
  expectTensor(out, DType::I32, {3, 2, 2}, {-1, -2, -3, -4, 5, 6, 7, 8, -5, -6, -7, -8});
  // Single elements of a matrix.
  expectTensor(scatterND(i32({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 1, 1, 0}), i32({2}, {20, 30}),
                         ScatterReduction::None),
               DType::I32, {2, 2}, {1, 20, 30, 4});
}

TEST(ScatterNDTest, ReductionsAndErrors) {
  Tensor x = f32({3}, {1, 2, 3});
  expectTensor(scatterND(x, i64({3, 1}, {0, 2, 0}), f32({3}, {10, 20, 30}), ScatterReduction::Add),
               DType::F32, {3}, {41, 2, 23});
  expectTensor(scatterND(x, i64({3, 1}, {0, 2, 0}), f32({3}, {10, 20, 30}), ScatterReduction::Mul),
               DType::F32, {3}, {300, 2, 60});
  expectTensor(scatterND(x, i64({2, 1}, {1, 1}), f32({2}, {-4, 0.5f}), ScatterReduction::Min),
               DType::F32, {3}, {1, -4, 3});
  expectError(
      [&] {
        scatterND(x, i64({1, 1}, {3}), f32({1}, {0}), ScatterReduction::None);
      },
      {"out of range"});
  expectError(
      [&] {
        scatterND(x, i64({1, 1}, {0}), f32({2}, {0, 1}), ScatterReduction::None);
      },
      {"updates"});
  expectError(
      [&] {
        scatterND(x, i64({1, 2}, {0, 0}), f32({1}, {0}), ScatterReduction::None);
      },
      {"rank"});
}

// ================================ Reductions ===================================================

TEST(ReduceTest, SumProdMaxMin) {
  Tensor x = f32({2, 3}, {1, -2, 3, 4, 5, -6});
  expectTensor(reduce(ReduceKind::Sum, x, {1}), DType::F32, {2}, {2, 3});
  expectTensor(reduce(ReduceKind::Sum, x, {0}), DType::F32, {3}, {5, 3, -3});
  expectTensor(reduce(ReduceKind::Prod, x, {0, 1}), DType::F32, {}, {720});
  expectTensor(reduce(ReduceKind::Max, x, {1}), DType::F32, {2}, {3, 5});
  expectTensor(reduce(ReduceKind::Min, x, {0}), DType::F32, {3}, {1, -2, -6});
  expectTensor(reduce(ReduceKind::Sum, x, {}), DType::F32, {2, 3}, {1, -2, 3, 4, 5, -6});
}

TEST(ReduceTest, MiddleDimOfRank3) {
  std::vector<int32_t> v;
  for (int i = 1; i <= 24; ++i)
    v.push_back(i);
  // [2, 3, 4] summed over dim 1: out[a][c] = sum_b (12a + 4b + c + 1).
  Tensor out = reduce(ReduceKind::Sum, i32({2, 3, 4}, v), {1});
  expectTensor(out, DType::I32, {2, 4}, {15, 18, 21, 24, 51, 54, 57, 60});
}

TEST(ReduceTest, NaNPropagates) {
  Tensor x = f32({2, 2}, {NAN, 1, 2, 3});
  expectTensor(reduce(ReduceKind::Max, x, {1}), DType::F32, {2}, {kNaN, 3});
  expectTensor(reduce(ReduceKind::Min, x, {0}), DType::F32, {2}, {kNaN, 1});
  expectTensor(reduce(ReduceKind::Sum, x, {1}), DType::F32, {2}, {kNaN, 5});
}

TEST(ReduceTest, EmptyReductionsGiveTheIdentity) {
  Tensor x(DType::F32, {0, 2});
  expectTensor(reduce(ReduceKind::Sum, x, {0}), DType::F32, {2}, {0, 0});
  expectTensor(reduce(ReduceKind::Prod, x, {0}), DType::F32, {2}, {1, 1});
  expectTensor(reduce(ReduceKind::Max, x, {0}), DType::F32, {2}, {-kInf, -kInf});
  expectTensor(reduce(ReduceKind::Min, x, {0}), DType::F32, {2}, {kInf, kInf});
  expectTensor(reduce(ReduceKind::Max, Tensor(DType::I16, {0}), {0}), DType::I16, {}, {-32768});
  expectTensor(reduce(ReduceKind::Min, Tensor(DType::U8, {0}), {0}), DType::U8, {}, {255});
  expectTensor(reduce(ReduceKind::Sum, x, {1}), DType::F32, {0}, {});
}

TEST(ReduceTest, IntegersWrapAndBoolIsLogical) {
  expectTensor(reduce(ReduceKind::Sum, make<int8_t>({3}, {100, 100, 1}), {0}), DType::I8, {},
               {-55});
  expectTensor(reduce(ReduceKind::Prod, make<uint8_t>({2}, {16, 17}), {0}), DType::U8, {}, {16});
  Tensor b = boolean({2, 2}, {true, false, false, false});
  EXPECT_EQ(values<bool>(reduce(ReduceKind::Max, b, {1})), (std::vector<bool>{1, 0}));
  EXPECT_EQ(values<bool>(reduce(ReduceKind::Min, b, {0})), (std::vector<bool>{0, 0}));
  expectError([&] { reduce(ReduceKind::Sum, b, {0}); }, {"Sum", "bool"});
}

TEST(ReduceTest, HalfAccumulatesInFloat) {
  // Summing ones in half precision gets stuck at 2048; the kernel rounds only the result.
  Tensor ones = f16({3000}, std::vector<float>(3000, 1.0f));
  expectTensor(reduce(ReduceKind::Sum, ones, {0}), DType::F16, {}, {3000});
}

TEST(ReduceTest, InvalidDimsThrow) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expectError([&] { reduce(ReduceKind::Sum, x, {1, 0}); }, {"sorted"});
  expectError([&] { reduce(ReduceKind::Sum, x, {0, 0}); });
  expectError([&] { reduce(ReduceKind::Sum, x, {2}); }, {"axis"});
}

TEST(ArgReduceTest, TiesPickFirstOrLast) {
  Tensor x = f32({2, 4}, {1, 3, 3, 2, 5, 5, 0, 5});
  expectTensor(argReduce(true, x, 1, false), DType::I64, {2}, {1, 0});
  expectTensor(argReduce(true, x, 1, true), DType::I64, {2}, {2, 3});
  expectTensor(argReduce(false, x, 1, false), DType::I64, {2}, {0, 2});
  expectTensor(argReduce(false, x, 0, false), DType::I64, {4}, {0, 0, 1, 0});
  expectTensor(argReduce(true, x, 0, true), DType::I64, {4}, {1, 1, 0, 1});
}

TEST(ArgReduceTest, NaNIsTheExtreme) {
  Tensor x = f32({4}, {1, NAN, 3, NAN});
  expectTensor(argReduce(true, x, 0, false), DType::I64, {}, {1});
  expectTensor(argReduce(false, x, 0, false), DType::I64, {}, {1});
  expectTensor(argReduce(true, x, 0, true), DType::I64, {}, {3});
}

TEST(ArgReduceTest, OtherTypesAndErrors) {
  expectTensor(argReduce(true, make<uint16_t>({3}, {7, 65535, 9}), 0, false), DType::I64, {}, {1});
  expectTensor(argReduce(false, i64({3}, {-5, -9, -9}), 0, true), DType::I64, {}, {2});
  expectTensor(argReduce(true, boolean({3}, {false, true, true}), 0, false), DType::I64, {}, {1});
  expectTensor(argReduce(true, Tensor(DType::F32, {0, 3}), 1, false), DType::I64, {0}, {});
  expectError([] { argReduce(true, Tensor(DType::F32, {2, 0}), 1, false); }, {"empty"});
  expectError([] { argReduce(true, f32({2}, {1, 2}), 1, false); }, {"axis"});
}

TEST(CumsumTest, ExclusiveAndReverse) {
  Tensor x = i32({4}, {1, 2, 3, 4});
  expectTensor(cumsum(x, 0, false, false), DType::I32, {4}, {1, 3, 6, 10});
  expectTensor(cumsum(x, 0, true, false), DType::I32, {4}, {0, 1, 3, 6});
  expectTensor(cumsum(x, 0, false, true), DType::I32, {4}, {10, 9, 7, 4});
  expectTensor(cumsum(x, 0, true, true), DType::I32, {4}, {9, 7, 4, 0});
}

TEST(CumsumTest, AlongEachDimOfAMatrix) {
  Tensor m = f32({2, 3}, {1.5f, 2, 3, 4, 5, 6});
  expectTensor(cumsum(m, 0, false, false), DType::F32, {2, 3}, {1.5, 2, 3, 5.5, 7, 9});
  expectTensor(cumsum(m, 1, false, false), DType::F32, {2, 3}, {1.5, 3.5, 6.5, 4, 9, 15});
  expectTensor(cumsum(m, 1, true, true), DType::F32, {2, 3}, {5, 3, 0, 11, 6, 0});
}

TEST(CumsumTest, WrapsAndRejectsBool) {
  expectTensor(cumsum(make<uint8_t>({3}, {200, 50, 10}), 0, false, false), DType::U8, {3},
               {200, 250, 4});
  expectTensor(cumsum(f32({3}, {1, NAN, 2}), 0, false, false), DType::F32, {3}, {1, kNaN, kNaN});
  expectTensor(cumsum(Tensor(DType::F32, {0}), 0, false, false), DType::F32, {0}, {});
  expectError([] { cumsum(boolean({2}, {1, 1}), 0, false, false); }, {"bool"});
  expectError([] { cumsum(Tensor::scalar<float>(1), 0, false, false); }, {"axis"});
}

TEST(TopkTest, TiesGoToTheLowerIndex) {
  Tensor x = f32({5}, {3, 1, 3, 2, 3});
  auto [values2, indices2] = topk(x, 0, 2, true);
  expectTensor(values2, DType::F32, {2}, {3, 3});
  expectTensor(indices2, DType::I64, {2}, {0, 2});
  auto [values4, indices4] = topk(x, 0, 4, true);
  expectTensor(values4, DType::F32, {4}, {3, 3, 3, 2});
  expectTensor(indices4, DType::I64, {4}, {0, 2, 4, 3});
  auto [small, smallIndices] = topk(x, 0, 3, false);
  expectTensor(small, DType::F32, {3}, {1, 2, 3});
  expectTensor(smallIndices, DType::I64, {3}, {1, 3, 0});
}

TEST(TopkTest, AlongTheFirstDim) {
  Tensor m = i32({3, 2}, {5, -1, 9, -7, 2, 4});
  auto [values, indices] = topk(m, 0, 2, true);
  expectTensor(values, DType::I32, {2, 2}, {9, 4, 5, -1});
  expectTensor(indices, DType::I64, {2, 2}, {1, 2, 0, 0});
}

TEST(TopkTest, NaNSortsAboveInfinity) {
  Tensor x = f32({4}, {1, NAN, 5, INFINITY});
  auto [large, largeIndices] = topk(x, 0, 2, true);
  expectTensor(large, DType::F32, {2}, {kNaN, kInf});
  expectTensor(largeIndices, DType::I64, {2}, {1, 3});
  auto [small, smallIndices] = topk(x, 0, 3, false);
  expectTensor(small, DType::F32, {3}, {1, 5, kInf});
  expectTensor(smallIndices, DType::I64, {3}, {0, 2, 3});
}

TEST(TopkTest, EdgeCases) {
  Tensor x = f16({2, 3}, {0.5f, -1, 2, 7, 7, -3});
  auto [none, noneIndices] = topk(x, 1, 0, true);
  expectTensor(none, DType::F16, {2, 0}, {});
  expectTensor(noneIndices, DType::I64, {2, 0}, {});
  auto [all, allIndices] = topk(x, 1, 3, false);
  expectTensor(all, DType::F16, {2, 3}, {-1, 0.5, 2, -3, 7, 7});
  expectTensor(allIndices, DType::I64, {2, 3}, {1, 0, 2, 2, 0, 1});
  expectError([&] { topk(x, 1, 4, true); }, {"k"});
  expectError([&] { topk(x, 2, 1, true); }, {"axis"});
}

// ================================ Linear algebra ===============================================

TEST(MatmulTest, Basic) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  expectTensor(matmul(a, b), DType::F32, {2, 2}, {58, 64, 139, 154});
  expectTensor(matmul(f64({1, 2}, {0.5, -2}), f64({2, 3}, {2, 4, 6, 1, 3, 5})), DType::F64, {1, 3},
               {-1, -4, -7});
}

TEST(MatmulTest, Batched) {
  Tensor a = i32({2, 2, 2}, {1, 2, 3, 4, -1, 0, 2, 5});
  Tensor b = i32({2, 2, 1}, {5, 6, 7, -3});
  expectTensor(matmul(a, b), DType::I32, {2, 2, 1}, {17, 39, -7, -1});
}

TEST(MatmulTest, IntegersWrapInTheirOwnType) {
  Tensor a = make<int8_t>({1, 2}, {100, 100});
  Tensor b = make<int8_t>({2, 1}, {2, 1});
  expectTensor(matmul(a, b), DType::I8, {1, 1}, {44}); // 300 mod 256
  Tensor u = make<uint16_t>({1, 1}, {65535});
  expectTensor(matmul(u, u), DType::U16, {1, 1}, {1});
}

TEST(MatmulTest, HalfAccumulatesInFloat) {
  Tensor a = f16({1, 3}, {2048, 1, 1});
  Tensor b = f16({3, 1}, {1, 1, 1});
  expectTensor(matmul(a, b), DType::F16, {1, 1}, {2050});
  expectTensor(matmul(bf16({1, 2}, {1.5f, -2}), bf16({2, 1}, {4, 0.25f})), DType::BF16, {1, 1},
               {5.5});
}

TEST(MatmulTest, EmptyDimsAndErrors) {
  expectTensor(matmul(Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})), DType::F32, {2, 3},
               {0, 0, 0, 0, 0, 0});
  expectError(
      [] {
        matmul(f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {1, 2, 3, 4, 5, 6}));
      },
      {"matmul"});
  expectError([] { matmul(f32({3}, {1, 2, 3}), f32({3}, {1, 2, 3})); });
  expectError([] { matmul(Tensor(DType::F32, {2, 1, 1}), Tensor(DType::F32, {3, 1, 1})); });
  expectError([] { matmul(boolean({1, 1}, {1}), boolean({1, 1}, {1})); }, {"bool"});
}

// ---- conv ------------------------------------------------------------------------------------

namespace {

struct ConvParams {
  std::vector<int64_t> strides, padLow, padHigh, lhsDilation, rhsDilation;
  int64_t groups = 1;
};

/// An independent, literal conv: materialize the dilated and padded input, then slide.
Tensor naiveConv(const Tensor &input, const Tensor &weight, const ConvParams &p) {
  int64_t spatial = input.rank() - 2;
  Shape in(input.shape().begin() + 2, input.shape().end());
  Shape k(weight.shape().begin() + 2, weight.shape().end());
  Shape padded(spatial), out(spatial);
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * p.lhsDilation[d] + 1;
    padded[d] = dilated + p.padLow[d] + p.padHigh[d];
    int64_t span = (k[d] - 1) * p.rhsDilation[d] + 1;
    out[d] = padded[d] < span ? 0 : (padded[d] - span) / p.strides[d] + 1;
  }
  int64_t n = input.dim(0), c = input.dim(1), o = weight.dim(0);
  int64_t cg = c / p.groups, og = o / p.groups;
  // The dilated, padded input as doubles (positions outside the data are 0).
  int64_t paddedSize = numElements(padded);
  std::vector<double> image(n * c * paddedSize, 0.0);
  Shape paddedStrides = stridesOf(padded), inStrides = stridesOf(in);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t e = 0; e < numElements(in); ++e) {
        int64_t pos = 0;
        bool inside = true;
        for (int64_t d = 0; d < spatial; ++d) {
          int64_t idx = (e / inStrides[d]) % in[d];
          int64_t q = idx * p.lhsDilation[d] + p.padLow[d];
          inside &= q >= 0 && q < padded[d];
          pos += q * paddedStrides[d];
        }
        if (inside)
          image[(b * c + ch) * paddedSize + pos] =
              input.getDouble((b * c + ch) * numElements(in) + e);
      }
  Shape resultShape = {n, o};
  resultShape.insert(resultShape.end(), out.begin(), out.end());
  std::vector<double> result;
  Shape outStrides = stridesOf(out), kStrides = stridesOf(k);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t e = 0; e < numElements(out); ++e) {
        double sum = 0;
        for (int64_t ic = 0; ic < cg; ++ic)
          for (int64_t t = 0; t < numElements(k); ++t) {
            int64_t pos = 0;
            for (int64_t d = 0; d < spatial; ++d) {
              int64_t od = (e / outStrides[d]) % out[d], kd = (t / kStrides[d]) % k[d];
              pos += (od * p.strides[d] + kd * p.rhsDilation[d]) * paddedStrides[d];
            }
            int64_t channel = (oc / og) * cg + ic;
            sum += image[(b * c + channel) * paddedSize + pos] *
                   weight.getDouble((oc * cg + ic) * numElements(k) + t);
          }
        result.push_back(sum);
      }
  return f64(resultShape, result);
}

/// Deterministic, non-trivial values in [-2, 2] with a fractional part.
std::vector<double> pattern(int64_t count, int seed) {
  std::vector<double> v;
  for (int64_t i = 0; i < count; ++i)
    v.push_back((double)(((i * 37 + seed * 11) % 17) - 8) / 4.0);
  return v;
}

void expectConvMatchesNaive(const Shape &inShape, const Shape &wShape, const ConvParams &p) {
  Tensor input = f64(inShape, pattern(numElements(inShape), 1));
  Tensor weight = f64(wShape, pattern(numElements(wShape), 2));
  Tensor expected = naiveConv(input, weight, p);
  Tensor actual =
      conv(input, weight, p.strides, p.padLow, p.padHigh, p.lhsDilation, p.rhsDilation, p.groups);
  std::vector<double> want;
  for (int64_t i = 0; i < expected.numElements(); ++i)
    want.push_back(expected.getDouble(i));
  expectTensor(actual, DType::F64, expected.shape(), want, 1e-12);
}

} // namespace

TEST(ConvTest, OneDimensionalByHand) {
  Tensor x = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor w = f32({1, 1, 3}, {2, 1, -1});
  // out[o] = 2 x[o] + x[o+1] - x[o+2]
  expectTensor(conv(x, w, {1}, {0}, {0}, {1}, {1}, 1), DType::F32, {1, 1, 3}, {1, 3, 5});
  expectTensor(conv(x, w, {2}, {0}, {0}, {1}, {1}, 1), DType::F32, {1, 1, 2}, {1, 5});
  // Padding 1 / 2: the padded input is 0 1 2 3 4 5 0 0.
  expectTensor(conv(x, w, {1}, {1}, {2}, {1}, {1}, 1), DType::F32, {1, 1, 6},
               {-1, 1, 3, 5, 13, 10});
  // Negative padding crops: the input becomes 2 3 4.
  expectTensor(conv(x, w, {1}, {-1}, {-1}, {1}, {1}, 1), DType::F32, {1, 1, 1}, {3});
  // Kernel dilation 2 reads x[o], x[o+2], x[o+4].
  expectTensor(conv(x, w, {1}, {0}, {0}, {1}, {2}, 1), DType::F32, {1, 1, 1}, {0});
  expectTensor(conv(x, f32({1, 1, 2}, {1, 10}), {1}, {0}, {0}, {1}, {2}, 1), DType::F32, {1, 1, 3},
               {31, 42, 53});
}

TEST(ConvTest, LhsDilationIsTransposedConvolution) {
  // Dilated input: 1 0 2 0 3; kernel [1, 10].
  Tensor x = f32({1, 1, 3}, {1, 2, 3});
  Tensor w = f32({1, 1, 2}, {1, 10});
  expectTensor(conv(x, w, {1}, {0}, {0}, {2}, {1}, 1), DType::F32, {1, 1, 4}, {1, 20, 2, 30});
  // With padding 1 on both sides: 0 1 0 2 0 3 0.
  expectTensor(conv(x, w, {1}, {1}, {1}, {2}, {1}, 1), DType::F32, {1, 1, 6},
               {10, 1, 20, 2, 30, 3});
}

TEST(ConvTest, GroupsAndChannels) {
  // Two groups of one channel each; each output channel sees only its own input channel.
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 10, 20, 30});
  Tensor w = f32({2, 1, 2}, {1, -1, 0.5f, 2});
  expectTensor(conv(x, w, {1}, {0}, {0}, {1}, {1}, 2), DType::F32, {1, 2, 2}, {-1, -1, 45, 70});
  // One group: each output channel sums over both input channels.
  Tensor w1 = f32({1, 2, 1}, {1, 3});
  expectTensor(conv(x, w1, {1}, {0}, {0}, {1}, {1}, 1), DType::F32, {1, 1, 3}, {31, 62, 93});
}

TEST(ConvTest, TwoDimensionalMatchesNaive) {
  expectConvMatchesNaive({2, 3, 6, 5}, {4, 3, 3, 2}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1});
  expectConvMatchesNaive({1, 4, 7, 7}, {6, 2, 3, 3}, {{2, 1}, {1, -1}, {2, 0}, {1, 1}, {2, 1}, 2});
  expectConvMatchesNaive({1, 2, 4, 5}, {2, 2, 3, 2}, {{1, 2}, {2, 1}, {2, 0}, {2, 3}, {1, 1}, 1});
  expectConvMatchesNaive({1, 1, 5, 5}, {1, 1, 2, 2}, {{3, 2}, {-2, 3}, {1, -1}, {1, 2}, {2, 2}, 1});
}

TEST(ConvTest, ThreeDimensionalMatchesNaive) {
  expectConvMatchesNaive({1, 2, 4, 3, 5}, {2, 2, 2, 2, 3},
                         {{1, 2, 1}, {1, 0, -1}, {0, 1, 2}, {1, 1, 2}, {2, 1, 1}, 1});
}

TEST(ConvTest, NoSpatialDims) {
  // [N, C] x [O, C]: a matrix product with the weight transposed.
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor w = f32({3, 2}, {1, 0.5f, -1, 2, 3, -3});
  expectTensor(conv(x, w, {}, {}, {}, {}, {}, 1), DType::F32, {2, 3}, {2, 3, -3, 5, 5, -3});
}

TEST(ConvTest, IntegerAndHalf) {
  Tensor x = i32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor w = i32({1, 1, 2, 2}, {5, 6, 7, -8});
  expectTensor(conv(x, w, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1), DType::I32, {1, 1, 1, 1},
               {6});
  Tensor h =
      conv(f16({1, 1, 3}, {2048, 1, 1}), f16({1, 1, 3}, {1, 1, 1}), {1}, {0}, {0}, {1}, {1}, 1);
  expectTensor(h, DType::F16, {1, 1, 1}, {2050}); // accumulated in float
}

TEST(ConvTest, EmptyOutputAndErrors) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  expectTensor(conv(x, f32({1, 1, 3}, {1, 1, 1}), {1}, {0}, {0}, {1}, {1}, 1), DType::F32,
               {1, 1, 0}, {});
  expectError([&] { conv(x, f32({1, 2, 1}, {1, 1}), {1}, {0}, {0}, {1}, {1}, 1); }, {"groups"});
  expectError([&] { conv(x, f32({1, 1, 1}, {1}), {0}, {0}, {0}, {1}, {1}, 1); }, {"strides"});
  expectError(
      [&] {
        conv(x, f32({1, 1, 1}, {1}), {1}, {0}, {0}, {1}, {1, 1}, 1);
      },
      {"rhsDilation"});
  expectError([&] { conv(x, f32({1, 1}, {1}), {1}, {0}, {0}, {1}, {1}, 1); }, {"rank"});
}

// ---- reduceWindow ----------------------------------------------------------------------------

TEST(ReduceWindowTest, MaxPool) {
  Tensor x = f32({4, 4}, {1, 5, 2, 0, -3, 4, 8, 1, 7, 2, 6, 9, 0, 3, 1, -2});
  expectTensor(reduceWindow(ReduceKind::Max, x, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}), DType::F32,
               {2, 2}, {5, 8, 7, 9});
  expectTensor(reduceWindow(ReduceKind::Min, x, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}), DType::F32,
               {2, 2}, {-3, 0, 0, -2});
}

TEST(ReduceWindowTest, PaddingTakesTheIdentity) {
  Tensor x = f32({3}, {-4, -5, -6});
  // Max padding is -inf, not 0: all-negative windows stay negative.
  expectTensor(reduceWindow(ReduceKind::Max, x, {2}, {1}, {1}, {1}, {1}), DType::F32, {4},
               {-4, -4, -5, -6});
  expectTensor(reduceWindow(ReduceKind::Sum, x, {2}, {1}, {1}, {1}, {1}), DType::F32, {4},
               {-4, -9, -11, -6});
  expectTensor(reduceWindow(ReduceKind::Prod, x, {2}, {2}, {1}, {0}, {1}), DType::F32, {2},
               {-4, 30});
}

TEST(ReduceWindowTest, StridesDilationAndNegativePadding) {
  Tensor x = i32({7}, {1, 2, 3, 4, 5, 6, 7});
  // Window 2 with dilation 3 sums x[o] + x[o+3].
  expectTensor(reduceWindow(ReduceKind::Sum, x, {2}, {1}, {0}, {0}, {3}), DType::I32, {4},
               {5, 7, 9, 11});
  expectTensor(reduceWindow(ReduceKind::Sum, x, {3}, {2}, {0}, {0}, {1}), DType::I32, {3},
               {6, 12, 18});
  // Negative low padding drops the first two elements: 3 4 5 6 7.
  expectTensor(reduceWindow(ReduceKind::Sum, x, {2}, {2}, {-2}, {0}, {1}), DType::I32, {2},
               {7, 11});
  // out = floor((7 + 0 + 1 - 1*(3-1) - 1) / 3) + 1 = 2
  expectTensor(reduceWindow(ReduceKind::Max, x, {3}, {3}, {0}, {1}, {1}), DType::I32, {2}, {3, 6});
}

TEST(ReduceWindowTest, WindowOverEveryDim) {
  // [2, 2, 3] summed over windows of [2, 1, 2] with stride 1: batch dim included.
  Tensor x = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  expectTensor(
      reduceWindow(ReduceKind::Sum, x, {2, 1, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}),
      DType::F32, {1, 2, 2}, {33, 55, 99, 121});
}

TEST(ReduceWindowTest, NaNScalarsAndEmpty) {
  Tensor x = f32({3}, {1, NAN, 2});
  expectTensor(reduceWindow(ReduceKind::Max, x, {2}, {1}, {0}, {0}, {1}), DType::F32, {2},
               {kNaN, kNaN});
  expectTensor(reduceWindow(ReduceKind::Sum, Tensor::scalar<float>(2.5f), {}, {}, {}, {}, {}),
               DType::F32, {}, {2.5});
  expectTensor(reduceWindow(ReduceKind::Sum, f32({2}, {1, 2}), {3}, {1}, {0}, {0}, {1}), DType::F32,
               {0}, {});
  EXPECT_EQ(
      values<bool>(reduceWindow(ReduceKind::Max, boolean({3}, {0, 1, 0}), {2}, {1}, {0}, {0}, {1})),
      (std::vector<bool>{1, 1}));
  expectError(
      [] {
        reduceWindow(ReduceKind::Sum, f32({2}, {1, 2}), {0}, {1}, {0}, {0}, {1});
      },
      {"window"});
  expectError(
      [] {
        reduceWindow(ReduceKind::Sum, boolean({2}, {1, 0}), {1}, {1}, {0}, {0}, {1});
      },
      {"bool"});
}
