// JSON and binary inference bodies (http_codec.h).
#include "http_codec.h"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "ir/dtype.h"  // half_to_float, bfloat16_to_float (src/ir/dtype.cc is compiled into this target)

namespace tessera::serve {

using nlohmann::json;

namespace {

/// Appends every leaf of a nested array, depth first (row-major).
void flatten(const json& data, std::vector<const json*>& out, int depth = 0) {
  if (depth > 64) invalid_argument("data is nested more than 64 levels deep");
  if (data.is_array()) {
    for (const json& item : data) flatten(item, out, depth + 1);
  } else {
    out.push_back(&data);
  }
}

template <typename T>
void put(std::string& bytes, size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

/// One JSON element as the datatype's bytes, refusing a value of another kind or out of range.
void encode_element(const json& v, const DataType& type, std::string& bytes, size_t i, const std::string& input) {
  auto fail = [&](const char* want) {
    invalid_argument("input '" + input + "': element " + std::to_string(i) + " is " + std::string(v.type_name()) + " " +
        v.dump().substr(0, 40) + ", expected " + want + " for datatype " + type.name);
  };
  const DLDataType dl = type.dl;
  if (std::string(type.name) == "BOOL") {
    if (!v.is_boolean()) fail("true or false");
    bytes[i] = v.get<bool>() ? 1 : 0;
    return;
  }
  if (dl.code == kDLFloat) {
    if (!v.is_number()) fail("a number");
    const double d = v.get<double>();
    if (dl.bits == 32) put<float>(bytes, i, static_cast<float>(d));
    else put<double>(bytes, i, d);
    return;
  }
  // Integers: exact values within the type's range.
  if (!v.is_number_integer()) fail("an integer");
  const bool is_unsigned = dl.code == kDLUInt;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    const uint64_t max = is_unsigned ? (dl.bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << dl.bits) - 1)
                                     : (uint64_t{1} << (dl.bits - 1)) - 1;
    if (u > max) fail("an integer in range");
    switch (dl.bits) {
      case 8: bytes[i] = static_cast<char>(u); break;
      case 16: put<uint16_t>(bytes, i, static_cast<uint16_t>(u)); break;
      case 32: put<uint32_t>(bytes, i, static_cast<uint32_t>(u)); break;
      default: put<uint64_t>(bytes, i, u); break;
    }
    return;
  }
  const int64_t s = v.get<int64_t>();
  if (is_unsigned && s < 0) fail("a non-negative integer");
  if (!is_unsigned && dl.bits < 64) {
    const int64_t lo = -(int64_t{1} << (dl.bits - 1)), hi = (int64_t{1} << (dl.bits - 1)) - 1;
    if (s < lo || s > hi) fail("an integer in range");
  }
  if (is_unsigned && dl.bits < 64 && static_cast<uint64_t>(s) > (uint64_t{1} << dl.bits) - 1) fail("an integer in range");
  switch (dl.bits) {
    case 8: bytes[i] = static_cast<char>(s); break;
    case 16: put<int16_t>(bytes, i, static_cast<int16_t>(s)); break;
    case 32: put<int32_t>(bytes, i, static_cast<int32_t>(s)); break;
    default: put<int64_t>(bytes, i, s); break;
  }
}

/// A tensor's elements as JSON numbers, booleans or strings (FP16 and BF16 widened to float).
json decode_data(const Tensor& t) {
  json data = json::array();
  const int64_t n = element_count(t.shape);
  if (t.type->element_bytes == 0) {
    for (const std::string& s : t.strings) data.push_back(s);
    return data;
  }
  const DLDataType dl = t.type->dl;
  const char* p = t.data;
  auto get = [&](auto zero, int64_t i) {
    decltype(zero) v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(v)), sizeof(v));
    return v;
  };
  auto& array = data.get_ref<json::array_t&>();
  array.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (std::string(t.type->name) == "BOOL") array.emplace_back(p[i] != 0);
    else if (dl.code == kDLFloat && dl.bits == 32) array.emplace_back(get(float{}, i));
    else if (dl.code == kDLFloat && dl.bits == 64) array.emplace_back(get(double{}, i));
    else if (dl.code == kDLFloat && dl.bits == 16) array.emplace_back(tessera::half_to_float(get(uint16_t{}, i)));
    else if (dl.code == kDLBfloat) array.emplace_back(tessera::bfloat16_to_float(get(uint16_t{}, i)));
    else if (dl.code == kDLUInt) {
      switch (dl.bits) {
        case 8: array.emplace_back(static_cast<uint8_t>(p[i])); break;
        case 16: array.emplace_back(get(uint16_t{}, i)); break;
        case 32: array.emplace_back(get(uint32_t{}, i)); break;
        default: array.emplace_back(get(uint64_t{}, i)); break;
      }
    } else {
      switch (dl.bits) {
        case 8: array.emplace_back(static_cast<int8_t>(p[i])); break;
        case 16: array.emplace_back(get(int16_t{}, i)); break;
        case 32: array.emplace_back(get(int32_t{}, i)); break;
        default: array.emplace_back(get(int64_t{}, i)); break;
      }
    }
  }
  return data;
}

