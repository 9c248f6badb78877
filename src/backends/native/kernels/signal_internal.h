// Internal to the signal kernel family: the kernels defined in signal_*.cc,
// registered in signal.cc.
#pragma once
#include "backends/native/kernel.h"

namespace tessera::native {

// signal_vision.cc
void non_max_suppression_kernel(KernelContext& ctx);
void roi_align_kernel(KernelContext& ctx);
void grid_sample_kernel(KernelContext& ctx);

// signal_spectral.cc
void hann_window_kernel(KernelContext& ctx);
void hamming_window_kernel(KernelContext& ctx);
void blackman_window_kernel(KernelContext& ctx);
void dft_kernel(KernelContext& ctx);
void stft_kernel(KernelContext& ctx);
void mel_weight_matrix_kernel(KernelContext& ctx);

// signal_random.cc
void random_uniform_kernel(KernelContext& ctx);
void random_normal_kernel(KernelContext& ctx);
void bernoulli_kernel(KernelContext& ctx);

}  // namespace tessera::native
