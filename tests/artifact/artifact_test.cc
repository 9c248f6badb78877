// Tests of the .tsr artifact: a hand-built graph and partition survive save →
// load field by field, constants are mapped (not copied) at aligned offsets,
// and every kind of damaged or hostile file is a user error, never a crash.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "artifact/artifact.h"
#include "artifact/artifact_internal.h"
#include "ir/error.h"
#include "passes/check_inferred_types.h"

namespace tessera {
namespace {

using artifact_internal::artifact_checksum;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tessera_artifact_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Tensor tensor_of_bytes(DType dtype, Shape shape, uint8_t seed) {
  Tensor t(dtype, std::move(shape));
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(seed + 7 * i);
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
  }
  return t;
}

Tensor float_tensor(Shape shape, float start) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

/// A small subgraph: out = Relu(in). `depth` more levels are nested inside
/// it through an attribute of the Relu node.
std::shared_ptr<Graph> relu_subgraph(const std::string& prefix, int depth = 0) {
  auto g = std::make_shared<Graph>();
  g->name = prefix + "_body";
  ValueId in = g->add_value(prefix + "_in", TensorType::make(DType::kFloat32, {1, 4}));
  ValueId out = g->add_value(prefix + "_out", TensorType::make(DType::kFloat32, {1, 4}));
  Node relu{.name = prefix + "_relu", .op_type = "Relu", .opset = 17, .inputs = {in}, .outputs = {out}};
  if (depth > 0) {
    Attribute nested;
    nested.kind = Attribute::Kind::kGraph;
    nested.graph = relu_subgraph(prefix + "n", depth - 1);
    relu.attrs.set("nested", nested);
  }
  g->nodes.push_back(relu);
  g->inputs = {in};
  g->outputs = {out};
  return g;
}

/// y = Relu(MatMul(x, w) + b), then an If reading y as a capture; constants of
/// several dtypes (two sharing storage, one of size 0); every attribute kind.
Artifact make_artifact() {
  Artifact artifact;
  Graph& g = artifact.graph;
  g.name = "test_graph";
  g.metadata = {{"producer", "tessera test"}, {"doc", std::string(300, 'd')}};
  ValueId x = g.add_value("x", TensorType::make(DType::kFloat32, {1, 4}));
  g.value(x).type.symbols = {"batch", ""};
  ValueId cond = g.add_value("cond", TensorType::make(DType::kBool, {}));
  Tensor weights = float_tensor({4, 4}, -2.0f);
  ValueId w = g.add_constant("w", weights);
  g.add_constant("w_shared", weights);  // same storage: stored once
  ValueId b = g.add_constant("b", float_tensor({4}, 0.5f));
  g.add_constant("c_int64", tensor_of_bytes(DType::kInt64, {2, 3}, 1));
  g.add_constant("c_float16", tensor_of_bytes(DType::kFloat16, {3}, 2));
  g.add_constant("c_uint8", tensor_of_bytes(DType::kUInt8, {5}, 3));
  g.add_constant("c_bool", tensor_of_bytes(DType::kBool, {2}, 4));
  g.add_constant("c_float64", tensor_of_bytes(DType::kFloat64, {1, 1, 2}, 5));
  g.add_constant("empty", Tensor(DType::kFloat32, {0, 3}));
  ValueId y1 = g.add_value("y1", TensorType::make(DType::kFloat32, {1, 4}));
  ValueId y2 = g.add_value("y2", TensorType::make(DType::kFloat32, {1, 4}));
  ValueId y3 = g.add_value("y3", TensorType::make(DType::kFloat32, {1, 4}));
  ValueId z = g.add_value("z", TensorType::make(DType::kFloat32, {1, 4}));
  g.add_value("unknown_rank");  // never defined, never read: types of every form

  g.nodes.push_back(Node{.name = "mm", .op_type = "MatMul", .opset = 13, .inputs = {x, w}, .outputs = {y1}});
  g.nodes.push_back(Node{.name = "add", .op_type = "Add", .opset = 14, .inputs = {y1, b}, .outputs = {y2}});
  Node relu{.name = "relu", .op_type = "Relu", .opset = 14, .inputs = {y2}, .outputs = {y3}};
  relu.attrs.set("an_int", Attribute::of_int(-123456789012345));
  relu.attrs.set("a_float", Attribute::of_float(-1.5e-7f));
  relu.attrs.set("a_string", Attribute::of_string(std::string("with\0zero", 9)));
  relu.attrs.set("some_ints", Attribute::of_ints({0, -1, int64_t{1} << 62}));
  relu.attrs.set("some_floats", Attribute::of_floats({1.0f, -0.0f, 3.25f}));
  Attribute strings;
  strings.kind = Attribute::Kind::kStrings;
  strings.strings = {"a", "", "ccc"};
  relu.attrs.set("some_strings", strings);
  relu.attrs.set("a_tensor", Attribute::of_tensor(tensor_of_bytes(DType::kInt32, {2, 2}, 9)));
  relu.attrs.set("an_empty_tensor", Attribute::of_tensor(Tensor(DType::kInt64, {0})));
  Attribute body;
  body.kind = Attribute::Kind::kGraph;
  body.graph = relu_subgraph("attr", 2);
  relu.attrs.set("a_graph", body);
  relu.fused = {{"relu_before", "Relu"}, {"clip_before", "Clip"}};
  g.nodes.push_back(relu);

  // If(cond) with y3 as an explicit capture of both branches.
  Node branch{.name = "branch", .op_type = "If", .opset = 16, .inputs = {cond, y3}, .outputs = {z}};
  branch.attrs.set("tessera_formal_inputs", Attribute::of_int(1));
  Attribute then_branch, else_branch;
  then_branch.kind = else_branch.kind = Attribute::Kind::kGraph;
  then_branch.graph = relu_subgraph("then");
  else_branch.graph = relu_subgraph("else");
  branch.attrs.set("then_branch", then_branch);
  branch.attrs.set("else_branch", else_branch);
  g.nodes.push_back(branch);
  g.inputs = {x, cond};
  g.outputs = {z, y2};

  artifact.backends = {"testing", "native"};
  static const std::vector<uint8_t> payload_a(100, 0xAB);
  static const std::vector<uint8_t> payload_b = {1, 2, 3};
  ArtifactRegion first{.backend = "testing", .backend_version = "1.2", .compatibility = "avx2;lib=3",
                       .nodes = {0, 1}, .composites = {Composite{"MatMulAdd", {0, 1}}}, .payload = payload_a};
  ArtifactRegion second{.backend = "native", .backend_version = "7", .compatibility = "",
                        .nodes = {2, 3}, .composites = {}, .payload = payload_b};
  artifact.regions = {first, second};
  artifact.decisions = {NodeDecision{0, "pattern MatMulAdd", {"", "not asked"}},
                        NodeDecision{0, "pattern MatMulAdd", {"", "not asked"}},
                        NodeDecision{1, "fallback", {"Relu is not declared", ""}},
                        NodeDecision{1, "claimed (priority 2 of 2)", {"If needs subgraphs", ""}}};
  artifact.placement = {{"mm", "MatMul", "testing", ""}, {"relu_before", "Relu", "native", "fused into 'relu'"}};
  artifact.parameter_count = 20;
  return artifact;
}

void expect_types_equal(const TensorType& a, const TensorType& b, const std::string& where) {
  EXPECT_EQ(a.dtype, b.dtype) << where;
  EXPECT_EQ(a.rank_known, b.rank_known) << where;
  EXPECT_EQ(a.dims, b.dims) << where;
  EXPECT_EQ(a.symbols, b.symbols) << where;
}

void expect_tensors_equal(const Tensor& a, const Tensor& b, const std::string& where) {
  EXPECT_EQ(a.dtype(), b.dtype()) << where;
  EXPECT_EQ(a.shape(), b.shape()) << where;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << where;
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << where;
  }
}

