// allocguard: one binary, one subcommand per role (see README.md and docs/).

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"

// An exception that escapes a subcommand is a bug: std::terminate aborts with
// its stack intact for the core dump, rather than a handler exiting 1.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  // Writes to a closed socket must fail with EPIPE, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"allocguard: keeps native workloads on memory allocators that give memory back"};
  app.require_subcommand(1);
  app.set_version_flag("--version", allocguard::cli::VersionLine());
  app.footer(
      "Exit codes: 0 done, 1 error, 64 usage error; replay, analyze and gate add their own "
      "(docs/cli.md).");
  int exit_code = 0;
  allocguard::cli::RegisterReplayCommand(app, &exit_code);
  allocguard::cli::RegisterAnalyzeCommand(app, &exit_code);
  allocguard::cli::RegisterReportCommand(app, &exit_code);
  allocguard::cli::RegisterEvaluateCommand(app, &exit_code);
  allocguard::cli::RegisterOperatorCommand(app, &exit_code);
  allocguard::cli::RegisterGuardCommand(app, &exit_code);
  allocguard::cli::RegisterGateCommand(app, &exit_code);
  allocguard::cli::RegisterInstallAllocatorCommand(app, &exit_code);
  allocguard::cli::RegisterVersionCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --help-all, --version: printed, exit 0
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 106, 109, ...) would each need documenting and
    // collide with nothing useful: every parse error is one usage error.
    app.exit(e);
    return allocguard::cli::kExitUsage;
  }
  return exit_code;
}
