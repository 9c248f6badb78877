#include "passes/bind_input_shapes.h"

#include "ir/error.h"
#include "ir/shape_util.h"

namespace tessera {

void bind_input_shapes(Graph& graph, const std::map<std::string, Shape>& shapes) {
  for (const auto& [name, dims] : shapes) {
    bool known = graph.find_value(name) != kNoValue;
    bool is_symbol = false;
    for (ValueId id : graph.inputs) {
      for (const std::string& s : graph.value(id).type.symbols) is_symbol |= s == name;
    }
    if (!known && !is_symbol) {
      throw_user_error("a shape is given for '", name, "', which is neither an input nor a symbolic dimension of the model");
    }
  }
  for (ValueId id : graph.inputs) {
    Value& v = graph.value(id);
    auto it = shapes.find(v.name);
    if (!v.type.is_tensor()) {
      // A sequence's tensors may differ in shape; they are checked against the model's type at run time.
      if (it != shapes.end()) {
        throw_user_error("input '", v.name, "' is a ", v.type.to_string(), "; a shape can be given for tensor inputs only");
      }
      continue;
    }
    if (it != shapes.end()) {
      // The given shape (--input-shape, an input file, tsr_options_set_input_shape) must fit the model's.
      bool fits = !v.type.rank_known || v.type.rank() == static_cast<int64_t>(it->second.size());
      for (size_t i = 0; fits && v.type.rank_known && i < it->second.size(); ++i) {
        fits = v.type.dims[i] < 0 || v.type.dims[i] == it->second[i];
      }
      if (!fits) {
        throw_user_error("input '", v.name, "' is ", v.type.to_string(), " in the model, but the given shape is ",
                         shape_to_string(it->second));
      }
      for (int64_t d : it->second) {
        if (d < 0) throw_user_error("the shape given for input '", v.name, "' has a negative dimension");
      }
      // A symbolic dim bound by name too must agree with the input's own shape.
      for (size_t i = 0; i < v.type.symbols.size() && i < it->second.size(); ++i) {
        auto bound = v.type.symbols[i].empty() ? shapes.end() : shapes.find(v.type.symbols[i]);
        if (bound != shapes.end() && bound->second.size() == 1 && bound->second[0] != it->second[i]) {
          throw_user_error("input '", v.name, "' is given shape ", shape_to_string(it->second), ", but its dimension ", i,
                           " ('", v.type.symbols[i], "') is bound to ", bound->second[0]);
        }
      }
      v.type.rank_known = true;
      v.type.dims = it->second;
      continue;
    }
    if (!v.type.rank_known) throw_user_error("input '", v.name, "' has no shape in the model; give it with --input-shape ", v.name, "=DIMS");
    // A dim bound by its symbol's name takes the value; the others stay open (-1, with their
    // symbol): the model is compiled once for every value they take at run time.
    for (size_t i = 0; i < v.type.dims.size(); ++i) {
      if (v.type.dims[i] >= 0) continue;
      std::string symbol = i < v.type.symbols.size() ? v.type.symbols[i] : "";
      auto bound = symbol.empty() ? shapes.end() : shapes.find(symbol);
      if (bound != shapes.end() && bound->second.size() == 1) {
        if (bound->second[0] < 0) throw_user_error("dimension '", symbol, "' is given a negative value");
        v.type.dims[i] = bound->second[0];
      }
    }
  }
  for (ValueId id : graph.inputs) {
    const Value& v = graph.value(id);
    // Before any backend sees the shape: a backend's own limits would give a less clear error.
    if (v.type.is_static()) check_tensor_size("input '" + v.name + "'", v.type.dims, v.type.dtype);
  }
}

}  // namespace tessera