void expect_graphs_equal(const Graph& a, const Graph& b);

void expect_attributes_equal(const Attribute& a, const Attribute& b, const std::string& where) {
  ASSERT_EQ(a.kind, b.kind) << where;
  switch (a.kind) {
    case Attribute::Kind::kInt: EXPECT_EQ(a.i, b.i) << where; break;
    case Attribute::Kind::kFloat: EXPECT_EQ(std::memcmp(&a.f, &b.f, 4), 0) << where; break;
    case Attribute::Kind::kString: EXPECT_EQ(a.s, b.s) << where; break;
    case Attribute::Kind::kInts: EXPECT_EQ(a.ints, b.ints) << where; break;
    case Attribute::Kind::kFloats:
      ASSERT_EQ(a.floats.size(), b.floats.size()) << where;
      EXPECT_EQ(std::memcmp(a.floats.data(), b.floats.data(), 4 * a.floats.size()), 0) << where;
      break;
    case Attribute::Kind::kStrings: EXPECT_EQ(a.strings, b.strings) << where; break;
    case Attribute::Kind::kTensor: expect_tensors_equal(*a.tensor, *b.tensor, where); break;
    case Attribute::Kind::kGraph: expect_graphs_equal(*a.graph, *b.graph); break;
  }
}

void expect_graphs_equal(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    const Value& va = a.values[i];
    const Value& vb = b.values[i];
    EXPECT_EQ(va.name, vb.name);
    expect_types_equal(va.type, vb.type, va.name);
    ASSERT_EQ(va.constant != nullptr, vb.constant != nullptr) << va.name;
    if (va.constant) expect_tensors_equal(*va.constant, *vb.constant, va.name);
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    const Node& na = a.nodes[n];
    const Node& nb = b.nodes[n];
    EXPECT_EQ(na.name, nb.name);
    EXPECT_EQ(na.op_type, nb.op_type);
    EXPECT_EQ(na.domain, nb.domain);
    EXPECT_EQ(na.opset, nb.opset);
    EXPECT_EQ(na.inputs, nb.inputs);
    EXPECT_EQ(na.outputs, nb.outputs);
    ASSERT_EQ(na.fused.size(), nb.fused.size());
    for (size_t f = 0; f < na.fused.size(); ++f) {
      EXPECT_EQ(na.fused[f].name, nb.fused[f].name);
      EXPECT_EQ(na.fused[f].op_type, nb.fused[f].op_type);
    }
    ASSERT_EQ(na.attrs.all().size(), nb.attrs.all().size()) << na.name;
    for (const auto& [name, attribute] : na.attrs.all()) {
      const Attribute* other = nb.attrs.find(name);
      ASSERT_NE(other, nullptr) << na.name << "." << name;
      expect_attributes_equal(attribute, *other, na.name + "." + name);
    }
  }
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
}

