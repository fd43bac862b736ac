#pragma once

// Each subcommand lives in its own <name>_command.cc and registers itself on
// the top-level CLI11 app here. The callback it installs sets *exit_code.

#include <CLI/CLI.hpp>
#include <string>

namespace allocguard::cli {

void RegisterReplayCommand(CLI::App& app, int* exit_code);
void RegisterAnalyzeCommand(CLI::App& app, int* exit_code);
void RegisterReportCommand(CLI::App& app, int* exit_code);

void RegisterEvaluateCommand(CLI::App& app, int* exit_code);
void RegisterOperatorCommand(CLI::App& app, int* exit_code);
void RegisterGuardCommand(CLI::App& app, int* exit_code);
void RegisterGateCommand(CLI::App& app, int* exit_code);
void RegisterInstallAllocatorCommand(CLI::App& app, int* exit_code);
void RegisterVersionCommand(CLI::App& app, int* exit_code);

// "allocguard 0.1.0": what `allocguard --version` and `allocguard version`
// print.
std::string VersionLine();

}  // namespace allocguard::cli
