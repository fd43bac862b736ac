#include "operator/memory/verdict.h"

#include <gtest/gtest.h>

#include <set>

namespace allocguard::memory {
namespace {

FloorJudgement Judged(FloorDecision d, std::string why = "floor judgement") {
  FloorJudgement j;
  j.decision = d;
  j.explanation = std::move(why);
  return j;
}

struct VerdictCase {
  const char* name;
  RunFacts facts;
  FloorDecision floors;
  Verdict want;
};

TEST(DecideVariantVerdictTest, PrecedenceTable) {
  const VerdictCase cases[] = {
      {"flat floors", {.requests_completed = 1000}, FloorDecision::kFlat, Verdict::kFlat},
      {"ratchet floors", {.requests_completed = 1000}, FloorDecision::kRatchet, Verdict::kRatchet},
      {"undecided floors",
       {.requests_completed = 1000},
       FloorDecision::kInconclusive,
       Verdict::kInconclusive},
      {"failure beats everything",
       {.requests_completed = 10,
        .unexpected_responses = 5,
        .oom_minute = 3,
        .failure = "exit code 1"},
       FloorDecision::kRatchet,
       Verdict::kFailed},
      {"OOM beats errors",
       {.requests_completed = 10, .unexpected_responses = 5, .oom_minute = 3},
       FloorDecision::kFlat,
       Verdict::kOOMKilled},
      {"errors beat floors",
       {.requests_completed = 1000, .unexpected_responses = 1},
       FloorDecision::kFlat,
       Verdict::kErrors},
      // 11 of 1000 late = 1.1 % > 1 %: the floors measure the backlog.
      {"fell behind",
       {.requests_completed = 1000, .requests_late = 11},
       FloorDecision::kRatchet,
       Verdict::kInconclusive},
      // 10 of 1000 = exactly 1 %: still judged.
      {"late at the limit",
       {.requests_completed = 1000, .requests_late = 10},
       FloorDecision::kRatchet,
       Verdict::kRatchet},
  };
  for (const VerdictCase& c : cases) {
    VariantVerdict v = DecideVariantVerdict(c.facts, Judged(c.floors), VerdictOptions{});
    EXPECT_EQ(v.verdict, c.want) << c.name << ": " << v.explanation;
  }
}

TEST(DecideVariantVerdictTest, ExplanationsSayWhatHappened) {
  auto oom = DecideVariantVerdict({.oom_minute = 6}, Judged(FloorDecision::kFlat), {});
  EXPECT_EQ(oom.explanation, "OOM-killed in minute 6: the cgroup limit was reached");
  auto late = DecideVariantVerdict({.requests_completed = 200, .requests_late = 50},
                                   Judged(FloorDecision::kFlat), {});
  EXPECT_EQ(late.explanation,
            "the workload fell behind: 50 of 200 requests (25.0%) started late, so the floors "
            "measure the backlog, not the allocator");
  auto flat = DecideVariantVerdict({}, Judged(FloorDecision::kFlat, "slope +0.1"), {});
  EXPECT_EQ(flat.explanation, "slope +0.1");
}

TEST(ClassifyVariantsTest, CandidateRatchetsAnotherFlatIsAllocatorRetention) {
  auto o = ClassifyVariants({{"glibc512", "glibc", Verdict::kRatchet},
                             {"arena2", "glibc", Verdict::kRatchet},
                             {"jemalloc", "jemalloc", Verdict::kFlat}});
  EXPECT_EQ(o.verdict, Verdict::kAllocatorRetention);
  EXPECT_EQ(o.classification, Classification::kAllocatorRetention);
  EXPECT_EQ(o.flat_variants, std::vector<std::string>{"jemalloc"});
  EXPECT_NE(o.explanation.find("switch to jemalloc"), std::string::npos);
  EXPECT_EQ(ExitCodeForVerdict(o.verdict), 3);
}

TEST(ClassifyVariantsTest, EveryVariantRatchetsIsLeak) {
  auto o = ClassifyVariants(
      {{"glibc", "glibc", Verdict::kRatchet}, {"jemalloc", "jemalloc", Verdict::kRatchet}});
  EXPECT_EQ(o.verdict, Verdict::kLeak);
  EXPECT_EQ(ExitCodeForVerdict(o.verdict), 4);
}

TEST(ClassifyVariantsTest, UnclassifiedWhenOthersUndecided) {
  auto o = ClassifyVariants(
      {{"glibc", "glibc", Verdict::kRatchet}, {"mimalloc", "mimalloc", Verdict::kInconclusive}});
  EXPECT_EQ(o.verdict, Verdict::kRatchet);
  EXPECT_EQ(o.classification, Classification::kNone);
}

TEST(ClassifyVariantsTest, CandidateVerdictStandsWhenItIsNotARatchet) {
  EXPECT_EQ(ClassifyVariants({{"c", "glibc", Verdict::kFlat}, {"j", "jemalloc", Verdict::kRatchet}})
                .verdict,
            Verdict::kFlat);
  EXPECT_EQ(ClassifyVariants({{"c", "glibc", Verdict::kOOMKilled}}).verdict, Verdict::kOOMKilled);
}

TEST(ExitCodeTest, DistinctPerVerdict) {
  std::set<int> codes;
  for (Verdict v : kAllVerdicts) codes.insert(ExitCodeForVerdict(v));
  EXPECT_EQ(codes.size(), 8u);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kFlat), 0);
  EXPECT_FALSE(codes.contains(1));  // 1 is reserved for usage and internal errors
}

}  // namespace
}  // namespace allocguard::memory

namespace allocguard::memory {
namespace {

TEST(RecommendedLimitTest, QuarterHeadroomRoundedUpTo64MiB) {
  const double mib = 1024.0 * 1024;
  EXPECT_DOUBLE_EQ(RecommendedLimitBytes(1000 * mib), 1280 * mib);  // 1250 -> 1280
  EXPECT_DOUBLE_EQ(RecommendedLimitBytes(1024 * mib), 1280 * mib);  // exactly 1280
  EXPECT_DOUBLE_EQ(RecommendedLimitBytes(1 * mib), 64 * mib);
  EXPECT_DOUBLE_EQ(RecommendedLimitBytes(0), 0);
}

}  // namespace
}  // namespace allocguard::memory
