// Constant slots: the plain float32 data a constant slot holds before it is
// reordered into its layout (once, when the region is loaded), with the
// transforms lowering chose: BatchNormalization folded into a Conv's weights
// and bias, Gemm's transposed or scaled operands, ConvTranspose's weights
// in oneDNN's order.
#include <algorithm>
#include <cmath>

#include "backends/dnnl/dnnl_internal.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

const Tensor& float_constant(const Graph& region, int32_t id, const char* what) {
  if (id < 0 || static_cast<size_t>(id) >= region.values.size() || !region.values[static_cast<size_t>(id)].constant) {
    throw_user_error("oneDNN payload: ", what, " names value ", id, ", which is not a constant of the region");
  }
  const Tensor& t = *region.values[static_cast<size_t>(id)].constant;
  // Quantized weights (int8, uint8) and biases (int32) are held as floats until the
  // load-time reorder converts them into their slot's type (exact for 8-bit values).
  const DType d = t.dtype();
  if (d != DType::kFloat32 && d != DType::kInt8 && d != DType::kUInt8 && d != DType::kInt32) {
    throw_user_error("oneDNN payload: constant '", region.values[static_cast<size_t>(id)].name, "' is ", dtype_name(d),
                     ", not float32 or an 8-bit or int32 quantized constant");
  }
  return t;
}

std::vector<float> to_vector(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kInt8: return std::vector<float>(t.as<int8_t>(), t.as<int8_t>() + t.numel());
    case DType::kUInt8: return std::vector<float>(t.as<uint8_t>(), t.as<uint8_t>() + t.numel());
    case DType::kInt32: return std::vector<float>(t.as<int32_t>(), t.as<int32_t>() + t.numel());
    default: return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }
}

void expect_size(const std::vector<float>& data, int64_t count, const char* what) {
  if (static_cast<int64_t>(data.size()) != count) {
    throw_user_error("oneDNN payload: ", what, " has ", data.size(), " elements, its slot ", count);
  }
}

}  // namespace

const float* constant_plain_view(const Graph& region, const Slot& slot) {
  if (slot.transform != ConstantTransform::kNone || slot.sources.empty() || slot.sources[0] < 0 ||
      static_cast<size_t>(slot.sources[0]) >= region.values.size()) {
    return nullptr;
  }
  const std::shared_ptr<const Tensor>& constant = region.values[static_cast<size_t>(slot.sources[0])].constant;
  if (!constant || constant->dtype() != DType::kFloat32) return nullptr;
  int64_t count = 1;
  for (int64_t d : slot.dims) {
    if (d <= 0 || d > kMaxSlotDim) return nullptr;
    count *= d;
    if (count > kMaxConstantElements) return nullptr;
  }
  return constant->numel() == count ? constant->as<float>() : nullptr;
}

