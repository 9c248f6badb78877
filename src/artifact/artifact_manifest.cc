// The artifact manifest: encoding and decoding of the graph (values with
// types and constant blobs, nodes with every attribute kind and nested
// subgraphs), the partition (backends, regions, decisions), placement rows and
// the parameter count, and the compiled bodies of control flow (each a nested
// plan). Decoding checks every count, id, dtype code and blob
// reference as it reads; structure (topological order, regions covering the
// graph) is checked afterwards by check_artifact_structure.
#include <cstring>

#include "artifact/artifact_internal.h"
#include "ir/error.h"

namespace tessera::artifact_internal {
namespace {

constexpr uint8_t kLastDTypeCode = static_cast<uint8_t>(DType::kString);
constexpr uint8_t kLastAttributeKind = static_cast<uint8_t>(Attribute::Kind::kGraph);
/// A compiled body's input positions are below this (a graph input count no real body reaches).
constexpr uint64_t kMaxBodyInputs = uint64_t{1} << 20;

// ---------------------------------------------------------------- encoding

void encode_dims(ManifestWriter& writer, const Shape& dims) {
  writer.varint(dims.size());
  for (int64_t d : dims) writer.signed_varint(d);
}

void encode_strings(ManifestWriter& writer, const std::vector<std::string>& strings) {
  writer.varint(strings.size());
  for (const std::string& s : strings) writer.string(s);
}

void encode_indices(ManifestWriter& writer, const std::vector<size_t>& indices) {
  writer.varint(indices.size());
  for (size_t i : indices) writer.varint(i);
}

void encode_ids(ManifestWriter& writer, const std::vector<ValueId>& ids) {
  writer.varint(ids.size());
  for (ValueId id : ids) writer.signed_varint(id);
}

void encode_type(ManifestWriter& writer, const TensorType& type) {
  writer.u8(static_cast<uint8_t>(type.dtype));
  // Bit 0: the rank is known; bits 1-2: the value kind (0, a tensor, in artifacts older than sequences).
  writer.u8(static_cast<uint8_t>((type.rank_known ? 1 : 0) | (static_cast<uint8_t>(type.kind) << 1)));
  // Dims of an unknown rank mean nothing; they are not stored, so a loaded type is always well-formed.
  encode_dims(writer, type.rank_known ? type.dims : Shape{});
  encode_strings(writer, type.rank_known ? type.symbols : std::vector<std::string>{});
}

void encode_graph(ManifestWriter& writer, const Graph& graph, BlobTable& blobs);

void encode_attribute(ManifestWriter& writer, const std::string& name, const Attribute& attribute,
                      const Node& node, BlobTable& blobs) {
  using Kind = Attribute::Kind;
  writer.string(name);
  writer.u8(static_cast<uint8_t>(attribute.kind));
  switch (attribute.kind) {
    case Kind::kInt: writer.signed_varint(attribute.i); break;
    case Kind::kFloat: writer.f32(attribute.f); break;
    case Kind::kString: writer.string(attribute.s); break;
    case Kind::kInts:
      writer.varint(attribute.ints.size());
      for (int64_t v : attribute.ints) writer.signed_varint(v);
      break;
    case Kind::kFloats:
      writer.varint(attribute.floats.size());
      for (float v : attribute.floats) writer.f32(v);
      break;
    case Kind::kStrings: encode_strings(writer, attribute.strings); break;
    case Kind::kTensor: {
      // Attribute tensors are small (ConstantOfShape's value ...) and held
      // mutable by Attribute, so they are stored inline and copied on load.
      if (!attribute.tensor || (attribute.tensor->nbytes() > 0 && !attribute.tensor->data())) {
        throw_internal_error(node.describe(), ": attribute '", name, "' has no tensor data to save");
      }
      const Tensor& tensor = *attribute.tensor;
      if (tensor.dtype() == DType::kString) {
        throw_unsupported(node.describe(), ": attribute '", name, "' holds string tensor, which cannot be stored in an artifact yet");
      }
      writer.u8(static_cast<uint8_t>(tensor.dtype()));
      encode_dims(writer, tensor.shape());
      writer.varint(tensor.nbytes());
      writer.raw(tensor.data(), tensor.nbytes());
      break;
    }
    case Kind::kGraph:
      if (!attribute.graph) throw_internal_error(node.describe(), ": attribute '", name, "' has no subgraph");
      encode_graph(writer, *attribute.graph, blobs);
      break;
  }
}

void encode_graph(ManifestWriter& writer, const Graph& graph, BlobTable& blobs) {
  writer.tag("GRPH");
  writer.string(graph.name);
  writer.varint(graph.metadata.size());
  for (const auto& [key, value] : graph.metadata) {
    writer.string(key);
    writer.string(value);
  }
  writer.varint(graph.values.size());
  for (const Value& value : graph.values) {
    writer.string(value.name);
    encode_type(writer, value.type);
    writer.u8(value.constant ? 1 : 0);
    if (!value.constant) continue;
    const Tensor& constant = *value.constant;
    if (constant.dtype() == DType::kString) {
      throw_unsupported("cannot save value '", value.name, "': string constants cannot be stored in an artifact yet "
                        "(run the ONNX model directly)");
    }
    // A constant's dtype and shape are its value's type (add_constant and
    // folding set them so); storing them once means they cannot disagree.
    if (constant.dtype() != value.type.dtype || !value.type.rank_known || constant.shape() != value.type.dims) {
      throw_internal_error("cannot save value '", value.name, "': its constant is ", dtype_name(constant.dtype()), "[",
                           shape_to_string(constant.shape()), "] but its type says ", value.type.to_string());
    }
    if (constant.nbytes() > 0 && !constant.data()) {
      throw_internal_error("cannot save value '", value.name, "': its constant has a shape but no data");
    }
    writer.varint(blobs.add(constant.data(), constant.nbytes()));
    writer.varint(constant.nbytes());
  }
  writer.varint(graph.nodes.size());
  for (const Node& node : graph.nodes) {
    writer.string(node.name);
    writer.string(node.op_type);
    writer.string(node.domain);
    writer.signed_varint(node.opset);
    encode_ids(writer, node.inputs);
    encode_ids(writer, node.outputs);
    writer.varint(node.attrs.all().size());
    for (const auto& [name, attribute] : node.attrs.all()) encode_attribute(writer, name, attribute, node, blobs);
    writer.varint(node.fused.size());
    for (const FusedNode& fused : node.fused) {
      writer.string(fused.name);
      writer.string(fused.op_type);
    }
  }
  encode_ids(writer, graph.inputs);
  encode_ids(writer, graph.outputs);
}

void encode_partition(ManifestWriter& writer, const Artifact& artifact, BlobTable& blobs) {
  writer.tag("BKND");
  encode_strings(writer, artifact.backends);
  writer.tag("REGN");
  writer.varint(artifact.regions.size());
  for (const ArtifactRegion& region : artifact.regions) {
    writer.string(region.backend);
    writer.string(region.backend_version);
    writer.string(region.compatibility);
    encode_indices(writer, region.nodes);
    writer.varint(region.composites.size());
    for (const Composite& composite : region.composites) {
      writer.string(composite.pattern);
      encode_indices(writer, composite.nodes);
    }
    writer.varint(blobs.add(region.payload.data(), region.payload.size()));
    writer.varint(region.payload.size());
  }
  writer.tag("DECS");
  writer.varint(artifact.decisions.size());
  for (const NodeDecision& decision : artifact.decisions) {
    writer.varint(decision.backend);
    writer.string(decision.why);
    encode_strings(writer, decision.refusals);
  }
  writer.tag("PLAC");
  writer.varint(artifact.placement.size());
  for (const ArtifactPlacement& row : artifact.placement) {
    writer.string(row.node_name);
    writer.string(row.op_type);
    writer.string(row.backend);
    writer.string(row.note);
  }
  writer.tag("PARM");
  writer.signed_varint(artifact.parameter_count);
  if (!artifact.bodies.empty()) {
    // Each compiled body's plan, whole (its graph, partition and own bodies), its constants in this
    // file's blob table: a weight it shares with the model is stored once.
    writer.tag("BODS");
    writer.varint(artifact.bodies.size());
    for (const ArtifactBody& body : artifact.bodies) {
      if (!body.plan) throw_internal_error("artifact: a compiled body without a plan");
      writer.string(body.key);
      encode_indices(writer, body.fed);
      writer.string(body.measured);
      encode_graph(writer, body.plan->graph, blobs);
      encode_partition(writer, *body.plan, blobs);
    }
  }
  writer.tag("END.");
}

// ---------------------------------------------------------------- decoding

class ManifestDecoder {
 public:
  ManifestDecoder(ManifestReader& reader, const BlobArea& blobs) : reader_(reader), blobs_(blobs) {}

