#include "operator/admission/library_layout.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::admission {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(PreloadPathTest, EachLibcHasItsDirectory) {
  EXPECT_EQ(PreloadPath("/m", api::Libc::kGlibc, "libjemalloc.so.2"), "/m/glibc/libjemalloc.so.2");
  EXPECT_EQ(PreloadPath("/m", api::Libc::kMusl, "libjemalloc.so.2"), "/m/musl/libjemalloc.so.2");
  // The token stays literal: glibc's loader expands it, musl's does not.
  EXPECT_EQ(PreloadPath("/m", api::Libc::kAuto, "libjemalloc.so.2"), "/m/$LIB/libjemalloc.so.2");
}

TEST(GlibcLibDirectoriesTest, CoverDebianRhelAndPlainLib) {
  EXPECT_THAT(GlibcLibDirectories(),
              ::testing::ElementsAre("lib/x86_64-linux-gnu", "lib64", "lib"));
}

class InstallAllocatorLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/allocguard-layout-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    from_ = root_ / "image";
    to_ = root_ / "inject";
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& path, const std::string& content) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path root_, from_, to_;
};

TEST_F(InstallAllocatorLibraryTest, BothBuildsAndEveryLinkResolveToTheRightFile) {
  Write(from_ / "glibc" / "libjemalloc.so.2", "glibc build");
  Write(from_ / "musl" / "libjemalloc.so.2", "musl build");
  std::vector<std::string> installed;
  ASSERT_TRUE(InstallAllocatorLibrary(from_, to_, "libjemalloc.so.2", &installed).ok());
  EXPECT_EQ(installed.size(), 6u);  // 2 copies, 3 glibc links, the $LIB link
  EXPECT_EQ(Read(to_ / "glibc" / "libjemalloc.so.2"), "glibc build");
  EXPECT_EQ(Read(to_ / "musl" / "libjemalloc.so.2"), "musl build");
  for (const char* dir : {"lib/x86_64-linux-gnu", "lib64", "lib"}) {
    const fs::path link = to_ / dir / "libjemalloc.so.2";
    EXPECT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_TRUE(fs::read_symlink(link).is_relative()) << "the volume is mounted elsewhere";
    EXPECT_EQ(Read(link), "glibc build") << link;
  }
  EXPECT_EQ(Read(to_ / "$LIB" / "libjemalloc.so.2"), "musl build");
  // Readable by any user and mappable: the workload may run as another uid.
  struct stat st;
  ASSERT_EQ(stat((to_ / "glibc" / "libjemalloc.so.2").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(InstallAllocatorLibraryTest, RunningAgainReplacesAndLeavesNoTemporaries) {
  Write(from_ / "glibc" / "libmimalloc.so.2", "v1");
  ASSERT_TRUE(InstallAllocatorLibrary(from_, to_, "libmimalloc.so.2", nullptr).ok());
  Write(from_ / "glibc" / "libmimalloc.so.2", "v2");
  ASSERT_TRUE(InstallAllocatorLibrary(from_, to_, "libmimalloc.so.2", nullptr).ok());
  EXPECT_EQ(Read(to_ / "lib64" / "libmimalloc.so.2"), "v2");
  for (const auto& entry : fs::recursive_directory_iterator(to_)) {
    EXPECT_NE(entry.path().extension(), ".tmp") << "temporary file left: " << entry.path();
  }
}

TEST_F(InstallAllocatorLibraryTest, WithoutAMuslBuildThereIsNoLibTokenEntry) {
  Write(from_ / "glibc" / "libtcmalloc_minimal.so.4", "glibc build");
  ASSERT_TRUE(InstallAllocatorLibrary(from_, to_, "libtcmalloc_minimal.so.4", nullptr).ok());
  EXPECT_FALSE(fs::exists(to_ / "musl" / "libtcmalloc_minimal.so.4"));
  // musl's loader then finds nothing at <mount>/$LIB/<lib> and skips it.
  EXPECT_FALSE(fs::exists(fs::symlink_status(to_ / "$LIB" / "libtcmalloc_minimal.so.4")));
  EXPECT_EQ(Read(to_ / "lib" / "libtcmalloc_minimal.so.4"), "glibc build");
}

TEST_F(InstallAllocatorLibraryTest, MissingGlibcBuildIsAnErrorNamingThePath) {
  Write(from_ / "musl" / "libjemalloc.so.2", "musl build");
  Status s = InstallAllocatorLibrary(from_, to_, "libjemalloc.so.2", nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr((from_ / "glibc" / "libjemalloc.so.2").string()));
}

TEST_F(InstallAllocatorLibraryTest, LibraryMustBeAFileName) {
  for (const char* bad : {"", "../glibc/libjemalloc.so.2", "sub/lib.so", ".hidden"}) {
    EXPECT_EQ(InstallAllocatorLibrary(from_, to_, bad, nullptr).code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace allocguard::admission
