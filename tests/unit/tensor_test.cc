// Tensor op family: the strided copy engine and Transpose against their
// element-by-element references, each op's semantics on small cases with
// hand-checked results, legacy (pre-opset-13) forms, and index errors.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "backends/native/kernels/tensor_internal.h"
#include "backends/native/thread_pool.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

Tensor random_bytes(DType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.data());
  uint32_t state = seed * 2654435761u + 7;
  for (size_t i = 0; i < t.nbytes(); ++i) {
    state = state * 1664525u + 1013904223u;
    p[i] = static_cast<uint8_t>(state >> 24);
  }
  return t;
}

Tensor iota_float(Shape shape) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = static_cast<float>(i);
  return t;
}

void expect_same_bytes(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
}

void expect_int64(const Tensor& t, Shape shape, std::vector<int64_t> values) {
  ASSERT_EQ(t.dtype(), DType::kInt64);
  ASSERT_EQ(t.shape(), shape);
  EXPECT_EQ(t.to_int64_vector(), values);
}

/// Runs `spec` and expects a user error whose message contains `needle`.
void expect_user_error(const OneOpGraph& spec, const std::string& needle) {
  EXPECT_USER_ERROR(run_one_op(spec), needle);
}

// --- Copy engine and Transpose ------------------------------------------------

TEST(TensorCopy, TransposeMatchesReferenceForAllPermutations) {
  native::ThreadPool pool(3);
  const std::vector<Shape> shapes = {{7}, {5, 9}, {33, 40}, {3, 1, 6}, {2, 35, 4, 37}, {1, 64, 9, 9}, {2, 3, 4, 5}};
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kUInt8, DType::kFloat16, DType::kInt64};
  uint32_t seed = 1;
  for (const Shape& shape : shapes) {
    std::vector<int64_t> perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      for (DType dtype : dtypes) {
        Tensor in = random_bytes(dtype, shape, seed++);
        Shape out_shape(shape.size());
        for (size_t i = 0; i < perm.size(); ++i) out_shape[i] = shape[static_cast<size_t>(perm[i])];
        Tensor fast(dtype, out_shape), reference(dtype, out_shape);
        native::transpose(pool, in.view(), perm, fast.view());
        native::transpose_reference(in.view(), perm, reference.view());
        expect_same_bytes(fast, reference);
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(TensorCopy, TransposeReferenceIsATranspose) {
  // The reference itself, against the definition out[j][i] = in[i][j].
  Tensor in = iota_float({3, 4}), out(DType::kFloat32, {4, 3});
  native::transpose_reference(in.view(), {1, 0}, out.view());
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out.as<float>()[j * 3 + i], in.as<float>()[i * 4 + j]);
  }
}

