// Saving and loading .tsr files: the file layout (header, manifest, aligned
// blobs), writing it (through safe_file.h), mapping on load, and the checks
// of the header (magic, version, size, checksum, offsets) before the manifest
// is decoded. See artifact.h for the layout.
#include "artifact/artifact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "artifact/artifact_internal.h"
#include "artifact/safe_file.h"
#include "ir/error.h"

namespace tessera {
namespace {

using namespace artifact_internal;

constexpr uint8_t kZeros[kBlobAlignment] = {};

/// The file after the header as a sequence of byte pieces: manifest, padding,
/// blobs with their padding. Walked once to checksum and once to write.
struct FileLayout {
  Header header;
  std::vector<uint8_t> manifest;
  BlobTable blobs;

  void for_each_piece_after_header(const std::function<void(const void*, size_t)>& emit) const {
    emit(manifest.data(), manifest.size());
    uint64_t position = kHeaderSize + manifest.size();
    auto pad_to = [&](uint64_t target) {
      while (position < target) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(target - position, kBlobAlignment));
        emit(kZeros, n);
        position += n;
      }
    };
    for (const BlobTable::Blob& blob : blobs.blobs()) {
      pad_to(header.blob_area_offset + blob.offset);
      emit(blob.data, static_cast<size_t>(blob.size));
      position += blob.size;
    }
    pad_to(header.file_size);
  }
};

[[noreturn]] void fail_load(const std::string& name, const std::string& message) {
  throw_user_error("artifact '", name, "': ", message);
}

void check_header(std::span<const uint8_t> bytes, const std::string& name, Header& header) {
  const size_t size = bytes.size();
  if (size == 0) fail_load(name, "not a Tessera artifact (the file is empty)");
  if (std::memcmp(bytes.data(), kMagic, std::min(size, sizeof(kMagic))) != 0) {
    fail_load(name, "not a Tessera artifact (it does not start with the TSRARTF magic)");
  }
  if (size < kHeaderSize) {
    fail_load(name, str_cat("truncated: the file has ", size, " bytes, less than the ", kHeaderSize, "-byte header"));
  }
  header = decode_header(bytes.data());
  if (header.version < kOldestArtifactFormatVersion || header.version > kArtifactFormatVersion) {
    fail_load(name, str_cat("was written by format version ", header.version, "; this Tessera reads versions ",
                            kOldestArtifactFormatVersion, " to ", kArtifactFormatVersion));
  }
  if (header.file_size > size) fail_load(name, str_cat("truncated: header says ", header.file_size, " bytes, file has ", size));
  if (header.file_size < size) {
    fail_load(name, str_cat("size mismatch: header says ", header.file_size, " bytes, file has ", size));
  }
  if (artifact_checksum(bytes) != header.checksum) fail_load(name, "corrupted: checksum mismatch");
  // Past the checksum, a bad field means a hostile or buggy writer, not a damaged file.
  if (header.flags != 0) fail_load(name, str_cat("unknown flags 0x", std::hex, header.flags));
  auto check_range = [&](const char* what, uint64_t offset, uint64_t length) {
    if (offset < kHeaderSize || offset > size || length > size - offset) {
      fail_load(name, str_cat(what, " at ", offset, " of ", length, " bytes lies outside the ", size, "-byte file"));
    }
  };
  check_range("manifest", header.manifest_offset, header.manifest_size);
  check_range("blob area", header.blob_area_offset, header.blob_area_size);
  if (header.blob_area_offset % kBlobAlignment != 0) {
    fail_load(name, str_cat("blob area offset ", header.blob_area_offset, " is not 64-byte aligned"));
  }
}

Artifact decode_artifact(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner, const std::string& name) {
  Header header;
  check_header(bytes, name, header);
  ManifestReader reader(bytes.subspan(static_cast<size_t>(header.manifest_offset), static_cast<size_t>(header.manifest_size)),
                        name);
  BlobArea blobs{bytes.subspan(static_cast<size_t>(header.blob_area_offset), static_cast<size_t>(header.blob_area_size)),
                 owner};
  Artifact artifact;
  decode_manifest(reader, blobs, artifact, header.version);
  check_artifact_structure(artifact, name);
  // The compiled bodies' constants and payloads point into the same mapping.
  std::vector<Artifact*> plans{&artifact};
  for (size_t i = 0; i < plans.size(); ++i) {
    plans[i]->mapping = owner;
    for (ArtifactBody& body : plans[i]->bodies) plans.push_back(body.plan.get());
  }
  return artifact;
}

