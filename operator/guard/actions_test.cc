#include "operator/guard/actions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "operator/api/policy.h"

namespace allocguard::guard {
namespace {

// One row per sample: the judged MiB and whether the gate is open after it.
struct Row {
  int64_t judged_mib;
  bool open_after;
};

void RunTable(const HysteresisOptions& options, const std::vector<Row>& rows) {
  BackpressureGate gate(1000LL << 20, options);
  bool was_open = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool changed = gate.Observe(rows[i].judged_mib << 20);
    EXPECT_EQ(gate.open(), rows[i].open_after)
        << "row " << i << " (" << rows[i].judged_mib << " MiB)";
    EXPECT_EQ(changed, gate.open() != was_open) << "row " << i;
    was_open = gate.open();
  }
}

TEST(BackpressureGateTest, ClosesAboveThresholdAndReopensOnlyAfterThreeSamplesBelowNinety) {
  RunTable({},  // defaults: close after 1 sample above, open after 3 at or below 90 %
           {{500, true},
            {1000, true},  // at the threshold is not above it
            {1001, false},
            {950, false},  // below the threshold but above the 900 MiB release level
            {900, false},  // 1st at the release level
            {850, false},  // 2nd
            {920, false},  // back above release: the count restarts
            {880, false},
            {870, false},
            {860, true},  // 3rd in a row
            {990, true},  // between release and threshold: stays open
            {1200, false}});
}

TEST(BackpressureGateTest, ConfigurableCountsAndReleaseFraction) {
  HysteresisOptions o;
  o.samples_above_to_close = 2;
  o.release_fraction = 0.5;
  o.samples_below_to_open = 1;
  RunTable(o, {{1100, true},  // one sample above is not enough
               {900, true},
               {1100, true},
               {1100, false},
               {600, false},  // above 50 %
               {500, true}});
}

TEST(RestartTriggerTest, LowerOfThresholdAndLimitMinusMargin) {
  RestartOptions o;  // margin: 10 % of the limit, at least 32 MiB
  const int64_t mib = 1 << 20;
  struct Case {
    std::optional<int64_t> threshold, limit, want;
  } cases[] = {
      {std::nullopt, std::nullopt, std::nullopt}, {800 * mib, std::nullopt, 800 * mib},
      {std::nullopt, 1000 * mib, 900 * mib},   // 10 % margin
      {std::nullopt, 200 * mib, 168 * mib},    // 32 MiB minimum margin
      {850 * mib, 1000 * mib, 850 * mib},      // threshold lower
      {950 * mib, 1000 * mib, 900 * mib},      // limit's margin lower
      {std::nullopt, 16 * mib, std::nullopt},  // margin larger than the limit
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RestartTriggerBytes(c.threshold, c.limit, o), c.want)
        << "threshold " << c.threshold.value_or(-1) << " limit " << c.limit.value_or(-1);
  }
}

TEST(GuardActionTest, NamesRoundTripAsThePolicySpellsThem) {
  for (const char* name : {"None", "Backpressure", "Restart"}) {
    auto a = api::GuardActionFromName(name);
    ASSERT_TRUE(a.has_value()) << name;
    EXPECT_EQ(api::GuardActionName(*a), name);
  }
  EXPECT_FALSE(api::GuardActionFromName("restart").has_value());
}

}  // namespace
}  // namespace allocguard::guard
