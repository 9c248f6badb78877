// The oneDNN payload: the lowered program (slots with their data types and
// layouts as format tags, steps with their parameters and post-ops), in a small
// little-endian encoding. Parsing checks every count and length against the
// bytes that are there; what the values mean is checked when the program
// is loaded against its region graph.
#include <cstring>

#include "backends/dnnl/dnnl_internal.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'R', 'D', 'N', 'N', 'L', '3'};

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put<T>(x);
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    if (bytes_.size() - pos_ < sizeof(T)) throw_user_error("oneDNN payload: truncated at byte ", pos_);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  /// A count of items of at least `item_bytes` each, checked against what is left.
  size_t count(size_t item_bytes) {
    const uint32_t n = get<uint32_t>();
    if (item_bytes && n > (bytes_.size() - pos_) / item_bytes) {
      throw_user_error("oneDNN payload: count ", n, " at byte ", pos_ - 4, " exceeds the payload");
    }
    return n;
  }
  template <typename T>
  std::vector<T> get_vector() {
    std::vector<T> v(count(sizeof(T)));
    for (T& x : v) x = get<T>();
    return v;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> serialize_program(const Program& program) {
  Writer w;
  for (char c : kMagic) w.put<char>(c);
  w.put<uint32_t>(static_cast<uint32_t>(program.slots.size()));
  for (const Slot& s : program.slots) {
    w.put<uint8_t>(static_cast<uint8_t>(s.kind));
    w.put<int32_t>(s.value);
    w.put_vector<int64_t>(s.dims);
    w.put<int32_t>(s.format_tag);
    w.put<uint8_t>(static_cast<uint8_t>(s.type));
    w.put<uint8_t>(static_cast<uint8_t>(s.transform));
    w.put_vector<int32_t>(s.sources);
    w.put_vector<float>(s.floats);
  }
  w.put<uint32_t>(static_cast<uint32_t>(program.steps.size()));
  for (const Step& s : program.steps) {
    w.put<uint8_t>(static_cast<uint8_t>(s.kind));
    w.put<int32_t>(s.node);
    w.put_vector<int32_t>(s.inputs);
    w.put<int32_t>(s.output);
    w.put<int32_t>(s.algorithm);
    w.put_vector<int64_t>(s.ints);
    w.put_vector<float>(s.floats);
    w.put<uint32_t>(static_cast<uint32_t>(s.post_ops.size()));
    for (const PostOp& p : s.post_ops) {
      w.put<uint8_t>(static_cast<uint8_t>(p.kind));
      w.put<int32_t>(p.algorithm);
      w.put<float>(p.alpha);
      w.put<float>(p.beta);
      w.put<int32_t>(p.slot);
    }
    w.put<uint32_t>(s.any_roles);
    w.put_vector<float>(s.output_scales);
    w.put<int32_t>(s.scale_mask);
    w.put<int32_t>(s.src_zero_point);
    w.put<int32_t>(s.dst_zero_point);
    w.put<int32_t>(s.weights_zero_point);
  }
  return std::move(w.bytes);
}

Program parse_program(std::span<const uint8_t> payload) {
  Reader r(payload);
  for (char c : kMagic) {
    if (r.get<char>() != c) throw_user_error("oneDNN payload: bad magic (not a oneDNN region payload)");
  }
  Program program;
  program.slots.resize(r.count(15));
  for (Slot& s : program.slots) {
    const uint8_t kind = r.get<uint8_t>();
    if (kind < 1 || kind > 4) throw_user_error("oneDNN payload: slot kind ", int{kind}, " is unknown");
    s.kind = static_cast<Slot::Kind>(kind);
    s.value = r.get<int32_t>();
    s.dims = r.get_vector<int64_t>();
    s.format_tag = r.get<int32_t>();
    const uint8_t type = r.get<uint8_t>();
    if (type > static_cast<uint8_t>(SlotType::kInt8)) throw_user_error("oneDNN payload: slot data type ", int{type}, " is unknown");
    s.type = static_cast<SlotType>(type);
    const uint8_t transform = r.get<uint8_t>();
    if (transform > static_cast<uint8_t>(ConstantTransform::kDeconvolutionWeights)) {
      throw_user_error("oneDNN payload: constant transform ", int{transform}, " is unknown");
    }
    s.transform = static_cast<ConstantTransform>(transform);
    s.sources = r.get_vector<int32_t>();
    s.floats = r.get_vector<float>();
  }
  program.steps.resize(r.count(42));
  for (Step& s : program.steps) {
    const uint8_t kind = r.get<uint8_t>();
    if (kind < static_cast<uint8_t>(StepKind::kReorder) || kind > static_cast<uint8_t>(StepKind::kConcat)) {
      throw_user_error("oneDNN payload: step kind ", int{kind}, " is unknown");
    }
    s.kind = static_cast<StepKind>(kind);
    s.node = r.get<int32_t>();
    s.inputs = r.get_vector<int32_t>();
    s.output = r.get<int32_t>();
    s.algorithm = r.get<int32_t>();
    s.ints = r.get_vector<int64_t>();
    s.floats = r.get_vector<float>();
    s.post_ops.resize(r.count(17));
    for (PostOp& p : s.post_ops) {
      const uint8_t pk = r.get<uint8_t>();
      if (pk < 1 || pk > 3) throw_user_error("oneDNN payload: post-op kind ", int{pk}, " is unknown");
      p.kind = static_cast<PostOpKind>(pk);
      p.algorithm = r.get<int32_t>();
      p.alpha = r.get<float>();
      p.beta = r.get<float>();
      p.slot = r.get<int32_t>();
    }
    s.any_roles = r.get<uint32_t>();
    s.output_scales = r.get_vector<float>();
    s.scale_mask = r.get<int32_t>();
    s.src_zero_point = r.get<int32_t>();
    s.dst_zero_point = r.get<int32_t>();
    s.weights_zero_point = r.get<int32_t>();
  }
  if (!r.done()) throw_user_error("oneDNN payload: unexpected bytes after the program");
  return program;
}

}  // namespace tessera::dnnl_backend
