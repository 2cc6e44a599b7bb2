//===- SgemmAmx.cpp - bf16 GEMM microkernels on AMX tiles ------------------===//
//
// Compiled with -mavx512f -mfma -mavx512bf16 -mamx-tile -mamx-bf16 (CMakeLists.txt) and only
// called where the CPU reports AMX-TILE and AMX-BF16 and the OS granted this process the tile
// state (Sgemm.cpp), or, emulated, where it reports AVX512-BF16.
//
// One call computes up to 32 rows x 32 columns of C as four 16 x 16 f32 tiles (tmm0..3), from
// two tiles of A (tmm4, 5: 16 rows x 16 bf16 pairs along k, read from the row-major A panel
// with the panel's k block as row stride) and two of B (tmm6, 7: 16 pairs along k x 16
// columns, read from gemm16's pair panels of 32 columns): four TDPBF16PS per 32 values of k.
// The packing pads k with zero pairs to whole tiles of 16, so every tile is a full one and one
// configuration (eight 16 x 64-byte tiles) serves every call. Rows past the panel's end are
// zero in the packed A; rows <= 16 skip the second A tile, columns <= 16 the second B tile.
// The tiles are stored to a 32 x 32 buffer, then to C with the f32 families' epilogue
// (SgemmKernelTemplate.h's storeTile).
//
// The configuration is loaded at every call: another user of AMX on the same thread (a
// framework in the same process) may have loaded its own; a call is at least 16 tiles deep
// (k blocks of 384 pairs but the last), so that one LDTILECFG is small beside it.
#include "SgemmKernels.h"

#if defined(__x86_64__)
#include "SgemmAvx512Vec.h"

#include <cstring>

namespace tcc::rt {
namespace {
struct Vec : Avx512Vec { // the f32 traits, for storeTile (dot: the template's k step, unused)
  static __m512 dot(__m512 a, __m512 b, __m512 c) { return fma(a, b, c); }
};
} // namespace
} // namespace tcc::rt

#include "SgemmKernelTemplate.h"

