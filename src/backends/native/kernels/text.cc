// Native kernels of the text family (text preprocessing ops), and its
// registration. For now TfIdfVectorizer over int32 and int64 tokens.
//
// TfIdfVectorizer counts, per row of the input, how often each n-gram of the
// pool occurs: for every skip count s in [0, max_skip_count] and length n in
// [min_gram_length, max_gram_length], the items x[i], x[i + (s+1)], ...,
// x[i + (n-1)(s+1)] for every start i where they all fit. A 1-gram has no gaps
// to skip, so it is counted once per position, not once per skip count. The
// pool's n-grams go into a trie (built once, in the kernel's prepare hook) so
// that one walk from each start finds every pool n-gram beginning there, and
// stops at the first item no pool n-gram continues with.
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/native/kernel.h"
#include "ir/ops/text_internal.h"

namespace tessera::native {
namespace {

/// The pool's n-grams of the counted lengths as a trie: node 0 is the root, a
/// node at depth n stands for an n-item prefix and, when that prefix is a pool
/// n-gram, holds its index in the pool.
class NgramTrie {
 public:
  explicit NgramTrie(const Node& node) : attributes_(read_tfidf_vectorizer_attributes(node)) {
    pool_index_.push_back(-1);  // the root
    int64_t pool_ngram = 0;     // index of the next n-gram over all lengths, as ngram_indexes counts them
    for (size_t n = 1; n <= attributes_.ngram_counts.size(); ++n) {
      const int64_t begin = attributes_.ngram_counts[n - 1], end = attributes_.group_end(n);
      const bool counted = static_cast<int64_t>(n) >= attributes_.min_gram_length &&
                           static_cast<int64_t>(n) <= attributes_.max_gram_length;
      for (int64_t first = begin; first < end; first += static_cast<int64_t>(n), ++pool_ngram) {
        if (counted) insert(node, first, n, pool_ngram);
      }
    }
  }

  const TfIdfVectorizerAttributes& attributes() const { return attributes_; }

  /// The child of `parent` reached by `item`, or -1.
  int64_t child(int64_t parent, int64_t item) const {
    auto it = children_.find(Edge{parent, item});
    return it == children_.end() ? -1 : it->second;
  }
  /// The pool index of the n-gram that ends at `trie_node`, or -1.
  int64_t pool_index(int64_t trie_node) const { return pool_index_[static_cast<size_t>(trie_node)]; }

 private:
  struct Edge {
    int64_t parent;
    int64_t item;
    bool operator==(const Edge& other) const { return parent == other.parent && item == other.item; }
  };
  struct EdgeHash {
    size_t operator()(const Edge& e) const {
      const uint64_t h = static_cast<uint64_t>(e.item) * 0x9E3779B97F4A7C15ull;
      return static_cast<size_t>(h ^ (static_cast<uint64_t>(e.parent) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2)));
    }
  };

  void insert(const Node& node, int64_t first, size_t n, int64_t pool_ngram) {
    int64_t at = 0;
    for (size_t k = 0; k < n; ++k) {
      const int64_t item = attributes_.pool[static_cast<size_t>(first) + k];
      auto [it, added] = children_.try_emplace(Edge{at, item}, static_cast<int64_t>(pool_index_.size()));
      if (added) pool_index_.push_back(-1);
      at = it->second;
    }
    int64_t& slot = pool_index_[static_cast<size_t>(at)];
    if (slot >= 0) {
      // ONNX Runtime refuses duplicates too: the two entries' coordinates and weights would compete.
      throw_user_error(node.describe(), ": attribute 'pool_int64s' holds the same ", n, "-gram twice (pool n-grams ",
                       slot, " and ", pool_ngram, ")");
    }
    slot = pool_ngram;
  }

