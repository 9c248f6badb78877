// The runtime's choice at a shape an open-dims region has not prepared
// (runtime/shape_admission.cc), driven with made-up measurements: prepare while
// the preparations' costs are unknown (the second in full, the third quickly),
// measure native (its first run not a sample; compared with the backend at the
// size it ran at), then ski rental over two tiers
// (a shape is prepared in a tier at the call where what running it on native
// has cost more than that tier would reaches the tier's preparation cost), the
// forced preparation after a run of natives, and the eager override.
#include "runtime/shape_admission.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tessera::testing {
namespace {

using Choice = ShapeAdmission::Choice;
using Tier = ShapeAdmission::Tier;

std::vector<Shape> dims(int64_t w) { return {{1, w}}; }

/// What an admission is made to measure, per 1000 elements: the quick tier's preparation 10 ms and its
/// run `quick_ms`; the full tier's preparation `full_prepare_ms` and its run `full_ms` (after a first
/// preparation of 100 ms, which is not a sample); native `native_ms` (after a first run of 100 times that,
/// which is not a sample either: with it, native would never be chosen below).
struct Measured {
  double native_ms;
  double quick_ms = 1;
  double full_ms = 1;
  double full_prepare_ms = 40;
  Tier quick_made = Tier::kQuick;  // kFull: a backend without a quick tier
};

void measure(ShapeAdmission& a, const Measured& m) {
  ASSERT_EQ(a.choose(dims(1), 1000), Choice::kPrepare);  // nothing known
  a.prepared(1000, Choice::kPrepare, Tier::kFull, 100, 50 * m.full_ms);
  ASSERT_EQ(a.choose(dims(2), 1000), Choice::kPrepareFull);  // the first preparation was not a sample
  a.prepared(1000, Choice::kPrepareFull, Tier::kFull, m.full_prepare_ms, m.full_ms);
  ASSERT_EQ(a.choose(dims(3), 1000), Choice::kPrepare);  // the quick tier not measured yet
  a.prepared(1000, Choice::kPrepare, m.quick_made, 10, m.quick_ms);
  ASSERT_EQ(a.choose(dims(4), 1000), Choice::kNative);  // native not measured yet
  a.ran_native(1000, 100 * m.native_ms);                  // its first run makes its kernels' state
  ASSERT_EQ(a.choose(dims(30), 1000), Choice::kNative);  // so it was not a sample
  a.ran_native(1000, m.native_ms);
}

void measure(ShapeAdmission& a, double native_ms) { measure(a, Measured{native_ms}); }

/// How many calls at `shape` (of `work` elements) run on native before one is prepared (at most
/// `limit`), and as what.
std::pair<int, Choice> natives_before_preparing(ShapeAdmission& a, int64_t shape, int limit = 100, int64_t work = 1000) {
  int natives = 0;
  Choice choice = Choice::kNative;
  while (natives < limit && (choice = a.choose(dims(shape), work)) == Choice::kNative) ++natives;
  return {natives, choice};
}

TEST(ShapeAdmission, AShapeIsPreparedWhenWhatNativeCostItMoreReachesThePreparation) {
  ShapeAdmission a;
  measure(a, 5);  // native pays 4 ms more per 1000 elements than the backend; a preparation is 10
  EXPECT_EQ(a.choose(dims(5), 1000), Choice::kNative);   // paid 4
  EXPECT_EQ(a.choose(dims(5), 1000), Choice::kNative);   // paid 8
  EXPECT_EQ(a.choose(dims(5), 1000), Choice::kPrepare);  // 12 would pass 10 (the full tier's 40: not yet)
  // The gap grows with the size: at 3000 elements one run would pay 12.
  EXPECT_EQ(a.choose(dims(6), 3000), Choice::kPrepare);
  // At 12000, 48: past the full tier's preparation too, which then runs the shape from the start.
  EXPECT_EQ(a.choose(dims(7), 12000), Choice::kPrepareFull);
  // Another small shape starts from nothing paid.
  EXPECT_EQ(a.choose(dims(8), 1000), Choice::kNative);
}

TEST(ShapeAdmission, AfterARunOfNativesOneShapeIsPreparedToMeasureItsCostAgain) {
  ShapeAdmission a;
  measure(a, 4);  // native pays 3 ms more per 1000 elements: no single run reaches a preparation's 10
  int prepared_at = -1;  // (measure's two runs on native count as the first two natives in a row)
  for (int call = 0; call < 12 && prepared_at < 0; ++call) {
    if (a.choose(dims(100 + call), 1000) == Choice::kPrepare) prepared_at = call;
  }
  EXPECT_EQ(prepared_at, 2);  // the fifth native in a row is prepared instead
  a.prepared(1000, Choice::kPrepare, Tier::kQuick, 10, 1);
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
  EXPECT_EQ(natives_before_preparing(a, 7), std::make_pair(19, Choice::kPrepare));
}

TEST(ShapeAdmission, ACheaperPreparationMeasuredLaterChangesTheChoice) {
  ShapeAdmission a;
  measure(a, 5);
  EXPECT_EQ(a.choose(dims(7), 1000), Choice::kNative);
  a.prepared(1000, Choice::kPrepare, Tier::kQuick, 0.5, 1);  // preparations became cheap (the blend: 5.25 ms)
  a.prepared(1000, Choice::kPrepare, Tier::kQuick, 0.5, 1);  // 2.9
  EXPECT_EQ(a.choose(dims(8), 1000), Choice::kPrepare);
}

TEST(ShapeAdmission, AShapeThatKeepsComingGetsTheFullTierWhereTheQuickOneCannotPay) {
  // oneDNN on AVX-512: its quick tier (direct JIT convolutions) slower than native's Winograd, its full
  // one (brgemm) faster; with one rate for both, such a shape stayed on native for good.
  ShapeAdmission a;
  measure(a, Measured{.native_ms = 5, .quick_ms = 6, .full_ms = 2, .full_prepare_ms = 30});
  // 3 ms a call more than the full tier: the tenth call reaches its 30.
  EXPECT_EQ(natives_before_preparing(a, 7), std::make_pair(9, Choice::kPrepareFull));
  // Shapes that come once stay on native, and no refresh prepares the quick tier for them (it would
  // not pay at any call); once 30 is within four calls' gap, a run of natives refreshes the full one.
  for (int call = 0; call < 40; ++call) EXPECT_EQ(a.choose(dims(100 + call), 1000), Choice::kNative) << call;
  EXPECT_EQ(a.choose(dims(200), 3000), Choice::kPrepareFull);  // 9 x 4 >= 30: refreshed
}

TEST(ShapeAdmission, TieringUpMeasuresTheFullTierAgain) {
  ShapeAdmission a;
  measure(a, Measured{.native_ms = 5, .quick_ms = 6, .full_ms = 2, .full_prepare_ms = 30});
  a.tiered_up(10);  // the full tier's preparations became cheaper: the blend 20
  a.tiered_up(10);  // 15
  EXPECT_EQ(natives_before_preparing(a, 7), std::make_pair(4, Choice::kPrepareFull));  // 3 x 5 >= 15
}

TEST(ShapeAdmission, ABackendWithoutAQuickTierIsPreparedAsItHas) {
  // Asked for its quick tier, the backend made its full one (a region with no direct convolution):
  // the quick tier is the full one, prepared as kPrepare at the full tier's cost (the blend of 40 and 10).
  ShapeAdmission a;
  measure(a, Measured{.native_ms = 5, .quick_ms = 1, .full_ms = 1, .full_prepare_ms = 40, .quick_made = Tier::kFull});
  EXPECT_EQ(natives_before_preparing(a, 7), std::make_pair(6, Choice::kPrepare));  // 4 x 7 >= 25
}

TEST(ShapeAdmission, NativeAndTheBackendAreComparedAtTheSameSize) {
  // Run times are not proportional to the size: here the backend takes 1 ms at 8000 elements and 3 at
  // 30000 (a fixed cost), and native 1 ms at 8000, as fast as the backend there. Scaled by elements
  // alone, native's 0.125 ms per 1000 against the backend's 0.1-0.125 would make a 30000-element call
  // pay 0.4 ms more on native, and a shape of that size be prepared at its third call.
  for (const double native_ms : {1.0, 2.0}) {
    SCOPED_TRACE(native_ms);
    ShapeAdmission a;
    ASSERT_EQ(a.choose(dims(1), 30000), Choice::kPrepare);
    a.prepared(30000, Choice::kPrepare, Tier::kFull, 100, 5);  // the first: no sample
    ASSERT_EQ(a.choose(dims(2), 30000), Choice::kPrepareFull);
    a.prepared(30000, Choice::kPrepareFull, Tier::kFull, 40, 3);
    ASSERT_EQ(a.choose(dims(3), 30000), Choice::kPrepare);
    a.prepared(30000, Choice::kPrepare, Tier::kQuick, 1, 3);
    a.prepared(8000, Choice::kPrepare, Tier::kQuick, 1, 1);  // (another shape prepared quickly)
    ASSERT_EQ(a.choose(dims(4), 8000), Choice::kNative);
    a.ran_native(8000, 100);  // its first run: no sample
    ASSERT_EQ(a.choose(dims(5), 8000), Choice::kNative);
    a.ran_native(8000, native_ms);
    if (native_ms == 1) {
      // As fast as the quick tier at 8000, so no faster there at 30000 (the full tier, 40 ms to prepare,
      // would take 54 such calls to pay).
      EXPECT_EQ(natives_before_preparing(a, 7, 20, 30000).first, 20);
    } else {
      // Twice the quick tier's time at 8000: at 30000, 3 ms more a call, past its 1 ms preparation.
      EXPECT_EQ(natives_before_preparing(a, 7, 20, 30000), std::make_pair(0, Choice::kPrepare));
    }
  }
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
