//===- TensorFilesTest.cpp - .npy and protobuf-free TensorProto files -----===//
//
// The TensorProto reader of lib/Support (no protobuf) against the protobuf-based reader of the
// ONNX frontend: on every test-data file of Debian's libonnx-testdata, on typed data fields and
// packed encodings, and on damaged files. Round trips through the writers.
//
//===----------------------------------------------------------------------===//
#include "tcc/Support/TensorFiles.h"
#include "tcc/Frontend/OnnxModel.h"

#include "TestSupport.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace fs = std::filesystem;
using namespace tcc;
using tcc::test::errorOf;

namespace {

std::vector<uint8_t> bytesOf(const std::string &s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::vector<uint8_t> serialize(const google::protobuf::MessageLite &m) {
  return bytesOf(m.SerializeAsString());
}

void expectSameTensor(const Tensor &a, const Tensor &b, const std::string &what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.byteSize())) << what;
}

const DType kAllTypes[] = {DType::Bool, DType::I8,  DType::I16,  DType::I32, DType::I64,
                           DType::U8,   DType::U16, DType::U32,  DType::U64, DType::F16,
                           DType::BF16, DType::F32, DType::F64};

} // namespace

TEST(TensorFilesTest, AgreesWithProtobufOnEveryOnnxTestDataFile) {
  const fs::path root = "/usr/share/libonnx-testdata/data";
  if (!fs::is_directory(root))
    GTEST_SKIP() << "Debian's libonnx-testdata is not installed (" << root << ")";
  int files = 0, tensors = 0;
  for (const auto &entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".pb")
      continue;
    ++files;
    std::string path = entry.path().string();
    std::optional<Tensor> expected;
    std::string expectedName, expectedError;
    try {
      expected = readTensorFile(path, &expectedName);
    } catch (const Error &e) {
      expectedError = e.what();
    }
    std::optional<Tensor> got;
    std::string gotName, gotError;
    try {
      got = loadTensorFile(path, &gotName);
    } catch (const Error &e) {
      gotError = e.what();
    }
    ASSERT_EQ(expected.has_value(), got.has_value())
        << path << "\nprotobuf: " << expectedError << "\nwire reader: " << gotError;
    if (!expected)
      continue;
    ++tensors;
    expectSameTensor(*got, *expected, path);
    EXPECT_EQ(gotName, expectedName) << path;
  }
  EXPECT_GT(files, 1000);
  EXPECT_GT(tensors, 1000);
}

TEST(TensorFilesTest, WriterMatchesProtobufAndRoundTrips) {
  std::mt19937_64 rng(3);
  for (DType dtype : kAllTypes) {
    for (Shape shape : {Shape{}, Shape{0}, Shape{3}, Shape{2, 3, 4}, Shape{1, 300}}) {
      Tensor t = randomTensor(dtype, shape, rng());
      std::string what = std::string(dtypeName(dtype)) + " " + shapeToString(shape);
      std::vector<uint8_t> bytes = toTensorProtoBytes(t, "x.y");
      EXPECT_EQ(bytes, serialize(tensorToProto(t, "x.y"))) << what;
      std::string name;
      expectSameTensor(parseTensorProto(bytes, "t", &name), t, what);
      EXPECT_EQ(name, "x.y");
      if (dtype != DType::BF16)
        expectSameTensor(parseNpy(toNpyBytes(t), "n"), t, what + " (.npy)");
    }
  }
}

