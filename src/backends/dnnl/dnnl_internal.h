// The oneDNN backend's internals, shared by its files (not a public header:
// it includes dnnl.hpp, which must stay out of widely included headers).
//
// A region is lowered into a Program: slots (tensors with a concrete oneDNN
// layout: the region's boundary values in plain row-major layout, constants
// reordered into the layout their primitive prefers, and intermediates in
// whatever blocked layout the producing primitive chose) and steps (one
// oneDNN primitive each, with fused post-ops). The Program is the payload;
// load() creates every primitive from it once, reorders the constants once,
// and plans one workspace for the intermediates and the scratchpad.
#pragma once
#include <cstdint>
#include <dnnl.hpp>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace tessera::dnnl_backend {

using dnnl::memory;

enum class StepKind : uint8_t {
  kReorder = 1,
  kConvolution,
  kDeconvolution,
  kMatMul,
  kInnerProduct,
  kEltwise,
  kBinary,
  kPooling,
  kBatchNorm,
  kLayerNorm,
  kSoftmax,
  kLogSoftmax,
  kConcat,
};

enum class PostOpKind : uint8_t { kEltwise = 1, kSum, kBinary };

struct PostOp {
  PostOpKind kind = PostOpKind::kEltwise;
  int32_t algorithm = 0;  // dnnl_alg_kind_t for eltwise and binary; sum: the operand's dnnl_data_type_t (0: dst's)
  float alpha = 0;        // sum: its scale (dst += alpha * (operand - beta))
  float beta = 0;         // sum: the operand's zero point
  int32_t slot = -1;  // sum: the slot copied into dst first; binary: the second operand
};

/// How a constant slot's bytes are made from the region graph's constants.
enum class ConstantTransform : uint8_t {
  kNone = 0,          // the constant as it is, reordered into the slot's layout
  kFoldBatchNormWeights,  // conv weights * scale / sqrt(var + eps), per output channel (values: scale, var)
  kFoldBatchNormBias,     // (bias - mean) * scale / sqrt(var + eps) + shift (values: bias or -1, scale, shift, mean, var)
  kTranspose2d,       // a 2-D constant transposed (Gemm transB)
  kScaled,            // multiplied by floats[0] (Gemm alpha, beta)
  kGroupedWeights,    // conv weights [O, I/g, k...] viewed as [g, O/g, I/g, k...] (same bytes)
  kDeconvolutionWeights,  // ConvTranspose weights [I, O/g, k...] reordered to [O, I, k...] or [g, O/g, I/g, k...]
};

/// A constant slot whose layout is the one its first reading primitive
/// chooses (asked with format_tag::any again at load): weights in layouts no
/// format tag names, such as Winograd's.
constexpr int32_t kLayoutOfReader = -2;

/// The payload's size limits, read by the loader (slots in dnnl_region.cc, constants in
/// dnnl_constants.cc) and by the declarations, which refuse larger values so that they run
/// elsewhere instead of failing when the payload loads.
inline constexpr int64_t kMaxSlotDim = int64_t{1} << 32;
inline constexpr int64_t kMaxSlotElements = int64_t{1} << 34;
inline constexpr int64_t kMaxConstantElements = int64_t{1} << 32;

/// A slot's element type. Under --precision bf16 the sources and weights of
/// convolutions and matmuls (and intermediates only such steps read) are
/// bfloat16. Quantized ops (QLinearConv, QLinearMatMul) read and write 8-bit
/// values, which may cross the region's boundary (then as the value's dtype);
/// their weights are int8 slots made from the int8 constants.
enum class SlotType : uint8_t { kFloat32 = 0, kBFloat16 = 1, kUInt8 = 2, kInt8 = 3 };

memory::data_type data_type_of(SlotType type);
/// The slot type of a boundary value's dtype (float32, uint8, int8); throws unsupported for others.
SlotType slot_type_for(DType dtype);
/// True when a boundary slot of `type` holds a value of `dtype`.
inline bool slot_type_matches(SlotType type, DType dtype) {
  return (type == SlotType::kFloat32 && dtype == DType::kFloat32) || (type == SlotType::kUInt8 && dtype == DType::kUInt8) ||
         (type == SlotType::kInt8 && dtype == DType::kInt8);
}

