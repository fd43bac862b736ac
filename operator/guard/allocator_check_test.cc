#include "operator/guard/allocator_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::guard {
namespace {

using replay::Allocator;
using ::testing::HasSubstr;

TEST(ClassifyMappedLibrariesTest, ByMappedLibrary) {
  struct Case {
    std::vector<std::string> libs;
    std::optional<Allocator> want;
    std::string reason_has;
  } cases[] = {
      {{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
       Allocator::kGlibc,
       ""},
      {{"/opt/allocguard/inject/libjemalloc.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
       Allocator::kJemalloc,
       ""},
      {{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/libmimalloc.so.2.0"},
       Allocator::kMimalloc,
       ""},
      {{"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10",
        "/usr/lib/x86_64-linux-gnu/libc.so.6"},
       Allocator::kTcmalloc,
       ""},
      {{}, std::nullopt, "static binary"},
      // ... and says it has no books either (the e2e libc stage reads this).
      {{}, std::nullopt, "no allocator books"},
      {{"/lib/ld-musl-x86_64.so.1"}, std::nullopt, "musl"},
      // exec'd, libraries not mapped yet: neither static nor glibc.
      {{"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}, std::nullopt, "still loading"},
  };
  for (const Case& c : cases) {
    AllocatorObservation o = ClassifyMappedLibraries(7, c.libs);
    EXPECT_EQ(o.allocator, c.want) << ::testing::PrintToString(c.libs);
    EXPECT_EQ(o.pid, 7);
    if (!c.reason_has.empty()) {
      EXPECT_THAT(o.not_loaded_reason, HasSubstr(c.reason_has));
    }
  }
}

TEST(ClassifyMappedLibrariesTest, MuslWithPreloadedJemallocIsJemalloc) {
  auto o = ClassifyMappedLibraries(
      1, {"/lib/ld-musl-x86_64.so.1", "/opt/allocguard/inject/libjemalloc.so.2"});
  EXPECT_EQ(o.allocator, Allocator::kJemalloc);
}

AllocatorObservation Loaded(pid_t pid, Allocator a) {
  AllocatorObservation o;
  o.pid = pid;
  o.allocator = a;
  o.library = "/lib/" + std::string(replay::AllocatorName(a));
  return o;
}

TEST(CheckAllocatorsTest, EveryProcessMustRunOnTheExpectedAllocator) {
  AllocatorObservation static_binary;
  static_binary.pid = 12;
  static_binary.not_loaded_reason = "static binary: ...";

  auto ok = CheckAllocators(Allocator::kJemalloc,
                            {Loaded(10, Allocator::kJemalloc), Loaded(11, Allocator::kJemalloc)});
  EXPECT_TRUE(ok.matches);
  EXPECT_EQ(ok.reason, "AllocatorLoaded");

  auto mismatch = CheckAllocators(
      Allocator::kJemalloc, {Loaded(10, Allocator::kJemalloc), Loaded(11, Allocator::kGlibc)});
  EXPECT_FALSE(mismatch.matches);
  EXPECT_EQ(mismatch.reason, "AllocatorMismatch");
  EXPECT_THAT(mismatch.message, HasSubstr("process 11 runs on glibc"));
  EXPECT_THAT(mismatch.message, ::testing::Not(HasSubstr("process 10")));

  auto not_loaded =
      CheckAllocators(Allocator::kJemalloc, {Loaded(10, Allocator::kGlibc), static_binary});
  EXPECT_FALSE(not_loaded.matches);
  EXPECT_EQ(not_loaded.reason, "AllocatorNotLoaded");
  EXPECT_THAT(not_loaded.message, HasSubstr("process 12: allocator not loaded: static binary"));

  // Without an expectation, glibc is fine but a static binary is still reported.
  EXPECT_TRUE(CheckAllocators(std::nullopt, {Loaded(10, Allocator::kGlibc)}).matches);
  EXPECT_FALSE(CheckAllocators(std::nullopt, {static_binary}).matches);

  auto none = CheckAllocators(Allocator::kGlibc, {});
  EXPECT_FALSE(none.matches);
  EXPECT_EQ(none.reason, "NoWorkloadProcesses");
}

}  // namespace
}  // namespace allocguard::guard
