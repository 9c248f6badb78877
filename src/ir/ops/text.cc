// Schemas of the text family: text preprocessing ops that turn token sequences
// into features. For now TfIdfVectorizer (n-gram counts over an integer pool);
// a string pool is refused as unsupported until Tessera has a string dtype.
#include <algorithm>

#include "ir/op_schema.h"
#include "ir/ops/text_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

template <typename... Args>
[[noreturn]] void fail_attribute(const Node& node, const char* attribute, Args&&... args) {
  throw_user_error(node.describe(), ": attribute '", attribute, "' ", std::forward<Args>(args)...);
}

/// The attribute `name` of `kind`, or null when absent; a user error naming the
/// node when it has another kind (the importer checks kinds, an artifact or a
/// hand-built graph may not have).
const Attribute* find_attribute(const Node& node, const char* name, Kind kind) {
  const Attribute* a = node.attrs.find(name);
  if (a && a->kind != kind) {
    fail_attribute(node, name, "is ", attribute_kind_name(a->kind), ", expected ", attribute_kind_name(kind));
  }
  return a;
}

const Attribute& required_attribute(const Node& node, const char* name, Kind kind) {
  const Attribute* a = find_attribute(node, name, kind);
  if (!a) fail_attribute(node, name, "is required but missing");
  return *a;
}

void infer_tfidf_vectorizer(InferContext& ctx) {
  const TfIdfVectorizerAttributes attributes = read_tfidf_vectorizer_attributes(ctx.node());
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, DType::kFloat32);
  if (x.rank() == 1) return ctx.set_output(0, DType::kFloat32, {attributes.output_size});
  if (x.rank() == 2) return ctx.set_output(0, DType::kFloat32, {x.dims[0], attributes.output_size});
  ctx.fail("input must be 1-D [C] or 2-D [N, C], got ", x.to_string());
}

}  // namespace

