#include "operator/replay/bake_off.h"

#include <gtest/gtest.h>

#include "operator/common/verdict.h"
#include "operator/replay/allocator_variant.h"

namespace allocguard::replay {
namespace {

using memory::Verdict;

constexpr double kMiB = 1024.0 * 1024.0;

VariantResult Measured(const std::string& name, const std::string& allocator, Verdict verdict,
                       double floor_mib, double cpu_seconds, double p99_ms,
                       const std::string& env = "") {
  VariantResult v;
  v.variant = name;
  v.allocator = allocator;
  v.env = env;
  v.verdict.verdict = verdict;
  v.floor_level_bytes = floor_mib * kMiB;
  v.cpu_seconds = cpu_seconds;
  v.requests_completed = 10000;
  v.p99_ms = p99_ms;
  return v;
}

std::vector<std::string> Order(const BakeOff& b) {
  std::vector<std::string> names;
  for (const auto& e : b.ranked) names.push_back(e.result->variant);
  return names;
}

TEST(BakeOffTest, FlatVariantsRankFirstThenByFloorWithTheCostsAgainstTheCurrent) {
  ReplaySummary s;
  s.variants = {Measured("glibc", "glibc", Verdict::kRatchet, 1500, 60, 40),
                Measured("jemalloc", "jemalloc", Verdict::kFlat, 100, 80, 80),
                Measured("arena2", "glibc", Verdict::kFlat, 300, 62, 42, "MALLOC_ARENA_MAX=2"),
                Measured("tcmalloc", "tcmalloc", Verdict::kInconclusive, 90, 50, 30)};
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(Order(*b), (std::vector<std::string>{"jemalloc", "arena2", "tcmalloc", "glibc"}));
  ASSERT_TRUE(b->recommended.has_value());
  EXPECT_EQ(b->ranked[*b->recommended].result->variant, "jemalloc");
  // 100 MiB against 1500: -93 %; 8 ms against 6 ms per request: +33 %; p99 +100 %.
  EXPECT_EQ(FormatBakeOffCosts(b->ranked[0]), "floor -93 %, CPU +33 %, p99 +100 %");
  EXPECT_NE(b->recommendation.find("Switch from glibc to jemalloc (Flat, floor -93 %"),
            std::string::npos)
      << b->recommendation;
  EXPECT_NE(b->recommendation.find("glibc is Ratchet on this load and ranks 4 of 4"),
            std::string::npos)
      << b->recommendation;
  EXPECT_EQ(b->policy_snippet, "allocator:\n  name: jemalloc\n");
}

TEST(BakeOffTest, FloorsWithinATenthTieAndCpuPerRequestDecides) {
  ReplaySummary s;
  s.variants = {Measured("glibc", "glibc", Verdict::kRatchet, 1500, 60, 40),
                Measured("jemalloc", "jemalloc", Verdict::kFlat, 100, 80, 80),
                // 5 % above jemalloc's floor: a tie; less CPU per request wins.
                Measured("mimalloc", "mimalloc", Verdict::kFlat, 105, 70, 90)};
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Order(*b), (std::vector<std::string>{"mimalloc", "jemalloc", "glibc"}));
}

TEST(BakeOffTest, CpuWithinATenthTiesAndP99Decides) {
  ReplaySummary s;
  s.variants = {Measured("a", "jemalloc", Verdict::kFlat, 100, 80, 80),
                Measured("b", "mimalloc", Verdict::kFlat, 104, 84, 50)};
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Order(*b), (std::vector<std::string>{"b", "a"}));
}

TEST(BakeOffTest, TheCurrentAllocatorRankingFirstIsKept) {
  ReplaySummary s;
  s.variants = {Measured("glibc", "glibc", Verdict::kFlat, 100, 60, 40),
                Measured("jemalloc", "jemalloc", Verdict::kFlat, 100, 80, 80)};
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Order(*b), (std::vector<std::string>{"glibc", "jemalloc"}));
  EXPECT_EQ(b->recommendation.rfind("Keep glibc", 0), 0u) << b->recommendation;
  EXPECT_EQ(b->policy_snippet, "allocator:\n  name: glibc\n");
}

