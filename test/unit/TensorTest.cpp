//===- TensorTest.cpp - Unit tests of tcc::Tensor and the 16-bit floats ---===//

#include "tcc/Support/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace tcc;

namespace {

uint32_t bitsOf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float floatOf(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t halfBits(float f) { return Half(f).bits; }
uint16_t bf16Bits(float f) { return BFloat16(f).bits; }

Half halfFromBits(uint16_t bits) {
  Half h;
  h.bits = bits;
  return h;
}

BFloat16 bf16FromBits(uint16_t bits) {
  BFloat16 b;
  b.bits = bits;
  return b;
}

} // namespace

// ---- Element types ---------------------------------------------------------------------------

TEST(DTypeTest, SizesAndNames) {
  struct Case {
    DType type;
    size_t size;
    const char *name;
  };
  const Case cases[] = {{DType::Bool, 1, "bool"}, {DType::I8, 1, "i8"},     {DType::I16, 2, "i16"},
                        {DType::I32, 4, "i32"},   {DType::I64, 8, "i64"},   {DType::U8, 1, "u8"},
                        {DType::U16, 2, "u16"},   {DType::U32, 4, "u32"},   {DType::U64, 8, "u64"},
                        {DType::F16, 2, "f16"},   {DType::BF16, 2, "bf16"}, {DType::F32, 4, "f32"},
                        {DType::F64, 8, "f64"}};
  for (const Case &c : cases) {
    EXPECT_EQ(dtypeSize(c.type), c.size) << c.name;
    EXPECT_STREQ(dtypeName(c.type), c.name);
  }
}

TEST(DTypeTest, Classification) {
  EXPECT_TRUE(isFloat(DType::F16));
  EXPECT_TRUE(isFloat(DType::BF16));
  EXPECT_TRUE(isFloat(DType::F64));
  EXPECT_FALSE(isFloat(DType::I32));
  EXPECT_TRUE(isSignedInt(DType::I8));
  EXPECT_FALSE(isSignedInt(DType::U8));
  EXPECT_TRUE(isUnsignedInt(DType::U64));
  EXPECT_FALSE(isUnsignedInt(DType::Bool));
  EXPECT_TRUE(isInteger(DType::U16));
  EXPECT_TRUE(isInteger(DType::I64));
  EXPECT_FALSE(isInteger(DType::Bool));
  EXPECT_FALSE(isInteger(DType::F32));
}

TEST(DTypeTest, VisitDTypeGivesTheStorageType) {
  EXPECT_EQ(visitDType(DType::BF16, [](auto tag) { return sizeof(tag); }), 2u);
  EXPECT_TRUE(
      visitDType(DType::U32, [](auto tag) { return std::is_same_v<decltype(tag), uint32_t>; }));
  EXPECT_TRUE(visitDType(
      DType::F16, [](auto tag) { return std::is_same_v<ComputeType<decltype(tag)>, float>; }));
}

// ---- Storage-only types: float8, 4- and 2-bit integers ------------------------------------------

TEST(Float8Test, EveryCodeRoundTripsAndSpecialsAreEncoded) {
  for (DType t : {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ}) {
    EXPECT_TRUE(isStorageOnly(t));
    EXPECT_EQ(dtypeSize(t), 1u);
    for (int code = 0; code < 256; ++code) {
      float v = float8ToFloat(t, (uint8_t)code);
      if (std::isnan(v) || std::isinf(v))
        continue;
      EXPECT_EQ(floatToFloat8(t, v), (uint8_t)code) << dtypeName(t) << " code " << code;
      EXPECT_EQ(floatToFloat8(t, v, /*saturate=*/false), (uint8_t)code) << dtypeName(t);
    }
  }
  // E4M3FN: largest 448 = 0x7E; the tie 464 rounds to even (448); 465 overflows.
  EXPECT_EQ(float8ToFloat(DType::F8E4M3FN, 0x7E), 448.0f);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, 464.0f, false), 0x7E);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, 465.0f, false), 0x7F); // NaN
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, 1e9f), 0x7E);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, -INFINITY), 0xFE);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, -0.0f), 0x80);
  EXPECT_EQ(float8ToFloat(DType::F8E4M3FN, 0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, std::ldexp(1.0f, -10)), 0x00); // tie to even: 0
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FN, std::ldexp(1.5f, -10)), 0x01);
  // FNUZ: no negative zero, NaN is 0x80, largest 240 (E4M3) / 57344 (E5M2).
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FNUZ, -0.0f), 0x00);
  EXPECT_TRUE(std::isnan(float8ToFloat(DType::F8E4M3FNUZ, 0x80)));
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FNUZ, NAN), 0x80);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FNUZ, 500.0f), 0x7F);
  EXPECT_EQ(float8ToFloat(DType::F8E4M3FNUZ, 0x7F), 240.0f);
  EXPECT_EQ(floatToFloat8(DType::F8E4M3FNUZ, 500.0f, false), 0x80);
  EXPECT_EQ(floatToFloat8(DType::F8E5M2FNUZ, 61440.0f, false), 0x80);
  // E5M2 has infinities: saturating casts avoid them, the others reach them.
  EXPECT_EQ(floatToFloat8(DType::F8E5M2, INFINITY), 0x7B);
  EXPECT_EQ(floatToFloat8(DType::F8E5M2, 61440.0f, false), 0x7C);
  EXPECT_EQ(floatToFloat8(DType::F8E5M2, 57344.0f, false), 0x7B);
  EXPECT_EQ(floatToFloat8(DType::F8E5M2, -1e9f, false), 0xFC);
  EXPECT_TRUE(std::isinf(float8ToFloat(DType::F8E5M2, 0xFC)));
}

