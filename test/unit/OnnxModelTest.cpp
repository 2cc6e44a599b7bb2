//===- OnnxModelTest.cpp - Tests of the ONNX model-loading layer ----------===//

#include "tcc/Frontend/OnnxModel.h"

#include "TestSupport.h"

#include <gtest/gtest.h>
#include <onnx/onnx-data_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace tcc;
namespace fs = std::filesystem;
using onnx::TensorProto;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// A fresh directory per test, removed afterwards.
class OnnxModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tcc-onnx-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string path(const std::string &name) const { return (dir / name).string(); }

  fs::path dir;
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string serialized(const google::protobuf::Message &msg) {
  std::string bytes;
  EXPECT_TRUE(msg.SerializeToString(&bytes));
  return bytes;
}

using tcc::test::errorOf;

/// A tensor type; dimension names in `dims` that are numbers become dim_value, others dim_param.
onnx::ValueInfoProto tensorInfo(const std::string &name, int32_t elemType,
                                const std::vector<std::string> &dims) {
  onnx::ValueInfoProto info;
  info.set_name(name);
  onnx::TypeProto_Tensor *type = info.mutable_type()->mutable_tensor_type();
  type->set_elem_type(elemType);
  onnx::TensorShapeProto *shape = type->mutable_shape();
  for (const std::string &d : dims) {
    if (!d.empty() && std::isdigit((unsigned char)d[0]))
      shape->add_dim()->set_dim_value(std::stoll(d));
    else
      shape->add_dim()->set_dim_param(d);
  }
  return info;
}

onnx::NodeProto *addNode(onnx::GraphProto &graph, const std::string &opType,
                         const std::vector<std::string> &inputs,
                         const std::vector<std::string> &outputs, const std::string &name) {
  onnx::NodeProto *node = graph.add_node();
  node->set_op_type(opType);
  node->set_name(name);
  for (const std::string &in : inputs)
    node->add_input(in);
  for (const std::string &out : outputs)
    node->add_output(out);
  return node;
}

onnx::ModelProto emptyModel(int64_t opset) {
  onnx::ModelProto model;
  model.set_ir_version(opset >= 7 ? 7 : 3);
  model.set_producer_name("tcc-test");
  onnx::OperatorSetIdProto *import = model.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  model.mutable_graph()->set_name("main");
  return model;
}

/// y = Relu(a + b), with a and b of type float [N, 3].
onnx::ModelProto addReluModel(int64_t opset) {
  onnx::ModelProto model = emptyModel(opset);
  onnx::GraphProto &graph = *model.mutable_graph();
  *graph.add_input() = tensorInfo("a", TensorProto::FLOAT, {"N", "3"});
  *graph.add_input() = tensorInfo("b", TensorProto::FLOAT, {"N", "3"});
  addNode(graph, "Add", {"a", "b"}, {"s"}, "add");
  addNode(graph, "Relu", {"s"}, {"y"}, "relu");
  onnx::ValueInfoProto *y = graph.add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  return model;
}

int64_t defaultOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      return opset.version();
  return -1;
}

const onnx::ValueInfoProto *findValueInfo(const onnx::GraphProto &graph, const std::string &name) {
  for (const onnx::ValueInfoProto &info : graph.value_info())
    if (info.name() == name)
      return &info;
  return nullptr;
}

std::vector<int64_t> staticDims(const onnx::ValueInfoProto &info) {
  std::vector<int64_t> dims;
  for (const auto &d : info.type().tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

/// A tensor of `dtype` with a few distinct element values (including negative ones for signed
/// and floating types).
Tensor sampleTensor(DType dtype) {
  Tensor t(dtype, {2, 3});
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *data = t.data<T>();
    for (int i = 0; i < 6; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        data[i] = i % 2 == 1;
      else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        data[i] = T(float(i) - 2.5f);
      else if constexpr (std::is_signed_v<T>)
        data[i] = T(i * 7 - 20);
      else
        data[i] = T(i * 41 + 3);
    }
  });
  return t;
}

bool sameBytes(const Tensor &a, const Tensor &b) {
  return a.byteSize() == b.byteSize() && std::memcmp(a.raw(), b.raw(), a.byteSize()) == 0;
}

const std::vector<DType> allDTypes = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                      DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                      DType::BF16, DType::F32, DType::F64};

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

