// Native Conv and ConvTranspose. float32 Conv runs on the packed GEMM:
// Y[g] (Cout/g x spatial) = W[g] (Cout/g x Cin/g*k) * im2col(X[g]); a 1x1,
// stride-1, unpadded conv reads X directly as B; 1-D and 2-D convs whose
// rows are not much wider padded than the output read im2col in place from
// zero-padded phase images (conv_implicit_im2col, no B packing); the rest
// (3-D, very narrow outputs) pack B straight from X (im2col fused into
// packing); depthwise convs use a direct kernel. 3x3 stride-1 convs with
// constant weights and enough tiles run Winograd F(4x4, 3x3) instead
// (nn_conv_winograd.cc). Constant weights are packed once in prepare (their
// Winograd transform at the first run that needs it). float64 uses the
// references.
#include <algorithm>
#include <mutex>
#include <optional>
#include <type_traits>
#include <cstring>

#include "backends/native/dispatch.h"
#include "backends/native/cpu_features.h"
#include "backends/native/kernels/nn_internal.h"
#include "ir/ops/nn_internal.h"

namespace tessera::native {

void depthwise_plane_portable(const DepthwisePlane& p) {
  for (int64_t oh = 0; oh < p.out_h; ++oh) {
    float* y = p.y + oh * p.out_w;
    for (int64_t ow = 0; ow < p.out_w; ++ow) {
      float acc = p.bias;
      for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
        const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
        if (ih < 0 || ih >= p.in_h) continue;
        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
          const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
          if (iw >= 0 && iw < p.in_w) acc += p.w[kh * p.kernel_w + kw] * p.x[ih * p.in_w + iw];
        }
      }
      y[ow] = std::min(std::max(acc, p.clamp_lo), p.clamp_hi);
    }
  }
}

DepthwisePlaneFn best_depthwise_plane() {
  static const DepthwisePlaneFn best = cpu_features().avx512 ? depthwise_plane_avx512 : nullptr;
  return best;
}

namespace {

/// Conv geometry with the spatial dims padded to three (D, H, W).
struct ConvShape : WindowGeometry3 {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  WindowGeometry geometry;

  int64_t in_per_group() const { return in_channels / group; }
  int64_t out_per_group() const { return out_channels / group; }
  bool pointwise() const {
    for (int d = 0; d < 3; ++d) {
      if (kernel[d] != 1 || stride[d] != 1 || pad[d] != 0) return false;
    }
    return true;
  }
  bool depthwise() const { return group == in_channels && group > 1; }
};

ConvShape conv_shape(const Node& node, const Shape& x, const Shape& w, bool transpose) {
  ConvShape s;
  const size_t r = x.size() - 2;
  if (r > 3) throw_unsupported(node.describe(), ": convolution over ", r, " spatial dims (at most 3 are supported)");
  s.batch = x[0];
  s.in_channels = x[1];
  s.group = node.attrs.get_int_or("group", 1);
  s.out_channels = transpose ? w[1] * s.group : w[0];
  std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
  s.geometry = transpose ? conv_transpose_geometry(node, in, kernel) : window_geometry(node, in, kernel, false);
  static_cast<WindowGeometry3&>(s) = as_three_dims(s.geometry);
  return s;
}

/// Writes a stream of values into NR-column panels of a packed B row. Runs
/// are short (an output row, split at panel edges), so plain loops the
/// compiler vectorises beat memcpy/memset calls here.
struct PanelWriter {
  float* panel;   // start of the current row inside the current panel
  int64_t lane;   // column within the panel
  int64_t nr;
  int64_t panel_step;  // floats between consecutive panels (kc * nr)

