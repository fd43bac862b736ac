#include "operator/common/verdict.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace allocguard {
namespace {

TEST(VerdictTest, EveryVerdictsNameReadsBackAndNamesAreDistinct) {
  std::set<std::string> names;
  for (Verdict v : kAllVerdicts) {
    ASSERT_TRUE(VerdictFromName(VerdictName(v)).has_value()) << VerdictName(v);
    EXPECT_EQ(*VerdictFromName(VerdictName(v)), v);
    names.insert(VerdictName(v));
  }
  EXPECT_EQ(names.size(), kAllVerdicts.size());
  EXPECT_STREQ(VerdictName(Verdict::kAllocatorRetention), "AllocatorRetention");
}

TEST(VerdictTest, OtherTextIsNoVerdict) {
  for (const char* text : {"", "flat", "Flat ", "Unknown", "FLAT", "Ratchet\n"}) {
    EXPECT_FALSE(VerdictFromName(text).has_value()) << '"' << text << '"';
  }
}

TEST(VerdictTest, ExitCodesAreTheDocumentedOnes) {
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kFlat), 0);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kRatchet), 2);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kAllocatorRetention), 3);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kLeak), 4);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kOOMKilled), 5);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kErrors), 6);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kFailed), 7);
  EXPECT_EQ(ExitCodeForVerdict(Verdict::kInconclusive), 8);
}

}  // namespace
}  // namespace allocguard