TEST(SubByteIntTest, WrapsAndRanges) {
  EXPECT_EQ(subByteIntRange(DType::I4), (std::pair<int64_t, int64_t>(-8, 7)));
  EXPECT_EQ(subByteIntRange(DType::U2), (std::pair<int64_t, int64_t>(0, 3)));
  EXPECT_EQ((int8_t)wrapSubByteInt(DType::I4, -9), 7);
  EXPECT_EQ((int8_t)wrapSubByteInt(DType::I4, 8), -8);
  EXPECT_EQ((int8_t)wrapSubByteInt(DType::I4, 17), 1);
  EXPECT_EQ(wrapSubByteInt(DType::U4, -1), 15);
  EXPECT_EQ((int8_t)wrapSubByteInt(DType::I2, 2), -2);
  EXPECT_EQ(wrapSubByteInt(DType::U2, 5), 1);
  Tensor r = randomTensor(DType::I4, {64}, 3);
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_TRUE(r.getInt(i) >= -8 && r.getInt(i) <= 7);
}

// ---- Half ------------------------------------------------------------------------------------

TEST(HalfTest, ExactValues) {
  EXPECT_EQ(halfBits(1.0f), 0x3C00);
  EXPECT_EQ(halfBits(-2.0f), 0xC000);
  EXPECT_EQ(halfBits(0.0f), 0x0000);
  EXPECT_EQ(halfBits(-0.0f), 0x8000);
  EXPECT_EQ(halfBits(65504.0f), 0x7BFF);              // largest finite
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(halfBits(0.099975586f), 0x2E66);
}