struct Slot {
  enum class Kind : uint8_t { kInput = 1, kOutput, kIntermediate, kConstant };
  Kind kind = Kind::kIntermediate;
  SlotType type = SlotType::kFloat32;
  int32_t value = -1;        // region graph value (inputs, outputs, constants' first source)
  std::vector<int64_t> dims;  // the slot's dims (may differ from the value's: grouped weights, bias views)
  int32_t format_tag = 0;    // dnnl_format_tag_t of the layout; 0 plain; kLayoutOfReader below
  ConstantTransform transform = ConstantTransform::kNone;
  std::vector<int32_t> sources;  // constants: region graph values the transform reads (-1: absent)
  std::vector<float> floats;     // constants: transform parameters (epsilon, alpha)
};

struct Step {
  StepKind kind = StepKind::kReorder;
  int32_t node = -1;               // region graph node this step reports its time on (-1: a reorder)
  std::vector<int32_t> inputs;     // slots, in the order the kind's builder expects
  int32_t output = -1;             // slot
  int32_t algorithm = 0;           // dnnl_alg_kind_t where the kind has one
  std::vector<int64_t> ints;       // strides, paddings, axes, ... (per kind)
  std::vector<float> floats;       // alpha, beta, epsilon, ... (per kind)
  std::vector<PostOp> post_ops;
  /// Roles (bit i: input i; bit inputs.size(): the output) whose layout
  /// oneDNN chose from format_tag::any. Loading asks for `any` there again,
  /// so the same implementation is picked, and checks it chose the same layout.
  uint32_t any_roles = 0;
  /// Quantized steps: dst = output_scales * accumulator (then the post-ops),
  /// one scale or one per index of the dims in scale_mask (oneDNN's
  /// output-scale mask); reorders: dst = output_scales * (src - src_zero_point)
  /// + dst_zero_point. Zero points are common to the tensor.
  std::vector<float> output_scales;
  int32_t scale_mask = 0;
  int32_t src_zero_point = 0;
  int32_t dst_zero_point = 0;
  int32_t weights_zero_point = 0;  // matmuls of two computed operands
};

struct Program {
  std::vector<Slot> slots;
  std::vector<Step> steps;
};

// --- the slow-kernel guard ---
/// A float32 brgemm or gemm:jit matmul of fewer rows than this, against weights of at least
/// kSlowBrgemmMinWeights elements (256 KiB), goes to another backend (slow_kernel_reason, dnnl_region.cc).
constexpr int64_t kSlowBrgemmMaxRows = 4;
constexpr int64_t kSlowBrgemmMinWeights = int64_t{1} << 16;
/// Steps with fewer output elements are not guarded: their reference kernel costs little.
constexpr int64_t kReferenceGuardElements = 1024;
/// True when oneDNN chose its reference implementation ("ref:any", "ref:..."),
/// 100-400x slower than its JIT kernels.
bool is_reference(const dnnl::primitive_desc_base& pd);

// --- layouts ---
memory::desc plain_desc(const std::vector<int64_t>& dims, memory::data_type type = memory::data_type::f32);
memory::desc desc_of(const Slot& slot);
/// The format tag whose layout equals `desc` (of its own data type), 0 for
/// plain row-major, or -1 when none does.
int32_t format_tag_of(const memory::desc& desc);
/// Plain row-major, of any data type.
bool is_plain(const memory::desc& desc);
/// The number of elements of the desc's dims (not its padded ones).
int64_t element_count(const memory::desc& desc);
/// `dims` (same rank) laid out as `like` is (its format tag: the same blocking
/// and axis order), in `like`'s data type; plain when `like` has no tag.
memory::desc layout_like(const memory::desc& like, const std::vector<int64_t>& dims);
/// `desc` is a 4-D float32 layout whose only inner block, of 8 or 16, is on
/// the channels (nChw8c, nChw16c; not nhwc, which has no inner block), with
/// no offset: fills the block size and the strides (elements) of the batch,
/// the channel block, the rows and the columns.
bool channel_blocked(const memory::desc& desc, int64_t& block, int64_t strides[4]);
/// The slot type of a layout's data type; throws an unsupported error for others.
SlotType slot_type_of(const memory::desc& desc);

