//===- OnnxModel.cpp - Loading, preparing and converting ONNX protos ------===//

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Support/TensorFiles.h" // fromInt32Field

#include "GuardedSchemas.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

// raw_data is little-endian; tcc::Tensor buffers are host order, and are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "OnnxModel.cpp assumes a little-endian host");

namespace tcc {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

std::string inQuotes(const std::string &s) { return "'" + s + "'"; }

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// A read-only file descriptor with its size. `what` ("model file", "tensor file", ...) names
/// the file's role in error messages.
class OpenFile {
public:
  OpenFile(const std::string &path, const std::string &what) : path_(path), what_(what) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw Error("cannot open " + what + " " + inQuotes(path) + ": " + std::strerror(errno));
    struct stat st;
    // open() succeeds on directories; reading them fails later with a less clear message.
    int statError = ::fstat(fd_, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (statError != 0) {
      ::close(fd_);
      throw Error("cannot open " + what + " " + inQuotes(path) + ": " + std::strerror(statError));
    }
    size_ = (uint64_t)st.st_size;
  }
  OpenFile(const OpenFile &) = delete;
  OpenFile &operator=(const OpenFile &) = delete;
  ~OpenFile() { ::close(fd_); }

  int fd() const { return fd_; }
  const std::string &path() const { return path_; }
  uint64_t size() const { return size_; }

