// Unit tests of the text family's kernels (TfIdfVectorizer) against a brute
// force written here from the ONNX definition, and of the user errors that bad
// attributes give.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/error.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

struct TfIdfCase {
  std::string mode = "TF";
  int64_t min_gram_length = 1;
  int64_t max_gram_length = 2;
  int64_t max_skip_count = 0;
  std::vector<int64_t> pool;
  std::vector<int64_t> ngram_counts;
  std::vector<int64_t> ngram_indexes;
  std::vector<float> weights;
};

OneOpGraph tfidf_graph(const TfIdfCase& c, Tensor x) {
  OneOpGraph g;
  g.op_type = "TfIdfVectorizer";
  g.opset = 9;
  g.inputs = {std::move(x)};
  g.attrs.set("mode", Attribute::of_string(c.mode));
  g.attrs.set("min_gram_length", Attribute::of_int(c.min_gram_length));
  g.attrs.set("max_gram_length", Attribute::of_int(c.max_gram_length));
  g.attrs.set("max_skip_count", Attribute::of_int(c.max_skip_count));
  g.attrs.set("pool_int64s", Attribute::of_ints(c.pool));
  g.attrs.set("ngram_counts", Attribute::of_ints(c.ngram_counts));
  g.attrs.set("ngram_indexes", Attribute::of_ints(c.ngram_indexes));
  if (!c.weights.empty()) g.attrs.set("weights", Attribute::of_floats(c.weights));
  return g;
}

Tensor make_tokens(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kInt32) {
      t.as<int32_t>()[i] = static_cast<int32_t>(values[i]);
    } else {
      t.as<int64_t>()[i] = values[i];
    }
  }
  return t;
}

/// Calls visit(positions) for every strictly increasing tuple of n positions in [0, length).
template <typename Visit>
void for_each_increasing_tuple(int64_t length, int64_t n, std::vector<int64_t>& positions, Visit&& visit) {
  if (static_cast<int64_t>(positions.size()) == n) return visit(positions);
  const int64_t from = positions.empty() ? 0 : positions.back() + 1;
  for (int64_t p = from; p < length; ++p) {
    positions.push_back(p);
    for_each_increasing_tuple(length, n, positions, visit);
    positions.pop_back();
  }
}

/// One row's output, straight from the ONNX text: an occurrence of an n-gram is a tuple of n increasing
/// positions whose neighbours are all the same distance d apart, with d - 1 (the items skipped) at
/// most max_skip_count; a 1-gram occurrence is a single position. Every tuple is compared with every
/// pool n-gram of its length; the i-th pool n-gram's value goes to ngram_indexes[i].
std::vector<float> reference_row(const TfIdfCase& c, const std::vector<int64_t>& row) {
  const int64_t length = static_cast<int64_t>(row.size());
  const int64_t output_size = *std::max_element(c.ngram_indexes.begin(), c.ngram_indexes.end()) + 1;
  std::vector<float> out(static_cast<size_t>(output_size), 0.0f);
  size_t pool_ngram = 0;
  for (size_t n = 1; n <= c.ngram_counts.size(); ++n) {
    const int64_t begin = c.ngram_counts[n - 1];
    const int64_t end = n < c.ngram_counts.size() ? c.ngram_counts[n] : static_cast<int64_t>(c.pool.size());
    for (int64_t first = begin; first < end; first += static_cast<int64_t>(n), ++pool_ngram) {
      int64_t count = 0;
      if (static_cast<int64_t>(n) >= c.min_gram_length && static_cast<int64_t>(n) <= c.max_gram_length) {
        std::vector<int64_t> positions;
        for_each_increasing_tuple(length, static_cast<int64_t>(n), positions, [&](const std::vector<int64_t>& p) {
          for (size_t k = 1; k < p.size(); ++k) {
            if (p[k] - p[k - 1] != p[1] - p[0] || p[1] - p[0] - 1 > c.max_skip_count) return;
          }
          for (size_t k = 0; k < p.size(); ++k) {
            if (row[static_cast<size_t>(p[k])] != c.pool[static_cast<size_t>(first) + k]) return;
          }
          ++count;
        });
      }
      const float weight = c.weights.empty() ? 1.0f : c.weights[pool_ngram];
      float value = static_cast<float>(count);
      if (c.mode == "IDF") value = count > 0 ? weight : 0.0f;
      if (c.mode == "TFIDF") value = static_cast<float>(count) * weight;
      out[static_cast<size_t>(c.ngram_indexes[pool_ngram])] += value;
    }
  }
  return out;
}

