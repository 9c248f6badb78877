// The artifact's low-level encodings: header fields, the whole-file checksum,
// the manifest's varint byte writer and its bounds-checked reader, and the
// blob table that places blobs at aligned offsets.
#include <algorithm>
#include <bit>
#include <cstring>

#include "artifact/artifact_internal.h"
#include "ir/error.h"

namespace tessera::artifact_internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the artifact stores tensors as raw little-endian bytes and maps them in place");

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kScramblePrime = 0x9E3779B1ull;
constexpr size_t kStripeBytes = 64;
constexpr size_t kStripesPerBlock = 16;
constexpr uint64_t kLaneKeys[8] = {0xBE4BA423396CFEB8ull, 0x1CAD21F72C81017Cull, 0xDB979083E96DD4DEull,
                                   0x1F67B3B7A4A44072ull, 0x78E5C0CC4EE679CBull, 0x2172FFCC7DD05A82ull,
                                   0x8E2443F7744608B8ull, 0x4C263A81E69035E0ull};

inline uint64_t load64(const uint8_t* p) {
  uint64_t value;
  std::memcpy(&value, p, 8);
  return value;
}

// Plain loops over fixed-size arrays: the compiler turns the 32x32-bit
// multiplies of all eight lanes into vector instructions.
inline void accumulate(uint64_t* __restrict lanes, const uint8_t* __restrict data, size_t stripes) {
  for (size_t s = 0; s < stripes; ++s, data += kStripeBytes) {
    for (size_t i = 0; i < 8; ++i) {
      uint64_t word = load64(data + 8 * i);
      uint64_t keyed = word ^ kLaneKeys[i];
      lanes[i] += word + (keyed & 0xFFFFFFFFull) * (keyed >> 32);
    }
  }
}

inline void scramble(uint64_t* lanes) {
  for (size_t i = 0; i < 8; ++i) {
    uint64_t lane = lanes[i];
    lane ^= lane >> 47;
    lane ^= kLaneKeys[i];
    lanes[i] = lane * kScramblePrime;
  }
}

inline uint64_t merge_lane(uint64_t hash, uint64_t lane) {
  lane = std::rotl(lane * kPrime2, 31) * kPrime1;
  return (hash ^ lane) * kPrime1 + kPrime4;
}

void put_u32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
void put_u64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint32_t get_u32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}
uint64_t get_u64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

void encode_header(const Header& header, uint8_t* out) {
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out, kMagic, sizeof(kMagic));
  put_u32(out + kVersionOffset, header.version);
  put_u32(out + kFlagsOffset, header.flags);
  put_u64(out + kFileSizeOffset, header.file_size);
  put_u64(out + kManifestOffsetOffset, header.manifest_offset);
  put_u64(out + kManifestSizeOffset, header.manifest_size);
  put_u64(out + kBlobAreaOffsetOffset, header.blob_area_offset);
  put_u64(out + kBlobAreaSizeOffset, header.blob_area_size);
  put_u64(out + kChecksumOffset, header.checksum);
}

Header decode_header(const uint8_t* bytes) {
  Header header;
  header.version = get_u32(bytes + kVersionOffset);
  header.flags = get_u32(bytes + kFlagsOffset);
  header.file_size = get_u64(bytes + kFileSizeOffset);
  header.manifest_offset = get_u64(bytes + kManifestOffsetOffset);
  header.manifest_size = get_u64(bytes + kManifestSizeOffset);
  header.blob_area_offset = get_u64(bytes + kBlobAreaOffsetOffset);
  header.blob_area_size = get_u64(bytes + kBlobAreaSizeOffset);
  header.checksum = get_u64(bytes + kChecksumOffset);
  return header;
}

// ---- checksum ----

void Checksum::mix(const uint8_t* stripes, size_t count) {
  while (count > 0) {
    size_t take = std::min(count, kStripesPerBlock - stripes_in_block_);
    accumulate(lanes_, stripes, take);
    stripes += take * kStripeBytes;
    count -= take;
    stripes_in_block_ += take;
    if (stripes_in_block_ == kStripesPerBlock) {
      scramble(lanes_);
      stripes_in_block_ = 0;
    }
  }
}

void Checksum::update(const void* data, size_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  total_ += size;
  if (pending_size_ > 0) {
    size_t take = std::min(size, kStripeBytes - pending_size_);
    std::memcpy(pending_ + pending_size_, bytes, take);
    pending_size_ += take;
    bytes += take;
    size -= take;
    if (pending_size_ < kStripeBytes) return;
    mix(pending_, 1);
    pending_size_ = 0;
  }
  size_t stripes = size / kStripeBytes;
  mix(bytes, stripes);
  bytes += stripes * kStripeBytes;
  size -= stripes * kStripeBytes;
  std::memcpy(pending_, bytes, size);
  pending_size_ = size;
}