namespace tcc::rt {
namespace {

constexpr int kTileRows = 16; // rows of every tile; 64 bytes (16 f32 or 16 bf16 pairs) a row

/// LDTILECFG's operand: palette 1, tiles 0..7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t bytesPerRow[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);
constexpr TileConfig kTileConfig{};

/// The tile instructions. GCC's intrinsics paste their tile numbers into the assembly, so each
/// tile the kernel uses gets its own specialisation.
template <int T> void tileZero();
template <int T> void tileLoad(const float *p, int64_t strideBytes);
template <int T> void tileStore(float *p, int64_t strideBytes);
template <int C, int A, int B> void tileDot();
#define TCC_TILE(T)                                                                                \
  template <> [[gnu::always_inline]] inline void tileZero<T>() { _tile_zero(T); }                 \
  template <> [[gnu::always_inline]] inline void tileLoad<T>(const float *p, int64_t s) {         \
    _tile_loadd(T, p, s);                                                                          \
  }                                                                                                \
  template <> [[gnu::always_inline]] inline void tileStore<T>(float *p, int64_t s) {              \
    _tile_stored(T, p, s);                                                                         \
  }
TCC_TILE(0)
TCC_TILE(1)
TCC_TILE(2)
TCC_TILE(3)
TCC_TILE(4)
TCC_TILE(5)
TCC_TILE(6)
TCC_TILE(7)
#undef TCC_TILE
#define TCC_TILE_DOT(C, A, B)                                                                      \
  template <> [[gnu::always_inline]] inline void tileDot<C, A, B>() { _tile_dpbf16ps(C, A, B); }
TCC_TILE_DOT(0, 4, 6)
TCC_TILE_DOT(1, 4, 7)
TCC_TILE_DOT(2, 5, 6)
TCC_TILE_DOT(3, 5, 7)
#undef TCC_TILE_DOT

struct HardwareTiles {
  static void configure() { _tile_loadconfig(&kTileConfig); }
  template <int T> static void zero() { tileZero<T>(); }
  template <int T> static void load(const float *p, int64_t strideBytes) {
    tileLoad<T>(p, strideBytes);
  }
  template <int C, int A, int B> static void dot() { tileDot<C, A, B>(); }
  template <int T> static void store(float *p, int64_t strideBytes) {
    tileStore<T>(p, strideBytes);
  }
};

/// The same in C++, on a thread's eight tiles of 16 x 16 32-bit elements (TDPBF16PS's
/// definition: per pair, the low halves' product then the high halves' added to the f32 sum).
thread_local uint32_t emulatedTiles[8][kTileRows][16];

float bf16Half(uint32_t pair, int half) {
  uint32_t bits = half ? pair & 0xFFFF0000u : pair << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct EmulatedTiles {
  static void configure() {}
  template <int T> static void zero() { std::memset(emulatedTiles[T], 0, sizeof emulatedTiles[T]); }
  template <int T> static void load(const float *p, int64_t strideBytes) {
    for (int r = 0; r < kTileRows; ++r)
      std::memcpy(emulatedTiles[T][r], reinterpret_cast<const char *>(p) + r * strideBytes, 64);
  }
  template <int C, int A, int B> static void dot() {
    for (int m = 0; m < kTileRows; ++m)
      for (int n = 0; n < 16; ++n) {
        float sum;
        std::memcpy(&sum, &emulatedTiles[C][m][n], sizeof sum);
        for (int q = 0; q < 16; ++q) {
          uint32_t a = emulatedTiles[A][m][q], b = emulatedTiles[B][q][n];
          sum += bf16Half(a, 0) * bf16Half(b, 0);
          sum += bf16Half(a, 1) * bf16Half(b, 1);
        }
        std::memcpy(&emulatedTiles[C][m][n], &sum, sizeof sum);
      }
  }
  template <int T> static void store(float *p, int64_t strideBytes) {
    for (int r = 0; r < kTileRows; ++r)
      std::memcpy(reinterpret_cast<char *>(p) + r * strideBytes, emulatedTiles[T][r], 64);
  }
};

/// R rows (1..32) x W tiles of 16 columns (1, 2) of C; k in pairs, a multiple of 16; a: the
/// row-major panel (32 rows of k pairs), b: the pair panel (ldb = 32 columns a pair row).
template <class Tiles, int R, int W>
void amxKernel(int64_t k, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc,
               int64_t cols, float alpha, float beta, const SgemmEpilogue *epilogue) {
  constexpr bool twoA = R > kTileRows, twoB = W == 2;
  Tiles::configure();
  Tiles::template zero<0>();
  if constexpr (twoB)
    Tiles::template zero<1>();
  if constexpr (twoA) {
    Tiles::template zero<2>();
    if constexpr (twoB)
      Tiles::template zero<3>();
  }
  const int64_t aStride = k * 4, bStride = ldb * 4;
  const float *a1 = a + kTileRows * k;
  for (int64_t u = 0; u < k; u += 16) {
    const float *bu = b + u * ldb;
    Tiles::template load<4>(a + u, aStride);
    Tiles::template load<6>(bu, bStride);
    if constexpr (twoB)
      Tiles::template load<7>(bu + 16, bStride);
    Tiles::template dot<0, 4, 6>();
    if constexpr (twoB)
      Tiles::template dot<1, 4, 7>();
    if constexpr (twoA) {
      Tiles::template load<5>(a1 + u, aStride);
      Tiles::template dot<2, 5, 6>();
      if constexpr (twoB)
        Tiles::template dot<3, 5, 7>();
    }
  }
  alignas(64) float sums[2 * kTileRows][32];
  constexpr int64_t rowBytes = sizeof sums[0];
  Tiles::template store<0>(&sums[0][0], rowBytes);
  if constexpr (twoB)
    Tiles::template store<1>(&sums[0][16], rowBytes);
  if constexpr (twoA) {
    Tiles::template store<2>(&sums[kTileRows][0], rowBytes);
    if constexpr (twoB)
      Tiles::template store<3>(&sums[kTileRows][16], rowBytes);
  }
  storeTile<R, W>([&](int i, int w) { return Vec::load(&sums[i][16 * w]); }, c, ldc, cols,
                  alpha, beta, epilogue);
}

/// byRows[r - 1] = amxKernel<r, 2>, narrow[r - 1] = amxKernel<r, 1> (constant-initialized, as
/// SgemmKernelTemplate.h's makeFamily says why).
template <class Tiles, int... R> constexpr SgemmKernelFamily makeAmxFamily() {
  SgemmKernelFamily f{2 * kTileRows, 32, 16, {}, {}, {}};
  ((f.byRows[R - 1] = amxKernel<Tiles, R, 2>), ...);
  ((f.narrow[R - 1] = amxKernel<Tiles, R, 1>), ...);
  return f;
}

#define TCC_AMX_ROWS                                                                               \
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,  \
      27, 28, 29, 30, 31, 32
constexpr SgemmKernelFamily kAmx = makeAmxFamily<HardwareTiles, TCC_AMX_ROWS>();
constexpr SgemmKernelFamily kAmxEmulated = makeAmxFamily<EmulatedTiles, TCC_AMX_ROWS>();
#undef TCC_AMX_ROWS

} // namespace

const SgemmKernelFamily *sgemmAmxKernels(bool emulated) { return emulated ? &kAmxEmulated : &kAmx; }

} // namespace tcc::rt
#else
namespace tcc::rt {
const SgemmKernelFamily *sgemmAmxKernels(bool) { return nullptr; }
} // namespace tcc::rt
#endif