TfIdfVectorizerAttributes read_tfidf_vectorizer_attributes(const Node& node) {
  TfIdfVectorizerAttributes out;
  // Empty lists count as absent: some exporters write every optional list attribute.
  const Attribute* strings = find_attribute(node, "pool_strings", Kind::kStrings);
  const Attribute* int64s = find_attribute(node, "pool_int64s", Kind::kInts);
  const bool has_strings = strings && !strings->strings.empty();
  const bool has_int64s = int64s && !int64s->ints.empty();
  if (has_strings && has_int64s) {
    throw_user_error(node.describe(), ": only one of the attributes 'pool_strings' and 'pool_int64s' may be set");
  }
  if (has_strings) {
    throw_unsupported(node.describe(), ": attribute 'pool_strings' (a pool of strings, for string input) is not "
                      "supported; only integer pools (pool_int64s, with int32 or int64 input) are");
  }
  if (!has_int64s) fail_attribute(node, "pool_int64s", "is required (one of pool_strings and pool_int64s must be set)");
  out.pool = int64s->ints;
  const int64_t pool_size = static_cast<int64_t>(out.pool.size());

  const std::string mode = required_attribute(node, "mode", Kind::kString).s;
  if (mode == "TF") {
    out.mode = TfIdfVectorizerAttributes::Mode::kTermFrequency;
  } else if (mode == "IDF") {
    out.mode = TfIdfVectorizerAttributes::Mode::kInverseDocumentFrequency;
  } else if (mode == "TFIDF") {
    out.mode = TfIdfVectorizerAttributes::Mode::kTermFrequencyTimesIdf;
  } else {
    fail_attribute(node, "mode", "is '", mode, "', expected one of TF, IDF, TFIDF");
  }

  out.min_gram_length = required_attribute(node, "min_gram_length", Kind::kInt).i;
  out.max_gram_length = required_attribute(node, "max_gram_length", Kind::kInt).i;
  out.max_skip_count = required_attribute(node, "max_skip_count", Kind::kInt).i;
  if (out.min_gram_length < 1) fail_attribute(node, "min_gram_length", "is ", out.min_gram_length, ", must be at least 1");
  if (out.max_gram_length < out.min_gram_length) {
    fail_attribute(node, "max_gram_length", "is ", out.max_gram_length, ", less than min_gram_length ",
                   out.min_gram_length);
  }
  if (out.max_skip_count < 0) fail_attribute(node, "max_skip_count", "is ", out.max_skip_count, ", must not be negative");

  // ngram_counts: where the 1-grams, 2-grams, ... start in the pool (CSR-like offsets).
  out.ngram_counts = required_attribute(node, "ngram_counts", Kind::kInts).ints;
  const std::vector<int64_t>& counts = out.ngram_counts;
  if (counts.empty()) fail_attribute(node, "ngram_counts", "is empty");
  // Like ONNX Runtime: the pool must have a group (empty or not) for every length up to max_gram_length.
  if (out.max_gram_length > static_cast<int64_t>(counts.size())) {
    fail_attribute(node, "max_gram_length", "is ", out.max_gram_length, ", but ngram_counts has groups for lengths 1 to ",
                   counts.size(), " only");
  }
  if (counts[0] != 0) fail_attribute(node, "ngram_counts", "starts at ", counts[0], ", expected 0 (where the 1-grams start)");
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || counts[i] > pool_size) {
      fail_attribute(node, "ngram_counts", "value ", counts[i], " (where the ", i + 1, "-grams start) is outside the ",
                     "pool of ", pool_size, " items");
    }
    if (i > 0 && counts[i] < counts[i - 1]) {
      fail_attribute(node, "ngram_counts", "decreases from ", counts[i - 1], " to ", counts[i]);
    }
  }
  int64_t total_ngrams = 0;
  for (size_t n = 1; n <= counts.size(); ++n) {
    const int64_t items = out.group_end(n) - counts[n - 1];
    if (items % static_cast<int64_t>(n) != 0) {
      fail_attribute(node, "ngram_counts", "gives the ", n, "-grams ", items, " pool items, not a multiple of ", n);
    }
    total_ngrams += items / static_cast<int64_t>(n);
  }

  out.ngram_indexes = required_attribute(node, "ngram_indexes", Kind::kInts).ints;
  if (static_cast<int64_t>(out.ngram_indexes.size()) != total_ngrams) {
    fail_attribute(node, "ngram_indexes", "has ", out.ngram_indexes.size(), " values, but the pool holds ", total_ngrams,
                   " n-grams");
  }
  if (out.ngram_indexes.empty()) fail_attribute(node, "ngram_indexes", "is empty (the output would have no size)");
  int64_t greatest = 0;
  for (int64_t index : out.ngram_indexes) {
    if (index < 0) fail_attribute(node, "ngram_indexes", "holds the negative output coordinate ", index);
    greatest = std::max(greatest, index);
  }
  // Saturates: the size check after shape inference rejects an output that large.
  out.output_size = saturating_add(greatest, 1);

  if (const Attribute* weights = find_attribute(node, "weights", Kind::kFloats); weights && !weights->floats.empty()) {
    if (weights->floats.size() != out.ngram_indexes.size()) {
      fail_attribute(node, "weights", "has ", weights->floats.size(), " values, expected one per pool n-gram (",
                     out.ngram_indexes.size(), ")");
    }
    out.weights = weights->floats;
  }
  return out;
}

void register_text_ops(OpRegistry& registry) {
  register_string_normalizer(registry);
  registry.add({.op_type = "TfIdfVectorizer",
                .min_opset = 9,
                .attributes = {{"max_gram_length", Kind::kInt, std::nullopt, true},
                               {"max_skip_count", Kind::kInt, std::nullopt, true},
                               {"min_gram_length", Kind::kInt, std::nullopt, true},
                               {"mode", Kind::kString, std::nullopt, true},
                               {"ngram_counts", Kind::kInts, std::nullopt, true},
                               {"ngram_indexes", Kind::kInts, std::nullopt, true},
                               {"pool_int64s", Kind::kInts, std::nullopt},
                               {"pool_strings", Kind::kStrings, std::nullopt},
                               {"weights", Kind::kFloats, std::nullopt}},
                // ONNX also allows string input (with pool_strings); Tessera has no string dtype yet.
                .input_dtypes = {DType::kInt32, DType::kInt64},
                .infer = infer_tfidf_vectorizer});
}

}  // namespace tessera
