// winograd_conv's transforms (nn_conv_winograd_body.h) compiled with AVX-512.
#define TESSERA_WINOGRAD_NAMESPACE avx512
#include "backends/native/kernels/nn_conv_winograd_body.h"
