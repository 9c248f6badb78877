// Internal to the native recurrent kernels (LSTM, GRU, RNN): the layer
// configuration read from a node, the activation functions, the plain
// reference implementation (recurrent_reference.cc, also the float64 path and
// what the tests compare against) and the float32 GEMM-based implementation
// (recurrent_fast.cc).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/kernel.h"

namespace tessera::native {

enum class RecurrentCell { kLstm, kGru, kRnn };

enum class ActivationKind {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus
};

struct Activation {
  ActivationKind kind = ActivationKind::kTanh;
  float alpha = 0.0f;
  float beta = 0.0f;
};

/// Everything about a recurrent node that is fixed by its attributes and input shapes.
struct RecurrentConfig {
  RecurrentCell cell = RecurrentCell::kLstm;
  int64_t gates = 4;       // 4 (LSTM: i o f c), 3 (GRU: z r h), 1 (RNN)
  int64_t directions = 1;  // 2 for bidirectional
  bool reverse = false;    // the only direction runs backwards
  int64_t hidden = 0;
  int64_t seq = 0;
  int64_t batch = 0;
  int64_t input_size = 0;
  int64_t layout = 0;      // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  float clip = 0.0f;       // 0: no clipping
  bool input_forget = false;
  bool linear_before_reset = false;
  /// Per direction: LSTM f g h, GRU f g, RNN f (directions * activations_per_direction).
  std::vector<Activation> activations;

  int64_t activations_per_direction() const { return cell == RecurrentCell::kLstm ? 3 : cell == RecurrentCell::kGru ? 2 : 1; }
  const Activation& activation(int64_t direction, int64_t which) const {
    return activations[static_cast<size_t>(direction * activations_per_direction() + which)];
  }
  /// Whether direction d runs from the last valid step to the first.
  bool runs_backwards(int64_t d) const { return d == 1 || reverse; }
  /// Element offset of step t, batch b in X (row of input_size) or Y's row start (of directions * hidden).
  int64_t x_row(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  /// Offset of (t, d, b) in Y, in elements.
  int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
    return layout == 0 ? ((t * directions + d) * batch + b) * hidden : ((b * seq + t) * directions + d) * hidden;
  }
  /// Offset of (d, b) in initial_h / initial_c / Y_h / Y_c, in elements.
  int64_t state_offset(int64_t d, int64_t b) const {
    return layout == 0 ? (d * batch + b) * hidden : (b * directions + d) * hidden;
  }
};

/// Reads the configuration of a recurrent node from its attributes and the
/// shapes of X and R; user errors (unknown activation, bad shapes) go through ctx.fail.
RecurrentConfig recurrent_config(const KernelContext& ctx, RecurrentCell cell);
/// The same from the node alone and the types of its inputs (for prepare).
RecurrentConfig recurrent_config(const Node& node, RecurrentCell cell, const Shape& x_shape, const Shape& r_shape);

template <typename T>
T clip_value(T v, float clip) {
  return clip > 0.0f ? std::min<T>(std::max<T>(v, T(-clip)), T(clip)) : v;
}

/// One activation function at one point, as the ONNX operator definitions give it.
template <typename T>
T apply_activation(const Activation& a, T x) {
  switch (a.kind) {
    case ActivationKind::kRelu: return x > T(0) ? x : T(0);
    case ActivationKind::kTanh: return std::tanh(x);
    case ActivationKind::kSigmoid: return T(1) / (T(1) + std::exp(-x));
    case ActivationKind::kAffine: return T(a.alpha) * x + T(a.beta);
    case ActivationKind::kLeakyRelu: return x < T(0) ? T(a.alpha) * x : x;
    case ActivationKind::kThresholdedRelu: return x > T(a.alpha) ? x : T(0);
    case ActivationKind::kScaledTanh: return T(a.alpha) * std::tanh(T(a.beta) * x);
    case ActivationKind::kHardSigmoid: return std::max(T(0), std::min(T(1), T(a.alpha) * x + T(a.beta)));
    case ActivationKind::kElu: return x < T(0) ? T(a.alpha) * (std::exp(x) - T(1)) : x;
    case ActivationKind::kSoftsign: return x / (T(1) + std::abs(x));
    case ActivationKind::kSoftplus: return x > T(20) ? x : std::log1p(std::exp(x));
  }
  return x;
}

/// The inputs and outputs of one run. Absent optional inputs are null;
/// absent outputs are null (the implementations then skip them).
template <typename T>
struct RecurrentTensors {
  const T* x = nullptr;
  const T* w = nullptr;  // [directions, gates*hidden, input_size]
  const T* r = nullptr;  // [directions, gates*hidden, hidden]
  const T* b = nullptr;  // [directions, 2*gates*hidden]
  const int32_t* sequence_lens = nullptr;  // [batch]
  const T* initial_h = nullptr;
  const T* initial_c = nullptr;
  const T* peepholes = nullptr;  // [directions, 3*hidden]: i o f
  T* y = nullptr;
  T* y_h = nullptr;
  T* y_c = nullptr;
};

/// Straight loops over directions, batches and steps: the ONNX formulas one
/// element at a time. Writes every element of the outputs it is given.
template <typename T>
void reference_recurrent(const RecurrentConfig& config, const RecurrentTensors<T>& io);

/// W and R of each direction packed (transposed) for gemm_f32; built in the
/// kernel's prepare hook when W and R are constants.
struct PackedRecurrentWeights;

/// The float32 implementation: X * W^T for all steps in one GEMM per
/// direction, then H * R^T per step. `packed` may be null (packs per call).
void fast_recurrent_f32(const RecurrentConfig& config, const RecurrentTensors<float>& io,
                        const PackedRecurrentWeights* packed, ThreadPool* pool);

/// Packs W and R (float32, [directions, gates*hidden, columns]) for fast_recurrent_f32.
std::shared_ptr<PackedRecurrentWeights> pack_recurrent_weights(const RecurrentConfig& config, const float* w, const float* r);

}  // namespace tessera::native
