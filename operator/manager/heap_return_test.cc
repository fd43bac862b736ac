#include "operator/manager/heap_return.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace allocguard::manager {
namespace {

// The allocator this run expects: ctest runs this test once as built and
// once under each preloaded allocator, naming it in ALLOCGUARD_EXPECT_HEAP.
std::string ExpectedHeap() {
  const char* expected = std::getenv("ALLOCGUARD_EXPECT_HEAP");
  return expected == nullptr ? "glibc" : expected;
}

TEST(HeapReturnTest, NamesTheAllocatorThatServesMalloc) {
  EXPECT_EQ(HeapAllocatorName(RunningHeapAllocator()), ExpectedHeap());
}

// A sanitizer's own malloc keeps freed memory in its quarantine, out of any
// allocator's reach: the sanitizer trees leave this test out. (GCC names a
// sanitizer by a macro; clang 14 only by __has_feature.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AG_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define AG_SANITIZER_MALLOC 1
#endif
#endif
#if !defined(AG_SANITIZER_MALLOC)
// Resident bytes of this process (/proc/self/statm, second field).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// What the operator's ticker is for: memory a burst allocated and freed
// stays resident until it is returned.
TEST(HeapReturnTest, GivesFreedPagesBack) {
  constexpr size_t kBlocks = size_t{96} * 1024;  // 96 MiB in 1 KiB blocks
  std::vector<std::unique_ptr<char[]>> blocks;
  blocks.reserve(kBlocks);
  const int64_t before = ResidentBytes();
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.emplace_back(new char[1024]);
    blocks.back()[0] = static_cast<char>(i);  // touched: resident
    blocks.back()[512] = static_cast<char>(i);
  }
  // Keep one block in 64, so that no allocator can give a whole region back
  // by itself on free.
  std::vector<std::unique_ptr<char[]>> kept;
  for (size_t i = 0; i < kBlocks; i += 64) kept.push_back(std::move(blocks[i]));
  blocks.clear();
  blocks.shrink_to_fit();
  const int64_t freed = ResidentBytes();
  ReturnFreedHeap();
  const int64_t returned = ResidentBytes();
  const int64_t grew = freed - before;
  EXPECT_GT(grew, int64_t{48} << 20) << "the blocks did not stay resident once freed; before "
                                     << before << ", after the frees " << freed;
  EXPECT_LT(returned - before, grew / 2) << "before " << before << ", after the frees " << freed
                                         << ", after ReturnFreedHeap " << returned;
}
#endif

}  // namespace
}  // namespace allocguard::manager
