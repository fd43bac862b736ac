// Look-plan benchmark: how long the sequential judge takes to plan its error
// spending (memory::PlanLookBudgets, two SpendingNominalLevels walks) for
// canaries of a given length, one look per minute, and how far the plan's
// total crossing probability is from its budget (a check the numbers hold).
//
// Usage: judge_plan_bench [--minutes 15,30,60,240,1440] [--repeat N]
// Each plan is computed anew (the judge caches plans per key; this does not).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "operator/memory/group_sequential.h"

using allocguard::memory::CrossingProbability;
using allocguard::memory::SpendingNominalLevels;

int main(int argc, char** argv) {
  std::string minutes_list = "15,30,60,240,1440";
  int repeat = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--minutes")) minutes_list = argv[++i];
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[++i]);
  }
  std::printf("%8s %8s %12s %14s\n", "minutes", "looks", "plan ms", "|crossing-a|");
  std::stringstream in(minutes_list);
  for (std::string item; std::getline(in, item, ',');) {
    const int minutes = std::atoi(item.c_str());
    // As the default judge plans: looks from the third floor on, Sxx of n
    // consecutive minutes as the information.
    std::vector<double> information;
    for (int n = 3; n <= minutes; ++n)
      information.push_back(n * (n * static_cast<double>(n) - 1) / 12);
    double best_ms = 1e300;
    double error = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<double> levels = SpendingNominalLevels(information, 0.008, 2);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      best_ms = std::min(best_ms, ms);
      error = std::fabs(CrossingProbability(information, levels) - 0.008);
    }
    std::printf("%8d %8zu %12.2f %14.2e\n", minutes, information.size(), best_ms, error);
  }
  return 0;
}
