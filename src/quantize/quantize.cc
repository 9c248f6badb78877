#include "quantize/quantize.h"

#include <filesystem>
#include <system_error>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "frontend/onnx/onnx_qdq_writer.h"
#include "artifact/safe_file.h"
#include "ir/error.h"
#include "quantize/calibration.h"
#include "quantize/quantize_internal.h"

namespace tessera::quantize {

CalibrationMethod parse_calibration_method(const std::string& text) {
  if (text == "minmax") return CalibrationMethod::kMinMax;
  if (text == "percentile") return CalibrationMethod::kPercentile;
  if (text == "entropy") return CalibrationMethod::kEntropy;
  throw_user_error("unknown calibration method '", text, "' (use minmax, percentile or entropy)");
}

const char* calibration_method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMinMax: return "minmax";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kEntropy: return "entropy";
  }
  return "?";
}

namespace {

/// A constant operand to store quantized.
struct WeightUse {
  ValueId value = kNoValue;
  int64_t axis = -1;  // the output-channel axis (used when per channel)
};

/// What the plan does with one node.
struct NodePlan {
  bool quantized = false;
  bool folded_into_range = false;      // a Relu / Clip whose producer's range is taken after it
  std::string reason;                  // why it stays float
  std::vector<ValueId> activations;    // inputs and the (post-activation) output, float tensors to quantize
  WeightUse weight;                    // Conv W, Gemm B, constant MatMul B
  const Tensor* weight_data = nullptr;
  ValueId bias = kNoValue;             // Conv B, Gemm C: int32
  const Tensor* bias_data = nullptr;
  ValueId bias_input = kNoValue;       // the activation whose scale times the weight's makes the bias scale
  size_t folded = SIZE_MAX;            // the Relu / Clip whose output is the quantized one
};

bool is_pool_or_concat(const std::string& op) {
  return op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "Concat";
}

class Planner {
 public:
  Planner(const Graph& graph, const QuantizeOptions& options) : graph_(graph), options_(options), constants_(graph) {
    consumers_.resize(graph.values.size());
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      for (ValueId in : graph.nodes[i].inputs) {
        if (in != kNoValue) consumers_[static_cast<size_t>(in)].push_back(i);
      }
    }
    for (ValueId out : graph.outputs) is_output_.insert(out);
    std::set<std::string> known;
    for (const Node& node : graph.nodes) {
      known.insert(node.name);
      known.insert(node.op_type);
    }
    for (const std::string& name : options.exclude) {
      if (!known.count(name)) throw_user_error("--exclude: the model has no node or op type named '", name, "'");
      exclude_.insert(name);
    }
  }

