#pragma once

// Small helpers shared by the subcommands, and the exit codes they share
// (docs/cli.md, "Exit codes").

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "operator/common/status.h"

namespace allocguard::cli {

// Every subcommand exits 0 when it did its job, kExitError when it could
// not (a file it cannot read, the API server refusing, a workload that cannot
// start) and kExitUsage when what it was given on the command line is wrong:
// an unknown flag or subcommand, a missing argument, a value it cannot use.
// replay and analyze add their verdict codes (2-8, memory::ExitCodeForVerdict),
// gate its answers (2-5, controllers::GateExitCode).
inline constexpr int kExitError = 1;
// EX_USAGE of sysexits.h, so that no subcommand's own codes can mean it.
inline constexpr int kExitUsage = 64;

// Prints "allocguard: <message>" to stderr and returns kExitError.
int Fail(const Status& status);

// Prints "allocguard: <message>" and where the usage is to stderr, and
// returns kExitUsage: for a flag or argument the subcommand cannot use.
int UsageError(const Status& status);

// Parses a positive memory quantity in bytes ("512Mi", "1.5Gi", "1G",
// "1048576") with api::ParseQuantityBytes, the parser the CRDs' quantities use.
Result<int64_t> ParseQuantity(const std::string& text);

// Parses the value of a duration flag: "250ms", "30s", "2m", "1h30m"
// (ParseDuration). A number without a unit other than 0 is refused, naming
// the flag: "--duration 10" could mean seconds or minutes, and a flag must
// not guess. Policies and load files keep ParseDuration's bare seconds.
Result<std::chrono::milliseconds> ParseFlagDuration(const std::string& flag,
                                                    const std::string& text);

// -o/--output with the one meaning it has in every subcommand: the format of
// what the command prints on stdout, text (the default) or json.
CLI::Option* AddOutputFormatOption(CLI::App* cmd, std::string* output);

// --log-level (debug, info, warn, error) and --log-format (text, json) of
// a long-running subcommand; log::Configure installs them.
void AddLogOptions(CLI::App* cmd, std::string* level, std::string* format);

}  // namespace allocguard::cli