TEST(HalfTest, RoundsToNearestEven) {
  float ulp = std::ldexp(1.0f, -10);               // spacing of halves in [1, 2)
  EXPECT_EQ(halfBits(1.0f + ulp / 2), 0x3C00);     // tie, down to even
  EXPECT_EQ(halfBits(1.0f + 3 * ulp / 2), 0x3C02); // tie, up to even
  EXPECT_EQ(halfBits(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 0x3C01); // above the tie
  EXPECT_EQ(halfBits(1.0f + ulp / 2 - std::ldexp(1.0f, -20)), 0x3C00); // below the tie
  EXPECT_EQ(halfBits(-(1.0f + 3 * ulp / 2)), 0xBC02);
}

TEST(HalfTest, OverflowAndSpecials) {
  EXPECT_EQ(halfBits(65519.0f), 0x7BFF); // below the midpoint to 65536
  EXPECT_EQ(halfBits(65520.0f), 0x7C00); // the midpoint rounds to even: infinity
  EXPECT_EQ(halfBits(1e10f), 0x7C00);
  EXPECT_EQ(halfBits(-1e10f), 0xFC00);
  EXPECT_EQ(halfBits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(halfBits(-std::numeric_limits<float>::infinity()), 0xFC00);
  uint16_t nan = halfBits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  // A NaN whose payload lives only in the low float bits must not become infinity.
  EXPECT_TRUE(std::isnan((float)Half(floatOf(0x7F800001))));
  EXPECT_EQ(halfBits(floatOf(0xFFC00000)) & 0x8000, 0x8000); // sign of NaN kept
}

TEST(HalfTest, Subnormals) {
  float tiny = std::ldexp(1.0f, -24);          // smallest half subnormal
  EXPECT_EQ(halfBits(tiny / 2), 0x0000);       // tie with zero: even is zero
  EXPECT_EQ(halfBits(tiny * 0.75f), 0x0001);   // above the tie
  EXPECT_EQ(halfBits(tiny * 1.5f), 0x0002);    // tie between 1 and 2: even
  EXPECT_EQ(halfBits(tiny * 2.5f), 0x0002);    // tie between 2 and 3: even
  EXPECT_EQ(halfBits(tiny * 1023.5f), 0x0400); // rounds up into the smallest normal
  EXPECT_EQ(halfBits(-tiny * 5.0f), 0x8005);
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(halfBits(floatOf(0x00000001)), 0x0000); // float subnormal
  EXPECT_EQ(halfBits(-std::ldexp(1.0f, -30)), 0x8000);
}

TEST(HalfTest, ToFloat) {
  EXPECT_EQ((float)halfFromBits(0x3C00), 1.0f);
  EXPECT_EQ((float)halfFromBits(0x3555), 0.333251953125f);
  EXPECT_EQ((float)halfFromBits(0x7BFF), 65504.0f);
  EXPECT_EQ((float)halfFromBits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ((float)halfFromBits(0x83FF), -std::ldexp(1023.0f, -24));
  EXPECT_EQ((float)halfFromBits(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan((float)halfFromBits(0x7E00)));
  EXPECT_TRUE(std::signbit((float)halfFromBits(0x8000)));
}

TEST(HalfTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    float f = halfFromBits((uint16_t)bits);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan((float)Half(f))) << bits;
    else
      ASSERT_EQ(Half(f).bits, bits);
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is correctly rounded: compare over a float sweep.
TEST(HalfTest, MatchesCompilerFloat16) {
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4093) {
    float f = floatOf((uint32_t)bits);
    if (std::isnan(f))
      continue;
    _Float16 expected = (_Float16)f;
    uint16_t expectedBits;
    std::memcpy(&expectedBits, &expected, sizeof expectedBits);
    ASSERT_EQ(halfBits(f), expectedBits) << "float bits 0x" << std::hex << bits;
  }
}
#endif

// ---- BFloat16 --------------------------------------------------------------------------------

TEST(BFloat16Test, ExactValuesAndRounding) {
  EXPECT_EQ(bf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16Bits(-3.140625f), 0xC049);
  EXPECT_EQ(bf16Bits(floatOf(0x3F808000)), 0x3F80); // tie, down to even
  EXPECT_EQ(bf16Bits(floatOf(0x3F818000)), 0x3F82); // tie, up to even
  EXPECT_EQ(bf16Bits(floatOf(0x3F808001)), 0x3F81); // above the tie
  EXPECT_EQ(bf16Bits(floatOf(0x3F807FFF)), 0x3F80); // below the tie
  EXPECT_EQ(bf16Bits(floatOf(0x00018000)), 0x0002); // subnormal tie, up to even
}

TEST(BFloat16Test, OverflowAndSpecials) {
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::max()), 0x7F80); // rounds to infinity
  EXPECT_EQ(bf16Bits(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(bf16Bits(floatOf(0x7F7F7FFF)), 0x7F7F); // just below the midpoint
  // NaNs whose payload is only in the low bits stay NaN instead of truncating to infinity.
  EXPECT_TRUE(std::isnan((float)BFloat16(floatOf(0x7F800001))));
  EXPECT_TRUE(std::isnan((float)BFloat16(floatOf(0xFFFFFFFF))));
  EXPECT_EQ(bf16Bits(-0.0f), 0x8000);
}

TEST(BFloat16Test, ToFloat) {
  EXPECT_EQ((float)bf16FromBits(0x4049), 3.140625f);
  EXPECT_EQ((float)bf16FromBits(0xC2F7), -123.5f);
  EXPECT_EQ(bitsOf((float)bf16FromBits(0x0001)), 0x00010000u);
}

TEST(BFloat16Test, EveryBFloat16RoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    float f = bf16FromBits((uint16_t)bits);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan((float)BFloat16(f))) << bits;
    else
      ASSERT_EQ(BFloat16(f).bits, bits);
  }
}

TEST(BFloat16Test, MatchesNearestEvenReference) {
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 7919) {
    float f = floatOf((uint32_t)bits);
    if (std::isnan(f) || std::isinf(f))
      continue;
    // The two bfloat16 neighbours (toward zero and away), then pick the nearer / even one.
    // Past the largest finite value the upper neighbour is infinity, which rounding treats
    // as the next power of two, 2^128.
    uint16_t low = (uint16_t)(bits >> 16), high = (uint16_t)(low + 1);
    double lowValue = (float)bf16FromBits(low);
    double highValue = (high & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), f)
                                                 : (double)(float)bf16FromBits(high);
    double dLow = std::fabs((double)f - lowValue);
    double dHigh = std::fabs((double)f - highValue);
    uint16_t expected = dLow < dHigh ? low : dHigh < dLow ? high : ((low & 1) ? high : low);
    ASSERT_EQ(bf16Bits(f), expected) << "float bits 0x" << std::hex << bits;
  }
}