  void advance(int64_t count) {
    lane += count;
    if (lane == nr) {
      lane = 0;
      panel += panel_step;
    }
  }
  void zeros(int64_t count) {
    while (count > 0) {
      const int64_t chunk = std::min(count, nr - lane);
      float* out = panel + lane;
      for (int64_t t = 0; t < chunk; ++t) out[t] = 0.0f;
      advance(chunk);
      count -= chunk;
    }
  }
  void copy(const float* src, int64_t count) {
    while (count > 0) {
      const int64_t chunk = std::min(count, nr - lane);
      float* out = panel + lane;
      for (int64_t t = 0; t < chunk; ++t) out[t] = src[t];
      advance(chunk);
      src += chunk;
      count -= chunk;
    }
  }
  void gather(const float* src, int64_t stride, int64_t count) {
    while (count > 0) {
      const int64_t chunk = std::min(count, nr - lane);
      float* out = panel + lane;
      for (int64_t t = 0; t < chunk; ++t) out[t] = src[t * stride];
      advance(chunk);
      src += chunk * stride;
      count -= chunk;
    }
  }
};

/// Packs rows [k0, k0+kc) x output positions [n0, n0+nc) of the im2col
/// matrix of one image's group (x points at its first channel).
void pack_im2col(const ConvShape& s, const float* x, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  const int64_t in_size = s.in_size();
  for (int64_t kk = 0; kk < kc; ++kk) {
    int64_t t = k0 + kk;
    const int64_t kw = t % s.kernel[2];
    t /= s.kernel[2];
    const int64_t kh = t % s.kernel[1];
    t /= s.kernel[1];
    const int64_t kd = t % s.kernel[0];
    const int64_t c = t / s.kernel[0];
    const float* xc = x + c * in_size;
    PanelWriter writer{dst + kk * nr, 0, nr, kc * nr};
    int64_t pos = n0;
    int64_t ow = pos % s.out[2];
    int64_t oh = (pos / s.out[2]) % s.out[1];
    int64_t od = pos / (s.out[2] * s.out[1]);
    const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
    // Output columns ow in [ow_lo, ow_hi) read inside the input row: iw = ow * stride + w_offset in [0, W).
    const int64_t sw = s.stride[2];
    const int64_t ow_lo = w_offset >= 0 ? 0 : (-w_offset + sw - 1) / sw;
    const int64_t ow_hi = s.in[2] - w_offset <= 0 ? 0 : (s.in[2] - w_offset + sw - 1) / sw;
    for (int64_t j = 0; j < nc;) {
      const int64_t seg = std::min(s.out[2] - ow, nc - j);
      const int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
      const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
      if (id < 0 || id >= s.in[0] || ih < 0 || ih >= s.in[1]) {
        writer.zeros(seg);
      } else {
        const float* xrow = xc + (id * s.in[1] + ih) * s.in[2];
        const int64_t lo = std::clamp(ow_lo, ow, ow + seg);
        const int64_t hi = std::clamp(ow_hi, lo, ow + seg);
        writer.zeros(lo - ow);
        if (sw == 1) {
          writer.copy(xrow + lo + w_offset, hi - lo);
        } else {
          writer.gather(xrow + lo * sw + w_offset, sw, hi - lo);
        }
        writer.zeros(ow + seg - hi);
      }
      j += seg;
      ow += seg;
      if (ow == s.out[2]) {
        ow = 0;
        if (++oh == s.out[1]) {
          oh = 0;
          ++od;
        }
      }
    }
    if (writer.lane != 0) writer.zeros(nr - writer.lane);
  }
}

/// Direct depthwise convolution (group == in_channels): one plane per task,
/// inner loops over contiguous output rows. 2-D float32 planes with channel
/// multiplier 1 go to the per-ISA plane kernel when this CPU has one.
/// Returns true when it applied `clamp` itself (the per-ISA plane kernel does).
template <typename T>
bool depthwise_conv(const ConvShape& s, const T* x, const T* w, const T* bias, T* y, ThreadPool& pool,
                    const GemmClamp* clamp) {
  const int64_t multiplier = s.out_channels / s.group;
  const int64_t planes = s.batch * s.out_channels;
  const int64_t ksize = s.kernel_size();
  if constexpr (std::is_same_v<T, float>) {
    const DepthwisePlaneFn plane_kernel = best_depthwise_plane();
    if (plane_kernel && multiplier == 1 && s.kernel[0] == 1 && s.in[0] == 1) {
      pool.parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
        for (int64_t plane = begin; plane < end; ++plane) {
          const int64_t oc = plane % s.out_channels, n = plane / s.out_channels;
          DepthwisePlane p;
          p.x = x + (n * s.in_channels + oc) * s.in_size();
          p.in_h = s.in[1];
          p.in_w = s.in[2];
          p.w = w + oc * ksize;
          p.kernel_h = s.kernel[1];
          p.kernel_w = s.kernel[2];
          p.stride_h = s.stride[1];
          p.stride_w = s.stride[2];
          p.pad_top = s.pad[1];
          p.pad_left = s.pad[2];
          p.dilation_h = s.dilation[1];
          p.dilation_w = s.dilation[2];
          p.bias = bias ? bias[oc] : 0.0f;
          p.y = y + plane * s.out_size();
          p.out_h = s.out[1];
          p.out_w = s.out[2];
          if (clamp) {
            p.clamp_lo = clamp->lo;
            p.clamp_hi = clamp->hi;
          }
          plane_kernel(p);
        }
      });
      return true;
    }
  }
  pool.parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t oc = plane % s.out_channels, n = plane / s.out_channels;
      const T* xc = x + (n * s.in_channels + oc / multiplier) * s.in_size();
      const T* wc = w + oc * ksize;
      T* yc = y + plane * s.out_size();
      const T b = bias ? bias[oc] : T(0);
      for (int64_t od = 0; od < s.out[0]; ++od) {
        for (int64_t oh = 0; oh < s.out[1]; ++oh) {
          T* yrow = yc + (od * s.out[1] + oh) * s.out[2];
          for (int64_t ow = 0; ow < s.out[2]; ++ow) yrow[ow] = b;
          for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
            const int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
            if (id < 0 || id >= s.in[0]) continue;
            for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
              const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
              if (ih < 0 || ih >= s.in[1]) continue;
              const T* xrow = xc + (id * s.in[1] + ih) * s.in[2];
              for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
                const T wv = wc[(kd * s.kernel[1] + kh) * s.kernel[2] + kw];
                const int64_t off = kw * s.dilation[2] - s.pad[2];
                const int64_t sw = s.stride[2];
                const int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                const int64_t hi = std::min(s.out[2], s.in[2] - off <= 0 ? 0 : (s.in[2] - off + sw - 1) / sw);
                if (sw == 1) {
                  for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow + off];
                } else {
                  for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * sw + off];
                }
              }
            }
          }
        }
      }
    }
  });
  return false;
}

