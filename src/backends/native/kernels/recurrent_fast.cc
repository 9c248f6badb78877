// The float32 LSTM / GRU / RNN. The input projection X * W^T (+ biases) of
// every step is one GEMM per direction, since it does not depend on the
// state; each step then needs only H * R^T (one small GEMM over the batch)
// and the gate arithmetic, done gate-vector at a time so the loops vectorize.
#include "backends/native/kernels/elementwise_internal.h"
#include "backends/native/kernels/nn_internal.h"
#include "backends/native/kernels/recurrent_internal.h"

namespace tessera::native {

struct PackedRecurrentWeights {
  // Per direction, transposed for C = A * B: w[d] is W_d^T (input_size x gate_rows);
  // recurrent[d] is R_d^T over the gates multiplied by H directly (all of
  // them, except GRU's candidate gate when it multiplies r (.) H instead);
  // candidate[d] is R_h^T for that case.
  std::vector<PackedMatrix> w;
  std::vector<PackedMatrix> recurrent;
  std::vector<PackedMatrix> candidate;
};

namespace {

/// Below this many multiply-adds a layer (all directions) runs on one thread (about 80 µs of work).
constexpr int64_t kSmallRecurrentMacs = int64_t{1} << 22;

/// GRU without linear_before_reset multiplies (r (.) H) by R_h, so its candidate
/// gate needs a second product per step.
bool separate_candidate(const RecurrentConfig& cfg) { return cfg.cell == RecurrentCell::kGru && !cfg.linear_before_reset; }

void activate(const Activation& a, float* v, int64_t n, float clip) {
  if (clip > 0.0f) {
    for (int64_t j = 0; j < n; ++j) v[j] = std::min(std::max(v[j], -clip), clip);
  }
  // The switch is outside the loop so each loop is a plain elementwise one. Sigmoid and tanh
  // take the vectorised spans of elementwise_math.h (a few ulps from libm): libm's calls, one
  // element at a time, were over half of a small LSTM's time (hidden 48, batch 3).
  switch (a.kind) {
    case ActivationKind::kSigmoid:
      elementwise::float32_math().sigmoid(v, v, n);
      return;
    case ActivationKind::kTanh:
      elementwise::float32_math().tanh(v, v, n);
      return;
    case ActivationKind::kRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = std::max(v[j], 0.0f);
      return;
    default:
      for (int64_t j = 0; j < n; ++j) v[j] = apply_activation(a, v[j]);
  }
}

/// The state of one direction over the batch, and per-step scratch.
struct StepBuffers {
  std::vector<float> h, c;       // [batch, hidden]
  std::vector<float> recurrent;  // [batch, columns of PackedRecurrentWeights::recurrent]
  std::vector<float> reset_h;    // GRU: r (.) H, [batch, hidden]
  std::vector<float> candidate;  // GRU: (r (.) H) R_h^T, [batch, hidden]
};

/// Gate arithmetic of one batch entry at one step. `gates` holds X W^T + biases
/// on entry (a private copy, overwritten); `rec` holds H R^T.
void lstm_row(const RecurrentConfig& cfg, int64_t d, float* gates, const float* rec, const float* p, float* h, float* c) {
  const int64_t n = cfg.hidden;
  float* in = gates;
  float* out = gates + n;
  float* forget = gates + 2 * n;
  float* cell = gates + 3 * n;
  for (int64_t j = 0; j < 4 * n; ++j) gates[j] += rec[j];
  if (p) {
    for (int64_t j = 0; j < n; ++j) {
      in[j] += p[j] * c[j];
      forget[j] += p[2 * n + j] * c[j];
    }
  }
  const Activation& f = cfg.activation(d, 0);
  activate(f, in, n, cfg.clip);
  if (cfg.input_forget) {
    for (int64_t j = 0; j < n; ++j) forget[j] = 1.0f - in[j];
  } else {
    activate(f, forget, n, cfg.clip);
  }
  activate(cfg.activation(d, 1), cell, n, cfg.clip);
  for (int64_t j = 0; j < n; ++j) c[j] = forget[j] * c[j] + in[j] * cell[j];
  if (p) {
    for (int64_t j = 0; j < n; ++j) out[j] += p[n + j] * c[j];
  }
  activate(f, out, n, cfg.clip);
  // cell is free now: h(C) goes there.
  std::copy(c, c + n, cell);
  activate(cfg.activation(d, 2), cell, n, 0.0f);
  for (int64_t j = 0; j < n; ++j) h[j] = out[j] * cell[j];
}

/// GRU's update and reset gates (first half of a GRU step); returns nothing, leaves them activated in gates.
void gru_gates(const RecurrentConfig& cfg, int64_t d, float* gates, const float* rec) {
  const int64_t n = cfg.hidden;
  for (int64_t j = 0; j < 2 * n; ++j) gates[j] += rec[j];
  activate(cfg.activation(d, 0), gates, 2 * n, cfg.clip);
}

/// GRU's candidate and new state (second half). `candidate_rec` is
/// (r (.) H) R_h^T + Rb_h without linear_before_reset, else H R_h^T (+ Rb_h added here).
void gru_finish(const RecurrentConfig& cfg, int64_t d, float* gates, const float* candidate_rec, const float* rb_h, float* h) {
  const int64_t n = cfg.hidden;
  const float* z = gates;
  const float* reset = gates + n;
  float* cand = gates + 2 * n;
  if (cfg.linear_before_reset) {
    for (int64_t j = 0; j < n; ++j) cand[j] += reset[j] * (candidate_rec[j] + rb_h[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) cand[j] += candidate_rec[j];
  }
  activate(cfg.activation(d, 1), cand, n, cfg.clip);
  for (int64_t j = 0; j < n; ++j) h[j] = (1.0f - z[j]) * cand[j] + z[j] * h[j];
}

void run_direction(const RecurrentConfig& cfg, int64_t d, const RecurrentTensors<float>& io, const PackedRecurrentWeights& packed,
                   const GemmMicrokernel& kernel, ThreadPool* pool) {
  const int64_t hidden = cfg.hidden, batch = cfg.batch, gate_rows = cfg.gates * hidden;
  const bool split = separate_candidate(cfg);
  const int64_t rec_cols = split ? 2 * hidden : gate_rows;
  const size_t d_index = static_cast<size_t>(d);

  // Input projection of every step at once, rows in X's own order, plus the
  // biases that are plain sums (all but GRU's R_h bias under linear_before_reset).
  const int64_t rows = cfg.seq * batch;
  std::vector<float> projected(static_cast<size_t>(rows * gate_rows));
  if (rows > 0) gemm_f32(kernel, rows, gate_rows, cfg.input_size, GemmA{nullptr, {io.x, cfg.input_size, 1}}, GemmB{&packed.w[d_index], {}, {}},
           projected.data(), gate_rows, false, nullptr, pool);
  std::vector<float> bias(static_cast<size_t>(gate_rows), 0.0f), rb_h(static_cast<size_t>(hidden), 0.0f);
  if (io.b) {
    const float* wb = io.b + d * 2 * gate_rows;
    const float* rb = wb + gate_rows;
    for (int64_t j = 0; j < gate_rows; ++j) bias[j] = wb[j] + rb[j];
    if (cfg.cell == RecurrentCell::kGru && cfg.linear_before_reset) {
      for (int64_t j = 0; j < hidden; ++j) {
        rb_h[j] = rb[2 * hidden + j];
        bias[2 * hidden + j] = wb[2 * hidden + j];
      }
    }
  }
  auto add_bias = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* p = projected.data() + row * gate_rows;
      for (int64_t j = 0; j < gate_rows; ++j) p[j] += bias[j];
    }
  };
  if (pool) {
    pool->parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, gate_rows)), add_bias);
  } else {
    add_bias(0, rows);
  }

  StepBuffers buf;
  buf.h.assign(static_cast<size_t>(batch * hidden), 0.0f);
  buf.c.assign(static_cast<size_t>(batch * hidden), 0.0f);
  buf.recurrent.resize(static_cast<size_t>(batch * rec_cols));
  if (split) {
    buf.reset_h.resize(static_cast<size_t>(batch * hidden));
    buf.candidate.resize(static_cast<size_t>(batch * hidden));
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t state = cfg.state_offset(d, b);
    if (io.initial_h) std::copy(io.initial_h + state, io.initial_h + state + hidden, buf.h.begin() + b * hidden);
    if (io.initial_c) std::copy(io.initial_c + state, io.initial_c + state + hidden, buf.c.begin() + b * hidden);
  }
  const float* peepholes = io.peepholes ? io.peepholes + d * 3 * hidden : nullptr;
  std::vector<float> gates(static_cast<size_t>(batch * gate_rows));
  auto length_of = [&](int64_t b) { return io.sequence_lens ? static_cast<int64_t>(io.sequence_lens[b]) : cfg.seq; };
  auto time_of = [&](int64_t b, int64_t s) { return cfg.runs_backwards(d) ? length_of(b) - 1 - s : s; };
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, gate_rows));
  auto for_active = [&](int64_t s, const std::function<void(int64_t)>& body) {
    auto chunk = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        if (s < length_of(b)) body(b);
      }
    };
    if (pool && batch > grain) {
      pool->parallel_for(batch, grain, chunk);
    } else {
      chunk(0, batch);
    }
  };

  for (int64_t s = 0; s < cfg.seq; ++s) {
    // Finished entries are multiplied too (a contiguous GEMM is cheaper than
    // gathering), but their state is left alone.
    gemm_f32(kernel, batch, rec_cols, hidden, GemmA{nullptr, {buf.h.data(), hidden, 1}}, GemmB{&packed.recurrent[d_index], {}, {}},
             buf.recurrent.data(), rec_cols, false, nullptr, pool);
    auto load_gates = [&](int64_t b) {
      const float* src = projected.data() + cfg.x_row(time_of(b, s), b) * gate_rows;
      std::copy(src, src + gate_rows, gates.begin() + b * gate_rows);
      return gates.data() + b * gate_rows;
    };
    const float* rec = buf.recurrent.data();
    if (cfg.cell == RecurrentCell::kLstm) {
      for_active(s, [&](int64_t b) {
        lstm_row(cfg, d, load_gates(b), rec + b * rec_cols, peepholes, buf.h.data() + b * hidden, buf.c.data() + b * hidden);
      });
    } else if (cfg.cell == RecurrentCell::kRnn) {
      for_active(s, [&](int64_t b) {
        float* g = load_gates(b);
        for (int64_t j = 0; j < hidden; ++j) g[j] += rec[b * rec_cols + j];
        activate(cfg.activation(d, 0), g, hidden, cfg.clip);
        std::copy(g, g + hidden, buf.h.begin() + b * hidden);
      });
    } else if (!split) {
      for_active(s, [&](int64_t b) {
        float* g = load_gates(b);
        gru_gates(cfg, d, g, rec + b * rec_cols);
        gru_finish(cfg, d, g, rec + b * rec_cols + 2 * hidden, rb_h.data(), buf.h.data() + b * hidden);
      });
    } else {
      for_active(s, [&](int64_t b) {
        float* g = load_gates(b);
        gru_gates(cfg, d, g, rec + b * rec_cols);
        const float* reset = g + hidden;
        const float* h = buf.h.data() + b * hidden;
        float* reset_h = buf.reset_h.data() + b * hidden;
        for (int64_t j = 0; j < hidden; ++j) reset_h[j] = reset[j] * h[j];
      });
      gemm_f32(kernel, batch, hidden, hidden, GemmA{nullptr, {buf.reset_h.data(), hidden, 1}},
               GemmB{&packed.candidate[d_index], {}, {}}, buf.candidate.data(), hidden, false, nullptr, pool);
      for_active(s, [&](int64_t b) {
        gru_finish(cfg, d, gates.data() + b * gate_rows, buf.candidate.data() + b * hidden, rb_h.data(), buf.h.data() + b * hidden);
      });
    }
    if (io.y) {
      for_active(s, [&](int64_t b) {
        std::copy(buf.h.begin() + b * hidden, buf.h.begin() + (b + 1) * hidden, io.y + cfg.y_offset(time_of(b, s), d, b));
      });
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t state = cfg.state_offset(d, b);
    if (io.y_h) std::copy(buf.h.begin() + b * hidden, buf.h.begin() + (b + 1) * hidden, io.y_h + state);
    if (io.y_c) std::copy(buf.c.begin() + b * hidden, buf.c.begin() + (b + 1) * hidden, io.y_c + state);
  }
}

}  // namespace

