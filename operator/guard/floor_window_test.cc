#include "operator/guard/floor_window.h"

#include <gtest/gtest.h>

#include <cmath>

namespace allocguard::guard {
namespace {

constexpr int64_t kMiB = 1 << 20;

memory::MemorySample At(double t, int64_t anon_mib, int64_t dirty_mib = 0) {
  memory::MemorySample s;
  s.t_seconds = t;
  s.anon_bytes = anon_mib * kMiB;
  if (dirty_mib != 0) s.cgroup_dirty_bytes = dirty_mib * kMiB;
  return s;
}

FloorWindowOptions Options(int window, int warmup) {
  FloorWindowOptions o;
  o.window_minutes = window;
  o.warmup_minutes = warmup;
  o.sample_interval_seconds = 2;
  return o;
}

TEST(FloorWindowTest, FloorIsTheLowestAnonPlusDirtyOfEachCompleteMinute) {
  FloorWindow w(Options(30, 0));
  // Minute 0: a peak of 500 MiB, a low of 100 anon + 20 dirty.
  const struct {
    double t;
    int64_t anon, dirty;
  } table[] = {{0, 300, 0},
               {14, 500, 0},
               {30, 100, 20},
               {44, 130, 0},
               {58, 200, 0},
               // Minute 1: 150 is the floor; the sample at 60 closes minute 0.
               {60, 400, 0},
               {90, 150, 0},
               {118, 160, 0},
               // Minute 2 opens and closes minute 1.
               {120, 900, 0}};
  std::vector<memory::MinuteFloor> closed;
  for (const auto& row : table) {
    if (auto f = w.Add(At(row.t, row.anon, row.dirty))) closed.push_back(*f);
  }
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0].minute, 0);
  EXPECT_EQ(closed[0].floor_bytes, 120.0 * kMiB);  // 100 anon + 20 dirty, not 130
  EXPECT_EQ(closed[1].minute, 1);
  EXPECT_EQ(closed[1].floor_bytes, 150.0 * kMiB);
  ASSERT_TRUE(w.current_floor().has_value());
  EXPECT_EQ(w.current_floor()->minute, 1);
}

TEST(FloorWindowTest, WarmupAndIncompleteMinutesGiveNoFloor) {
  FloorWindow w(Options(30, 1));
  // Minute 0 is warm-up. Minute 1's samples stop at 80 s (a stalled sampler):
  // not within one interval of its end, so no floor.
  EXPECT_FALSE(w.Add(At(0, 100)));
  EXPECT_FALSE(w.Add(At(58, 100)));
  EXPECT_FALSE(w.Add(At(60, 100)));  // closes minute 0: warm-up
  EXPECT_FALSE(w.Add(At(80, 90)));
  EXPECT_FALSE(w.Add(At(130, 95)));  // closes minute 1: incomplete
  EXPECT_TRUE(w.floors().empty());
  EXPECT_FALSE(w.current_floor().has_value());
}

// Feeds `minutes` complete minutes whose floor is base + slope * minute.
void FeedLinear(FloorWindow& w, int from_minute, int minutes, double base_mib,
                double slope_mib_per_minute) {
  for (int m = from_minute; m < from_minute + minutes; ++m) {
    const double floor = base_mib + slope_mib_per_minute * m;
    for (int s = 0; s < 30; ++s) {
      // A saw tooth above the floor: the lowest sample is at s == 0.
      const double extra = (s % 5) * 10.0;
      w.Add(At(60.0 * m + 2.0 * s, static_cast<int64_t>(std::llround(floor + extra))));
    }
  }
}

TEST(FloorWindowTest, SlopeOfARisingFloorInGiBPerHour) {
  FloorWindow w(Options(30, 0));
  // 1 GiB/h is 1024/60 MiB per minute; use 16 MiB/min = 0.9375 GiB/h.
  FeedLinear(w, 0, 12, 200, 16);
  w.Add(At(12 * 60, 10000));  // closes minute 11
  const FloorSlope s = w.Slope();
  EXPECT_EQ(s.floors, 12);
  ASSERT_TRUE(s.valid);
  EXPECT_NEAR(s.slope_gib_per_h, 16.0 * 60 / 1024, 1e-6);
  EXPECT_NEAR(s.theil_sen_gib_per_h, 16.0 * 60 / 1024, 1e-6);
  EXPECT_LE(s.low_gib_per_h, s.slope_gib_per_h);
  EXPECT_GE(s.high_gib_per_h, s.slope_gib_per_h);
}

TEST(FloorWindowTest, OldFloorsLeaveTheWindowSoARecoveredWorkloadReadsFlat) {
  FloorWindow w(Options(10, 0));
  FeedLinear(w, 0, 10, 100, 50);  // climbing for ten minutes
  FeedLinear(w, 10, 25, 600, 0);  // then flat for 25 minutes
  w.Add(At(35 * 60, 600));
  const FloorSlope s = w.Slope();
  // Only minutes 25..34 are in a 10-minute window: all flat.
  EXPECT_EQ(s.floors, 10);
  EXPECT_EQ(w.floors().front().minute, 25);
  EXPECT_NEAR(s.slope_gib_per_h, 0.0, 1e-9);
}

TEST(FloorWindowTest, TooFewFloorsHaveNoInterval) {
  FloorWindow w(Options(30, 0));
  FeedLinear(w, 0, 2, 100, 10);
  w.Add(At(120, 100));
  const FloorSlope s = w.Slope();
  EXPECT_EQ(s.floors, 2);
  EXPECT_FALSE(s.valid);
  EXPECT_TRUE(std::isinf(s.low_gib_per_h));
}

}  // namespace
}  // namespace allocguard::guard
