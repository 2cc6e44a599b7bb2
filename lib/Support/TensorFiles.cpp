//===- TensorFiles.cpp - Tensors in .npy files and serialized TensorProtos ===//

#include "tcc/Support/TensorFiles.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

namespace tcc {

namespace {

[[noreturn]] void fail(const std::string &what, const std::string &why) {
  throw Error(what + ": " + why);
}

// ---- .npy ------------------------------------------------------------------------------------

const uint8_t kNpyMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/// Parses the value of `key` in a .npy header dict (a Python literal), e.g. 'descr': '<f4'.
std::string npyField(const std::string &header, const std::string &key, const std::string &what) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    fail(what, "the .npy header has no '" + key + "' field");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos)
    fail(what, "malformed .npy header");
  size_t start = header.find_first_not_of(" ", colon + 1);
  if (start == std::string::npos)
    fail(what, "malformed .npy header");
  char open = header[start];
  if (open == '\'' || open == '"') {
    size_t end = header.find(open, start + 1);
    if (end == std::string::npos)
      fail(what, "malformed .npy header");
    return header.substr(start + 1, end - start - 1);
  }
  if (open == '(') {
    size_t end = header.find(')', start);
    if (end == std::string::npos)
      fail(what, "malformed .npy header");
    return header.substr(start + 1, end - start - 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

struct NpyCode {
  const char *code;
  DType dtype;
};
const NpyCode kNpyCodes[] = {{"b1", DType::Bool}, {"u1", DType::U8},  {"i1", DType::I8},
                             {"u2", DType::U16},  {"i2", DType::I16}, {"u4", DType::U32},
                             {"i4", DType::I32},  {"u8", DType::U64}, {"i8", DType::I64},
                             {"f2", DType::F16},  {"f4", DType::F32}, {"f8", DType::F64}};

// ---- The protobuf wire format (https://protobuf.dev/programming-guides/encoding/) -----------

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

/// Reads the protobuf encoding of one message; every read checks the bounds.
class WireReader {
public:
  WireReader(const uint8_t *p, const uint8_t *end, const std::string &what)
      : p_(p), end_(end), what_(what) {}
  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_)
        truncated();
      uint8_t b = *p_++;
      v |= (uint64_t)(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    fail(what_, "not a serialized TensorProto (a varint longer than 10 bytes)");
  }
  template <class T> T fixed() {
    if ((size_t)(end_ - p_) < sizeof(T))
      truncated();
    T v;
    std::memcpy(&v, p_, sizeof(T)); // protobuf is little-endian, as are the hosts we build for
    p_ += sizeof(T);
    return v;
  }
  /// A length-delimited field's payload.
  WireReader sub() {
    uint64_t n = varint();
    if (n > (uint64_t)(end_ - p_))
      truncated();
    WireReader r(p_, p_ + n, what_);
    p_ += n;
    return r;
  }
  std::string bytes() {
    WireReader r = sub();
    return std::string(reinterpret_cast<const char *>(r.p_), r.end_ - r.p_);
  }
  void skip(int wireType) {
    switch (wireType) {
    case kVarint: varint(); return;
    case kFixed64: fixed<uint64_t>(); return;
    case kLengthDelimited: sub(); return;
    case kFixed32: fixed<uint32_t>(); return;
    default: fail(what_, "not a serialized TensorProto (wire type " + std::to_string(wireType) + ")");
    }
  }
  /// Values of a repeated scalar field, packed or one per tag.
  template <class Read> void repeated(int wireType, int scalarWireType, Read read) {
    if (wireType == kLengthDelimited) {
      WireReader packed = sub();
      while (!packed.done())
        read(packed);
    } else if (wireType == scalarWireType) {
      read(*this);
    } else {
      badWireType();
    }
  }
  [[noreturn]] void badWireType() const {
    fail(what_, "not a serialized TensorProto (a field has the wrong wire type)");
  }

private:
  [[noreturn]] void truncated() const {
    fail(what_, "not a serialized TensorProto (the data ends inside a field: truncated?)");
  }
  const uint8_t *p_, *end_;
  const std::string &what_;
};

void putVarint(std::vector<uint8_t> &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back((uint8_t)(v | 0x80));
    v >>= 7;
  }
  out.push_back((uint8_t)v);
}

void putTag(std::vector<uint8_t> &out, int field, int wireType) {
  putVarint(out, (uint64_t)field << 3 | wireType);
}

// ---- TensorProto --------------------------------------------------------------------------------

// Field numbers and element types of onnx.proto's TensorProto.
enum TensorField {
  kDims = 1, kDataType = 2, kSegment = 3, kFloatData = 4, kInt32Data = 5, kStringData = 6,
  kInt64Data = 7, kName = 8, kRawData = 9, kDoubleData = 10, kUInt64Data = 11, kDocString = 12,
  kExternalData = 13, kDataLocation = 14, kMetadataProps = 16
};

struct OnnxType {
  int code;
  const char *name;
  std::optional<DType> dtype;
};
const OnnxType kOnnxTypes[] = {
    {1, "FLOAT", DType::F32},     {2, "UINT8", DType::U8},        {3, "INT8", DType::I8},
    {4, "UINT16", DType::U16},    {5, "INT16", DType::I16},       {6, "INT32", DType::I32},
    {7, "INT64", DType::I64},     {8, "STRING", std::nullopt},    {9, "BOOL", DType::Bool},
    {10, "FLOAT16", DType::F16},  {11, "DOUBLE", DType::F64},     {12, "UINT32", DType::U32},
    {13, "UINT64", DType::U64},   {14, "COMPLEX64", std::nullopt},
    {15, "COMPLEX128", std::nullopt}, {16, "BFLOAT16", DType::BF16},
    {17, "FLOAT8E4M3FN", DType::F8E4M3FN}, {18, "FLOAT8E4M3FNUZ", DType::F8E4M3FNUZ},
    {19, "FLOAT8E5M2", DType::F8E5M2},     {20, "FLOAT8E5M2FNUZ", DType::F8E5M2FNUZ},
    {21, "UINT4", DType::U4},              {22, "INT4", DType::I4},
    {23, "FLOAT4E2M1", std::nullopt},      {24, "FLOAT8E8M0", std::nullopt},
    {25, "UINT2", DType::U2},              {26, "INT2", DType::I2}};

int onnxTypeOf(DType t) {
  for (const OnnxType &o : kOnnxTypes)
    if (o.dtype == t)
      return o.code;
  throw Error("invalid dtype");
}

/// The typed repeated field of each element type when raw_data is not used.
int typedFieldFor(DType dtype) {
  switch (dtype) {
  case DType::F32: return kFloatData;
  case DType::F64: return kDoubleData;
  case DType::I64: return kInt64Data;
  case DType::U32:
  case DType::U64: return kUInt64Data;
  default: return kInt32Data; // bool, 8/16-bit integers, int32, float16/bfloat16 bits
  }
}

const char *typedFieldName(int field) {
  switch (field) {
  case kFloatData: return "float_data";
  case kDoubleData: return "double_data";
  case kInt32Data: return "int32_data";
  case kInt64Data: return "int64_data";
  case kUInt64Data: return "uint64_data";
  }
  return "?";
}

/// The fields of a TensorProto as read, before they are checked against each other.
struct RawTensorProto {
  std::vector<int64_t> dims;
  int dataType = 0;
  std::string name;
  std::optional<std::string> raw;
  std::vector<float> floats;
  std::vector<double> doubles;
  std::vector<int32_t> int32s;
  std::vector<int64_t> int64s;
  std::vector<uint64_t> uint64s;
  size_t strings = 0;
  bool segment = false, external = false;

