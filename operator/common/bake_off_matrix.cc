#include "operator/common/bake_off_matrix.h"

namespace allocguard {

const std::vector<BakeOffMatrixEntry>& BakeOffMatrix() {
  static const std::vector<BakeOffMatrixEntry> matrix = {
      {"glibc", "glibc", {}},
      {"glibc-arena2", "glibc", {{"MALLOC_ARENA_MAX", "2"}}},
      {"jemalloc", "jemalloc", {}},
      {"jemalloc-bg-decay1s",
       "jemalloc",
       {{"MALLOC_CONF", "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:1000"}}},
      {"mimalloc", "mimalloc", {}},
      {"tcmalloc", "tcmalloc", {}},
  };
  return matrix;
}

}  // namespace allocguard