/// Constant Conv weights packed per group as GEMM A operands, and (3x3 ones, made at the first run
/// that takes winograd_conv) their Winograd transform.
struct PackedConvWeights {
  std::vector<PackedMatrix> groups;
  mutable std::once_flag winograd_once;
  mutable WinogradWeights winograd;
};

std::shared_ptr<void> prepare_conv(const Node& node, const std::vector<const Tensor*>& constants,
                                   const std::vector<TensorType>& types) {
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  if (!w || w->dtype() != DType::kFloat32 || w->shape().size() < 3) return nullptr;
  const int64_t group = node.attrs.get_int_or("group", 1);
  const int64_t out_channels = w->shape()[0];
  if (group <= 0 || out_channels % group != 0) return nullptr;
  const int64_t depth = w->numel() / out_channels;
  if (group > 1 && w->shape()[1] == 1) return nullptr;  // depthwise: the direct kernel reads W as is
  auto state = std::make_shared<PackedConvWeights>();
  const int64_t per_group = out_channels / group;
  for (int64_t g = 0; g < group; ++g) {
    state->groups.push_back(pack_gemm_a(best_gemm_microkernel(), {w->as<float>() + g * per_group * depth, depth, 1}, per_group, depth));
  }
  return state;
}

/// Where conv_implicit_im2col keeps its copy of one image's group: for each
/// channel, stride_h x stride_w phase images (phase (a, b) holds the padded
/// image's rows a, a + stride_h, ... and columns b, b + stride_w, ...), each
/// rows x width floats. A tap (c, kh, kw) of output (oh, ow) reads padded
/// (oh*sh + kh*dh, ow*sw + kw*dw), which is phase ((kh*dh) % sh, (kw*dw) % sw)
/// at (oh + (kh*dh) / sh, ow + (kw*dw) / sw): every tap is a stride-1 window
/// of one phase image, at a fixed offset from position oh * width + ow.
struct ImplicitLayout {
  int64_t pad_top = 0, pad_left = 0;
  int64_t rows = 0, width = 0, plane = 0;  // per phase image