TEST(TensorFilesTest, TypedDataFields) {
  onnx::TensorProto f;
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(2);
  f.add_dims(2);
  for (float v : {1.5f, -2.f, 0.f, 1e30f})
    f.add_float_data(v);
  onnx::TensorProto h; // float16 bits in int32_data, one written sign-extended
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(3);
  h.add_int32_data(0x3c00);
  h.add_int32_data(-16384); // 0xc000 sign-extended: -2.0
  h.add_int32_data(0xfbff);
  onnx::TensorProto i8;
  i8.set_data_type(onnx::TensorProto::INT8);
  i8.add_dims(3);
  for (int v : {-128, 0, 127})
    i8.add_int32_data(v);
  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(2);
  b.add_int32_data(0);
  b.add_int32_data(5);
  onnx::TensorProto i64;
  i64.set_data_type(onnx::TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(-7);
  i64.add_int64_data(INT64_MAX);
  onnx::TensorProto u32;
  u32.set_data_type(onnx::TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4000000000u);
  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_double_data(3.25); // a scalar
  for (const onnx::TensorProto *t : {&f, &h, &i8, &b, &i64, &u32, &d})
    expectSameTensor(parseTensorProto(serialize(*t), "t"), tensorFromProto(*t),
                     t->DebugString());

  // Packed dims (proto3 writers) and unpacked float_data (a proto2 writer without [packed]).
  std::vector<uint8_t> packed = {0x0a, 0x02, 0x02, 0x01, // dims: [2, 1], packed
                                 0x10, 0x01,             // data_type FLOAT
                                 0x25, 0, 0, 0x80, 0x3f, // float_data 1.0, one per tag
                                 0x25, 0, 0, 0, 0x40};   // float_data 2.0
  Tensor p = parseTensorProto(packed, "t");
  EXPECT_EQ(p.shape(), (Shape{2, 1}));
  EXPECT_EQ(p.getDouble(0), 1.0);
  EXPECT_EQ(p.getDouble(1), 2.0);
}

TEST(TensorFilesTest, DamagedAndUnsupportedTensorProtos) {
  Tensor t = randomTensor(DType::F32, {4, 5}, 1);
  std::vector<uint8_t> good = toTensorProtoBytes(t, "x");
  std::vector<uint8_t> cut(good.begin(), good.end() - 7);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(cut, "'f.pb'"); }), "'f.pb': not a serialized TensorProto (the data ends inside a field: truncated?)");
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto({}, "'f.pb'"); }), "'f.pb': the file is empty");

  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_string_data("a");
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(s), "f"); }),
                  "has element type STRING, which tcc does not support");

  onnx::TensorProto ext = tensorToProto(t, "w");
  ext.clear_raw_data();
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  auto *entry = ext.add_external_data();
  entry->set_key("location");
  entry->set_value("w.bin");
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(ext), "f"); }),
                  "tensor 'w' keeps its data in an external file");

  onnx::TensorProto wrongField;
  wrongField.set_data_type(onnx::TensorProto::INT64);
  wrongField.add_dims(1);
  wrongField.add_float_data(1);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(wrongField), "f"); }),
                  "of type INT64 has data in float_data, but that type belongs in int64_data");

  onnx::TensorProto both = tensorToProto(t, "x");
  for (int i = 0; i < 20; ++i)
    both.add_float_data(0);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(both), "f"); }),
                  "has data in both raw_data and float_data");

  onnx::TensorProto shortRaw = tensorToProto(t, "x");
  shortRaw.mutable_raw_data()->resize(12);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(shortRaw), "f"); }),
                  "tensor 'x' has shape 4x5 of type FLOAT, which needs 80 bytes, but raw_data holds 12");

  onnx::TensorProto fewValues;
  fewValues.set_data_type(onnx::TensorProto::FLOAT);
  fewValues.add_dims(3);
  fewValues.add_float_data(1);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(fewValues), "f"); }),
                  "has shape 3 (3 elements) but float_data holds 1");

  onnx::TensorProto outOfRange;
  outOfRange.set_data_type(onnx::TensorProto::UINT8);
  outOfRange.add_dims(1);
  outOfRange.add_int32_data(300);
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(outOfRange), "f"); }),
                  "has out-of-range value 300 in int32_data");

  // A ModelProto is not a tensor: its fields do not fit.
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("p");
  model.mutable_graph()->set_name("g");
  EXPECT_FALSE(errorOf([&] { parseTensorProto(serialize(model), "f"); }).empty());

  std::vector<uint8_t> unknownField = good;
  unknownField.insert(unknownField.end(), {0xf8, 0x01, 0x05}); // field 31, varint 5
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(unknownField, "f"); }),
                  "it has field 31, which a TensorProto does not have");
}

