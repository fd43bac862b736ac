#include "operator/replay/run_event.h"

#include <gtest/gtest.h>

#include <vector>

namespace allocguard::replay {
namespace {

// The CSV's event lines are a file format: each typed event is written as it
// always was, and reads back as the same event.
TEST(RunEventTest, EveryKindIsWrittenInItsFileFormAndReadBack) {
  struct Case {
    RunEvent event;
    std::string line;
  };
  const std::vector<Case> cases = {
      {RunEvent::Failed("the workload died (exit code 3)"),
       "failed: the workload died (exit code 3)"},
      {RunEvent::Oom(7), "oom: minute 7"},
      {RunEvent::Exited(0), "exited: minute 0"},
      {RunEvent::Decided("Flat", 12), "decided: Flat at minute 12"},
      {RunEvent::AllocatorLoaded("/usr/lib/libjemalloc.so.2"),
       "allocator loaded: /usr/lib/libjemalloc.so.2"},
      {RunEvent::Latency(12.5, 80, 100.04), "latency: p50_ms=12.5 p99_ms=80.0 max_ms=100.0"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatRunEvent(c.event), c.line);
    RunEvent back = ParseRunEvent(c.line);
    EXPECT_EQ(back.kind, c.event.kind) << c.line;
    EXPECT_EQ(FormatRunEvent(back), c.line);
  }
  EXPECT_EQ(ParseRunEvent("oom: minute 7"), RunEvent::Oom(7));
  EXPECT_EQ(ParseRunEvent("decided: Ratchet at minute 4"), RunEvent::Decided("Ratchet", 4));
}

TEST(RunEventTest, UnknownOrDamagedLinesNeverFail) {
  RunEvent other = ParseRunEvent("something new: 42");
  EXPECT_EQ(other.kind, RunEventKind::kOther);
  EXPECT_EQ(FormatRunEvent(other), "something new: 42");
  EXPECT_EQ(ParseRunEvent("decided: at minute 3").kind, RunEventKind::kOther);
  EXPECT_EQ(ParseRunEvent("").kind, RunEventKind::kOther);

  RunEvent oom = ParseRunEvent("oom: minute 5.6e77");
  EXPECT_EQ(oom.kind, RunEventKind::kOom);
  EXPECT_FALSE(oom.minute.has_value());

  RunEvent latency = ParseRunEvent("latency: p50_ms=abc p99_ms=80.0 junk");
  EXPECT_EQ(latency.kind, RunEventKind::kLatency);
  EXPECT_FALSE(latency.p50_ms.has_value());
  EXPECT_EQ(latency.p99_ms, 80.0);
}

}  // namespace
}  // namespace allocguard::replay