TEST(OnnxDTypeTest, MapsEverySupportedTypeBothWays) {
  for (DType dtype : allDTypes) {
    std::optional<DType> back = dtypeFromOnnx(dtypeToOnnx(dtype));
    ASSERT_TRUE(back.has_value()) << dtypeName(dtype);
    EXPECT_EQ(*back, dtype) << dtypeName(dtype);
  }
  EXPECT_EQ(dtypeToOnnx(DType::F32), TensorProto::FLOAT);
  EXPECT_EQ(dtypeToOnnx(DType::BF16), TensorProto::BFLOAT16);
  EXPECT_EQ(dtypeToOnnx(DType::U32), TensorProto::UINT32);
}

TEST(OnnxDTypeTest, RejectsAndNamesUnsupportedTypes) {
  EXPECT_FALSE(dtypeFromOnnx(TensorProto::STRING));
  EXPECT_FALSE(dtypeFromOnnx(TensorProto::COMPLEX64));
  EXPECT_FALSE(dtypeFromOnnx(TensorProto::UNDEFINED));
  EXPECT_FALSE(dtypeFromOnnx(99));
  EXPECT_EQ(onnxElemTypeName(TensorProto::FLOAT), "float");
  EXPECT_EQ(onnxElemTypeName(TensorProto::STRING), "string");
  EXPECT_EQ(onnxElemTypeName(TensorProto::COMPLEX64), "complex64");
  EXPECT_EQ(onnxElemTypeName(TensorProto::BFLOAT16), "bfloat16");
  EXPECT_EQ(onnxElemTypeName(99), "unknown type 99");
}

//===----------------------------------------------------------------------===//
// TensorProto <-> Tensor
//===----------------------------------------------------------------------===//

TEST(OnnxTensorTest, RoundTripsEveryDTypeThroughRawData) {
  for (DType dtype : allDTypes) {
    Tensor t = sampleTensor(dtype);
    TensorProto proto = tensorToProto(t, "x");
    EXPECT_EQ(proto.name(), "x");
    EXPECT_TRUE(proto.has_raw_data());
    Tensor back = tensorFromProto(proto);
    EXPECT_EQ(back.dtype(), dtype) << dtypeName(dtype);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_TRUE(sameBytes(back, t)) << dtypeName(dtype);
  }
}

TEST(OnnxTensorTest, RoundTripsScalarsAndEmptyTensors) {
  Tensor scalar = Tensor::scalar<int64_t>(-42);
  Tensor back = tensorFromProto(tensorToProto(scalar, "s"));
  EXPECT_EQ(back.rank(), 0);
  EXPECT_EQ(back.getInt(0), -42);

  Tensor empty(DType::F32, {0, 3});
  back = tensorFromProto(tensorToProto(empty, "e"));
  EXPECT_EQ(back.shape(), (Shape{0, 3}));
  EXPECT_EQ(back.numElements(), 0);

  // An empty tensor needs no data field at all.
  TensorProto proto;
  proto.set_data_type(TensorProto::INT32);
  proto.add_dims(4);
  proto.add_dims(0);
  EXPECT_EQ(tensorFromProto(proto).shape(), (Shape{4, 0}));
}

