#include "ir/printer.h"

#include <sstream>

namespace tessera {

namespace {

std::string attribute_to_string(const Attribute& a) {
  std::ostringstream s;
  auto list = [&s](const auto& items) {
    s << "[";
    for (size_t i = 0; i < items.size(); ++i) s << (i ? ", " : "") << items[i];
    s << "]";
  };
  switch (a.kind) {
    case Attribute::Kind::kInt: s << a.i; break;
    case Attribute::Kind::kFloat: s << a.f; break;
    case Attribute::Kind::kString: s << '"' << a.s << '"'; break;
    case Attribute::Kind::kInts: list(a.ints); break;
    case Attribute::Kind::kFloats: list(a.floats); break;
    case Attribute::Kind::kStrings: list(a.strings); break;
    case Attribute::Kind::kTensor:
      s << "tensor<" << dtype_name(a.tensor->dtype()) << "[" << shape_to_string(a.tensor->shape()) << "]>";
      break;
    case Attribute::Kind::kGraph: s << "graph"; break;
  }
  return s.str();
}

}  // namespace

std::string print_graph(const Graph& graph) {
  std::ostringstream out;
  out << "graph " << (graph.name.empty() ? "main" : graph.name) << " {\n";
  for (ValueId id : graph.inputs) out << "  input %" << graph.value(id).name << ": " << graph.value(id).type.to_string() << "\n";
  for (const Value& v : graph.values) {
    if (v.constant) out << "  const %" << v.name << ": " << v.type.to_string() << "\n";
  }
  for (const Node& node : graph.nodes) {
    out << "  ";
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (i) out << ", ";
      if (node.outputs[i] == kNoValue) {
        out << "_";
      } else {
        out << "%" << graph.value(node.outputs[i]).name << ": " << graph.value(node.outputs[i]).type.to_string();
      }
    }
    out << " = " << (node.domain.empty() ? "" : node.domain + ".") << node.op_type << "(";
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i) out << ", ";
      out << (node.inputs[i] == kNoValue ? std::string("_") : "%" + graph.value(node.inputs[i]).name);
    }
    out << ")";
    if (!node.attrs.all().empty()) {
      out << " {";
      bool first = true;
      for (const auto& [name, attr] : node.attrs.all()) {
        out << (first ? "" : ", ") << name << "=" << attribute_to_string(attr);
        first = false;
      }
      out << "}";
    }
    out << "  # " << node.name << "\n";
  }
  for (ValueId id : graph.outputs) out << "  output %" << graph.value(id).name << "\n";
  out << "}\n";
  return out.str();
}

}  // namespace tessera