/// Runs `load` and checks it throws a tessera user error containing `expected`.
template <typename Load>
void expect_user_error(Load&& load, const std::string& expected, const std::string& context = "") {
  try {
    load();
    ADD_FAILURE() << "no error; expected one containing '" << expected << "' " << context;
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kUser) << error.what() << " " << context;
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
        << "message: " << error.what() << "\nexpected to contain: " << expected << " " << context;
  }
}

Artifact load_bytes(const std::vector<uint8_t>& bytes) {
  return load_artifact_from_memory(bytes, nullptr, "mem.tsr");
}

std::vector<uint8_t> saved_bytes(const Artifact& artifact, const std::string& name) {
  std::string path = temp_path(name);
  save_artifact(path, artifact);
  std::vector<uint8_t> bytes = read_file(path);
  std::filesystem::remove(path);
  return bytes;
}

void put_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

void fix_checksum(std::vector<uint8_t>& bytes) {
  put_u64(bytes, artifact_internal::kChecksumOffset, artifact_checksum(bytes));
}

/// The file with its manifest replaced (blob area moved, header and checksum fixed).
std::vector<uint8_t> with_manifest(const std::vector<uint8_t>& file, const std::vector<uint8_t>& manifest) {
  artifact_internal::Header header = artifact_internal::decode_header(file.data());
  std::vector<uint8_t> blobs(file.begin() + static_cast<ptrdiff_t>(header.blob_area_offset),
                             file.begin() + static_cast<ptrdiff_t>(header.blob_area_offset + header.blob_area_size));
  header.manifest_size = manifest.size();
  header.blob_area_offset = artifact_internal::align_up(64 + manifest.size(), 64);
  header.file_size = header.blob_area_offset + blobs.size();
  std::vector<uint8_t> out(header.file_size, 0);
  artifact_internal::encode_header(header, out.data());
  std::copy(manifest.begin(), manifest.end(), out.begin() + 64);
  std::copy(blobs.begin(), blobs.end(), out.begin() + static_cast<ptrdiff_t>(header.blob_area_offset));
  fix_checksum(out);
  return out;
}