  explicit ImplicitLayout(const ConvShape& s) {
    pad_top = s.pad[1];
    pad_left = s.pad[2];
    // The padded rows and columns the output reads (the end pads as the
    // output shape uses them, which floor division may leave short of ONNX's).
    const int64_t padded_h = (s.out[1] - 1) * s.stride[1] + (s.kernel[1] - 1) * s.dilation[1] + 1;
    const int64_t padded_w = (s.out[2] - 1) * s.stride[2] + (s.kernel[2] - 1) * s.dilation[2] + 1;
    rows = (padded_h + s.stride[1] - 1) / s.stride[1];
    if (s.stride[2] == 1) {
      // One zero run serves as a row's right pad and the next row's left pad:
      // a window running past the end of a row reads the next row's first
      // pad_left columns, which are zeros (so is the tail after the last row).
      // At least an output row wide (a 1x1 kernel with pads has OW > W + pad).
      width = std::max(s.in[2] + std::max(pad_left, padded_w - s.in[2] - pad_left), s.out[2]);
    } else {
      width = (padded_w + s.stride[2] - 1) / s.stride[2];
    }
    plane = rows * width;
  }
};

/// dst[j] = src[j * stride] for j < count; strides 1 and 2 (the common ones)
/// as loops of a constant stride, which the compiler vectorises.
void gather_columns(const float* __restrict src, int64_t stride, int64_t count, float* __restrict dst) {
  if (stride == 1) {
    for (int64_t j = 0; j < count; ++j) dst[j] = src[j];
  } else if (stride == 2) {
    for (int64_t j = 0; j < count; ++j) dst[j] = src[2 * j];
  } else {
    for (int64_t j = 0; j < count; ++j) dst[j] = src[j * stride];
  }
}

/// Whether conv_implicit_im2col handles this conv with `kernel`: at most two
/// spatial dims, and phase rows not much wider than an output row (the extra
/// columns are computed and thrown away).
bool implicit_im2col_applies(const ConvShape& s, const GemmMicrokernel& kernel) {
  if (!kernel.run_offset_b || s.kernel[0] != 1 || s.in[0] != 1 || s.pad[0] != 0) return false;
  return ImplicitLayout(s).width * 4 <= s.out[2] * 5;
}

