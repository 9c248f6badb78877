// The plain reference of LSTM, GRU and RNN: one direction, one batch entry,
// one step, one element at a time, written as the ONNX operator definitions
// state the formulas. The float64 kernel and the tests of the fast path use it.
#include "backends/native/kernels/recurrent_internal.h"

namespace tessera::native {
namespace {

/// Row `row` of a [rows, columns] matrix times vector v.
template <typename T>
T dot_row(const T* matrix, int64_t row, int64_t columns, const T* v) {
  T sum = T(0);
  for (int64_t k = 0; k < columns; ++k) sum += matrix[row * columns + k] * v[k];
  return sum;
}

/// One step of one batch entry: updates h (and c for LSTM) in place.
template <typename T>
void reference_step(const RecurrentConfig& cfg, int64_t d, const T* x, const T* w, const T* r, const T* wb, const T* rb,
                    const T* p, std::vector<T>& h, std::vector<T>& c) {
  const int64_t hidden = cfg.hidden;
  auto x_part = [&](int64_t gate, int64_t j) { return dot_row(w, gate * hidden + j, cfg.input_size, x) + wb[gate * hidden + j]; };
  auto h_part = [&](int64_t gate, int64_t j, const T* hv) { return dot_row(r, gate * hidden + j, hidden, hv) + rb[gate * hidden + j]; };
  std::vector<T> next(static_cast<size_t>(hidden));
  if (cfg.cell == RecurrentCell::kRnn) {
    const Activation& f = cfg.activation(d, 0);
    for (int64_t j = 0; j < hidden; ++j) next[j] = apply_activation(f, clip_value(x_part(0, j) + h_part(0, j, h.data()), cfg.clip));
  } else if (cfg.cell == RecurrentCell::kGru) {
    const Activation& f = cfg.activation(d, 0);
    const Activation& g = cfg.activation(d, 1);
    std::vector<T> z(static_cast<size_t>(hidden)), reset(static_cast<size_t>(hidden)), reset_h(static_cast<size_t>(hidden));
    for (int64_t j = 0; j < hidden; ++j) {
      z[j] = apply_activation(f, clip_value(x_part(0, j) + h_part(0, j, h.data()), cfg.clip));
      reset[j] = apply_activation(f, clip_value(x_part(1, j) + h_part(1, j, h.data()), cfg.clip));
      reset_h[j] = reset[j] * h[j];
    }
    for (int64_t j = 0; j < hidden; ++j) {
      // linear_before_reset: r (.) (H R_h^T + Rb_h); else (r (.) H) R_h^T + Rb_h.
      const T recurrent = cfg.linear_before_reset ? reset[j] * h_part(2, j, h.data()) : h_part(2, j, reset_h.data());
      const T candidate = apply_activation(g, clip_value(x_part(2, j) + recurrent, cfg.clip));
      next[j] = (T(1) - z[j]) * candidate + z[j] * h[j];
    }
  } else {
    const Activation& f = cfg.activation(d, 0);
    const Activation& g = cfg.activation(d, 1);
    const Activation& act_h = cfg.activation(d, 2);
    // Gate order in W, R, B: input, output, forget, cell; peepholes: input, output, forget.
    for (int64_t j = 0; j < hidden; ++j) {
      const T pi = p ? p[j] : T(0), po = p ? p[hidden + j] : T(0), pf = p ? p[2 * hidden + j] : T(0);
      const T in = apply_activation(f, clip_value(x_part(0, j) + h_part(0, j, h.data()) + pi * c[j], cfg.clip));
      T forget = apply_activation(f, clip_value(x_part(2, j) + h_part(2, j, h.data()) + pf * c[j], cfg.clip));
      if (cfg.input_forget) forget = T(1) - in;
      const T cell = apply_activation(g, clip_value(x_part(3, j) + h_part(3, j, h.data()), cfg.clip));
      const T c_next = forget * c[j] + in * cell;
      const T out = apply_activation(f, clip_value(x_part(1, j) + h_part(1, j, h.data()) + po * c_next, cfg.clip));
      next[j] = out * apply_activation(act_h, c_next);
      c[j] = c_next;  // c[j] is read only by element j above, so updating in place is safe
    }
  }
  h = next;
}

}  // namespace

template <typename T>
void reference_recurrent(const RecurrentConfig& cfg, const RecurrentTensors<T>& io) {
  const int64_t hidden = cfg.hidden, gate_rows = cfg.gates * hidden;
  if (io.y) std::fill(io.y, io.y + cfg.seq * cfg.directions * cfg.batch * hidden, T(0));
  const std::vector<T> zero_bias(static_cast<size_t>(2 * gate_rows), T(0));
  for (int64_t d = 0; d < cfg.directions; ++d) {
    const T* w = io.w + d * gate_rows * cfg.input_size;
    const T* r = io.r + d * gate_rows * hidden;
    const T* wb = io.b ? io.b + d * 2 * gate_rows : zero_bias.data();
    const T* rb = wb + gate_rows;
    const T* p = io.peepholes ? io.peepholes + d * 3 * hidden : nullptr;
    for (int64_t b = 0; b < cfg.batch; ++b) {
      std::vector<T> h(static_cast<size_t>(hidden), T(0)), c(static_cast<size_t>(hidden), T(0));
      const int64_t state = cfg.state_offset(d, b);
      if (io.initial_h) std::copy(io.initial_h + state, io.initial_h + state + hidden, h.begin());
      if (io.initial_c) std::copy(io.initial_c + state, io.initial_c + state + hidden, c.begin());
      const int64_t length = io.sequence_lens ? io.sequence_lens[b] : cfg.seq;
      for (int64_t s = 0; s < length; ++s) {
        const int64_t t = cfg.runs_backwards(d) ? length - 1 - s : s;
        reference_step(cfg, d, io.x + cfg.x_row(t, b) * cfg.input_size, w, r, wb, rb, p, h, c);
        if (io.y) std::copy(h.begin(), h.end(), io.y + cfg.y_offset(t, d, b));
      }
      if (io.y_h) std::copy(h.begin(), h.end(), io.y_h + state);
      if (io.y_c) std::copy(c.begin(), c.end(), io.y_c + state);
    }
  }
}

template void reference_recurrent<float>(const RecurrentConfig&, const RecurrentTensors<float>&);
template void reference_recurrent<double>(const RecurrentConfig&, const RecurrentTensors<double>&);

}  // namespace tessera::native