std::vector<uint8_t> manifest_of(const std::vector<uint8_t>& file) {
  artifact_internal::Header header = artifact_internal::decode_header(file.data());
  return std::vector<uint8_t>(file.begin() + static_cast<ptrdiff_t>(header.manifest_offset),
                              file.begin() + static_cast<ptrdiff_t>(header.manifest_offset + header.manifest_size));
}

// ------------------------------------------------------------------ checksum

TEST(ArtifactChecksum, MatchesAnIndependentTranscription) {
  // Values from a separate Python transcription of the algorithm described in
  // artifact_internal.h (8 lanes, scramble every 1024 bytes, zero-padded tail).
  auto hash = [](const std::string& s) {
    artifact_internal::Checksum checksum;
    checksum.update(s.data(), s.size());
    return checksum.finish();
  };
  EXPECT_EQ(hash(""), 0xd6f5eb08f420160aull);
  EXPECT_EQ(hash("abc"), 0x656d41498c88b07full);
  EXPECT_EQ(hash(std::string("abc\0", 4)), 0x11dcb7ad44e6893aull);  // padding is not the same as zeros
  std::string long_input;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 256; ++i) long_input.push_back(static_cast<char>(i));
  }
  long_input += "xyz";
  EXPECT_EQ(hash(long_input), 0x2108cb70d8eb45c0ull);
  std::string blocks;  // more than two 1024-byte blocks, so the scramble step is covered
  for (int i = 0; i < 2500; ++i) blocks.push_back(static_cast<char>((i * 31 + 7) & 255));
  EXPECT_EQ(hash(blocks), 0xc632ad070da22cf5ull);
}

TEST(ArtifactChecksum, EveryBitOfABlockMatters) {
  std::vector<uint8_t> data(2100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
  auto hash = [&] {
    artifact_internal::Checksum checksum;
    checksum.update(data.data(), data.size());
    return checksum.finish();
  };
  const uint64_t original = hash();
  for (size_t byte = 0; byte < data.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      data[byte] ^= static_cast<uint8_t>(1 << bit);
      EXPECT_NE(hash(), original) << "byte " << byte << " bit " << bit;
      data[byte] ^= static_cast<uint8_t>(1 << bit);
    }
  }
}