  std::vector<NodePlan> run() {
    std::vector<NodePlan> plans(graph_.nodes.size());
    std::vector<char> folded(graph_.nodes.size(), 0);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (folded[i]) continue;
      plans[i] = plan_node(i);
      if (plans[i].folded != SIZE_MAX) folded[plans[i].folded] = 1;
    }
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (folded[i]) {
        plans[i].quantized = true;
        plans[i].folded_into_range = true;
      }
    }
    return plans;
  }

 private:
  /// The value of a constant operand (an initializer or a Constant node's output), else null.
  const Tensor* constant(ValueId id) const { return constants_.find(id); }
  bool is_constant(ValueId id) const { return constant(id) != nullptr; }
  bool is_float_constant(ValueId id) const { return is_constant(id) && constant(id)->dtype() == DType::kFloat32; }

  /// A Clip that clamps at 0 from below (Relu6 and friends), with constant bounds.
  bool clip_from_zero(const Node& node) const {
    if (node.op_type != "Clip") return false;
    if (node.opset < 11) return node.attrs.get_float_or("min", -1.0f) == 0.0f;
    const Tensor* min = node.has_input(1) ? constant(node.inputs[1]) : nullptr;
    return min && min->numel() == 1 && min->double_at(0) == 0.0;
  }

  NodePlan refuse(std::string why) const {
    NodePlan plan;
    plan.reason = std::move(why);
    return plan;
  }

  /// The tensor whose range is taken for node i's output: after a Relu or a
  /// Clip from 0 that alone reads it (that node's index in `folded`).
  ValueId output_tensor(size_t i, size_t& folded) const {
    const Node& node = graph_.nodes[i];
    ValueId out = node.outputs.empty() ? kNoValue : node.outputs[0];
    folded = SIZE_MAX;
    if (out == kNoValue || is_output_.count(out)) return out;
    const auto& readers = consumers_[static_cast<size_t>(out)];
    if (readers.size() != 1) return out;
    const Node& next = graph_.nodes[readers[0]];
    if (exclude_.count(next.name) || exclude_.count(next.op_type)) return out;
    if ((next.op_type == "Relu" || clip_from_zero(next)) && next.inputs[0] == out && !next.outputs.empty()) {
      folded = readers[0];
      return next.outputs[0];
    }
    return out;
  }

  NodePlan plan_node(size_t i) const {
    const Node& node = graph_.nodes[i];
    const std::string& op = node.op_type;
    if (!node.domain.empty()) return refuse("not an ONNX-domain op");
    const bool compute = op == "Conv" || op == "Gemm" || op == "MatMul";
    if (!compute && op != "Add" && !is_pool_or_concat(op)) return refuse("no int8 form (stays float)");
    if (exclude_.count(node.name) || exclude_.count(op)) return refuse("excluded (--exclude)");
    if (node.outputs.empty() || node.outputs[0] == kNoValue) return refuse("no output");
    if (op == "MaxPool" && node.has_output(1)) return refuse("MaxPool with indices");
    NodePlan plan;
    plan.quantized = true;
    if (compute) {
      const ValueId a = node.inputs[0];
      const ValueId b = node.has_input(1) ? node.inputs[1] : kNoValue;
      if (is_constant(a)) return refuse("its first operand is a constant");
      plan.activations.push_back(a);
      if (is_constant(b)) {
        if (!is_float_constant(b)) return refuse("its weight is not float32");
        const int64_t rank = constant(b)->shape().size();
        plan.weight_data = constant(b);
        if (op == "Conv") {
          plan.weight = {b, 0};
        } else if (op == "Gemm") {
          plan.weight = {b, node.attrs.get_int_or("transB", 0) ? 0 : 1};
        } else {
          if (rank < 2) return refuse("a 1-D constant operand");
          plan.weight = {b, rank - 1};
        }
      } else if (op == "MatMul") {
        plan.activations.push_back(b);  // two activations (attention's products)
      } else {
        return refuse("its weight is not a constant");
      }
      if ((op == "Conv" || op == "Gemm") && node.has_input(2)) {
        const ValueId c = node.inputs[2];
        const int64_t channels = constant(b)->shape()[static_cast<size_t>(plan.weight.axis)];
        if (!is_float_constant(c)) return refuse("its bias is not a float32 constant");
        const Shape& shape = constant(c)->shape();
        if (shape.size() == 1 && shape[0] == channels) {
          plan.bias = c;
          plan.bias_data = constant(c);
          plan.bias_input = a;
        } else if (op == "Gemm") {
          return refuse("its C operand is not a bias vector of " + std::to_string(channels) + " values");
        }
      }
    } else {
      for (ValueId in : node.inputs) {
        if (in == kNoValue) continue;
        if (is_constant(in)) return refuse("a constant operand");
        if (std::find(plan.activations.begin(), plan.activations.end(), in) == plan.activations.end()) {
          plan.activations.push_back(in);
        }
      }
      if (op == "Add" && plan.activations.size() != 2) return refuse("adds a tensor to itself");
    }
    size_t folded = SIZE_MAX;
    const ValueId out = output_tensor(i, folded);
    plan.folded = folded;
    if (!is_output_.count(out)) plan.activations.push_back(out);  // model outputs stay float32
    return plan;
  }

  const Graph& graph_;
  const QuantizeOptions& options_;
  std::vector<std::vector<size_t>> consumers_;
  std::set<ValueId> is_output_;
  std::set<std::string> exclude_;
  ConstantOperands constants_;
};

/// The activations the quantized nodes of `plans` need, each once, in plan order.
std::vector<ValueId> planned_tensors(const std::vector<NodePlan>& plans) {
  std::vector<ValueId> tensors;
  for (const NodePlan& p : plans) {
    if (!p.quantized) continue;
    for (ValueId v : p.activations) {
      if (std::find(tensors.begin(), tensors.end(), v) == tensors.end()) tensors.push_back(v);
    }
  }
  return tensors;
}

