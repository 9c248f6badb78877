// region_compile_key (region_key.h).
#include "runtime/region_key.h"

#include <cstdint>
#include <cstring>

namespace tessera {
namespace {

/// Appends fields with their lengths, so that no two different sequences of fields spell the same text.
class KeyWriter {
 public:
  void text(const std::string& s) {
    out_ += std::to_string(s.size());
    out_ += ':';
    out_ += s;
  }
  void number(int64_t v) {
    out_ += std::to_string(v);
    out_ += ';';
  }
  void bits(float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    number(b);
  }
  void pointer(const void* p) { number(static_cast<int64_t>(reinterpret_cast<uintptr_t>(p))); }
  void ids(const std::vector<ValueId>& values) {
    number(static_cast<int64_t>(values.size()));
    for (ValueId v : values) number(v);
  }
  void tensor(const Tensor& t) {
    number(static_cast<int64_t>(t.dtype()));
    number(static_cast<int64_t>(t.shape().size()));
    for (int64_t d : t.shape()) number(d);
    pointer(t.data());
  }
  void graph(const Graph& g);
  std::string take() { return std::move(out_); }

 private:
  void attribute(const Attribute& a);
  std::string out_;
};

void KeyWriter::attribute(const Attribute& a) {
  number(static_cast<int64_t>(a.kind));
  switch (a.kind) {
    case Attribute::Kind::kInt: number(a.i); break;
    case Attribute::Kind::kFloat: bits(a.f); break;
    case Attribute::Kind::kString: text(a.s); break;
    case Attribute::Kind::kInts:
      number(static_cast<int64_t>(a.ints.size()));
      for (int64_t v : a.ints) number(v);
      break;
    case Attribute::Kind::kFloats:
      number(static_cast<int64_t>(a.floats.size()));
      for (float v : a.floats) bits(v);
      break;
    case Attribute::Kind::kStrings:
      number(static_cast<int64_t>(a.strings.size()));
      for (const std::string& v : a.strings) text(v);
      break;
    case Attribute::Kind::kTensor:
      if (a.tensor) tensor(*a.tensor);
      else text("<none>");
      break;
    case Attribute::Kind::kGraph:
      if (a.graph) graph(*a.graph);
      else text("<none>");
      break;
  }
}

void KeyWriter::graph(const Graph& g) {
  text(g.name);
  number(static_cast<int64_t>(g.values.size()));
  for (const Value& v : g.values) {
    text(v.name);
    text(v.type.to_string());
    number(static_cast<int64_t>(v.type.symbols.size()));
    for (const std::string& s : v.type.symbols) text(s);
    if (v.constant) tensor(*v.constant);
    else text("-");
  }
  number(static_cast<int64_t>(g.nodes.size()));
  for (const Node& n : g.nodes) {
    text(n.name);
    text(n.domain);
    text(n.op_type);
    number(n.opset);
    ids(n.inputs);
    ids(n.outputs);
    number(static_cast<int64_t>(n.fused.size()));
    for (const FusedNode& f : n.fused) {
      text(f.name);
      text(f.op_type);
    }
    number(static_cast<int64_t>(n.attrs.all().size()));
    for (const auto& [name, a] : n.attrs.all()) {
      text(name);
      attribute(a);
    }
  }
  ids(g.inputs);
  ids(g.outputs);
  number(static_cast<int64_t>(g.metadata.size()));
  for (const auto& [k, v] : g.metadata) {
    text(k);
    text(v);
  }
}

}  // namespace

std::string region_compile_key(const std::string& backend, const Graph& region, const RegionOptions& options) {
  KeyWriter key;
  key.text(backend);
  key.number(options.num_threads);
  key.number(static_cast<int64_t>(options.bf16_nodes.size()));
  for (char c : options.bf16_nodes) key.number(c);
  key.number(static_cast<int64_t>(options.probe_input_dims.size()));
  for (const Shape& dims : options.probe_input_dims) {
    key.number(static_cast<int64_t>(dims.size()));
    for (int64_t d : dims) key.number(d);
  }
  key.graph(region);
  return key.take();
}

}  // namespace tessera
