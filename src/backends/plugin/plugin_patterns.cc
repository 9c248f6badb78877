// tsrp_pattern data → Pattern (plugin_patterns.h). Entries are built children
// first, each exactly once, so an entry used twice is the same Pattern object
// and binds the same value or node in both places, as the pattern language
// requires of DAGs.
#include "backends/plugin/plugin_patterns.h"

#include <vector>

#include "ir/error.h"

namespace tessera {
namespace {

constexpr size_t kMaxEntries = 256;

class PatternReader {
 public:
  PatternReader(const tsrp_pattern& data, const NodePredicate& supported,
                const std::function<NodePredicate(size_t entry)>& checked, const std::string& where)
      : data_(data), supported_(supported), checked_(checked), where_(where), built_(data.node_count),
        state_(data.node_count, 0) {}

  Pattern build(int64_t index) {
    if (index < 0 || static_cast<size_t>(index) >= data_.node_count) {
      throw_user_error(where_, "refers to entry ", index, " of ", data_.node_count);
    }
    const size_t i = static_cast<size_t>(index);
    if (state_[i] == 2) return built_[i];
    if (state_[i] == 1) throw_user_error(where_, "entry ", i, " depends on itself");
    state_[i] = 1;
    const tsrp_pattern_node* entry = data_.nodes[i];
    if (!entry || entry->struct_size < offsetof(tsrp_pattern_node, kind) + sizeof(entry->kind)) {
      throw_user_error(where_, "entry ", i, " is missing or too small");
    }
    Pattern p;
    switch (entry->kind) {
      case TSRP_PATTERN_ANY: p = any(); break;
      case TSRP_PATTERN_CONSTANT: p = constant(); break;
      case TSRP_PATTERN_ABSENT: p = absent(); break;
      case TSRP_PATTERN_SCALAR: {
        if (!TSRP_HAS_MEMBER(entry, tsrp_pattern_node, tolerance)) throw_user_error(where_, "scalar entry ", i, " is too small");
        p = scalar(entry->scalar, entry->tolerance);
        break;
      }
      case TSRP_PATTERN_EITHER: {
        if (!TSRP_HAS_MEMBER(entry, tsrp_pattern_node, inputs) || entry->input_count < 1 || entry->input_count > 64 ||
            !entry->inputs) {
          throw_user_error(where_, "either entry ", i, " lists no alternatives");
        }
        std::vector<Pattern> alternatives;
        for (int32_t k = 0; k < entry->input_count; ++k) alternatives.push_back(build(entry->inputs[k]));
        p = either(std::move(alternatives));
        break;
      }
      case TSRP_PATTERN_OP: {
        if (!TSRP_HAS_MEMBER(entry, tsrp_pattern_node, flags) || !entry->op_types || !*entry->op_types) {
          throw_user_error(where_, "op entry ", i, " has no op types");
        }
        std::vector<std::string> types;
        std::string text = entry->op_types;
        for (size_t start = 0; start <= text.size();) {
          size_t bar = text.find('|', start);
          if (bar == std::string::npos) bar = text.size();
          if (bar == start) throw_user_error(where_, "op entry ", i, " has an empty op type in '", text, "'");
          types.push_back(text.substr(start, bar - start));
          start = bar + 1;
        }
        if (entry->input_count < 0) {
          p = op_in(types);
        } else {
          if (entry->input_count > 64 || (entry->input_count > 0 && !entry->inputs)) {
            throw_user_error(where_, "op entry ", i, " lists ", entry->input_count, " inputs without an array of them");
          }
          std::vector<Pattern> inputs;
          for (int32_t k = 0; k < entry->input_count; ++k) inputs.push_back(build(entry->inputs[k]));
          p = op_in(types, std::move(inputs));
        }
        // Builder calls modify the node in place: apply them before a parent shares it.
        if (entry->flags & TSRP_PATTERN_COMMUTATIVE) p.commutative();
        if (entry->flags & TSRP_PATTERN_SUPPORTED) p.where(supported_);
        if (entry->flags & TSRP_PATTERN_CHECKED) {
          if (!checked_) throw_user_error(where_, "entry ", i, " is flagged CHECKED, but the plug-in has no pattern_check");
          p.where(checked_(i));
        }
        if (entry->flags & ~uint32_t{TSRP_PATTERN_COMMUTATIVE | TSRP_PATTERN_SUPPORTED | TSRP_PATTERN_CHECKED}) {
          throw_user_error(where_, "entry ", i, " has unknown flags ", entry->flags);
        }
        break;
      }
      default: throw_user_error(where_, "entry ", i, " has unknown kind ", static_cast<int>(entry->kind));
    }
    built_[i] = p;
    state_[i] = 2;
    return p;
  }

 private:
  const tsrp_pattern& data_;
  const NodePredicate& supported_;
  const std::function<NodePredicate(size_t entry)>& checked_;
  const std::string& where_;
  std::vector<Pattern> built_;
  std::vector<char> state_;  // 0 not seen, 1 being built, 2 built
};

}  // namespace

Pattern read_plugin_pattern(const tsrp_pattern& data, const NodePredicate& supported,
                            const std::function<NodePredicate(size_t entry)>& checked, const std::string& where) {
  if (data.node_count == 0 || data.node_count > kMaxEntries || !data.nodes) {
    throw_user_error(where, "has ", data.node_count, " entries (1 to ", kMaxEntries, " allowed)");
  }
  PatternReader reader(data, supported, checked, where);
  Pattern root = reader.build(data.root);
  if (data.nodes[static_cast<size_t>(data.root)]->kind != TSRP_PATTERN_OP) throw_user_error(where, "root entry is not an op");
  return root;
}

}  // namespace tessera
