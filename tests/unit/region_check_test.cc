// CompiledModel::check (tessera check): region by region against native.
// The check must find a backend that is wrong: the test backend with an
// error planted in one instruction kind (TESSERA_TEST_BACKEND_PLANTED_ERROR)
// is flagged exactly in the regions holding that instruction, named by their
// first node; correct regions pass with errors at float32 noise; device
// regions hand their values over through the host (a value only a later
// region of the same device reads is still checked on real data); bf16
// regions get bf16 tolerances; and a tolerance the error exceeds flags it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "passes/precision.h"
#include "runtime/session.h"
#include "cpu_isa.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

using Builder = GraphBuilder;

/// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

/// x → Relu (test) → a;  x → Conv (native) → b;  Add(a, b) → Relu (test, AddRelu) → y;  MatMul on test → z.
/// Region order: test [Relu], native [Conv], test [AddRelu, ...]. `a` is read only by the
/// second test region, so a normal run keeps it on the device.
Graph mixed_graph() {
  Builder b;
  const ValueId x = b.input({1, 4, 5, 5});
  const ValueId a = b.node("Relu", {x});
  const ValueId conv = b.node("Conv", {x, b.constant(random_float({4, 4, 1, 1}, 3))});
  const ValueId sum = b.node("Add", {a, conv});
  const ValueId y = b.node("Relu", {sum});
  b.output(y);
  return b.graph;
}

std::unique_ptr<CompiledModel> compile_on(const Graph& graph, std::vector<std::string> backends, const std::string& precision = "fp32") {
  CompileOptions options;
  options.backends = std::move(backends);
  options.precision = parse_precision(precision);
  return CompiledModel::compile(graph, options);
}

TEST(RegionCheck, CorrectBackendsPassAndNativeIsNotComparedWithItself) {
  std::unique_ptr<CompiledModel> model = compile_on(mixed_graph(), {"test", "native"});
  ASSERT_GE(model->regions().size(), 3u);
  const Tensor x = random_float({1, 4, 5, 5}, 7);
  const CheckReport report = model->check({x.view()}, CheckOptions{}, "mixed");
  EXPECT_EQ(report.reference, "native (float32)");
  EXPECT_EQ(report.regions_over_tolerance, 0u);
  ASSERT_EQ(report.regions.size(), model->regions().size());
  size_t compared = 0;
  for (const CheckedRegion& region : report.regions) {
    EXPECT_EQ(region.compared, region.backend != "native") << region.index;
    if (!region.compared) continue;
    ++compared;
    ASSERT_FALSE(region.outputs.empty());
    for (const CheckedOutput& output : region.outputs) {
      EXPECT_TRUE(output.within_tolerance) << output.name;
      EXPECT_GT(output.max_reference, 0.0) << output.name << ": compared on no data";
      EXPECT_EQ(output.mismatches, 0) << output.name << ": NaN where the reference has numbers (poisoned memory?)";
      EXPECT_LE(output.relative_error, 1e-6);
    }
  }
  EXPECT_EQ(compared, 2u);
  // The check leaves the model as it was: a normal run still matches native.
  const std::vector<Tensor> again = model->run({x.view()});
  const std::vector<Tensor> reference = compile_on(mixed_graph(), {"native"})->run({x.view()});
  for (int64_t i = 0; i < reference[0].numel(); ++i) EXPECT_FLOAT_EQ(again[0].as<float>()[i], reference[0].as<float>()[i]);
}

