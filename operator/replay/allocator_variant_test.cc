#include "operator/replay/allocator_variant.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace allocguard::replay {
namespace {

TEST(ParseVariantTest, NameAllocatorAndEnv) {
  auto v = ParseVariant("arena2=glibc,MALLOC_ARENA_MAX=2");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->name, "arena2");
  EXPECT_EQ(v->allocator, Allocator::kGlibc);
  EXPECT_EQ(v->env.at("MALLOC_ARENA_MAX"), "2");
  auto j = ParseVariant("jemalloc");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->name, "jemalloc");
  EXPECT_EQ(j->allocator, Allocator::kJemalloc);
}

TEST(ParseVariantTest, AValueMayHoldCommas) {
  auto v = ParseVariant(
      "jbg=jemalloc,MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,X=1,muzzy:0");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->env.at("MALLOC_CONF"), "background_thread:true,dirty_decay_ms:1000");
  EXPECT_EQ(v->env.at("X"), "1,muzzy:0");
}

TEST(ParseVariantTest, ErrorsSayWhatIsWrong) {
  EXPECT_NE(ParseVariant("x=hoard").status().message().find("unknown allocator \"hoard\""),
            std::string::npos);
  EXPECT_NE(ParseVariant("glibc,ARENA").status().message().find("\"ARENA\" is not ENV=VALUE"),
            std::string::npos);
  EXPECT_NE(ParseVariant("a b=glibc").status().message().find("name may hold"), std::string::npos);
}

TEST(ResolveAllocatorLibraryTest, MissingLibraryNamesWhereItLookedAndThePackage) {
  auto r = ResolveAllocatorLibrary(Allocator::kMimalloc, {"/nonexistent/a", "/nonexistent/b"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("/nonexistent/a/libmimalloc.so.2"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent/b/libmimalloc.so.2"), std::string::npos) << m;
  EXPECT_NE(m.find("libmimalloc2.0"), std::string::npos) << m;
}

TEST(ResolveAllocatorLibraryTest, FindsTheFirstReadableCandidate) {
  auto dir = std::filesystem::temp_directory_path() / ("ag-alloc-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libtcmalloc_minimal.so.4") << "x";
  auto r = ResolveAllocatorLibrary(Allocator::kTcmalloc, {"/nonexistent", dir.string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (dir / "libtcmalloc_minimal.so.4").string());
  EXPECT_EQ(ResolveAllocatorLibrary(Allocator::kGlibc, {}).value(), "");
  std::filesystem::remove_all(dir);
}

TEST(DefaultLibrarySearchDirsTest, TheImagesGlibcBuildsComeFirst) {
  const char* old = std::getenv("ALLOCGUARD_ALLOCATOR_DIR");
  const std::string saved = old ? old : "";
  setenv("ALLOCGUARD_ALLOCATOR_DIR", "/opt/allocguard/lib", 1);
  auto dirs = DefaultLibrarySearchDirs();
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/opt/allocguard/lib/glibc");
  EXPECT_EQ(dirs[1], "/opt/allocguard/lib");
  EXPECT_EQ(dirs[2], "/usr/lib/x86_64-linux-gnu");
  if (old) {
    setenv("ALLOCGUARD_ALLOCATOR_DIR", saved.c_str(), 1);
  } else {
    unsetenv("ALLOCGUARD_ALLOCATOR_DIR");
  }
}

TEST(VariantEnvironmentTest, MergesIntoExistingPreloadNeverReplacesIt) {
  AllocatorVariant v = ParseVariant("jemalloc,MALLOC_CONF=background_thread:true").value();
  v.library = "/lib/libjemalloc.so.2";
  auto env = VariantEnvironment(v, {{"LD_PRELOAD", "/opt/libtrace.so"}, {"HOME", "/root"}});
  EXPECT_EQ(env.at("LD_PRELOAD"), "/lib/libjemalloc.so.2:/opt/libtrace.so");
  EXPECT_EQ(env.at("MALLOC_CONF"), "background_thread:true");
  EXPECT_EQ(env.at("HOME"), "/root");
  // Applying it twice does not preload the library twice.
  auto again = VariantEnvironment(v, env);
  EXPECT_EQ(again.at("LD_PRELOAD"), "/lib/libjemalloc.so.2:/opt/libtrace.so");
  AllocatorVariant glibc = ParseVariant("glibc").value();
  EXPECT_EQ(VariantEnvironment(glibc, {}).count("LD_PRELOAD"), 0u);
}

}  // namespace
}  // namespace allocguard::replay