// ---- Shapes ----------------------------------------------------------------------------------

TEST(ShapeTest, NumElements) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(numElements({5, 0, 7}), 0);
  EXPECT_THROW(numElements({2, -1}), Error);
  EXPECT_THROW(numElements({1LL << 40, 1LL << 40}), Error);
}

TEST(ShapeTest, ToString) {
  EXPECT_EQ(shapeToString({}), "scalar");
  EXPECT_EQ(shapeToString({7}), "7");
  EXPECT_EQ(shapeToString({2, 3, 4}), "2x3x4");
  EXPECT_EQ(shapeToString({0, 5}), "0x5");
}

TEST(ShapeTest, RowMajorStrides) {
  EXPECT_EQ(stridesOf({}), Shape{});
  EXPECT_EQ(stridesOf({5}), (Shape{1}));
  EXPECT_EQ(stridesOf({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(stridesOf({3, 0, 2}), (Shape{0, 2, 1}));
}

// ---- Tensor ----------------------------------------------------------------------------------

TEST(TensorTest, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.raw(), nullptr);
  EXPECT_FALSE(t.clone().defined());
}

TEST(TensorTest, ConstructorZeroFillsAndAligns) {
  Tensor t(DType::I32, {3, 5});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), DType::I32);
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.dim(1), 5);
  EXPECT_EQ(t.numElements(), 15);
  EXPECT_EQ(t.byteSize(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(t.data<int32_t>()[i], 0);
  EXPECT_THROW(t.dim(2), std::out_of_range);
}

TEST(TensorTest, EmptyTensorsAreDefined) {
  Tensor t(DType::F64, {4, 0});
  EXPECT_TRUE(t.defined());
  EXPECT_NE(t.raw(), nullptr);
  EXPECT_EQ(t.numElements(), 0);
  EXPECT_EQ(t.byteSize(), 0u);
  EXPECT_EQ(t.typeString(), "4x0xf64");
  EXPECT_TRUE(t.toInt64Vector().empty());
  EXPECT_THROW(Tensor(DType::F32, {-3}), Error);
}

TEST(TensorTest, FromVectorAndScalar) {
  Tensor t = Tensor::fromVector<int16_t>({2, 2}, {7, -8, 900, -1000});
  EXPECT_EQ(t.dtype(), DType::I16);
  EXPECT_EQ(t.data<int16_t>()[2], 900);
  EXPECT_THROW(Tensor::fromVector<float>({3}, {1.5f, 2.5f}), Error);
  Tensor s = Tensor::scalar<double>(-6.25);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numElements(), 1);
  EXPECT_EQ(s.getDouble(0), -6.25);
  EXPECT_EQ(s.typeString(), "f64");
}