  Graph graph(int depth) {
    if (depth > kMaxGraphDepth) reader_.fail(str_cat("subgraphs are nested more than ", kMaxGraphDepth, " deep"));
    reader_.expect_tag("GRPH");
    Graph graph;
    graph.name = reader_.string("graph name");
    size_t metadata = reader_.count("metadata count", 2);
    for (size_t i = 0; i < metadata; ++i) {
      std::string key = reader_.string("metadata key");
      graph.metadata[key] = reader_.string("metadata value");
    }
    // A value is at least: name length, dtype, rank flag, dims count, symbols count, constant flag.
    size_t values = reader_.count("value count", 6);
    graph.values.reserve(values);
    for (size_t i = 0; i < values; ++i) graph.values.push_back(value());
    size_t nodes = reader_.count("node count", 9);
    graph.nodes.reserve(nodes);
    for (size_t i = 0; i < nodes; ++i) graph.nodes.push_back(node(graph, depth));
    graph.inputs = ids(graph, "graph inputs", false);
    graph.outputs = ids(graph, "graph outputs", false);
    return graph;
  }

  /// The partition, placement and parameter count after the graph; then, where `version` has them, the
  /// compiled bodies, each a plan of its own (graph and partition), `depth` plans deep.
  void partition(Artifact& artifact, size_t node_count, uint32_t version, int depth) {
    reader_.expect_tag("BKND");
    artifact.backends = strings("backend count");
    reader_.expect_tag("REGN");
    size_t regions = reader_.count("region count", 7);
    for (size_t r = 0; r < regions; ++r) {
      ArtifactRegion region;
      region.backend = reader_.string("region backend");
      region.backend_version = reader_.string("region backend version");
      region.compatibility = reader_.string("region compatibility");
      region.nodes = indices("region nodes", node_count);
      size_t composites = reader_.count("composite count", 2);
      for (size_t c = 0; c < composites; ++c) {
        Composite composite;
        composite.pattern = reader_.string("composite pattern");
        composite.nodes = indices("composite nodes", node_count);
        region.composites.push_back(std::move(composite));
      }
      region.payload = blob(str_cat("the payload of region ", r).c_str());
      artifact.regions.push_back(std::move(region));
    }
    reader_.expect_tag("DECS");
    size_t decisions = reader_.count("decision count", 3);
    for (size_t d = 0; d < decisions; ++d) {
      NodeDecision decision;
      decision.backend = static_cast<size_t>(reader_.varint("decision backend"));
      decision.why = reader_.string("decision reason");
      decision.refusals = strings("refusal count");
      artifact.decisions.push_back(std::move(decision));
    }
    reader_.expect_tag("PLAC");
    size_t rows = reader_.count("placement count", 4);
    for (size_t p = 0; p < rows; ++p) {
      ArtifactPlacement row;
      row.node_name = reader_.string("placement node name");
      row.op_type = reader_.string("placement op type");
      row.backend = reader_.string("placement backend");
      row.note = reader_.string("placement note");
      artifact.placement.push_back(std::move(row));
    }
    reader_.expect_tag("PARM");
    artifact.parameter_count = reader_.signed_varint("parameter count");
    if (version >= 2 && reader_.next_tag_is("BODS")) {
      reader_.expect_tag("BODS");
      // A body is at least: key length, fed count, note length, then a graph and a partition (their tags).
      size_t bodies = reader_.count("compiled body count", 32);
      for (size_t b = 0; b < bodies; ++b) {
        if (depth >= kMaxGraphDepth) reader_.fail(str_cat("compiled bodies are nested more than ", kMaxGraphDepth, " deep"));
        ArtifactBody body;
        body.key = reader_.string("compiled body key");
        const size_t fed = reader_.count("compiled body inputs");
        for (size_t i = 0; i < fed; ++i) {
          const uint64_t input = reader_.varint("compiled body input");
          if (input >= kMaxBodyInputs) reader_.fail(str_cat("compiled body ", b, ": input ", input, " is out of range"));
          body.fed.push_back(static_cast<size_t>(input));
        }
        body.measured = reader_.string("compiled body note");
        body.plan = std::make_shared<Artifact>();
        body.plan->graph = graph(depth + 1);
        partition(*body.plan, body.plan->graph.nodes.size(), version, depth + 1);
        artifact.bodies.push_back(std::move(body));
      }
    }
    reader_.expect_tag("END.");
  }