/// Convolution of one image's group as a GEMM whose B (im2col) is never
/// materialised. X is copied once into zero-padded phase images
/// (ImplicitLayout; one image for stride 1), and B's row for a tap is then a
/// contiguous window of them: the microkernel reads B in place through a
/// per-tap offset table (run_offset_b). Columns are "virtual" positions
/// q = oh * width + ow; those with ow >= OW are computed into a per-task
/// buffer and dropped when the buffer is copied to Y. Compared with packing
/// im2col (K x N floats written and read again), this writes about one image
/// and reads taps from a working set that stays in L1/L2.
void conv_implicit_im2col(const ConvShape& s, const GemmMicrokernel& kernel, const PackedMatrix& a, const float* x,
                          const float* bias, float* y, ThreadPool& pool, const GemmClamp* clamp) {
  const ImplicitLayout layout(s);
  const int64_t channels = s.in_per_group(), m = s.out_per_group();
  const int64_t in_h = s.in[1], in_w = s.in[2], out_h = s.out[1], out_w = s.out[2];
  const int64_t sh = s.stride[1], sw = s.stride[2], phases = sh * sw;
  const int64_t width = layout.width, plane = layout.plane;
  const int64_t depth = channels * s.kernel[1] * s.kernel[2];
  const int nr = kernel.nr, mr = kernel.mr;
  const int64_t virtual_n = out_h * width;  // positions q, including the dropped columns
  const int64_t n_padded = (virtual_n + nr - 1) / nr * nr;

  // Tap offsets into the phase images, in the depth order of W (c, kh, kw).
  std::vector<int64_t> offsets(static_cast<size_t>(depth));
  int64_t max_offset = 0;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
      const int64_t th = kh * s.dilation[1];
      for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
        const int64_t tw = kw * s.dilation[2];
        const int64_t offset = ((c * sh + th % sh) * sw + tw % sw) * plane + th / sh * width + tw / sw;
        offsets[static_cast<size_t>((c * s.kernel[1] + kh) * s.kernel[2] + kw)] = offset;
        max_offset = std::max(max_offset, offset);
      }
    }
  }
  // Phase images no tap reads (a 1x1 stride-2 conv reads one of four) are not filled.
  std::vector<char> phase_used(static_cast<size_t>(phases), 0);
  for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
    for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
      phase_used[static_cast<size_t>(kh * s.dilation[1] % sh * sw + kw * s.dilation[2] % sw)] = 1;
    }
  }
  // The last tile reads nr columns from its start, for every tap.
  const int64_t image_size = std::max(channels * phases * plane, max_offset + n_padded) + nr;

  thread_local std::vector<float> padded_storage;
  if (padded_storage.size() < static_cast<size_t>(image_size)) padded_storage.resize(static_cast<size_t>(image_size));
  float* padded = padded_storage.data();
  pool.parallel_for(channels * phases, 1, [&](int64_t begin, int64_t end) {
    for (int64_t image = begin; image < end; ++image) {
      float* dst = padded + image * plane;
      if (!phase_used[static_cast<size_t>(image % phases)]) {
        // No tap reads it, but windows running past the end of the previous
        // image's last row read its first row's left pad, which must be zeros.
        std::fill(dst, dst + width, 0.0f);
        continue;
      }
      const int64_t c = image / phases, pa = image / sw % sh, pb = image % sw;
      const float* src = x + c * in_h * in_w;
      // Phase columns j whose padded column j*sw + pb is an input column.
      const int64_t j_lo = std::max<int64_t>(0, (layout.pad_left - pb + sw - 1) / sw);
      const int64_t j_hi = std::clamp<int64_t>((layout.pad_left + in_w - pb + sw - 1) / sw, j_lo, width);
      for (int64_t i = 0; i < layout.rows; ++i) {
        float* row = dst + i * width;
        const int64_t ih = i * sh + pa - layout.pad_top;
        if (ih < 0 || ih >= in_h) {
          std::fill(row, row + width, 0.0f);
          continue;
        }
        const float* xrow = src + ih * in_w + (j_lo * sw + pb - layout.pad_left);
        std::fill(row, row + j_lo, 0.0f);
        gather_columns(xrow, sw, j_hi - j_lo, row + j_lo);
        std::fill(row + j_hi, row + width, 0.0f);
      }
    }
  });
  std::fill(padded + channels * phases * plane, padded + image_size, 0.0f);

  // Tasks: the thread pool runs at most 4 chunks a thread, so make 4 a thread
  // (so that dynamic scheduling evens them out): column ranges when there are
  // enough 32-column tiles, else blocks of A panels. Each task walks its
  // columns in chunks of up to 8 tiles, whose output rows stay in L2.
  const int64_t threads = pool.num_threads();
  const int64_t m_panels = (m + mr - 1) / mr;
  const int64_t tiles = n_padded / nr;
  int64_t n_tasks = 1, m_blocks = 1;
  if (threads > 1 && tiles >= 4 * threads) {
    n_tasks = 4 * threads;
  } else if (threads > 1) {
    m_blocks = std::min(m_panels, 4 * threads);
  }
  constexpr int64_t kChunkTiles = 8;
  const int64_t ld = kChunkTiles * nr;

  pool.parallel_for(n_tasks * m_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> out_storage;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t column_task = task / m_blocks, block = task % m_blocks;
      // Even splits: tiles [t * tiles / n_tasks, (t + 1) * tiles / n_tasks), likewise the panels.
      const int64_t tile0 = column_task * tiles / n_tasks, tile1 = (column_task + 1) * tiles / n_tasks;
      const int64_t panel0 = block * m_panels / m_blocks, panel1 = (block + 1) * m_panels / m_blocks;
      const int64_t row0 = panel0 * mr, rows = std::min(m, panel1 * mr) - row0;
      if (out_storage.size() < static_cast<size_t>(rows * ld)) out_storage.resize(static_cast<size_t>(rows * ld));
      float* out = out_storage.data();
      for (int64_t chunk = tile0; chunk < tile1; chunk += kChunkTiles) {
      const int64_t q0 = chunk * nr;
      const int64_t cols = std::min(std::min(tile1, chunk + kChunkTiles) * nr, virtual_n) - q0;
      for (int64_t k0 = 0; k0 < depth; k0 += kGemmBlockK) {
        const int64_t kc = std::min(kGemmBlockK, depth - k0);
        const bool last_block = k0 + kc >= depth;
        const float* a_block = a.values() + k0 * a.padded_width;
        for (int64_t panel = panel0; panel < panel1; ++panel) {
          const int64_t i = panel * mr;
          for (int64_t j = 0; j < cols; j += nr) {
            const float* b = padded + q0 + j;
            kernel.run_offset_b(kc, a_block + panel * kc * mr, b, offsets.data() + k0, out + (i - row0) * ld + j, ld,
                                std::min<int64_t>(mr, m - i), std::min<int64_t>(nr, cols - j), k0 > 0,
                                last_block && bias ? bias + i : nullptr, last_block ? clamp : nullptr);
          }
        }
      }
      // Keep the columns that are output positions.
      for (int64_t r = 0; r < rows; ++r) {
        const float* src = out + r * ld;
        float* yrow = y + (row0 + r) * out_h * out_w;
        for (int64_t q = q0; q < q0 + cols;) {
          const int64_t oh = q / width, ow = q % width;
          const int64_t run = std::min(width - ow, q0 + cols - q);
          const int64_t keep = std::clamp<int64_t>(out_w - ow, 0, run);
          std::copy(src + (q - q0), src + (q - q0) + keep, yrow + oh * out_w + ow);
          q += run;
        }
      }
      }
    }
  });
}

