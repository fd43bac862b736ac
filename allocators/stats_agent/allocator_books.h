/* The allocator's books: the fixed-layout file the stats agent
 * (stats_agent.c, liballocguard_stats.so) publishes per process, and the one
 * definition of it that the agent and its readers (the operator's
 * operator/replay/allocator_books.h) share. Plain C99, no includes beyond
 * <stdint.h>: it compiles with gcc, musl-gcc and as C++.
 *
 * One file per process, named "books-<pid>" in the agent's output directory
 * (ALLOCGUARD_STATS_DIR). The first sample is written whole under
 * ".books-<pid>.tmp" and renamed, so the file appears complete; later samples
 * overwrite it in place (one pwrite of the whole structure at offset 0, no
 * new inode and no rename, which on ext4 would flush the data to disk every
 * interval). A reader can therefore catch a write half done: the checksum at
 * the end tells it, and it reads again. The file is removed when the process
 * exits normally; a file whose process was killed stays, with its last
 * sample_unix_ns, so a reader judges freshness by the sample time against the
 * interval.
 *
 * Layout: little-endian (the agent writes its host's order; allocguard runs
 * on x86_64 and arm64, both little-endian), naturally aligned, no padding
 * (the static assertions below check the offsets). A reader accepts only
 * magic "AGBOOKS", version AG_BOOKS_VERSION and size == sizeof(struct
 * ag_books): a new field means a new version. */
#ifndef ALLOCGUARD_ALLOCATOR_BOOKS_H_
#define ALLOCGUARD_ALLOCATOR_BOOKS_H_

/* C as well as C++ (the agent is C): no <cstdint>. */
#include <stdint.h> /* NOLINT(modernize-deprecated-headers) */

#define AG_BOOKS_MAGIC "AGBOOKS" /* 7 characters and the terminating NUL */
#define AG_BOOKS_VERSION 1u
#define AG_BOOKS_FILE_PREFIX "books-"
#define AG_BOOKS_MAX_FIGURES 16
#define AG_BOOKS_OBJECT_CHARS 64

/* Which allocator serves malloc in the process: the object that defines the
 * malloc symbol the program calls, and whose public statistics API the
 * agent found in that same object. */
enum ag_books_allocator {
  AG_BOOKS_ALLOCATOR_UNKNOWN = 0, /* no known statistics API (musl's own malloc, ...) */
  AG_BOOKS_ALLOCATOR_GLIBC = 1,
  AG_BOOKS_ALLOCATOR_JEMALLOC = 2,
  AG_BOOKS_ALLOCATOR_MIMALLOC = 3,
  AG_BOOKS_ALLOCATOR_TCMALLOC = 4
};

/* flags */
/* in_use_bytes and retained_bytes are unknown (0 in the file): the
 * allocator's public API does not report them (mimalloc built without
 * statistics, as Debian's and allocguard's builds are; or no API at all). */
#define AG_BOOKS_FLAG_NO_SPLIT 0x1u
/* glibc older than 2.33: the figures come from mallinfo(), whose fields are
 * int. Each is the true value modulo 2^32 (glibc stores the size_t sum into
 * an int), so above 4 GiB they wrap and are low by a multiple of 4 GiB;
 * the agent reads them as unsigned, which is exact below 4 GiB. */
#define AG_BOOKS_FLAG_MALLINFO_INT 0x2u
/* The glibc arena count was not obtained (malloc_info failed). */
#define AG_BOOKS_FLAG_NO_ARENA_COUNT 0x4u
/* The agent's CPU budget (a quarter of one percent of a core) stretched the
 * interval: a sample cost more than the budget at the requested interval
 * (glibc's mallinfo walks every free chunk). interval_ms is then the
 * interval in force, longer than the one requested. */
#define AG_BOOKS_FLAG_THROTTLED 0x8u

