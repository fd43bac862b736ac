#include "operator/replay/report_html.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// The points of the first `<polygon class="cls" points="...">` after `from`.
std::vector<std::pair<double, double>> Polygon(const std::string& html, const std::string& cls,
                                               size_t from = 0) {
  const std::string key = "<polygon class=\"" + cls + "\" points=\"";
  size_t start = html.find(key, from);
  std::vector<std::pair<double, double>> points;
  if (start == std::string::npos) return points;
  start += key.size();
  const std::string list = html.substr(start, html.find('"', start) - start);
  std::istringstream in(list);
  std::string point;
  while (in >> point) {
    const size_t comma = point.find(',');
    points.emplace_back(std::stod(point.substr(0, comma)), std::stod(point.substr(comma + 1)));
  }
  return points;
}

// The books are drawn stacked under the judged figure: in use from zero,
// retained on top of it, at the values the samples recorded.
TEST(RenderHtmlReportTest, TheBooksAreStackedUnderTheJudgedFigure) {
  CsvRun run;
  run.header = {{"variant", "glibc"}, {"allocator", "glibc"}};
  for (int i = 0; i <= 10; ++i) {
    SampleRow r;
    r.memory.t_seconds = 12.0 * i;
    r.memory.anon_bytes = static_cast<int64_t>(400 * memory::kBytesPerMiB);  // the y scale's top
    r.books_in_use_bytes = static_cast<int64_t>(200 * memory::kBytesPerMiB);
    r.books_retained_bytes = static_cast<int64_t>((50 + 10 * i) * memory::kBytesPerMiB);
    r.books_processes = 1;
    run.rows.push_back(r);
  }
  // A sample without books ends the stack: the areas do not bridge it.
  SampleRow gap;
  gap.memory.t_seconds = 132;
  gap.memory.anon_bytes = static_cast<int64_t>(400 * memory::kBytesPerMiB);
  run.rows.push_back(gap);
  JudgeSettings settings;
  settings.early_stop = false;
  const VariantResult result = AnalyzeRun(run, settings, true);
  const std::string html = RenderHtmlReport(Summarize({result}), {run});

  EXPECT_EQ(Count(html, "class=\"books-in-use\""), 1u);
  EXPECT_EQ(Count(html, "class=\"books-retained\""), 1u);
  EXPECT_NE(html.find("allocator books: in use 200 → 200 MiB"), std::string::npos);
  EXPECT_NE(html.find("allocator books: retained 50 → 150 MiB"), std::string::npos);
  // Drawn before (under) the samples.
  EXPECT_LT(html.find("books-retained"), html.find("class=\"samples\""));
  // The chart: 0-400 MiB over 300 px, 20 at the top and 40 at the bottom.
  auto y_of = [](double mib) { return 20 + (1 - mib / 400) * 240; };
  const auto in_use = Polygon(html, "books-in-use");
  ASSERT_EQ(in_use.size(), 11u + 2u);  // eleven samples, then the zero line back
  for (size_t i = 0; i < 11; ++i) EXPECT_NEAR(in_use[i].second, y_of(200), 0.05) << i;
  EXPECT_NEAR(in_use[11].second, y_of(0), 0.05);
  EXPECT_NEAR(in_use[12].second, y_of(0), 0.05);
  EXPECT_NEAR(in_use[12].first, in_use[0].first, 0.05);
  const auto retained = Polygon(html, "books-retained");
  ASSERT_EQ(retained.size(), 22u);  // its top forward, the in-use line back
  for (size_t i = 0; i < 11; ++i) {
    EXPECT_NEAR(retained[i].second, y_of(200 + 50 + 10.0 * static_cast<double>(i)), 0.05) << i;
    EXPECT_NEAR(retained[21 - i].first, retained[i].first, 0.05) << i;
    EXPECT_NEAR(retained[21 - i].second, y_of(200), 0.05) << i;
  }
  // The legend names both areas with their last figures (the last sample that
  // has books: the gap after it has none).
  EXPECT_NE(html.find("allocator books: in use (last 200 MiB)"), std::string::npos);
  EXPECT_NE(html.find("retained (held free), stacked on in use (last 150 MiB)"), std::string::npos);
}

TEST(RenderHtmlReportTest, ARunWithoutBooksDrawsNone) {
  std::vector<CsvRun> runs = {ReportRun("jemalloc", 0)};
  JudgeSettings settings;
  settings.early_stop = false;
  const std::string html = RenderHtmlReport(Summarize({AnalyzeRun(runs[0], settings, true)}), runs);
  EXPECT_EQ(Count(html, "books-in-use\" points"), 0u);
  EXPECT_EQ(html.find("stacked on in use"), std::string::npos);
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