TEST(OnnxTensorTest, ReadsTypedFields) {
  TensorProto f;
  f.set_data_type(TensorProto::FLOAT);
  f.add_dims(3);
  for (float v : {1.5f, -2.0f, 0.25f})
    f.add_float_data(v);
  EXPECT_EQ(tensorFromProto(f).getDouble(1), -2.0);

  TensorProto d;
  d.set_data_type(TensorProto::DOUBLE);
  d.add_double_data(3.25); // scalar: no dims
  EXPECT_EQ(tensorFromProto(d).rank(), 0);
  EXPECT_EQ(tensorFromProto(d).getDouble(0), 3.25);

  TensorProto i64;
  i64.set_data_type(TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(std::numeric_limits<int64_t>::min());
  i64.add_int64_data(7);
  EXPECT_EQ(tensorFromProto(i64).getInt(0), std::numeric_limits<int64_t>::min());

  TensorProto u64;
  u64.set_data_type(TensorProto::UINT64);
  u64.add_dims(1);
  u64.add_uint64_data(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(tensorFromProto(u64).data<uint64_t>()[0], std::numeric_limits<uint64_t>::max());

  TensorProto u32;
  u32.set_data_type(TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4294967295u);
  EXPECT_EQ(tensorFromProto(u32).data<uint32_t>()[0], 4294967295u);
}

TEST(OnnxTensorTest, ReadsSmallTypesFromInt32Data) {
  auto make = [](int32_t type, std::vector<int32_t> values) {
    TensorProto t;
    t.set_data_type(type);
    t.add_dims((int64_t)values.size());
    for (int32_t v : values)
      t.add_int32_data(v);
    return tensorFromProto(t);
  };
  Tensor b = make(TensorProto::BOOL, {0, 1, 1});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.toInt64Vector(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(make(TensorProto::INT8, {-128, 127}).toInt64Vector(),
            (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(make(TensorProto::INT16, {-32768, 5}).toInt64Vector(),
            (std::vector<int64_t>{-32768, 5}));
  EXPECT_EQ(make(TensorProto::INT32, {-7, 1 << 30}).toInt64Vector(),
            (std::vector<int64_t>{-7, 1 << 30}));
  EXPECT_EQ(make(TensorProto::UINT8, {0, 255}).toInt64Vector(), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(make(TensorProto::UINT16, {65535}).toInt64Vector(), (std::vector<int64_t>{65535}));

  // float16 and bfloat16 travel as bit patterns: 1.0 and -2.0.
  Tensor h = make(TensorProto::FLOAT16, {0x3C00, 0xC000});
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.data<Half>()[0].bits, 0x3C00);
  EXPECT_EQ(h.data<Half>()[1].bits, 0xC000);
  Tensor bf = make(TensorProto::BFLOAT16, {0x3F80, 0xC000});
  EXPECT_EQ(bf.dtype(), DType::BF16);
  EXPECT_EQ(bf.data<BFloat16>()[0].bits, 0x3F80);
  EXPECT_EQ(bf.data<BFloat16>()[1].bits, 0xC000);
}

TEST(OnnxTensorTest, TypedFieldsAgreeWithRawDataForEveryDType) {
  // Encode each sample tensor the way ONNX's helpers do without raw_data, then compare.
  for (DType dtype : allDTypes) {
    Tensor t = sampleTensor(dtype);
    TensorProto proto;
    proto.set_data_type(dtypeToOnnx(dtype));
    for (int64_t d : t.shape())
      proto.add_dims(d);
    visitDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < t.numElements(); ++i) {
        T v = t.data<T>()[i];
        if constexpr (std::is_same_v<T, float>)
          proto.add_float_data(v);
        else if constexpr (std::is_same_v<T, double>)
          proto.add_double_data(v);
        else if constexpr (std::is_same_v<T, int64_t>)
          proto.add_int64_data(v);
        else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>)
          proto.add_uint64_data(v);
        else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
          proto.add_int32_data(v.bits);
        else
          proto.add_int32_data((int32_t)v);
      }
    });
    Tensor back = tensorFromProto(proto);
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_TRUE(sameBytes(back, t)) << dtypeName(dtype);
  }
}

TEST(OnnxTensorTest, RejectsInconsistentData) {
  TensorProto t;
  t.set_name("w");
  t.set_data_type(TensorProto::FLOAT);
  t.add_dims(2);
  t.add_dims(2);
  t.set_raw_data(std::string(12, '\0'));
  std::string msg = errorOf([&] { tensorFromProto(t); });
  EXPECT_CONTAINS(msg, "'w'");
  EXPECT_CONTAINS(msg, "16 bytes");

  t.clear_raw_data();
  t.add_float_data(1.0f);
  msg = errorOf([&] { tensorFromProto(t); });
  EXPECT_CONTAINS(msg, "'w'");
  EXPECT_CONTAINS(msg, "float_data holds 1");

  TensorProto wrongField;
  wrongField.set_name("k");
  wrongField.set_data_type(TensorProto::INT64);
  wrongField.add_float_data(1.0f);
  EXPECT_CONTAINS(errorOf([&] { tensorFromProto(wrongField); }), "int64_data");

  TensorProto outOfRange;
  outOfRange.set_name("q");
  outOfRange.set_data_type(TensorProto::INT8);
  outOfRange.add_int32_data(300);
  EXPECT_CONTAINS(errorOf([&] { tensorFromProto(outOfRange); }), "300");

  TensorProto negative;
  negative.set_name("n");
  negative.set_data_type(TensorProto::FLOAT);
  negative.add_dims(-1);
  EXPECT_CONTAINS(errorOf([&] { tensorFromProto(negative); }), "negative");
}

TEST(OnnxTensorTest, RejectsUnsupportedTypesNamingTheTensor) {
  TensorProto s;
  s.set_name("words");
  s.set_data_type(TensorProto::STRING);
  s.add_dims(1);
  s.add_string_data("hello");
  std::string msg = errorOf([&] { tensorFromProto(s); });
  EXPECT_CONTAINS(msg, "'words'");
  EXPECT_CONTAINS(msg, "string");

  TensorProto c;
  c.set_name("z");
  c.set_data_type(TensorProto::COMPLEX64);
  msg = errorOf([&] { tensorFromProto(c); });
  EXPECT_CONTAINS(msg, "'z'");
  EXPECT_CONTAINS(msg, "complex64");
}

//===----------------------------------------------------------------------===//
// Tensor files
//===----------------------------------------------------------------------===//

TEST_F(OnnxModelTest, RoundTripsEveryDTypeThroughFiles) {
  for (DType dtype : allDTypes) {
    Tensor t = sampleTensor(dtype);
    std::string file = path(std::string(dtypeName(dtype)) + ".pb");
    writeTensorFile(t, "input_0", file);
    std::string name;
    Tensor back = readTensorFile(file, &name);
    EXPECT_EQ(name, "input_0");
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_TRUE(sameBytes(back, t)) << dtypeName(dtype);
  }
}

TEST_F(OnnxModelTest, ReadsTensorFilesWithTypedFields) {
  TensorProto proto;
  proto.set_name("h");
  proto.set_data_type(TensorProto::FLOAT16);
  proto.add_dims(2);
  proto.add_int32_data(0x3C00);
  proto.add_int32_data(0x4000);
  writeBytes(path("h.pb"), serialized(proto));
  Tensor t = readTensorFile(path("h.pb"));
  EXPECT_EQ(t.getDouble(0), 1.0);
  EXPECT_EQ(t.getDouble(1), 2.0);
}

TEST_F(OnnxModelTest, ReportsBadTensorFiles) {
  std::string msg = errorOf([&] { readTensorFile(path("missing.pb")); });
  EXPECT_CONTAINS(msg, "cannot open tensor file '" + path("missing.pb") + "'");
  EXPECT_CONTAINS(msg, "No such file or directory");

  writeBytes(path("empty.pb"), "");
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("empty.pb")); }), "empty");

  writeBytes(path("garbage.pb"), "this is not a protobuf \xff\xff\xff\xff");
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("garbage.pb")); }),
                  "not a valid TensorProto file");

  std::string bytes = serialized(tensorToProto(sampleTensor(DType::F64), "x"));
  writeBytes(path("truncated.pb"), bytes.substr(0, bytes.size() - 5));
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("truncated.pb")); }),
                  "not a valid TensorProto file");
}

