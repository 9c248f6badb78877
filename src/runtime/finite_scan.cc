// NaN/Inf detection by exponent bits: a value is not finite when its exponent
// field is all ones, i.e. when its bits without the sign are at least those
// of +Inf. A block costs a load, an and, a compare and an or per element,
// vectorised; memory bandwidth bounds it.
#include "runtime/finite_scan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tessera {
namespace {

constexpr int64_t kBlock = 4096;  // elements between early exits

/// `Bits` is the signed integer of the float's width: the magnitude (sign bit
/// cleared) is non-negative, so one signed compare per element, OR-ed into a
/// flag, finds it (SSE2's pand/pcmpgt/por at the baseline ISA).
template <typename Bits>
bool all_below(const void* data, int64_t count, Bits magnitude_mask, Bits infinity) {
  const auto* bits = static_cast<const Bits*>(data);
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t end = std::min(count, start + kBlock);
    Bits found = 0;
    for (int64_t i = start; i < end; ++i) found |= static_cast<Bits>(static_cast<Bits>(bits[i] & magnitude_mask) >= infinity);
    if (found) return false;
  }
  return true;
}

}  // namespace

bool all_finite(const TensorView& view) {
  if (!view.data) return true;
  const int64_t count = view.numel();
  switch (view.dtype) {
    case DType::kFloat32:
      return all_below<int32_t>(view.data, count, 0x7fffffff, 0x7f800000);
    case DType::kFloat64:
      return all_below<int64_t>(view.data, count, 0x7fffffffffffffffll, 0x7ff0000000000000ll);
    case DType::kFloat16:
      return all_below<int16_t>(view.data, count, 0x7fff, 0x7c00);
    case DType::kBFloat16:
      return all_below<int16_t>(view.data, count, 0x7fff, 0x7f80);
    default:
      return true;
  }
}

}  // namespace tessera