 private:
  DType dtype(const char* what, bool allow_undefined) {
    uint8_t code = reader_.u8(what);
    if (code > kLastDTypeCode || (!allow_undefined && code == 0)) reader_.fail(str_cat("bad dtype code ", int{code}, " in ", what));
    return static_cast<DType>(code);
  }

  Shape dims(const char* what, int64_t smallest) {
    size_t rank = reader_.count(what);
    Shape out(rank);
    for (int64_t& d : out) {
      d = reader_.signed_varint(what);
      if (d < smallest) reader_.fail(str_cat("dimension ", d, " in ", what));
    }
    return out;
  }

  std::vector<std::string> strings(const char* what) {
    size_t n = reader_.count(what);
    std::vector<std::string> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(reader_.string(what));
    return out;
  }

  std::vector<size_t> indices(const char* what, size_t limit) {
    size_t n = reader_.count(what);
    std::vector<size_t> out(n);
    for (size_t& index : out) {
      uint64_t v = reader_.varint(what);
      if (v >= limit) reader_.fail(str_cat(what, ": node index ", v, " is out of range (the graph has ", limit, " nodes)"));
      index = static_cast<size_t>(v);
    }
    return out;
  }

  std::vector<ValueId> ids(const Graph& graph, const char* what, bool allow_absent) {
    size_t n = reader_.count(what);
    std::vector<ValueId> out(n);
    for (ValueId& id : out) {
      int64_t v = reader_.signed_varint(what);
      bool absent = allow_absent && v == kNoValue;
      if (!absent && (v < 0 || static_cast<uint64_t>(v) >= graph.values.size())) {
        reader_.fail(str_cat(what, ": value id ", v, " is out of range (the graph has ", graph.values.size(), " values)"));
      }
      id = static_cast<ValueId>(v);
    }
    return out;
  }

