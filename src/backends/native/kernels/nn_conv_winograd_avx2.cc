// winograd_conv's transforms (nn_conv_winograd_body.h) compiled with AVX2 and FMA.
#define TESSERA_WINOGRAD_NAMESPACE avx2
#include "backends/native/kernels/nn_conv_winograd_body.h"