// The reference and the Transpose op, against the definition in 3-D, where a
// permutation can be neither the identity nor a reversal of axes:
// out[o0][o1][o2] = in[i] with i[perm[k]] = o[k].
TEST(TensorCopy, TransposeReferenceAndOpMatchTheDefinitionIn3D) {
  const Shape shape = {2, 3, 4};
  const Tensor in = iota_float(shape);
  std::vector<int64_t> perm = {0, 1, 2};
  int permutations = 0;
  do {
    const Shape out_shape = {shape[static_cast<size_t>(perm[0])], shape[static_cast<size_t>(perm[1])],
                             shape[static_cast<size_t>(perm[2])]};
    Tensor expected(DType::kFloat32, out_shape);
    for (int64_t o0 = 0; o0 < out_shape[0]; ++o0) {
      for (int64_t o1 = 0; o1 < out_shape[1]; ++o1) {
        for (int64_t o2 = 0; o2 < out_shape[2]; ++o2) {
          int64_t i[3];
          i[perm[0]] = o0;
          i[perm[1]] = o1;
          i[perm[2]] = o2;
          expected.as<float>()[(o0 * out_shape[1] + o1) * out_shape[2] + o2] = in.as<float>()[(i[0] * 3 + i[1]) * 4 + i[2]];
        }
      }
    }
    SCOPED_TRACE("perm " + std::to_string(perm[0]) + std::to_string(perm[1]) + std::to_string(perm[2]));
    Tensor reference(DType::kFloat32, out_shape);
    native::transpose_reference(in.view(), perm, reference.view());
    expect_close(reference, expected, 0, 0);
    OneOpGraph spec{.op_type = "Transpose", .inputs = {in}};
    spec.attrs.set("perm", Attribute::of_ints(perm));
    expect_close(run_one_op(spec)[0], expected, 0, 0);
    if (perm == std::vector<int64_t>{2, 1, 0}) {  // ONNX's default perm reverses the axes
      OneOpGraph default_perm{.op_type = "Transpose", .inputs = {in}};
      expect_close(run_one_op(default_perm)[0], expected, 0, 0);
    }
    ++permutations;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(permutations, 6);
}

TEST(TensorCopy, StridedCopyMatchesReferenceWithNegativeAndZeroStrides) {
  native::ThreadPool pool(2);
  Tensor in = random_bytes(DType::kInt32, {6, 7, 8}, 42);
  struct Case {
    int64_t offset;
    std::vector<int64_t> strides;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {0, {56, 8, 1}, {6, 7, 8}},            // plain copy
      {335, {-56, -8, -1}, {6, 7, 8}},       // everything reversed
      {9, {112, 0, 2}, {3, 5, 3}},           // broadcast a middle dim, stepped rows
      {0, {0, 0, 1}, {4, 1, 8}},             // broadcast the outer dims
      {100, {1}, {1}},                       // one element
      {0, {56, 1, 8}, {6, 8, 7}},            // inner transpose
  };
  for (const Case& c : cases) {
    Tensor fast(DType::kInt32, c.shape), reference(DType::kInt32, c.shape);
    native::strided_copy(pool, 4, in.data(), c.offset, c.strides, fast.data(), c.shape);
    native::strided_copy_reference(4, in.data(), c.offset, c.strides, reference.data(), c.shape);
    expect_same_bytes(fast, reference);
  }
}

TEST(Transpose, DefaultReversesAxes) {
  OneOpGraph spec{.op_type = "Transpose", .inputs = {iota_float({2, 3})}};
  expect_close(run_one_op(spec)[0], make_float({3, 2}, {0, 3, 1, 4, 2, 5}));
}

// --- Shape ops ------------------------------------------------------------------

TEST(Reshape, ZeroCopiesAndMinusOneInfers) {
  OneOpGraph spec{.op_type = "Reshape", .inputs = {iota_float({2, 3, 4})}};
  spec.constants = {{1, make_int64({2}, {0, -1})}};
  Tensor out = run_one_op(spec)[0];
  EXPECT_EQ(out.shape(), (Shape{2, 12}));
  expect_close(out, iota_float({2, 12}));
}

TEST(Reshape, AllowZeroKeepsZeroDims) {
  OneOpGraph spec{.op_type = "Reshape", .inputs = {Tensor(DType::kFloat32, {0, 3})}};
  spec.constants = {{1, make_int64({3}, {3, 0, 1})}};
  spec.attrs.set("allowzero", Attribute::of_int(1));
  EXPECT_EQ(run_one_op(spec)[0].shape(), (Shape{3, 0, 1}));
}

TEST(Reshape, WrongElementCountIsUserError) {
  OneOpGraph spec{.op_type = "Reshape", .inputs = {iota_float({2, 3}), make_int64({1}, {5})}};
  expect_user_error(spec, "cannot reshape");
}

TEST(Reshape, LegacyShapeAttribute) {
  OneOpGraph spec{.op_type = "Reshape", .opset = 4, .inputs = {iota_float({6})}};
  spec.attrs.set("shape", Attribute::of_ints({3, -1}));
  EXPECT_EQ(run_one_op(spec)[0].shape(), (Shape{3, 2}));
}

TEST(SqueezeUnsqueeze, LegacyAxesAttributeAndInput) {
  OneOpGraph squeeze{.op_type = "Squeeze", .opset = 11, .inputs = {iota_float({1, 3, 1, 2})}};
  squeeze.attrs.set("axes", Attribute::of_ints({-2}));
  EXPECT_EQ(run_one_op(squeeze)[0].shape(), (Shape{1, 3, 2}));
  OneOpGraph all{.op_type = "Squeeze", .inputs = {iota_float({1, 3, 1, 2})}};
  EXPECT_EQ(run_one_op(all)[0].shape(), (Shape{3, 2}));
  OneOpGraph unsqueeze{.op_type = "Unsqueeze", .opset = 11, .inputs = {iota_float({3, 2})}};
  unsqueeze.attrs.set("axes", Attribute::of_ints({0, 3}));
  EXPECT_EQ(run_one_op(unsqueeze)[0].shape(), (Shape{1, 3, 2, 1}));
  OneOpGraph from13{.op_type = "Unsqueeze", .inputs = {iota_float({3, 2}), make_int64({1}, {-1})}};
  EXPECT_EQ(run_one_op(from13)[0].shape(), (Shape{3, 2, 1}));
}

TEST(Shape, StartAndEndClamp) {
  OneOpGraph spec{.op_type = "Shape", .inputs = {iota_float({2, 3, 4})}};
  spec.attrs.set("start", Attribute::of_int(-2));
  spec.attrs.set("end", Attribute::of_int(10));
  expect_int64(run_one_op(spec)[0], {2}, {3, 4});
}

/// x[batch, 4, 8] -> Shape -> Gather(0) -> Unsqueeze -> Concat([b, 32]) -> Reshape:
/// the chain transformer exports use, with the batch size known only at run time.
TEST(ShapeChain, DynamicBatchReshape) {
  Graph graph;
  TensorType x_type = TensorType::make(DType::kFloat32, {-1, 4, 8});
  x_type.symbols = {"batch", "", ""};
  ValueId x = graph.add_value("x", x_type);
  graph.inputs = {x};
  auto node = [&](const std::string& op, std::vector<ValueId> inputs, AttributeMap attrs = {}) {
    ValueId out = graph.add_value(op + "_out");
    graph.nodes.push_back(Node{.name = op, .op_type = op, .opset = 13, .inputs = std::move(inputs), .outputs = {out},
                               .attrs = std::move(attrs)});
    return out;
  };
  ValueId shape = node("Shape", {x});
  Tensor zero(DType::kInt64, {});
  ValueId batch = node("Gather", {shape, graph.add_constant("zero", zero)});
  ValueId batch1 = node("Unsqueeze", {batch, graph.add_constant("axes", make_int64({1}, {0}))});
  AttributeMap concat_attrs;
  concat_attrs.set("axis", Attribute::of_int(0));
  ValueId target = node("Concat", {batch1, graph.add_constant("rest", make_int64({1}, {32}))}, concat_attrs);
  graph.outputs = {node("Reshape", {x, target})};
  CompileOptions options;
  options.input_shapes = {{"batch", {3}}};
  auto model = CompiledModel::compile(std::move(graph), options);
  Tensor input = iota_float({3, 4, 8});
  Tensor out = model->run({input.view()})[0];
  EXPECT_EQ(out.shape(), (Shape{3, 32}));
  expect_close(out, iota_float({3, 32}));
}

TEST(Range, IntegerNegativeDeltaAndFloat) {
  Tensor start(DType::kInt32, {}), limit(DType::kInt32, {}), delta(DType::kInt32, {});
  start.as<int32_t>()[0] = 10;
  limit.as<int32_t>()[0] = 4;
  delta.as<int32_t>()[0] = -3;
  OneOpGraph spec{.op_type = "Range", .inputs = {start, limit, delta}};
  Tensor out = run_one_op(spec)[0];
  ASSERT_EQ(out.shape(), (Shape{2}));
  EXPECT_EQ(out.as<int32_t>()[0], 10);
  EXPECT_EQ(out.as<int32_t>()[1], 7);
}

TEST(Expand, BroadcastsBothWays) {
  OneOpGraph spec{.op_type = "Expand", .inputs = {make_float({3, 1}, {1, 2, 3}), make_int64({3}, {2, 1, 2})}};
  expect_close(run_one_op(spec)[0], make_float({2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST(ConstantOfShapeAndEyeLike, FillValues) {
  OneOpGraph spec{.op_type = "ConstantOfShape", .inputs = {make_int64({2}, {2, 2})}};
  spec.attrs.set("value", Attribute::of_tensor(make_int64({1}, {7})));
  expect_int64(run_one_op(spec)[0], {2, 2}, {7, 7, 7, 7});
  OneOpGraph eye{.op_type = "EyeLike", .inputs = {Tensor(DType::kFloat32, {2, 3})}};
  eye.attrs.set("k", Attribute::of_int(1));
  eye.attrs.set("dtype", Attribute::of_int(7));  // int64
  expect_int64(run_one_op(eye)[0], {2, 3}, {0, 1, 0, 0, 0, 1});
}

// --- Layout ops -------------------------------------------------------------------

/// Independent 1-D slice, to check Slice against: numpy's loop, with the ONNX
/// spec's clamping (for negative steps a start before the first element is
/// clamped to 0, where numpy would give an empty slice).
std::vector<float> numpy_slice(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto wrap = [n](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
  std::vector<float> out;
  if (step > 0) {
    for (int64_t i = wrap(start, 0, n); i < wrap(end, 0, n); i += step) out.push_back(static_cast<float>(i));
  } else {
    for (int64_t i = wrap(start, 0, n - 1); i > wrap(end, -1, n - 1); i += step) out.push_back(static_cast<float>(i));
  }
  return out;
}

TEST(Slice, MatchesNumpyOverStartsEndsAndSteps) {
  const int64_t n = 7;
  const std::vector<int64_t> bounds = {-100, -8, -7, -3, -1, 0, 2, 6, 7, 100, INT64_MAX, INT64_MIN};
  for (int64_t start : bounds) {
    for (int64_t end : bounds) {
      for (int64_t step : {1, 2, 3, -1, -2, -4}) {
        OneOpGraph spec{.op_type = "Slice", .inputs = {iota_float({n})}};
        spec.constants = {{1, make_int64({1}, {start})}, {2, make_int64({1}, {end})}, {3, make_int64({1}, {0})},
                          {4, make_int64({1}, {step})}};
        std::vector<float> expected = numpy_slice(n, start, end, step);
        Tensor out = run_one_op(spec)[0];
        ASSERT_EQ(out.shape(), (Shape{static_cast<int64_t>(expected.size())})) << start << ":" << end << ":" << step;
        expect_close(out, make_float({static_cast<int64_t>(expected.size())}, expected));
      }
    }
  }
}

TEST(Slice, LegacyAttributesAndRuntimeStarts) {
  OneOpGraph legacy{.op_type = "Slice", .opset = 9, .inputs = {iota_float({3, 4})}};
  legacy.attrs.set("starts", Attribute::of_ints({1, -2}));
  legacy.attrs.set("ends", Attribute::of_ints({3, 100}));
  expect_close(run_one_op(legacy)[0], make_float({2, 2}, {6, 7, 10, 11}));
  // Starts fed at run time: the shape is only known then.
  OneOpGraph dynamic{.op_type = "Slice", .inputs = {iota_float({3, 4}), make_int64({1}, {-1}), make_int64({1}, {-4}),
                                                  make_int64({1}, {1}), make_int64({1}, {-2})}};
  expect_close(run_one_op(dynamic)[0], make_float({3, 2}, {3, 1, 7, 5, 11, 9}));
}

TEST(ConcatSplit, RoundTripWithEmptyAndLegacySplit) {
  OneOpGraph concat{.op_type = "Concat", .inputs = {iota_float({2, 1}), Tensor(DType::kFloat32, {2, 0}),
                                                   make_float({2, 2}, {9, 8, 7, 6})}};
  concat.attrs.set("axis", Attribute::of_int(-1));
  Tensor joined = run_one_op(concat)[0];
  expect_close(joined, make_float({2, 3}, {0, 9, 8, 1, 7, 6}));
  OneOpGraph split{.op_type = "Split", .opset = 11, .inputs = {joined}, .num_outputs = 2};
  split.attrs.set("axis", Attribute::of_int(1));
  split.attrs.set("split", Attribute::of_ints({1, 2}));
  auto parts = run_one_op(split);
  expect_close(parts[0], make_float({2, 1}, {0, 1}));
  expect_close(parts[1], make_float({2, 2}, {9, 8, 7, 6}));
  OneOpGraph equal{.op_type = "Split", .inputs = {iota_float({6})}, .num_outputs = 3};
  auto thirds = run_one_op(equal);
  expect_close(thirds[2], make_float({2}, {4, 5}));
}

TEST(Pad, ModesAgainstHandResults) {
  auto pad = [](const std::string& mode, std::vector<int64_t> pads) {
    OneOpGraph spec{.op_type = "Pad", .inputs = {make_float({1, 3}, {1, 2, 3})}};
    spec.constants = {{1, make_int64({4}, pads)}};
    spec.attrs.set("mode", Attribute::of_string(mode));
    return run_one_op(spec)[0];
  };
  expect_close(pad("constant", {0, 2, 0, 1}), make_float({1, 6}, {0, 0, 1, 2, 3, 0}));
  expect_close(pad("reflect", {0, 2, 0, 2}), make_float({1, 7}, {3, 2, 1, 2, 3, 2, 1}));
  expect_close(pad("edge", {1, 1, 0, 1}), make_float({2, 5}, {1, 1, 2, 3, 3, 1, 1, 2, 3, 3}));
  expect_close(pad("constant", {0, -1, 0, 0}), make_float({1, 2}, {2, 3}));  // negative pads crop
  OneOpGraph legacy{.op_type = "Pad", .opset = 2, .inputs = {make_float({2}, {1, 2})}};
  legacy.attrs.set("pads", Attribute::of_ints({1, 0}));
  legacy.attrs.set("value", Attribute::of_float(5));
  expect_close(run_one_op(legacy)[0], make_float({3}, {5, 1, 2}));
}

TEST(TileDepthToSpace, TileAndSpaceDepthRoundTrip) {
  OneOpGraph tile{.op_type = "Tile", .inputs = {make_float({2}, {1, 2}), make_int64({1}, {3})}};
  expect_close(run_one_op(tile)[0], make_float({6}, {1, 2, 1, 2, 1, 2}));
  for (const char* mode : {"DCR", "CRD"}) {
    OneOpGraph d2s{.op_type = "DepthToSpace", .inputs = {random_float({2, 8, 3, 5}, 3)}};
    d2s.attrs.set("blocksize", Attribute::of_int(2));
    d2s.attrs.set("mode", Attribute::of_string(mode));
    Tensor spatial = run_one_op(d2s)[0];
    EXPECT_EQ(spatial.shape(), (Shape{2, 2, 6, 10}));
    if (std::string(mode) == "DCR") {  // SpaceToDepth is DepthToSpace(DCR)'s inverse
      OneOpGraph s2d{.op_type = "SpaceToDepth", .inputs = {spatial}};
      s2d.attrs.set("blocksize", Attribute::of_int(2));
      expect_close(run_one_op(s2d)[0], d2s.inputs[0]);
    }
  }
}

TEST(TriluCumSum, Basics) {
  OneOpGraph tril{.op_type = "Trilu", .inputs = {iota_float({3, 3})}};
  tril.attrs.set("upper", Attribute::of_int(0));
  expect_close(run_one_op(tril)[0], make_float({3, 3}, {0, 0, 0, 3, 4, 0, 6, 7, 8}));
  OneOpGraph cumsum{.op_type = "CumSum", .inputs = {make_float({4}, {1, 2, 3, 4})}};
  cumsum.constants = {{1, make_int64({}, {0})}};
  cumsum.attrs.set("exclusive", Attribute::of_int(1));
  cumsum.attrs.set("reverse", Attribute::of_int(1));
  expect_close(run_one_op(cumsum)[0], make_float({4}, {9, 7, 4, 0}));
}

// --- Index ops ---------------------------------------------------------------------

TEST(Gather, NegativeIndicesWrap) {
  OneOpGraph spec{.op_type = "Gather", .inputs = {iota_float({3, 2}), make_int64({2}, {-1, 0})}};
  expect_close(run_one_op(spec)[0], make_float({2, 2}, {4, 5, 0, 1}));
  OneOpGraph axis1{.op_type = "Gather", .inputs = {iota_float({3, 2}), make_int64({}, {1})}};
  axis1.attrs.set("axis", Attribute::of_int(1));
  expect_close(run_one_op(axis1)[0], make_float({3}, {1, 3, 5}));
}

TEST(IndexErrors, OutOfRangeIndicesAreUserErrorsNamingTheValue) {
  expect_user_error({.op_type = "Gather", .inputs = {iota_float({3, 2}), make_int64({2}, {0, 3})}}, "index 3");
  expect_user_error({.op_type = "Gather", .inputs = {iota_float({3, 2}), make_int64({1}, {-4})}}, "index -4");
  expect_user_error({.op_type = "GatherElements", .inputs = {iota_float({2, 2}), make_int64({2, 1}, {0, 7})}},
                    "index 7");
  expect_user_error({.op_type = "GatherND", .inputs = {iota_float({2, 2}), make_int64({1, 2}, {0, -3})}}, "index -3");
  expect_user_error({.op_type = "ScatterElements",
                     .inputs = {iota_float({3}), make_int64({1}, {9}), make_float({1}, {1})}}, "index 9");
  expect_user_error({.op_type = "ScatterND",
                     .inputs = {iota_float({3}), make_int64({1, 1}, {-9}), make_float({1}, {1})}}, "index -9");
  expect_user_error({.op_type = "Gather", .inputs = {iota_float({3, 2}), make_int64({1}, {0})}, .attrs = [] {
                       AttributeMap a;
                       a.set("axis", Attribute::of_int(2));
                       return a;
                     }()},
                    "axis 2");
}

TEST(GatherElementsND, BatchDimsAndNegativeIndices) {
  OneOpGraph elements{.op_type = "GatherElements", .inputs = {iota_float({2, 3}), make_int64({2, 2}, {-1, 0, 1, 1})}};
  elements.attrs.set("axis", Attribute::of_int(1));
  expect_close(run_one_op(elements)[0], make_float({2, 2}, {2, 0, 4, 4}));
  OneOpGraph nd{.op_type = "GatherND", .inputs = {iota_float({2, 2, 2}), make_int64({2, 1}, {1, 0})}};
  nd.attrs.set("batch_dims", Attribute::of_int(1));
  expect_close(run_one_op(nd)[0], make_float({2, 2}, {2, 3, 4, 5}));
}

TEST(Scatter, ReductionsAccumulateDuplicates) {
  OneOpGraph add{.op_type = "ScatterElements",
                 .inputs = {make_float({1, 3}, {1, 1, 1}), make_int64({1, 3}, {2, -1, 0}), make_float({1, 3}, {5, 6, 7})}};
  add.attrs.set("axis", Attribute::of_int(1));
  add.attrs.set("reduction", Attribute::of_string("add"));
  expect_close(run_one_op(add)[0], make_float({1, 3}, {8, 1, 12}));
  OneOpGraph legacy{.op_type = "Scatter", .opset = 10,
                    .inputs = {make_float({3}, {0, 0, 0}), make_int64({2}, {2, 0}), make_float({2}, {4, 5})}};
  expect_close(run_one_op(legacy)[0], make_float({3}, {5, 0, 4}));
  OneOpGraph mul{.op_type = "ScatterND",
                 .inputs = {make_float({2, 2}, {1, 2, 3, 4}), make_int64({2, 1}, {1, 1}), make_float({2, 2}, {2, 2, 3, 3})}};
  mul.attrs.set("reduction", Attribute::of_string("mul"));
  expect_close(run_one_op(mul)[0], make_float({2, 2}, {1, 2, 18, 24}));
}

/// 4-D GatherElements and ScatterElements (add) on every axis, with int32 and int64 indices smaller than the
/// data on the other axes and negative ones, against loops over the four dims written here.
TEST(Scatter, FourDimElementsOnEveryAxisMatchNestedLoops) {
  const Shape data_shape = {3, 4, 5, 6};
  const Shape idx_shape = {2, 3, 4, 5};
  const Tensor data = random_float(data_shape, 7);
  const Tensor updates = random_float(idx_shape, 8);
  for (int64_t axis = 0; axis < 4; ++axis) {
    for (DType index_type : {DType::kInt64, DType::kInt32}) {
      const int64_t dim = data_shape[static_cast<size_t>(axis)];
      std::vector<int64_t> raw(static_cast<size_t>(shape_numel(idx_shape)));
      for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<int64_t>((i * 7 + 3) % static_cast<size_t>(2 * dim)) - dim;
      Tensor idx(index_type, idx_shape);
      for (size_t i = 0; i < raw.size(); ++i) {
        if (index_type == DType::kInt64) idx.as<int64_t>()[i] = raw[i];
        else idx.as<int32_t>()[i] = static_cast<int32_t>(raw[i]);
      }
      Tensor gathered(DType::kFloat32, idx_shape);
      Tensor scattered = data.clone();
      size_t i = 0;
      for (int64_t a = 0; a < idx_shape[0]; ++a) {
        for (int64_t b = 0; b < idx_shape[1]; ++b) {
          for (int64_t c = 0; c < idx_shape[2]; ++c) {
            for (int64_t d = 0; d < idx_shape[3]; ++d, ++i) {
              int64_t pos[4] = {a, b, c, d};
              pos[axis] = raw[i] < 0 ? raw[i] + dim : raw[i];
              const int64_t offset = ((pos[0] * 4 + pos[1]) * 5 + pos[2]) * 6 + pos[3];
              gathered.as<float>()[i] = data.as<float>()[offset];
              scattered.as<float>()[offset] += updates.as<float>()[i];
            }
          }
        }
      }
      OneOpGraph gather{.op_type = "GatherElements", .inputs = {data, idx}};
      gather.attrs.set("axis", Attribute::of_int(axis));
      expect_close(run_one_op(gather)[0], gathered, 0, 0);
      OneOpGraph scatter{.op_type = "ScatterElements", .inputs = {data, idx, updates}};
      scatter.attrs.set("axis", Attribute::of_int(axis));
      scatter.attrs.set("reduction", Attribute::of_string("add"));
      expect_close(run_one_op(scatter)[0], scattered, 1e-6, 1e-6);
    }
  }
}

TEST(DataDependent, NonZeroCompressOneHotUnique) {
  OneOpGraph non_zero{.op_type = "NonZero", .inputs = {make_float({2, 2}, {0, 3, -0.0f, 1})}};
  expect_int64(run_one_op(non_zero)[0], {2, 2}, {0, 1, 1, 1});
  Tensor condition(DType::kBool, {2});
  condition.as<uint8_t>()[1] = 1;
  OneOpGraph compress{.op_type = "Compress", .inputs = {iota_float({3, 2}), condition}};
  compress.attrs.set("axis", Attribute::of_int(1));
  expect_close(run_one_op(compress)[0], make_float({3, 1}, {1, 3, 5}));
  OneOpGraph one_hot{.op_type = "OneHot", .inputs = {make_int64({3}, {0, -1, 5}), make_float({1}, {3}),
                                                  make_float({2}, {0, 1})}};
  expect_close(run_one_op(one_hot)[0], make_float({3, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0}));
  OneOpGraph unique{.op_type = "Unique", .inputs = {make_float({5}, {3, 1, 3, 2, 1})}, .num_outputs = 4};
  auto u = run_one_op(unique);
  expect_close(u[0], make_float({3}, {1, 2, 3}));
  expect_int64(u[1], {3}, {1, 3, 0});
  expect_int64(u[2], {5}, {2, 0, 2, 1, 0});
  expect_int64(u[3], {3}, {2, 1, 2});
}

TEST(ReverseSequence, ReversesEachBatchPrefix) {
  OneOpGraph spec{.op_type = "ReverseSequence", .inputs = {iota_float({3, 2}), make_int64({2}, {3, 2})}};
  expect_close(run_one_op(spec)[0], make_float({3, 2}, {4, 3, 2, 1, 0, 5}));
}

}  // namespace
}  // namespace tessera::testing
