// The oneDNN backend's op tables (src/backends/dnnl/dnnl_op_tables.h): every
// row the tables claim is declared by the backend, rows that share a oneDNN
// algorithm agree on its NaN facts, and the defaults read from the ir's op
// schemas are ONNX's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/dnnl/dnnl_declarations.h"
#include "backends/dnnl/dnnl_internal.h"
#include "backends/dnnl/dnnl_op_tables.h"

namespace tessera::dnnl_backend {
namespace {

/// True when the declarations hold a rule for `op_type` (a bare node is
/// refused by the check, never as "not declared").
bool declared(const std::string& op_type) {
  const std::vector<std::string> ops = dnnl_declarations().declared_ops();
  return std::find(ops.begin(), ops.end(), op_type) != ops.end();
}

TEST(DnnlOpTables, EveryClaimedRowIsDeclaredAndLoweredByItsFamily) {
  for (const StructuredOp& row : structured_ops()) {
    EXPECT_TRUE(declared(row.op_type)) << row.op_type;
    EXPECT_EQ(op_family(row.op_type), row.family) << row.op_type;
  }
  for (const BinaryOp& row : binary_ops()) {
    EXPECT_TRUE(declared(row.op_type)) << row.op_type;
    EXPECT_EQ(op_family(row.op_type), OpFamily::kElementwise) << row.op_type;
  }
  for (const PoolingOp& row : pooling_ops()) {
    EXPECT_TRUE(declared(row.op_type)) << row.op_type;
    EXPECT_EQ(op_family(row.op_type), OpFamily::kPooling) << row.op_type;
  }
  for (const EltwiseOp& row : eltwise_ops()) {
    EXPECT_EQ(declared(row.op_type), row.claimed) << row.op_type;
  }
  EXPECT_FALSE(declared("Log"));  // off by about 1e-6 near 1 in oneDNN 2.6
}

TEST(DnnlOpTables, RowsSharingAnAlgorithmAgreeOnItsNanFacts) {
  for (const EltwiseOp& row : eltwise_ops()) {
    const EltwiseOp* first = find_eltwise_algorithm(static_cast<int32_t>(row.algorithm));
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(std::string(first->finite_only ? first->finite_only : ""), std::string(row.finite_only ? row.finite_only : ""))
        << row.op_type;
    EXPECT_EQ(first->finite_only_when_alpha_zero, row.finite_only_when_alpha_zero) << row.op_type;
  }
  // The facts oneDNN 2.6 was measured to have (dnnl_nan_test.cc).
  EXPECT_NE(find_eltwise_op("Relu")->finite_only, nullptr);
  EXPECT_NE(find_eltwise_op("Clip")->finite_only, nullptr);
  EXPECT_EQ(find_eltwise_op("Tanh")->finite_only, nullptr);
  EXPECT_NE(find_binary_op("Max")->finite_only, nullptr);
  EXPECT_EQ(find_binary_op("Add")->finite_only, nullptr);
  EXPECT_NE(find_pooling_op("MaxPool")->finite_only, nullptr);
  EXPECT_EQ(find_pooling_op("AveragePool")->finite_only, nullptr);
}

TEST(DnnlOpTables, AlphaDefaultsComeFromTheOpSchemas) {
  Node leaky;
  leaky.op_type = "LeakyRelu";
  EXPECT_FLOAT_EQ(float_attribute(leaky, "alpha"), 0.01f);
  Node elu;
  elu.op_type = "Elu";
  EXPECT_FLOAT_EQ(float_attribute(elu, "alpha"), 1.0f);
  elu.attrs.set("alpha", Attribute::of_float(0.5f));
  EXPECT_FLOAT_EQ(float_attribute(elu, "alpha"), 0.5f);
}

TEST(DnnlOpTables, OpenDimsRegionsNeverTryOneDnnsWinograd) {
  // A region of open dims lowers again at every new shape; oneDNN's Winograd would transform its weights
  // each time. Tessera's Winograd (weights shared across shapes) is tried first, then direct.
  const auto ids = [](const std::vector<ConvolutionAlgorithm>& list) {
    std::vector<int32_t> out;
    for (const ConvolutionAlgorithm& a : list) out.push_back(static_cast<int32_t>(a.algorithm));
    return out;
  };
  const int32_t direct = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
  const int32_t winograd = static_cast<int32_t>(dnnl::algorithm::convolution_winograd);
  // kDirectJit, the form of direct that an open region's quick lowering takes, is never measured.
  EXPECT_EQ(ids(convolution_candidates(true)), (std::vector<int32_t>{kTesseraWinograd, direct}));
  EXPECT_EQ(ids(convolution_candidates(false)), (std::vector<int32_t>{direct, winograd, kTesseraWinograd}));
}

TEST(DnnlOpTables, DirectJitConvolutionIsNeitherBrgemmNorReference) {
  // A 3x3 convolution of a recogniser's shape, layouts left to oneDNN: as kDirectJit its implementation is
  // never brgemm-based (oneDNN 2.6 puts brgconv first with AVX-512, and generates its kernels at every new
  // shape) nor the reference kernel; as a plain direct convolution oneDNN's own first choice stays.
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const std::vector<int64_t> dims[] = {{1, 32, 16, 264}, {64, 32, 3, 3}, {64}, {1, 64, 16, 264}};
  std::vector<memory::desc> roles;
  for (const auto& d : dims) roles.emplace_back(memory::dims(d.begin(), d.end()), memory::data_type::f32, memory::format_tag::any);
  roles[2] = memory::desc({64}, memory::data_type::f32, memory::format_tag::a);
  Step step;
  step.kind = StepKind::kConvolution;
  step.inputs = {0, 1, 2};
  step.output = 3;
  step.ints = {1, 1, 0, 0, 1, 1, 1, 1};  // strides, dilations (from 0), begin pads, end pads
  step.algorithm = kDirectJit;
  const std::string jit = make_primitive_desc(step, roles, roles, engine).impl_info_str();
  EXPECT_NE(jit.rfind("brg", 0), 0u) << jit;
  EXPECT_NE(jit.rfind("ref", 0), 0u) << jit;
  step.algorithm = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
  const std::string first = make_primitive_desc(step, roles, roles, engine).impl_info_str();
  EXPECT_NE(first.rfind("ref", 0), 0u) << first;
  // Where oneDNN's first choice is not brgemm-based (below AVX-512), kDirectJit is that same kernel.
  if (first.rfind("brg", 0) != 0) EXPECT_EQ(jit, first);
}

}  // namespace
}  // namespace tessera::dnnl_backend