TEST_F(OnnxModelTest, RejectsSequenceAndOptionalFiles) {
  onnx::SequenceProto sequence;
  sequence.set_name("seq");
  sequence.set_elem_type(onnx::SequenceProto::TENSOR);
  *sequence.add_tensor_values() = tensorToProto(sampleTensor(DType::F32), "a");
  *sequence.add_tensor_values() = tensorToProto(sampleTensor(DType::F32), "b");
  writeBytes(path("seq.pb"), serialized(sequence));
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("seq.pb")); }), "sequence");

  onnx::SequenceProto emptySequence;
  emptySequence.set_name("empty_seq");
  emptySequence.set_elem_type(onnx::SequenceProto::TENSOR);
  writeBytes(path("empty_seq.pb"), serialized(emptySequence));
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("empty_seq.pb")); }), "sequence");

  onnx::OptionalProto optional;
  optional.set_name("opt");
  optional.set_elem_type(onnx::OptionalProto::TENSOR);
  *optional.mutable_tensor_value() = tensorToProto(sampleTensor(DType::I32), "v");
  writeBytes(path("opt.pb"), serialized(optional));
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("opt.pb")); }), "optional");

  onnx::OptionalProto none;
  none.set_name("none");
  writeBytes(path("none.pb"), serialized(none));
  EXPECT_CONTAINS(errorOf([&] { readTensorFile(path("none.pb")); }), "optional");
}

//===----------------------------------------------------------------------===//
// Model loading
//===----------------------------------------------------------------------===//

TEST_F(OnnxModelTest, LoadsAModel) {
  writeBytes(path("m.onnx"), serialized(addReluModel(13)));
  onnx::ModelProto model = loadOnnxModel(path("m.onnx"));
  EXPECT_EQ(model.graph().node_size(), 2);
  EXPECT_EQ(defaultOpset(model), 13);
}