  /// Reads exactly `length` bytes at `offset` (the caller has checked the range).
  std::string read(uint64_t offset, uint64_t length) const {
    std::string bytes(length, '\0');
    uint64_t done = 0;
    while (done < length) {
      ssize_t n = ::pread(fd_, &bytes[done], length - done, (off_t)(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        failWithErrno("cannot read");
      if (n == 0)
        throw Error("cannot read " + what_ + " " + inQuotes(path_) + ": it ended early");
      done += (uint64_t)n;
    }
    return bytes;
  }

private:
  [[noreturn]] void failWithErrno(const std::string &action) const {
    std::string reason = std::strerror(errno);
    throw Error(action + " " + what_ + " " + inQuotes(path_) + ": " + reason);
  }

  std::string path_, what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Parses the whole of `file` into `msg`. Returns false when the bytes are not a valid
/// serialization of that message type.
bool parseProtoFile(google::protobuf::Message &msg, const OpenFile &file) {
  google::protobuf::io::FileInputStream raw(file.fd());
  bool parsed;
  {
    google::protobuf::io::CodedInputStream coded(&raw);
    // Protobuf before 3.11 defaults to 64 MiB; 2 GiB is the most it can address at all.
    coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
    parsed = msg.ParseFromCodedStream(&coded);
  }
  if (raw.GetErrno() != 0)
    throw Error("cannot read " + inQuotes(file.path()) + ": " + std::strerror(raw.GetErrno()));
  return parsed;
}

/// Protobuf cannot parse messages of 2 GiB or more.
void checkProtobufSize(const OpenFile &file, const std::string &advice) {
  if (file.size() > (uint64_t)std::numeric_limits<int>::max())
    throw Error(inQuotes(file.path()) + " is " + std::to_string(file.size()) +
                " bytes; protobuf files must be smaller than 2 GiB" + advice);
}

/// True if `msg` or any message nested in it holds fields unknown to its type, which is the
/// sign of bytes written as a different message type.
bool hasUnknownFields(const google::protobuf::Message &msg) {
  const google::protobuf::Reflection *reflection = msg.GetReflection();
  if (!reflection->GetUnknownFields(msg).empty())
    return true;
  std::vector<const google::protobuf::FieldDescriptor *> fields;
  reflection->ListFields(msg, &fields);
  for (const google::protobuf::FieldDescriptor *field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (field->is_repeated()) {
      for (int i = 0, e = reflection->FieldSize(msg, field); i < e; ++i)
        if (hasUnknownFields(reflection->GetRepeatedMessage(msg, field, i)))
          return true;
    } else if (hasUnknownFields(reflection->GetMessage(msg, field))) {
      return true;
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Walking every TensorProto of a model
//===----------------------------------------------------------------------===//

/// Called with each tensor and a description of where it is, for error messages.
using TensorVisitor = std::function<void(TensorProto &, const std::string &where)>;

void visitTensors(onnx::GraphProto &graph, const TensorVisitor &visit);

std::string graphSuffix(const onnx::GraphProto &graph) {
  return graph.name().empty() ? std::string() : " of graph " + inQuotes(graph.name());
}

std::string nodeDescription(const onnx::NodeProto &node) {
  if (node.name().empty() && node.output_size() > 0)
    return "node with output " + inQuotes(node.output(0)) + " (" + node.op_type() + ")";
  return "node " + inQuotes(node.name()) + " (" + node.op_type() + ")";
}

void visitTensors(onnx::SparseTensorProto &sparse, const std::string &where,
                  const TensorVisitor &visit) {
  if (sparse.has_values())
    visit(*sparse.mutable_values(), "values of " + where);
  if (sparse.has_indices())
    visit(*sparse.mutable_indices(), "indices of " + where);
}

void visitTensors(onnx::AttributeProto &attr, const std::string &owner,
                  const TensorVisitor &visit) {
  std::string where = "attribute " + inQuotes(attr.name()) + " of " + owner;
  if (attr.has_t())
    visit(*attr.mutable_t(), where);
  for (TensorProto &t : *attr.mutable_tensors())
    visit(t, where);
  if (attr.has_sparse_tensor())
    visitTensors(*attr.mutable_sparse_tensor(), where, visit);
  for (onnx::SparseTensorProto &s : *attr.mutable_sparse_tensors())
    visitTensors(s, where, visit);
  // Subgraphs of If, Loop and Scan.
  if (attr.has_g())
    visitTensors(*attr.mutable_g(), visit);
  for (onnx::GraphProto &g : *attr.mutable_graphs())
    visitTensors(g, visit);
}

void visitTensors(onnx::NodeProto &node, const std::string &suffix, const TensorVisitor &visit) {
  std::string owner = nodeDescription(node) + suffix;
  for (onnx::AttributeProto &attr : *node.mutable_attribute())
    visitTensors(attr, owner, visit);
}

void visitTensors(onnx::GraphProto &graph, const TensorVisitor &visit) {
  std::string suffix = graphSuffix(graph);
  for (TensorProto &t : *graph.mutable_initializer())
    visit(t, "initializer " + inQuotes(t.name()) + suffix);
  for (onnx::SparseTensorProto &s : *graph.mutable_sparse_initializer())
    visitTensors(s, "sparse initializer " + inQuotes(s.values().name()) + suffix, visit);
  for (onnx::NodeProto &node : *graph.mutable_node())
    visitTensors(node, suffix, visit);
}

void visitTensors(onnx::ModelProto &model, const TensorVisitor &visit) {
  if (model.has_graph())
    visitTensors(*model.mutable_graph(), visit);
  for (onnx::FunctionProto &function : *model.mutable_functions())
    for (onnx::NodeProto &node : *function.mutable_node())
      visitTensors(node, " of function " + inQuotes(function.name()), visit);
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

struct ExternalDataRef {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length; // absent: up to the end of the file
};

uint64_t parseExternalDataNumber(const std::string &value, const std::string &key,
                                 const std::string &where) {
  bool valid = !value.empty() && value.size() <= 19;
  for (char c : value)
    valid = valid && c >= '0' && c <= '9';
  if (!valid)
    throw Error("external data of " + where + " has an invalid " + key + " " + inQuotes(value) +
                " (expected a non-negative integer)");
  return std::stoull(value);
}

ExternalDataRef parseExternalDataRef(const TensorProto &t, const std::string &where) {
  ExternalDataRef ref;
  for (const onnx::StringStringEntryProto &entry : t.external_data()) {
    if (entry.key() == "location")
      ref.location = entry.value();
    else if (entry.key() == "offset")
      ref.offset = parseExternalDataNumber(entry.value(), "offset", where);
    else if (entry.key() == "length")
      ref.length = parseExternalDataNumber(entry.value(), "length", where);
  }
  if (ref.location.empty())
    throw Error(where + " is stored as external data but has no 'location' entry");
  return ref;
}

/// External files must lie inside the model's directory: a model must not be able to make the
/// compiler read arbitrary files. The check is lexical on purpose, so that symlinked weight
/// files (as in model caches) keep working.
void checkLocationInsideModelDir(const std::string &location, const std::string &where) {
  fs::path path(location);
  bool escapes = path.has_root_path();
  for (const fs::path &part : path)
    escapes = escapes || part == "..";
  if (escapes)
    throw Error(where + " names external data file " + inQuotes(location) +
                ", which is outside the model's directory (absolute paths and '..' are not "
                "allowed)");
}

/// Loads external tensor data, keeping each data file open for the tensors that follow.
class ExternalDataResolver {
public:
  explicit ExternalDataResolver(fs::path modelDir) : modelDir_(std::move(modelDir)) {}

  void resolve(TensorProto &t, const std::string &where) {
    if (t.data_location() != TensorProto::EXTERNAL)
      return;
    ExternalDataRef ref = parseExternalDataRef(t, where);
    checkLocationInsideModelDir(ref.location, where);
    const OpenFile &file = open(ref.location, where);
    uint64_t available = ref.offset <= file.size() ? file.size() - ref.offset : 0;
    if (ref.offset > file.size() || (ref.length && *ref.length > available))
      throw Error(where + ": external data at offset " + std::to_string(ref.offset) +
                  (ref.length ? " with length " + std::to_string(*ref.length) : std::string()) +
                  " lies beyond the end of " + inQuotes(ref.location) + " (" +
                  std::to_string(file.size()) + " bytes)");
    t.set_raw_data(file.read(ref.offset, ref.length.value_or(available)));
    t.clear_external_data();
    t.set_data_location(TensorProto::DEFAULT);
  }

private:
  const OpenFile &open(const std::string &location, const std::string &where) {
    auto it = files_.find(location);
    if (it != files_.end())
      return *it->second;
    std::string path = (modelDir_ / location).string();
    try {
      auto file = std::make_unique<OpenFile>(path, "external data file");
      return *files_.emplace(location, std::move(file)).first->second;
    } catch (const Error &e) {
      throw Error(where + ": " + e.what());
    }
  }

  fs::path modelDir_;
  std::map<std::string, std::unique_ptr<OpenFile>> files_;
};

//===----------------------------------------------------------------------===//
// Model loading
//===----------------------------------------------------------------------===//

/// `what`: the model as errors name it ("'model.onnx'").
void checkModelStructure(const onnx::ModelProto &model, const std::string &what) {
  auto invalid = [&](const std::string &why) {
    return Error(what + " is not a valid ONNX model: " + why);
  };
  if (!model.has_graph())
    throw invalid("it has no graph");
  if (model.ir_version() <= 0)
    throw invalid("it has no ir_version");
  if (model.opset_import_size() == 0)
    throw invalid("it has no opset_import (the operator set versions it was written for)");
}

//===----------------------------------------------------------------------===//
// Opset upgrade, input shapes, shape inference
//===----------------------------------------------------------------------===//

bool isDefaultDomain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

std::optional<int64_t> defaultDomainOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (isDefaultDomain(opset.domain()))
      return opset.version();
  return std::nullopt;
}

/// ConvertVersion reports failures as assertion errors (std::runtime_error subclasses).
std::optional<onnx::ModelProto> tryConvertVersion(const onnx::ModelProto &model, int64_t target,
                                                  std::string &error) {
  try {
    onnx::ModelProto converted = onnx::version_conversion::ConvertVersion(model, (int)target);
    std::optional<int64_t> reached = defaultDomainOpset(converted);
    if (reached && *reached >= target)
      return converted;
    error = "the converter did not produce opset " + std::to_string(target);
  } catch (const std::exception &e) {
    error = e.what();
  }
  return std::nullopt;
}

/// Nodes of operator versions newer than ONNX 1.12 defines (opsets 18 to 23 changed inputs and
/// attributes of Reduce*, Split, Pad, Resize, DFT, AveragePool, Cast...): ONNX's own schema
/// check and shape inference would judge them by an older definition, so both leave them to
/// the importer, which lowers each operator by the opset the model names. Keyed by the node.
using NewerNodes = std::set<const onnx::NodeProto *>;

void runShapeInference(onnx::ModelProto &model);

/// Shape inference with the `newer` nodes hidden from it: their op_type becomes one no schema
/// has while it runs (ONNX skips unknown operators; their outputs' types stay unknown).
void runShapeInferenceHiding(onnx::ModelProto &model, const NewerNodes &newer) {
  std::vector<std::pair<onnx::NodeProto *, std::string>> hidden;
  for (const onnx::NodeProto *node : newer) {
    auto *mutableNode = const_cast<onnx::NodeProto *>(node); // a node of `model`
    hidden.emplace_back(mutableNode, node->op_type());
    mutableNode->set_op_type("tcc.newer-than-onnx-1.12." + node->op_type());
  }
  auto restore = [&] {
    for (auto &[node, opType] : hidden)
      node->set_op_type(opType);
  };
  try {
    runShapeInference(model);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void runShapeInference(onnx::ModelProto &model) {
  // error_mode 0: node-level inference errors and unknown operators are skipped rather than
  // thrown; conflicts between inferred and declared element types still throw. Data
  // propagation lets shapes computed by Shape/Gather/Concat chains reach the operators that take
  // a shape input (Expand, ConstantOfShape...; in ONNX 1.12 not yet Reshape).
  onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0,
                                      /*enable_data_propagation=*/true);
  try {
    // The schemas with guards that keep ONNX's own inference functions from crashing on
    // inconsistent ranks and attributes (GuardedSchemas.h).
    onnx::shape_inference::InferShapes(model, guardedSchemaRegistry(), options);
  } catch (const std::exception &e) {
    // ONNX's messages name the node as "(op_type:Add, node name: n): ...".
    throw Error(std::string("ONNX shape inference failed: ") + e.what());
  }
}

/// Checks that every value a node or the graph's outputs use is defined before: by a graph
/// input, an initializer, an earlier node, or (for subgraphs) the enclosing scope. ONNX requires
/// this order, and its IR importer, used by the version converter, crashes on graphs without it.
void checkGraphWiring(const onnx::GraphProto &graph, std::set<std::string> defined) {
  for (const onnx::ValueInfoProto &input : graph.input())
    defined.insert(input.name());
  for (const TensorProto &t : graph.initializer())
    defined.insert(t.name());
  for (const onnx::SparseTensorProto &s : graph.sparse_initializer())
    defined.insert(s.values().name());
  std::string suffix = graphSuffix(graph);
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &input : node.input())
      if (!input.empty() && !defined.count(input))
        throw Error(nodeDescription(node) + suffix + " uses " + inQuotes(input) +
                    ", which no graph input, initializer or earlier node defines (nodes must be "
                    "in topological order)");
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g())
        checkGraphWiring(attr.g(), defined);
      for (const onnx::GraphProto &g : attr.graphs())
        checkGraphWiring(g, defined);
    }
    for (const std::string &output : node.output())
      if (!output.empty())
        defined.insert(output);
  }
  for (const onnx::ValueInfoProto &output : graph.output())
    if (!defined.count(output.name()))
      throw Error("graph output " + inQuotes(output.name()) + suffix +
                  " is not defined by any node, input or initializer");
}

using OpsetMap = std::map<std::string, int64_t>; // domain ("" for ai.onnx) -> version

OpsetMap opsetImports(const onnx::ModelProto &model) {
  OpsetMap opsets;
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    opsets[isDefaultDomain(opset.domain()) ? "" : opset.domain()] = opset.version();
  return opsets;
}

/// Strides, dilations and kernel sizes must be positive: ONNX 1.12's conv/pool shape inference
/// divides by them (a zero stride is a SIGFPE there).
void checkWindowAttributes(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.name() != "strides" && attr.name() != "dilations" && attr.name() != "kernel_shape")
      continue;
    for (int64_t v : attr.ints())
      if (v < 1)
        throw Error(nodeDescription(node) + " has " + attr.name() + " entry " + std::to_string(v) +
                    ": every entry must be at least 1");
  }
}

/// The newest opset of `domain` whose schemas ONNX 1.12 has (ai.onnx: 17); 0 if unknown.
int64_t lastKnownOpset(const std::string &domain) {
  const auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(domain);
  return it == ranges.end() ? 0 : it->second.second;
}

/// The values of `graph` whose element type ONNX 1.12 does not know (float8, 4- and 2-bit
/// integers...): graph inputs, initializers and annotated values, and Cast/CastLike results of
/// such a type.
std::set<std::string> valuesOfNewerTypes(const onnx::GraphProto &graph) {
  auto newerType = [](int32_t t) { return t > TensorProto::BFLOAT16 && isValidOnnxElemType(t); };
  std::set<std::string> names;
  for (const auto *infos : {&graph.input(), &graph.value_info(), &graph.output()})
    for (const onnx::ValueInfoProto &v : *infos)
      if (newerType(v.type().tensor_type().elem_type()))
        names.insert(v.name());
  for (const TensorProto &t : graph.initializer())
    if (newerType(t.data_type()))
      names.insert(t.name());
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Cast" && node.output_size() == 1)
      for (const onnx::AttributeProto &a : node.attribute())
        if (a.name() == "to" && newerType((int32_t)a.i()))
          names.insert(node.output(0));
  return names;
}

bool isCeilModePool(const onnx::NodeProto &node) {
  if (node.op_type() != "AveragePool" && node.op_type() != "MaxPool" && node.op_type() != "LpPool")
    return false;
  return std::any_of(node.attribute().begin(), node.attribute().end(),
                     [](const onnx::AttributeProto &a) { return a.name() == "ceil_mode" && a.i(); });
}

void verifyNodes(const onnx::GraphProto &graph, const OpsetMap &opsets, NewerNodes &newer) {
  const std::set<std::string> newerTyped = valuesOfNewerTypes(graph);
  for (const onnx::NodeProto &node : graph.node()) {
    auto opset = opsets.find(isDefaultDomain(node.domain()) ? "" : node.domain());
    // Nodes past ONNX 1.12's opsets whose later schemas infer differently: those reading a type
    // 1.12 does not know (DequantizeLinear-19 of float8 gives the scale's float16, 1.12's
    // float), and ceil-mode pooling (ONNX later drops a last window starting in the padding;
    // tcc's lowering does).
    if (opset != opsets.end() && opset->second > lastKnownOpset(opset->first) &&
        (std::any_of(node.input().begin(), node.input().end(),
                     [&](const std::string &in) { return newerTyped.count(in) > 0; }) ||
         isCeilModePool(node)))
      newer.insert(&node);
    const onnx::OpSchema *schema =
        opset == opsets.end()
            ? nullptr
            : onnx::OpSchemaRegistry::Schema(node.op_type(), (int)opset->second, opset->first);
    if (schema) {
      try {
        schema->Verify(node);
      } catch (const std::exception &e) {
        if (opset->second <= lastKnownOpset(opset->first))
          throw Error(nodeDescription(node) + " does not match the definition of " +
                      node.op_type() + " at opset " + std::to_string(opset->second) + ": " +
                      e.what());
        newer.insert(&node); // a later version of the operator than ONNX 1.12's
      }
    }
    checkWindowAttributes(node);
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_g())
        verifyNodes(attr.g(), opsets, newer);
      for (const onnx::GraphProto &g : attr.graphs())
        verifyNodes(g, opsets, newer);
    }
  }
}