std::shared_ptr<PackedRecurrentWeights> pack_recurrent_weights(const RecurrentConfig& cfg, const float* w, const float* r) {
  const GemmMicrokernel& kernel = best_gemm_microkernel();
  const int64_t hidden = cfg.hidden, gate_rows = cfg.gates * hidden;
  const bool split = separate_candidate(cfg);
  auto packed = std::make_shared<PackedRecurrentWeights>();
  for (int64_t d = 0; d < cfg.directions; ++d) {
    // Row n of W is column n of W^T: element (k, n) of W^T at w[n * columns + k].
    const float* wd = w + d * gate_rows * cfg.input_size;
    const float* rd = r + d * gate_rows * hidden;
    packed->w.push_back(pack_gemm_b(kernel, {wd, 1, cfg.input_size}, cfg.input_size, gate_rows));
    packed->recurrent.push_back(pack_gemm_b(kernel, {rd, 1, hidden}, hidden, split ? 2 * hidden : gate_rows));
    if (split) packed->candidate.push_back(pack_gemm_b(kernel, {rd + 2 * hidden * hidden, 1, hidden}, hidden, hidden));
  }
  return packed;
}

void fast_recurrent_f32(const RecurrentConfig& cfg, const RecurrentTensors<float>& io, const PackedRecurrentWeights* packed,
                        ThreadPool* pool) {
  std::shared_ptr<PackedRecurrentWeights> local;
  if (!packed) {
    local = pack_recurrent_weights(cfg, io.w, io.r);
    packed = local.get();
  }
  // Steps past a sequence's end are never written by the loop: they are zeros.
  if (io.y) std::fill(io.y, io.y + cfg.seq * cfg.directions * cfg.batch * cfg.hidden, 0.0f);
  if (cfg.batch == 0 || cfg.hidden == 0) return;
  const GemmMicrokernel& kernel = *packed->w.front().kernel;
  // A small layer runs on the calling thread alone: a second thread saves little of it, and when
  // another process holds a core, every parallel step waits for that thread's turn on a CPU (the
  // LSTM/GRU tagger at 2 threads beside one busy process: 0.19 ms alone, 1.24 ms loaded, against
  // ONNX Runtime's 0.25 and 0.26).
  const int64_t macs_per_direction =
      cfg.seq * cfg.batch * cfg.gates * cfg.hidden * (cfg.input_size + cfg.hidden);
  if (macs_per_direction * cfg.directions < kSmallRecurrentMacs) pool = nullptr;
  // The two directions of a bidirectional layer are independent: running them
  // side by side halves the number of small per-step GEMMs in sequence. The
  // GEMMs inside still use whatever threads are left (nested calls are fine).
  if (cfg.directions == 2 && pool && pool->num_threads() > 1) {
    pool->parallel_for(2, 1, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) run_direction(cfg, d, io, *packed, kernel, pool);
    });
    return;
  }
  for (int64_t d = 0; d < cfg.directions; ++d) run_direction(cfg, d, io, *packed, kernel, pool);
}

}  // namespace tessera::native