TEST_F(OnnxModelTest, ReportsMissingModelFile) {
  std::string file = path("nope.onnx");
  EXPECT_EQ(errorOf([&] { loadOnnxModel(file); }),
            "cannot open model file '" + file + "': No such file or directory");
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(dir.string()); }), "Is a directory");
}

TEST_F(OnnxModelTest, ReportsEmptyTruncatedAndGarbageModels) {
  writeBytes(path("empty.onnx"), "");
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("empty.onnx")); }),
                  "is not a valid ONNX model: the file is empty");

  onnx::ModelProto model = addReluModel(13);
  *model.mutable_graph()->add_initializer() = tensorToProto(Tensor(DType::F32, {64, 64}), "w");
  std::string bytes = serialized(model);
  writeBytes(path("truncated.onnx"), bytes.substr(0, bytes.size() / 2));
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("truncated.onnx")); }),
                  "is not a valid ONNX model");

  // Whatever random bytes parse as, the result must be an error, never a crash.
  std::mt19937 rng(1234);
  for (int i = 0; i < 50; ++i) {
    std::string garbage(1 + rng() % 4096, '\0');
    for (char &c : garbage)
      c = (char)rng();
    writeBytes(path("garbage.onnx"), garbage);
    EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("garbage.onnx")); }),
                    "is not a valid ONNX model");
  }
  writeBytes(path("text.onnx"), "hello, world\n");
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("text.onnx")); }), "is not a valid ONNX model");
}

TEST_F(OnnxModelTest, ReportsModelsTooLargeForProtobuf) {
  // A sparse file: no disk space is used.
  writeBytes(path("huge.onnx"), "");
  fs::resize_file(path("huge.onnx"), (uintmax_t)5 << 29);
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("huge.onnx")); }), "smaller than 2 GiB");
}

TEST_F(OnnxModelTest, ReportsModelsMissingRequiredParts) {
  onnx::ModelProto noGraph = addReluModel(13);
  noGraph.clear_graph();
  writeBytes(path("a.onnx"), serialized(noGraph));
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("a.onnx")); }), "has no graph");

  onnx::ModelProto noIrVersion = addReluModel(13);
  noIrVersion.clear_ir_version();
  writeBytes(path("b.onnx"), serialized(noIrVersion));
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("b.onnx")); }), "ir_version");

  onnx::ModelProto noOpset = addReluModel(13);
  noOpset.clear_opset_import();
  writeBytes(path("c.onnx"), serialized(noOpset));
  EXPECT_CONTAINS(errorOf([&] { loadOnnxModel(path("c.onnx")); }), "opset_import");
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

