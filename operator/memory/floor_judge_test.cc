#include "operator/memory/floor_judge.h"

#include <gtest/gtest.h>

#include <cmath>

namespace allocguard::memory {
namespace {

std::vector<MinuteFloor> FloorsMiB(std::initializer_list<double> mib, int first_minute = 1) {
  std::vector<MinuteFloor> out;
  int m = first_minute;
  for (double v : mib)
    out.push_back({.minute = m++, .floor_bytes = v * kBytesPerMiB, .samples = 30});
  return out;
}

TEST(FitFloorSlopeTest, HandComputedTable) {
  // Floors 100, 110, 130, 140 MiB at minutes 1..4:
  // mean x = 2.5, mean y = 120, Sxx = 5, Sxy = (-1.5)(-20)+(-0.5)(-10)+(0.5)(10)+(1.5)(20) = 70
  // slope = 14 MiB/min = 840 MiB/h = 0.8203125 GiB/h; intercept = 120 - 14*2.5 = 85 MiB.
  // residuals: 100-99=1, 110-113=-3, 130-127=3, 140-141=-1; SSE = 20;
  // se = sqrt(20/2/5) = sqrt(2) MiB/min.
  auto fit = FitFloorSlope(FloorsMiB({100, 110, 130, 140}));
  EXPECT_DOUBLE_EQ(fit.slope_bytes_per_minute, 14 * kBytesPerMiB);
  EXPECT_DOUBLE_EQ(fit.intercept_bytes, 85 * kBytesPerMiB);
  EXPECT_NEAR(fit.slope_std_error, std::sqrt(2.0) * kBytesPerMiB, 1e-3);
  EXPECT_DOUBLE_EQ(fit.SlopeGiBPerHour(), 0.8203125);
}

TEST(FitFloorSlopeTest, LevelFloorsHaveZeroSlope) {
  auto fit = FitFloorSlope(FloorsMiB({200, 200, 200}));
  EXPECT_EQ(fit.slope_bytes_per_minute, 0);
  EXPECT_EQ(fit.slope_std_error, 0);
}

TEST(FixedDurationJudgeTest, DecidesOnlyAtTheEnd) {
  auto judge = NewFixedDurationJudge({.max_slope_gib_per_h = 0.5});
  auto floors = FloorsMiB({100, 110, 130, 140});
  EXPECT_EQ(judge->Judge(floors, /*final=*/false).decision, FloorDecision::kContinue);
  auto j = judge->Judge(floors, /*final=*/true);
  EXPECT_EQ(j.decision, FloorDecision::kRatchet);
  EXPECT_DOUBLE_EQ(j.slope_gib_per_h, 0.8203125);
  EXPECT_EQ(j.minutes_used, 4);
  EXPECT_EQ(j.explanation, "floor slope +0.82 GiB/h exceeds 0.50 GiB/h over 4 minutes");
}

TEST(FixedDurationJudgeTest, FlatWithinThresholdEitherSide) {
  auto judge = NewFixedDurationJudge({.max_slope_gib_per_h = 0.5});
  // 4 MiB/min = 0.234 GiB/h
  auto j = judge->Judge(FloorsMiB({100, 104, 108, 112}), true);
  EXPECT_EQ(j.decision, FloorDecision::kFlat);
  EXPECT_EQ(j.explanation, "floor slope +0.23 GiB/h is within ±0.50 GiB/h over 4 minutes");
}

TEST(FixedDurationJudgeTest, TooFewFloorsIsInconclusive) {
  auto judge = NewFixedDurationJudge({.max_slope_gib_per_h = 0.5, .min_floors = 3});
  auto j = judge->Judge(FloorsMiB({100, 500}), true);
  EXPECT_EQ(j.decision, FloorDecision::kInconclusive);
  EXPECT_EQ(j.explanation, "only 2 minute floors (need 3)");
}

TEST(FixedDurationJudgeTest, FallingFloorIsStillSettling) {
  auto judge = NewFixedDurationJudge({.max_slope_gib_per_h = 0.5});
  auto j = judge->Judge(FloorsMiB({400, 300, 200, 100}), true);
  EXPECT_EQ(j.decision, FloorDecision::kInconclusive);
}

TEST(FormatSlopeTest, SignAndTwoDecimalsWithAndWithoutTheUnit) {
  EXPECT_EQ(FormatSlopeValue(0.123), "+0.12");
  EXPECT_EQ(FormatSlope(0.123), "+0.12 GiB/h");
  EXPECT_EQ(FormatSlope(-1.5), "-1.50 GiB/h");
}

}  // namespace
}  // namespace allocguard::memory
