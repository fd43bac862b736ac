#include "operator/replay/variant_result.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "operator/memory/floor_judge.h"
#include "operator/memory/verdict_evaluation.h"
#include "operator/replay/sample_csv.h"

namespace allocguard::replay {
namespace {

using memory::kBytesPerMiB;

// A run sampled every 2 s for `minutes`, whose floor climbs `mib_per_min`
// from 500 MiB with a saw-tooth of in-flight peaks above it.
CsvRun SampledRun(int minutes, double mib_per_min) {
  CsvRun run;
  run.header = {{"variant", "glibc"}, {"allocator", "glibc"}};
  for (int i = 0; i <= minutes * 30; ++i) {
    SampleRow r;
    r.memory.t_seconds = 2.0 * i;
    double floor = 500 + mib_per_min * r.memory.t_seconds / 60.0;
    double peak = (i % 5) * 40;  // lowest sample each minute is the floor
    r.memory.anon_bytes = static_cast<int64_t>((floor + peak) * kBytesPerMiB);
    r.completed = static_cast<int64_t>(i) * 10;
    r.cpu_seconds = i * 0.1;
    run.rows.push_back(r);
  }
  return run;
}

TEST(AnalyzeRunTest, FloorsSlopeAndFiguresOfAClearRatchet) {
  JudgeSettings settings;
  settings.early_stop = false;
  VariantResult r = AnalyzeRun(SampledRun(10, 40), settings, /*finished=*/true);
  // Minutes 1..9 are complete after warm-up (minute 10 has one sample).
  ASSERT_EQ(r.floors.size(), 9u);
  EXPECT_EQ(r.floors.front().minute, 1);
  EXPECT_NEAR(r.floors.front().floor_bytes / kBytesPerMiB, 540, 1e-6);
  // 40 MiB/min = 2400 MiB/h = 2.34 GiB/h
  EXPECT_NEAR(r.judgement.slope_gib_per_h, 40 * 60 / 1024.0, 1e-6);
  EXPECT_EQ(r.verdict.verdict, memory::Verdict::kRatchet);
  // The peak is sample 299 (t = 598 s): floor 500 + 40 × 598/60 = 898.67,
  // plus the largest saw-tooth step (299 % 5 = 4) × 40 = 160 → 1058.67 MiB.
  EXPECT_NEAR(r.peak_bytes / kBytesPerMiB, 500 + 40 * 598 / 60.0 + 160, 1e-3);
  // 1058.67 × 1.25 = 1323.3 → 1344 MiB (next multiple of 64)
  EXPECT_EQ(r.recommended_limit_bytes / kBytesPerMiB, 1344);
  EXPECT_NEAR(r.cpu_seconds, 30, 1e-9);
}

// The books' reading follows the judge's explanation as a sentence of its
// own, as the report and the terminal print it.
TEST(AnalyzeRunTest, TheBooksReadingIsASentenceAfterTheJudgesExplanation) {
  CsvRun run = SampledRun(10, 40);
  for (SampleRow& r : run.rows) {
    r.books_in_use_bytes = static_cast<int64_t>(300 * kBytesPerMiB);
    r.books_retained_bytes = r.memory.anon_bytes - *r.books_in_use_bytes;
    r.books_processes = 1;
  }
  JudgeSettings settings;
  settings.early_stop = false;
  const VariantResult r = AnalyzeRun(run, settings, true);
  ASSERT_EQ(r.verdict.verdict, memory::Verdict::kRatchet);
  const std::string& why = r.verdict.explanation;
  const size_t books = why.find("The allocator's books: in-use flat");
  ASSERT_NE(books, std::string::npos) << why;
  EXPECT_EQ(why.substr(books - 2, 2), ". ") << why;
  EXPECT_EQ(why.find(".."), std::string::npos) << why;
}

TEST(AnalyzeRunTest, LevelFloorIsFlat) {
  JudgeSettings settings;
  settings.early_stop = false;
  VariantResult r = AnalyzeRun(SampledRun(15, 0), settings, true);
  EXPECT_EQ(r.verdict.verdict, memory::Verdict::kFlat) << r.verdict.explanation;
  EXPECT_NEAR(r.floor_level_bytes / kBytesPerMiB, 500, 1e-6);
}

TEST(AnalyzeRunTest, EarlyStopDecidesAtTheFirstMinuteTheJudgeIsSureAndAnalyzeAgrees) {
  JudgeSettings settings;
  settings.early_stop = true;
  VariantResult full = AnalyzeRun(SampledRun(15, 40), settings, true);
  ASSERT_TRUE(full.decided_at_minute.has_value());
  EXPECT_EQ(full.verdict.verdict, memory::Verdict::kRatchet);
  EXPECT_LT(*full.decided_at_minute, 15);
  // A live run would have stopped at that minute; re-analyzing the samples it
  // had written by then gives the same verdict at the same minute.
  CsvRun cut = SampledRun(15, 40);
  cut.rows.resize((static_cast<size_t>(*full.decided_at_minute) + 1) * 30 + 1);
  VariantResult live = AnalyzeRun(cut, settings, true);
  EXPECT_EQ(live.verdict.verdict, full.verdict.verdict);
  EXPECT_EQ(live.decided_at_minute, full.decided_at_minute);
}

TEST(AnalyzeRunTest, EventsAndCountersBecomeVerdicts) {
  JudgeSettings settings;
  CsvRun failed = SampledRun(3, 0);
  failed.events.push_back(ParseRunEvent("failed: the workload died during the run (exit code 3)"));
  EXPECT_EQ(AnalyzeRun(failed, settings, true).verdict.verdict, memory::Verdict::kFailed);

  CsvRun oom = SampledRun(5, 0);
  for (auto& row : oom.rows) row.oom_kills = row.memory.t_seconds >= 190 ? 1 : 0;
  VariantResult r = AnalyzeRun(oom, settings, true);
  EXPECT_EQ(r.verdict.verdict, memory::Verdict::kOOMKilled);
  EXPECT_EQ(r.oom_minute, 3);

  CsvRun late = SampledRun(5, 0);
  late.rows.back().late = late.rows.back().completed / 10;  // 10 % late
  EXPECT_EQ(AnalyzeRun(late, settings, true).verdict.verdict, memory::Verdict::kInconclusive);
}

TEST(AnalyzeRunTest, ExitEventGivesTheMinuteTheWorkloadDisappeared) {
  CsvRun run = SampledRun(4, 0);
  run.events.push_back(ParseRunEvent("exited: minute 3"));
  run.events.push_back(
      ParseRunEvent("failed: the workload died during the run in minute 3 (gone)"));
  VariantResult r = AnalyzeRun(run, JudgeSettings{}, true);
  EXPECT_EQ(r.exit_minute, 3);
  EXPECT_EQ(r.verdict.verdict, memory::Verdict::kFailed);
  EXPECT_FALSE(AnalyzeRun(SampledRun(4, 0), JudgeSettings{}, true).exit_minute.has_value());
}

// Found by fuzz/sample_csv_fuzzer (UBSan): "oom: minute 5.6e77" was
// converted to an int. A minute outside what an int holds is no minute.
TEST(AnalyzeRunTest, AnEventMinuteNoIntHoldsIsIgnored) {
  for (const char* minute : {"5.6e77", "-1", "nan", "3e9"}) {
    CsvRun run = SampledRun(4, 0);
    run.events.push_back(ParseRunEvent(std::string("oom: minute ") + minute));
    run.events.push_back(ParseRunEvent(std::string("exited: minute ") + minute));
    VariantResult r = AnalyzeRun(run, JudgeSettings{}, true);
    EXPECT_FALSE(r.oom_minute.has_value()) << minute;
    EXPECT_FALSE(r.exit_minute.has_value()) << minute;
  }
  CsvRun run = SampledRun(4, 0);
  run.events.push_back(ParseRunEvent("oom: minute 2"));
  EXPECT_EQ(AnalyzeRun(run, JudgeSettings{}, true).oom_minute, 2);
}

TEST(AnalyzeRunTest, LatencyEventIsRead) {
  CsvRun run = SampledRun(2, 0);
  run.events.push_back(ParseRunEvent("latency: p50_ms=12.5 p99_ms=80.0 max_ms=100.0"));
  VariantResult r = AnalyzeRun(run, JudgeSettings{}, true);
  EXPECT_EQ(r.p50_ms, 12.5);
  EXPECT_EQ(r.p99_ms, 80.0);
}

TEST(JudgeSettingsTest, HeaderRoundTrip) {
  JudgeSettings a;
  a.max_slope_gib_per_h = 0.25;
  a.sample_interval_seconds = 1;
  a.warmup_minutes = 2;
  a.early_stop = false;
  a.verdict.max_late_fraction = 0.05;
  CsvRun run;
  run.header = a.ToHeader();
  JudgeSettings b;
  b.FromHeader(run);
  EXPECT_EQ(b.max_slope_gib_per_h, 0.25);
  EXPECT_EQ(b.sample_interval_seconds, 1);
  EXPECT_EQ(b.warmup_minutes, 2);
  EXPECT_FALSE(b.early_stop);
  EXPECT_EQ(b.verdict.max_late_fraction, 0.05);
}

// Found by fuzz/sample_csv_fuzzer (UBSan): a count in the header too large
// for its type was converted anyway; it keeps the default now.
TEST(JudgeSettingsTest, HeaderCountTooLargeForItsTypeKeepsTheDefault) {
  CsvRun run;
  run.header = {{"warmup_minutes", "1.00018e+13"},
                {"max_minutes", "-1e300"},
                {"max_unexpected_responses", "1e19"}};
  JudgeSettings defaults;
  JudgeSettings s;
  s.FromHeader(run);
  EXPECT_EQ(s.warmup_minutes, defaults.warmup_minutes);
  EXPECT_EQ(s.max_minutes, defaults.max_minutes);
  EXPECT_EQ(s.verdict.max_unexpected_responses, defaults.verdict.max_unexpected_responses);
  // Also fuzz/sample_csv_fuzzer (a timeout): a plan of a million looks.
  run.header = {{"warmup_minutes", "-1000000"}, {"max_minutes", "1000172"}};
  s.FromHeader(run);
  EXPECT_EQ(s.warmup_minutes, defaults.warmup_minutes);
  EXPECT_EQ(s.max_minutes, defaults.max_minutes);
  // And again (a timeout of 47 s under the fuzzer): a week of looks, 10001.
  // The longest canary a policy may ask for, 24 h, is still planned.
  run.header = {{"max_minutes", "10001"}};
  s.FromHeader(run);
  EXPECT_EQ(s.max_minutes, defaults.max_minutes);
  run.header = {{"max_minutes", "1440"}};
  s.FromHeader(run);
  EXPECT_EQ(s.max_minutes, 1440);
}

// Found by fuzz/sample_csv_fuzzer: `allocguard analyze -o json` on a CSV
// whose header holds a byte that is not UTF-8 died of an uncaught exception.
TEST(ToJsonTextTest, CsvHeaderThatIsNotUtf8IsRepairedNotThrownOn) {
  auto run = ParseSampleCsv("#env: \xff\nt_s,");
  ASSERT_TRUE(run.ok()) << run.status().message();
  JudgeSettings settings;
  settings.FromHeader(*run);
  ReplaySummary summary = Summarize({AnalyzeRun(*run, settings, /*finished=*/true)});
  std::string text;
  ASSERT_NO_THROW(text = ToJsonText(summary));
  auto parsed = nlohmann::json::parse(text);
  EXPECT_EQ(parsed["variants"][0]["env"], "\xef\xbf\xbd");  // U+FFFD
}

TEST(SummarizeTest, ClassifiesAcrossVariantsInOrder) {
  JudgeSettings settings;
  settings.early_stop = false;
  VariantResult glibc = AnalyzeRun(SampledRun(10, 40), settings, true);
  CsvRun je = SampledRun(10, 0);
  je.header = {{"variant", "jemalloc"}, {"allocator", "jemalloc"}};
  VariantResult jemalloc = AnalyzeRun(je, settings, true);
  ReplaySummary s = Summarize({glibc, jemalloc});
  EXPECT_EQ(s.overall.verdict, Verdict::kAllocatorRetention);
  EXPECT_EQ(s.overall.flat_variants, std::vector<std::string>{"jemalloc"});
  auto json = ToJson(s);
  EXPECT_EQ(json["exitCode"], 3);
  EXPECT_EQ(json["variants"][1]["verdict"], "Flat");
}

}  // namespace
}  // namespace allocguard::replay