void setExternal(TensorProto &t, const std::string &location, std::optional<int64_t> offset,
                 std::optional<int64_t> length) {
  t.clear_raw_data();
  t.set_data_location(TensorProto::EXTERNAL);
  auto add = [&](const std::string &key, const std::string &value) {
    onnx::StringStringEntryProto *entry = t.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  if (offset)
    add("offset", std::to_string(*offset));
  if (length)
    add("length", std::to_string(*length));
}

/// A model using three external tensors of one data file: an initializer, a Constant's value,
/// and a Constant inside the then-branch of an If.
class ExternalDataTest : public OnnxModelTest {
protected:
  void SetUp() override {
    OnnxModelTest::SetUp();
    weights = Tensor::fromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
    bias = Tensor::fromVector<int64_t>({2}, {-7, 9});
    branchValue = Tensor::fromVector<double>({}, {2.5});
    // Layout of data/weights.bin: 8 padding bytes, weights (24), bias (16), branch value (8).
    std::string data(8, 'x');
    data.append((const char *)weights.raw(), weights.byteSize());
    data.append((const char *)bias.raw(), bias.byteSize());
    data.append((const char *)branchValue.raw(), branchValue.byteSize());
    fs::create_directory(dir / "data");
    writeBytes(path("data/weights.bin"), data);

    model = emptyModel(13);
    onnx::GraphProto &graph = *model.mutable_graph();
    *graph.add_input() = tensorInfo("cond", TensorProto::BOOL, {});
    TensorProto *w = graph.add_initializer();
    *w = tensorToProto(weights, "W");
    setExternal(*w, "data/weights.bin", 8, 24);

    onnx::NodeProto *constant = addNode(graph, "Constant", {}, {"B"}, "bias_const");
    onnx::AttributeProto *value = constant->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = tensorToProto(bias, "");
    setExternal(*value->mutable_t(), "data/weights.bin", 32, 16);

    onnx::NodeProto *ifNode = addNode(graph, "If", {"cond"}, {"r"}, "branch");
    onnx::AttributeProto *thenBranch = ifNode->add_attribute();
    thenBranch->set_name("then_branch");
    thenBranch->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto &sub = *thenBranch->mutable_g();
    sub.set_name("then");
    onnx::NodeProto *inner = addNode(sub, "Constant", {}, {"v"}, "inner_const");
    onnx::AttributeProto *innerValue = inner->add_attribute();
    innerValue->set_name("value");
    innerValue->set_type(onnx::AttributeProto::TENSOR);
    *innerValue->mutable_t() = tensorToProto(branchValue, "inner");
    // No length: up to the end of the file.
    setExternal(*innerValue->mutable_t(), "data/weights.bin", 48, std::nullopt);
    *sub.add_output() = tensorInfo("v", TensorProto::DOUBLE, {});
    *graph.add_output() = tensorInfo("r", TensorProto::DOUBLE, {});
  }

  TensorProto &initializer() { return *model.mutable_graph()->mutable_initializer(0); }

  std::string loadError() {
    writeBytes(path("model.onnx"), serialized(model));
    return errorOf([&] { loadOnnxModel(path("model.onnx")); });
  }

  Tensor weights, bias, branchValue;
  onnx::ModelProto model;
};

TEST_F(ExternalDataTest, LoadsExternalTensorsEverywhere) {
  writeBytes(path("model.onnx"), serialized(model));
  onnx::ModelProto loaded = loadOnnxModel(path("model.onnx"));
  const onnx::GraphProto &graph = loaded.graph();

  const TensorProto &w = graph.initializer(0);
  EXPECT_EQ(w.data_location(), TensorProto::DEFAULT);
  EXPECT_EQ(w.external_data_size(), 0);
  EXPECT_TRUE(sameBytes(tensorFromProto(w), weights));

  const TensorProto &b = graph.node(0).attribute(0).t();
  EXPECT_EQ(b.data_location(), TensorProto::DEFAULT);
  EXPECT_TRUE(sameBytes(tensorFromProto(b), bias));

  const TensorProto &v = graph.node(1).attribute(0).g().node(0).attribute(0).t();
  EXPECT_EQ(v.data_location(), TensorProto::DEFAULT);
  EXPECT_EQ(tensorFromProto(v).getDouble(0), 2.5);
}

TEST_F(ExternalDataTest, LoadsWhenTheModelPathHasNoDirectory) {
  writeBytes(path("model.onnx"), serialized(model));
  fs::path previous = fs::current_path();
  fs::current_path(dir);
  EXPECT_NO_THROW(loadOnnxModel("model.onnx"));
  fs::current_path(previous);
}

TEST_F(ExternalDataTest, ReportsAMissingDataFile) {
  setExternal(initializer(), "data/missing.bin", 0, 24);
  std::string msg = loadError();
  EXPECT_CONTAINS(msg, "'W'");
  EXPECT_CONTAINS(msg, "missing.bin");
  EXPECT_CONTAINS(msg, "No such file or directory");
}

TEST_F(ExternalDataTest, RejectsPathsOutsideTheModelDirectory) {
  for (std::string location : {"../weights.bin", "data/../../weights.bin", "/etc/passwd"}) {
    setExternal(initializer(), location, 0, 24);
    std::string msg = loadError();
    EXPECT_CONTAINS(msg, "'W'");
    EXPECT_CONTAINS(msg, location);
    EXPECT_CONTAINS(msg, "outside the model's directory");
  }
}

TEST_F(ExternalDataTest, RejectsRangesBeyondTheFileEnd) {
  setExternal(initializer(), "data/weights.bin", 40, 24);
  std::string msg = loadError();
  EXPECT_CONTAINS(msg, "'W'");
  EXPECT_CONTAINS(msg, "beyond the end");
  EXPECT_CONTAINS(msg, "weights.bin");

  setExternal(initializer(), "data/weights.bin", 1000, std::nullopt);
  EXPECT_CONTAINS(loadError(), "beyond the end");
}

TEST_F(ExternalDataTest, RejectsMalformedEntries) {
  setExternal(initializer(), "data/weights.bin", 0, 24);
  initializer().mutable_external_data(1)->set_value("-8");
  EXPECT_CONTAINS(loadError(), "invalid offset");

  initializer().clear_external_data();
  EXPECT_CONTAINS(loadError(), "no 'location'");
}

TEST_F(ExternalDataTest, UnloadedExternalTensorsAreAnError) {
  EXPECT_CONTAINS(errorOf([&] { tensorFromProto(initializer()); }), "external");
}

//===----------------------------------------------------------------------===//
// Preparation: input shapes, shape inference, opset upgrade
//===----------------------------------------------------------------------===//

TEST(OnnxPrepareTest, FixesInputShapesAndInfersShapes) {
  onnx::ModelProto model = addReluModel(13);
  PrepareOptions opts;
  opts.inputShapes["a"] = {2, 3};
  opts.inputShapes["b"] = {2, 3};
  prepareOnnxModel(model, opts);

  EXPECT_EQ(staticDims(model.graph().input(0)), (std::vector<int64_t>{2, 3}));
  const onnx::ValueInfoProto *sum = findValueInfo(model.graph(), "s");
  ASSERT_NE(sum, nullptr) << "shape inference did not add value_info for 's'";
  EXPECT_EQ(sum->type().tensor_type().elem_type(), TensorProto::FLOAT);
  EXPECT_EQ(staticDims(*sum), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(staticDims(model.graph().output(0)), (std::vector<int64_t>{2, 3}));
}

TEST(OnnxPrepareTest, InfersSymbolicShapesWithoutInputShapes) {
  onnx::ModelProto model = addReluModel(13);
  prepareOnnxModel(model, {});
  const onnx::ValueInfoProto *sum = findValueInfo(model.graph(), "s");
  ASSERT_NE(sum, nullptr);
  ASSERT_EQ(sum->type().tensor_type().shape().dim_size(), 2);
  EXPECT_EQ(sum->type().tensor_type().shape().dim(0).dim_param(), "N");
  EXPECT_EQ(sum->type().tensor_type().shape().dim(1).dim_value(), 3);
}

TEST(OnnxPrepareTest, RejectsMismatchedInputShapes) {
  onnx::ModelProto model = addReluModel(13);
  PrepareOptions opts;
  opts.inputShapes["a"] = {2, 3, 4};
  std::string msg = errorOf([&] { prepareOnnxModel(model, opts); });
  EXPECT_CONTAINS(msg, "'a'");
  EXPECT_CONTAINS(msg, "[N, 3]");
  EXPECT_CONTAINS(msg, "[2, 3, 4]");
  EXPECT_CONTAINS(msg, "rank");

  opts.inputShapes["a"] = {2, 4};
  msg = errorOf([&] { prepareOnnxModel(model, opts); });
  EXPECT_CONTAINS(msg, "'a'");
  EXPECT_CONTAINS(msg, "[N, 3]");
  EXPECT_CONTAINS(msg, "[2, 4]");

  opts.inputShapes = {{"c", {1}}};
  msg = errorOf([&] { prepareOnnxModel(model, opts); });
  EXPECT_CONTAINS(msg, "'c'");
  EXPECT_CONTAINS(msg, "'a', 'b'");
}

TEST(OnnxPrepareTest, SetsShapesOfInputsWithoutDeclaredShape) {
  onnx::ModelProto model = addReluModel(13);
  model.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  PrepareOptions opts;
  opts.inputShapes["b"] = {5, 3};
  prepareOnnxModel(model, opts);
  EXPECT_EQ(staticDims(model.graph().input(1)), (std::vector<int64_t>{5, 3}));
}

TEST(OnnxPrepareTest, ReportsShapeConflictsNamingTheNode) {
  onnx::ModelProto model = addReluModel(13);
  *model.mutable_graph()->add_value_info() = tensorInfo("s", TensorProto::INT32, {"N", "3"});
  std::string msg = errorOf([&] { prepareOnnxModel(model, {}); });
  EXPECT_CONTAINS(msg, "shape inference");
  EXPECT_CONTAINS(msg, "add");
}

TEST(OnnxPrepareTest, RejectsMalformedGraphsBeforeCallingOnnx) {
  // ONNX 1.12's converter and shape inference crash on such graphs instead of reporting them.
  onnx::ModelProto undefinedInput = addReluModel(6);
  undefinedInput.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  std::string msg = errorOf([&] { prepareOnnxModel(undefinedInput, {}); });
  EXPECT_CONTAINS(msg, "'relu' (Relu)");
  EXPECT_CONTAINS(msg, "'nowhere'");

  onnx::ModelProto undefinedOutput = addReluModel(6);
  undefinedOutput.mutable_graph()->mutable_output(0)->set_name("lost");
  EXPECT_CONTAINS(errorOf([&] { prepareOnnxModel(undefinedOutput, {}); }), "'lost'");

  onnx::ModelProto missingInput = addReluModel(13);
  missingInput.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
  msg = errorOf([&] { prepareOnnxModel(missingInput, {}); });
  EXPECT_CONTAINS(msg, "'add' (Add)");
  EXPECT_CONTAINS(msg, "opset 13");
}

TEST(OnnxPrepareTest, SkipsUnknownOperators) {
  onnx::ModelProto model = addReluModel(13);
  addNode(*model.mutable_graph(), "NoSuchOperator", {"y"}, {"z"}, "mystery");
  EXPECT_NO_THROW(prepareOnnxModel(model, {}));
  EXPECT_NE(findValueInfo(model.graph(), "s"), nullptr);
}

TEST(OnnxPrepareTest, UpgradesOldOpsets) {
  onnx::ModelProto model = addReluModel(6);
  PrepareOptions opts;
  opts.inputShapes["a"] = {2, 3};
  opts.inputShapes["b"] = {2, 3};
  prepareOnnxModel(model, opts);
  EXPECT_GE(defaultOpset(model), 7);
  EXPECT_EQ(model.graph().node_size(), 2);
  const onnx::ValueInfoProto *sum = findValueInfo(model.graph(), "s");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(staticDims(*sum), (std::vector<int64_t>{2, 3}));
}

TEST(OnnxPrepareTest, UpgradesBroadcastingOpsOnIntermediateValues) {
  // ONNX's 6 -> 7 adapter for a broadcasting Add needs the shape of every input, here a
  // Constant's output.
  onnx::ModelProto model = emptyModel(6);
  onnx::GraphProto &graph = *model.mutable_graph();
  *graph.add_input() = tensorInfo("a", TensorProto::FLOAT, {"2", "3"});
  onnx::NodeProto *constant = addNode(graph, "Constant", {}, {"c"}, "constant");
  onnx::AttributeProto *value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = tensorToProto(Tensor(DType::F32, {3}), "c");
  onnx::AttributeProto *broadcast =
      addNode(graph, "Add", {"a", "c"}, {"y"}, "add")->add_attribute();
  broadcast->set_name("broadcast");
  broadcast->set_type(onnx::AttributeProto::INT);
  broadcast->set_i(1);
  *graph.add_output() = tensorInfo("y", TensorProto::FLOAT, {"2", "3"});
  prepareOnnxModel(model, {});
  EXPECT_GE(defaultOpset(model), 7);
  EXPECT_EQ(model.graph().node(1).op_type(), "Add");
  EXPECT_EQ(model.graph().node(1).attribute_size(), 0) << "opset 7 Add has no broadcast attribute";
  EXPECT_EQ(staticDims(model.graph().output(0)), (std::vector<int64_t>{2, 3}));
}

TEST(OnnxPrepareTest, ReportsFailedUpgrades) {
  onnx::ModelProto unknownOp = addReluModel(6);
  addNode(*unknownOp.mutable_graph(), "NoSuchOperator", {"y"}, {"z"}, "mystery");
  std::string msg = errorOf([&] { prepareOnnxModel(unknownOp, {}); });
  EXPECT_CONTAINS(msg, "opset 6");
  EXPECT_CONTAINS(msg, "'mystery' (NoSuchOperator)");

  // Split has no adapter from opset 1 to 2.
  onnx::ModelProto noAdapter = emptyModel(1);
  onnx::GraphProto &graph = *noAdapter.mutable_graph();
  *graph.add_input() = tensorInfo("x", TensorProto::FLOAT, {"4"});
  addNode(graph, "Split", {"x"}, {"y0", "y1"}, "split");
  *graph.add_output() = tensorInfo("y0", TensorProto::FLOAT, {"2"});
  *graph.add_output() = tensorInfo("y1", TensorProto::FLOAT, {"2"});
  msg = errorOf([&] { prepareOnnxModel(noAdapter, {}); });
  EXPECT_CONTAINS(msg, "opset 1");
  EXPECT_CONTAINS(msg, "Split");
}

TEST(OnnxPrepareTest, LeavesSupportedOpsetsAlone) {
  for (int64_t opset : {7, 11, 13}) {
    onnx::ModelProto model = addReluModel(opset);
    prepareOnnxModel(model, {});
    EXPECT_EQ(defaultOpset(model), opset);
  }
}

} // namespace