// --- payload ---
std::vector<uint8_t> serialize_program(const Program& program);
/// Parses and checks bounds; throws a user error "oneDNN payload: ...".
Program parse_program(std::span<const uint8_t> payload);

// --- primitives ---
/// Attributes with the step's post-ops (binary operands' layouts from `slot_descs`) and a user scratchpad.
dnnl::primitive_attr make_attributes(const Step& step, const std::vector<memory::desc>& slot_descs);
/// The primitive descriptor of a step. `descs` holds one layout per role
/// (inputs in order, then the output); a layout may be format_tag::any while
/// lowering, to let oneDNN choose. `avoid_brdgmm`: a convolution takes the next implementation where
/// oneDNN offers its brgemm depthwise one (see dnnl_region.cc: one-thread steps in larger sessions);
/// the caller checks impl_info_str, which still names brdgmm where nothing else was offered.
dnnl::primitive_desc_base make_primitive_desc(const Step& step, const std::vector<memory::desc>& descs,
                                         const std::vector<memory::desc>& slot_descs, const dnnl::engine& engine,
                                         bool avoid_brdgmm = false);
/// The primitive of `pd`, shared with every earlier caller whose descriptor was equal
/// (dnnl_primitive_share.cc: oneDNN's own cache is off), else created; bounded, thread-safe.
dnnl::primitive create_shared_primitive(const dnnl::primitive_desc_base& pd);
/// What create_shared_primitive did in this process: returned a shared primitive, created one it then
/// kept, created one it could not key; and the entries it holds now.
struct SharedPrimitiveCounts {
  int64_t hits = 0;
  int64_t created = 0;
  int64_t unkeyed = 0;
  int64_t entries = 0;
};
SharedPrimitiveCounts shared_primitive_counts();
/// True where `pd` is oneDNN's brgemm depthwise convolution (`brdgmm_dw`; see avoid_brdgmm).
bool is_brdgmm(const dnnl::primitive_desc_base& pd);
/// The layout a primitive descriptor uses for role `index` (inputs in order, then the output).
memory::desc role_desc(const Step& step, const dnnl::primitive_desc_base& pd, size_t index);
/// The DNNL_ARG_* of each role.
std::vector<int> role_args(const Step& step);
/// The multiply-adds of a convolution, deconvolution, matmul or inner-product
/// step over its layouts (`roles`: inputs, then the output); nullopt for other
/// kinds, and for weights without output channels.
std::optional<int64_t> step_multiply_adds(const Step& step, const std::vector<memory::desc>& roles);

// --- lowering (compile) ---
/// Lowers a region graph into a program. `bf16_nodes` (per region node,
/// may be empty) marks the nodes the core allows to compute in bfloat16:
/// convolutions and matmuls among them read bf16 sources and weights and
/// accumulate in float32. Throws a user or unsupported error naming the node
/// when a node cannot be lowered.
/// `memo` (optional): convolution algorithms chosen by measurement, by
/// region node. A node found there takes its algorithm unmeasured; one
/// measured is added. The per-shape lowerings of a region compiled with open
/// dims share one, so only the first shape pays for measuring.
using AlgorithmMemo = std::map<int32_t, int32_t>;
Program lower_region(const Graph& region, const dnnl::engine& engine, const std::vector<char>& bf16_nodes = {},
                     AlgorithmMemo* memo = nullptr);
