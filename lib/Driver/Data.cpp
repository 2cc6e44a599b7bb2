//===- Data.cpp - Training data for `tcc train`: IDX and .npy files -------===//
#include "tcc/Driver/Data.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <optional>

namespace fs = std::filesystem;

namespace tcc {

namespace {

[[noreturn]] void fail(const std::string &what, const std::string &why) {
  throw Error(what + ": " + why);
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t> &in, const std::string &what) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header and trailer.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    fail(what, "cannot initialise zlib");
  std::vector<uint8_t> out;
  zs.next_in = const_cast<Bytef *>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  uint8_t chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = chunk;
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof chunk - zs.avail_out));
    if (rc == Z_STREAM_END) {
      // gzip allows several members one after another (e.g. `cat a.gz b.gz`).
      if (zs.avail_in == 0)
        break;
      if (inflateReset(&zs) != Z_OK)
        break;
      continue;
    }
    if (rc != Z_OK) {
      std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      fail(what, "damaged gzip data (" + msg + ")");
    }
    if (zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      fail(what, "truncated gzip data");
    }
  }
  inflateEnd(&zs);
  return out;
}

uint64_t readBigEndian(const uint8_t *p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i)
    v = (v << 8) | p[i];
  return v;
}

std::optional<std::string> findFile(const std::string &dir, const std::string &name) {
  for (const std::string &candidate : {name, name + ".gz"}) {
    fs::path p = fs::path(dir) / candidate;
    if (fs::is_regular_file(p))
      return p.string();
  }
  return std::nullopt;
}

Dataset makeDataset(const Tensor &images, const Tensor &labels, const std::string &imagesWhat,
                    const std::string &labelsWhat) {
  Dataset d;
  if (images.rank() < 1 || labels.rank() < 1)
    fail(images.rank() < 1 ? imagesWhat : labelsWhat, "a scalar, expected one entry per sample");
  if (images.dim(0) != labels.dim(0))
    throw Error("'" + imagesWhat + "' holds " + std::to_string(images.dim(0)) +
                " samples but '" + labelsWhat + "' holds " + std::to_string(labels.dim(0)) +
                " labels");
  d.images = imagesToFloat(images, imagesWhat);
  d.labels = normalizeLabels(labels, labelsWhat);
  return d;
}

} // namespace

std::vector<uint8_t> readFileMaybeGzip(const std::string &path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f)
    throw Error("cannot read '" + path + "'");
  std::vector<uint8_t> bytes((size_t)f.tellg());
  f.seekg(0);
  if (!f.read(reinterpret_cast<char *>(bytes.data()), bytes.size()))
    throw Error("cannot read '" + path + "'");
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b)
    return gunzip(bytes, "'" + path + "'");
  return bytes;
}

Tensor parseIdx(const std::vector<uint8_t> &bytes, const std::string &what) {
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    fail(what, "not an IDX file (it must start with the bytes 0 0 TYPE RANK)");
  DType dtype;
  switch (bytes[2]) {
  case 0x08: dtype = DType::U8; break;
  case 0x09: dtype = DType::I8; break;
  case 0x0B: dtype = DType::I16; break;
  case 0x0C: dtype = DType::I32; break;
  case 0x0D: dtype = DType::F32; break;
  case 0x0E: dtype = DType::F64; break;
  default:
    fail(what, "unknown IDX element type 0x" + [&] {
      char buf[8];
      snprintf(buf, sizeof buf, "%02x", bytes[2]);
      return std::string(buf);
    }());
  }
  size_t rank = bytes[3];
  if (rank == 0)
    fail(what, "an IDX file of rank 0");
  size_t headerBytes = 4 + 4 * rank;
  if (bytes.size() < headerBytes)
    fail(what, "truncated IDX header");
  Shape shape;
  for (size_t i = 0; i < rank; ++i)
    shape.push_back((int64_t)readBigEndian(bytes.data() + 4 + 4 * i, 4));
  int64_t count = checkedElementCount(shape, dtypeSize(dtype), bytes.size() - headerBytes, what);
  Tensor t(dtype, shape);
  copyElements(static_cast<uint8_t *>(t.raw()), bytes.data() + headerBytes, count,
               dtypeSize(dtype), kLittleEndianHost);
  return t;
}

