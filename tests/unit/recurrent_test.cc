// Tests of the recurrent family: the float32 GEMM path of LSTM / GRU / RNN
// against the plain reference on random shapes over every direction, layout,
// sequence_lens, activation and cell option; the reference and the kernel
// against values worked out by hand; and user errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "backends/native/kernels/recurrent_internal.h"
#include "test_util.h"

namespace tessera {
namespace {

using native::Activation;
using native::ActivationKind;
using native::RecurrentCell;
using native::RecurrentConfig;
using testing::expect_close;
using testing::OneOpGraph;
using testing::random_float;
using testing::run_one_op;

Attribute strings_attribute(std::vector<std::string> values) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(values);
  return a;
}

Tensor int32_tensor(Shape shape, const std::vector<int32_t>& values) {
  Tensor t(DType::kInt32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<int32_t>()[i] = values[i];
  return t;
}

/// Every input and output of one random case.
struct RandomCase {
  RecurrentConfig config;
  Tensor x, w, r, b, lens, initial_h, initial_c, peepholes;
  Tensor y, y_h, y_c;

  template <typename T>
  native::RecurrentTensors<T> tensors(Tensor& out_y, Tensor& out_h, Tensor& out_c) const {
    native::RecurrentTensors<T> io;
    io.x = x.as<T>();
    io.w = w.as<T>();
    io.r = r.as<T>();
    io.b = b.defined() ? b.as<T>() : nullptr;
    io.sequence_lens = lens.defined() ? lens.as<int32_t>() : nullptr;
    io.initial_h = initial_h.defined() ? initial_h.as<T>() : nullptr;
    io.initial_c = initial_c.defined() ? initial_c.as<T>() : nullptr;
    io.peepholes = peepholes.defined() ? peepholes.as<T>() : nullptr;
    io.y = out_y.as<T>();
    io.y_h = out_h.as<T>();
    io.y_c = out_c.defined() ? out_c.as<T>() : nullptr;
    return io;
  }
};

RandomCase make_case(RecurrentCell cell, int64_t directions, bool reverse, int64_t layout, std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto coin = [&] { return pick(0, 1) == 1; };
  RandomCase c;
  RecurrentConfig& cfg = c.config;
  cfg.cell = cell;
  cfg.gates = cell == RecurrentCell::kLstm ? 4 : cell == RecurrentCell::kGru ? 3 : 1;
  cfg.directions = directions;
  cfg.reverse = reverse;
  cfg.layout = layout;
  cfg.seq = pick(1, 6);
  cfg.batch = pick(1, 5);
  cfg.input_size = pick(1, 9);
  cfg.hidden = pick(1, 19);  // past one 16-wide microkernel tile
  cfg.clip = coin() ? 0.0f : 0.8f;
  cfg.input_forget = cell == RecurrentCell::kLstm && coin();
  cfg.linear_before_reset = cell == RecurrentCell::kGru && coin();
  const ActivationKind kinds[] = {ActivationKind::kRelu,      ActivationKind::kTanh,            ActivationKind::kSigmoid,
                                  ActivationKind::kAffine,    ActivationKind::kLeakyRelu,       ActivationKind::kThresholdedRelu,
                                  ActivationKind::kScaledTanh, ActivationKind::kHardSigmoid,    ActivationKind::kElu,
                                  ActivationKind::kSoftsign,  ActivationKind::kSoftplus};
  for (int64_t i = 0; i < directions * cfg.activations_per_direction(); ++i) {
    Activation a{kinds[pick(0, 10)], 0.5f + 0.1f * static_cast<float>(pick(0, 5)), 0.1f * static_cast<float>(pick(-3, 3))};
    cfg.activations.push_back(a);
  }
  const int64_t gate_rows = cfg.gates * cfg.hidden;
  const uint32_t seed = static_cast<uint32_t>(pick(0, 1 << 30));
  c.x = random_float(layout == 0 ? Shape{cfg.seq, cfg.batch, cfg.input_size} : Shape{cfg.batch, cfg.seq, cfg.input_size}, seed);
  c.w = random_float({directions, gate_rows, cfg.input_size}, seed + 1);
  c.r = random_float({directions, gate_rows, cfg.hidden}, seed + 2);
  const Shape state = layout == 0 ? Shape{directions, cfg.batch, cfg.hidden} : Shape{cfg.batch, directions, cfg.hidden};
  if (coin()) c.b = random_float({directions, 2 * gate_rows}, seed + 3);
  if (coin()) {
    std::vector<int32_t> lens;
    for (int64_t b = 0; b < cfg.batch; ++b) lens.push_back(static_cast<int32_t>(pick(0, cfg.seq)));
    c.lens = int32_tensor({cfg.batch}, lens);
  }
  if (coin()) c.initial_h = random_float(state, seed + 4);
  if (cell == RecurrentCell::kLstm && coin()) c.initial_c = random_float(state, seed + 5);
  if (cell == RecurrentCell::kLstm && coin()) c.peepholes = random_float({directions, 3 * cfg.hidden}, seed + 6);
  c.y = Tensor(DType::kFloat32, layout == 0 ? Shape{cfg.seq, directions, cfg.batch, cfg.hidden}
                                            : Shape{cfg.batch, cfg.seq, directions, cfg.hidden});
  c.y_h = Tensor(DType::kFloat32, state);
  if (cell == RecurrentCell::kLstm) c.y_c = Tensor(DType::kFloat32, state);
  return c;
}

/// ONNX's activation functions, in long double.
long double naive_activation(const Activation& a, long double v) {
  const long double alpha = a.alpha, beta = a.beta;
  switch (a.kind) {
    case ActivationKind::kRelu: return std::max(v, 0.0L);
    case ActivationKind::kTanh: return std::tanh(v);
    case ActivationKind::kSigmoid: return 1.0L / (1.0L + std::exp(-v));
    case ActivationKind::kAffine: return alpha * v + beta;
    case ActivationKind::kLeakyRelu: return v >= 0 ? v : alpha * v;
    case ActivationKind::kThresholdedRelu: return v > alpha ? v : 0.0L;
    case ActivationKind::kScaledTanh: return alpha * std::tanh(beta * v);
    case ActivationKind::kHardSigmoid: return std::clamp(alpha * v + beta, 0.0L, 1.0L);
    case ActivationKind::kElu: return v >= 0 ? v : alpha * (std::exp(v) - 1.0L);
    case ActivationKind::kSoftsign: return v / (1.0L + std::fabs(v));
    case ActivationKind::kSoftplus: return std::log(1.0L + std::exp(v));
  }
  return NAN;
}

/// LSTM, GRU or RNN straight from the ONNX operator definitions, in long double
/// and written without any Tessera kernel (the float64 kernel is
/// native::reference_recurrent itself, so only this can check it). Returns
/// Y, Y_h and (LSTM) Y_c in `dtype`. With f, g, h the direction's activations,
/// clip(v) bounding every gate's input to [-clip, clip] (as ONNX Runtime does:
/// not h's input Ct), and W*x meaning the gate's rows of W times x:
///   RNN:  Ht = f(W*xt + R*Ht-1 + Wb + Rb)
///   GRU:  zt = f(Wz*xt + Rz*Ht-1 + Wbz + Rbz), rt likewise with r,
///         ht = g(Wh*xt + Rh*(rt . Ht-1) + Rbh + Wbh), or with linear_before_reset
///         ht = g(Wh*xt + rt . (Rh*Ht-1 + Rbh) + Wbh); Ht = (1 - zt) . ht + zt . Ht-1
///   LSTM: it = f(Wi*xt + Ri*Ht-1 + Pi . Ct-1 + Wbi + Rbi), ft likewise with f and Pf
///         (ft = 1 - it with input_forget), ct = g(Wc*xt + Rc*Ht-1 + Wbc + Rbc),
///         Ct = ft . Ct-1 + it . ct, ot = f(Wo*xt + Ro*Ht-1 + Po . Ct + Wbo + Rbo), Ht = ot . h(Ct)
/// Gate order in W, R and B: LSTM i o f c, GRU z r h; peepholes i o f. Batch
/// entry b runs sequence_lens[b] steps (backwards for the reverse direction);
/// Y is zero past them, and Y_h / Y_c hold the state after the last step run.
std::vector<Tensor> naive_recurrent(const RandomCase& c, DType dtype) {
  const RecurrentConfig& cfg = c.config;
  const int64_t hidden = cfg.hidden, gates = cfg.gates, input_size = cfg.input_size, dirs = cfg.directions;
  const int64_t per_direction = cfg.cell == RecurrentCell::kLstm ? 3 : cfg.cell == RecurrentCell::kGru ? 2 : 1;
  const bool batch_first = cfg.layout == 1;
  auto at = [](const Tensor& t, int64_t i) -> long double { return t.double_at(i); };
  auto x_at = [&](int64_t t, int64_t b, int64_t k) {
    return at(c.x, (batch_first ? b * cfg.seq + t : t * cfg.batch + b) * input_size + k);
  };
  auto state_index = [&](int64_t d, int64_t b, int64_t j) {
    return (batch_first ? b * dirs + d : d * cfg.batch + b) * hidden + j;
  };
  auto y_index = [&](int64_t t, int64_t d, int64_t b, int64_t j) {
    return (batch_first ? (b * cfg.seq + t) * dirs + d : (t * dirs + d) * cfg.batch + b) * hidden + j;
  };
  const long double bound = cfg.clip;
  auto clip = [&](long double v) { return bound > 0 ? std::clamp(v, -bound, bound) : v; };
  std::vector<long double> y(static_cast<size_t>(cfg.seq * dirs * cfg.batch * hidden), 0.0L);
  std::vector<long double> y_h(static_cast<size_t>(dirs * cfg.batch * hidden)), y_c(y_h.size());
  for (int64_t d = 0; d < dirs; ++d) {
    const Activation* act = &cfg.activations[static_cast<size_t>(d * per_direction)];
    const bool backwards = d == 1 || cfg.reverse;
    // Gate `gate`'s row j of W times x plus its input bias, and of R times v plus its recurrence bias.
    auto w_times = [&](int64_t gate, int64_t j, const std::vector<long double>& v) {
      long double sum = c.b.defined() ? at(c.b, (d * 2 * gates + gate) * hidden + j) : 0.0L;
      for (int64_t k = 0; k < input_size; ++k) {
        sum += at(c.w, ((d * gates + gate) * hidden + j) * input_size + k) * v[static_cast<size_t>(k)];
      }
      return sum;
    };
    auto r_times = [&](int64_t gate, int64_t j, const std::vector<long double>& v) {
      long double sum = c.b.defined() ? at(c.b, (d * 2 * gates + gates + gate) * hidden + j) : 0.0L;
      for (int64_t k = 0; k < hidden; ++k) {
        sum += at(c.r, ((d * gates + gate) * hidden + j) * hidden + k) * v[static_cast<size_t>(k)];
      }
      return sum;
    };
    auto peephole = [&](int64_t which, int64_t j) {  // 0 i, 1 o, 2 f
      return c.peepholes.defined() ? at(c.peepholes, (d * 3 + which) * hidden + j) : 0.0L;
    };
    for (int64_t b = 0; b < cfg.batch; ++b) {
      std::vector<long double> h(static_cast<size_t>(hidden), 0.0L), cell(static_cast<size_t>(hidden), 0.0L);
      for (int64_t j = 0; j < hidden; ++j) {
        if (c.initial_h.defined()) h[static_cast<size_t>(j)] = at(c.initial_h, state_index(d, b, j));
        if (c.initial_c.defined()) cell[static_cast<size_t>(j)] = at(c.initial_c, state_index(d, b, j));
      }
      const int64_t steps = c.lens.defined() ? c.lens.as<int32_t>()[b] : cfg.seq;
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = backwards ? steps - 1 - s : s;
        std::vector<long double> xt(static_cast<size_t>(input_size)), next(static_cast<size_t>(hidden));
        for (int64_t k = 0; k < input_size; ++k) xt[static_cast<size_t>(k)] = x_at(t, b, k);
        if (cfg.cell == RecurrentCell::kRnn) {
          for (int64_t j = 0; j < hidden; ++j) {
            next[static_cast<size_t>(j)] = naive_activation(act[0], clip(w_times(0, j, xt) + r_times(0, j, h)));
          }
        } else if (cfg.cell == RecurrentCell::kGru) {
          std::vector<long double> z(next.size()), reset(next.size()), reset_h(next.size()), h_only(next.size(), 0.0L);
          for (int64_t j = 0; j < hidden; ++j) {
            const size_t u = static_cast<size_t>(j);
            z[u] = naive_activation(act[0], clip(w_times(0, j, xt) + r_times(0, j, h)));
            reset[u] = naive_activation(act[0], clip(w_times(1, j, xt) + r_times(1, j, h)));
            reset_h[u] = reset[u] * h[u];
          }
          for (int64_t j = 0; j < hidden; ++j) {
            const size_t u = static_cast<size_t>(j);
            const long double recurrent = cfg.linear_before_reset ? reset[u] * r_times(2, j, h) : r_times(2, j, reset_h);
            const long double candidate = naive_activation(act[1], clip(w_times(2, j, xt) + recurrent));
            next[u] = (1.0L - z[u]) * candidate + z[u] * h[u];
          }
        } else {
          for (int64_t j = 0; j < hidden; ++j) {
            const size_t u = static_cast<size_t>(j);
            const long double in =
                naive_activation(act[0], clip(w_times(0, j, xt) + r_times(0, j, h) + peephole(0, j) * cell[u]));
            const long double forget = cfg.input_forget ? 1.0L - in
                                                        : naive_activation(act[0], clip(w_times(2, j, xt) + r_times(2, j, h) +
                                                                                        peephole(2, j) * cell[u]));
            const long double candidate = naive_activation(act[1], clip(w_times(3, j, xt) + r_times(3, j, h)));
            const long double c_next = forget * cell[u] + in * candidate;
            const long double out =
                naive_activation(act[0], clip(w_times(1, j, xt) + r_times(1, j, h) + peephole(1, j) * c_next));
            next[u] = out * naive_activation(act[2], c_next);
            cell[u] = c_next;  // read by element j alone
          }
        }
        h = next;
        for (int64_t j = 0; j < hidden; ++j) y[static_cast<size_t>(y_index(t, d, b, j))] = h[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < hidden; ++j) {
        y_h[static_cast<size_t>(state_index(d, b, j))] = h[static_cast<size_t>(j)];
        y_c[static_cast<size_t>(state_index(d, b, j))] = cell[static_cast<size_t>(j)];
      }
    }
  }
  auto tensor = [&](const Shape& shape, const std::vector<long double>& values) {
    Tensor t(dtype, shape);
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kFloat32) {
        t.as<float>()[i] = static_cast<float>(values[i]);
      } else {
        t.as<double>()[i] = static_cast<double>(values[i]);
      }
    }
    return t;
  };
  std::vector<Tensor> out = {tensor(c.y.shape(), y), tensor(c.y_h.shape(), y_h)};
  if (cfg.cell == RecurrentCell::kLstm) out.push_back(tensor(c.y_h.shape(), y_c));
  return out;
}