  size_t typedCount(int field) const {
    switch (field) {
    case kFloatData: return floats.size();
    case kDoubleData: return doubles.size();
    case kInt32Data: return int32s.size();
    case kInt64Data: return int64s.size();
    case kUInt64Data: return uint64s.size();
    }
    return 0;
  }
};

RawTensorProto readFields(const std::vector<uint8_t> &bytes, const std::string &what) {
  RawTensorProto t;
  WireReader r(bytes.data(), bytes.data() + bytes.size(), what);
  while (!r.done()) {
    uint64_t tag = r.varint();
    uint64_t field = tag >> 3;
    int wire = (int)(tag & 7);
    switch (field) {
    case kDims:
      r.repeated(wire, kVarint, [&](WireReader &w) { t.dims.push_back((int64_t)w.varint()); });
      break;
    case kDataType:
      if (wire != kVarint)
        r.badWireType();
      t.dataType = (int)(int32_t)r.varint();
      break;
    case kFloatData:
      r.repeated(wire, kFixed32, [&](WireReader &w) { t.floats.push_back(w.fixed<float>()); });
      break;
    case kInt32Data: // int32 varints: negative values are sign-extended to 64 bits
      r.repeated(wire, kVarint,
                 [&](WireReader &w) { t.int32s.push_back((int32_t)(uint32_t)w.varint()); });
      break;
    case kInt64Data:
      r.repeated(wire, kVarint, [&](WireReader &w) { t.int64s.push_back((int64_t)w.varint()); });
      break;
    case kDoubleData:
      r.repeated(wire, kFixed64, [&](WireReader &w) { t.doubles.push_back(w.fixed<double>()); });
      break;
    case kUInt64Data:
      r.repeated(wire, kVarint, [&](WireReader &w) { t.uint64s.push_back(w.varint()); });
      break;
    case kName:
      if (wire != kLengthDelimited)
        r.badWireType();
      t.name = r.bytes();
      break;
    case kRawData:
      if (wire != kLengthDelimited)
        r.badWireType();
      t.raw = r.bytes();
      break;
    case kStringData:
      if (wire != kLengthDelimited)
        r.badWireType();
      r.skip(wire);
      ++t.strings;
      break;
    case kSegment:
      if (wire != kLengthDelimited)
        r.badWireType();
      r.skip(wire);
      t.segment = true;
      break;
    case kExternalData:
      if (wire != kLengthDelimited)
        r.badWireType();
      r.skip(wire);
      break;
    case kDataLocation:
      if (wire != kVarint)
        r.badWireType();
      t.external = r.varint() == 1; // TensorProto.EXTERNAL
      break;
    case kDocString:
    case kMetadataProps:
      if (wire != kLengthDelimited)
        r.badWireType();
      r.skip(wire);
      break;
    default:
      fail(what, "not a plain TensorProto (it has field " + std::to_string(field) +
                     ", which a TensorProto does not have; files holding sequence, optional or "
                     "map values are not supported)");
    }
  }
  return t;
}

} // namespace