namespace allocguard::replay {
namespace {

// Real traces of the README demo (operator/memory/testdata/README.md).
TEST(RecordedDemoTracesTest, ReJudgingGivesTheVerdictsTheDemoShowed) {
  struct Case {
    const char* file;
    memory::Verdict want;
  } cases[] = {{"demo-run1-glibc512.csv", memory::Verdict::kRatchet},
               {"demo-run1-jemalloc.csv", memory::Verdict::kFlat},
               {"demo-run2-glibc512.csv", memory::Verdict::kRatchet},
               {"demo-run2-jemalloc.csv", memory::Verdict::kFlat}};
  for (const Case& c : cases) {
    auto run = ReadSampleCsv(std::string(ALLOCGUARD_TESTDATA_DIR) + "/" + c.file);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    JudgeSettings settings;
    settings.FromHeader(*run);
    VariantResult r = AnalyzeRun(*run, settings, /*finished=*/true);
    EXPECT_EQ(r.verdict.verdict, c.want) << c.file << ": " << r.verdict.explanation;
    EXPECT_EQ(r.requests_late, 0) << c.file;
  }
}

// Recordings of 32 minutes with early stopping off (operator/memory/
// testdata/README.md, "Recordings of 32 minutes"), judged as a canary with
// the default plan (canary.duration 15m, maxDuration 30m) judges: from the
// start, and as if the canary had started at each later minute. What each
// workload does is known by construction (e2e/workloads/README.md): the
// demo's live data is bounded, so jemalloc's floor and glibc's with its
// default arenas are flat; with 512 arenas glibc's floor ratchets, and with
// --leak it climbs under every allocator. The flat ones are never Ratchet
// from any start minute, the climbing ones never Flat. Left out: glibc with
// two arenas and tcmalloc, which climb for some minutes and then level off
// (no known verdict). The late requests of these runs are not checked: a
// build ran beside some of them (the README says which).
TEST(RecordedLongTracesTest, TheDefaultJudgeGivesTheKnownVerdictFromEveryStart) {
  struct Case {
    const char* file;
    memory::FloorDecision want;  // from the start
  } cases[] = {
      {"long-demo-jemalloc-a.csv", memory::FloorDecision::kFlat},
      {"long-demo-jemalloc-b.csv", memory::FloorDecision::kFlat},
      {"long-demo-glibc-a.csv", memory::FloorDecision::kFlat},
      {"long-demo-glibc-b.csv", memory::FloorDecision::kFlat},
      {"long-demo-glibc512.csv", memory::FloorDecision::kRatchet},
      {"long-demo-jemalloc-leak.csv", memory::FloorDecision::kRatchet},
      {"long-demo-glibc-leak.csv", memory::FloorDecision::kRatchet},
      {"long-demo-mimalloc.csv", memory::FloorDecision::kFlat},
      {"long-libc-demo-glibc.csv", memory::FloorDecision::kFlat},
      {"long-libc-demo-jemalloc.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-jemalloc-a.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-jemalloc-b.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-jemalloc-c.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-glibc-a.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-glibc-b.csv", memory::FloorDecision::kFlat},
      {"long-trio-demo-glibc-c.csv", memory::FloorDecision::kFlat},
  };
  const auto judge = memory::NewDefaultJudge(
      {.max_slope_gib_per_h = 0.5, .max_minutes = 30, .warmup_minutes = 1, .planned_minutes = 15});
  for (const Case& c : cases) {
    auto run = ReadSampleCsv(std::string(ALLOCGUARD_TESTDATA_DIR) + "/" + c.file);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    JudgeSettings settings;
    settings.FromHeader(*run);
    const std::vector<memory::MinuteFloor> floors = AnalyzeRun(*run, settings, true).floors;
    ASSERT_GE(floors.size(), 30U) << c.file;
    const memory::RunOutcome from_start = memory::ReplayJudge(*judge, floors);
    EXPECT_EQ(from_start.judgement.decision, c.want)
        << c.file << ": " << from_start.judgement.explanation;
    const memory::WindowVerdicts w = memory::JudgeFromEachStart(*judge, floors, 30);
    EXPECT_EQ(c.want == memory::FloorDecision::kFlat ? w.counts.ratchet : w.counts.flat, 0)
        << c.file << ": " << w.letters;
  }
}

// Real runs of the demo with the stats agent (operator/replay/testdata/
// README.md): the books split the floor as the demo shows it. glibc512's
// floor is retention (in use flat, retained climbing); jemalloc's books do
// not call its flat floor a leak or retention; with --leak, in use climbs
// under both allocators.
TEST(RecordedDemoTracesTest, TheBooksOfRealRunsSplitTheFloor) {
  struct Case {
    const char* file;
    BooksReading want;
  } cases[] = {{"books-demo-glibc512.csv", BooksReading::kRetention},
               {"books-demo-jemalloc.csv", BooksReading::kUnclear},
               {"books-leak-glibc512.csv", BooksReading::kLeak},
               {"books-leak-jemalloc.csv", BooksReading::kLeak}};
  for (const Case& c : cases) {
    auto run = ReadSampleCsv(std::string(ALLOCGUARD_REPLAY_TESTDATA_DIR) + "/" + c.file);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    JudgeSettings settings;
    settings.FromHeader(*run);
    const VariantResult r = AnalyzeRun(*run, settings, /*finished=*/true);
    ASSERT_TRUE(r.books.has_value()) << c.file;
    EXPECT_EQ(r.books->reading, c.want) << c.file << ": " << r.verdict.explanation;
    if (c.want != BooksReading::kLeak) {
      EXPECT_EQ(r.books->in_use.trend, BooksTrend::kFlat)
          << c.file << ": " << r.verdict.explanation;
    }
    EXPECT_EQ(r.requests_late, 0) << c.file;
  }
}

}  // namespace
}  // namespace allocguard::replay

