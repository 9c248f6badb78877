#include "test_util.h"

#include <cmath>

#include "ir/op_schema.h"

namespace tessera::testing {

std::vector<Tensor> run_one_op(const OneOpGraph& spec, int threads) {
  Graph graph;
  Node node;
  node.name = spec.op_type + "_0";
  node.op_type = spec.op_type;
  node.opset = spec.opset;
  node.attrs = spec.attrs;
  size_t total_inputs = spec.inputs.size() + spec.constants.size();
  node.inputs.assign(total_inputs, kNoValue);
  std::vector<bool> is_const(total_inputs, false);
  for (const auto& [pos, value] : spec.constants) {
    node.inputs[pos] = graph.add_constant("c" + std::to_string(pos), value);
    is_const[pos] = true;
  }
  size_t next = 0;
  std::vector<TensorView> feeds;
  for (size_t pos = 0; pos < total_inputs; ++pos) {
    if (is_const[pos]) continue;
    const Tensor& t = spec.inputs[next++];
    ValueId id = graph.add_value("x" + std::to_string(pos), TensorType::make(t.dtype(), t.shape()));
    graph.inputs.push_back(id);
    node.inputs[pos] = id;
    feeds.push_back(t.view());
  }
  for (int i = 0; i < spec.num_outputs; ++i) {
    ValueId id = graph.add_value("y" + std::to_string(i));
    node.outputs.push_back(id);
    graph.outputs.push_back(id);
  }
  const OpSchema* schema = OpRegistry::instance().find("", spec.op_type);
  if (schema) {
    for (const AttributeSpec& a : schema->attributes) {
      if (!node.attrs.has(a.name) && a.default_value) node.attrs.set(a.name, *a.default_value);
    }
    if (schema->normalize) schema->normalize(graph, node);
  }
  graph.nodes.push_back(node);
  CompileOptions options;
  options.backends = {"native"};  // these tests check the native kernels; other backends have their own tests
  options.num_threads = threads;
  auto model = CompiledModel::compile(std::move(graph), options);
  return model->run(feeds);
}

Tensor make_float(Shape shape, std::vector<float> values) {
  Tensor t(DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.as<float>()[i] = values[i];
  return t;
}

Tensor make_int64(Shape shape, std::vector<int64_t> values) {
  Tensor t(DType::kInt64, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.as<int64_t>()[i] = values[i];
  return t;
}

Tensor make_int32(Shape shape, std::vector<int32_t> values) {
  Tensor t(DType::kInt32, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.as<int32_t>()[i] = values[i];
  return t;
}

int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

Tensor random_float(Shape shape, uint32_t seed) {
  Tensor t(DType::kFloat32, std::move(shape));
  uint32_t state = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.as<float>()[i] = static_cast<float>(state >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return t;
}

Tensor random_uniform(Shape shape, uint32_t seed, float low, float high) {
  Tensor t = random_float(std::move(shape), seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = low + (high - low) * (t.as<float>()[i] + 1.0f) / 2.0f;
  return t;
}

void expect_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  int failures = 0;
  for (int64_t i = 0; i < actual.numel() && failures < 10; ++i) {
    double a = actual.double_at(i), b = expected.double_at(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << b;
      ++failures;
    }
  }
}

std::vector<double> reference_conv3x3_same(const std::vector<double>& in, int64_t cin, const Tensor& weights,
                                           int64_t cout, int64_t h, int64_t w) {
  std::vector<double> out(static_cast<size_t>(cout * h * w), 0.0);
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t e = 0; e < 3; ++e) {
          const double k = weights.as<float>()[((o * cin + ci) * 3 + a) * 3 + e];
          for (int64_t i = 0; i < h; ++i) {
            const int64_t yi = i + a - 1;
            if (yi < 0 || yi >= h) continue;
            for (int64_t j = 0; j < w; ++j) {
              const int64_t xj = j + e - 1;
              if (xj < 0 || xj >= w) continue;
              out[static_cast<size_t>((o * h + i) * w + j)] += k * in[static_cast<size_t>((ci * h + yi) * w + xj)];
            }
          }
        }
  return out;
}

}  // namespace tessera::testing