// ---- Pieces shared with the other tensor-file readers -----------------------------------------

void copyElements(uint8_t *dst, const uint8_t *src, int64_t count, size_t elemSize, bool swap) {
  if (!swap || elemSize == 1) {
    std::memcpy(dst, src, count * elemSize);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    for (size_t b = 0; b < elemSize; ++b)
      dst[i * elemSize + b] = src[i * elemSize + elemSize - 1 - b];
}

int64_t checkedElementCount(const Shape &shape, size_t elemSize, size_t available,
                            const std::string &what) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > UINT64_MAX / (uint64_t)d / elemSize))
      fail(what, "the header declares an impossible shape " + shapeToString(shape));
    n *= d;
  }
  if (n * elemSize != available)
    fail(what, "the header declares shape " + shapeToString(shape) + " (" +
                   std::to_string(n * elemSize) + " bytes of data), but the file holds " +
                   std::to_string(available) + " bytes of data" +
                   (n * elemSize > available ? " (truncated?)" : ""));
  return (int64_t)n;
}

std::optional<int64_t> parseDimension(const std::string &text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0)
      return v;
  } catch (const std::exception &) { // invalid_argument, out_of_range
  }
  return std::nullopt;
}

// ---- .npy ------------------------------------------------------------------------------------

bool isNpy(const std::vector<uint8_t> &bytes) {
  return bytes.size() >= sizeof kNpyMagic &&
         std::memcmp(bytes.data(), kNpyMagic, sizeof kNpyMagic) == 0;
}