TEST(ArtifactChecksum, DoesNotDependOnHowTheStreamIsSplit) {
  std::vector<uint8_t> data(3000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  artifact_internal::Checksum whole;
  whole.update(data.data(), data.size());
  for (size_t piece : {1, 3, 8, 31, 63, 64, 65, 100, 999}) {
    artifact_internal::Checksum pieces;
    for (size_t at = 0; at < data.size(); at += piece) pieces.update(data.data() + at, std::min(piece, data.size() - at));
    EXPECT_EQ(pieces.finish(), whole.finish()) << "pieces of " << piece;
  }
}

// ------------------------------------------------------------------ round trip

TEST(Artifact, RoundTripKeepsEveryField) {
  Artifact original = make_artifact();
  std::string path = temp_path("round_trip.tsr");
  save_artifact(path, original);
  EXPECT_TRUE(is_artifact_file(path));
  Artifact loaded = load_artifact(path);

  expect_graphs_equal(original.graph, loaded.graph);
  EXPECT_EQ(loaded.backends, original.backends);
  ASSERT_EQ(loaded.regions.size(), original.regions.size());
  for (size_t r = 0; r < original.regions.size(); ++r) {
    const ArtifactRegion& a = original.regions[r];
    const ArtifactRegion& b = loaded.regions[r];
    EXPECT_EQ(a.backend, b.backend);
    EXPECT_EQ(a.backend_version, b.backend_version);
    EXPECT_EQ(a.compatibility, b.compatibility);
    EXPECT_EQ(a.nodes, b.nodes);
    ASSERT_EQ(a.composites.size(), b.composites.size());
    for (size_t c = 0; c < a.composites.size(); ++c) {
      EXPECT_EQ(a.composites[c].pattern, b.composites[c].pattern);
      EXPECT_EQ(a.composites[c].nodes, b.composites[c].nodes);
    }
    EXPECT_EQ(std::vector<uint8_t>(a.payload.begin(), a.payload.end()),
              std::vector<uint8_t>(b.payload.begin(), b.payload.end()));
  }
  ASSERT_EQ(loaded.decisions.size(), original.decisions.size());
  for (size_t d = 0; d < original.decisions.size(); ++d) {
    EXPECT_EQ(loaded.decisions[d].backend, original.decisions[d].backend);
    EXPECT_EQ(loaded.decisions[d].why, original.decisions[d].why);
    EXPECT_EQ(loaded.decisions[d].refusals, original.decisions[d].refusals);
  }
  ASSERT_EQ(loaded.placement.size(), original.placement.size());
  for (size_t p = 0; p < original.placement.size(); ++p) {
    EXPECT_EQ(loaded.placement[p].node_name, original.placement[p].node_name);
    EXPECT_EQ(loaded.placement[p].op_type, original.placement[p].op_type);
    EXPECT_EQ(loaded.placement[p].backend, original.placement[p].backend);
    EXPECT_EQ(loaded.placement[p].note, original.placement[p].note);
  }
  EXPECT_EQ(loaded.parameter_count, 20);
  EXPECT_NO_THROW(check_inferred_types(loaded.graph));  // the If's stored type is what its branches give

  // Constants and payloads point into the mapping, 64-byte aligned: not copied.
  ASSERT_NE(loaded.mapping, nullptr);
  const auto* base = static_cast<const uint8_t*>(loaded.mapping.get());
  const size_t file_size = std::filesystem::file_size(path);
  auto expect_in_mapping = [&](const void* data, size_t size, const std::string& what) {
    const auto* p = static_cast<const uint8_t*>(data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << what;
    EXPECT_TRUE(p >= base && p + size <= base + file_size) << what;
  };
  for (const Value& v : loaded.graph.values) {
    if (v.constant) expect_in_mapping(v.constant->data(), v.constant->nbytes(), v.name);
  }
  for (const ArtifactRegion& r : loaded.regions) expect_in_mapping(r.payload.data(), r.payload.size(), r.backend);
  const Graph& g = loaded.graph;
  EXPECT_EQ(g.value(g.find_value("w")).constant->data(), g.value(g.find_value("w_shared")).constant->data());
  std::filesystem::remove(path);

  // Constants stay valid after the artifact (but not its graph) is gone.
  std::shared_ptr<const Tensor> weights = g.value(g.find_value("w")).constant;
  loaded = Artifact();
  EXPECT_EQ(weights->as<float>()[5], -2.0f + 0.25f * 5);
}

TEST(Artifact, LoadsFromUnalignedMemory) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "unaligned.tsr");
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  Artifact loaded = load_artifact_from_memory(std::span<const uint8_t>(shifted).subspan(1), nullptr, "shifted");
  const Value& w = loaded.graph.value(loaded.graph.find_value("w"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.constant->data()) % 64, 0u);
  EXPECT_EQ(w.constant->as<float>()[0], -2.0f);
}

TEST(Artifact, SaveOverwritesAndLeavesNoTemporaryFile) {
  std::string path = temp_path("overwrite.tsr");
  save_artifact(path, make_artifact());
  Artifact changed = make_artifact();
  changed.parameter_count = 99;
  save_artifact(path, changed);
  EXPECT_EQ(load_artifact(path).parameter_count, 99);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos) << entry.path();
  }
  std::filesystem::remove(path);
}