Tensor reference_tfidf(const TfIdfCase& c, const Shape& shape, const std::vector<int64_t>& tokens) {
  const int64_t rows = shape.size() == 2 ? shape[0] : 1, length = shape.back();
  std::vector<float> values;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> row(tokens.begin() + r * length, tokens.begin() + (r + 1) * length);
    std::vector<float> out = reference_row(c, row);
    values.insert(values.end(), out.begin(), out.end());
  }
  const int64_t output_size = static_cast<int64_t>(values.size()) / rows;
  return make_float(shape.size() == 2 ? Shape{rows, output_size} : Shape{output_size}, values);
}

/// A pool of distinct random n-grams of lengths 1 to 3 over tokens 0..4 (the inputs use 0..3, so
/// some pool n-grams never occur), coordinates a shuffled range with a gap, random weights.
TfIdfCase random_case(std::mt19937& rng, const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t max_skip) {
  TfIdfCase c;
  c.mode = mode;
  c.min_gram_length = min_gram;
  c.max_gram_length = max_gram;
  c.max_skip_count = max_skip;
  const int per_length[] = {3, 6, 5};
  std::uniform_int_distribution<int64_t> token(0, 4);
  for (int64_t n = 1; n <= 3; ++n) {
    c.ngram_counts.push_back(static_cast<int64_t>(c.pool.size()));
    std::set<std::vector<int64_t>> seen;
    while (static_cast<int>(seen.size()) < per_length[n - 1]) {
      std::vector<int64_t> ngram(static_cast<size_t>(n));
      for (int64_t& item : ngram) item = token(rng);
      if (seen.insert(ngram).second) c.pool.insert(c.pool.end(), ngram.begin(), ngram.end());
    }
  }
  const int64_t ngrams = 3 + 6 + 5;
  c.ngram_indexes.resize(static_cast<size_t>(ngrams));
  std::iota(c.ngram_indexes.begin(), c.ngram_indexes.end(), 0);
  std::shuffle(c.ngram_indexes.begin(), c.ngram_indexes.end(), rng);
  for (int64_t& index : c.ngram_indexes) index += index >= ngrams / 2 ? 2 : 0;  // coordinates 7 and 8 stay 0
  std::uniform_real_distribution<float> weight(0.25f, 4.0f);
  for (int64_t i = 0; i < ngrams; ++i) c.weights.push_back(weight(rng));
  return c;
}

std::vector<int64_t> random_tokens(std::mt19937& rng, int64_t count) {
  std::uniform_int_distribution<int64_t> token(0, 3);
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t& t : out) t = token(rng);
  return out;
}

TEST(TfIdfVectorizer, RandomPoolsWithSkipsMatchBruteForce) {
  std::mt19937 rng(20240611);
  struct Setting {
    std::string mode;
    int64_t min_gram, max_gram, max_skip;
  };
  const Setting settings[] = {{"TF", 1, 3, 3}, {"IDF", 1, 2, 2}, {"TFIDF", 2, 3, 4}, {"TFIDF", 1, 1, 3}, {"TF", 3, 3, 1}};
  for (const Setting& s : settings) {
    const TfIdfCase c = random_case(rng, s.mode, s.min_gram, s.max_gram, s.max_skip);
    for (DType dtype : {DType::kInt32, DType::kInt64}) {
      SCOPED_TRACE(s.mode + " n " + std::to_string(s.min_gram) + ".." + std::to_string(s.max_gram) + " skip " +
                   std::to_string(s.max_skip) + " " + dtype_name(dtype));
      const Shape batch = {3, 11};
      const std::vector<int64_t> tokens = random_tokens(rng, 33);
      expect_close(run_one_op(tfidf_graph(c, make_tokens(dtype, batch, tokens)), 2)[0], reference_tfidf(c, batch, tokens),
                   0, 1e-6);
      const std::vector<int64_t> single = random_tokens(rng, 13);
      expect_close(run_one_op(tfidf_graph(c, make_tokens(dtype, {13}, single)))[0], reference_tfidf(c, {13}, single), 0,
                   1e-6);
    }
  }
}

