// The runtime's choice at a shape an open-dims region has not prepared
// (runtime/shape_admission.cc), driven with made-up measurements: prepare while
// a preparation's cost is unknown, measure native (its first run not a sample), then ski rental (a
// shape is prepared at the call where what running it on native has cost more
// than the backend would reaches the preparation's cost), the forced
// preparation after a run of natives, and the eager override.
#include "runtime/shape_admission.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tessera::testing {
namespace {

using Choice = ShapeAdmission::Choice;

std::vector<Shape> dims(int64_t w) { return {{1, w}}; }

/// An admission that has measured: a preparation 10 ms (after a first one of 100 that is not a
/// sample), the backend 1 ms and native `native_ms` per 1000 elements (after a first run of 100 times
/// that, which is not a sample either: with it, native would never be chosen below).
void measure(ShapeAdmission& a, double native_ms) {
  ASSERT_EQ(a.choose(dims(1), 1000), Choice::kPrepare);  // nothing known
  a.prepared(1000, 100, 1);
  ASSERT_EQ(a.choose(dims(2), 1000), Choice::kPrepare);  // the first preparation was not a sample
  a.prepared(1000, 10, 1);
  ASSERT_EQ(a.choose(dims(3), 1000), Choice::kNative);  // native not measured yet
  a.ran_native(1000, 100 * native_ms);                    // its first run makes its kernels' state
  ASSERT_EQ(a.choose(dims(30), 1000), Choice::kNative);  // so it was not a sample
  a.ran_native(1000, native_ms);
}

TEST(ShapeAdmission, AShapeIsPreparedWhenWhatNativeCostItMoreReachesThePreparation) {
  ShapeAdmission a;
  measure(a, 5);  // native pays 4 ms more per 1000 elements than the backend; a preparation is 10
  EXPECT_EQ(a.choose(dims(4), 1000), Choice::kNative);   // paid 4
  EXPECT_EQ(a.choose(dims(4), 1000), Choice::kNative);   // paid 8
  EXPECT_EQ(a.choose(dims(4), 1000), Choice::kPrepare);  // 12 would pass 10
  // The gap grows with the size: at 3000 elements one run would pay 12.
  EXPECT_EQ(a.choose(dims(5), 3000), Choice::kPrepare);
  // Another small shape starts from nothing paid.
  EXPECT_EQ(a.choose(dims(6), 1000), Choice::kNative);
}

TEST(ShapeAdmission, AfterARunOfNativesOneShapeIsPreparedToMeasureItsCostAgain) {
  ShapeAdmission a;
  measure(a, 4);  // native pays 3 ms more per 1000 elements: no single run reaches a preparation's 10
  int prepared_at = -1;  // (measure's two runs on native count as the first two natives in a row)
  for (int call = 0; call < 12 && prepared_at < 0; ++call) {
    if (a.choose(dims(100 + call), 1000) == Choice::kPrepare) prepared_at = call;
  }
  EXPECT_EQ(prepared_at, 2);  // the fifth native in a row is prepared instead
  a.prepared(1000, 10, 1);
  // The next comes after twice as many.
  prepared_at = -1;
  for (int call = 0; call < 20 && prepared_at < 0; ++call) {
    if (a.choose(dims(200 + call), 1000) == Choice::kPrepare) prepared_at = call;
  }
  EXPECT_EQ(prepared_at, 8);
}

TEST(ShapeAdmission, NoRefreshWherePreparingCouldNotPayAtOneCall) {
  ShapeAdmission a;
  measure(a, 1.5);  // 0.5 ms more per 1000 elements against a preparation of 10: 20 calls' worth
  for (int call = 0; call < 40; ++call) EXPECT_EQ(a.choose(dims(100 + call), 1000), Choice::kNative) << call;
  // A shape that keeps coming is prepared once it has paid that much.
  int natives = 0;
  while (a.choose(dims(7), 1000) == Choice::kNative && natives < 30) ++natives;
  EXPECT_EQ(natives, 19);
}

TEST(ShapeAdmission, ACheaperPreparationMeasuredLaterChangesTheChoice) {
  ShapeAdmission a;
  measure(a, 5);
  EXPECT_EQ(a.choose(dims(7), 1000), Choice::kNative);
  a.prepared(1000, 0.5, 1);  // preparations became cheap (the blend: 5.25 ms)
  a.prepared(1000, 0.5, 1);  // 2.9
  EXPECT_EQ(a.choose(dims(8), 1000), Choice::kPrepare);
}

TEST(ShapeAdmission, EagerPreparesEveryShape) {
  ShapeAdmission a;
  measure(a, 1.01);
  setenv("TESSERA_SHAPE_ADMISSION", "eager", 1);
  EXPECT_EQ(a.choose(dims(9), 1000), Choice::kPrepare);
  unsetenv("TESSERA_SHAPE_ADMISSION");
  EXPECT_EQ(a.choose(dims(10), 1000), Choice::kNative);
}

}  // namespace
}  // namespace tessera::testing
