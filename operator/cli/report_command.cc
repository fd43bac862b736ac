// allocguard report: turn replay CSVs into one self-contained HTML page.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/replay/report_html.h"

namespace allocguard::cli {

namespace {

struct ReportFlags {
  std::vector<std::string> csvs;
  std::string html = "report.html";
  std::string output = "text";
};

int RunReport(const ReportFlags& f) {
  std::vector<replay::CsvRun> runs;
  std::vector<replay::VariantResult> results;
  for (const std::string& path : f.csvs) {
    auto run = replay::ReadSampleCsv(path);
    if (!run.ok()) return Fail(run.status());
    replay::JudgeSettings settings;
    settings.FromHeader(*run);
    results.push_back(replay::AnalyzeRun(*run, settings, /*finished=*/true));
    runs.push_back(std::move(run).value());
  }
  replay::ReplaySummary summary = replay::Summarize(std::move(results));
  Status s = replay::WriteHtmlReport(summary, runs, f.html);
  if (!s.ok()) return Fail(s);
  if (f.output == "json") {
    const nlohmann::json j = {{"file", f.html},
                              {"verdict", VerdictName(summary.overall.verdict)},
                              {"explanation", summary.overall.explanation}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s: %s — %s\n", f.html.c_str(), VerdictName(summary.overall.verdict),
                summary.overall.explanation.c_str());
  }
  return 0;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page from replay CSVs (first is the candidate).");
  cmd->add_option("csv", flags->csvs, "replay CSV files")->required()->check(CLI::ExistingFile);
  cmd->add_option("--html", flags->html, "the HTML file to write")->capture_default_str();
  AddOutputFormatOption(cmd, &flags->output);
  cmd->callback([flags, exit_code] { *exit_code = RunReport(*flags); });
}

}  // namespace allocguard::cli