TEST(TfIdfVectorizer, OneGramsCountOncePerPositionWhateverTheSkips) {
  // Pool: 1-gram 7, 2-gram (7, 7). Input 7 7 7: three 1-grams; 2-grams at skip 0: (0,1), (1,2); skip 1: (0,2).
  TfIdfCase c;
  c.max_skip_count = 5;
  c.pool = {7, 7, 7};
  c.ngram_counts = {0, 1};
  c.ngram_indexes = {0, 1};
  expect_close(run_one_op(tfidf_graph(c, make_tokens(DType::kInt64, {3}, {7, 7, 7})))[0], make_float({2}, {3, 3}));
}

TEST(TfIdfVectorizer, HugeSkipCountIsBoundedByTheRow) {
  std::mt19937 rng(7);
  TfIdfCase c = random_case(rng, "TF", 1, 3, std::numeric_limits<int64_t>::max());
  const std::vector<int64_t> tokens = random_tokens(rng, 40);
  TfIdfCase every_skip = c;
  every_skip.max_skip_count = 40;  // the reference enumerates; every skip that fits in 40 items
  expect_close(run_one_op(tfidf_graph(c, make_tokens(DType::kInt32, {40}, tokens)))[0],
               reference_tfidf(every_skip, {40}, tokens), 0, 1e-6);
}

TEST(TfIdfVectorizer, SharedCoordinatesAddUpAndEmptyRowsGiveZeros) {
  TfIdfCase c;
  c.mode = "IDF";
  c.pool = {1, 2, 1, 2};
  c.ngram_counts = {0, 2};
  c.ngram_indexes = {0, 0, 1};  // 1-grams 1 and 2 share coordinate 0
  c.weights = {0.5f, 2.0f, 3.0f};
  expect_close(run_one_op(tfidf_graph(c, make_tokens(DType::kInt64, {1, 5}, {1, 1, 2, 9, 9})))[0],
               make_float({1, 2}, {2.5f, 3.0f}));
  expect_close(run_one_op(tfidf_graph(c, make_tokens(DType::kInt64, {2, 0}, {})))[0], make_float({2, 2}, {0, 0, 0, 0}));
}

TfIdfCase valid_case() {
  TfIdfCase c;
  c.pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  c.ngram_counts = {0, 4};
  c.ngram_indexes = {0, 1, 2, 3, 4, 5, 6};
  return c;
}

void expect_attribute_error(const TfIdfCase& c, const std::string& message) {
  SCOPED_TRACE(message);
  EXPECT_USER_ERROR(run_one_op(tfidf_graph(c, make_tokens(DType::kInt32, {4}, {1, 2, 3, 4}))),
                    "node 'TfIdfVectorizer_0' (TfIdfVectorizer): " + message);
}