/* figures[], per allocator. Unlisted slots are 0. */
/* glibc, from mallinfo2() (mallinfo() before glibc 2.33) and malloc_info(). */
enum {
  AG_BOOKS_GLIBC_ARENA_BYTES = 0,   /* mallinfo.arena: bytes the arenas got with sbrk/mmap (heap) */
  AG_BOOKS_GLIBC_MMAP_BYTES = 1,    /* mallinfo.hblkhd: bytes in chunks mmapped one each */
  AG_BOOKS_GLIBC_MMAP_CHUNKS = 2,   /* mallinfo.hblks */
  AG_BOOKS_GLIBC_FREE_CHUNKS = 3,   /* mallinfo.ordblks: free chunks in the arenas */
  AG_BOOKS_GLIBC_FASTBIN_BYTES = 4, /* mallinfo.fsmblks: free bytes in fastbins */
  AG_BOOKS_GLIBC_TRIMMABLE_BYTES = 5, /* mallinfo.keepcost: the main arena's top, trimmable */
  AG_BOOKS_GLIBC_ARENAS = 6, /* number of arenas (malloc_info's heaps), counted every 30 s */
  AG_BOOKS_GLIBC_FIGURES = 7
};
/* jemalloc, from mallctl() after an "epoch" refresh. */
enum {
  AG_BOOKS_JEMALLOC_ALLOCATED = 0, /* stats.allocated */
  AG_BOOKS_JEMALLOC_ACTIVE = 1,    /* stats.active */
  AG_BOOKS_JEMALLOC_RESIDENT = 2,  /* stats.resident */
  AG_BOOKS_JEMALLOC_RETAINED = 3,  /* stats.retained: virtual, returned to the OS */
  AG_BOOKS_JEMALLOC_MAPPED = 4,    /* stats.mapped */
  AG_BOOKS_JEMALLOC_METADATA = 5,  /* stats.metadata */
  AG_BOOKS_JEMALLOC_ARENAS = 6,    /* arenas.narenas */
  AG_BOOKS_JEMALLOC_FIGURES = 7
};
/* mimalloc, from mi_process_info() and mi_version(). */
enum {
  AG_BOOKS_MIMALLOC_COMMIT = 0,      /* current_commit */
  AG_BOOKS_MIMALLOC_PEAK_COMMIT = 1, /* peak_commit */
  AG_BOOKS_MIMALLOC_RSS = 2,         /* current_rss */
  AG_BOOKS_MIMALLOC_PEAK_RSS = 3,    /* peak_rss */
  AG_BOOKS_MIMALLOC_PAGE_FAULTS = 4, /* page_faults */
  AG_BOOKS_MIMALLOC_VERSION = 5,     /* mi_version(): 209 for 2.0.9 */
  AG_BOOKS_MIMALLOC_FIGURES = 6
};
/* tcmalloc (gperftools), from MallocExtension_GetNumericProperty(). */
enum {
  AG_BOOKS_TCMALLOC_ALLOCATED = 0,         /* generic.current_allocated_bytes */
  AG_BOOKS_TCMALLOC_HEAP_SIZE = 1,         /* generic.heap_size (mapped, not unmapped) */
  AG_BOOKS_TCMALLOC_PAGEHEAP_FREE = 2,     /* tcmalloc.pageheap_free_bytes */
  AG_BOOKS_TCMALLOC_PAGEHEAP_UNMAPPED = 3, /* tcmalloc.pageheap_unmapped_bytes */
  AG_BOOKS_TCMALLOC_CENTRAL_FREE = 4,      /* tcmalloc.central_cache_free_bytes */
  AG_BOOKS_TCMALLOC_TRANSFER_FREE = 5,     /* tcmalloc.transfer_cache_free_bytes */
  AG_BOOKS_TCMALLOC_THREAD_FREE = 6,       /* tcmalloc.thread_cache_free_bytes */
  AG_BOOKS_TCMALLOC_FIGURES = 7
};

struct ag_books {
  char magic[8];           /* AG_BOOKS_MAGIC */
  uint32_t version;        /* AG_BOOKS_VERSION */
  uint32_t size;           /* sizeof(struct ag_books) */
  int32_t pid;             /* the publishing process, as its own namespace sees it */
  uint32_t allocator;      /* enum ag_books_allocator */
  uint32_t flags;          /* AG_BOOKS_FLAG_* */
  uint32_t interval_ms;    /* the agent's sample interval in force */
  uint64_t sequence;       /* 1 for the first sample, +1 per sample */
  int64_t sample_unix_ns;  /* CLOCK_REALTIME when the sample was taken */
  uint64_t agent_cpu_ns;   /* CPU time of the publisher thread so far */
  uint64_t in_use_bytes;   /* bytes allocated by the program and not freed */
  uint64_t retained_bytes; /* bytes the allocator holds, resident, but free */
  uint64_t held_bytes;     /* everything the allocator holds (see the docs per allocator) */
  uint64_t figures[AG_BOOKS_MAX_FIGURES];       /* per allocator, the enums above */
  char allocator_object[AG_BOOKS_OBJECT_CHARS]; /* file name of the object serving malloc */
  uint64_t checksum;                            /* ag_books_checksum() of every byte before it */
};

#if defined(__cplusplus)
static_assert(sizeof(struct ag_books) == 280, "ag_books layout");
#else
_Static_assert(sizeof(struct ag_books) == 280, "ag_books layout");
_Static_assert(__builtin_offsetof(struct ag_books, checksum) == 272, "ag_books layout");
#endif

/* FNV-1a, 64 bits, over the bytes before the checksum field. Written in C,
 * which has none of the C++ casts clang-tidy asks for. */
/* NOLINTBEGIN(google-readability-casting, google-runtime-int, modernize-use-auto) */
static inline uint64_t ag_books_checksum(const struct ag_books* b) {
  const unsigned char* p = (const unsigned char*)b;
  uint64_t h = 14695981039346656037ull;
  for (unsigned long i = 0; i < (unsigned long)__builtin_offsetof(struct ag_books, checksum); ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
/* NOLINTEND(google-readability-casting, google-runtime-int, modernize-use-auto) */

#endif /* ALLOCGUARD_ALLOCATOR_BOOKS_H_ */