struct ActivationParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

/// uint8, asymmetric, with 0 exactly representable (ONNX Runtime's default for activations).
ActivationParams uint8_params(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  ActivationParams p;
  if (!(hi - lo > 1e-30) || !std::isfinite(hi - lo)) return p;  // constant zero (or no finite value): scale 1
  p.scale = static_cast<float>((hi - lo) / 255.0);
  p.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / p.scale), 0.0, 255.0));
  return p;
}

}  // namespace

void write_qdq_model(const std::string& model_path, const std::string& output_path, const onnx_frontend::QdqPlan& plan) {
  const std::string bytes = onnx_frontend::make_qdq_model(model_path, output_path, plan);
  try {
    safe_file::replace_file(output_path, [&](const safe_file::Sink& sink) { sink(bytes.data(), bytes.size()); });
  } catch (const safe_file::WriteError& e) {
    throw_user_error(e.what());
  }
}

void write_left_in_float(std::ostream& out, const FloatOps& float_ops) {
  if (!float_ops.empty()) out << "left in float:\n";
  for (const auto& [op, reasons] : float_ops) {
    for (const auto& [reason, nodes] : reasons) {
      out << "  " << op << " (" << nodes.size() << "): " << reason;
      if (nodes.size() <= 3) {
        out << ":";
        for (const auto& n : nodes) out << " '" << n << "'";
      }
      out << "\n";
    }
  }
}

onnx_frontend::QdqConstant quantize_weight(const std::string& name, const Tensor& w, int64_t axis) {
  onnx_frontend::QdqConstant out;
  out.tensor = name;
  out.axis = axis;
  const Shape& shape = w.shape();
  const int64_t channels = axis >= 0 ? shape[static_cast<size_t>(axis)] : 1;
  int64_t inner = 1;
  if (axis >= 0) {
    for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  }
  const float* src = w.as<float>();
  const int64_t n = w.numel();
  auto channel_of = [&](int64_t k) { return axis >= 0 ? (k / inner) % channels : 0; };
  std::vector<float> max_abs(static_cast<size_t>(channels), 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    if (!std::isfinite(src[k])) throw_user_error("weight '", name, "' holds NaN or infinity: it cannot be quantized");
    float& m = max_abs[static_cast<size_t>(channel_of(k))];
    m = std::max(m, std::fabs(src[k]));
  }
  out.scales.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float m = max_abs[static_cast<size_t>(c)];
    out.scales[static_cast<size_t>(c)] = m > 0 ? m / 127.0f : 1.0f;
  }
  out.quantized = Tensor(DType::kInt8, shape);
  int8_t* dst = out.quantized.as<int8_t>();
  for (int64_t k = 0; k < n; ++k) {
    const float q = std::nearbyint(src[k] / out.scales[static_cast<size_t>(channel_of(k))]);
    dst[k] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
  }
  return out;
}

Quantizer::Quantizer(std::string model_path, Graph graph, CompileOptions compile, QuantizeOptions options)
    : model_path_(std::move(model_path)), graph_(std::move(graph)), compile_(std::move(compile)), options_(std::move(options)) {
  if (options_.method == CalibrationMethod::kPercentile && !(options_.percentile > 50.0 && options_.percentile <= 100.0)) {
    throw_user_error("--percentile must be above 50 and at most 100 (got ", options_.percentile, ")");
  }
  // Quantizing twice would put a second QuantizeLinear / DequantizeLinear pair on values that already have one.
  for (const Node& node : graph_.nodes) {
    const std::string& op = node.op_type;
    if (node.domain.empty() && (op == "QuantizeLinear" || op == "DequantizeLinear" || op == "QLinearConv" ||
                                op == "QLinearMatMul" || op == "ConvInteger" || op == "MatMulInteger" ||
                                op == "DynamicQuantizeLinear")) {
      throw_user_error("'", model_path_, "' is already quantized (", node.describe(),
                       "): quantize the float model it came from");
    }
  }
}

Quantizer::~Quantizer() = default;