Tensor parseNpy(const std::vector<uint8_t> &bytes, const std::string &what) {
  if (bytes.size() < 10 || !isNpy(bytes))
    fail(what, "not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = bytes[6];
  size_t lenBytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (lenBytes == 0)
    fail(what, "unsupported .npy format version " + std::to_string(major));
  if (bytes.size() < 8 + lenBytes)
    fail(what, "truncated .npy header");
  size_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i) // little-endian length
    headerLen |= (size_t)bytes[8 + i] << (8 * i);
  size_t dataStart = 8 + lenBytes + headerLen;
  if (bytes.size() < dataStart)
    fail(what, "truncated .npy header");
  std::string header(bytes.begin() + 8 + lenBytes, bytes.begin() + dataStart);

  std::string descr = npyField(header, "descr", what);
  if (descr.size() < 3)
    fail(what, "unsupported .npy dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  std::optional<DType> dtype;
  for (const NpyCode &k : kNpyCodes)
    if (code == k.code)
      dtype = k.dtype;
  if (!dtype)
    fail(what, "unsupported .npy dtype '" + descr +
                   "' (supported: bool, (u)int8/16/32/64, float16, float32, float64)");
  bool swap;
  if (order == '|' || dtypeSize(*dtype) == 1)
    swap = false;
  else if (order == '<' || order == '>')
    swap = (order == '<') != kLittleEndianHost;
  else
    fail(what, "unsupported .npy byte order in '" + descr + "'");

  if (npyField(header, "fortran_order", what).find("True") != std::string::npos)
    fail(what, "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");

  Shape shape;
  std::string dims = npyField(header, "shape", what);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string part = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    part.erase(0, part.find_first_not_of(" L"));
    part.erase(part.find_last_not_of(" L") + 1);
    if (!part.empty()) {
      std::optional<int64_t> d = parseDimension(part);
      if (!d)
        fail(what, "malformed .npy shape '(" + dims + ")'");
      shape.push_back(*d);
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  int64_t count = checkedElementCount(shape, dtypeSize(*dtype), bytes.size() - dataStart, what);
  Tensor t(*dtype, shape);
  copyElements(static_cast<uint8_t *>(t.raw()), bytes.data() + dataStart, count,
               dtypeSize(*dtype), swap);
  if (*dtype == DType::Bool) { // a C++ bool must hold exactly 0 or 1
    uint8_t *b = static_cast<uint8_t *>(t.raw());
    for (int64_t i = 0; i < count; ++i)
      b[i] = b[i] != 0;
  }
  return t;
}

std::vector<uint8_t> toNpyBytes(const Tensor &t) {
  const char *code = nullptr;
  for (const NpyCode &k : kNpyCodes)
    if (k.dtype == t.dtype())
      code = k.code;
  if (!code)
    throw Error(std::string("a ") + dtypeName(t.dtype()) +
                " tensor cannot be stored in a .npy file (NumPy has no such type): use a "
                "TensorProto (.pb) file");
  std::string shape;
  for (int64_t d : t.shape())
    shape += std::to_string(d) + ", ";
  if (t.rank() > 1)
    shape.erase(shape.size() - 2);
  else if (t.rank() == 1)
    shape.pop_back();
  std::string header = std::string("{'descr': '") + (dtypeSize(t.dtype()) == 1 ? '|' : '<') +
                       code + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic, version, length, header padded with spaces and ended by '\n' so that the data
  // starts at a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kNpyMagic, kNpyMagic + sizeof kNpyMagic);
  out.push_back(1);
  out.push_back(0);
  out.push_back((uint8_t)(header.size() & 0xff));
  out.push_back((uint8_t)(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const uint8_t *data = static_cast<const uint8_t *>(t.raw());
  size_t start = out.size();
  out.resize(start + t.byteSize());
  copyElements(out.data() + start, data, t.numElements(), dtypeSize(t.dtype()),
               !kLittleEndianHost);
  return out;
}

// ---- TensorProto ---------------------------------------------------------------------------------

Tensor parseTensorProto(const std::vector<uint8_t> &bytes, const std::string &what,
                        std::string *name) {
  if (bytes.empty())
    fail(what, "the file is empty");
  RawTensorProto t = readFields(bytes, what);
  std::string desc = t.name.empty() ? std::string("the tensor") : "tensor '" + t.name + "'";
  auto bad = [&](const std::string &why) { fail(what, desc + " " + why); };
  if (t.segment)
    fail(what, "a segment of a larger tensor, or not a TensorProto");
  const OnnxType *type = nullptr;
  for (const OnnxType &o : kOnnxTypes)
    if (o.code == t.dataType)
      type = &o;
  if (!type)
    fail(what, "data_type " + std::to_string(t.dataType) +
                   " is not a valid element type (files holding sequence, optional or map "
                   "values are not supported)");
  if (!type->dtype)
    bad(std::string("has element type ") + type->name + ", which tcc does not support");
  if (t.external)
    bad("keeps its data in an external file, which this reader does not load");
  DType dtype = *type->dtype;

  int64_t elements = 1;
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / 8;
  for (int64_t d : t.dims) {
    if (d < 0)
      bad("has a negative dimension in shape " + shapeToString(t.dims));
    if (d != 0 && elements > maxElements / d)
      bad("has shape " + shapeToString(t.dims) + ", which has too many elements");
    elements *= d;
  }

  int expected = typedFieldFor(dtype);
  for (int field : {kFloatData, kDoubleData, kInt32Data, kInt64Data, kUInt64Data})
    if (field != expected && t.typedCount(field) > 0)
      bad(std::string("of type ") + type->name + " has data in " + typedFieldName(field) +
          ", but that type belongs in " + typedFieldName(expected));
  if (t.strings > 0)
    bad(std::string("of type ") + type->name + " has data in string_data");
  if (t.raw && t.typedCount(expected) > 0)
    bad(std::string("has data in both raw_data and ") + typedFieldName(expected));
  if (name)
    *name = t.name;

  // Sizes are checked before the tensor is allocated (a damaged file may claim any shape).
  if (isSubByteInt(dtype)) { // packed, in raw_data or a byte per int32_data value
    uint64_t need = onnxPackedByteSize(dtype, elements);
    std::vector<uint8_t> packed;
    if (t.raw) {
      packed.assign(t.raw->begin(), t.raw->end());
    } else {
      for (int32_t v : t.int32s) {
        if (v < 0 || v > 255)
          bad(std::string("of type ") + type->name + " has out-of-range value " +
              std::to_string(v) + " in int32_data");
        packed.push_back((uint8_t)v);
      }
    }
    if (packed.size() != need)
      bad("has shape " + shapeToString(t.dims) + " of type " + type->name + ", which packs into " +
          std::to_string(need) + " bytes, but " + (t.raw ? "raw_data" : "int32_data") +
          " holds " + std::to_string(packed.size()));
    Tensor out(dtype, t.dims);
    unpackSubByteInts(packed.data(), out);
    return out;
  }
  if (t.raw) {
    uint64_t need = (uint64_t)elements * dtypeSize(dtype);
    if (t.raw->size() != need)
      bad("has shape " + shapeToString(t.dims) + " of type " + type->name + ", which needs " +
          std::to_string(need) + " bytes, but raw_data holds " + std::to_string(t.raw->size()));
    Tensor out(dtype, t.dims);
    std::memcpy(out.raw(), t.raw->data(), need);
    if (dtype == DType::Bool) { // any non-zero byte is true
      uint8_t *b = static_cast<uint8_t *>(out.raw());
      for (int64_t i = 0; i < elements; ++i)
        b[i] = b[i] != 0;
    }
    return out;
  }
  if ((int64_t)t.typedCount(expected) != elements)
    bad("has shape " + shapeToString(t.dims) + " (" + std::to_string(elements) +
        " elements) but " + typedFieldName(expected) + " holds " +
        std::to_string(t.typedCount(expected)));
  Tensor out(dtype, t.dims);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *dst = out.data<T>();
    if constexpr (std::is_same_v<T, float>) {
      std::copy(t.floats.begin(), t.floats.end(), dst);
    } else if constexpr (std::is_same_v<T, double>) {
      std::copy(t.doubles.begin(), t.doubles.end(), dst);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      std::copy(t.int64s.begin(), t.int64s.end(), dst);
    } else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
      for (size_t i = 0; i < t.uint64s.size(); ++i) {
        if (t.uint64s[i] > std::numeric_limits<T>::max())
          bad(std::string("of type ") + type->name + " has out-of-range value " +
              std::to_string(t.uint64s[i]) + " in uint64_data");
        dst[i] = (T)t.uint64s[i];
      }
    } else {
      for (size_t i = 0; i < t.int32s.size(); ++i)
        if (!fromInt32Field(t.int32s[i], dst[i]))
          bad(std::string("of type ") + type->name + " has out-of-range value " +
              std::to_string(t.int32s[i]) + " in int32_data");
    }
  });
  return out;
}

std::vector<uint8_t> toTensorProtoBytes(const Tensor &t, const std::string &name) {
  if (!t.defined())
    throw Error("cannot convert undefined tensor '" + name + "' to a TensorProto");
  std::vector<uint8_t> out;
  for (int64_t d : t.shape()) {
    putTag(out, kDims, kVarint);
    putVarint(out, (uint64_t)d);
  }
  putTag(out, kDataType, kVarint);
  putVarint(out, (uint64_t)onnxTypeOf(t.dtype()));
  putTag(out, kName, kLengthDelimited);
  putVarint(out, name.size());
  out.insert(out.end(), name.begin(), name.end());
  putTag(out, kRawData, kLengthDelimited);
  if (isSubByteInt(t.dtype())) {
    std::vector<uint8_t> packed = packSubByteInts(t);
    putVarint(out, packed.size());
    out.insert(out.end(), packed.begin(), packed.end());
    return out;
  }
  putVarint(out, t.byteSize());
  const uint8_t *data = static_cast<const uint8_t *>(t.raw());
  out.insert(out.end(), data, data + t.byteSize());
  return out;
}

// ---- ONNX's packed 4- and 2-bit integers -------------------------------------------------------

static int subByteBits(DType t) { return t == DType::U4 || t == DType::I4 ? 4 : 2; }

uint64_t onnxPackedByteSize(DType t, int64_t elements) {
  if (!isSubByteInt(t))
    return (uint64_t)elements * dtypeSize(t);
  const int perByte = 8 / subByteBits(t);
  return ((uint64_t)elements + perByte - 1) / perByte;
}

void unpackSubByteInts(const uint8_t *packed, Tensor &out) {
  const int bits = subByteBits(out.dtype()), perByte = 8 / bits;
  auto *dst = static_cast<uint8_t *>(out.raw());
  for (int64_t i = 0; i < out.numElements(); ++i) {
    const unsigned field = (packed[i / perByte] >> (bits * (i % perByte))) & ((1u << bits) - 1);
    dst[i] = wrapSubByteInt(out.dtype(), field);
  }
}

std::vector<uint8_t> packSubByteInts(const Tensor &t) {
  const int bits = subByteBits(t.dtype()), perByte = 8 / bits;
  std::vector<uint8_t> packed(onnxPackedByteSize(t.dtype(), t.numElements()), 0);
  const auto *src = static_cast<const uint8_t *>(t.raw());
  for (int64_t i = 0; i < t.numElements(); ++i)
    packed[i / perByte] |= (uint8_t)((src[i] & ((1u << bits) - 1)) << (bits * (i % perByte)));
  return packed;
}

// ---- Files -------------------------------------------------------------------------------------

std::vector<uint8_t> readFileBytes(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot read '" + path + "': it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad())
    throw Error("cannot read '" + path + "'");
  return bytes;
}

void writeFileBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw Error("cannot create '" + path + "': " + std::strerror(errno));
  f.write(reinterpret_cast<const char *>(bytes.data()), (std::streamsize)bytes.size());
  f.close();
  if (!f)
    throw Error("cannot write '" + path + "'");
}

Tensor loadTensorFile(const std::string &path, std::string *name) {
  std::vector<uint8_t> bytes = readFileBytes(path);
  std::string what = "'" + path + "'";
  if (isNpy(bytes)) {
    if (name)
      name->clear();
    return parseNpy(bytes, what);
  }
  return parseTensorProto(bytes, what, name);
}

} // namespace tcc
