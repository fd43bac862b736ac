// allocguard analyze: re-judge saved replay CSVs, so pipelines can keep CSVs
// as artifacts and judge them again (with the same or other thresholds).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/replay/variant_result.h"

namespace allocguard::cli {

namespace {

struct AnalyzeFlags {
  std::vector<std::string> csvs;
  double max_slope = 0;  // 0: as recorded in each CSV
  std::string output = "text";
};

int RunAnalyze(const AnalyzeFlags& f) {
  std::vector<replay::VariantResult> results;
  std::chrono::seconds planned{0};
  for (const std::string& path : f.csvs) {
    auto run = replay::ReadSampleCsv(path);
    if (!run.ok()) return Fail(run.status());
    replay::JudgeSettings settings;
    settings.FromHeader(*run);
    if (f.max_slope > 0) settings.max_slope_gib_per_h = f.max_slope;
    try {
      planned = std::max(planned, std::chrono::seconds(std::stoll(run->Header("duration_s", "0"))));
    } catch (const std::exception&) {
    }
    results.push_back(replay::AnalyzeRun(*run, settings, /*finished=*/true));
  }
  replay::ReplaySummary summary = replay::Summarize(std::move(results));
  if (f.output == "json") {
    std::printf("%s\n", replay::ToJsonText(summary).c_str());
  } else {
    std::printf("%s", replay::FormatSummary(summary, planned).c_str());
  }
  return ExitCodeForVerdict(summary.overall.verdict);
}

}  // namespace

void RegisterAnalyzeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<AnalyzeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Recompute floors, slope and verdict from replay CSVs; the first CSV is the candidate, "
      "the others are variants on the identical load. Exit codes as for replay.");
  cmd->add_option("csv", flags->csvs, "replay CSV files")->required()->check(CLI::ExistingFile);
  cmd->add_option("--max-slope", flags->max_slope,
                  "flat threshold in GiB/h (default: as recorded in each CSV)");
  AddOutputFormatOption(cmd, &flags->output);
  cmd->callback([flags, exit_code] { *exit_code = RunAnalyze(*flags); });
}

}  // namespace allocguard::cli
