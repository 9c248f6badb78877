// Hostile oneDNN payloads that must be refused before oneDNN sees them:
// oneDNN 2.6 reads a concat's dims at the requested axis before it checks
// the axis, so an out-of-range axis (or sources of another rank) crashed the
// loader (found by fuzz_model_load in CI). The general byte-mutation sweep is
// DnnlBackendLowering.HostilePayloadsAreRefusedCleanly.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"
#include "graph_builder.h"
#include "runtime/backend_registry.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

using dnnl_backend::Program;
using dnnl_backend::Step;
using dnnl_backend::StepKind;

TEST(DnnlPayload, ConcatAxisAndSourceRanksAreChecked) {
  GraphBuilder b;
  const ValueId x = b.input({1, 8, 4, 4});
  const ValueId y = b.input({1, 8, 4, 4});
  b.output(b.node("Concat", {x, y}, attributes({{"axis", Attribute::of_int(1)}})));
  b.graph.value(b.graph.outputs[0]).type = TensorType::make(DType::kFloat32, {1, 16, 4, 4});
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const Program program = dnnl_backend::lower_region(b.graph, engine);
  size_t concat = program.steps.size();
  for (size_t k = 0; k < program.steps.size(); ++k) {
    if (program.steps[k].kind == StepKind::kConcat) concat = k;
  }
  ASSERT_LT(concat, program.steps.size());
  std::unique_ptr<Backend> dnnl = find_backend("dnnl")->make(RegionOptions{});
  // The program as lowered loads.
  EXPECT_NO_THROW(dnnl->load(b.graph, dnnl_backend::serialize_program(program), RegionOptions{}));
  for (const int64_t axis : {int64_t{-1}, int64_t{4}, int64_t{7}, int64_t{1} << 40, -(int64_t{1} << 40)}) {
    Program hostile = program;
    hostile.steps[concat].ints[0] = axis;
    try {
      dnnl->load(b.graph, dnnl_backend::serialize_program(hostile), RegionOptions{});
      ADD_FAILURE() << "axis " << axis << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUser) << "axis " << axis << ": " << e.what();
      // Refused by the check, not by whatever oneDNN happens to do after reading past the dims.
      EXPECT_NE(std::string(e.what()).find("concat axis out of range"), std::string::npos) << e.what();
    }
  }
}

TEST(DnnlPayload, FormatTagOfNamesEachLayoutAtEveryDims) {
  // Payloads store a layout as the format tag that names it; format_tag_of remembers the tag of each
  // layout it saw (lowering a region for a new shape asks about the same layouts at new dims), so
  // the same layouts come back here at dims where sizes of 1 make their strides ambiguous.
  using dnnl::memory;
  const std::vector<memory::format_tag> tags = {memory::format_tag::nChw8c, memory::format_tag::nChw16c,
                                                memory::format_tag::nhwc,   memory::format_tag::OIhw8i8o,
                                                memory::format_tag::Ohwi8o, memory::format_tag::cdba,
                                                memory::format_tag::nchw};
  const std::vector<memory::dims> dims_list = {{2, 16, 5, 7}, {1, 16, 1, 1}, {1, 8, 1, 9}, {3, 24, 4, 1},
                                               {1, 1, 1, 1},  {2, 16, 5, 7}, {16, 8, 3, 3}, {1, 8, 1, 9}};
  for (const memory::dims& dims : dims_list) {
    for (const memory::format_tag tag : tags) {
      SCOPED_TRACE(std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) + "x" +
                   std::to_string(dims[3]) + " tag " + std::to_string(static_cast<int>(tag)));
      const memory::desc desc(dims, memory::data_type::f32, tag);
      const int32_t named = dnnl_backend::format_tag_of(desc);
      ASSERT_GE(named, 0);
      const memory::desc rebuilt =
          named == 0 ? dnnl_backend::plain_desc(std::vector<int64_t>(dims.begin(), dims.end()), memory::data_type::f32)
                     : memory::desc(dims, memory::data_type::f32, static_cast<memory::format_tag>(named));
      EXPECT_TRUE(rebuilt == desc);
    }
  }
}

}  // namespace
}  // namespace tessera::testing