TEST(TensorTest, CopiesBytes) {
  const uint16_t bits[] = {0x3C00, 0xC500, 0x7BFF};
  Tensor t(DType::F16, {3}, bits);
  EXPECT_EQ(t.getDouble(0), 1.0);
  EXPECT_EQ(t.getDouble(1), -5.0);
  EXPECT_EQ(t.getDouble(2), 65504.0);
  EXPECT_THROW(Tensor(DType::F16, {3}, nullptr), Error);
  EXPECT_TRUE(Tensor(DType::F16, {0}, nullptr).defined());
}

TEST(TensorTest, BoolBytesAreNormalized) {
  const uint8_t bytes[] = {0, 1, 2, 255};
  Tensor t(DType::Bool, {4}, bytes);
  EXPECT_EQ(t.toInt64Vector(), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(static_cast<const uint8_t *>(t.raw())[3], 1);
}

TEST(TensorTest, DataChecksElementSize) {
  Tensor t(DType::F32, {2});
  EXPECT_NO_THROW(t.data<float>());
  EXPECT_NO_THROW(t.data<int32_t>()); // same size: reinterpretation is allowed
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(t.data<Half>(), Error);
}

TEST(TensorTest, ReshapedSharesTheBuffer) {
  Tensor t = Tensor::fromVector<float>({2, 3}, {1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f});
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.raw(), t.raw());
  EXPECT_EQ(r.getDouble(5), 6.5);
  EXPECT_EQ(t.reshaped({6}).rank(), 1);
  EXPECT_THROW(t.reshaped({4}), Error);
  EXPECT_EQ(Tensor::fromVector<float>({1, 1}, {9.0f}).reshaped({}).rank(), 0);
}

TEST(TensorTest, CloneIsDeep) {
  Tensor t = Tensor::fromVector<int64_t>({3}, {11, 22, 33});
  Tensor c = t.clone();
  EXPECT_NE(c.raw(), t.raw());
  c.data<int64_t>()[1] = -5;
  EXPECT_EQ(t.getInt(1), 22);
  EXPECT_EQ(c.getInt(1), -5);
  EXPECT_EQ(c.shape(), t.shape());
}

TEST(TensorTest, GetDoubleConvertsEveryType) {
  EXPECT_EQ(Tensor::scalar<bool>(true).getDouble(0), 1.0);
  EXPECT_EQ(Tensor::scalar<uint8_t>(250).getDouble(0), 250.0);
  EXPECT_EQ(Tensor::scalar<int8_t>(-100).getDouble(0), -100.0);
  EXPECT_EQ(Tensor::scalar<BFloat16>(BFloat16(2.5f)).getDouble(0), 2.5);
  EXPECT_EQ(Tensor::scalar<Half>(Half(-0.375f)).getDouble(0), -0.375);
  EXPECT_EQ(Tensor::scalar<float>(0.1f).getDouble(0), (double)0.1f);
  EXPECT_THROW(Tensor::scalar<float>(1.0f).getDouble(1), Error);
  EXPECT_THROW(Tensor::scalar<float>(1.0f).getDouble(-1), Error);
}

TEST(TensorTest, GetIntTruncatesAndSaturates) {
  Tensor f = Tensor::fromVector<float>({5}, {2.75f, -2.75f, 1e30f, -1e30f, NAN});
  EXPECT_EQ(f.toInt64Vector(), (std::vector<int64_t>{2, -2, std::numeric_limits<int64_t>::max(),
                                                     std::numeric_limits<int64_t>::min(), 0}));
  EXPECT_EQ(Tensor::scalar<uint64_t>(~0ull).getInt(0), -1); // wraps
  EXPECT_EQ(Tensor::scalar<uint32_t>(4000000000u).getInt(0), 4000000000LL);
  EXPECT_EQ(Tensor::scalar<int16_t>(-32768).getInt(0), -32768);
  EXPECT_EQ(Tensor::scalar<Half>(Half(-7.5f)).getInt(0), -7);
  EXPECT_THROW(Tensor::scalar<int32_t>(3).getInt(1), Error);
}

TEST(TensorTest, TypeString) {
  EXPECT_EQ(Tensor(DType::F32, {2, 3}).typeString(), "2x3xf32");
  EXPECT_EQ(Tensor(DType::BF16, {0, 3}).typeString(), "0x3xbf16");
  EXPECT_EQ(Tensor(DType::Bool, {}).typeString(), "bool");
  EXPECT_EQ(Tensor(DType::U16, {9}).typeString(), "9xu16");
}