/// The convolution as winograd_conv describes it, where it is one that winograd_conv computes:
/// 2-D, 3x3, stride 1, dilation 1, one group.
std::optional<WinogradConv> winograd_shape(const ConvShape& s) {
  if (s.group != 1 || s.kernel[0] != 1 || s.in[0] != 1 || s.pad[0] != 0 || s.pad_end[0] != 0) return std::nullopt;
  for (int d = 1; d < 3; ++d) {
    if (s.kernel[d] != 3 || s.stride[d] != 1 || s.dilation[d] != 1) return std::nullopt;
  }
  WinogradConv w;
  w.batch = s.batch;
  w.in_channels = s.in_channels;
  w.out_channels = s.out_channels;
  w.in_h = s.in[1];
  w.in_w = s.in[2];
  w.out_h = s.out[1];
  w.out_w = s.out[2];
  w.pad_top = s.pad[1];
  w.pad_left = s.pad[2];
  w.pad_bottom = s.pad_end[1];
  w.pad_right = s.pad_end[2];
  return w;
}

/// TESSERA_NATIVE_WINOGRAD=0 keeps every convolution direct (for comparisons).
bool native_winograd_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TESSERA_NATIVE_WINOGRAD");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  return enabled;
}

/// Applies a clamp after a path that could not fuse it.
template <typename T>
void clamp_output(const GemmClamp& clamp, T* y, int64_t count, ThreadPool& pool) {
  const T lo = static_cast<T>(clamp.lo), hi = static_cast<T>(clamp.hi);
  pool.parallel_for(count, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = std::min(std::max(y[i], lo), hi);
  });
}