  TfIdfVectorizerAttributes attributes_;
  std::unordered_map<Edge, int64_t, EdgeHash> children_;
  std::vector<int64_t> pool_index_;  // per trie node
};

std::shared_ptr<void> prepare_tfidf_vectorizer(const Node& node, const std::vector<const Tensor*>&,
                                               const std::vector<TensorType>&) {
  return std::make_shared<NgramTrie>(node);
}

/// Adds to `counts` (one per pool n-gram) the occurrences in the row `x` of length `length`.
template <typename T>
void count_row_ngrams(const NgramTrie& trie, const T* x, int64_t length, std::vector<int64_t>& counts) {
  const TfIdfVectorizerAttributes& a = trie.attributes();
  // Skips matter only to n-grams of 2 items or more, and one at skip s spans (n-1)(s+1)+1 items, so
  // skips past length-2 find nothing; the clamp keeps a huge max_skip_count from looping for nothing.
  const int64_t max_skip = a.max_gram_length < 2 ? 0 : std::min(a.max_skip_count, std::max<int64_t>(0, length - 2));
  for (int64_t skip = 0; skip <= max_skip; ++skip) {
    const int64_t stride = skip + 1;
    // Past skip 0 only n >= 2 counts, which needs a second item after the start.
    const int64_t start_end = skip == 0 ? length : length - stride;
    for (int64_t start = 0; start < start_end; ++start) {
      int64_t at = 0;
      int64_t n = 1;
      for (int64_t pos = start; pos < length && n <= a.max_gram_length; pos += stride, ++n) {
        at = trie.child(at, static_cast<int64_t>(x[pos]));
        if (at < 0) break;
        const int64_t pool_ngram = trie.pool_index(at);
        if (pool_ngram >= 0 && (n > 1 || skip == 0)) ++counts[static_cast<size_t>(pool_ngram)];
      }
    }
  }
}

template <typename T>
void tfidf_vectorizer(KernelContext& ctx, const NgramTrie& trie) {
  const TfIdfVectorizerAttributes& a = trie.attributes();
  const TensorView& x = ctx.input(0);
  const int64_t rows = x.rank() == 2 ? x.shape[0] : 1;
  const int64_t length = x.shape.back();
  TensorView& y = ctx.output(0);
  const Shape expected = x.rank() == 2 ? Shape{rows, a.output_size} : Shape{a.output_size};
  if (y.shape != expected) ctx.fail("output has shape ", shape_to_string(y.shape), ", expected ", shape_to_string(expected));
  const T* data = x.as<T>();
  float* out = y.as<float>();
  const size_t pool_ngrams = a.ngram_indexes.size();
  ctx.pool().parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> counts(pool_ngrams);
    for (int64_t row = begin; row < end; ++row) {
      std::fill(counts.begin(), counts.end(), 0);
      count_row_ngrams(trie, data + row * length, length, counts);
      float* out_row = out + row * a.output_size;
      std::fill(out_row, out_row + a.output_size, 0.0f);
      // Each pool n-gram adds its value at its coordinate (n-grams sharing a coordinate add up).
      for (size_t i = 0; i < pool_ngrams; ++i) {
        if (counts[i] == 0) continue;
        // The spec's i-th weight belongs to the pool's i-th n-gram (ONNX Runtime reads the weight at
        // the output coordinate instead; the two agree when ngram_indexes is 0, 1, 2, ...).
        const float weight = a.weights.empty() ? 1.0f : a.weights[i];
        float value = static_cast<float>(counts[i]);
        switch (a.mode) {
          case TfIdfVectorizerAttributes::Mode::kTermFrequency: break;
          case TfIdfVectorizerAttributes::Mode::kInverseDocumentFrequency: value = weight; break;
          case TfIdfVectorizerAttributes::Mode::kTermFrequencyTimesIdf: value *= weight; break;
        }
        out_row[a.ngram_indexes[i]] += value;
      }
    }
  });
}

void tfidf_vectorizer_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.rank() != 1 && x.rank() != 2) ctx.fail("input must be 1-D [C] or 2-D [N, C], got rank ", x.rank());
  // Without prepare state (a subgraph run by the control-flow interpreter) the trie is built here.
  std::unique_ptr<NgramTrie> local;
  const NgramTrie* trie = ctx.state<NgramTrie>();
  if (!trie) {
    local = std::make_unique<NgramTrie>(ctx.node());
    trie = local.get();
  }
  switch (x.dtype) {
    case DType::kInt32: return tfidf_vectorizer<int32_t>(ctx, *trie);
    case DType::kInt64: return tfidf_vectorizer<int64_t>(ctx, *trie);
    default:
      throw_unsupported(ctx.node().describe(), ": input dtype ", dtype_name(x.dtype),
                        " is not supported (int32 and int64 are; string input is not yet)");
  }
}

}  // namespace

void register_text_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "TfIdfVectorizer", .run = tfidf_vectorizer_kernel, .prepare = prepare_tfidf_vectorizer});
  register_string_normalizer_kernel(registry);
}

}  // namespace tessera::native
