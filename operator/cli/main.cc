// allocguard: one binary, one subcommand per role (see README.md and docs/).

#include <CLI/CLI.hpp>
#include <csignal>

#include "operator/cli/commands.h"

int main(int argc, char** argv) {
  // Writes to a closed socket must fail with EPIPE, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"allocguard: keeps native workloads on memory allocators that give memory back"};
  app.require_subcommand(1);
  app.set_version_flag("--version", allocguard::cli::VersionLine());
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
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