void conv_f32(KernelContext& ctx, const ConvShape& s) {
  const float* x = ctx.input(0).as<float>();
  const float* w = ctx.input(1).as<float>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).as<float>() : nullptr;
  float* y = ctx.output(0).as<float>();
  const std::optional<GemmClamp> clamp = fused_clamp(ctx);
  if (s.depthwise()) {
    if (!depthwise_conv<float>(s, x, w, bias, y, ctx.pool(), clamp ? &*clamp : nullptr) && clamp) {
      clamp_output(*clamp, y, ctx.output(0).numel(), ctx.pool());
    }
    return;
  }
  const PackedConvWeights* packed = ctx.state<PackedConvWeights>();
  const GemmMicrokernel& kernel = packed ? *packed->groups[0].kernel : best_gemm_microkernel();
  const int64_t m = s.out_per_group(), n = s.out_size(), depth = s.in_per_group() * s.kernel_size();
  const bool pointwise = s.pointwise();
  if (packed && native_winograd_enabled()) {
    const std::optional<WinogradConv> shape = winograd_shape(s);
    if (shape && winograd_conv_worthwhile(*shape)) {
      std::call_once(packed->winograd_once, [&] { packed->winograd = winograd_weights(kernel, w, m, s.in_channels); });
      // (false: an Inf or NaN in X, which the direct convolution gives only to the outputs that read it)
      if (winograd_conv(*shape, kernel, packed->winograd, x, bias, y, ctx.pool(), clamp ? &*clamp : nullptr)) return;
    }
  }
  if (!pointwise && implicit_im2col_applies(s, kernel)) {
    std::vector<PackedMatrix> packed_here;  // weights that are not constant
    if (!packed) {
      for (int64_t g = 0; g < s.group; ++g) packed_here.push_back(pack_gemm_a(kernel, {w + g * m * depth, depth, 1}, m, depth));
    }
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t g = 0; g < s.group; ++g) {
        const PackedMatrix& a = packed ? packed->groups[static_cast<size_t>(g)] : packed_here[static_cast<size_t>(g)];
        conv_implicit_im2col(s, kernel, a, x + (b * s.in_channels + g * s.in_per_group()) * s.in_size(),
                             bias ? bias + g * m : nullptr, y + (b * s.out_channels + g * m) * n, ctx.pool(),
                             clamp ? &*clamp : nullptr);
      }
    }
    return;
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const float* xg = x + (b * s.in_channels + g * s.in_per_group()) * s.in_size();
      GemmA a{packed ? &packed->groups[static_cast<size_t>(g)] : nullptr, {w + g * m * depth, depth, 1}};
      GemmB gb;
      if (pointwise) {
        gb.ref = {xg, n, 1};
      } else {
        gb.pack = [&s, xg](int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
          pack_im2col(s, xg, k0, kc, n0, nc, nr, dst);
        };
      }
      gemm_f32(kernel, m, n, depth, a, gb, y + (b * s.out_channels + g * m) * n, n, false, bias ? bias + g * m : nullptr,
               &ctx.pool(), clamp ? &*clamp : nullptr);
    }
  }
}

void conv_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const TensorView& y = ctx.output(0);
  if (y.numel() == 0) return;
  const ConvShape s = conv_shape(ctx.node(), x.shape, w.shape, false);
  if (x.dtype == DType::kFloat32) return conv_f32(ctx, s);
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* bias = ctx.has_input(2) ? ctx.input(2).as<T>() : nullptr;
    if (s.depthwise()) {
      depthwise_conv<T>(s, x.as<T>(), w.as<T>(), bias, y.as<T>(), ctx.pool(), nullptr);
    } else {
      reference_conv<T>(x, w, bias, s.group, s.geometry.stride, s.geometry.dilation, s.geometry.pad_begin, y);
    }
    if (const std::optional<GemmClamp> clamp = fused_clamp(ctx)) clamp_output(*clamp, y.as<T>(), y.numel(), ctx.pool());
  });
}

// --------------------------------------------------------- ConvTranspose --