Tensor imagesToFloat(const Tensor &images, const std::string &what) {
  Tensor out(DType::F32, images.shape());
  float *dst = out.data<float>();
  int64_t n = images.numElements();
  switch (images.dtype()) {
  case DType::U8: {
    const uint8_t *src = images.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      dst[i] = src[i] / 255.0f;
    return out;
  }
  case DType::F32:
    return images;
  case DType::F64: {
    const double *src = images.data<double>();
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(src[i]);
    return out;
  }
  default:
    fail(what, std::string("images of type ") + dtypeName(images.dtype()) +
                   ": expected uint8 (scaled to [0, 1]) or float32/float64 (taken as given)");
  }
}

Tensor normalizeLabels(const Tensor &labels, const std::string &what) {
  if (isInteger(labels.dtype())) {
    Tensor out(DType::I64, labels.shape());
    int64_t *dst = out.data<int64_t>();
    for (int64_t i = 0; i < labels.numElements(); ++i)
      dst[i] = labels.getInt(i);
    return out;
  }
  if (labels.dtype() == DType::F32 || labels.dtype() == DType::F64)
    return imagesToFloat(labels, what);
  fail(what, std::string("labels of type ") + dtypeName(labels.dtype()) +
                 ": expected integers (classes) or float32/float64 (targets)");
}

DataSplits loadDataDir(const std::string &dir) {
  if (!fs::is_directory(dir))
    throw Error("--data '" + dir + "' is not a directory");
  struct Layout {
    const char *name;
    const char *files[4]; // train images, train labels, test images, test labels
  };
  static const Layout layouts[] = {
      {"npy", {"train_images.npy", "train_labels.npy", "test_images.npy", "test_labels.npy"}},
      {"idx",
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte"}}};
  for (const Layout &layout : layouts) {
    std::optional<std::string> paths[4];
    bool any = false, all = true;
    for (int i = 0; i < 4; ++i) {
      paths[i] = findFile(dir, layout.files[i]);
      any |= paths[i].has_value();
      all &= paths[i].has_value();
    }
    if (!any)
      continue;
    if (!all) {
      std::string missing;
      for (int i = 0; i < 4; ++i)
        if (!paths[i])
          missing += std::string(missing.empty() ? "" : ", ") + layout.files[i];
      throw Error("--data '" + dir + "' holds " + layout.name + " files but lacks " + missing +
                  " (or .gz)");
    }
    bool npy = std::string(layout.name) == "npy";
    Tensor t[4];
    for (int i = 0; i < 4; ++i) {
      std::vector<uint8_t> bytes = readFileMaybeGzip(*paths[i]);
      t[i] = npy ? parseNpy(bytes, "'" + *paths[i] + "'") : parseIdx(bytes, "'" + *paths[i] + "'");
    }
    DataSplits splits;
    splits.layout = layout.name;
    splits.train = makeDataset(t[0], t[1], *paths[0], *paths[1]);
    splits.test = makeDataset(t[2], t[3], *paths[2], *paths[3]);
    if (splits.train.size() == 0)
      throw Error("'" + *paths[0] + "' holds no samples");
    Shape trainSample(splits.train.images.shape().begin() + 1, splits.train.images.shape().end());
    Shape testSample(splits.test.images.shape().begin() + 1, splits.test.images.shape().end());
    if (numElements(trainSample) != numElements(testSample))
      throw Error("training images are " + shapeToString(trainSample) + " but test images are " +
                  shapeToString(testSample));
    return splits;
  }
  throw Error("--data '" + dir +
              "' holds neither IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, "
              "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz) nor .npy "
              "files (train_images.npy, train_labels.npy, test_images.npy, test_labels.npy)");
}

std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  uint64_t state = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(epoch + 1);
  auto next = [&state] { // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[next() % (uint64_t)(i + 1)]);
  return order;
}

} // namespace tcc
