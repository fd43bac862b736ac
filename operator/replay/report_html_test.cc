#include "operator/replay/report_html.h"

#include <gtest/gtest.h>

namespace allocguard::replay {
namespace {

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

CsvRun ReportRun(const std::string& variant, double mib_per_min) {
  CsvRun run;
  run.header = {{"variant", variant}, {"allocator", variant}};
  for (int i = 0; i <= 6 * 30; ++i) {
    SampleRow r;
    r.memory.t_seconds = 2.0 * i;
    r.memory.anon_bytes =
        static_cast<int64_t>((300 + mib_per_min * i / 30.0 + (i % 3) * 20) * memory::kBytesPerMiB);
    run.rows.push_back(r);
  }
  return run;
}

TEST(RenderHtmlReportTest, OneChartPerVariantWithSamplesFloorsAndFit) {
  JudgeSettings settings;
  settings.early_stop = false;
  std::vector<CsvRun> runs = {ReportRun("glibc<512>", 50), ReportRun("jemalloc", 0)};
  std::vector<VariantResult> results;
  results.reserve(runs.size());
  for (const auto& r : runs) results.push_back(AnalyzeRun(r, settings, true));
  ReplaySummary summary = Summarize(results);
  std::string html = RenderHtmlReport(summary, runs);

  EXPECT_EQ(Count(html, "<svg"), 2u);
  EXPECT_EQ(Count(html, "class=\"samples\""), 2u);
  // Minutes 1..5 are complete after warm-up: five floor dots per chart.
  EXPECT_EQ(Count(html, "class=\"floor\""), 10u);
  EXPECT_EQ(Count(html, "class=\"fit\""), 2u);
  // Every sample is a point of the polyline: 181 per chart.
  size_t start = html.find(R"(class="samples" points=")");
  size_t end = html.find('"', start + 24);
  EXPECT_EQ(Count(html.substr(start, end - start), ","), 181u);
  // The overall verdict and names are on the page, escaped.
  EXPECT_NE(html.find(VerdictName(summary.overall.verdict)), std::string::npos);
  EXPECT_NE(html.find("glibc&lt;512&gt;"), std::string::npos);
  EXPECT_EQ(html.find("glibc<512>"), std::string::npos);
  // Self-contained: nothing is fetched and nothing runs.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(RenderHtmlReportTest, VariantWithoutSamplesGetsARowAndNoChart) {
  CsvRun failed;
  failed.header = {{"variant", "mimalloc"}};
  failed.events = {ParseRunEvent("failed: cannot start workload")};
  VariantResult r = AnalyzeRun(failed, JudgeSettings{}, true);
  std::string html = RenderHtmlReport(Summarize({r}), {failed});
  EXPECT_EQ(Count(html, "<svg"), 0u);
  EXPECT_NE(html.find("No samples."), std::string::npos);
  EXPECT_NE(html.find("cannot start workload"), std::string::npos);
}

}  // namespace
}  // namespace allocguard::replay
