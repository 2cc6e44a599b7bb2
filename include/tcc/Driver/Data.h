//===- Data.h - Training data for `tcc train`: IDX and .npy files ---------===//
//
// A data folder holds a training and a test set, each as images and labels, in one of two
// layouts:
//   IDX (the MNIST/FashionMNIST layout of Debian's dataset-fashion-mnist):
//     train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
//     t10k-labels-idx1-ubyte, each optionally gzipped (NAME.gz)
//   NumPy: train_images.npy, train_labels.npy, test_images.npy, test_labels.npy
// A folder holding both layouts is read as NumPy. Any file may be gzip-compressed (recognised
// by its magic bytes). Images become float32:
// uint8 images are scaled to [0, 1] (divided by 255), float images are taken as given; labels
// become int64 (integer files) or float32 (float files, e.g. regression targets).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"
#include "tcc/Support/TensorFiles.h" // parseNpy

#include <cstdint>
#include <string>
#include <vector>

namespace tcc {

/// The bytes of `path`, gunzipped when the file starts with gzip's magic bytes.
std::vector<uint8_t> readFileMaybeGzip(const std::string &path);

/// An IDX file (magic 0 0 TYPE RANK, big-endian u32 dims, big-endian data) as a tensor of its
/// element type (u8, i8, i16, i32, f32, f64). `what` names the file in errors.
Tensor parseIdx(const std::vector<uint8_t> &bytes, const std::string &what);

/// Images as float32 in the shape [N, ...] (see the file comment for the scaling).
Tensor imagesToFloat(const Tensor &images, const std::string &what);
/// Labels as int64 (integer types) or float32 (float types), shape [N, ...].
Tensor normalizeLabels(const Tensor &labels, const std::string &what);

struct Dataset {
  Tensor images; // f32 [N, ...]
  Tensor labels; // i64 or f32 [N, ...]
  int64_t size() const { return images.defined() ? images.dim(0) : 0; }
};

struct DataSplits {
  Dataset train, test;
  std::string layout; // "idx" or "npy"
};

/// Loads the folder described in the file comment. Throws tcc::Error naming the file and the
/// problem (missing files, bad magic, truncated data, image/label count mismatch...).
DataSplits loadDataDir(const std::string &dir);

/// The order in which an epoch visits `n` samples: a Fisher-Yates shuffle driven by splitmix64
/// seeded with seed + 0x9E3779B97F4A7C15 * (epoch + 1): for i = n-1 down to 1, swap i with
/// next() % (i + 1). The same (seed, epoch) gives the same permutation on every machine.
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch);

} // namespace tcc
