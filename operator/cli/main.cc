// allocguard: one binary, one subcommand per role (see docs/ and README.md).

#include <CLI/CLI.hpp>
#include <csignal>

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"allocguard: keeps native workloads on memory allocators that give memory back"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
