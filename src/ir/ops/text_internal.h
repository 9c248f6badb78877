// Internal to the text op family (src/ir/ops/text.cc and the native kernels in
// src/backends/native/kernels/text.cc): TfIdfVectorizer's attributes, read and
// checked in one place for shape inference and for the kernel.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// TfIdfVectorizer's attributes once every check has passed. The pool holds the
/// n-grams grouped by length: those of length n are pool[ngram_counts[n-1] ..
/// start of the next group), n items each, and the pool's i-th n-gram (counted
/// over every group in order) is written to output coordinate ngram_indexes[i].
struct TfIdfVectorizerAttributes {
  enum class Mode { kTermFrequency, kInverseDocumentFrequency, kTermFrequencyTimesIdf };
  Mode mode = Mode::kTermFrequency;
  int64_t min_gram_length = 1;
  int64_t max_gram_length = 1;
  int64_t max_skip_count = 0;
  std::vector<int64_t> pool;           // pool_int64s
  std::vector<int64_t> ngram_counts;   // where each n-gram length starts in `pool`
  std::vector<int64_t> ngram_indexes;  // output coordinate of each pool n-gram
  std::vector<float> weights;          // one per pool n-gram; empty means all 1
  int64_t output_size = 0;             // max(ngram_indexes) + 1

  /// One past the last pool item of the n-grams of length n (1 <= n <= ngram_counts.size()).
  int64_t group_end(size_t n) const {
    return n < ngram_counts.size() ? ngram_counts[n] : static_cast<int64_t>(pool.size());
  }
};

/// Reads TfIdfVectorizer's attributes and checks them as hostile input: a user
/// error naming the node and the attribute for anything out of range or
/// inconsistent, an unsupported error for a string pool (pool_strings).
TfIdfVectorizerAttributes read_tfidf_vectorizer_attributes(const Node& node);

class OpRegistry;
/// StringNormalizer's schema (text_normalizer.cc), registered by register_text_ops.
void register_string_normalizer(OpRegistry& registry);

}  // namespace tessera
