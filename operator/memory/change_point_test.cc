#include "operator/memory/change_point.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace allocguard::memory {
namespace {

// Level at 300 MiB up to `start`, then rising `mib_per_minute`; a ±4 MiB
// alternating wobble keeps the residuals non-zero.
std::vector<MinuteFloor> LevelThenRise(int start, double mib_per_minute, int last = 14) {
  std::vector<MinuteFloor> out;
  for (int m = 1; m <= last; ++m) {
    double mib = 300 + (m % 2 ? 4 : -4);
    if (m > start) mib += mib_per_minute * (m - start);
    out.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB, .samples = 30});
  }
  return out;
}

TEST(FindLateGrowthTest, FindsAClimbThatStartsMidRun) {
  // Level to minute 8, then +100 MiB/min (5.9 GiB/h): the strongest rising
  // tail starts at the bend.
  const double threshold = GiBPerHourToBytesPerMinute(0.5);
  LateGrowth g = FindLateGrowth(LevelThenRise(8, 100), threshold, 0.001, 5);
  EXPECT_TRUE(g.found);
  EXPECT_EQ(g.candidates, 14 - 5);  // starts at floors 2..10
  EXPECT_GE(g.start_minute, 8);
  EXPECT_LE(g.start_minute, 9);
  EXPECT_GT(g.tail.low, threshold);
}

TEST(FindLateGrowthTest, LevelFloorsHaveNoLateGrowth) {
  LateGrowth g = FindLateGrowth(LevelThenRise(99, 0), GiBPerHourToBytesPerMinute(0.5), 0.001, 5);
  EXPECT_FALSE(g.found);
  EXPECT_EQ(g.candidates, 9);
}

TEST(FindLateGrowthTest, TooFewFloorsForASegment) {
  LateGrowth g =
      FindLateGrowth(LevelThenRise(2, 100, 5), GiBPerHourToBytesPerMinute(0.5), 0.001, 5);
  EXPECT_FALSE(g.found);
  EXPECT_EQ(g.candidates, 0);
}

// Level at 300 MiB to minute 8, then exactly +100 MiB/min: the broken line
// through every floor fits them without residual, so the tail's slope is the
// climb's and its interval has no width.
TEST(FindHingeGrowthTest, AnExactBrokenLineGivesTheClimbsSlope) {
  std::vector<MinuteFloor> floors;
  for (int m = 1; m <= 14; ++m) {
    floors.push_back(
        {.minute = m, .floor_bytes = (300 + 100.0 * std::max(0, m - 8)) * kBytesPerMiB});
  }
  const LateGrowth g = FindHingeGrowth(floors, GiBPerHourToBytesPerMinute(0.5), 0.001, 5);
  EXPECT_TRUE(g.found);
  EXPECT_EQ(g.candidates, 8);  // bends after floors 2..9: the tail's first floor is 3..10
  EXPECT_EQ(g.start_minute, 9);
  EXPECT_EQ(g.tail.n, 6);
  EXPECT_NEAR(g.tail.slope / kBytesPerMiB, 100, 1e-6);
  EXPECT_NEAR(g.tail.low / kBytesPerMiB, 100, 1e-6);
  EXPECT_EQ(g.tail.dof, 11);
}

TEST(FindHingeGrowthTest, LevelFloorsAndGapsHaveNoLateGrowth) {
  const double threshold = GiBPerHourToBytesPerMinute(0.5);
  const LateGrowth level = FindHingeGrowth(LevelThenRise(99, 0), threshold, 0.001, 5);
  EXPECT_FALSE(level.found);
  EXPECT_EQ(level.candidates, 8);
  auto gap = LevelThenRise(8, 100);
  gap.erase(gap.begin() + 4);  // minute 5 missing: the AR(1) variance needs consecutive minutes
  EXPECT_FALSE(FindHingeGrowth(gap, threshold, 0.001, 5).found);
  EXPECT_EQ(FindHingeGrowth(gap, threshold, 0.001, 5).candidates, 0);
}

}  // namespace
}  // namespace allocguard::memory