TEST(BakeOffTest, NoFlatVariantMeansNoRecommendationAndNoSnippet) {
  ReplaySummary s;
  s.variants = {Measured("glibc", "glibc", Verdict::kRatchet, 1500, 60, 40),
                Measured("jemalloc", "jemalloc", Verdict::kRatchet, 1000, 80, 80),
                Measured("mimalloc", "mimalloc", Verdict::kFailed, 0, 0, 0)};
  s.variants[2].p99_ms.reset();
  s.variants[2].requests_completed = 0;
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->recommended.has_value());
  EXPECT_TRUE(b->policy_snippet.empty());
  EXPECT_EQ(b->recommendation,
            "No variant was shown Flat, so none is recommended. 2 of 3 climb: if every "
            "allocator's floor climbs, the program itself holds the memory (a leak), and no "
            "allocator is the answer.");
  EXPECT_EQ(Order(*b), (std::vector<std::string>{"jemalloc", "glibc", "mimalloc"}));
  // A run that measured nothing has no costs to show.
  EXPECT_EQ(FormatBakeOffCosts(b->ranked[2]), "");
}

TEST(BakeOffTest, AnEmptySummaryIsAnError) { EXPECT_FALSE(RankBakeOff(ReplaySummary{}).ok()); }

TEST(BakeOffTest, PolicySnippetMapsTheTuningsThePolicyHasAndNamesTheRest) {
  EXPECT_EQ(PolicySnippet(Measured("a2", "glibc", Verdict::kFlat, 1, 1, 1, "MALLOC_ARENA_MAX=2")),
            "allocator:\n  name: glibc\n  glibc:\n    arenaMax: 2\n");
  EXPECT_EQ(PolicySnippet(Measured("j", "jemalloc", Verdict::kFlat, 1, 1, 1,
                                   "MALLOC_CONF=background_thread:true,dirty_decay_ms:1000")),
            "allocator:\n  name: jemalloc\n  jemalloc:\n    mallocConf: "
            "\"background_thread:true,dirty_decay_ms:1000\"\n");
  EXPECT_EQ(
      PolicySnippet(Measured("m", "mimalloc", Verdict::kFlat, 1, 1, 1, "MIMALLOC_PURGE_DELAY=0")),
      "allocator:\n  name: mimalloc\n  mimalloc:\n    options:\n      purge_delay: \"0\"\n");
  EXPECT_EQ(
      PolicySnippet(Measured("t", "tcmalloc", Verdict::kFlat, 1, 1, 1, "TCMALLOC_RELEASE_RATE=5")),
      "allocator:\n  name: tcmalloc\n  tcmalloc:\n    releaseRate: 5\n");
  EXPECT_EQ(PolicySnippet(Measured("x", "jemalloc", Verdict::kFlat, 1, 1, 1, "FOO=1")),
            "# FOO=1: no policy field sets it; set it in the pod\nallocator:\n  name: jemalloc\n");
}

TEST(BakeOffTest, TheDefaultMatrixParsesAndStartsWithTheCurrentAllocator) {
  const auto matrix = DefaultBakeOffMatrix();
  ASSERT_EQ(matrix.size(), 6u);
  EXPECT_EQ(matrix.front(), "glibc");
  for (const std::string& spec : matrix) {
    EXPECT_TRUE(ParseVariant(spec).ok()) << spec;
  }
}

TEST(BakeOffTest, JsonNamesTheRecommendationAndEveryRank) {
  ReplaySummary s;
  s.variants = {Measured("glibc", "glibc", Verdict::kRatchet, 1500, 60, 40),
                Measured("jemalloc", "jemalloc", Verdict::kFlat, 100, 80, 80)};
  auto b = RankBakeOff(s);
  ASSERT_TRUE(b.ok());
  const nlohmann::json j = ToJson(*b);
  EXPECT_EQ(j["current"], "glibc");
  EXPECT_EQ(j["recommended"], "jemalloc");
  ASSERT_EQ(j["ranked"].size(), 2u);
  EXPECT_EQ(j["ranked"][0]["variant"], "jemalloc");
  EXPECT_EQ(j["ranked"][0]["rank"], 1);
  EXPECT_NEAR(j["ranked"][0]["cpuMsPerRequest"].get<double>(), 8.0, 1e-9);
  const std::string text = FormatBakeOff(*b);
  EXPECT_NE(text.find("AllocatorPolicy spec for it:\n  allocator:\n    name: jemalloc"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace allocguard::replay
