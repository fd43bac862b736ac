// replay::ParseSampleCsv and what `allocguard analyze` runs on what it reads
// (operator/cli/analyze_command.cc): the judge settings from the header,
// AnalyzeRun, Summarize, and both outputs (the text summary, and the JSON
// of `-o json`, replay::ToJsonText). The input holds up to three CSVs
// separated by a line "=====" (the first is the candidate). Invariants:
// nothing throws (the CLI has no handler for an exception here); every error
// has a message; the JSON output parses.

#include <algorithm>
#include <chrono>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "operator/replay/sample_csv.h"
#include "operator/replay/variant_result.h"

namespace {

using allocguard::fuzz::NoThrow;
namespace replay = allocguard::replay;

std::vector<std::string> SplitFiles(const std::string& text) {
  std::vector<std::string> files;
  size_t start = 0;
  while (files.size() < 2) {
    size_t cut = text.find("\n=====\n", start);
    if (cut == std::string::npos) break;
    files.push_back(text.substr(start, cut + 1 - start));
    start = cut + 7;
  }
  files.push_back(text.substr(start));
  return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<replay::VariantResult> results;
  std::chrono::seconds planned{0};
  for (const std::string& file : SplitFiles(text)) {
    auto run = NoThrow("ParseSampleCsv", [&] { return replay::ParseSampleCsv(file); });
    if (!run.ok()) {
      AG_FUZZ_CHECK(!run.status().message().empty(), file);
      return 0;
    }
    replay::JudgeSettings settings;
    NoThrow("JudgeSettings::FromHeader", [&] { settings.FromHeader(*run); });
    // The judge's look plan costs time in proportion to its looks, and a
    // header may plan up to a day of them (over a second each under ASan);
    // the same code plans an hour. Bounded here so that the fuzzer spends its
    // executions on the parser and the analysis: at most 60 planned minutes.
    settings.max_minutes = std::min(settings.max_minutes, 60);
    settings.warmup_minutes = std::min(settings.warmup_minutes, settings.max_minutes);
    // As the CLI reads the planned duration.
    try {
      planned = std::max(planned, std::chrono::seconds(std::stoll(run->Header("duration_s", "0"))));
    } catch (const std::exception&) {
    }
    results.push_back(NoThrow(
        "AnalyzeRun", [&] { return replay::AnalyzeRun(*run, settings, /*finished=*/true); }));
  }
  replay::ReplaySummary summary =
      NoThrow("Summarize", [&] { return replay::Summarize(std::move(results)); });
  std::string out =
      NoThrow("FormatSummary", [&] { return replay::FormatSummary(summary, planned); });
  AG_FUZZ_CHECK(!out.empty(), "an empty text summary");
  out = NoThrow("ToJsonText(summary)", [&] { return replay::ToJsonText(summary); });
  AG_FUZZ_CHECK(!nlohmann::json::parse(out, nullptr, false).is_discarded(), out);
  return 0;
}
