// Native LSTM, GRU and RNN: the configuration read from a node, the kernel
// entry (float32 on the GEMM path of recurrent_fast.cc, float64 on the
// reference loops of recurrent_reference.cc), prepare (packs constant W and R)
// and registration.
#include <cctype>

#include "backends/native/kernels/recurrent_internal.h"

namespace tessera::native {
namespace {

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool takes_alpha;
  bool takes_beta;
  float default_alpha;
  float default_beta;
};

// Defaults where the model gives no activation_alpha / activation_beta for
// an activation that takes them (those of ONNX Runtime, which the spec leaves open).
constexpr ActivationInfo kActivationInfo[] = {
    {"relu", ActivationKind::kRelu, false, false, 0.0f, 0.0f},
    {"tanh", ActivationKind::kTanh, false, false, 0.0f, 0.0f},
    {"sigmoid", ActivationKind::kSigmoid, false, false, 0.0f, 0.0f},
    {"affine", ActivationKind::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", ActivationKind::kLeakyRelu, true, false, 0.01f, 0.0f},
    {"thresholdedrelu", ActivationKind::kThresholdedRelu, true, false, 1.0f, 0.0f},
    {"scaledtanh", ActivationKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActivationKind::kElu, true, false, 1.0f, 0.0f},
    {"softsign", ActivationKind::kSoftsign, false, false, 0.0f, 0.0f},
    {"softplus", ActivationKind::kSoftplus, false, false, 0.0f, 0.0f},
};

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The activations of every direction. alpha and beta values are taken in
/// order by the activations that use them.
std::vector<Activation> parse_activations(const Node& node, const RecurrentConfig& config) {
  const int64_t per_direction = config.activations_per_direction();
  std::vector<std::string> names = node.attrs.get_strings_or("activations", {});
  if (names.empty()) {
    static const char* const kDefaults[] = {"sigmoid", "tanh", "tanh"};
    if (config.cell == RecurrentCell::kRnn) {
      names = {"tanh"};
    } else {
      names.assign(kDefaults, kDefaults + per_direction);
    }
  }
  // One direction's list given for a bidirectional layer: both use it.
  if (config.directions == 2 && static_cast<int64_t>(names.size()) == per_direction) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = twice;
  }
  if (static_cast<int64_t>(names.size()) != per_direction * config.directions) {
    throw_user_error(node.describe(), ": activations has ", names.size(), " entries, expected ", per_direction * config.directions);
  }
  const std::vector<float> alphas = node.attrs.get_floats_or("activation_alpha", {});
  const std::vector<float> betas = node.attrs.get_floats_or("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> result;
  for (const std::string& name : names) {
    const std::string key = lowercase(name);
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& candidate : kActivationInfo) {
      if (key == candidate.name) info = &candidate;
    }
    if (!info) throw_unsupported(node.describe(), ": activation '", name, "' is not supported");
    Activation a{info->kind, info->default_alpha, info->default_beta};
    if (info->takes_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    result.push_back(a);
  }
  return result;
}

RecurrentCell cell_of(const std::string& op_type) {
  return op_type == "LSTM" ? RecurrentCell::kLstm : op_type == "GRU" ? RecurrentCell::kGru : RecurrentCell::kRnn;
}

std::shared_ptr<void> prepare_recurrent(const Node& node, const std::vector<const Tensor*>& constants,
                                        const std::vector<TensorType>& types) {
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  const Tensor* r = constants.size() > 2 ? constants[2] : nullptr;
  if (!w || !r || w->dtype() != DType::kFloat32 || r->dtype() != DType::kFloat32) return nullptr;
  if (types.empty() || !types[0].is_static() || r->shape().size() != 3) return nullptr;
  RecurrentConfig config = recurrent_config(node, cell_of(node.op_type), types[0].dims, r->shape());
  if (w->shape() != Shape{config.directions, config.gates * config.hidden, config.input_size}) return nullptr;
  return pack_recurrent_weights(config, w->as<float>(), r->as<float>());
}

template <typename T>
const T* optional_input(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.input(i).numel() > 0 ? ctx.input(i).as<T>() : nullptr;
}

void recurrent_kernel(KernelContext& ctx) {
  const RecurrentCell cell = cell_of(ctx.node().op_type);
  const RecurrentConfig config = recurrent_config(ctx, cell);
  const int32_t* lens = optional_input<int32_t>(ctx, 4);
  if (lens) {
    for (int64_t b = 0; b < config.batch; ++b) {
      if (lens[b] < 0 || lens[b] > config.seq) ctx.fail("sequence_lens[", b, "] = ", lens[b], " is outside [0, ", config.seq, "]");
    }
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    RecurrentTensors<T> io;
    io.x = ctx.input(0).as<T>();
    io.w = ctx.input(1).as<T>();
    io.r = ctx.input(2).as<T>();
    io.b = optional_input<T>(ctx, 3);
    io.sequence_lens = lens;
    io.initial_h = optional_input<T>(ctx, 5);
    if (cell == RecurrentCell::kLstm) {
      io.initial_c = optional_input<T>(ctx, 6);
      io.peepholes = optional_input<T>(ctx, 7);
    }
    io.y = ctx.has_output(0) ? ctx.output(0).as<T>() : nullptr;
    io.y_h = ctx.has_output(1) ? ctx.output(1).as<T>() : nullptr;
    io.y_c = ctx.has_output(2) ? ctx.output(2).as<T>() : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      fast_recurrent_f32(config, io, ctx.state<PackedRecurrentWeights>(), &ctx.pool());
    } else {
      reference_recurrent<T>(config, io);
    }
  };
  switch (ctx.input(0).dtype) {
    case DType::kFloat32: run(float{}); break;
    case DType::kFloat64: run(double{}); break;
    default: throw_unsupported(ctx.node().describe(), ": dtype ", dtype_name(ctx.input(0).dtype), " is not supported (float32, float64 are)");
  }
}

}  // namespace