TEST(RegionCheck, FindsThePlantedErrorAndNamesTheRegion) {
  const ScopedEnv planted("TESSERA_TEST_BACKEND_PLANTED_ERROR", "AddRelu");
  std::unique_ptr<CompiledModel> model = compile_on(mixed_graph(), {"test", "native"});
  const Tensor x = random_float({1, 4, 5, 5}, 8);
  const CheckReport report = model->check({x.view()}, CheckOptions{}, "mixed");
  ASSERT_EQ(report.regions_over_tolerance, 1u);
  for (const CheckedRegion& region : report.regions) {
    if (!region.compared) continue;
    const bool planted_here = region.first_node.rfind("Add", 0) == 0;  // the AddRelu composite's first node
    EXPECT_EQ(region.within_tolerance, !planted_here) << "region " << region.index << " from " << region.first_node;
    if (planted_here) {
      ASSERT_EQ(region.outputs.size(), 1u);
      EXPECT_NEAR(region.outputs[0].relative_error, 0.01, 2e-3) << "a 1% error was planted";
    }
  }
  const std::string table = render_check_table(report);
  EXPECT_NE(table.find("1 of 2 checked regions over tolerance"), std::string::npos) << table;
  EXPECT_NE(table.find("<-- over tolerance"), std::string::npos) << table;
  const std::string json = render_check_json(report);
  EXPECT_NE(json.find("\"regions_over_tolerance\": 1"), std::string::npos) << json;
  const std::string html = render_check_html(report);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  size_t over_rows = 0;
  for (size_t at = html.find("<tr class=\"over\">"); at != std::string::npos; at = html.find("<tr class=\"over\">", at + 1)) ++over_rows;
  EXPECT_EQ(over_rows, 1u) << html;
  EXPECT_NE(html.find("1 of 2 checked regions over tolerance."), std::string::npos) << html;
  // Names are escaped.
  CheckReport hostile = report;
  hostile.model = "<script>alert(1)</script>";
  hostile.regions[0].first_node = "a<b&c";
  const std::string escaped = render_check_html(hostile);
  EXPECT_EQ(escaped.find("<script>"), std::string::npos);
  EXPECT_NE(escaped.find("&lt;script&gt;"), std::string::npos);
  // A tolerance above the planted error lets it through.
  CheckOptions loose;
  loose.tolerance = 0.05;
  EXPECT_EQ(model->check({x.view()}, loose, "mixed").regions_over_tolerance, 0u);
}

TEST(RegionCheck, Bf16RegionsGetBf16TolerancesAndATightToleranceFlagsThem) {
  const ScopedEnv untuned("TESSERA_DNNL_TUNE", "0");  // the 3x3 Conv stays bf16 (see dnnl_bf16_test.cc)
  Builder b;
  const ValueId x = b.input({1, 8, 6, 6});
  const ValueId c1 = b.node("Conv", {x, b.constant(random_float({8, 8, 3, 3}, 11))},
                            attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  b.output(b.node("Conv", {b.node("Relu", {c1}), b.constant(random_float({4, 8, 1, 1}, 12))}));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"dnnl", "native"}, "bf16-all");
  const Tensor input = random_float({1, 8, 6, 6}, 13);
  const CheckReport report = model->check({input.view()}, CheckOptions{}, "convs");
  ASSERT_EQ(report.regions.size(), 1u);
  const CheckedRegion& region = report.regions[0];
  EXPECT_EQ(region.backend, "dnnl");
  if (!cpu_isa::dnnl_bf16()) {
    // No bf16 on this CPU (or oneDNN capped below it): the region computes in float32 and gets
    // float32's tolerance, which it meets.
    EXPECT_EQ(region.precision, "fp32");
    EXPECT_DOUBLE_EQ(region.tolerance, 1e-4);
    EXPECT_TRUE(region.within_tolerance);
    ASSERT_EQ(region.outputs.size(), 1u);
    EXPECT_LT(region.outputs[0].relative_error, 1e-5);
    return;
  }
  EXPECT_EQ(region.precision, "bf16 (2 nodes)");
  EXPECT_DOUBLE_EQ(region.tolerance, 3e-2);
  EXPECT_DOUBLE_EQ(region.min_cosine, 0.999);
  EXPECT_TRUE(region.within_tolerance);
  ASSERT_EQ(region.outputs.size(), 1u);
  EXPECT_GT(region.outputs[0].relative_error, 1e-5) << "bf16 must differ from the float32 reference";
  EXPECT_GT(region.outputs[0].cosine, 0.999);
  CheckOptions tight;
  tight.tolerance = 1e-6;
  EXPECT_EQ(model->check({input.view()}, tight, "convs").regions_over_tolerance, 1u);
  CheckOptions cosine;
  cosine.min_cosine = 1.0;
  cosine.tolerance = 1.0;
  EXPECT_EQ(model->check({input.view()}, cosine, "convs").regions_over_tolerance, 1u) << "cosine below 1 must flag";
}