TEST(Artifact, SaveToAnUnwritablePlaceIsAUserErrorNamingThePath) {
  std::string path = "/nonexistent-dir-for-tessera/model.tsr";
  expect_user_error([&] { save_artifact(path, make_artifact()); }, path);
}

TEST(Artifact, EmptyGraphRoundTrips) {
  Artifact empty;
  Artifact loaded = load_bytes(saved_bytes(empty, "empty_graph.tsr"));
  EXPECT_TRUE(loaded.graph.nodes.empty());
  EXPECT_TRUE(loaded.regions.empty());
}

TEST(Artifact, WritesFuzzSeeds) {
  // The fuzz_artifact / fuzz_model_load seeds: scripts/fuzz.sh runs this test with
  // TESSERA_ARTIFACT_SEED_DIR set to its corpus folder (and fails when the corpus
  // stays empty); otherwise the seeds go to a temporary folder, so the test still
  // checks that each one is written and loads back with the graph it was made from.
  const char* asked = std::getenv("TESSERA_ARTIFACT_SEED_DIR");
  const std::string dir = asked ? std::string(asked) : temp_path("fuzz_seeds");
  std::filesystem::create_directories(dir);
  Artifact no_subgraphs = make_artifact();
  no_subgraphs.graph.nodes[2].attrs = AttributeMap();
  no_subgraphs.graph.nodes.pop_back();
  no_subgraphs.graph.outputs = {no_subgraphs.graph.find_value("y3")};
  no_subgraphs.regions[1].nodes = {2};
  no_subgraphs.decisions.pop_back();
  const std::vector<std::pair<std::string, Artifact>> seeds = {
      {"full", make_artifact()}, {"empty", Artifact()}, {"no_subgraphs", no_subgraphs}};
  for (const auto& [name, artifact] : seeds) {
    const std::string path = dir + "/" + name + ".tsr";
    save_artifact(path, artifact);
    ASSERT_GT(std::filesystem::file_size(path), 0u) << path;
    Artifact loaded;
    ASSERT_NO_THROW(loaded = load_artifact(path)) << path;
    EXPECT_EQ(loaded.graph.nodes.size(), artifact.graph.nodes.size()) << path;
    EXPECT_EQ(loaded.graph.values.size(), artifact.graph.values.size()) << path;
    EXPECT_EQ(loaded.regions.size(), artifact.regions.size()) << path;
    EXPECT_NO_THROW(check_inferred_types(loaded.graph)) << path;
  }
  if (!asked) std::filesystem::remove_all(dir);
}

// ------------------------------------------------------------------ damaged files

TEST(ArtifactErrors, MissingAndEmptyFiles) {
  expect_user_error([] { load_artifact("/nonexistent/model.tsr"); }, "artifact '/nonexistent/model.tsr': cannot open");
  EXPECT_FALSE(is_artifact_file("/nonexistent/model.tsr"));
  std::string path = temp_path("empty.tsr");
  write_file(path, {});
  expect_user_error([&] { load_artifact(path); }, "not a Tessera artifact");
  EXPECT_FALSE(is_artifact_file(path));
  write_file(path, {'T', 'S', 'R'});
  expect_user_error([&] { load_artifact(path); }, "truncated");
  std::filesystem::remove(path);
}

TEST(ArtifactErrors, EveryTruncationIsAUserError) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "truncate.tsr");
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(length));
    std::string expected = length == 0 ? "not a Tessera artifact" : "truncated";
    if (length >= 64) expected = str_cat("truncated: header says ", bytes.size(), " bytes, file has ", length);
    expect_user_error([&] { load_bytes(prefix); }, expected, str_cat("at length ", length));
  }
  // Through a real file too, for a few lengths (the mapping path).
  std::string path = temp_path("truncated_file.tsr");
  for (size_t length : {size_t{10}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
    write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(length)));
    expect_user_error([&] { load_artifact(path); }, "truncated", str_cat("file of length ", length));
  }
  std::filesystem::remove(path);
}