/// True when oneDNN runs bf16 convolutions and matmuls natively on this CPU
/// (AVX512_BF16 or AMX); elsewhere it would emulate them, slower than float32.
bool cpu_has_native_bf16();
/// True when oneDNN's int8 kernels multiply-accumulate 8-bit products straight
/// into int32 on this CPU (VNNI: AVX512_VNNI or AVX_VNNI, after any
/// ONEDNN_MAX_CPU_ISA cap). Without it they add pairs of u8 x s8 products in a
/// saturating int16 (vpmaddubsw), which is exact only for weights within
/// kInt16SafeWeight.
bool cpu_has_vnni();
/// The largest |weight| for which a pair of u8 x s8 products always fits int16:
/// 2 x 255 x 64 = 32640 <= 32767.
constexpr int kInt16SafeWeight = 64;
/// The oneDNN effective ISA's name ("avx2", "avx512_core_vnni", ...).
std::string effective_isa_name();
/// From now on, fork() releases the forking thread's OpenMP team first, so a child
/// of fork can run parallel steps (dnnl_fork.cc). Idempotent.
void release_openmp_team_at_fork();

// --- NaN and Inf semantics (dnnl_nan_semantics.cc) ---
/// Why `step` (or a post-op fused into it) may drop or invent NaN or ±Inf when
/// an input is not finite, or nullopt when it computes them as numpy and
/// PyTorch do. The one table of oneDNN's NaN and Inf behaviour: a region
/// holding such a step is exact only for finite inputs (DnnlRegion).
std::optional<std::string> finite_only_reason(const Step& step);
/// Clears the invalid-operation and overflow flags (MXCSR) of the calling
/// thread and of the OpenMP team of `threads` it leads, the threads oneDNN's
/// steps run on.
void clear_fp_flags(int threads);
/// True when the calling thread or a thread of its team of `threads` raised
/// an invalid operation (Inf - Inf, 0 * Inf, 0 / 0) or an overflow since
/// clear_fp_flags: a NaN or ±Inf was made from finite numbers.
bool fp_flags_raised(int threads);

// --- concatenation as copies (dnnl_concat_copy.cc) ---
/// A Concat whose every input is, in the output's layout, one contiguous run
/// per index of the dims before the axis: output run o is input 0's run o,
/// then input 1's, ... (memcpys at memory speed; oneDNN 2.6's blocked-layout
/// concat runs at a fraction of that).
struct ConcatCopyPlan {
  int64_t outer = 0;              // indices of the dims before the axis
  std::vector<size_t> run_bytes;  // per input
  size_t output_run_bytes = 0;
};
/// The plan for a concat step's layouts (inputs, then the output), or nullopt
/// where one input is not such a run (padding, a layout that interleaves the
/// axis with later dims, a channel count not a multiple of its block).
std::optional<ConcatCopyPlan> concat_copy_plan(const std::vector<memory::desc>& roles, int axis);
/// `in_place` (empty, or per input): inputs already in the output, not copied.
void run_concat_copy(const ConcatCopyPlan& plan, const std::vector<const void*>& sources, void* output,
                     const std::vector<char>& in_place = {});

// --- the workspace (dnnl_workspace.cc) ---
/// What the workspace plan needs of a step besides its program entry.
struct StepMemoryFacts {
  int32_t sum_slot = -1;                  // a sum post-op's operand in the output's layout (a byte copy), or -1
  const ConcatCopyPlan* concat = nullptr;  // a concat run as copies
  std::vector<char> input_is_slot;        // per input: read in the slot's own layout (no view)
  int64_t view_offset = -1;  // a step whose output is its input's bytes from this offset on (a view), or -1
};
struct WorkspacePlan {
  std::vector<int64_t> offsets;                    // per slot: byte offset of an intermediate, -1 for others
  int64_t bytes = 0;                               // the intermediates' part of the workspace
  std::vector<char> sum_in_place;                  // per step: writes its output over its sum operand
  std::vector<char> view;                          // per step: its output is its input's bytes (nothing to run)
  std::vector<std::vector<char>> concat_in_place;  // per concat step, per input: already in the output
};
/// Places a region's intermediates in one workspace by liveness, a view's output
/// on its input's bytes, an in-place sum's output over its operand and concat
/// inputs inside their concat's output (dnnl_workspace.cc says when). Offsets
/// are multiples of 64.
WorkspacePlan plan_workspace(const Program& program, const std::vector<memory::desc>& descs,
                             const std::vector<StepMemoryFacts>& facts);