namespace allocguard::replay {
namespace {

// A run of `mib` floors (minutes 1, 2, ...) under a 15-minute plan that may
// run on to 30, judged as the replay engine judges it at each look.
VariantResult ProgressAfter(std::initializer_list<double> mib) {
  VariantResult r;
  r.settings.max_minutes = 30;
  r.settings.planned_minutes = 15;
  int m = 1;
  for (double v : mib) {
    r.floors.push_back({.minute = m++, .floor_bytes = v * kBytesPerMiB, .samples = 30});
  }
  r.judgement = JudgeFor(r.settings)->Judge(r.floors, /*final=*/false);
  return r;
}

// Issue 17: at minute 3 the line printed [-41693.62, +41704.17] for the
// demo's climb, which a reader cannot tell from wild noise. Before five
// floors it says there are too few minutes, and promises no minutes either.
TEST(MinuteProgressTest, TooFewMinutesForAnIntervalIsSaidNotPrinted) {
  const VariantResult two = ProgressAfter({1404, 1537});
  EXPECT_EQ(FormatMinuteProgress(two),
            "minute 2 of 15 (up to 30)  floor 1537.0 MiB  slope +7.79 GiB/h (no interval yet)  "
            "undecided");
  const VariantResult three = ProgressAfter({1404, 1537, 1584});
  ASSERT_GT(three.judgement.confidence, 0);  // the judge has an interval ...
  ASSERT_GT(three.judgement.slope_high_gib_per_h - three.judgement.slope_low_gib_per_h, 1000);
  const std::string line = FormatMinuteProgress(three);  // ... and the line leaves it out
  EXPECT_EQ(line.rfind("minute 3 of 15 (up to 30)  floor 1584.0 MiB  slope +", 0), 0u) << line;
  EXPECT_NE(line.find("GiB/h (too few minutes for an interval yet)  undecided"), std::string::npos)
      << line;
  EXPECT_EQ(line.find('['), std::string::npos) << line;
  EXPECT_EQ(line.find("needs about"), std::string::npos) << line;
}

// From five floors the interval is shown; the demo's climb is decided there
// by the large-steps rule, whose own interval the line shows
// (memory/sequential_judge_test.cc computes it by hand), not one that
// straddles zero beside the Ratchet.
TEST(MinuteProgressTest, TheIntervalAppearsFromFiveFloors) {
  const VariantResult five = ProgressAfter({1404, 1537, 1584, 2099, 2564});
  EXPECT_EQ(FormatMinuteProgress(five),
            "minute 5 of 15 (up to 30)  floor 2564.0 MiB  slope +16.89 GiB/h [+6.77, +21.19]  "
            "Ratchet");
}

// An undecided level floor past its planned 15 minutes: minute N of the plan
// and of the maximum, the interval, and why the run goes on.
TEST(MinuteProgressTest, PastThePlannedEndTheLineSaysTheRunGoesOn) {
  static const double kWobble[] = {0.6, -1.1, 0.3,  1.2, -0.7, -0.2, 1.0,  -1.3,
                                   0.4, 0.9,  -0.8, 0.1, -0.5, 1.1,  -0.9, 0.2};
  VariantResult r = ProgressAfter({});
  for (int m = 1; m <= 16; ++m) {
    r.floors.push_back(
        {.minute = m, .floor_bytes = (300 + 80 * kWobble[m % 16]) * kBytesPerMiB, .samples = 30});
  }
  r.judgement = JudgeFor(r.settings)->Judge(r.floors, /*final=*/false);
  ASSERT_EQ(r.judgement.decision, memory::FloorDecision::kContinue) << r.judgement.explanation;
  const std::string line = FormatMinuteProgress(r);
  EXPECT_EQ(line.rfind("minute 16 of 15 (up to 30)  floor ", 0), 0u) << line;
  EXPECT_NE(line.find(" [" + memory::FormatSlopeValue(r.judgement.slope_low_gib_per_h) + ", "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("  undecided"), std::string::npos) << line;
  EXPECT_NE(line.find("; past the planned 15 minutes, running on to 30 while the verdict is "
                      "unclear"),
            std::string::npos)
      << line;
}

}  // namespace
}  // namespace allocguard::replay