uint64_t Checksum::finish() const {
  Checksum state = *this;
  if (state.pending_size_ > 0) {
    // The zero padding is told apart from real zero bytes by the length below.
    std::memset(state.pending_ + state.pending_size_, 0, kStripeBytes - state.pending_size_);
    state.mix(state.pending_, 1);
  }
  uint64_t hash = total_ * kPrime1;
  for (uint64_t lane : state.lanes_) hash = merge_lane(hash, lane);
  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  hash *= kPrime3;
  hash ^= hash >> 32;
  return hash;
}

uint64_t artifact_checksum(std::span<const uint8_t> file) {
  Checksum checksum;
  if (file.size() < kHeaderSize) {
    checksum.update(file.data(), file.size());
    return checksum.finish();
  }
  uint8_t header[kHeaderSize];
  std::memcpy(header, file.data(), kHeaderSize);
  std::memset(header + kChecksumOffset, 0, 8);
  checksum.update(header, kHeaderSize);
  checksum.update(file.data() + kHeaderSize, file.size() - kHeaderSize);
  return checksum.finish();
}

// ---- manifest writer ----

void ManifestWriter::tag(const char (&four)[5]) { raw(four, 4); }

void ManifestWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<uint8_t>(value));
}

void ManifestWriter::signed_varint(int64_t value) {
  // Zigzag, so that small negative numbers (kNoValue, unknown dims) stay one byte.
  varint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
}

void ManifestWriter::f32(float value) {
  uint8_t out[4];
  put_u32(out, std::bit_cast<uint32_t>(value));
  raw(out, 4);
}

void ManifestWriter::string(const std::string& value) {
  if (value.size() > kMaxStringBytes) {
    throw_user_error("cannot save a string of ", value.size(), " bytes in an artifact (the limit is ",
                     kMaxStringBytes, "): '", value.substr(0, 40), "...'");
  }
  varint(value.size());
  raw(value.data(), value.size());
}

void ManifestWriter::raw(const void* data, size_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  bytes_.insert(bytes_.end(), bytes, bytes + size);
}

// ---- manifest reader ----

void ManifestReader::fail(const std::string& message) const {
  throw_user_error("artifact '", name_, "': manifest: ", message, " (at manifest byte ", position_, ")");
}

uint8_t ManifestReader::u8(const char* what) {
  if (remaining() < 1) fail(str_cat("ends while reading ", what));
  return bytes_[position_++];
}

void ManifestReader::expect_tag(const char (&four)[5]) {
  std::span<const uint8_t> got = raw(4, "a section tag");
  if (std::memcmp(got.data(), four, 4) != 0) fail(str_cat("expected section '", four, "'"));
}

bool ManifestReader::next_tag_is(const char (&four)[5]) const {
  return remaining() >= 4 && std::memcmp(bytes_.data() + position_, four, 4) == 0;
}

uint64_t ManifestReader::varint(const char* what) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t byte = u8(what);
    // The tenth byte may only carry the top bit of a 64-bit value.
    if (shift == 63 && byte > 1) fail(str_cat("varint overflow in ", what));
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return value;
  }
  fail(str_cat("varint too long in ", what));
}

int64_t ManifestReader::signed_varint(const char* what) {
  uint64_t zigzag = varint(what);
  return static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
}

float ManifestReader::f32(const char* what) {
  std::span<const uint8_t> bytes = raw(4, what);
  return std::bit_cast<float>(get_u32(bytes.data()));
}

std::string ManifestReader::string(const char* what) {
  uint64_t size = varint(what);
  if (size > kMaxStringBytes) fail(str_cat(what, " is ", size, " bytes long (the limit is ", kMaxStringBytes, ")"));
  std::span<const uint8_t> bytes = raw(static_cast<size_t>(size), what);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

size_t ManifestReader::count(const char* what, size_t min_item_bytes) {
  uint64_t n = varint(what);
  // Checked before anyone reserves memory for n items.
  if (n > remaining() / std::max<size_t>(min_item_bytes, 1)) {
    fail(str_cat(what, " is ", n, ", more than the ", remaining(), " bytes left can hold"));
  }
  return static_cast<size_t>(n);
}

std::span<const uint8_t> ManifestReader::raw(size_t size, const char* what) {
  if (size > remaining()) fail(str_cat("ends while reading ", what, " (", size, " bytes needed, ", remaining(), " left)"));
  std::span<const uint8_t> out = bytes_.subspan(position_, size);
  position_ += size;
  return out;
}

// ---- blob table ----

uint64_t BlobTable::add(const void* data, uint64_t size) {
  if (size == 0) return 0;
  auto key = std::make_pair(data, size);
  auto it = offsets_.find(key);
  if (it != offsets_.end()) return it->second;
  uint64_t offset = align_up(end_, kBlobAlignment);
  blobs_.push_back(Blob{static_cast<const uint8_t*>(data), size, offset});
  offsets_.emplace(key, offset);
  end_ = offset + size;
  return offset;
}

}  // namespace tessera::artifact_internal
