// allocguard replay: run a workload under each allocator variant on an
// identical, deterministic load and judge its memory floor.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/duration.h"
#include "operator/replay/bake_off.h"
#include "operator/replay/in_pod.h"
#include "operator/replay/replay_runner.h"
#include "operator/replay/report_html.h"

namespace allocguard::cli {

namespace {

struct ReplayFlags {
  std::string load_file;
  std::vector<std::string> variants;
  std::string duration = "15m";
  std::string max_duration;  // empty: the same as duration
  std::string interval = "2s";
  double max_slope = 0.5;
  std::string memory_limit;
  bool no_cgroup = false;
  bool no_early_stop = false;
  double max_late_fraction = 0.01;
  int64_t max_errors = 0;
  std::string out_dir;
  std::string report;
  bool bake_off = false;
  pid_t pid = 0;
  std::string name = "attached";
  std::vector<std::string> command;
  // --in-pod
  bool in_pod = false;
  std::string load_json;
  int port = 0;
  std::string allocator = "unknown";
  std::string termination_log = "/dev/termination-log";
  std::string target_comm;
  std::string books_dir;
  std::string output = "text";
};

// Progress lines: on stdout with -o text, on stderr with -o json (stdout
// then holds the JSON alone).
void PrintProgressTo(std::FILE* out, const std::string& line) {
  char stamp[16];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  std::fprintf(out, "[%s] %s\n", stamp, line.c_str());
  std::fflush(out);
}
void PrintProgress(const std::string& line) { PrintProgressTo(stdout, line); }
void PrintProgressToStderr(const std::string& line) { PrintProgressTo(stderr, line); }

// Durations, interval and thresholds, shared by both modes. *duration is
// the longest the run may go: --max-duration when the judge may run past the
// planned --duration, else --duration.
Status ParseRunFlags(const ReplayFlags& f, std::chrono::seconds* duration,
                     replay::JudgeSettings* judge) {
  auto d = ParseFlagDuration("--duration", f.duration);
  if (!d.ok()) return d.status();
  const auto planned = std::chrono::duration_cast<std::chrono::seconds>(*d);
  if (planned.count() < 1) return InvalidArgument("--duration must be at least 1s");
  *duration = planned;
  if (!f.max_duration.empty()) {
    auto m = ParseFlagDuration("--max-duration", f.max_duration);
    if (!m.ok()) return m.status();
    *duration = std::chrono::duration_cast<std::chrono::seconds>(*m);
    if (*duration < planned) return InvalidArgument("--max-duration must not be below --duration");
    if (f.no_early_stop) *duration = planned;  // a run that never stops early ends as planned
  }
  const auto minutes = [](std::chrono::seconds s) {
    return static_cast<int>((s.count() + 59) / 60);
  };
  judge->max_minutes = minutes(*duration);
  judge->planned_minutes = minutes(planned);
  auto interval = ParseFlagDuration("--interval", f.interval);
  if (!interval.ok()) return interval.status();
  if (interval->count() < 100) {
    return InvalidArgument("--interval must be a duration of at least 100ms");
  }
  judge->sample_interval_seconds = static_cast<double>(interval->count()) / 1000.0;
  if (!(f.max_slope > 0)) return InvalidArgument("--max-slope must be positive");
  judge->max_slope_gib_per_h = f.max_slope;
  judge->early_stop = !f.no_early_stop;
  judge->verdict.max_late_fraction = f.max_late_fraction;
  judge->verdict.max_unexpected_responses = f.max_errors;
  return Status::Ok();
}

// --in-pod: measure the workload container's processes in a shared process
// namespace and write the compact result to the termination log. Exits 0
// once a result is written, whatever the verdict: the verdict is in the
// result, and a failed container would only hide it behind the Pod's phase.
int RunInPodCommand(const ReplayFlags& f) {
  replay::InPodOptions options;
  if (!f.load_json.empty() == !f.load_file.empty()) {
    return UsageError(InvalidArgument("--in-pod needs exactly one of --load-file and --load-json"));
  }
  if (!f.load_json.empty()) {
    options.load_text = f.load_json;
  } else {
    std::ifstream in(f.load_file);
    if (!in) return Fail(NotFound("cannot read load file " + f.load_file));
    options.load_text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (f.port != 0) options.port = f.port;
  Status parsed = ParseRunFlags(f, &options.duration, &options.judge);
  if (!parsed.ok()) return UsageError(parsed);
  if (f.variants.size() > 1)
    return UsageError(InvalidArgument("--in-pod takes one --variant name"));
  if (!f.variants.empty()) options.variant = f.variants.front();
  options.allocator = f.allocator;
  options.termination_log = f.termination_log;
  options.target_comm = f.target_comm;
  options.books_dir = f.books_dir;
  if (!f.out_dir.empty()) options.out_dir = f.out_dir;
  options.progress = PrintProgress;
  auto result = replay::RunInPod(options, RealClock::Get());
  if (!result.ok()) return Fail(result.status());
  std::printf("%s: %s — %s\nresult written to %s\n", result->variant.c_str(),
              VerdictName(result->verdict), result->message.c_str(), f.termination_log.c_str());
  return 0;
}

// bake-off.json (the ranking as replay::ToJson writes it) and
// bake-off-policy.yaml (the recommendation's AllocatorPolicy spec.allocator,
// or a comment saying there is none) in the replay's output directory.
Status WriteBakeOffFiles(const replay::BakeOff& bake_off, const std::string& dir) {
  const std::string json_path = dir + "/bake-off.json";
  std::ofstream json_out(json_path);
  json_out << replay::ToJson(bake_off).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
           << "\n";
  if (!json_out.flush()) return PermissionDenied("cannot write " + json_path);
  const std::string yaml_path = dir + "/bake-off-policy.yaml";
  std::ofstream yaml_out(yaml_path);
  yaml_out << (bake_off.policy_snippet.empty()
                   ? "# no variant stayed Flat: no allocator to recommend\n"
                   : "# AllocatorPolicy spec for " +
                         bake_off.ranked[*bake_off.recommended].result->variant + "\n" +
                         bake_off.policy_snippet);
  if (!yaml_out.flush()) return PermissionDenied("cannot write " + yaml_path);
  return Status::Ok();
}

int RunReplayCommand(const ReplayFlags& f) {
  if (f.in_pod) return RunInPodCommand(f);
  replay::ReplayOptions options;
  if (f.load_file.empty()) return UsageError(InvalidArgument("--load is required"));
  Status parsed = ParseRunFlags(f, &options.duration, &options.judge);
  if (!parsed.ok()) return UsageError(parsed);
  auto load = replay::ReadLoadSpecFile(f.load_file);
  if (!load.ok()) return Fail(load.status());
  options.load = *load;
  if (!f.memory_limit.empty()) {
    auto limit = ParseQuantity(f.memory_limit);
    if (!limit.ok()) return UsageError(limit.status().WithContext("--memory-limit"));
    options.memory_limit_bytes = *limit;
  }
  options.use_cgroup = !f.no_cgroup;
  options.books_dir = f.books_dir;
  options.out_dir = f.out_dir.empty() ? "." : f.out_dir;
  options.command = f.command;
  if (f.pid > 0) {
    options.attach_pid = f.pid;
    options.attach_name = f.name;
  } else {
    if (f.command.empty()) {
      return UsageError(InvalidArgument("give the workload command after --, or --pid to attach"));
    }
    std::vector<std::string> specs = f.variants;
    if (specs.empty()) {
      specs = f.bake_off ? replay::DefaultBakeOffMatrix() : std::vector<std::string>{"glibc"};
    }
    if (f.bake_off && specs.size() < 2) {
      return UsageError(InvalidArgument("--bake-off compares at least two --variant"));
    }
    for (const std::string& spec : specs) {
      auto v = replay::ParseVariant(spec);
      if (!v.ok()) return UsageError(v.status().WithContext("--variant"));
      auto lib = replay::ResolveAllocatorLibrary(v->allocator, replay::DefaultLibrarySearchDirs());
      if (!lib.ok()) return Fail(lib.status().WithContext("variant " + v->name));
      v->library = *lib;
      options.variants.push_back(*v);
    }
  }
  if (f.bake_off && f.pid > 0) {
    return UsageError(InvalidArgument("--bake-off starts the workload itself; not with --pid"));
  }
  const bool json = f.output == "json";
  options.progress = json ? PrintProgressToStderr : PrintProgress;
  auto summary = replay::RunReplay(options, RealClock::Get());
  if (!summary.ok()) return Fail(summary.status());
  std::FILE* notes = json ? stderr : stdout;
  std::optional<replay::BakeOff> bake_off;
  if (f.bake_off) {
    auto ranked = replay::RankBakeOff(*summary);
    if (!ranked.ok()) return Fail(ranked.status());
    bake_off = std::move(*ranked);
    Status written = WriteBakeOffFiles(*bake_off, options.out_dir);
    if (!written.ok()) return Fail(written);
  }
  if (json) {
    nlohmann::json out = replay::ToJson(*summary);
    if (bake_off) out["bakeOff"] = replay::ToJson(*bake_off);
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n%s",
                replay::FormatSummary(*summary, std::chrono::minutes(options.judge.planned_minutes))
                    .c_str());
    if (bake_off) std::printf("\n%s", replay::FormatBakeOff(*bake_off).c_str());
  }
  std::fprintf(notes, "CSV, errors and JSON per variant, and summary.json, are in %s\n",
               options.out_dir.c_str());
  if (bake_off) {
    std::fprintf(notes, "bake-off: %s/bake-off.json; policy snippet: %s/bake-off-policy.yaml\n",
                 options.out_dir.c_str(), options.out_dir.c_str());
  }
  if (!f.report.empty()) {
    std::vector<replay::CsvRun> runs;
    for (const auto& v : summary->variants) {
      auto run = replay::ReadSampleCsv(options.out_dir + "/" + v.variant + ".csv");
      if (run.ok()) runs.push_back(*run);
    }
    Status written =
        replay::WriteHtmlReport(*summary, runs, f.report, bake_off ? &*bake_off : nullptr);
    if (!written.ok()) return Fail(written);
    std::fprintf(notes, "report: %s\n", f.report.c_str());
  }
  return ExitCodeForVerdict(summary->overall.verdict);
}

}  // namespace

void RegisterReplayCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Run a workload under each allocator variant on an identical deterministic load, sample "
      "its memory every interval and judge the per-minute floor.\n"
      "Exit codes: 0 Flat, 2 Ratchet, 3 AllocatorRetention, 4 Leak, 5 OOMKilled, 6 Errors, "
      "7 Failed, 8 Inconclusive, 1 error, 64 usage error (docs/cli.md).");
  cmd->add_option("--load,--load-file", flags->load_file,
                  "load file (YAML) with the request mix; required");
  cmd->add_option("--variant", flags->variants,
                  "NAME[=ALLOCATOR][,ENV=VALUE...]; repeatable; the first is the candidate. "
                  "Allocators: glibc, jemalloc, mimalloc, tcmalloc. Default: glibc. "
                  "With --in-pod: the name of the variant measured");
  cmd->add_option("--duration", flags->duration,
                  "planned run time per variant (default 15m): the judge spends its error budget "
                  "over the looks up to it");
  cmd->add_option("--max-duration", flags->max_duration,
                  "run on, up to this, while the verdict is still unclear at --duration (default: "
                  "--duration; canaries use the policy's canary.maxDuration)");
  cmd->add_option("--interval", flags->interval, "sample interval (default 2s)");
  cmd->add_option("--max-slope", flags->max_slope, "flat threshold in GiB/h (default 0.5)");
  cmd->add_option("--memory-limit", flags->memory_limit,
                  "memory limit of the workload's cgroup, e.g. 4Gi");
  cmd->add_flag("--no-cgroup", flags->no_cgroup, "sample /proc only; start no cgroup");
  cmd->add_flag("--no-early-stop", flags->no_early_stop,
                "run the full duration even when the verdict is clear earlier");
  cmd->add_option("--max-late-fraction", flags->max_late_fraction,
                  "fraction of late requests above which the run fell behind (default 0.01)");
  cmd->add_option("--max-errors", flags->max_errors,
                  "unexpected responses tolerated before the verdict is Errors (default 0)");
  cmd->add_option("--out", flags->out_dir,
                  "directory for <variant>.csv/.errors/.json (default ., with --in-pod "
                  "/tmp/allocguard-replay)");
  cmd->add_option("--report", flags->report, "also write an HTML report to this file");
  cmd->add_flag("--bake-off", flags->bake_off,
                "rank the variants (default: the bake-off matrix of docs/replay.md, the first "
                "being the current allocator): Flat first, then floor, CPU per request and p99; "
                "print the recommendation with its costs and an AllocatorPolicy snippet, and "
                "write bake-off.json and bake-off-policy.yaml to --out");
  cmd->add_option("--pid", flags->pid, "attach to this running process instead of starting one");
  cmd->add_option("--name", flags->name, "run name when attaching (default attached)");
  cmd->add_option("command", flags->command, "the workload command, after --")->take_all();
  AddOutputFormatOption(cmd, &flags->output);
  // The canary driver's flags (the operator's canary Job passes them) are
  // left out of --help: the empty group hides them.
  const std::string internal;
  cmd->add_flag("--in-pod", flags->in_pod,
                "run as the driver container of a canary Pod (shareProcessNamespace): measure the "
                "Pod's other processes (RssAnon only), drive the load over 127.0.0.1 and write "
                "the compact result to --termination-log; starts no workload; exits 0 once the "
                "result is written")
      ->group(internal);
  cmd->add_option("--load-json", flags->load_json,
                  "with --in-pod: the load as text (JSON or YAML) instead of --load-file")
      ->group(internal);
  cmd->add_option("--port", flags->port,
                  "with --in-pod: the workload's port; the load goes to http://127.0.0.1:PORT")
      ->group(internal);
  cmd->add_option("--allocator", flags->allocator,
                  "with --in-pod: the allocator name recorded in the result")
      ->group(internal);
  cmd->add_option("--termination-log", flags->termination_log,
                  "with --in-pod: where the result is written (default /dev/termination-log)")
      ->group(internal);
  cmd->add_option("--target-comm", flags->target_comm,
                  "with --in-pod: measure only processes with this command name (and their "
                  "children), e.g. to leave another sidecar out")
      ->group(internal);
  cmd->add_option("--books-dir", flags->books_dir,
                  "read the stats agent's books (liballocguard_stats.so preloaded into the "
                  "workload with ALLOCGUARD_STATS_DIR) from this directory and its "
                  "subdirectories at every sample: recorded beside the memory figures, and "
                  "the verdict's explanation says whether in-use or retained memory climbed "
                  "(docs/allocator-books.md)");
  cmd->callback([flags, exit_code] { *exit_code = RunReplayCommand(*flags); });
}

}  // namespace allocguard::cli
