// webhook_chart_template: writes or checks the Helm chart's webhooks template,
// generated from the one definition of allocguard's webhooks
// (webhook_configurations.h).
//
//   webhook_chart_template --write PATH   writes the template to PATH
//   webhook_chart_template --check PATH   exits 1, naming the first differing
//                                         line, when PATH differs from it

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "operator/webhook/webhook_configurations.h"

namespace {

int Usage() {
  std::cerr << "usage: webhook_chart_template --write|--check PATH\n";
  return 2;
}

int Check(const std::string& path, const std::string& want) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot read\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string have = buffer.str();
  if (have == want) return 0;
  std::istringstream h(have);
  std::istringstream w(want);
  std::string hl;
  std::string wl;
  for (int line = 1;; ++line) {
    const bool more_h = static_cast<bool>(std::getline(h, hl));
    const bool more_w = static_cast<bool>(std::getline(w, wl));
    if (!more_h && !more_w) break;
    if (!more_h || !more_w || hl != wl) {
      std::cerr << path << ":" << line << ": differs from the webhook definitions\n"
                << "  file:      " << (more_h ? hl : "<end of file>") << "\n"
                << "  generated: " << (more_w ? wl : "<end of file>") << "\n";
      break;
    }
  }
  std::cerr << "regenerate it: webhook_chart_template --write " << path << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Usage();
  const std::string want = allocguard::webhook::RenderChartWebhooksTemplate();
  if (std::strcmp(argv[1], "--check") == 0) return Check(argv[2], want);
  if (std::strcmp(argv[1], "--write") != 0) return Usage();
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  out << want;
  out.close();
  if (!out) {
    std::cerr << argv[2] << ": cannot write\n";
    return 1;
  }
  return 0;
}
