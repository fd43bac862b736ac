// allocguard report: turn replay CSVs into one self-contained HTML page.

#include <CLI/CLI.hpp>
#include <cstdio>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/replay/report_html.h"

namespace allocguard::cli {

namespace {

struct ReportFlags {
  std::vector<std::string> csvs;
  std::string output = "report.html";
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
  Status s = replay::WriteHtmlReport(summary, runs, f.output);
  if (!s.ok()) return Fail(s);
  std::printf("%s: %s — %s\n", f.output.c_str(), VerdictName(summary.overall.verdict),
              summary.overall.explanation.c_str());
  return 0;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page from replay CSVs (first is the candidate).");
  cmd->add_option("csv", flags->csvs, "replay CSV files")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", flags->output, "HTML file to write (default report.html)");
  cmd->callback([flags, exit_code] { *exit_code = RunReport(*flags); });
}

}  // namespace allocguard::cli