/// ONNX's shape inference functions and version adapters assume that nodes match their
/// operator's schema (in 1.12 a Scan without num_scan_inputs crashes shape inference), so nodes
/// are checked against the schemas first: input and output counts, required attributes and
/// attribute types. Operators without a schema are left alone.
NewerNodes verifyNodesAgainstSchemas(const onnx::ModelProto &model) {
  NewerNodes newer;
  verifyNodes(model.graph(), opsetImports(model), newer);
  return newer;
}

/// Why ONNX's converter cannot handle `model`, if a node shows it. The 1.12 converter fails
/// with a bare "unordered_map::at" on operators it has no schema for, so those are found first.
std::optional<std::string> conversionObstacle(const onnx::ModelProto &model, int64_t opset) {
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (!isDefaultDomain(node.domain()))
      return nodeDescription(node) + " is in domain " + inQuotes(node.domain()) +
             ", and the converter handles only default-domain operators";
    if (!onnx::OpSchemaRegistry::Schema(node.op_type(), (int)opset, ""))
      return nodeDescription(node) + " is not an ONNX operator at opset " + std::to_string(opset);
  }
  return std::nullopt;
}

/// What ONNX 1.12's version adapters assume of shapes and would crash on instead of reporting
/// (found by fuzzing: Gemm_6_7 reads the dims of A and B, and of C to broadcast it).
std::optional<std::string> adapterObstacle(const onnx::ModelProto &model, int64_t opset) {
  if (opset >= 7)
    return std::nullopt;
  std::map<std::string, int> ranks; // known ranks, by value name
  const onnx::GraphProto &g = model.graph();
  for (const auto *infos : {&g.input(), &g.value_info(), &g.output()})
    for (const onnx::ValueInfoProto &v : *infos)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
        ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const TensorProto &t : g.initializer())
    ranks[t.name()] = t.dims_size();
  for (const onnx::NodeProto &node : g.node()) {
    if (node.op_type() != "Gemm")
      continue;
    for (int i = 0; i < std::min(node.input_size(), 3); ++i) {
      auto it = ranks.find(node.input(i));
      bool ok = it != ranks.end() && (i < 2 ? it->second == 2 : it->second >= 1 && it->second <= 2);
      if (!ok)
        return nodeDescription(node) + ": its input " + std::to_string(i) + " needs a known rank " +
               (i < 2 ? "of 2" : "of 1 or 2") + " for the upgrade of Gemm to opset 7" +
               (it == ranks.end() ? " (its shape is unknown)"
                                  : " (it has rank " + std::to_string(it->second) + ")");
    }
  }
  return std::nullopt;
}

