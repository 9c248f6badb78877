#include "frontend/onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "ir/error.h"

namespace tessera::onnx_frontend {

DType dtype_from_onnx(int elem_type, const std::string& what) {
  if (elem_type == onnx::TensorProto::UNDEFINED) return DType::kUndefined;
  DType dtype = dtype_from_onnx_code(elem_type);
  if (dtype != DType::kUndefined) return dtype;
  if (elem_type == onnx::TensorProto::COMPLEX64 ||
      elem_type == onnx::TensorProto::COMPLEX128) {
    throw_unsupported("'", what, "' has dtype ", onnx_dtype_code_name(elem_type), ", which is not supported");
  }
  throw_user_error("'", what, "' has ONNX element type ", onnx_dtype_code_name(elem_type), ", which Tessera does not know");
}

namespace {

/// A non-negative decimal integer, or throws naming the tensor and field.
int64_t parse_external_number(const std::string& text, const onnx::TensorProto& proto, const std::string& key) {
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits &= c >= '0' && c <= '9';
  if (!digits) {
    throw_user_error("tensor '", proto.name(), "': external data field '", key, "' is '", text,
                     "', not a non-negative integer");
  }
  return std::stoll(text);
}

/// Closes a descriptor on every path out.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

/// Opens `location` under `base_dir` for reading, one component at a time with
/// O_NOFOLLOW, so that neither the file nor a folder on the way is a symbolic
/// link (which could point anywhere), and without blocking (a FIFO would wait
/// for a writer forever). Only a regular file is accepted. `size` is its size.
int open_inside_folder(const std::string& base_dir, const std::string& location, const onnx::TensorProto& proto,
                       int64_t& size) {
  std::string shown = location;  // a NUL would end the message at the C API
  for (size_t nul = shown.find('\0'); nul != std::string::npos; nul = shown.find('\0', nul)) shown.replace(nul, 1, "\\0");
  auto refuse = [&](const std::string& why) -> void {
    throw_user_error("tensor '", proto.name(), "': external data location '", shown, "' ", why);
  };
  if (shown != location) refuse("contains a NUL character");
  if (!location.empty() && location[0] == '/') refuse("must be relative to the model");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= location.size()) {
    size_t slash = location.find('/', start);
    if (slash == std::string::npos) slash = location.size();
    std::string part = location.substr(start, slash - start);
    if (part == "..") refuse("leaves the model's folder");
    if (!part.empty() && part != ".") parts.push_back(part);
    start = slash + 1;
  }
  if (parts.empty() || location.back() == '/') refuse("does not name a file");
  FileDescriptor dir;
  dir.fd = ::open(base_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd < 0) {
    const int error = errno;
    throw_user_error("tensor '", proto.name(), "': cannot open the model's folder '", base_dir, "': ", std::strerror(error));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    const int fd = ::openat(dir.fd, parts[i].c_str(), flags);
    if (fd < 0) {
      const int error = errno;
      // ELOOP: the component is a symbolic link; ENOTDIR: a folder on the way is a link or a file.
      if (error == ELOOP || error == ENOTDIR) {
        refuse(str_cat("goes through '", parts[i], "', which is a symbolic link or not a folder; only regular files "
                       "inside the model's folder are read"));
      }
      throw_user_error("tensor '", proto.name(), "': cannot open external data file '", location, "': ", std::strerror(error));
    }
    ::close(dir.fd);
    dir.fd = fd;
  }
  struct stat info {};
  if (::fstat(dir.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    refuse(S_ISDIR(info.st_mode) ? "is a folder, not a file" : S_ISFIFO(info.st_mode) ? "is a FIFO, not a regular file"
                                                                                      : "is not a regular file");
  }
  size = static_cast<int64_t>(info.st_size);
  const int fd = dir.fd;
  dir.fd = -1;
  return fd;
}

std::string read_external(const onnx::TensorProto& proto, const std::string& base_dir, size_t expected) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = parse_external_number(entry.value(), proto, entry.key());
    if (entry.key() == "length") length = parse_external_number(entry.value(), proto, entry.key());
  }
  if (location.empty()) throw_user_error("tensor '", proto.name(), "': external data has no location");
  if (base_dir.empty()) throw_user_error("tensor '", proto.name(), "': external data is not allowed here (a model loaded from memory has no folder to read it from)");
  int64_t file_size = 0;
  FileDescriptor file;
  file.fd = open_inside_folder(base_dir, location, proto, file_size);
  if (length < 0) length = offset <= file_size ? file_size - offset : -1;
  if (offset > file_size || length < 0 || length > file_size - offset) {
    throw_user_error("tensor '", proto.name(), "': external data offset ", offset, " and length ", length,
                     " fall outside '", location, "' (", file_size, " bytes)");
  }
  if (static_cast<size_t>(length) != expected) {
    throw_user_error("tensor '", proto.name(), "': external data in '", location, "' has ", length,
                     " bytes from offset ", offset, ", the shape needs ", expected);
  }
  std::string data(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pread(file.fd, data.data() + done, data.size() - done, static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_user_error("tensor '", proto.name(), "': could not read external data from '", location, "'");
    done += static_cast<size_t>(n);
  }
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
  return tensor_from_proto(proto, base_dir, nullptr);
}

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string_view* raw) {
  const bool has_raw = raw != nullptr || proto.has_raw_data();
  const std::string_view raw_data = raw ? *raw : std::string_view(proto.raw_data());
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
  if (dtype == DType::kString) {
    // ONNX keeps strings in string_data only (never raw or external).
    if (proto.data_location() == onnx::TensorProto::EXTERNAL || has_raw) {
      throw_user_error("tensor '", proto.name(), "' is a string tensor with raw or external data; strings belong in string_data");
    }
    if (proto.string_data_size() != count) {
      throw_user_error("tensor '", proto.name(), "' has ", proto.string_data_size(), " strings, its shape ",
                       shape_to_string(shape), " needs ", count);
    }
    Tensor tensor(dtype, shape);
    for (int64_t i = 0; i < count; ++i) tensor.as<std::string>()[i] = proto.string_data(static_cast<int>(i));
    return tensor;
  }
  // Every size is checked against the data actually present before anything
  // is allocated, so a hostile shape cannot make us allocate terabytes.
  const size_t nbytes = static_cast<size_t>(count) * dtype_size(dtype);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string data = read_external(proto, base_dir, nbytes);
    Tensor tensor = Tensor::uninitialized(dtype, shape);  // every byte copied below
    if (nbytes) std::memcpy(tensor.data(), data.data(), nbytes);
    return tensor;
  }
  if (has_raw) {
    if (raw_data.size() != nbytes) {
      throw_user_error("tensor '", proto.name(), "' has ", raw_data.size(), " bytes of raw data, its shape ",
                       shape_to_string(shape), " of ", dtype_name(dtype), " needs ", nbytes);
    }
    Tensor tensor = Tensor::uninitialized(dtype, shape);  // every byte copied below
    if (nbytes) std::memcpy(tensor.data(), raw_data.data(), nbytes);
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