/// Adds columns col (Cout/g * k x input positions) into the output image y
/// (Cout/g channels): the adjoint of im2col.
template <typename T>
void col2im_add(const ConvShape& s, const T* col, T* y) {
  const int64_t in_size = s.in_size(), out_size = s.out_size(), ksize = s.kernel_size();
  for (int64_t oc = 0; oc < s.out_per_group(); ++oc) {
    T* yc = y + oc * out_size;
    for (int64_t kp = 0; kp < ksize; ++kp) {
      const int64_t kw = kp % s.kernel[2], kh = (kp / s.kernel[2]) % s.kernel[1], kd = kp / (s.kernel[2] * s.kernel[1]);
      const T* crow = col + (oc * ksize + kp) * in_size;
      for (int64_t id = 0; id < s.in[0]; ++id) {
        const int64_t od = id * s.stride[0] - s.pad[0] + kd * s.dilation[0];
        if (od < 0 || od >= s.out[0]) continue;
        for (int64_t ih = 0; ih < s.in[1]; ++ih) {
          const int64_t oh = ih * s.stride[1] - s.pad[1] + kh * s.dilation[1];
          if (oh < 0 || oh >= s.out[1]) continue;
          const T* src = crow + (id * s.in[1] + ih) * s.in[2];
          T* dst = yc + (od * s.out[1] + oh) * s.out[2];
          for (int64_t iw = 0; iw < s.in[2]; ++iw) {
            const int64_t ow = iw * s.stride[2] - s.pad[2] + kw * s.dilation[2];
            if (ow >= 0 && ow < s.out[2]) dst[ow] += src[iw];
          }
        }
      }
    }
  }
}

void conv_transpose_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const TensorView& y = ctx.output(0);
  if (y.numel() == 0) return;
  const ConvShape s = conv_shape(ctx.node(), x.shape, w.shape, true);
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t cin_g = s.in_per_group(), cout_g = s.out_per_group();
    const int64_t rows = cout_g * s.kernel_size(), n = s.in_size();
    const T* px = x.as<T>();
    const T* pw = w.as<T>();
    const T* bias = ctx.has_input(2) ? ctx.input(2).as<T>() : nullptr;
    T* py = y.as<T>();
    const int64_t images = s.batch * s.group;
    ctx.pool().parallel_for(images, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> col(static_cast<size_t>(rows * n));
      for (int64_t image = begin; image < end; ++image) {
        const int64_t b = image / s.group, g = image % s.group;
        const T* xg = px + (b * s.in_channels + g * cin_g) * n;
        const T* wg = pw + g * cin_g * rows;  // W is [Cin, Cout/g, k...]: A = W_g^T
        if constexpr (std::is_same_v<T, float>) {
          gemm_f32(best_gemm_microkernel(), rows, n, cin_g, GemmA{nullptr, {wg, 1, rows}}, GemmB{nullptr, {}, {xg, n, 1}},
                   col.data(), n, false, nullptr, nullptr);
        } else {
          reference_gemm<T>(rows, n, cin_g, wg, 1, rows, xg, n, 1, col.data(), n, false);
        }
        T* yg = py + (b * s.out_channels + g * cout_g) * s.out_size();
        for (int64_t i = 0; i < cout_g; ++i) {
          std::fill(yg + i * s.out_size(), yg + (i + 1) * s.out_size(), bias ? bias[g * cout_g + i] : T(0));
        }
        col2im_add<T>(s, col.data(), yg);
      }
    });
  });
}

}  // namespace

void register_nn_conv_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Conv", .run = conv_kernel, .prepare = prepare_conv});
  registry.add({.op_type = "ConvTranspose", .run = conv_transpose_kernel});
}

std::optional<GemmClamp> fused_clamp(const KernelContext& ctx) {
  std::vector<float> bounds = ctx.attrs().get_floats_or("tessera_clamp", {});
  if (bounds.empty()) return std::nullopt;
  if (bounds.size() != 2) ctx.fail("attribute 'tessera_clamp' must hold [low, high]");
  return GemmClamp{bounds[0], bounds[1]};
}

}  // namespace tessera::native