constexpr int64_t kMaxElements = int64_t{1} << 40;

std::vector<int64_t> parse_shape(const json& shape, const std::string& input) {
  if (!shape.is_array()) invalid_argument("input '" + input + "': 'shape' must be an array of integers");
  if (shape.size() > 32) invalid_argument("input '" + input + "': 'shape' has more than 32 dims");
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) invalid_argument("input '" + input + "': 'shape' must hold integers 0 or more");
    dims.push_back(d.get<int64_t>());
    if (dims.back() != 0 && n > kMaxElements / dims.back()) invalid_argument("input '" + input + "': shape " + shape.dump() + " is too large");
    n *= dims.back();
  }
  return dims;
}

}  // namespace

InferRequest parse_infer_request(std::shared_ptr<const std::string> storage, size_t start,
                                 std::optional<size_t> header_length) {
  const std::string_view whole(*storage);
  const std::string_view body_view = whole.substr(std::min(start, whole.size()));
  const std::string_view* body = &body_view;
  const size_t json_bytes = header_length ? *header_length : body->size();
  if (json_bytes > body->size()) {
    invalid_argument("Inference-Header-Content-Length is " + std::to_string(json_bytes) + " but the body has " +
        std::to_string(body->size()) + " bytes");
  }
  json request;
  try {
    request = json::parse(body->data(), body->data() + json_bytes);
  } catch (const json::exception& e) {
    invalid_argument(std::string("the request is not valid JSON: ") + e.what());
  }
  if (!request.is_object()) invalid_argument("the request must be a JSON object");
  InferRequest out;
  try {
    if (request.contains("id")) {
      if (!request["id"].is_string()) invalid_argument("'id' must be a string");
      out.id = request["id"].get<std::string>();
    }
    if (request.contains("parameters")) {
      const json& p = request["parameters"];
      if (!p.is_object()) invalid_argument("'parameters' must be an object");
      if (p.contains("binary_data_output")) {
        if (!p["binary_data_output"].is_boolean()) invalid_argument("parameter 'binary_data_output' must be true or false");
        out.binary_outputs = p["binary_data_output"].get<bool>();
      }
      if (p.contains("timeout")) {
        if (!p["timeout"].is_number_unsigned()) invalid_argument("parameter 'timeout' must be microseconds, an integer 0 or more");
        out.timeout_us = p["timeout"].get<uint64_t>();
      }
    }
    if (!request.contains("inputs") || !request["inputs"].is_array()) invalid_argument("'inputs' must be an array");
    size_t offset = json_bytes;  // where the next binary tensor starts
    for (const json& in : request["inputs"]) {
      if (!in.is_object()) invalid_argument("each input must be a JSON object");
      if (!in.contains("name") || !in["name"].is_string()) invalid_argument("an input has no 'name' string");
      Tensor t;
      t.name = in["name"].get<std::string>();
      if (!in.contains("datatype") || !in["datatype"].is_string()) invalid_argument("input '" + t.name + "' has no 'datatype' string");
      t.type = data_type_named(in["datatype"].get<std::string>());
      if (!t.type) invalid_argument("input '" + t.name + "': unknown datatype '" + in["datatype"].get<std::string>() + "'");
      if (!in.contains("shape")) invalid_argument("input '" + t.name + "' has no 'shape'");
      t.shape = parse_shape(in["shape"], t.name);
      const int64_t n = element_count(t.shape);
      std::optional<uint64_t> binary_size;
      if (in.contains("parameters")) {
        const json& p = in["parameters"];
        if (!p.is_object()) invalid_argument("input '" + t.name + "': 'parameters' must be an object");
        if (p.contains("binary_data_size")) {
          if (!p["binary_data_size"].is_number_unsigned()) invalid_argument("input '" + t.name + "': binary_data_size must be an integer 0 or more");
          binary_size = p["binary_data_size"].get<uint64_t>();
        }
      }
      if (binary_size) {
        if (!header_length) invalid_argument("input '" + t.name + "' has binary data but the request has no Inference-Header-Content-Length");
        if (in.contains("data")) invalid_argument("input '" + t.name + "' has both binary_data_size and 'data'");
        if (*binary_size > body->size() - offset) {
          invalid_argument("input '" + t.name + "': binary_data_size " + std::to_string(*binary_size) + " runs past the body's end (" +
              std::to_string(body->size() - offset) + " bytes left)");
        }
        const char* p = body->data() + offset;
        const size_t size = static_cast<size_t>(*binary_size);
        offset += size;
        if (t.type->element_bytes == 0) {
          t.strings = split_bytes_elements(p, size, t.name);
          if (static_cast<int64_t>(t.strings.size()) != n) {
            invalid_argument("input '" + t.name + "' has " + std::to_string(t.strings.size()) + " BYTES elements; shape " +
                shape_text(t.shape) + " needs " + std::to_string(n));
          }
        } else {
          if (size != static_cast<size_t>(n) * t.type->element_bytes) {
            invalid_argument("input '" + t.name + "': binary_data_size is " + std::to_string(size) + " bytes; " + t.type->name + " of shape " +
                shape_text(t.shape) + " needs " + std::to_string(static_cast<size_t>(n) * t.type->element_bytes));
          }
          t.storage = storage;
          t.data = p;
          t.bytes = size;
        }
      } else {
        if (!in.contains("data")) invalid_argument("input '" + t.name + "' has no 'data' (nor binary_data_size)");
        if (t.type->dl.bits == 16 && (t.type->dl.code == kDLFloat || t.type->dl.code == kDLBfloat)) {
          invalid_argument("input '" + t.name + "': " + t.type->name + " has no JSON form; send it as binary data");
        }
        std::vector<const json*> leaves;
        flatten(in["data"], leaves);
        if (static_cast<int64_t>(leaves.size()) != n) {
          invalid_argument("input '" + t.name + "' has " + std::to_string(leaves.size()) + " elements; shape " + shape_text(t.shape) +
              " needs " + std::to_string(n));
        }
        if (t.type->element_bytes == 0) {
          for (const json* v : leaves) {
            if (!v->is_string()) invalid_argument("input '" + t.name + "': BYTES elements must be strings");
            t.strings.push_back(v->get<std::string>());
          }
        } else {
          std::string bytes(static_cast<size_t>(n) * t.type->element_bytes, '\0');
          for (size_t i = 0; i < leaves.size(); ++i) encode_element(*leaves[i], *t.type, bytes, i, t.name);
          own_bytes(t, std::move(bytes));
        }
      }
      out.inputs.push_back(std::move(t));
    }
    if (offset != body->size()) {
      invalid_argument("the body has " + std::to_string(body->size() - offset) + " bytes after the JSON header and binary inputs");
    }
    if (request.contains("outputs")) {
      if (!request["outputs"].is_array()) invalid_argument("'outputs' must be an array");
      for (const json& o : request["outputs"]) {
        if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) invalid_argument("each requested output needs a 'name' string");
        RequestedOutput r{o["name"].get<std::string>(), false};
        if (o.contains("parameters")) {
          const json& p = o["parameters"];
          if (!p.is_object()) invalid_argument("output '" + r.name + "': 'parameters' must be an object");
          if (p.contains("classification")) {
            throw ServeError(ErrorKind::kUnsupported, "output '" + r.name + "': the classification extension is not supported");
          }
          if (p.contains("binary_data")) {
            if (!p["binary_data"].is_boolean()) invalid_argument("output '" + r.name + "': binary_data must be true or false");
            r.binary = p["binary_data"].get<bool>();
          }
        }
        out.outputs.push_back(std::move(r));
      }
    }
  } catch (const json::exception& e) {
    invalid_argument(std::string("malformed request: ") + e.what());
  }
  return out;
}