void Quantizer::add_sample(const std::vector<TensorView>& inputs) {
  if (inputs.size() != graph_.inputs.size()) {
    throw_user_error("a calibration sample has ", inputs.size(), " tensors; the model has ", graph_.inputs.size(), " inputs");
  }
  std::vector<Tensor> copy;
  for (size_t k = 0; k < inputs.size(); ++k) {
    copy.push_back(Tensor::from_view(inputs[k]));
    const Tensor& t = copy.back();
    if (t.dtype() != DType::kFloat32) continue;
    for (int64_t e = 0; e < t.numel(); ++e) {
      if (!std::isfinite(t.as<float>()[e])) {
        // A range measured around NaN or infinity would describe no real input.
        throw_user_error("calibration sample ", samples_.size() + 1, ": input '", graph_.value(graph_.inputs[k]).name,
                         "' has a non-finite value (", t.as<float>()[e], ") at element ", e,
                         "; calibration samples must be finite");
      }
    }
  }
  samples_.push_back(std::move(copy));
}

std::vector<std::vector<Tensor>> Quantizer::random_samples() const {
  if (options_.random_samples <= 0) throw_user_error("no calibration samples: give some, or a number of random ones");
  // The row count of a table an integer input indexes through Gather.
  std::map<ValueId, int64_t> index_range;
  for (const Node& node : graph_.nodes) {
    if (node.op_type != "Gather" || node.inputs.size() < 2 || !graph_.is_constant(node.inputs[0])) continue;
    const Shape& table = graph_.value(node.inputs[0]).constant->shape();
    int64_t axis = node.attrs.get_int_or("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(table.size());
    if (axis < 0 || axis >= static_cast<int64_t>(table.size())) continue;
    auto [it, added] = index_range.emplace(node.inputs[1], table[static_cast<size_t>(axis)]);
    if (!added) it->second = std::min(it->second, table[static_cast<size_t>(axis)]);
  }
  std::mt19937_64 rng(options_.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<Tensor>> out;
  for (int s = 0; s < options_.random_samples; ++s) {
    std::vector<Tensor> sample;
    for (ValueId id : graph_.inputs) {
      const TensorType& type = graph_.value(id).type;
      Shape shape = type.dims;
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      auto bound = compile_.input_shapes.find(graph_.value(id).name);
      if (bound != compile_.input_shapes.end()) shape = bound->second;
      Tensor t(type.dtype, shape);
      const int64_t n = t.numel();
      switch (type.dtype) {
        case DType::kFloat32:
          for (int64_t k = 0; k < n; ++k) t.as<float>()[k] = normal(rng);
          break;
        case DType::kInt64:
        case DType::kInt32: {
          auto range = index_range.find(id);
          std::uniform_int_distribution<int64_t> pick(0, range != index_range.end() ? std::max<int64_t>(range->second - 1, 0) : 0);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t v = range != index_range.end() ? pick(rng) : 1;
            if (type.dtype == DType::kInt64) t.as<int64_t>()[k] = v;
            else t.as<int32_t>()[k] = static_cast<int32_t>(v);
          }
          break;
        }
        case DType::kBool:
          for (int64_t k = 0; k < n; ++k) t.as<bool>()[k] = true;
          break;
        default:
          throw_user_error("input '", graph_.value(id).name, "' is ", dtype_name(type.dtype),
                           ": random calibration makes float32, int32, int64 and bool inputs only; give samples instead");
      }
      sample.push_back(std::move(t));
    }
    out.push_back(std::move(sample));
  }
  return out;
}

std::string Quantizer::write(const std::string& output_path) {
  // Writing over the float model would lose it (and the writer reads it again for its protobuf).
  std::error_code same_error;
  if (std::filesystem::exists(output_path, same_error) &&
      std::filesystem::equivalent(output_path, model_path_, same_error)) {
    throw_user_error("quantize: the output '", output_path, "' is the float model '", model_path_,
                     "' itself; write the quantized model to another file");
  }
  if (options_.weights_only) return write_weights_only(output_path);
  const bool random = samples_.empty();
  const std::vector<std::vector<Tensor>> samples = random ? random_samples() : samples_;

  Planner planner(graph_, options_);
  std::vector<NodePlan> plans = planner.run();

  // The calibration model: the graph with every tensor to be quantized as an output.
  Graph calibration_graph = graph_;
  for (ValueId v : planned_tensors(plans)) {
    if (std::find(calibration_graph.outputs.begin(), calibration_graph.outputs.end(), v) == calibration_graph.outputs.end()) {
      calibration_graph.outputs.push_back(v);
    }
  }
  CompileOptions compile = compile_;
  for (size_t k = 0; k < graph_.inputs.size(); ++k) {
    compile.input_shapes[graph_.value(graph_.inputs[k]).name] = samples.front()[k].shape();
  }
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(std::move(calibration_graph), compile);

  // Tensors that turn out not to be float32 take their nodes out of the plan.
  std::map<std::string, size_t> output_index;
  for (size_t k = 0; k < model->outputs().size(); ++k) output_index[model->outputs()[k].name] = k;
  for (size_t i = 0; i < plans.size(); ++i) {
    NodePlan& p = plans[i];
    if (!p.quantized || p.folded_into_range) continue;
    for (ValueId v : p.activations) {
      const ValueDesc& desc = model->outputs()[output_index.at(graph_.value(v).name)];
      if (desc.dtype != DType::kFloat32) {
        if (p.folded != SIZE_MAX) plans[p.folded] = NodePlan{.reason = "its producer stays float"};
        p = NodePlan{.reason = str_cat("'", desc.name, "' is ", dtype_name(desc.dtype), ", not float32")};
        break;
      }
    }
  }
  const std::vector<ValueId> calibrated = planned_tensors(plans);
  std::vector<size_t> outputs_of;
  for (ValueId v : calibrated) outputs_of.push_back(output_index.at(graph_.value(v).name));

  // Calibration: ranges (and, for percentile / entropy, histograms in a second pass).
  std::vector<RangeStats> stats(calibrated.size());
  const bool histograms = options_.method != CalibrationMethod::kMinMax;
  for (int pass = 0; pass < (histograms ? 2 : 1); ++pass) {
    const std::string phase = pass == 0 ? "calibrating" : "histograms";
    for (size_t s = 0; s < samples.size(); ++s) {
      std::vector<TensorView> views;
      for (const Tensor& t : samples[s]) views.push_back(t.view());
      std::vector<Tensor> outs = model->run(views);
      for (size_t k = 0; k < calibrated.size(); ++k) {
        const Tensor& t = outs[outputs_of[k]];
        if (pass == 0) stats[k].add_range(t.as<float>(), t.numel());
        else stats[k].add_histogram(t.as<float>(), t.numel(), options_.method == CalibrationMethod::kEntropy);
      }
      if (options_.progress) options_.progress(phase, static_cast<int64_t>(s + 1), static_cast<int64_t>(samples.size()));
    }
  }

  // Parameters, weights and biases.
  onnx_frontend::QdqPlan plan;
  std::map<ValueId, ActivationParams> params;
  std::vector<std::string> non_finite_notes;
  for (size_t k = 0; k < calibrated.size(); ++k) {
    const std::string& name = graph_.value(calibrated[k]).name;
    if (!stats[k].seen()) {
      throw_user_error("calibration: tensor '", name, "' has no finite value in any of the ", samples.size(),
                       " samples (", stats[k].non_finite(), " NaN or infinite values): no range to quantize it to");
    }
    if (stats[k].non_finite() > 0) {
      non_finite_notes.push_back("tensor '" + name + "': " + std::to_string(stats[k].non_finite()) +
                                 " NaN or infinite values left out of its range");
    }
    const auto [lo, hi] = stats[k].range(options_.method, options_.percentile);
    params[calibrated[k]] = uint8_params(lo, hi);
  }
  // MaxPool's output takes its input's parameters (its values are a subset of the input's), so that
  // the pair folds into a MaxPool on the 8-bit values (passes/fold_qdq.cc), as ONNX Runtime's does.
  for (size_t i = 0; i < plans.size(); ++i) {
    const Node& node = graph_.nodes[i];
    if (!plans[i].quantized || node.op_type != "MaxPool" || plans[i].activations.size() != 2) continue;
    params[plans[i].activations[1]] = params.at(plans[i].activations[0]);
  }
  for (ValueId v : calibrated) {
    plan.activations.push_back({graph_.value(v).name, params.at(v).scale, params.at(v).zero_point, false});
  }
  std::map<ValueId, size_t> weight_entry;
  int64_t weights = 0, biases = 0;
  std::vector<std::string> bias_notes;
  for (size_t i = 0; i < plans.size(); ++i) {
    const NodePlan& p = plans[i];
    if (!p.quantized || p.weight.value == kNoValue) continue;
    const Node& node = graph_.nodes[i];
    const std::string consumer = graph_.value(node.outputs[0]).name;
    // A weight shared by several nodes is stored once (with the axis of its first reader).
    auto [entry, added] = weight_entry.emplace(p.weight.value, plan.constants.size());
    if (added) {
      const Tensor& w = *p.weight_data;
      plan.constants.push_back(quantize_weight(graph_.value(p.weight.value).name, w, options_.per_channel ? p.weight.axis : -1));
      ++weights;
    }
    plan.constants[entry->second].consumers.push_back(consumer);
    if (p.bias == kNoValue) continue;
    const onnx_frontend::QdqConstant& w = plan.constants[entry->second];
    const Tensor& bias = *p.bias_data;
    const float input_scale = params.at(p.bias_input).scale;
    onnx_frontend::QdqConstant b;
    b.tensor = graph_.value(p.bias).name;
    b.axis = w.axis >= 0 ? 0 : -1;
    b.consumers = {consumer};
    b.quantized = Tensor(DType::kInt32, bias.shape());
    bool fits = true;
    for (int64_t c = 0; c < bias.numel(); ++c) {
      const double scale = static_cast<double>(input_scale) * w.scales[w.axis >= 0 ? static_cast<size_t>(c) : 0];
      const double q = std::nearbyint(bias.as<float>()[c] / scale);
      if (!(std::fabs(q) < 2147483647.0)) fits = false;
      else b.quantized.as<int32_t>()[c] = static_cast<int32_t>(q);
    }
    if (w.axis >= 0) {
      for (float s : w.scales) b.scales.push_back(input_scale * s);
    } else {
      b.scales = {input_scale * w.scales[0]};
    }
    if (!fits) {
      bias_notes.push_back(str_cat("bias '", b.tensor, "' of '", node.name, "' stays float32: it does not fit int32 at scale ",
                                   b.scales[0]));
      continue;
    }
    plan.constants.push_back(std::move(b));
    ++biases;
  }
  write_qdq_model(model_path_, output_path, plan);

  // The summary.
  std::map<std::string, int64_t> quantized_ops, folded_ops;
  FloatOps float_ops;
  int64_t quantized_nodes = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Node& node = graph_.nodes[i];
    if (plans[i].folded_into_range) {
      ++folded_ops[node.op_type];
    } else if (plans[i].quantized) {
      ++quantized_ops[node.op_type];
      ++quantized_nodes;
    } else if (node.op_type != "Constant") {
      float_ops[node.op_type][plans[i].reason].push_back(node.name);
    }
  }
  std::ostringstream out;
  out << "calibration: " << calibration_method_name(options_.method);
  if (options_.method == CalibrationMethod::kPercentile) out << " (" << options_.percentile << "%)";
  out << " over " << samples.size() << (random ? " random samples (seed " + std::to_string(options_.seed) + ")" : " samples")
      << "\n";
  out << "weights int8 symmetric " << (options_.per_channel ? "per output channel" : "per tensor")
      << ", activations uint8 asymmetric, biases int32\n";
  out << "quantized " << quantized_nodes << " of " << graph_.nodes.size() << " nodes:";
  const char* separator = " ";
  for (const auto& [op, n] : quantized_ops) {
    out << separator << op << " " << n;
    separator = ", ";
  }
  out << (quantized_ops.empty() ? " none" : "") << "\n";
  if (!folded_ops.empty()) {
    out << "folded into the requantisation of the node before them:";
    for (const auto& [op, n] : folded_ops) out << " " << op << " " << n;
    out << "\n";
  }
  out << "tensors: " << plan.activations.size() << " activations, " << weights << " weights, " << biases << " biases\n";
  for (const std::string& note : bias_notes) out << note << "\n";
  for (const std::string& note : non_finite_notes) out << "warning: " << note << "\n";
  write_left_in_float(out, float_ops);
  return out.str();
}

}  // namespace tessera::quantize