void upgradeOpset(onnx::ModelProto &model, int64_t minimumOpset) {
  std::optional<int64_t> opset = defaultDomainOpset(model);
  if (!opset || *opset >= minimumOpset)
    return;
  std::string failure = "the model uses ONNX opset " + std::to_string(*opset) +
                        ", but tcc needs opset " + std::to_string(minimumOpset) +
                        " or later, and ONNX's version converter cannot upgrade it:";
  if (std::optional<std::string> obstacle = conversionObstacle(model, *opset))
    throw Error(failure + " " + *obstacle);
  // The broadcasting adapters (Add, Mul, Gemm... from opset 6 to 7) need the shapes of their
  // inputs, intermediate values included, so the converter gets a copy with inferred shapes.
  onnx::ModelProto withShapes = model;
  try {
    runShapeInference(withShapes);
  } catch (const Error &) {
    withShapes = model; // Convert without shapes; the converter reports what it misses.
  }
  if (std::optional<std::string> obstacle = adapterObstacle(withShapes, *opset))
    throw Error(failure + " " + *obstacle);
  // Some adapters only exist between particular versions, so a conversion that fails for the
  // lowest target may still succeed for a more recent one.
  std::vector<int64_t> targets = {minimumOpset};
  if (minimumOpset < 13)
    targets.push_back(13);
  std::string errors;
  std::string previousError;
  for (int64_t target : targets) {
    std::string error;
    if (std::optional<onnx::ModelProto> converted = tryConvertVersion(withShapes, target, error)) {
      model = std::move(*converted);
      return;
    }
    if (error != previousError)
      errors += "\n  to opset " + std::to_string(target) + ": " + error;
    previousError = error;
  }
  throw Error(failure + errors);
}