HttpBody write_infer_response(const InferResponse& response) {
  json out;
  out["model_name"] = response.model_name;
  out["model_version"] = response.model_version;
  if (!response.id.empty()) out["id"] = response.id;
  out["outputs"] = json::array();
  std::vector<const Tensor*> binary;
  size_t binary_bytes = 0;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    json o;
    o["name"] = t.name;
    o["datatype"] = t.type->name;
    o["shape"] = t.shape;
    const bool as_binary = i < response.binary.size() && response.binary[i];
    if (as_binary) {
      size_t size = t.bytes;
      if (t.type->element_bytes == 0) {
        size = 0;
        for (const std::string& s : t.strings) size += 4 + s.size();
      }
      o["parameters"]["binary_data_size"] = size;
      binary.push_back(&t);
      binary_bytes += size;
    } else {
      o["data"] = decode_data(t);
    }
    out["outputs"].push_back(std::move(o));
  }
  HttpBody body;
  body.body = out.dump(-1, ' ', false, json::error_handler_t::replace);
  if (binary.empty()) {
    body.content_type = "application/json";
    return body;
  }
  body.header_length = body.body.size();
  body.content_type = "application/octet-stream";
  body.body.reserve(body.body.size() + binary_bytes);
  for (const Tensor* t : binary) {
    if (t->type->element_bytes == 0) {
      body.body.append(join_bytes_elements(t->strings));
    } else {
      body.body.append(t->data, t->bytes);
    }
  }
  return body;
}

std::string error_json(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tessera::serve