// --- max pooling on channel-blocked layouts (dnnl_max_pool.cc) ---
/// A float32 2-D max pooling whose source and destination are nChw8c or
/// nChw16c (the layouts oneDNN's convolutions write), run as a direct loop
/// instead of oneDNN 2.6's pooling kernel (up to 20x slower there).
struct MaxPoolPlan {
  int64_t batch = 0;
  int64_t channel_blocks = 0;  // padded channels / block
  int64_t block = 0;           // 8 or 16
  int64_t in[2] = {0, 0};      // rows, columns
  int64_t out[2] = {0, 0};
  int64_t kernel[2] = {0, 0};
  int64_t stride[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t pad[2] = {0, 0};  // begin padding; the end padding only adds windows the output dims count
  int64_t src_strides[4] = {0, 0, 0, 0};  // elements: batch, channel block, row, column
  int64_t dst_strides[4] = {0, 0, 0, 0};
};
/// The plan for a pooling step's layouts (source, destination), or nullopt
/// for anything else (average pooling, other layouts, 8-bit values, post-ops).
std::optional<MaxPoolPlan> max_pool_plan(const Step& step, const std::vector<memory::desc>& roles);
/// Runs on the calling thread's OpenMP team.
void run_max_pool(const MaxPoolPlan& plan, const float* src, float* dst);

// --- SiLU / swish as Tessera's own loop (dnnl_swish.cc, kernels in dnnl_swish_avx2.cc, dnnl_swish_avx512.cc) ---
/// y = x * sigmoid(x) over n floats (relative error below 2e-7; NaN kept; -inf
/// gives NaN, as x * Sigmoid(x) does). swish_span is the best build for this
/// CPU (the one dispatch point); the others are there for the tests.
using SwishSpan = void (*)(const float* x, float* y, int64_t n);
SwishSpan swish_span();
void swish_span_portable(const float* x, float* y, int64_t n);
void swish_span_avx2(const float* x, float* y, int64_t n);
void swish_span_avx512(const float* x, float* y, int64_t n);
/// For a float32 eltwise swish step (alpha 1, nothing fused) whose source and
/// destination have one layout: the floats of its buffer, padding included,
/// which run_swish maps instead of oneDNN's kernel; nullopt otherwise.
std::optional<int64_t> swish_plan(const Step& step, const std::vector<memory::desc>& roles);
/// Runs on the calling thread's OpenMP team; src may be dst.
void run_swish(int64_t floats, const float* src, float* dst);

// --- Winograd F(4x4, 3x3) on nChw8c (dnnl_winograd.cc, kernels in dnnl_winograd_avx2.cc) ---
/// Step::algorithm of a float32 3x3 stride-1 convolution run by Tessera's own
/// Winograd kernel (oneDNN 2.6 has Winograd only with AVX-512). The step's
/// primitive is still created as a direct convolution: it fixes the layouts,
/// and runs instead wherever the kernel cannot (another CPU, a capped ISA).
constexpr int32_t kTesseraWinograd = 0x7e01;
/// Step::algorithm of a float32 direct convolution in a region of open dims: oneDNN's JIT kernel that is
/// not brgemm-based (`jit:avx512_core`, `jit:avx2`) where it offers one before its reference kernel. Such
/// a region creates its primitives again for every new input shape, and oneDNN 2.6's brgemm convolution
/// generates its kernels for each: 2-4.5 ms a convolution against 0.15-0.45 (a text recogniser's four
/// 3x3 convolutions at a new width, Zen 5), while it ran them no faster there.
constexpr int32_t kDirectJit = 0x7e02;
/// The placement note for a convolution step's algorithm chosen by measurement
/// ("Winograd F(4x4, 3x3), Tessera's kernel: measured faster than the direct
/// convolution", or oneDNN's Winograd), or "" for the direct one.
std::string measured_algorithm_note(int32_t algorithm);
/// An element-wise post-op or sum the kernel applies in its output transform.
struct WinogradPostOp {
  enum class Kind : uint8_t { kRelu, kClip, kSum };
  Kind kind = Kind::kRelu;
  float alpha = 0;  // relu: negative slope; clip: lower bound; sum: scale
  float beta = 0;   // clip: upper bound
};
struct WinogradPlan {
  int64_t batch = 0;
  int64_t block = 8;  // channels a vector: 8 (AVX2, nChw8c) or 16 (AVX-512, nChw16c or channels-last)
  int64_t in_blocks = 0, out_blocks = 0;  // padded channels / block
  int64_t in_channels = 0, out_channels = 0;  // real ones (the rest of the last output block is written 0)
  int64_t in[2] = {0, 0}, out[2] = {0, 0}, pad[2] = {0, 0};  // rows, columns; begin padding
  int64_t tiles[2] = {0, 0};  // 4x4 output tiles per image: rows, columns
  int64_t chunk = 0;          // tiles transformed and multiplied together (their scratch stays in cache)
  int64_t src_strides[4] = {0, 0, 0, 0};  // elements: batch, channel block, row, column
  int64_t dst_strides[4] = {0, 0, 0, 0};
  std::vector<WinogradPostOp> post_ops;
  /// Floats of the transformed weights (36 x in_blocks*block x out panels of 2*block).
  int64_t weight_floats() const;
  /// Bytes of scratch one run needs (the chunk's transformed inputs and products).
  int64_t scratch_bytes() const;
};
/// True when this CPU (after TESSERA_ISA) runs the kernel: AVX2 and FMA.
bool winograd_available();
/// The plan for a convolution step's layouts (source, weights, [bias,]
/// destination), or nullopt where the kernel does not apply: not 2-D 3x3
/// stride 1 undilated ungrouped float32, source and destination not both
/// nChw8c (AVX2), or each nChw16c or channels-last (AVX-512), a post-op
/// other than relu, clip and sum, or a CPU without AVX2.
std::optional<WinogradPlan> winograd_plan(const Step& step, const std::vector<memory::desc>& roles);
/// The weights transformed (G g G^T, in double) and packed for the kernel, from
/// plain [O, I, 3, 3] weights, into `out`: weight_floats() floats, every one
/// written (padding channels 0).
void write_winograd_weights(const WinogradPlan& plan, const float* plain, float* out);
/// The first 64-byte aligned float at or after `p` (buffers for the kernel
/// keep 16 floats to spare for it).
inline float* first_aligned(float* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - address % 64) % 64) / sizeof(float);
}
inline const float* first_aligned(const float* p) { return first_aligned(const_cast<float*>(p)); }
/// Runs on the calling thread's OpenMP team. `bias` may be null; `weights`
/// (from write_winograd_weights) and `scratch` (scratch_bytes()) are 64-byte aligned.
void run_winograd(const WinogradPlan& plan, const float* src, const float* weights, const float* bias, float* dst,
                  float* scratch);