std::string dimString(const onnx::TensorShapeProto::Dimension &dim) {
  if (dim.has_dim_value())
    return std::to_string(dim.dim_value());
  return dim.has_dim_param() ? dim.dim_param() : "?";
}

std::string declaredShapeString(const onnx::TensorShapeProto &shape) {
  std::string s = "[";
  for (int i = 0; i < shape.dim_size(); ++i)
    s += (i ? ", " : "") + dimString(shape.dim(i));
  return s + "]";
}

std::string shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void checkGivenShapeMatches(const onnx::ValueInfoProto &input, const Shape &shape) {
  auto mismatch = [&](const std::string &why) {
    return Error("cannot set the shape of input " + inQuotes(input.name()) + " to " +
                 shapeString(shape) + ": " + why);
  };
  for (int64_t d : shape)
    if (d < 0)
      throw mismatch("dimensions must be non-negative");
  const onnx::TypeProto_Tensor &type = input.type().tensor_type();
  if (!type.has_shape())
    return;
  const onnx::TensorShapeProto &declared = type.shape();
  std::string declaredText = "the model declares it as " + declaredShapeString(declared);
  if ((size_t)declared.dim_size() != shape.size())
    throw mismatch(declaredText + ", of rank " + std::to_string(declared.dim_size()) +
                   ", but the given shape has rank " + std::to_string(shape.size()));
  for (int i = 0; i < declared.dim_size(); ++i)
    if (declared.dim(i).has_dim_value() && declared.dim(i).dim_value() != shape[i])
      throw mismatch(declaredText + ", and dimension " + std::to_string(i) + " differs");
}

void setInputShape(onnx::ValueInfoProto &input, const Shape &shape) {
  if (!input.type().has_tensor_type())
    throw Error("cannot set the shape of input " + inQuotes(input.name()) + ": it is not a tensor");
  checkGivenShapeMatches(input, shape);
  onnx::TensorShapeProto *declared = input.mutable_type()->mutable_tensor_type()->mutable_shape();
  declared->clear_dim();
  for (int64_t d : shape)
    declared->add_dim()->set_dim_value(d);
}

onnx::ValueInfoProto &findSettableInput(onnx::GraphProto &graph, const std::string &name) {
  std::set<std::string> initializers;
  for (const TensorProto &t : graph.initializer())
    initializers.insert(t.name());
  std::string inputs;
  for (onnx::ValueInfoProto &input : *graph.mutable_input()) {
    if (initializers.count(input.name()))
      continue;
    if (input.name() == name)
      return input;
    inputs += (inputs.empty() ? "" : ", ") + inQuotes(input.name());
  }
  if (initializers.count(name))
    throw Error("a shape was given for " + inQuotes(name) +
                ", which is an initializer, not a model input");
  throw Error("a shape was given for input " + inQuotes(name) +
              ", but the model has no such input (its inputs are: " +
              (inputs.empty() ? std::string("none") : inputs) + ")");
}

void fixInputShapes(onnx::GraphProto &graph, const std::map<std::string, Shape> &shapes) {
  for (const auto &[name, shape] : shapes)
    setInputShape(findSettableInput(graph, name), shape);
}

//===----------------------------------------------------------------------===//
// TensorProto <-> Tensor
//===----------------------------------------------------------------------===//

std::string tensorDescription(const TensorProto &t) {
  return t.name().empty() ? std::string("unnamed tensor") : "tensor " + inQuotes(t.name());
}

DType tensorDType(const TensorProto &t) {
  std::optional<DType> dtype = dtypeFromOnnx(t.data_type());
  if (!dtype)
    throw Error(tensorDescription(t) + " has element type " + onnxElemTypeName(t.data_type()) +
                ", which tcc does not support");
  return *dtype;
}

Shape tensorShape(const TensorProto &t) {
  Shape shape(t.dims().begin(), t.dims().end());
  // Bounds the byte size so that it cannot overflow before the data size is checked.
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(tensorDescription(t) + " has a negative dimension in shape " +
                  shapeString(shape));
    if (d != 0 && elements > maxElements / d)
      throw Error(tensorDescription(t) + " has shape " + shapeString(shape) +
                  ", which has too many elements");
    elements *= d;
  }
  return shape;
}

/// The typed repeated field that ONNX uses for each element type when raw_data is not used.
enum class TypedField { Float, Double, Int32, Int64, UInt64 };

