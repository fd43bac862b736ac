#include "operator/replay/allocator_books.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "allocators/stats_agent/allocator_books.h"

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ag_books Sample(uint32_t allocator) {
  ag_books b;
  std::memset(&b, 0, sizeof b);
  std::memcpy(b.magic, AG_BOOKS_MAGIC, sizeof b.magic);
  b.version = AG_BOOKS_VERSION;
  b.size = sizeof b;
  b.pid = 4242;
  b.allocator = allocator;
  b.interval_ms = 2000;
  b.sequence = 7;
  b.sample_unix_ns = 1'700'000'000'123'456'789;
  b.agent_cpu_ns = 55'000;
  b.in_use_bytes = 1000;
  b.retained_bytes = 300;
  b.held_bytes = 1400;
  for (int i = 0; i < AG_BOOKS_MAX_FIGURES; ++i) b.figures[i] = 100 + i;
  std::strcpy(b.allocator_object, "libjemalloc.so.2");
  b.checksum = ag_books_checksum(&b);
  return b;
}

std::string Bytes(const ag_books& b) {
  return std::string(reinterpret_cast<const char*>(&b), sizeof b);
}

// Rewrites the checksum after a test changed a field.
std::string Sealed(ag_books b) {
  b.checksum = ag_books_checksum(&b);
  return Bytes(b);
}

TEST(AllocatorBooksTest, ParsesJemallocSample) {
  auto r = ParseAllocatorBooks(Bytes(Sample(AG_BOOKS_ALLOCATOR_JEMALLOC)), "books-4242");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pid, 4242);
  EXPECT_EQ(r->allocator, BooksAllocator::kJemalloc);
  EXPECT_STREQ(BooksAllocatorName(r->allocator), "jemalloc");
  EXPECT_EQ(r->allocator_object, "libjemalloc.so.2");
  EXPECT_EQ(r->interval, std::chrono::milliseconds(2000));
  EXPECT_EQ(r->sequence, 7u);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::nanoseconds>(r->sample_time.time_since_epoch())
                .count(),
            1'700'000'000'123'456'789);
  EXPECT_EQ(r->agent_cpu, std::chrono::nanoseconds(55'000));
  EXPECT_EQ(r->in_use_bytes, 1000u);
  EXPECT_EQ(r->retained_bytes, 300u);
  EXPECT_EQ(r->held_bytes, 1400u);
  ASSERT_EQ(r->figures.size(), 7u);
  EXPECT_EQ(r->figures[AG_BOOKS_JEMALLOC_RESIDENT].name, "resident_bytes");
  EXPECT_EQ(r->figures[AG_BOOKS_JEMALLOC_RESIDENT].source, "stats.resident");
  EXPECT_EQ(r->figures[AG_BOOKS_JEMALLOC_RESIDENT].value, 100u + AG_BOOKS_JEMALLOC_RESIDENT);
  EXPECT_FALSE(r->glibc_arenas.has_value());
}

TEST(AllocatorBooksTest, GlibcArenasAndOldMallinfo) {
  ag_books b = Sample(AG_BOOKS_ALLOCATOR_GLIBC);
  auto r = ParseAllocatorBooks(Sealed(b), "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->glibc_arenas, 100u + AG_BOOKS_GLIBC_ARENAS);
  EXPECT_FALSE(r->mallinfo_int);
  EXPECT_EQ(r->figures[AG_BOOKS_GLIBC_TRIMMABLE_BYTES].source, "mallinfo2().keepcost");

  b.flags = AG_BOOKS_FLAG_MALLINFO_INT | AG_BOOKS_FLAG_NO_ARENA_COUNT;
  r = ParseAllocatorBooks(Sealed(b), "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->mallinfo_int);
  EXPECT_FALSE(r->glibc_arenas.has_value());
  ASSERT_EQ(r->figures.size(), 6u);  // no arena count
  EXPECT_EQ(r->figures[AG_BOOKS_GLIBC_TRIMMABLE_BYTES].source, "mallinfo().keepcost");
}

TEST(AllocatorBooksTest, ThrottledIntervalIsTheOneInForce) {
  ag_books b = Sample(AG_BOOKS_ALLOCATOR_GLIBC);
  auto r = ParseAllocatorBooks(Sealed(b), "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->throttled);
  b.flags = AG_BOOKS_FLAG_THROTTLED;
  b.interval_ms = 5200;
  r = ParseAllocatorBooks(Sealed(b), "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->throttled);
  EXPECT_EQ(r->interval, std::chrono::milliseconds(5200));
}

TEST(AllocatorBooksTest, NoSplitLeavesInUseAndRetainedAbsent) {
  ag_books b = Sample(AG_BOOKS_ALLOCATOR_MIMALLOC);
  b.flags = AG_BOOKS_FLAG_NO_SPLIT;
  auto r = ParseAllocatorBooks(Sealed(b), "f");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->in_use_bytes.has_value());
  EXPECT_FALSE(r->retained_bytes.has_value());
  EXPECT_EQ(r->held_bytes, 1400u);
  EXPECT_EQ(r->figures[AG_BOOKS_MIMALLOC_COMMIT].name, "commit_bytes");
}

TEST(AllocatorBooksTest, ErrorsNameWhatIsWrong) {
  const std::string good = Bytes(Sample(AG_BOOKS_ALLOCATOR_TCMALLOC));
  auto expect = [](const Result<AllocatorBooks>& r, StatusCode code, const std::string& text) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr(text));
  };
  expect(ParseAllocatorBooks(good.substr(0, 100), "/d/books-1"), StatusCode::kInvalidArgument,
         "/d/books-1: short file: 100 bytes, a version 1 sample has 280");
  expect(ParseAllocatorBooks("", "f"), StatusCode::kInvalidArgument, "short file: 0 bytes");
  expect(ParseAllocatorBooks(good + "x", "f"), StatusCode::kInvalidArgument,
         "long file: 281 bytes");

  ag_books b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.magic[0] = 'X';
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument, "f: magic");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.version = 2;
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument,
         "version: 2, this reader knows version 1");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.size = 300;
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument,
         "size: the header says 300 bytes");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.allocator = 9;
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument,
         "allocator: unknown code 9");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.flags = 0x80;
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument,
         "flags: unknown bits in 0x80");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.pid = 0;
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument, "pid: 0");
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  std::memset(b.allocator_object, 'a', sizeof b.allocator_object);
  expect(ParseAllocatorBooks(Sealed(b), "f"), StatusCode::kInvalidArgument,
         "allocator_object: not terminated");

  // A torn copy: the figures of one sample, the checksum of another.
  b = Sample(AG_BOOKS_ALLOCATOR_TCMALLOC);
  b.in_use_bytes += 1;
  expect(ParseAllocatorBooks(Bytes(b), "f"), StatusCode::kUnavailable, "f: checksum");
}

class AllocatorBooksFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("allocator_books_test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  fs::path dir_;
};

TEST_F(AllocatorBooksFilesTest, ReadsOneFileAndNamesAMissingOne) {
  Write("books-4242", Bytes(Sample(AG_BOOKS_ALLOCATOR_GLIBC)));
  auto r = ReadAllocatorBooks((dir_ / "books-4242").string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->allocator, BooksAllocator::kGlibc);

  auto missing = ReadAllocatorBooks((dir_ / "books-1").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("books-1"));
}

TEST_F(AllocatorBooksFilesTest, ReadsADirectoryInPidOrder) {
  ag_books a = Sample(AG_BOOKS_ALLOCATOR_JEMALLOC);
  a.pid = 30;
  Write("books-30", Sealed(a));
  ag_books b = Sample(AG_BOOKS_ALLOCATOR_GLIBC);
  b.pid = 5;
  Write("books-5", Sealed(b));
  Write("books-7", Sealed(a));  // pid 30 inside: a copy under the wrong name
  Write("books-9", "short");
  Write(".books-5.tmp", Sealed(b));  // the agent's file being written
  Write("books-x1", Sealed(b));
  Write("other", Sealed(b));

  auto r = ReadAllocatorBooksDirectory(dir_.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].pid_in_name, 5);
  ASSERT_TRUE((*r)[0].books.ok());
  EXPECT_EQ((*r)[0].books->allocator, BooksAllocator::kGlibc);
  EXPECT_EQ((*r)[1].pid_in_name, 7);
  ASSERT_FALSE((*r)[1].books.ok());
  EXPECT_THAT((*r)[1].books.status().message(), HasSubstr("pid: the file says 30, its name 7"));
  EXPECT_EQ((*r)[2].pid_in_name, 9);
  ASSERT_FALSE((*r)[2].books.ok());
  EXPECT_THAT((*r)[2].books.status().message(), HasSubstr("short file"));
  EXPECT_EQ((*r)[3].pid_in_name, 30);
  EXPECT_TRUE((*r)[3].books.ok());

  auto none = ReadAllocatorBooksDirectory((dir_ / "absent").string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST(AllocatorBooksTest, StaleAfterThreeIntervals) {
  auto r = ParseAllocatorBooks(Bytes(Sample(AG_BOOKS_ALLOCATOR_JEMALLOC)), "f");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(BooksAreStale(*r, r->sample_time + std::chrono::milliseconds(6000)));
  EXPECT_TRUE(BooksAreStale(*r, r->sample_time + std::chrono::milliseconds(6001)));
}

}  // namespace
}  // namespace allocguard::replay
