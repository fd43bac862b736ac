// allocguard version: the release this binary belongs to (the repository's
// VERSION file). `allocguard --version` prints the same text line.

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/version.h"

namespace allocguard::cli {

std::string VersionLine() { return "allocguard " + std::string(Version()); }

void RegisterVersionCommand(CLI::App& app, int* exit_code) {
  auto output = std::make_shared<std::string>("text");
  CLI::App* cmd = app.add_subcommand("version", "print the allocguard version");
  AddOutputFormatOption(cmd, output.get());
  cmd->callback([output, exit_code] {
    if (*output == "json") {
      std::printf("%s\n", nlohmann::json{{"version", std::string(Version())}}.dump().c_str());
    } else {
      std::printf("%s\n", VersionLine().c_str());
    }
    *exit_code = 0;
  });
}

}  // namespace allocguard::cli