std::vector<float> constant_plain_data(const Graph& region, const Slot& slot) {
  int64_t count = 1;
  for (int64_t d : slot.dims) {
    if (d <= 0 || d > kMaxSlotDim) throw_user_error("oneDNN payload: constant slot has dim ", d);
    count *= d;
    if (count > kMaxConstantElements) throw_user_error("oneDNN payload: constant slot too large");
  }
  // Any numeric constant (read through to_vector), or float32 only where a transform reads floats directly.
  auto source = [&](size_t i, const char* what) -> const Tensor& {
    if (i >= slot.sources.size()) throw_user_error("oneDNN payload: constant slot misses source ", i);
    return float_constant(region, slot.sources[i], what);
  };
  auto float32_source = [&](size_t i, const char* what) -> const Tensor& {
    const Tensor& t = source(i, what);
    if (t.dtype() != DType::kFloat32) throw_user_error("oneDNN payload: ", what, " is not float32");
    return t;
  };
  auto parameter = [&](size_t i) {
    if (i >= slot.floats.size()) throw_user_error("oneDNN payload: constant slot misses parameter ", i);
    return slot.floats[i];
  };
  switch (slot.transform) {
    case ConstantTransform::kNone:
    case ConstantTransform::kGroupedWeights: {
      std::vector<float> data = to_vector(source(0, "constant"));
      expect_size(data, count, "constant");
      return data;
    }
    case ConstantTransform::kScaled: {
      std::vector<float> data = to_vector(source(0, "scaled constant"));
      expect_size(data, count, "scaled constant");
      for (float& v : data) v *= parameter(0);
      return data;
    }
    case ConstantTransform::kTranspose2d: {
      const Tensor& t = source(0, "transposed constant");
      if (t.shape().size() != 2 || slot.dims.size() != 2 || t.shape()[0] != slot.dims[1] || t.shape()[1] != slot.dims[0]) {
        throw_user_error("oneDNN payload: transposed constant does not match its slot");
      }
      const float scale = slot.floats.empty() ? 1.0f : slot.floats[0];
      const int64_t rows = t.shape()[0], cols = t.shape()[1];
      const std::vector<float> values = to_vector(t);  // int8 weights too
      std::vector<float> data(static_cast<size_t>(count));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) data[static_cast<size_t>(c * rows + r)] = scale * values[static_cast<size_t>(r * cols + c)];
      }
      return data;
    }
    case ConstantTransform::kDeconvolutionWeights: {
      // ONNX [I, O/g, k...] (I = g * I/g) to oneDNN [O/g, I, k...] (g = 1) or [g, O/g, I/g, k...].
      const Tensor& t = source(0, "ConvTranspose weights");
      const std::vector<int64_t>& w = t.shape();
      const bool grouped = slot.dims.size() == w.size() + 1;
      if (w.size() < 3 || (!grouped && slot.dims.size() != w.size())) {
        throw_user_error("oneDNN payload: ConvTranspose weights do not match their slot");
      }
      const int64_t groups = grouped ? slot.dims[0] : 1;
      const size_t first = grouped ? 1 : 0;  // where [O/g, I/g, k...] starts in the slot's dims
      const int64_t out_per_group = w[1], in_total = w[0];
      const int64_t in_per_group = groups > 0 ? in_total / groups : 0;
      int64_t spatial = 1;
      for (size_t i = 2; i < w.size(); ++i) {
        spatial *= w[i];
        if (slot.dims[first + i] != w[i]) throw_user_error("oneDNN payload: ConvTranspose weights do not match their slot");
      }
      if (groups <= 0 || in_per_group * groups != in_total || slot.dims[first] != out_per_group ||
          slot.dims[first + 1] != in_per_group || t.numel() != count) {
        throw_user_error("oneDNN payload: ConvTranspose weights do not match their slot");
      }
      const std::vector<float> values = to_vector(t);
      const float* from = values.data();
      std::vector<float> data(static_cast<size_t>(count));
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t i = 0; i < in_per_group; ++i) {
          for (int64_t o = 0; o < out_per_group; ++o) {
            const float* src = from + ((g * in_per_group + i) * out_per_group + o) * spatial;
            float* dst = data.data() + ((g * out_per_group + o) * in_per_group + i) * spatial;
            std::copy(src, src + spatial, dst);
          }
        }
      }
      return data;
    }
    case ConstantTransform::kFoldBatchNormWeights: {
      std::vector<float> data = to_vector(source(0, "folded weights"));
      expect_size(data, count, "folded weights");
      const Tensor& scale = float32_source(1, "batch-norm scale");
      const Tensor& var = float32_source(2, "batch-norm variance");
      const int64_t channels = scale.numel();
      if (channels <= 0 || var.numel() != channels || count % channels != 0) {
        throw_user_error("oneDNN payload: batch-norm parameters do not match the weights");
      }
      const int64_t per_channel = count / channels;
      const float eps = parameter(0);
      for (int64_t o = 0; o < channels; ++o) {
        const float f = scale.as<float>()[o] / std::sqrt(var.as<float>()[o] + eps);
        for (int64_t k = 0; k < per_channel; ++k) data[static_cast<size_t>(o * per_channel + k)] *= f;
      }
      return data;
    }
    case ConstantTransform::kFoldBatchNormBias: {
      std::vector<float> data(static_cast<size_t>(count), 0.0f);
      if (!slot.sources.empty() && slot.sources[0] >= 0) {
        data = to_vector(source(0, "conv bias"));
        expect_size(data, count, "conv bias");
      }
      const Tensor& scale = float32_source(1, "batch-norm scale");
      const Tensor& shift = float32_source(2, "batch-norm shift");
      const Tensor& mean = float32_source(3, "batch-norm mean");
      const Tensor& var = float32_source(4, "batch-norm variance");
      for (const Tensor* t : {&scale, &shift, &mean, &var}) {
        if (t->numel() != count) throw_user_error("oneDNN payload: batch-norm parameters do not match the bias");
      }
      const float eps = parameter(0);
      for (int64_t o = 0; o < count; ++o) {
        const float f = scale.as<float>()[o] / std::sqrt(var.as<float>()[o] + eps);
        data[static_cast<size_t>(o)] = (data[static_cast<size_t>(o)] - mean.as<float>()[o]) * f + shift.as<float>()[o];
      }
      return data;
    }
  }
  throw_user_error("oneDNN payload: unknown constant transform");
}

std::optional<float> finite_scalar_constant(const Graph& graph, ValueId id) {
  if (!graph.is_constant(id)) return std::nullopt;
  const Tensor& t = *graph.value(id).constant;
  if (t.dtype() != DType::kFloat32 || t.numel() != 1 || !std::isfinite(t.as<float>()[0])) return std::nullopt;
  return t.as<float>()[0];
}

}  // namespace tessera::dnnl_backend
