// Caller buffers (I/O binding, runtime/session_binding.cc): strided views of a
// larger buffer as inputs and outputs, and a key/value cache kept in one buffer
// (the past input and the present output a Concat makes of it, bound to the same
// memory), against results computed here in double from the same numbers: the
// cache is appended to in place and read in place by the attention products
// (no binding copy), and where a node that reads only contiguous memory takes
// the past too, the run copies for it (counted) and stays right.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "ir/error.h"
#include "runtime/session.h"

namespace tessera::testing {
namespace {

constexpr int64_t kHeads = 3, kDim = 5, kCapacity = 16;

/// scores = q · present^T over the cache's valid positions, per head, in double. q [1, H, 1, D], cache as
/// the caller keeps it: [1, H, capacity, D] with `length` valid positions.
std::vector<double> scores_reference(const Tensor& q, const std::vector<float>& cache, int64_t length) {
  std::vector<double> out;
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t t = 0; t < length; ++t) {
      double sum = 0;
      for (int64_t d = 0; d < kDim; ++d) {
        sum += double(q.as<float>()[h * kDim + d]) * cache[static_cast<size_t>((h * kCapacity + t) * kDim + d)];
      }
      out.push_back(sum);
    }
  return out;
}

/// present = Concat(past, k, axis 2); scores = MatMul(q, Transpose(present)) (native's MatMulTransposedB
/// reads present in place); weighted = MatMul(scores, present). `extra_reader`: past also feeds an Add,
/// which reads contiguous memory only.
std::unique_ptr<CompiledModel> attention_model(bool extra_reader) {
  GraphBuilder b;
  const ValueId past = b.input("past", {1, kHeads, -1, kDim});
  b.graph.value(past).type.symbols = {"", "", "past", ""};
  const ValueId k = b.input("k", {1, kHeads, 1, kDim});
  const ValueId q = b.input("q", {1, kHeads, 1, kDim});
  const ValueId present = b.node("Concat", {past, k}, attributes({{"axis", Attribute::of_int(2)}}));
  const ValueId keys_t = b.node("Transpose", {present}, attributes({{"perm", Attribute::of_ints({0, 1, 3, 2})}}));
  const ValueId scores = b.node("MatMul", {q, keys_t});
  b.output(present);
  b.output(scores);
  b.output(b.node("MatMul", {scores, present}));
  if (extra_reader) b.output(b.node("Add", {past, past}));
  CompileOptions options;
  options.backends = {"native"};
  return CompiledModel::compile(b.graph, options);
}

/// A view of `length` positions of the caller's [1, H, capacity, D] cache.
TensorView cache_view(std::vector<float>& cache, int64_t length) {
  TensorView v;
  v.dtype = DType::kFloat32;
  v.shape = {1, kHeads, length, kDim};
  v.data = cache.data();
  v.strides = {kHeads * kCapacity * kDim, kCapacity * kDim, kDim, 1};
  return v;
}

void expect_near_all(const float* actual, const std::vector<double>& expected, const std::string& what) {
  for (size_t i = 0; i < expected.size(); ++i) {
    // NaN-propagating: a NaN fails.
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-5 * (1 + std::fabs(expected[i])))) {
      ADD_FAILURE() << what << " element " << i << ": " << actual[i] << ", expected " << expected[i];
      return;
    }
  }
}