/// run_winograd's kernels for 8 channels a vector (dnnl_winograd_avx2.cc) and 16 (dnnl_winograd_avx512.cc).
void run_winograd_avx2(const WinogradPlan& plan, const float* src, const float* weights, const float* bias, float* dst,
                       float* scratch);
void run_winograd_avx512(const WinogradPlan& plan, const float* src, const float* weights, const float* bias,
                         float* dst, float* scratch);
/// run_winograd on a convolution step's memory (`args`: its DNNL_ARG_* map;
/// the bias where it holds one); `scratch` need not be aligned (16 floats to spare).
void run_winograd_step(const WinogradPlan& plan, const float* weights, const std::unordered_map<int, memory>& args,
                       float* scratch);

// --- constants ---
/// The bytes of a constant slot in plain layout, after its transform.
std::vector<float> constant_plain_data(const Graph& region, const Slot& slot);
/// The constant's own float32 data where the slot takes it as it is (no transform, no conversion):
/// what constant_plain_data would copy, read in place; nullptr otherwise.
const float* constant_plain_view(const Graph& region, const Slot& slot);
/// The value of `id` when it is a one-element float32 constant holding a
/// finite number (what an Add/Sub/Mul/Div with it becomes an eltwise_linear
/// for), else nullopt.
std::optional<float> finite_scalar_constant(const Graph& graph, ValueId id);


}  // namespace tessera::dnnl_backend