  /// Offset and size of a blob, checked against the blob area and its alignment.
  std::span<const uint8_t> blob(const char* what) {
    uint64_t offset = reader_.varint(what);
    uint64_t size = reader_.varint(what);
    if (offset % kBlobAlignment != 0) reader_.fail(str_cat(what, ": blob offset ", offset, " is not 64-byte aligned"));
    if (offset > blobs_.bytes.size() || size > blobs_.bytes.size() - offset) {
      reader_.fail(str_cat(what, ": blob at ", offset, " of ", size, " bytes lies outside the blob area of ",
                           blobs_.bytes.size(), " bytes"));
    }
    return blobs_.bytes.subspan(static_cast<size_t>(offset), static_cast<size_t>(size));
  }

  Value value() {
    Value value;
    value.name = reader_.string("value name");
    std::string what = str_cat("value '", value.name, "'");
    value.type.dtype = dtype(what.c_str(), true);
    const uint8_t flags = reader_.u8("rank flag");
    if ((flags >> 1) > kLastValueKind) reader_.fail(str_cat(what, ": bad rank flag ", int{flags}));
    value.type.rank_known = (flags & 1) == 1;
    value.type.kind = static_cast<ValueKind>(flags >> 1);
    value.type.dims = dims(what.c_str(), -1);
    value.type.symbols = strings(what.c_str());
    if (!value.type.rank_known && (!value.type.dims.empty() || !value.type.symbols.empty())) {
      reader_.fail(str_cat(what, " has dims but an unknown rank"));
    }
    uint8_t has_constant = reader_.u8("constant flag");
    if (has_constant > 1) reader_.fail(str_cat(what, ": bad constant flag ", int{has_constant}));
    if (has_constant) value.constant = std::make_shared<const Tensor>(constant(value, what));
    return value;
  }

