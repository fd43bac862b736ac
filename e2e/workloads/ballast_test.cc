#include "e2e/workloads/ballast.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace allocguard::workloads {
namespace {

// This process's anonymous resident memory, from the kernel.
uint64_t RssAnonMiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (status >> key) {
    if (key == "RssAnon:") {
      status >> kib;
      return kib / 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

net::HttpRequest Get(const std::string& path) {
  net::HttpRequest r;
  r.method = "GET";
  r.path = path;
  return r;
}

TEST(BallastTest, HoldsAndReturnsRealAnonymousMemory) {
  Ballast ballast;
  const uint64_t before = RssAnonMiB();
  ballast.SetTarget(96, 0);
  EXPECT_EQ(ballast.held_mib(), 96u);
  EXPECT_GE(RssAnonMiB(), before + 90) << "the kernel sees the ballast as anonymous memory";
  ballast.SetTarget(0, 0);
  EXPECT_EQ(ballast.held_mib(), 0u);
  EXPECT_LE(RssAnonMiB(), before + 6) << "a lower target returns the memory at once";
}

TEST(BallastTest, GrowsGraduallyTowardsTheTargetAtARate) {
  Ballast ballast;
  ballast.SetTarget(40, 200);  // 200 MiB/s: 0.2 s to the target
  EXPECT_LT(ballast.held_mib(), 40u) << "a rate makes the growth gradual, not immediate";
  // Liveness only: wait (up to a generous bound) for the target.
  for (int i = 0; i < 300 && ballast.held_mib() < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ballast.held_mib(), 40u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(ballast.held_mib(), 40u) << "it stops at the target";
}

TEST(BallastTest, HttpHandlerSetsTheTargetAndRefusesBadInput) {
  Ballast ballast;
  net::HttpResponse ok = ballast.Handle(Get("/ballast?mib=8"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "{\"target_mib\":8,\"held_mib\":8}\n");
  for (const char* bad : {"/ballast", "/ballast?mib=-1", "/ballast?mib=lots",
                          "/ballast?mib=99999999", "/ballast?mib=8&rate=fast"}) {
    net::HttpResponse r = ballast.Handle(Get(bad));
    EXPECT_EQ(r.status, 400) << bad;
  }
  EXPECT_EQ(ballast.held_mib(), 8u) << "a refused request changes nothing";
  EXPECT_EQ(ballast.Handle(Get("/ballast?mib=0")).status, 200);
  EXPECT_EQ(ballast.held_mib(), 0u);
}

}  // namespace
}  // namespace allocguard::workloads