RecurrentConfig recurrent_config(const Node& node, RecurrentCell cell, const Shape& x_shape, const Shape& r_shape) {
  RecurrentConfig c;
  c.cell = cell;
  c.gates = cell == RecurrentCell::kLstm ? 4 : cell == RecurrentCell::kGru ? 3 : 1;
  const std::string direction = node.attrs.get_string_or("direction", "forward");
  c.directions = direction == "bidirectional" ? 2 : 1;
  c.reverse = direction == "reverse";
  c.layout = node.attrs.get_int_or("layout", 0);
  if (x_shape.size() != 3 || r_shape.size() != 3) {
    throw_user_error(node.describe(), ": X and R must have rank 3, got ", shape_to_string(x_shape), " and ", shape_to_string(r_shape));
  }
  c.seq = x_shape[c.layout == 0 ? 0 : 1];
  c.batch = x_shape[c.layout == 0 ? 1 : 0];
  c.input_size = x_shape[2];
  c.hidden = node.attrs.get_int_or("hidden_size", r_shape[2]);
  c.clip = node.attrs.has("clip") ? node.attrs.get_float("clip") : 0.0f;
  if (node.attrs.has("clip") && c.clip <= 0.0f) throw_user_error(node.describe(), ": clip = ", c.clip, " must be positive");
  c.input_forget = node.attrs.get_int_or("input_forget", 0) != 0;
  c.linear_before_reset = node.attrs.get_int_or("linear_before_reset", 0) != 0;
  if (r_shape != Shape{c.directions, c.gates * c.hidden, c.hidden}) {
    throw_user_error(node.describe(), ": R has shape ", shape_to_string(r_shape), ", expected ",
                     shape_to_string({c.directions, c.gates * c.hidden, c.hidden}));
  }
  c.activations = parse_activations(node, c);
  return c;
}

RecurrentConfig recurrent_config(const KernelContext& ctx, RecurrentCell cell) {
  RecurrentConfig c = recurrent_config(ctx.node(), cell, ctx.input(0).shape, ctx.input(2).shape);
  const Shape w_expected = {c.directions, c.gates * c.hidden, c.input_size};
  if (ctx.input(1).shape != w_expected) ctx.fail("W has shape ", shape_to_string(ctx.input(1).shape), ", expected ", shape_to_string(w_expected));
  // Optional inputs given as empty tensors count as absent; others must be whole.
  auto check = [&](size_t i, int64_t numel, const char* name) {
    if (ctx.has_input(i) && ctx.input(i).numel() != 0 && ctx.input(i).numel() != numel) {
      ctx.fail(name, " has shape ", shape_to_string(ctx.input(i).shape), ", expected ", numel, " elements");
    }
  };
  check(3, c.directions * 2 * c.gates * c.hidden, "B");
  check(4, c.batch, "sequence_lens");
  check(5, c.directions * c.batch * c.hidden, "initial_h");
  if (cell == RecurrentCell::kLstm) {
    check(6, c.directions * c.batch * c.hidden, "initial_c");
    check(7, c.directions * 3 * c.hidden, "P");
  }
  return c;
}

void register_recurrent_kernels(KernelRegistry& registry) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) registry.add({.op_type = op, .run = recurrent_kernel, .prepare = prepare_recurrent});
}

}  // namespace tessera::native
