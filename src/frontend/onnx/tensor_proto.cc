#include "frontend/onnx/tensor_proto.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ir/error.h"

namespace tessera::onnx_frontend {

DType dtype_from_onnx(int elem_type, const std::string& what) {
  if (elem_type == onnx::TensorProto::UNDEFINED) return DType::kUndefined;
  DType dtype = dtype_from_onnx_code(elem_type);
  if (dtype != DType::kUndefined) return dtype;
  if (elem_type == onnx::TensorProto::STRING || elem_type == onnx::TensorProto::COMPLEX64 ||
      elem_type == onnx::TensorProto::COMPLEX128) {
    throw_unsupported("'", what, "' has dtype ", onnx_dtype_code_name(elem_type), ", which is not supported");
  }
  throw_user_error("'", what, "' has ONNX element type ", onnx_dtype_code_name(elem_type), ", which Tessera does not know");
}

namespace {

std::string read_external(const onnx::TensorProto& proto, const std::string& base_dir, size_t expected) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      if (entry.key() == "offset") offset = std::stoll(entry.value());
      if (entry.key() == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      throw_user_error("tensor '", proto.name(), "': external data field '", entry.key(), "' is not a number");
    }
  }
  if (location.empty()) throw_user_error("tensor '", proto.name(), "': external data has no location");
  if (base_dir.empty()) throw_user_error("tensor '", proto.name(), "': external data is not allowed here");
  namespace fs = std::filesystem;
  fs::path rel(location);
  if (rel.is_absolute()) throw_user_error("tensor '", proto.name(), "': external data location '", location, "' must be relative to the model");
  for (const auto& part : rel) {
    if (part == "..") throw_user_error("tensor '", proto.name(), "': external data location '", location, "' leaves the model's folder");
  }
  fs::path path = fs::path(base_dir) / rel;
  std::ifstream file(path, std::ios::binary);
  if (!file) throw_user_error("tensor '", proto.name(), "': cannot open external data file '", path.string(), "'");
  file.seekg(0, std::ios::end);
  int64_t file_size = static_cast<int64_t>(file.tellg());
  if (length < 0) length = file_size - offset;
  if (offset < 0 || length < 0 || offset > file_size || length > file_size - offset) {
    throw_user_error("tensor '", proto.name(), "': external data offset ", offset, " and length ", length,
                     " fall outside '", path.string(), "' (", file_size, " bytes)");
  }
  if (static_cast<size_t>(length) != expected) {
    throw_user_error("tensor '", proto.name(), "': external data in '", path.string(), "' has ", length,
                     " bytes from offset ", offset, ", the shape needs ", expected);
  }
  std::string data(static_cast<size_t>(length), '\0');
  file.seekg(offset);
  file.read(data.data(), length);
  if (!file) throw_user_error("tensor '", proto.name(), "': could not read external data");
  return data;
}

template <typename Src, typename Fn>
void copy_typed(const Src& field, int64_t count, const onnx::TensorProto& proto, Fn&& store) {
  if (field.size() != count) {
    throw_user_error("tensor '", proto.name(), "' has ", field.size(), " values, its shape needs ", count);
  }
  for (int64_t i = 0; i < count; ++i) store(i, field.Get(static_cast<int>(i)));
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir) {
  DType dtype = dtype_from_onnx(proto.data_type(), proto.name());
  if (dtype == DType::kUndefined) throw_user_error("tensor '", proto.name(), "' has no data type");
  Shape shape;
  int64_t count = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) throw_user_error("tensor '", proto.name(), "' has a negative dimension");
    if (d > 0 && count > (int64_t{1} << 40) / d) throw_user_error("tensor '", proto.name(), "' is too large");
    count *= d;
    shape.push_back(d);
  }
  if (proto.has_segment()) throw_unsupported("tensor '", proto.name(), "' is segmented");
  // Every size is checked against the data actually present before anything
  // is allocated, so a hostile shape cannot make us allocate terabytes.
  const size_t nbytes = static_cast<size_t>(count) * dtype_size(dtype);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string data = read_external(proto, base_dir, nbytes);
    Tensor tensor(dtype, shape);
    if (nbytes) std::memcpy(tensor.data(), data.data(), nbytes);
    return tensor;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes) {
      throw_user_error("tensor '", proto.name(), "' has ", proto.raw_data().size(), " bytes of raw data, its shape ",
                       shape_to_string(shape), " of ", dtype_name(dtype), " needs ", nbytes);
    }
    Tensor tensor(dtype, shape);
    if (nbytes) std::memcpy(tensor.data(), proto.raw_data().data(), nbytes);
    return tensor;
  }
  const int64_t present = std::max({proto.float_data_size(), proto.double_data_size(), proto.int32_data_size(),
                                    proto.int64_data_size(), proto.uint64_data_size()});
  if (present != count) {
    throw_user_error("tensor '", proto.name(), "' has ", present, " values, its shape ", shape_to_string(shape),
                     " needs ", count);
  }
  Tensor tensor(dtype, shape);
  auto* bytes = static_cast<uint8_t*>(tensor.data());
  switch (dtype) {
    case DType::kFloat32:
      copy_typed(proto.float_data(), count, proto, [&](int64_t i, float v) { tensor.as<float>()[i] = v; });
      break;
    case DType::kFloat64:
      copy_typed(proto.double_data(), count, proto, [&](int64_t i, double v) { tensor.as<double>()[i] = v; });
      break;
    case DType::kInt64:
      copy_typed(proto.int64_data(), count, proto, [&](int64_t i, int64_t v) { tensor.as<int64_t>()[i] = v; });
      break;
    case DType::kUInt64:
    case DType::kUInt32:
      copy_typed(proto.uint64_data(), count, proto, [&](int64_t i, uint64_t v) {
        if (dtype == DType::kUInt64) tensor.as<uint64_t>()[i] = v;
        else tensor.as<uint32_t>()[i] = static_cast<uint32_t>(v);
      });
      break;
    case DType::kInt32:
      copy_typed(proto.int32_data(), count, proto, [&](int64_t i, int32_t v) { tensor.as<int32_t>()[i] = v; });
      break;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      copy_typed(proto.int32_data(), count, proto, [&](int64_t i, int32_t v) { tensor.as<uint16_t>()[i] = static_cast<uint16_t>(v); });
      break;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      copy_typed(proto.int32_data(), count, proto, [&](int64_t i, int32_t v) {
        bytes[i] = dtype == DType::kBool ? (v != 0) : static_cast<uint8_t>(v);
      });
      break;
    default:
      throw_unsupported("tensor '", proto.name(), "' has an unsupported dtype");
  }
  return tensor;
}

}  // namespace tessera::onnx_frontend
