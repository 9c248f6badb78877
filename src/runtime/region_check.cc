// Accuracy check, region by region (CompiledModel::check, `tessera check`).
//
// Contract: one run of the compiled model on the caller's inputs, every
// region as compiled (its backend, precision and fused patterns); device
// regions run standalone, so every boundary value is on the host after its
// region. Before each region its inputs are copied aside (the memory plan may
// reuse their slots inside the region); after it, the same nodes without
// composites run on the native backend in float32 on those copies, and each
// region output is compared with native's: max |actual - reference|, that
// over max |reference| (the relative error), cosine similarity of the finite
// elements, and NaN/Inf placed differently; integer and bool outputs exactly.
// A region over its tolerance is flagged: that is how a user finds the backend
// (or the precision) that is wrong. Regions of native itself are not compared,
// unless the reference is float64: then every float32 value, constant and
// Cast target of the region graph is widened to float64 (subgraphs too) and
// native runs that; a region native has no float64 kernel for is reported as
// not checked, with the reason.
// The model's own outputs are not changed: each region goes on from its own
// outputs, as in a normal run.
#include <cmath>
#include <cstring>

#include "ir/error.h"
#include "runtime/backend_registry.h"
#include "runtime/region_plan.h"
#include "runtime/session.h"

namespace tessera {
namespace {

Tensor widened(const Tensor& t) {
  Tensor wide(DType::kFloat64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) wide.as<double>()[i] = t.as<float>()[i];
  return wide;
}

/// Every float32 value, constant and Cast/CastLike target of `graph` (and its subgraphs) as float64.
void widen_to_float64(Graph& graph) {
  for (Value& v : graph.values) {
    if (v.type.dtype != DType::kFloat32) continue;
    v.type.dtype = DType::kFloat64;
    if (v.constant) v.constant = std::make_shared<const Tensor>(widened(*v.constant));
  }
  constexpr int64_t kOnnxFloat = 1, kOnnxDouble = 11;
  for (Node& node : graph.nodes) {
    if (node.domain.empty() && node.op_type == "Cast" && node.attrs.get_int_or("to", 0) == kOnnxFloat) {
      node.attrs.set("to", Attribute::of_int(kOnnxDouble));
    }
    for (const auto& [name, attribute] : node.attrs.all()) {
      if (attribute.graph) widen_to_float64(*attribute.graph);
    }
  }
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

/// `quantized`: 8-bit outputs of quantized ops are compared as numbers (a requantisation rounds a
/// tie either way), not exactly.
CheckedOutput compare(const std::string& name, const TensorView& actual, const TensorView& reference, double tolerance,
                      double min_cosine, bool quantized) {
  CheckedOutput out;
  out.name = name;
  out.type = std::string(dtype_name(actual.dtype)) + "[" + shape_to_string(reference.shape) + "]";
  out.elements = reference.numel();
  out.floating = is_floating(reference.dtype) ||
                 (quantized && (reference.dtype == DType::kUInt8 || reference.dtype == DType::kInt8));
  const bool widened_reference = actual.dtype == DType::kFloat32 && reference.dtype == DType::kFloat64;
  if ((actual.dtype != reference.dtype && !widened_reference) || actual.shape != reference.shape) {
    out.mismatches = out.elements;
    out.within_tolerance = false;
    out.type += " (the region gave " + std::string(dtype_name(actual.dtype)) + "[" + shape_to_string(actual.shape) + "])";
    return out;
  }
  if (!out.floating) {
    const size_t element = dtype_size(reference.dtype);
    const auto* a = static_cast<const uint8_t*>(actual.data);
    const auto* b = static_cast<const uint8_t*>(reference.data);
    for (int64_t i = 0; i < out.elements; ++i) {
      if (std::memcmp(a + i * element, b + i * element, element) != 0) ++out.mismatches;
    }
    out.within_tolerance = out.mismatches == 0;
    return out;
  }
  double dot = 0, xx = 0, yy = 0;
  for (int64_t i = 0; i < out.elements; ++i) {
    const double x = view_double_at(actual, i), y = view_double_at(reference, i);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      // Both NaN, or the same infinity: agreement. Anything else is a mismatch.
      const bool same = (std::isnan(x) && std::isnan(y)) || (!std::isnan(x) && x == y);
      if (!same) ++out.mismatches;
      continue;
    }
    out.max_abs_error = std::max(out.max_abs_error, std::fabs(x - y));
    out.max_reference = std::max(out.max_reference, std::fabs(y));
    dot += x * y;
    xx += x * x;
    yy += y * y;
  }
  out.relative_error = out.max_reference > 0 ? out.max_abs_error / out.max_reference : (out.max_abs_error > 0 ? INFINITY : 0);
  out.cosine = xx > 0 && yy > 0 ? dot / std::sqrt(xx * yy) : (xx == yy ? 1.0 : 0.0);
  out.within_tolerance = out.mismatches == 0 && out.relative_error <= tolerance && (min_cosine <= 0 || out.cosine >= min_cosine);
  return out;
}

}  // namespace

CheckReport CompiledModel::check(const std::vector<TensorView>& inputs, const CheckOptions& options,
                                 const std::string& model_name) const {
  validate_inputs(inputs);
  const BackendEntry& reference_entry = fallback_backend();
  CheckReport report;
  report.model = model_name;
  report.reference = reference_entry.name + (options.float64_reference ? " (float64)" : " (float32)");
  Buffer arena(static_cast<size_t>(memory_plan_.arena_bytes), false);
  RunStore store(graph_, memory_plan_, arena, /*poison=*/true);  // a value nobody wrote shows as NaN
  for (size_t i = 0; i < inputs.size(); ++i) store.bind(graph_.inputs[i], inputs[i]);
  ResidentValues resident;
  std::unique_ptr<Backend> reference;
  for (size_t r = 0; r < regions_.size(); ++r) {
    const RegionPlan& plan = *regions_[r];
    const Region& region = partition_.regions[r];
    CheckedRegion checked;
    checked.index = r;
    checked.backend = plan.backend->name();
    checked.node_count = region.nodes.size();
    if (!region.nodes.empty()) checked.first_node = graph_.nodes[region.nodes.front()].name;
    size_t bf16 = 0, int8 = 0;
    for (size_t node : region.nodes) {
      bf16 += placement_[node].precision == "bf16" ? 1 : 0;
      const std::string& op = graph_.nodes[node].op_type;
      int8 += op == "QLinearConv" || op == "QLinearMatMul" || op == "QuantizeLinear" || op == "ConvInteger" ||
              op == "MatMulInteger";
    }
    auto counted = [](size_t n) { return " (" + std::to_string(n) + (n == 1 ? " node)" : " nodes)"); };
    checked.precision = int8 ? "int8" + counted(int8) : bf16 ? "bf16" + counted(bf16) : "fp32";
    // int8: the reference computes the QDQ graph's exact meaning; a backend may round a tie the other
    // way (one step of an output's scale), and oneDNN's fusions skip roundings (the residual's, a
    // dequantized product's), which brings it nearer float32 but away from the exact QDQ values. Such
    // steps compound over a region: a BERT-base region of 242 quantized nodes ends at cosine 0.9977 of
    // the exact QDQ values (and 0.9990 of float32, against 0.9983 for the exact QDQ values).
    checked.tolerance = options.tolerance >= 0 ? options.tolerance
                        : int8                 ? kCheckToleranceInt8
                        : bf16                 ? kCheckToleranceBf16
                                               : kCheckToleranceFloat32;
    checked.min_cosine = options.min_cosine >= 0 ? options.min_cosine : int8 ? kCheckCosineInt8 : bf16 ? kCheckCosineBf16 : 0.0;
    checked.compared = checked.backend != reference_entry.name || options.float64_reference;

    std::vector<Tensor> region_inputs;
    if (checked.compared) {
      for (ValueId id : region.inputs) region_inputs.push_back(Tensor::from_view(store.get(id)));
    }
    // A profile only to learn whether the region ran on native (the non-finite guard's fallback): its
    // outputs are then native's own, and comparing them with native would show an error of 0 that says
    // nothing about the region's backend.
    RunProfile fallbacks;
    fallbacks.time_nodes = false;
    fallbacks.node_milliseconds.assign(placement_.size(), 0.0);
    fallbacks.region_milliseconds.assign(regions_.size(), 0.0);
    fallbacks.region_fallbacks.assign(regions_.size(), 0);
    run_region(plan, store, resident, &fallbacks, r, /*standalone=*/true);
    if (checked.compared && fallbacks.region_fallbacks[r] > 0) {
      checked.compared = false;
      checked.note = "not compared: an input or constant holds NaN or infinity, so the region ran on " +
                     reference_entry.name + " (" + checked.backend + " is exact only for finite inputs)";
      report.regions.push_back(std::move(checked));
      continue;
    }
    if (checked.compared) {
      if (!reference) reference = reference_entry.make(plan.fallback_options);
      Region plain = region;
      plain.composites.clear();
      RegionGraph graph = extract_region(graph_, plain);
      if (options.float64_reference) {
        widen_to_float64(graph.graph);
        for (Tensor& t : region_inputs) {
          if (t.dtype() == DType::kFloat32) t = widened(t);
        }
      }
      // extract_region lists the region graph's inputs in region.inputs order.
      DetachedRegionStore reference_store(graph.graph);
      for (size_t k = 0; k < graph.graph.inputs.size(); ++k) {
        const ValueId local = graph.graph.inputs[k];
        if (k >= region.inputs.size() || graph.global_value[static_cast<size_t>(local)] != region.inputs[k]) {
          throw_internal_error("check: region ", r, " graph input ", k, " is not its boundary input ", k);
        }
        reference_store.bind(local, region_inputs[k].view());
      }
      std::unique_ptr<ExecutableRegion> executable;
      try {
        executable = reference->compile(graph.graph, plan.fallback_options).executable;
        executable->run(reference_store);
      } catch (const Error& e) {
        if (!options.float64_reference) throw;
        // A float64 kernel native lacks: say so for this region and go on.
        checked.compared = false;
        checked.note = std::string("no float64 reference: ") + e.what();
        report.regions.push_back(std::move(checked));
        continue;
      }
      for (ValueId local : graph.graph.outputs) {
        const ValueId global = graph.global_value[static_cast<size_t>(local)];
        checked.outputs.push_back(compare(graph_.value(global).name, store.get(global), reference_store.get(local),
                                          checked.tolerance, checked.min_cosine, int8 > 0));
        checked.within_tolerance &= checked.outputs.back().within_tolerance;
      }
    }
    if (!checked.within_tolerance) ++report.regions_over_tolerance;
    report.regions.push_back(std::move(checked));
  }
  return report;
}

}  // namespace tessera