  Tensor constant(const Value& value, const std::string& what) {
    const TensorType& type = value.type;
    if (type.dtype == DType::kString) reader_.fail(str_cat(what, " is a string constant, which artifacts never hold"));
    if (type.dtype == DType::kUndefined || !type.is_static()) {
      reader_.fail(str_cat(what, " is a constant of type ", type.to_string(), ", which is not static"));
    }
    uint64_t expected = expected_bytes(type.dtype, type.dims, what);
    std::span<const uint8_t> bytes = blob(what.c_str());
    if (bytes.size() != expected) {
      reader_.fail(str_cat(what, ": constant ", type.to_string(), " needs ", expected, " bytes but its blob has ",
                           bytes.size()));
    }
    // The mapping is read-only; constants are only ever read (Value holds them const).
    return Tensor::wrap(type.dtype, type.dims, const_cast<uint8_t*>(bytes.data()), blobs_.owner);
  }

  uint64_t expected_bytes(DType dtype, const Shape& dims, const std::string& what) {
    uint64_t bytes = dtype_size(dtype);
    for (int64_t d : dims) {
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        reader_.fail(str_cat(what, ": shape ", shape_to_string(dims), " has too many elements"));
      }
    }
    return bytes;
  }

  Node node(const Graph& graph, int depth) {
    Node node;
    node.name = reader_.string("node name");
    node.op_type = reader_.string("node op type");
    node.domain = reader_.string("node domain");
    std::string what = node.describe();
    int64_t opset = reader_.signed_varint("opset");
    if (opset < 0 || opset > 1000) reader_.fail(str_cat(what, ": opset ", opset, " is out of range"));
    node.opset = static_cast<int>(opset);
    node.inputs = ids(graph, (what + " inputs").c_str(), true);
    node.outputs = ids(graph, (what + " outputs").c_str(), true);
    size_t attributes = reader_.count("attribute count", 3);
    for (size_t a = 0; a < attributes; ++a) {
      std::string name = reader_.string("attribute name");
      if (node.attrs.has(name)) reader_.fail(str_cat(what, ": attribute '", name, "' appears twice"));
      node.attrs.set(name, attribute(what + " attribute '" + name + "'", depth));
    }
    size_t fused = reader_.count("fused node count", 2);
    for (size_t f = 0; f < fused; ++f) {
      FusedNode record;
      record.name = reader_.string("fused node name");
      record.op_type = reader_.string("fused node op type");
      node.fused.push_back(std::move(record));
    }
    return node;
  }

