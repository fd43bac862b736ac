#include "operator/replay/pod_processes.h"

#include <gtest/gtest.h>

namespace allocguard::replay {
namespace {

// A canary Pod as the driver sees it: pause, the workload (a server with a
// worker child), another sidecar, a zombie, and the driver with a child.
std::vector<ProcessInfo> Pod() {
  return {
      {.pid = 1, .ppid = 0, .comm = "pause", .state = 'S'},
      {.pid = 7, .ppid = 0, .comm = "server", .state = 'S'},
      {.pid = 12, .ppid = 7, .comm = "worker", .state = 'S'},
      {.pid = 13, .ppid = 7, .comm = "worker", .state = 'Z'},
      {.pid = 20, .ppid = 0, .comm = "envoy", .state = 'S'},
      {.pid = 30, .ppid = 0, .comm = "allocguard", .state = 'S'},  // the driver
      {.pid = 31, .ppid = 30, .comm = "curl", .state = 'S'},
      {.pid = 40, .ppid = 0, .comm = "allocguard", .state = 'S'},  // e.g. a guard
      {.pid = 41, .ppid = 40, .comm = "sh", .state = 'R'},
  };
}

TEST(SelectWorkloadProcessesTest, Table) {
  struct Case {
    const char* name;
    PodProcessFilter filter;
    std::vector<pid_t> want;
  };
  const std::vector<Case> cases = {
      {"everything but pause, the driver, allocguard and zombies", {.self = 30}, {7, 12, 20}},
      {"narrowed by comm, with descendants", {.self = 30, .target_comm = "server"}, {7, 12}},
      {"a comm that matches nothing", {.self = 30, .target_comm = "nginx"}, {}},
      {"the driver's own children are never targets even without its comm",
       {.self = 31},
       {7, 12, 20}},
      {"test hook: only the given pids and their descendants",
       {.self = 30, .pod_pids_for_test = {7}},
       {7, 12}},
      {"test hook: the driver inside the set is still excluded",
       {.self = 30, .pod_pids_for_test = {7, 30}},
       {7, 12}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SelectWorkloadProcesses(Pod(), c.filter), c.want) << c.name;
  }
}

TEST(SelectWorkloadProcessesTest, AnExitedWorkloadLeavesNothing) {
  std::vector<ProcessInfo> pod = {
      {.pid = 1, .ppid = 0, .comm = "pause", .state = 'S'},
      {.pid = 7, .ppid = 0, .comm = "server", .state = 'Z'},
      {.pid = 30, .ppid = 0, .comm = "allocguard", .state = 'S'},
  };
  EXPECT_TRUE(SelectWorkloadProcesses(pod, {.self = 30}).empty());
}

TEST(SelectWorkloadProcessesTest, ParentCyclesDoNotHang) {
  // /proc is read process by process; a reused pid can make a stale cycle.
  std::vector<ProcessInfo> pod = {
      {.pid = 5, .ppid = 6, .comm = "a", .state = 'S'},
      {.pid = 6, .ppid = 5, .comm = "b", .state = 'S'},
  };
  EXPECT_EQ(SelectWorkloadProcesses(pod, {.self = 99}), (std::vector<pid_t>{5, 6}));
}

}  // namespace
}  // namespace allocguard::replay
