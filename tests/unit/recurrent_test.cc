// Tests of the recurrent family: the float32 GEMM path of LSTM / GRU / RNN
// against the plain reference on random shapes over every direction, layout,
// sequence_lens, activation and cell option; the reference and the kernel
// against values worked out by hand; and user errors.
#include <gtest/gtest.h>

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
/// against the reference on a bidirectional batch-first LSTM with sequence_lens.
TEST(RecurrentKernel, ConstantWeightsAndFloat64MatchReference) {
  std::mt19937 rng(99);
  for (RecurrentCell cell : {RecurrentCell::kLstm, RecurrentCell::kGru}) {
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
    Tensor ref_y = c.y.clone(), ref_h = c.y_h.clone(), ref_c = c.y_c.defined() ? c.y_c.clone() : Tensor();
    native::reference_recurrent<float>(c.config, c.tensors<float>(ref_y, ref_h, ref_c));

    OneOpGraph spec{.op_type = cell == RecurrentCell::kLstm ? "LSTM" : "GRU", .num_outputs = 2};
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
    expect_close(out[0], ref_y, 1e-4, 1e-4);
    expect_close(out[1], ref_h, 1e-4, 1e-4);

    // float64 takes the reference loops; same answer to float32 precision.
    auto to_double = [](const Tensor& t) {
      Tensor d(DType::kFloat64, t.shape());
      for (int64_t i = 0; i < t.numel(); ++i) d.as<double>()[i] = t.as<float>()[i];
      return d;
    };
    spec.constants.clear();
    spec.inputs = {to_double(c.x), to_double(c.w), to_double(c.r), to_double(c.b), c.lens, to_double(c.initial_h)};
    out = run_one_op(spec);
    expect_close(out[0], to_double(ref_y), 1e-4, 1e-4);
    expect_close(out[1], to_double(ref_h), 1e-4, 1e-4);
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
