#include "operator/cli/cli_util.h"

#include <cstdio>

#include "operator/api/quantity.h"
#include "operator/common/duration.h"

namespace allocguard::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "allocguard: %s\n", status.message().c_str());
  return kExitError;
}

int UsageError(const Status& status) {
  std::fprintf(stderr, "allocguard: %s\nRun with --help for the flags.\n",
               status.message().c_str());
  return kExitUsage;
}

Result<int64_t> ParseQuantity(const std::string& text) {
  AG_ASSIGN_OR_RETURN(int64_t bytes, api::ParseQuantityBytes(text));
  if (bytes < 1) return InvalidArgument("quantity \"" + text + "\" must be at least one byte");
  return bytes;
}

Result<std::chrono::milliseconds> ParseFlagDuration(const std::string& flag,
                                                    const std::string& text) {
  const bool unitless = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
  if (unitless && text.find_first_not_of("0.") != std::string::npos) {
    return InvalidArgument(flag + " " + text + ": a duration needs a unit (" + text + "s, " + text +
                           "m or " + text + "h)");
  }
  auto d = ParseDuration(text);
  if (!d.ok()) return d.status().WithContext(flag);
  return *d;
}

CLI::Option* AddOutputFormatOption(CLI::App* cmd, std::string* output) {
  return cmd->add_option("-o,--output", *output, "what to print on stdout: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

void AddLogOptions(CLI::App* cmd, std::string* level, std::string* format) {
  cmd->add_option("--log-level", *level, "the least severe lines logged")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  cmd->add_option("--log-format", *format,
                  "text, or json: one object per line with ts, level, msg and, in a reconcile, "
                  "controller, object, namespace, name and reconcileID")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

}  // namespace allocguard::cli
