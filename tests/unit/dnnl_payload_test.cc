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

}  // namespace
}  // namespace tessera::testing