TEST(TensorFilesTest, PackedSubByteIntsAndFloat8) {
  // ONNX packs 4-bit integers two to a byte (2-bit four), first element low; tcc holds a byte each.
  for (DType t : {DType::I4, DType::U4, DType::I2, DType::U2}) {
    Tensor x = randomTensor(t, {3, 5}, 7); // odd count: the last byte is half used
    std::vector<uint8_t> bytes = toTensorProtoBytes(x, "q");
    Tensor back = parseTensorProto(bytes, "f");
    ASSERT_EQ(back.dtype(), t);
    EXPECT_EQ(std::memcmp(back.raw(), x.raw(), x.byteSize()), 0) << dtypeName(t);
  }
  onnx::TensorProto p;
  p.set_data_type(22); // INT4
  p.add_dims(3);
  p.set_raw_data(std::string("\x8F\x07", 2)); // -1, -8, 7
  Tensor q = parseTensorProto(serialize(p), "f");
  EXPECT_EQ(q.getInt(0), -1);
  EXPECT_EQ(q.getInt(1), -8);
  EXPECT_EQ(q.getInt(2), 7);
  p.set_raw_data(std::string("\x8F", 1));
  EXPECT_CONTAINS(errorOf([&] { parseTensorProto(serialize(p), "f"); }),
                  "of type INT4, which packs into 2 bytes, but raw_data holds 1");
  onnx::TensorProto f8;
  f8.set_data_type(17); // FLOAT8E4M3FN, in int32_data one value each
  f8.add_dims(2);
  f8.add_int32_data(0x7E);
  f8.add_int32_data(0x38); // 1.0
  Tensor g = parseTensorProto(serialize(f8), "f");
  EXPECT_EQ(g.getDouble(0), 448.0);
  EXPECT_EQ(g.getDouble(1), 1.0);
}

TEST(TensorFilesTest, NpyWriterAndFiles) {
  Tensor t = randomTensor(DType::F16, {2, 3}, 9);
  std::vector<uint8_t> npy = toNpyBytes(t);
  // Version 1.0, header padded so that the data starts at a multiple of 64 bytes.
  ASSERT_TRUE(isNpy(npy));
  size_t headerLen = npy[8] | npy[9] << 8;
  EXPECT_EQ((10 + headerLen) % 64, 0u);
  std::string header(npy.begin() + 10, npy.begin() + 10 + headerLen);
  EXPECT_CONTAINS(header, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_CONTAINS(std::string(reinterpret_cast<const char *>(toNpyBytes(randomTensor(DType::I64, {5}, 1)).data()), 80), "'shape': (5,)");
  EXPECT_CONTAINS(errorOf([] { toNpyBytes(Tensor(DType::BF16, {1})); }),
                  "a bf16 tensor cannot be stored in a .npy file");

  fs::path dir = fs::temp_directory_path() / ("tcc-tensorfiles-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  writeFileBytes((dir / "a.npy").string(), npy);
  writeFileBytes((dir / "a.pb").string(), toTensorProtoBytes(t, "a"));
  std::string name = "?";
  expectSameTensor(loadTensorFile((dir / "a.npy").string(), &name), t, "npy");
  EXPECT_EQ(name, "");
  expectSameTensor(loadTensorFile((dir / "a.pb").string(), &name), t, "pb");
  EXPECT_EQ(name, "a");
  EXPECT_CONTAINS(errorOf([&] { loadTensorFile((dir / "missing.npy").string()); }),
                  "missing.npy': No such file or directory");
  EXPECT_CONTAINS(errorOf([&] { loadTensorFile(dir.string()); }), "it is a directory");
  fs::remove_all(dir);
}