void run_decode_steps(bool extra_reader) {
  std::unique_ptr<CompiledModel> model = attention_model(extra_reader);
  ASSERT_EQ(model->cache_pairs().size(), 1u);
  EXPECT_EQ(model->cache_pairs()[0].input, 0u);
  EXPECT_EQ(model->cache_pairs()[0].output, 0u);
  EXPECT_EQ(model->cache_pairs()[0].axis, 2);
  std::vector<float> cache(static_cast<size_t>(kHeads * kCapacity * kDim), NAN);  // unwritten: NaN
  for (int64_t step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Tensor k = random_uniform({1, kHeads, 1, kDim}, static_cast<uint32_t>(100 + step), -1, 1);
    const Tensor q = random_uniform({1, kHeads, 1, kDim}, static_cast<uint32_t>(200 + step), -1, 1);
    TensorView present = cache_view(cache, step + 1);
    Tensor scores(DType::kFloat32, {1, kHeads, 1, step + 1});
    TensorView scores_view = scores.view();
    std::vector<TensorView*> outputs = {&present, &scores_view, nullptr};
    if (extra_reader) outputs.push_back(nullptr);
    const ModelStats before = model->stats();
    const std::vector<Tensor> made = model->run({cache_view(cache, step), k.view(), q.view()}, outputs);
    const ModelStats after = model->stats();
    // Expected, from the numbers given: the cache holds every step's k at its position.
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t d = 0; d < kDim; ++d) {
        EXPECT_EQ(cache[static_cast<size_t>((h * kCapacity + step) * kDim + d)], k.as<float>()[h * kDim + d]);
      }
    const std::vector<double> want_scores = scores_reference(q, cache, step + 1);
    expect_near_all(scores.as<float>(), want_scores, "scores");
    std::vector<double> want_weighted;
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t d = 0; d < kDim; ++d) {
        double sum = 0;
        for (int64_t t = 0; t <= step; ++t) {
          sum += want_scores[static_cast<size_t>(h * (step + 1) + t)] * cache[static_cast<size_t>((h * kCapacity + t) * kDim + d)];
        }
        want_weighted.push_back(sum);
      }
    ASSERT_EQ(made[2].shape(), (Shape{1, kHeads, 1, kDim}));
    expect_near_all(made[2].as<float>(), want_weighted, "weighted");
    const int64_t copies = after.counts.binding_copies - before.counts.binding_copies;
    if (extra_reader) {
      // The Add reads past contiguous only: past is copied for the run (at step 0 it is empty: nothing to copy
      // is still a copy of 0 bytes), and the rest of the binding still works.
      EXPECT_GE(copies, 1);
      ASSERT_EQ(made[3].shape(), (Shape{1, kHeads, step, kDim}));
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t t = 0; t < step; ++t)
          for (int64_t d = 0; d < kDim; ++d) {
            EXPECT_EQ(made[3].as<float>()[(h * step + t) * kDim + d],
                      2 * cache[static_cast<size_t>((h * kCapacity + t) * kDim + d)]);
          }
    } else {
      EXPECT_EQ(copies, 0) << "the cache and the scores were bound in place";
    }
  }
  // Positions past the last step were never written.
  EXPECT_TRUE(std::isnan(cache[static_cast<size_t>(6 * kDim)]));
}

TEST(IoBinding, KeyValueCacheAppendsInPlaceAndAttentionReadsIt) { run_decode_steps(false); }

TEST(IoBinding, ANodeThatReadsContiguousMemoryGetsACopyOfTheCache) { run_decode_steps(true); }

TEST(IoBinding, OutputBuffersOfTheWrongShapeOrLayoutAreUserErrors) {
  std::unique_ptr<CompiledModel> model = attention_model(false);
  std::vector<float> cache(static_cast<size_t>(kHeads * kCapacity * kDim), 0.0f);
  const Tensor k = random_uniform({1, kHeads, 1, kDim}, 1, -1, 1), q = random_uniform({1, kHeads, 1, kDim}, 2, -1, 1);
  // present one position too long for a past of 2 and one new key.
  TensorView present = cache_view(cache, 4);
  try {
    model->run({cache_view(cache, 2), k.view(), q.view()}, {&present, nullptr, nullptr});
    FAIL() << "a present buffer of the wrong length ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser);
    EXPECT_NE(std::string(e.what()).find("1x3x3x5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1x3x4x5"), std::string::npos) << e.what();
  }
  // Strides that make elements share memory.
  TensorView overlapping = cache_view(cache, 3);
  overlapping.strides = {0, 2, kDim, 1};
  try {
    model->run({cache_view(cache, 2), k.view(), q.view()}, {&overlapping, nullptr, nullptr});
    FAIL() << "an output whose elements overlap ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser);
    EXPECT_NE(std::string(e.what()).find("row-major in a larger buffer"), std::string::npos) << e.what();
  }
}

TEST(IoBinding, StridedCopiesMatchElementByElement) {
  // A [2, 3, 4] box in a [2, 5, 7] buffer, copied out and back, and padded-row-major checks.
  std::vector<float> big(70);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  TensorView box{DType::kFloat32, {2, 3, 4}, big.data(), {35, 7, 1}};
  EXPECT_TRUE(is_padded_row_major(box.shape, box.strides));
  EXPECT_FALSE(is_contiguous(box));
  EXPECT_FALSE(is_padded_row_major({2, 3, 4}, {35, 7, 2}));  // the last axis not contiguous
  EXPECT_FALSE(is_padded_row_major({2, 3, 4}, {10, 4, 1}));  // axis 0 steps into axis 1's span
  EXPECT_TRUE(is_contiguous(TensorView{DType::kFloat32, {2, 1, 4}, big.data(), {4, 99, 1}}));
  Tensor out(DType::kFloat32, {2, 3, 4});
  copy_strided(out.view(), box);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(out.as<float>()[(a * 3 + b) * 4 + c], float(a * 35 + b * 7 + c));
  std::vector<float> back(70, -1.0f);
  copy_strided(TensorView{DType::kFloat32, {2, 3, 4}, back.data(), {35, 7, 1}}, out.view());
  for (size_t i = 0; i < back.size(); ++i) {
    const int64_t a = static_cast<int64_t>(i) / 35, b = static_cast<int64_t>(i) % 35 / 7, c = static_cast<int64_t>(i) % 7;
    EXPECT_EQ(back[i], b < 3 && c < 4 ? big[i] : -1.0f) << i;
    (void)a;
  }
}

}  // namespace
}  // namespace tessera::testing