TypedField typedFieldFor(DType dtype) {
  switch (dtype) {
  case DType::F32: return TypedField::Float;
  case DType::F64: return TypedField::Double;
  case DType::I64: return TypedField::Int64;
  case DType::U32:
  case DType::U64: return TypedField::UInt64;
  default: return TypedField::Int32; // bool, 8/16-bit integers, int32, float16/bfloat16 bits
  }
}

const char *typedFieldName(TypedField field) {
  switch (field) {
  case TypedField::Float: return "float_data";
  case TypedField::Double: return "double_data";
  case TypedField::Int32: return "int32_data";
  case TypedField::Int64: return "int64_data";
  case TypedField::UInt64: return "uint64_data";
  }
  return "?";
}

int64_t typedFieldSize(const TensorProto &t, TypedField field) {
  switch (field) {
  case TypedField::Float: return t.float_data_size();
  case TypedField::Double: return t.double_data_size();
  case TypedField::Int32: return t.int32_data_size();
  case TypedField::Int64: return t.int64_data_size();
  case TypedField::UInt64: return t.uint64_data_size();
  }
  return 0;
}

/// Rejects data in a typed field that does not belong to the tensor's element type, and data in
/// both raw_data and a typed field.
void checkDataFields(const TensorProto &t, DType dtype) {
  TypedField expected = typedFieldFor(dtype);
  for (TypedField field : {TypedField::Float, TypedField::Double, TypedField::Int32,
                           TypedField::Int64, TypedField::UInt64}) {
    if (field == expected || typedFieldSize(t, field) == 0)
      continue;
    throw Error(tensorDescription(t) + " of type " + onnxElemTypeName(t.data_type()) +
                " has data in " + typedFieldName(field) + ", but that type belongs in " +
                typedFieldName(expected));
  }
  if (t.string_data_size() > 0)
    throw Error(tensorDescription(t) + " of type " + onnxElemTypeName(t.data_type()) +
                " has data in string_data");
  if (t.has_raw_data() && typedFieldSize(t, expected) > 0)
    throw Error(tensorDescription(t) + " has data in both raw_data and " +
                typedFieldName(expected));
}

void checkValueCount(const TensorProto &t, const Shape &shape, int64_t count, const char *field) {
  if (count != numElements(shape))
    throw Error(tensorDescription(t) + " has shape " + shapeString(shape) + " (" +
                std::to_string(numElements(shape)) + " elements) but " + field + " holds " +
                std::to_string(count));
}

Tensor tensorFromRawData(const TensorProto &t, DType dtype, const Shape &shape) {
  const std::string &raw = t.raw_data();
  uint64_t expected = onnxPackedByteSize(dtype, numElements(shape));
  if (raw.size() != expected)
    throw Error(tensorDescription(t) + " has shape " + shapeString(shape) + " of type " +
                onnxElemTypeName(t.data_type()) + ", which needs " + std::to_string(expected) +
                " bytes, but raw_data holds " + std::to_string(raw.size()));
  if (isSubByteInt(dtype)) {
    Tensor out(dtype, shape);
    unpackSubByteInts(reinterpret_cast<const uint8_t *>(raw.data()), out);
    return out;
  }
  Tensor out(dtype, shape, raw.data());
  if (dtype == DType::Bool) {
    // Any non-zero byte is true; a C++ bool must hold exactly 0 or 1.
    uint8_t *bytes = static_cast<uint8_t *>(out.raw());
    for (size_t i = 0; i < out.byteSize(); ++i)
      bytes[i] = bytes[i] != 0;
  }
  return out;
}

template <class T> void copyInt32Field(const TensorProto &t, T *dst) {
  for (int i = 0; i < t.int32_data_size(); ++i)
    if (!fromInt32Field(t.int32_data(i), dst[i]))
      throw Error(tensorDescription(t) + " of type " + onnxElemTypeName(t.data_type()) +
                  " has out-of-range value " + std::to_string(t.int32_data(i)) + " in int32_data");
}

template <class T> void copyUInt64Field(const TensorProto &t, T *dst) {
  for (int i = 0; i < t.uint64_data_size(); ++i) {
    uint64_t value = t.uint64_data(i);
    if (value > std::numeric_limits<T>::max())
      throw Error(tensorDescription(t) + " of type " + onnxElemTypeName(t.data_type()) +
                  " has out-of-range value " + std::to_string(value) + " in uint64_data");
    dst[i] = (T)value;
  }
}

template <class Field, class T> void copyField(const Field &field, T *dst) {
  std::copy(field.begin(), field.end(), dst);
}

Tensor tensorFromTypedData(const TensorProto &t, DType dtype, const Shape &shape) {
  TypedField field = typedFieldFor(dtype);
  if (isSubByteInt(dtype)) { // int32_data holds the packed bytes, one per value
    checkValueCount(t, {(int64_t)onnxPackedByteSize(dtype, numElements(shape))},
                    t.int32_data_size(), "int32_data (packed)");
    std::vector<uint8_t> packed(t.int32_data_size());
    copyInt32Field(t, packed.data());
    Tensor out(dtype, shape);
    unpackSubByteInts(packed.data(), out);
    return out;
  }
  checkValueCount(t, shape, typedFieldSize(t, field), typedFieldName(field));
  Tensor out(dtype, shape);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *dst = out.data<T>();
    if constexpr (std::is_same_v<T, float>)
      copyField(t.float_data(), dst);
    else if constexpr (std::is_same_v<T, double>)
      copyField(t.double_data(), dst);
    else if constexpr (std::is_same_v<T, int64_t>)
      copyField(t.int64_data(), dst);
    else if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>)
      copyUInt64Field(t, dst);
    else
      copyInt32Field(t, dst);
  });
  return out;
}