TEST(ArtifactErrors, EveryFlippedByteIsAUserError) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "flip.tsr");
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> damaged = bytes;
    damaged[i] ^= 0x5A;
    std::string expected = i < 8 ? "not a Tessera artifact" : i < 12 ? "format version" : i >= 16 && i < 24 ? "bytes, file has" : "corrupted: checksum mismatch";
    expect_user_error([&] { load_bytes(damaged); }, expected, str_cat("byte ", i));
  }
}

TEST(ArtifactErrors, WrongMagic) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "magic.tsr");
  bytes[3] = 'X';
  fix_checksum(bytes);
  expect_user_error([&] { load_bytes(bytes); }, "artifact 'mem.tsr': not a Tessera artifact");
  std::string path = temp_path("onnx_like.onnx");
  write_file(path, std::vector<uint8_t>(100, 0x08));
  EXPECT_FALSE(is_artifact_file(path));
  std::filesystem::remove(path);
}

TEST(ArtifactErrors, NewerFormatVersionIsNamed) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "version.tsr");
  bytes[artifact_internal::kVersionOffset] = 3;
  fix_checksum(bytes);  // so that the version check itself is what refuses it
  expect_user_error([&] { load_bytes(bytes); },
                    "artifact 'mem.tsr': was written by format version 3; this Tessera reads versions 1 to 2");
  bytes[artifact_internal::kVersionOffset] = 0;
  fix_checksum(bytes);
  expect_user_error([&] { load_bytes(bytes); }, "was written by format version 0");
}

TEST(ArtifactErrors, HeaderOffsetsOutsideTheFile) {
  std::vector<uint8_t> bytes = saved_bytes(make_artifact(), "offsets.tsr");
  std::vector<uint8_t> damaged = bytes;
  put_u64(damaged, artifact_internal::kManifestSizeOffset, uint64_t{1} << 63);
  fix_checksum(damaged);
  expect_user_error([&] { load_bytes(damaged); }, "manifest at 64 of 9223372036854775808 bytes lies outside");
  damaged = bytes;
  put_u64(damaged, artifact_internal::kBlobAreaOffsetOffset, 65);
  fix_checksum(damaged);
  expect_user_error([&] { load_bytes(damaged); }, "not 64-byte aligned");
  damaged = bytes;
  damaged[artifact_internal::kFlagsOffset] = 1;
  fix_checksum(damaged);
  expect_user_error([&] { load_bytes(damaged); }, "unknown flags");
}

TEST(ArtifactErrors, HugeCountInTheManifest) {
  Artifact artifact = make_artifact();
  std::vector<uint8_t> file = saved_bytes(artifact, "huge_count.tsr");
  std::vector<uint8_t> manifest = manifest_of(file);
  // "GRPH", the name's length and bytes, then the metadata count (one byte for 2).
  const size_t count_at = 4 + 1 + artifact.graph.name.size();
  ASSERT_EQ(manifest[count_at], 2);
  std::vector<uint8_t> huge = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F};  // 2^63 - 1
  manifest.erase(manifest.begin() + static_cast<ptrdiff_t>(count_at));
  manifest.insert(manifest.begin() + static_cast<ptrdiff_t>(count_at), huge.begin(), huge.end());
  expect_user_error([&] { load_bytes(with_manifest(file, manifest)); },
                    "manifest: metadata count is 9223372036854775807, more than the");
  // A manifest cut short inside (with a consistent header) and one with bytes after the end.
  std::vector<uint8_t> short_manifest = manifest_of(file);
  short_manifest.resize(short_manifest.size() - 3);
  expect_user_error([&] { load_bytes(with_manifest(file, short_manifest)); }, "manifest");
  std::vector<uint8_t> long_manifest = manifest_of(file);
  long_manifest.push_back(0);
  expect_user_error([&] { load_bytes(with_manifest(file, long_manifest)); }, "1 bytes follow the end of the manifest");
}

TEST(ArtifactErrors, OutOfRangeValueId) {
  Artifact artifact = make_artifact();
  artifact.graph.nodes[1].inputs[1] = 99;
  // save_artifact does not check; the checksum is valid, so the loader's range check must catch it.
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "bad_id.tsr")); },
                    "node 'add' (Add) inputs: value id 99 is out of range (the graph has 16 values)");
}

