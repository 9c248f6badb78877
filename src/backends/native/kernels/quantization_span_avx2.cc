// The quantize span (QuantizeSpans in quantization_internal.h) compiled for
// AVX2 (flags from the file name; see CMakeLists.txt). Chosen at run time
// from CPU features in quantization.cc.
#include "backends/native/kernels/quantization_internal.h"

namespace tessera::native {
namespace {

#include "backends/native/kernels/quantization_span_body.h"

}  // namespace

QuantizeSpans quantize_spans_avx2() { return {quantize_span_uint8, quantize_span_int8, float_range}; }

}  // namespace tessera::native
