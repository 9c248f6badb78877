// Lifts the raw_data of the main graph's initializers out of a serialized
// ModelProto before protobuf parses it, so that the weights are copied once,
// from the file mapping into their tensors, instead of first into a
// protobuf-owned std::string per initializer (for a 650 MB decoder that was
// 160K page faults of fresh memory at session creation). Works on the
// protobuf wire format only; anything it does not recognise leaves the model
// to the plain parse.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::onnx_frontend {

struct LiftedRawData {
  /// The model's bytes with every raw_data field of the main graph's initializers removed; empty
  /// when nothing was lifted (parse the original).
  std::string stripped;
  /// Per main-graph initializer, in the order protobuf lists them: its raw_data in the original
  /// bytes (the last one where a tensor repeats the field, as protobuf keeps), or a null view where
  /// it had none.
  std::vector<std::string_view> raw_data;
  /// Whether initializer i had a raw_data field (an empty one included).
  std::vector<bool> had_raw_data;
};

/// Fills `out` and returns true when the bytes are a well-formed ModelProto with at least one lifted
/// field; false (out untouched) otherwise, including malformed input: the caller's parse reports it.
bool lift_initializer_raw_data(const char* data, size_t size, LiftedRawData* out);

}  // namespace tessera::onnx_frontend