TEST(ArtifactErrors, NodesOutOfOrderOrWithoutSchema) {
  Artifact artifact = make_artifact();
  std::swap(artifact.graph.nodes[0], artifact.graph.nodes[1]);
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "order.tsr")); },
                    "artifact 'mem.tsr': inconsistent plan: verifier: node 'add' (Add) reads 'y1' before it is defined");
  artifact = make_artifact();
  artifact.graph.nodes[2].op_type = "NoSuchOp";
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "unknown_op.tsr")); }, "inconsistent plan");
  artifact = make_artifact();
  artifact.graph.nodes[0].outputs.push_back(kNoValue);
  artifact.graph.nodes[0].outputs.push_back(kNoValue);
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "arity.tsr")); }, "node 'mm' (MatMul): has 3 outputs");
}

TEST(ArtifactErrors, BrokenSubgraphIsFoundRecursively) {
  Artifact artifact = make_artifact();
  Graph& then_branch = *artifact.graph.nodes[3].attrs.find("then_branch")->graph;
  then_branch.outputs = {then_branch.inputs[0], 77};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "subgraph.tsr")); }, "graph outputs: value id 77");
  artifact = make_artifact();
  artifact.graph.nodes[3].attrs.find("else_branch")->graph->nodes[0].inputs = {5};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "subgraph2.tsr")); }, "value id 5 is out of range");
  artifact = make_artifact();
  Graph& inner = *artifact.graph.nodes[3].attrs.find("else_branch")->graph;
  inner.outputs = {inner.inputs[0]};
  inner.nodes[0].outputs = {inner.inputs[0]};  // defines its own input a second time
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "subgraph3.tsr")); },
                    "inconsistent plan: subgraph 'else_branch' of node 'branch' (If): verifier: value 'else_in' is defined more than once");
}

TEST(ArtifactErrors, SubgraphsNestedTooDeep) {
  Artifact artifact = make_artifact();
  Attribute deep;
  deep.kind = Attribute::Kind::kGraph;
  deep.graph = relu_subgraph("deep", 20);
  artifact.graph.nodes[2].attrs.set("a_graph", deep);
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "deep.tsr")); }, "nested more than 16 deep");
}

TEST(ArtifactErrors, RegionsMustCoverTheGraph) {
  Artifact artifact = make_artifact();
  artifact.regions[1].nodes = {3};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "missing.tsr")); },
                    "inconsistent plan: node 'relu' (Relu) is in no region");
  artifact = make_artifact();
  artifact.regions[1].nodes = {2, 3, 0};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "twice.tsr")); }, "node 'mm' (MatMul) is in region 0 and again in region 1");
  artifact = make_artifact();
  artifact.regions[0].composites[0].nodes = {1, 2};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "composite.tsr")); }, "composite 'MatMulAdd' of region 0 holds node 'relu'");
  artifact = make_artifact();
  artifact.regions[1].backend = "elsewhere";
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "backend.tsr")); }, "uses backend 'elsewhere', which is not listed");
  artifact = make_artifact();
  std::swap(artifact.regions[0], artifact.regions[1]);
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "region_order.tsr")); }, "reads 'y2' before node 'add' (Add) in region 1 produces it");
  artifact = make_artifact();
  artifact.regions[1].nodes = {3, 2};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "in_region_order.tsr")); }, "reads 'y3' before");
  artifact = make_artifact();
  artifact.regions[2 - 1].composites = {Composite{"Bad", {}}};
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "empty_composite.tsr")); }, "has no nodes");
}

TEST(ArtifactErrors, DecisionsMustMatchTheRegions) {
  Artifact artifact = make_artifact();
  artifact.decisions.pop_back();
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "decisions.tsr")); }, "3 placement decisions for 4 nodes");
  artifact = make_artifact();
  artifact.decisions[0].backend = 1;
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "decision_backend.tsr")); }, "names backend 1");
  artifact = make_artifact();
  artifact.decisions[2].refusals.pop_back();
  expect_user_error([&] { load_bytes(saved_bytes(artifact, "refusals.tsr")); }, "has 1 refusals for 2 backends");
}

}  // namespace
}  // namespace tessera