/// Checks that a parsed TensorProto file really held a TensorProto. Sequence, optional and map
/// protos parse as TensorProtos without error (their fields 1-3 have compatible wire types);
/// what gives them away is a segment, unknown fields, or an invalid data_type.
void checkIsPlainTensorProto(const TensorProto &t) {
  if (hasUnknownFields(t))
    throw Error("it contains fields that a TensorProto does not have");
  if (t.has_segment())
    throw Error("it is a segment of a larger tensor, or not a TensorProto");
  if (!isValidOnnxElemType(t.data_type()))
    throw Error("its data_type " + std::to_string(t.data_type()) + " is not a valid element type");
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

/// Loads every tensor stored as external data, from files relative to `modelDir` (the current
/// directory if empty).
void resolveExternalData(onnx::ModelProto &model, const fs::path &modelDir) {
  ExternalDataResolver resolver(modelDir.empty() ? fs::path(".") : modelDir);
  visitTensors(model,
               [&](TensorProto &t, const std::string &where) { resolver.resolve(t, where); });
}

onnx::ModelProto loadOnnxModel(const std::string &path) {
  OpenFile file(path, "model file");
  auto invalid = [&](const std::string &why) {
    return Error(inQuotes(path) + " is not a valid ONNX model: " + why);
  };
  if (file.size() == 0)
    throw invalid("the file is empty");
  checkProtobufSize(file, " (store the weights as external data)");
  onnx::ModelProto model;
  if (!parseProtoFile(model, file))
    throw invalid("protobuf parsing failed (the file is truncated, corrupted, or not an ONNX "
                  "model)");
  checkModelStructure(model, inQuotes(path));
  resolveExternalData(model, fs::path(path).parent_path());
  return model;
}

onnx::ModelProto parseOnnxModel(const void *data, size_t size, const std::string &baseDir) {
  const std::string what = "the model given as bytes";
  auto invalid = [&](const std::string &why) {
    return Error(what + " is not a valid ONNX model: " + why);
  };
  if (size == 0)
    throw invalid("it is empty");
  if (size > (size_t)std::numeric_limits<int>::max())
    throw Error(what + " is " + std::to_string(size) +
                " bytes; protobuf messages must be smaller than 2 GiB (store the weights as "
                "external data)");
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(data, (int)size);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!model.ParseFromCodedStream(&coded))
    throw invalid("protobuf parsing failed (truncated, corrupted, or not an ONNX model)");
  checkModelStructure(model, what);
  resolveExternalData(model, baseDir);
  return model;
}