TEST(TfIdfVectorizer, BadAttributesAreUserErrors) {
  const Tensor x = make_tokens(DType::kInt32, {4}, {5, 6, 7, 8});
  expect_close(run_one_op(tfidf_graph(valid_case(), x))[0], make_float({7}, {0, 0, 1, 0, 1, 1, 1}));

  TfIdfCase c = valid_case();
  c.ngram_counts = {0, 4, 2};
  c.max_gram_length = 3;
  expect_attribute_error(c, "attribute 'ngram_counts' decreases from 4 to 2");
  c = valid_case();
  c.ngram_counts = {0, 11};
  expect_attribute_error(c, "attribute 'ngram_counts' value 11");
  c = valid_case();
  c.ngram_counts = {0, 3};
  expect_attribute_error(c, "attribute 'ngram_counts' gives the 2-grams 7 pool items, not a multiple of 2");
  c = valid_case();
  c.ngram_counts = {1, 4};
  expect_attribute_error(c, "attribute 'ngram_counts' starts at 1");
  c = valid_case();
  c.ngram_counts = {};
  expect_attribute_error(c, "attribute 'ngram_counts' is empty");
  c = valid_case();
  c.ngram_indexes = {0, 1, 2, 3, 4, 5};
  expect_attribute_error(c, "attribute 'ngram_indexes' has 6 values, but the pool holds 7 n-grams");
  c = valid_case();
  c.ngram_indexes[3] = -1;
  expect_attribute_error(c, "attribute 'ngram_indexes' holds the negative output coordinate -1");
  c = valid_case();
  c.weights = {1, 2, 3};
  expect_attribute_error(c, "attribute 'weights' has 3 values");
  c = valid_case();
  c.min_gram_length = 0;
  expect_attribute_error(c, "attribute 'min_gram_length' is 0");
  c = valid_case();
  c.min_gram_length = 2;
  c.max_gram_length = 1;
  expect_attribute_error(c, "attribute 'max_gram_length' is 1, less than min_gram_length 2");
  c = valid_case();
  c.max_gram_length = 3;
  expect_attribute_error(c, "attribute 'max_gram_length' is 3, but ngram_counts has groups for lengths 1 to 2 only");
  c = valid_case();
  c.max_skip_count = -1;
  expect_attribute_error(c, "attribute 'max_skip_count' is -1");
  c = valid_case();
  c.mode = "BM25";
  expect_attribute_error(c, "attribute 'mode' is 'BM25'");
  c = valid_case();
  c.pool = {};
  expect_attribute_error(c, "attribute 'pool_int64s' is required");
  c = valid_case();
  c.pool[6] = 5;
  c.pool[7] = 6;  // the 2-gram (5, 6) twice
  expect_attribute_error(c, "attribute 'pool_int64s' holds the same 2-gram twice");

  c = valid_case();
  c.ngram_indexes[0] = std::numeric_limits<int64_t>::max();  // an output of 2^63 floats
  EXPECT_USER_ERROR(run_one_op(tfidf_graph(c, x)), "too large");
  OneOpGraph missing = tfidf_graph(valid_case(), x);
  missing.attrs.erase("mode");
  EXPECT_USER_ERROR(run_one_op(missing), "attribute 'mode' is required but missing");
  OneOpGraph wrong_kind = tfidf_graph(valid_case(), x);
  wrong_kind.attrs.set("max_skip_count", Attribute::of_float(1.0f));
  EXPECT_USER_ERROR(run_one_op(wrong_kind), "attribute 'max_skip_count' is float");
  EXPECT_USER_ERROR(run_one_op(tfidf_graph(valid_case(), make_tokens(DType::kInt32, {1, 2, 2}, {5, 6, 7, 8}))),
                    "input must be 1-D [C] or 2-D [N, C]");
}

TEST(TfIdfVectorizer, StringPoolsAndFloatInputAreUnsupported) {
  OneOpGraph strings = tfidf_graph(valid_case(), make_tokens(DType::kInt64, {2}, {5, 6}));
  strings.attrs.erase("pool_int64s");
  Attribute pool;
  pool.kind = Attribute::Kind::kStrings;
  pool.strings = {"a", "b", "c", "d", "a", "b", "b", "c", "c", "d"};
  strings.attrs.set("pool_strings", pool);
  EXPECT_UNSUPPORTED_ERROR(run_one_op(strings), "node 'TfIdfVectorizer_0' (TfIdfVectorizer): attribute 'pool_strings'");
  strings.attrs.set("pool_int64s", Attribute::of_ints(valid_case().pool));
  EXPECT_USER_ERROR(run_one_op(strings), "only one of the attributes 'pool_strings' and 'pool_int64s'");
  EXPECT_UNSUPPORTED_ERROR(run_one_op(tfidf_graph(valid_case(), make_float({2}, {5, 6}))),
                           "node 'TfIdfVectorizer_0' (TfIdfVectorizer)");
}

}  // namespace
}  // namespace tessera::testing
