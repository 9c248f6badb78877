// Parsing of Einsum equations into label lists (see misc_internal.h).
#include <algorithm>
#include <cctype>
#include <map>

#include "ir/error.h"
#include "ir/ops/misc_internal.h"

namespace tessera::einsum {
namespace {

constexpr int kLetterLabels = 52;  // a-z then A-Z

int letter_label(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c - 'A' + 26; }

/// One side of a term: letters before the ellipsis, whether there is one, letters after.
struct Term {
  std::vector<int> before;
  bool has_ellipsis = false;
  std::vector<int> after;
  size_t letters() const { return before.size() + after.size(); }
};

Term parse_term(const std::string& text, const std::string& equation) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (term.has_ellipsis || text.compare(i, 3, "...") != 0) {
        throw_user_error("einsum equation '", equation, "': malformed ellipsis in '", text, "'");
      }
      term.has_ellipsis = true;
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      (term.has_ellipsis ? term.after : term.before).push_back(letter_label(c));
    } else {
      throw_user_error("einsum equation '", equation, "': unexpected character '", c, "'");
    }
  }
  return term;
}

}  // namespace

Equation parse(const std::string& text, const std::vector<int64_t>& ranks) {
  std::string compact;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  const size_t arrow = compact.find("->");
  const std::string lhs = compact.substr(0, arrow);
  std::vector<Term> terms;
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), text));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size()) {
    throw_user_error("einsum equation '", text, "' has ", terms.size(), " operands, but ", ranks.size(), " inputs given");
  }
  // How many dims each operand's ellipsis covers; the widest sets the broadcast rank.
  int64_t ellipsis_rank = 0;
  std::vector<int64_t> covered(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t letters = static_cast<int64_t>(terms[i].letters());
    if (terms[i].has_ellipsis ? ranks[i] < letters : ranks[i] != letters) {
      throw_user_error("einsum equation '", text, "': operand ", i, " has rank ", ranks[i], " but its subscripts name ",
                       letters, " dims");
    }
    covered[i] = ranks[i] - letters;
    ellipsis_rank = std::max(ellipsis_rank, covered[i]);
  }
  Equation eq;
  eq.num_labels = kLetterLabels + static_cast<int>(ellipsis_rank);
  std::map<int, int> letter_count;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels = terms[i].before;
    for (int64_t d = ellipsis_rank - covered[i]; d < ellipsis_rank; ++d) labels.push_back(kLetterLabels + static_cast<int>(d));
    labels.insert(labels.end(), terms[i].after.begin(), terms[i].after.end());
    for (int label : terms[i].before) ++letter_count[label];
    for (int label : terms[i].after) ++letter_count[label];
    eq.operand_labels.push_back(std::move(labels));
  }
  if (arrow == std::string::npos) {
    for (int64_t d = 0; d < ellipsis_rank; ++d) eq.output_labels.push_back(kLetterLabels + static_cast<int>(d));
    // ASCII order puts upper case first; the labels number lower case first.
    std::vector<char> once;
    for (const auto& [label, count] : letter_count) {
      if (count == 1) once.push_back(static_cast<char>(label < 26 ? 'a' + label : 'A' + label - 26));
    }
    std::sort(once.begin(), once.end());
    for (char c : once) eq.output_labels.push_back(letter_label(c));
  } else {
    Term out = parse_term(compact.substr(arrow + 2), text);
    eq.output_labels = out.before;
    if (out.has_ellipsis) {
      for (int64_t d = 0; d < ellipsis_rank; ++d) eq.output_labels.push_back(kLetterLabels + static_cast<int>(d));
    } else if (ellipsis_rank > 0) {
      throw_user_error("einsum equation '", text, "': the output must keep the ellipsis dims");
    }
    eq.output_labels.insert(eq.output_labels.end(), out.after.begin(), out.after.end());
    std::vector<int> seen = eq.output_labels;
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
      throw_user_error("einsum equation '", text, "': an output subscript appears twice");
    }
    for (int label : out.before) {
      if (!letter_count.count(label)) throw_user_error("einsum equation '", text, "': output subscript not in any input");
    }
    for (int label : out.after) {
      if (!letter_count.count(label)) throw_user_error("einsum equation '", text, "': output subscript not in any input");
    }
  }
  return eq;
}

std::vector<int64_t> label_sizes(const Equation& equation, const std::vector<Shape>& shapes) {
  std::vector<int64_t> sizes(static_cast<size_t>(equation.num_labels), -2);  // -2: not used
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<int>& labels = equation.operand_labels[i];
    for (size_t d = 0; d < labels.size(); ++d) {
      int64_t& size = sizes[static_cast<size_t>(labels[d])];
      const int64_t dim = shapes[i][d];
      if (size == -2 || size == 1 || size == -1) {
        if (size == -2 || dim != 1) size = dim;
      } else if (dim != size && dim != 1 && dim != -1) {
        throw_user_error("einsum: operand ", i, " has size ", dim, " for a subscript of size ", size);
      }
    }
  }
  return sizes;
}

}  // namespace tessera::einsum
