// Internals of the .tsr artifact shared by its files (and its tests): the
// header layout, the checksum, the manifest's byte writer and bounds-checked
// reader, and the manifest encoding of graphs and partitions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "artifact/artifact.h"

namespace tessera::artifact_internal {

inline constexpr char kMagic[8] = {'T', 'S', 'R', 'A', 'R', 'T', 'F', '\0'};
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kBlobAlignment = 64;
// Byte offsets of the header's fields.
inline constexpr size_t kVersionOffset = 8;
inline constexpr size_t kFlagsOffset = 12;
inline constexpr size_t kFileSizeOffset = 16;
inline constexpr size_t kManifestOffsetOffset = 24;
inline constexpr size_t kManifestSizeOffset = 32;
inline constexpr size_t kBlobAreaOffsetOffset = 40;
inline constexpr size_t kBlobAreaSizeOffset = 48;
inline constexpr size_t kChecksumOffset = 56;
/// Subgraph nesting (Loop in If in Loop ...) deeper than this is refused.
inline constexpr int kMaxGraphDepth = 16;
/// Longest string (name, doc string, payload version ...) in a manifest.
inline constexpr uint64_t kMaxStringBytes = uint64_t{1} << 24;

struct Header {
  uint32_t version = 0;
  uint32_t flags = 0;
  uint64_t file_size = 0;
  uint64_t manifest_offset = 0;
  uint64_t manifest_size = 0;
  uint64_t blob_area_offset = 0;
  uint64_t blob_area_size = 0;
  uint64_t checksum = 0;
};

void encode_header(const Header& header, uint8_t* out);  // writes kHeaderSize bytes, magic included
Header decode_header(const uint8_t* bytes);               // reads kHeaderSize bytes, checks nothing

inline uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

/// A 64-bit hash over a stream of bytes fed in any pieces (the result does not
/// depend on how the stream is split). Eight independent 64-bit lanes, one per
/// 8-byte word of each 64-byte stripe, each adding the word and the 32x32-bit
/// product of its halves (xored with a per-lane key), which compilers
/// vectorise; every 16 stripes the lanes are scrambled (xorshift, key,
/// multiply) so that changes cannot cancel across blocks; the tail is
/// zero-padded to a stripe and the length mixed into the finalizer. Built for
/// catching damaged files at memory speed, not for resisting an attacker
/// (who can recompute it anyway). The scheme follows XXH3's accumulator.
class Checksum {
 public:
  void update(const void* data, size_t size);
  uint64_t finish() const;

 private:
  void mix(const uint8_t* stripes, size_t count);
  uint64_t lanes_[8] = {0xC2B2AE3Dull,         0x9E3779B185EBCA87ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                        0x85EBCA77C2B2AE63ull, 0x85EBCA77ull,         0x27D4EB2F165667C5ull, 0x9E3779B1ull};
  uint8_t pending_[64] = {};
  size_t pending_size_ = 0;
  size_t stripes_in_block_ = 0;
  uint64_t total_ = 0;
};

/// The checksum of a whole artifact file with its checksum field read as zero.
uint64_t artifact_checksum(std::span<const uint8_t> file);

// ---- manifest bytes ----

class ManifestWriter {
 public:
  void u8(uint8_t value) { bytes_.push_back(value); }
  void tag(const char (&four)[5]);
  void varint(uint64_t value);
  void signed_varint(int64_t value);
  void f32(float value);
  void string(const std::string& value);
  void raw(const void* data, size_t size);
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

/// Reads what ManifestWriter wrote; every read checks the bytes that remain
/// and throws "artifact '<name>': manifest: ..." when something is wrong.
class ManifestReader {
 public:
  ManifestReader(std::span<const uint8_t> bytes, std::string artifact_name)
      : bytes_(bytes), name_(std::move(artifact_name)) {}
  uint8_t u8(const char* what);
  void expect_tag(const char (&four)[5]);
  /// True when the next four bytes are `four` (nothing is read).
  bool next_tag_is(const char (&four)[5]) const;
  uint64_t varint(const char* what);
  int64_t signed_varint(const char* what);
  float f32(const char* what);
  std::string string(const char* what);
  /// A count of items each at least `min_item_bytes` long, checked against the bytes left.
  size_t count(const char* what, size_t min_item_bytes = 1);
  std::span<const uint8_t> raw(size_t size, const char* what);
  size_t remaining() const { return bytes_.size() - position_; }
  const std::string& artifact_name() const { return name_; }
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::span<const uint8_t> bytes_;
  size_t position_ = 0;
  std::string name_;
};

// ---- blobs ----

/// The blobs of an artifact being saved, each at a 64-byte aligned offset of
/// the blob area; the same (data, size) is stored once.
class BlobTable {
 public:
  struct Blob {
    const uint8_t* data = nullptr;
    uint64_t size = 0;
    uint64_t offset = 0;  // relative to the blob area
  };
  /// Offset of the blob in the blob area (0 for an empty blob, which takes no space).
  uint64_t add(const void* data, uint64_t size);
  const std::vector<Blob>& blobs() const { return blobs_; }
  uint64_t area_size() const { return end_; }

 private:
  std::vector<Blob> blobs_;
  std::map<std::pair<const void*, uint64_t>, uint64_t> offsets_;
  uint64_t end_ = 0;
};

/// The blob area of a loaded artifact: bytes in the mapping and their keep-alive owner.
struct BlobArea {
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
};

// ---- manifest contents ----

std::vector<uint8_t> encode_manifest(const Artifact& artifact, BlobTable& blobs);
/// Decodes the manifest into `artifact` (graph, partition, placement). Checks
/// encoding, ranges and blob references, not the graph's or partition's structure.
void decode_manifest(ManifestReader& reader, const BlobArea& blobs, Artifact& artifact, uint32_t version);

/// Structural checks after decoding: graph invariants (recursively, subgraphs
/// too), nodes against their op schemas (arity, attribute kinds), and the
/// partition against the graph. Throws "artifact '<name>': inconsistent plan: ...".
void check_artifact_structure(const Artifact& artifact, const std::string& name);

}  // namespace tessera::artifact_internal
