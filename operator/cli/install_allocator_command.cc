// allocguard install-allocator: what the injection's init container runs. It
// copies each named library's (the allocator's, and the stats agent's when
// the policy asks for it) glibc and musl builds from the image into the pod's
// library volume and makes the links through which each container's loader
// finds its own build (operator/admission/library_layout.h).

#include <CLI/CLI.hpp>
#include <cstdio>

#include "operator/admission/library_layout.h"
#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"

namespace allocguard::cli {
namespace {

struct InstallAllocatorFlags {
  std::string from = "/opt/allocguard/lib";
  std::string to;
  std::vector<std::string> libraries;
};

int RunInstallAllocator(const InstallAllocatorFlags& f) {
  std::vector<std::string> installed;
  for (const std::string& library : f.libraries) {
    Status s = admission::InstallAllocatorLibrary(f.from, f.to, library, &installed);
    if (!s.ok()) return Fail(s);
  }
  for (const std::string& line : installed) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

void RegisterInstallAllocatorCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<InstallAllocatorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "install-allocator",
      "Install an allocator library's glibc and musl builds into a pod's library volume "
      "(the injection's init container runs this).");
  cmd->group("");  // internal: left out of allocguard --help
  cmd->add_option("library", flags->libraries,
                  "library file names, e.g. libjemalloc.so.2 liballocguard_stats.so")
      ->required();
  cmd->add_option("--from", flags->from,
                  "the image's library directory, holding glibc/ and musl/ (default "
                  "/opt/allocguard/lib)");
  cmd->add_option("--to", flags->to, "the library volume's mount path")->required();
  cmd->callback([flags, exit_code] { *exit_code = RunInstallAllocator(*flags); });
}

}  // namespace allocguard::cli