TEST(RegionCheck, AFloat64ReferenceComparesNativeRegionsToo) {
  Builder b;
  const ValueId x = b.input({3, 16});
  const ValueId product = b.node("MatMul", {x, b.constant(random_float({16, 8}, 21))});
  // A Cast to float32 inside the region: widened with everything else.
  const ValueId cast = b.node("Cast", {product}, attributes({{"to", Attribute::of_int(1)}}));
  b.output(b.node("Relu", {cast}));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"native"});
  const Tensor input = random_float({3, 16}, 22);
  CheckOptions options;
  EXPECT_FALSE(model->check({input.view()}, options, "m").regions[0].compared) << "float32: native is the reference";
  options.float64_reference = true;
  const CheckReport report = model->check({input.view()}, options, "m");
  EXPECT_EQ(report.reference, "native (float64)");
  ASSERT_EQ(report.regions.size(), 1u);
  const CheckedRegion& region = report.regions[0];
  ASSERT_TRUE(region.compared) << region.note;
  ASSERT_EQ(region.outputs.size(), 1u);
  EXPECT_TRUE(region.within_tolerance);
  EXPECT_GT(region.outputs[0].max_reference, 0.0);
  EXPECT_LE(region.outputs[0].relative_error, 1e-6) << "float32 against float64: rounding only";
  EXPECT_EQ(region.outputs[0].type, "float32[3x8]");
  // The planted error shows against float64 as well.
  const ScopedEnv planted("TESSERA_TEST_BACKEND_PLANTED_ERROR", "AddRelu");
  std::unique_ptr<CompiledModel> test = compile_on(mixed_graph(), {"test", "native"});
  const Tensor x2 = random_float({1, 4, 5, 5}, 23);
  const CheckReport mixed = test->check({x2.view()}, options, "mixed");
  EXPECT_EQ(mixed.regions_over_tolerance, 1u);
  for (const CheckedRegion& r : mixed.regions) EXPECT_TRUE(r.compared) << r.index << ": " << r.note;
}

TEST(RegionCheck, WrongInputsAreUserErrors) {
  std::unique_ptr<CompiledModel> model = compile_on(mixed_graph(), {"test", "native"});
  const Tensor wrong = random_float({1, 4, 5, 6}, 9);
  EXPECT_THROW(model->check({wrong.view()}, CheckOptions{}, "mixed"), Error);
  EXPECT_THROW(model->check({}, CheckOptions{}, "mixed"), Error);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

/// A region whose backend is exact only for finite inputs runs on native when an input holds NaN: the
/// check then says it could not compare it, instead of reporting native against native (error 0).
TEST(RegionCheck, ARegionThatFellBackToNativeIsNotReportedAsCompared) {
  GraphBuilder b;
  const ValueId x = b.input({2, 8});
  b.output(b.node("Relu", {b.node("Clip", {x, b.constant(make_float({}, {-1.0f})), b.constant(make_float({}, {1.0f}))})}));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"dnnl", "native"});
  ASSERT_EQ(model->regions().size(), 1u);
  ASSERT_EQ(model->regions()[0].backend, "dnnl");
  std::vector<float> values(16, 0.5f);
  const Tensor finite = make_float({2, 8}, values);
  values[3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor with_nan = make_float({2, 8}, values);
  const CheckReport ok = model->check({finite.view()}, CheckOptions{}, "clip");
  ASSERT_EQ(ok.regions.size(), 1u);
  EXPECT_TRUE(ok.regions[0].compared);
  const CheckReport fell_back = model->check({with_nan.view()}, CheckOptions{}, "clip");
  ASSERT_EQ(fell_back.regions.size(), 1u);
  EXPECT_FALSE(fell_back.regions[0].compared);
  EXPECT_NE(fell_back.regions[0].note.find("holds NaN or infinity, so the region ran on native"), std::string::npos)
      << fell_back.regions[0].note;
  EXPECT_TRUE(fell_back.regions[0].outputs.empty());
}

}  // namespace
}  // namespace tessera::testing