Tensor to_float64(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::kFloat32) return t;
  Tensor d(DType::kFloat64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) d.as<double>()[i] = t.as<float>()[i];
  return d;
}

/// The same case with every float tensor in float64 (sequence_lens stays int32).
RandomCase as_float64(const RandomCase& c) {
  RandomCase d = c;
  for (Tensor* t : {&d.x, &d.w, &d.r, &d.b, &d.initial_h, &d.initial_c, &d.peepholes, &d.y, &d.y_h, &d.y_c}) *t = to_float64(*t);
  return d;
}

TEST(RecurrentFast, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(1234);
  native::ThreadPool pool(3);
  int cases = 0;
  for (RecurrentCell cell : {RecurrentCell::kLstm, RecurrentCell::kGru, RecurrentCell::kRnn}) {
    for (int direction = 0; direction < 3; ++direction) {  // forward, reverse, bidirectional
      for (int64_t layout : {0, 1}) {
        for (int repeat = 0; repeat < 12; ++repeat) {
          RandomCase c = make_case(cell, direction == 2 ? 2 : 1, direction == 1, layout, rng);
          SCOPED_TRACE("cell " + std::to_string(static_cast<int>(cell)) + " direction " + std::to_string(direction) + " layout " +
                       std::to_string(layout) + " repeat " + std::to_string(repeat));
          Tensor ref_y = c.y.clone(), ref_h = c.y_h.clone(), ref_c = c.y_c.defined() ? c.y_c.clone() : Tensor();
          native::reference_recurrent<float>(c.config, c.tensors<float>(ref_y, ref_h, ref_c));
          // The reference itself against the ONNX definition, in float64: in float32
          // unbounded activations (Relu, Affine, Softplus) grow rounding past any fixed tolerance.
          {
            const RandomCase c64 = as_float64(c);
            Tensor y64 = c64.y.clone(), h64 = c64.y_h.clone(), cc64 = c64.y_c.defined() ? c64.y_c.clone() : Tensor();
            native::reference_recurrent<double>(c64.config, c64.tensors<double>(y64, h64, cc64));
            const std::vector<Tensor> naive = naive_recurrent(c, DType::kFloat64);
            expect_close(y64, naive[0], 1e-9, 1e-9);
            expect_close(h64, naive[1], 1e-9, 1e-9);
            if (cc64.defined()) expect_close(cc64, naive[2], 1e-9, 1e-9);
          }
          // Sentinel values: the fast path must write every output element.
          Tensor y = random_float(c.y.shape(), 7), h = random_float(c.y_h.shape(), 8);
          Tensor cc = c.y_c.defined() ? random_float(c.y_c.shape(), 9) : Tensor();
          // Odd repeats pack W and R up front (the prepare path), even ones per call.
          std::shared_ptr<native::PackedRecurrentWeights> packed;
          if (repeat % 2 == 1) packed = native::pack_recurrent_weights(c.config, c.w.as<float>(), c.r.as<float>());
          native::fast_recurrent_f32(c.config, c.tensors<float>(y, h, cc), packed.get(), repeat % 3 == 0 ? nullptr : &pool);
          expect_close(y, ref_y, 1e-4, 1e-4);
          expect_close(h, ref_h, 1e-4, 1e-4);
          if (cc.defined()) expect_close(cc, ref_c, 1e-4, 1e-4);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 3 * 2 * 12);
}

TEST(RecurrentReference, RnnKnownValues) {
  // hidden 1, input 1, two steps: h1 = tanh(w x0 + b), h2 = tanh(w x1 + r h1 + b).
  OneOpGraph spec{.op_type = "RNN", .num_outputs = 2};
  spec.inputs = {testing::make_float({2, 1, 1}, {0.5f, -1.0f}), testing::make_float({1, 1, 1}, {0.3f}),
                 testing::make_float({1, 1, 1}, {0.7f}), testing::make_float({1, 2}, {0.1f, 0.2f})};
  spec.attrs.set("hidden_size", Attribute::of_int(1));
  std::vector<Tensor> out = run_one_op(spec);
  const float h1 = std::tanh(0.3f * 0.5f + 0.3f), h2 = std::tanh(0.3f * -1.0f + 0.7f * h1 + 0.3f);
  expect_close(out[0], testing::make_float({2, 1, 1, 1}, {h1, h2}));
  expect_close(out[1], testing::make_float({1, 1, 1}, {h2}));
}

TEST(RecurrentReference, LstmAndGruKnownValuesOneStep) {
  auto sigmoid = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
  const float x = 0.8f;
  // W rows per gate; zero state, so R does not matter for one step.
  const std::vector<float> lstm_w = {0.1f, -0.2f, 0.3f, 0.4f};  // i o f c
  OneOpGraph lstm{.op_type = "LSTM", .num_outputs = 3};
  lstm.inputs = {testing::make_float({1, 1, 1}, {x}), testing::make_float({1, 4, 1}, lstm_w), random_float({1, 4, 1}, 3)};
  std::vector<Tensor> out = run_one_op(lstm);
  const float c = sigmoid(0.1f * x) * std::tanh(0.4f * x);
  const float h = sigmoid(-0.2f * x) * std::tanh(c);
  expect_close(out[1], testing::make_float({1, 1, 1}, {h}));
  expect_close(out[2], testing::make_float({1, 1, 1}, {c}));

  const std::vector<float> gru_w = {0.5f, -0.6f, 0.9f};  // z r h
  OneOpGraph gru{.op_type = "GRU", .num_outputs = 2};
  gru.inputs = {testing::make_float({1, 1, 1}, {x}), testing::make_float({1, 3, 1}, gru_w), random_float({1, 3, 1}, 4)};
  out = run_one_op(gru);
  const float z = sigmoid(0.5f * x);
  expect_close(out[1], testing::make_float({1, 1, 1}, {(1.0f - z) * std::tanh(0.9f * x)}));
}

/// The whole kernel (attributes, constant W and R packed in prepare, float64)
/// against the ONNX definition on bidirectional batch-first LSTM / GRU / RNN
/// with sequence_lens.
TEST(RecurrentKernel, ConstantWeightsAndFloat64MatchNaiveRecurrent) {
  std::mt19937 rng(99);
  for (int repeat = 0; repeat < 9; ++repeat) {
    const RecurrentCell cell = std::array{RecurrentCell::kLstm, RecurrentCell::kGru, RecurrentCell::kRnn}[repeat % 3];
    SCOPED_TRACE("cell " + std::to_string(static_cast<int>(cell)) + " repeat " + std::to_string(repeat));
    RandomCase c;
    do {
      c = make_case(cell, 2, false, 1, rng);
    } while (!c.lens.defined() || !c.b.defined() || !c.initial_h.defined());
    c.initial_c = Tensor();  // inputs after initial_h are not given to the node below
    c.peepholes = Tensor();
    const char* names[] = {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                           "Elu", "Softsign", "Softplus"};
    std::vector<std::string> activations;
    std::vector<float> alphas, betas;
    for (const Activation& a : c.config.activations) {
      activations.push_back(names[static_cast<int>(a.kind)]);
      const bool alpha = a.kind == ActivationKind::kAffine || a.kind == ActivationKind::kLeakyRelu ||
                         a.kind == ActivationKind::kThresholdedRelu || a.kind == ActivationKind::kScaledTanh ||
                         a.kind == ActivationKind::kHardSigmoid || a.kind == ActivationKind::kElu;
      const bool beta = a.kind == ActivationKind::kAffine || a.kind == ActivationKind::kScaledTanh || a.kind == ActivationKind::kHardSigmoid;
      if (alpha) alphas.push_back(a.alpha);
      if (beta) betas.push_back(a.beta);
    }
    const std::vector<Tensor> naive = naive_recurrent(c, DType::kFloat32), naive64 = naive_recurrent(c, DType::kFloat64);

    const char* op_type = cell == RecurrentCell::kLstm ? "LSTM" : cell == RecurrentCell::kGru ? "GRU" : "RNN";
    OneOpGraph spec{.op_type = op_type, .num_outputs = 2};
    spec.attrs.set("direction", Attribute::of_string("bidirectional"));
    spec.attrs.set("layout", Attribute::of_int(1));
    spec.attrs.set("hidden_size", Attribute::of_int(c.config.hidden));
    spec.attrs.set("activations", strings_attribute(activations));
    spec.attrs.set("activation_alpha", Attribute::of_floats(alphas));
    spec.attrs.set("activation_beta", Attribute::of_floats(betas));
    if (c.config.clip > 0) spec.attrs.set("clip", Attribute::of_float(c.config.clip));
    if (c.config.input_forget) spec.attrs.set("input_forget", Attribute::of_int(1));
    if (c.config.linear_before_reset) spec.attrs.set("linear_before_reset", Attribute::of_int(1));
    spec.inputs = {c.x, c.b, c.lens, c.initial_h};
    spec.constants = {{1, c.w}, {2, c.r}};
    std::vector<Tensor> out = run_one_op(spec, 2);
    expect_close(out[0], naive[0], 1e-4, 1e-4);
    expect_close(out[1], naive[1], 1e-4, 1e-4);

    // float64 takes native::reference_recurrent; it must agree with the long double sums far past float32.
    spec.constants.clear();
    spec.inputs = {to_float64(c.x), to_float64(c.w), to_float64(c.r), to_float64(c.b), c.lens, to_float64(c.initial_h)};
    out = run_one_op(spec);
    expect_close(out[0], naive64[0], 1e-12, 1e-12);
    expect_close(out[1], naive64[1], 1e-12, 1e-12);
  }
}

ErrorKind error_kind_of(const OneOpGraph& spec) {
  try {
    run_one_op(spec);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "expected an error";
  return ErrorKind::kInternal;
}

TEST(RecurrentErrors, BadInputsAreUserErrors) {
  OneOpGraph spec{.op_type = "GRU", .num_outputs = 2};
  spec.inputs = {random_float({3, 2, 4}, 1), random_float({1, 9, 4}, 2), random_float({1, 9, 3}, 3), random_float({1, 18}, 4),
                 int32_tensor({2}, {3, 4})};
  spec.attrs.set("hidden_size", Attribute::of_int(3));
  EXPECT_EQ(error_kind_of(spec), ErrorKind::kUser);  // sequence_lens 4 > seq 3

  spec.inputs[4] = int32_tensor({2}, {3, 1});
  spec.inputs[1] = random_float({1, 9, 5}, 2);
  EXPECT_EQ(error_kind_of(spec), ErrorKind::kUser);  // W's input size 5 != X's 4

  spec.inputs[1] = random_float({1, 9, 4}, 2);
  spec.attrs.set("activations", strings_attribute({"Sigmoid", "Gelu"}));
  EXPECT_EQ(error_kind_of(spec), ErrorKind::kUnsupported);

  spec.attrs.set("activations", strings_attribute({"Sigmoid"}));
  EXPECT_EQ(error_kind_of(spec), ErrorKind::kUser);  // GRU needs two per direction

  spec.attrs.erase("activations");
  spec.attrs.set("direction", Attribute::of_string("sideways"));
  EXPECT_EQ(error_kind_of(spec), ErrorKind::kUser);
}

}  // namespace
}  // namespace tessera