  Attribute attribute(const std::string& what, int depth) {
    using Kind = Attribute::Kind;
    uint8_t kind = reader_.u8("attribute kind");
    if (kind > kLastAttributeKind) reader_.fail(str_cat(what, ": bad attribute kind ", int{kind}));
    Attribute attribute;
    attribute.kind = static_cast<Kind>(kind);
    switch (attribute.kind) {
      case Kind::kInt: attribute.i = reader_.signed_varint(what.c_str()); break;
      case Kind::kFloat: attribute.f = reader_.f32(what.c_str()); break;
      case Kind::kString: attribute.s = reader_.string(what.c_str()); break;
      case Kind::kInts: {
        size_t n = reader_.count(what.c_str());
        attribute.ints.resize(n);
        for (int64_t& v : attribute.ints) v = reader_.signed_varint(what.c_str());
        break;
      }
      case Kind::kFloats: {
        size_t n = reader_.count(what.c_str(), 4);
        attribute.floats.resize(n);
        for (float& v : attribute.floats) v = reader_.f32(what.c_str());
        break;
      }
      case Kind::kStrings: attribute.strings = strings(what.c_str()); break;
      case Kind::kTensor: {
        DType tensor_dtype = dtype(what.c_str(), false);
        if (tensor_dtype == DType::kString) reader_.fail(str_cat(what, ": a string tensor, which artifacts never hold"));
        Shape shape = dims(what.c_str(), 0);
        uint64_t size = reader_.varint(what.c_str());
        uint64_t expected = expected_bytes(tensor_dtype, shape, what);
        if (size != expected) {
          reader_.fail(str_cat(what, ": tensor ", dtype_name(tensor_dtype), "[", shape_to_string(shape), "] needs ",
                               expected, " bytes, the manifest says ", size));
        }
        // raw() checks the bytes are there before the tensor is allocated.
        std::span<const uint8_t> bytes = reader_.raw(static_cast<size_t>(size), what.c_str());
        Tensor tensor(tensor_dtype, shape);
        if (!bytes.empty()) std::memcpy(tensor.data(), bytes.data(), bytes.size());
        attribute.tensor = std::make_shared<Tensor>(std::move(tensor));
        break;
      }
      case Kind::kGraph: attribute.graph = std::make_shared<Graph>(graph(depth + 1)); break;
    }
    return attribute;
  }

  ManifestReader& reader_;
  const BlobArea& blobs_;
};

}  // namespace

std::vector<uint8_t> encode_manifest(const Artifact& artifact, BlobTable& blobs) {
  ManifestWriter writer;
  encode_graph(writer, artifact.graph, blobs);
  encode_partition(writer, artifact, blobs);
  return std::move(writer.bytes());
}

void decode_manifest(ManifestReader& reader, const BlobArea& blobs, Artifact& artifact, uint32_t version) {
  ManifestDecoder decoder(reader, blobs);
  artifact.graph = decoder.graph(0);
  decoder.partition(artifact, artifact.graph.nodes.size(), version, 0);
  if (reader.remaining() != 0) reader.fail(str_cat(reader.remaining(), " bytes follow the end of the manifest"));
}

}  // namespace tessera::artifact_internal

namespace tessera {

uint64_t graph_digest(const Graph& graph) {
  artifact_internal::ManifestWriter writer;
  artifact_internal::BlobTable blobs;
  artifact_internal::encode_graph(writer, graph, blobs);
  artifact_internal::Checksum digest;
  digest.update(writer.bytes().data(), writer.bytes().size());
  for (const artifact_internal::BlobTable::Blob& blob : blobs.blobs()) {
    digest.update(&blob.size, sizeof blob.size);
    if (blob.size) digest.update(blob.data, static_cast<size_t>(blob.size));
  }
  return digest.finish();
}

}  // namespace tessera
