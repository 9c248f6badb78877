#include "passes/bind_input_values.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "ir/error.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

/// `text` as one element of `dtype`, or a user error naming the input.
Tensor parse_value(const std::string& input, DType dtype, const Shape& shape, const std::string& text) {
  auto bad = [&](const char* why) {
    throw_user_error("input_values: input '", input, "' (", dtype_name(dtype), "): '", text, "' ", why);
  };
  Tensor t(dtype, shape);
  if (text.empty() || text.find('\0') != std::string::npos) bad("is not a value");
  if (dtype == DType::kBool) {
    if (text == "1" || text == "true" || text == "True") *static_cast<uint8_t*>(t.data()) = 1;
    else if (text == "0" || text == "false" || text == "False") *static_cast<uint8_t*>(t.data()) = 0;
    else bad("is not a bool (1, 0, true or false)");
    return t;
  }
  if (dtype_is_integer(dtype)) {
    errno = 0;
    char* end = nullptr;
    int64_t low = 0, high = 0;
    switch (dtype) {
      case DType::kInt8: low = INT8_MIN, high = INT8_MAX; break;
      case DType::kInt16: low = INT16_MIN, high = INT16_MAX; break;
      case DType::kInt32: low = INT32_MIN, high = INT32_MAX; break;
      case DType::kInt64: low = INT64_MIN, high = INT64_MAX; break;
      case DType::kUInt8: high = UINT8_MAX; break;
      case DType::kUInt16: high = UINT16_MAX; break;
      case DType::kUInt32: high = UINT32_MAX; break;
      default: high = INT64_MAX; break;  // uint64: values up to INT64_MAX
    }
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE) bad("is not a whole number");
    if (v < low || v > high) bad("is out of the dtype's range");
    const size_t size = dtype_size(dtype);
    const uint64_t bits = static_cast<uint64_t>(v);
    std::memcpy(t.data(), &bits, size);  // little-endian: the low bytes
    return t;
  }
  if (dtype_is_float(dtype)) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || errno == ERANGE) bad("is not a number");
    if (dtype == DType::kFloat64) *static_cast<double*>(t.data()) = v;
    else if (dtype == DType::kFloat32) *static_cast<float*>(t.data()) = static_cast<float>(v);
    else if (dtype == DType::kFloat16) *static_cast<uint16_t*>(t.data()) = float_to_half(static_cast<float>(v));
    else *static_cast<uint16_t*>(t.data()) = float_to_bfloat16(static_cast<float>(v));
    return t;
  }
  bad("cannot be fixed: only numeric and bool inputs take a value");
  return t;
}

std::map<std::string, std::string> parse_metadata(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t eq = line.rfind('=');
    if (eq == std::string::npos || eq == 0) throw_user_error(kInputValuesMetadata, ": '", line, "' is not NAME=VALUE");
    values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

/// (input index, value) for each of `values`; user errors name what does not fit.
std::vector<std::pair<size_t, Tensor>> resolve(const Graph& graph, const std::map<std::string, std::string>& values) {
  std::vector<std::pair<size_t, Tensor>> out;
  for (const auto& [name, text] : values) {
    size_t index = graph.inputs.size();
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      if (graph.value(graph.inputs[i]).name == name) index = i;
    }
    if (index == graph.inputs.size()) {
      std::string names;
      for (ValueId id : graph.inputs) names += (names.empty() ? "" : ", ") + graph.value(id).name;
      throw_user_error("input_values: the model has no input '", name, "' (its inputs: ", names, ")");
    }
    const TensorType& type = graph.value(graph.inputs[index]).type;
    if (!type.is_tensor() || !type.is_static() || shape_numel(type.dims) != 1) {
      throw_user_error("input_values: input '", name, "' is ", type.to_string(),
                       ": only an input of one element (fix its shape first) takes a value");
    }
    out.emplace_back(index, parse_value(name, type.dtype, type.dims, text));
  }
  return out;
}

}  // namespace

void bind_input_values(Graph& graph, const std::map<std::string, std::string>& values) {
  if (values.empty()) return;
  std::string record;
  for (auto& [index, value] : resolve(graph, values)) {
    const ValueId input = graph.inputs[index];
    const std::string name = graph.value(input).name;
    const ValueId constant = graph.add_constant(graph.unique_value_name(name + "/fixed"), value);
    for (Node& node : graph.nodes) {
      for (ValueId& id : node.inputs) {
        if (id == input) id = constant;
      }
    }
    record += name + "=" + values.at(name) + "\n";
  }
  graph.metadata[kInputValuesMetadata] = record;
}

std::vector<std::pair<size_t, Tensor>> bound_input_values(const Graph& graph) {
  const auto found = graph.metadata.find(kInputValuesMetadata);
  if (found == graph.metadata.end()) return {};
  return resolve(graph, parse_metadata(found->second));
}

}  // namespace tessera