/// Lays the artifact out and computes its checksum; header_bytes gets the final header.
FileLayout lay_out(const Artifact& artifact, uint8_t (&header_bytes)[kHeaderSize]) {
  FileLayout layout;
  layout.manifest = encode_manifest(artifact, layout.blobs);
  Header& header = layout.header;
  header.version = kArtifactFormatVersion;
  header.manifest_offset = kHeaderSize;
  header.manifest_size = layout.manifest.size();
  header.blob_area_offset = align_up(kHeaderSize + layout.manifest.size(), kBlobAlignment);
  header.blob_area_size = layout.blobs.area_size();
  header.file_size = header.blob_area_offset + header.blob_area_size;

  encode_header(header, header_bytes);  // checksum field still zero
  Checksum checksum;
  checksum.update(header_bytes, kHeaderSize);
  layout.for_each_piece_after_header([&](const void* data, size_t size) { checksum.update(data, size); });
  header.checksum = checksum.finish();
  encode_header(header, header_bytes);
  return layout;
}

}  // namespace

void save_artifact(const std::string& path, const Artifact& artifact) {
  uint8_t header_bytes[kHeaderSize];
  const FileLayout layout = lay_out(artifact, header_bytes);
  // Written beside the target and renamed, so `path` is either the old file or the whole new one; only a
  // regular file is replaced, and the temporary file is created safely (see safe_file.h).
  try {
    safe_file::replace_file(path, [&](const safe_file::Sink& sink) {
      sink(header_bytes, kHeaderSize);
      layout.for_each_piece_after_header(sink);
    });
  } catch (const safe_file::WriteError& e) {
    throw_user_error("artifact: ", e.what());
  }
}

std::vector<uint8_t> artifact_bytes(const Artifact& artifact) {
  uint8_t header_bytes[kHeaderSize];
  const FileLayout layout = lay_out(artifact, header_bytes);
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(layout.header.file_size));
  bytes.insert(bytes.end(), header_bytes, header_bytes + kHeaderSize);
  layout.for_each_piece_after_header([&](const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
  });
  return bytes;
}

Artifact load_artifact(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_load(path, str_cat("cannot open: ", std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail_load(path, "not a regular file");
  }
  const size_t size = static_cast<size_t>(info.st_size);
  if (size < kHeaderSize) {
    // Too small to map usefully (and mmap refuses 0 bytes): read it for the header checks' message.
    std::vector<uint8_t> bytes(size);
    ssize_t got = size ? ::read(fd, bytes.data(), size) : 0;
    ::close(fd);
    bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return decode_artifact(bytes, nullptr, path);
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_error = errno;
  ::close(fd);
  if (mapped == MAP_FAILED) fail_load(path, str_cat("cannot map: ", std::strerror(map_error)));
  std::shared_ptr<const void> mapping(mapped, [size](const void* data) { ::munmap(const_cast<void*>(data), size); });
  return decode_artifact(std::span<const uint8_t>(static_cast<const uint8_t*>(mapped), size), mapping, path);
}

Artifact load_artifact_from_memory(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep_alive,
                                   const std::string& name) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % kBlobAlignment != 0 && !bytes.empty()) {
    // Kernels expect 64-byte aligned constants; an unaligned buffer is copied once.
    auto copy = std::make_shared<Buffer>(bytes.size(), false);
    std::memcpy(copy->data(), bytes.data(), bytes.size());
    bytes = std::span<const uint8_t>(static_cast<const uint8_t*>(copy->data()), bytes.size());
    keep_alive = std::move(copy);
  }
  return decode_artifact(bytes, std::move(keep_alive), name);
}

bool is_artifact_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[sizeof(kMagic)];
  ssize_t got = ::read(fd, magic, sizeof(magic));
  ::close(fd);
  return got > 0 && is_artifact_bytes(magic, static_cast<size_t>(got));
}

bool is_artifact_bytes(const void* data, size_t size) {
  return size >= sizeof(kMagic) && std::memcmp(data, kMagic, sizeof(kMagic)) == 0;
}

}  // namespace tessera