/// Graph inputs with no type at all, and tensor graph inputs whose element type is no ONNX type
/// (UNDEFINED, or a number outside the enum), are refused before ONNX's shape inference sees
/// them (fuzzer: an input of element type UNDEFINED crashed ONNX 1.12's propagateShape, and an
/// untyped input its Shape inference, which dereferences the missing type). Valid types tcc
/// lacks (strings) are left to the unsupported-operator report.
void checkGraphInputTypes(const onnx::GraphProto &graph) {
  for (const onnx::ValueInfoProto &in : graph.input())
    if (in.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
      throw Error("graph input " + inQuotes(in.name()) +
                  " has no type (ONNX requires one on every graph input)");
  for (const onnx::ValueInfoProto &in : graph.input())
    if (int32_t t = in.type().tensor_type().elem_type();
        in.type().has_tensor_type() &&
        !isValidOnnxElemType(t))
      throw Error("graph input " + inQuotes(in.name()) + ": element type '" +
                  onnxElemTypeName(in.type().tensor_type().elem_type()) + "' is not supported");
}

void prepareOnnxModel(onnx::ModelProto &model, const PrepareOptions &opts) {
  checkGraphInputTypes(model.graph());
  // Input shapes next: the opset upgrade also profits from them.
  fixInputShapes(*model.mutable_graph(), opts.inputShapes);
  checkGraphWiring(model.graph(), {});
  NewerNodes newer = verifyNodesAgainstSchemas(model);
  upgradeOpset(model, std::max<int64_t>(opts.minimumOpset, 1)); // (opsets below 7 only)
  runShapeInferenceHiding(model, newer);
}

std::optional<DType> dtypeFromOnnx(int32_t elemType) {
  switch (elemType) {
  case kOnnxFloat8E4M3FN: return DType::F8E4M3FN;
  case kOnnxFloat8E4M3FNUZ: return DType::F8E4M3FNUZ;
  case kOnnxFloat8E5M2: return DType::F8E5M2;
  case kOnnxFloat8E5M2FNUZ: return DType::F8E5M2FNUZ;
  case kOnnxUInt4: return DType::U4;
  case kOnnxInt4: return DType::I4;
  case kOnnxUInt2: return DType::U2;
  case kOnnxInt2: return DType::I2;
  case TensorProto::BOOL: return DType::Bool;
  case TensorProto::INT8: return DType::I8;
  case TensorProto::INT16: return DType::I16;
  case TensorProto::INT32: return DType::I32;
  case TensorProto::INT64: return DType::I64;
  case TensorProto::UINT8: return DType::U8;
  case TensorProto::UINT16: return DType::U16;
  case TensorProto::UINT32: return DType::U32;
  case TensorProto::UINT64: return DType::U64;
  case TensorProto::FLOAT16: return DType::F16;
  case TensorProto::BFLOAT16: return DType::BF16;
  case TensorProto::FLOAT: return DType::F32;
  case TensorProto::DOUBLE: return DType::F64;
  default: return std::nullopt;
  }
}

int32_t dtypeToOnnx(DType dtype) {
  switch (dtype) {
  case DType::Bool: return TensorProto::BOOL;
  case DType::I8: return TensorProto::INT8;
  case DType::I16: return TensorProto::INT16;
  case DType::I32: return TensorProto::INT32;
  case DType::I64: return TensorProto::INT64;
  case DType::U8: return TensorProto::UINT8;
  case DType::U16: return TensorProto::UINT16;
  case DType::U32: return TensorProto::UINT32;
  case DType::U64: return TensorProto::UINT64;
  case DType::F16: return TensorProto::FLOAT16;
  case DType::BF16: return TensorProto::BFLOAT16;
  case DType::F32: return TensorProto::FLOAT;
  case DType::F64: return TensorProto::DOUBLE;
  case DType::F8E4M3FN: return kOnnxFloat8E4M3FN;
  case DType::F8E4M3FNUZ: return kOnnxFloat8E4M3FNUZ;
  case DType::F8E5M2: return kOnnxFloat8E5M2;
  case DType::F8E5M2FNUZ: return kOnnxFloat8E5M2FNUZ;
  case DType::U4: return kOnnxUInt4;
  case DType::I4: return kOnnxInt4;
  case DType::U2: return kOnnxUInt2;
  case DType::I2: return kOnnxInt2;
  }
  throw Error("dtypeToOnnx: invalid dtype");
}

std::string onnxElemTypeName(int32_t elemType) {
  switch (elemType) {
  case TensorProto::UNDEFINED: return "undefined";
  case TensorProto::FLOAT: return "float";
  case TensorProto::UINT8: return "uint8";
  case TensorProto::INT8: return "int8";
  case TensorProto::UINT16: return "uint16";
  case TensorProto::INT16: return "int16";
  case TensorProto::INT32: return "int32";
  case TensorProto::INT64: return "int64";
  case TensorProto::STRING: return "string";
  case TensorProto::BOOL: return "bool";
  case TensorProto::FLOAT16: return "float16";
  case TensorProto::DOUBLE: return "double";
  case TensorProto::UINT32: return "uint32";
  case TensorProto::UINT64: return "uint64";
  case TensorProto::COMPLEX64: return "complex64";
  case TensorProto::COMPLEX128: return "complex128";
  case TensorProto::BFLOAT16: return "bfloat16";
  case kOnnxFloat8E4M3FN: return "float8e4m3fn";
  case kOnnxFloat8E4M3FNUZ: return "float8e4m3fnuz";
  case kOnnxFloat8E5M2: return "float8e5m2";
  case kOnnxFloat8E5M2FNUZ: return "float8e5m2fnuz";
  case kOnnxUInt4: return "uint4";
  case kOnnxInt4: return "int4";
  case kOnnxFloat4E2M1: return "float4e2m1";
  case kOnnxFloat8E8M0: return "float8e8m0";
  case kOnnxUInt2: return "uint2";
  case kOnnxInt2: return "int2";
  default: return "unknown type " + std::to_string(elemType);
  }
}

Tensor tensorFromProto(const TensorProto &t) {
  if (t.data_location() == TensorProto::EXTERNAL)
    throw Error(tensorDescription(t) + " keeps its data in an external file that has not been "
                                       "loaded (load the model with loadOnnxModel)");
  DType dtype = tensorDType(t);
  Shape shape = tensorShape(t);
  checkDataFields(t, dtype);
  if (t.has_raw_data())
    return tensorFromRawData(t, dtype, shape);
  return tensorFromTypedData(t, dtype, shape);
}

onnx::TensorProto tensorToProto(const Tensor &t, const std::string &name) {
  if (!t.defined())
    throw Error("cannot convert undefined tensor " + inQuotes(name) + " to a TensorProto");
  TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(dtypeToOnnx(t.dtype()));
  for (int64_t d : t.shape())
    proto.add_dims(d);
  if (isSubByteInt(t.dtype())) {
    std::vector<uint8_t> packed = packSubByteInts(t);
    proto.set_raw_data(reinterpret_cast<const char *>(packed.data()), packed.size());
    return proto;
  }
  proto.set_raw_data(static_cast<const char *>(t.raw()), t.byteSize());
  return proto;
}

Tensor readTensorFile(const std::string &path, std::string *name) {
  OpenFile file(path, "tensor file");
  auto invalid = [&](const std::string &why) {
    return Error(inQuotes(path) + " is not a valid TensorProto file: " + why);
  };
  if (file.size() == 0)
    throw invalid("the file is empty");
  checkProtobufSize(file, "");
  TensorProto proto;
  if (!parseProtoFile(proto, file))
    throw invalid("protobuf parsing failed (the file is truncated, corrupted, or not a "
                  "serialized TensorProto)");
  // Sequence and optional values parse as TensorProtos with garbage dims (from their name) and
  // data fields, so any inconsistency may mean the file holds one of those.
  const char *notATensorHint =
      " (files holding sequence, optional or map values are not supported)";
  Tensor tensor;
  try {
    checkIsPlainTensorProto(proto);
    tensor = tensorFromProto(proto);
  } catch (const Error &e) {
    int32_t type = proto.data_type();
    bool unsupportedType = isValidOnnxElemType(type) && !dtypeFromOnnx(type);
    throw invalid(e.what() + std::string(unsupportedType ? "" : notATensorHint));
  }
  if (name)
    *name = proto.name();
  return tensor;
}

void writeTensorFile(const Tensor &t, const std::string &name, const std::string &path) {
  std::string bytes;
  if (!tensorToProto(t, name).SerializeToString(&bytes))
    throw Error("cannot serialize tensor " + inQuotes(name) + " (is it 2 GiB or larger?)");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot create tensor file " + inQuotes(path) + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      std::string reason = std::strerror(errno);
      ::close(fd);
      throw Error("cannot write tensor file " + inQuotes(path) + ": " + reason);
    }
    done += (size_t)n;
  }
  if (::close(fd) != 0)
    throw Error("cannot write tensor file " + inQuotes(path) + ": " + std::strerror(errno));
}

} // namespace tcc
