// libc_demo: the workload of the libc demonstrations (e2e/images/libc-demo.sh).
// One C file, so the same program builds with Debian 11's and Debian 12's gcc
// (glibc), with musl-gcc and statically, and each image shows how an injected
// allocator fares under that libc.
//
//   libc_demo [--port N] [--processes N]   # defaults 8080, 1
//
// With --processes N above 1 it is a pre-forking server, as many C servers
// are: once listening, the first process forks N-1 children, and every
// process churns memory and accepts on the same socket. A child ends with
// its parent (PR_SET_PDEATHSIG), and exited children are reaped at once.
//
// HTTP/1.0 on 0.0.0.0:
//   GET /healthz    200 "ok"
//   GET /pid        the PID of the process that answered
//   GET /allocator  the path of the allocator library (jemalloc, mimalloc,
//                   tcmalloc) that serves malloc, from /proc/self/maps, or
//                   "none" when the C library's (or a static binary's own)
//                   malloc does
//   GET /malloc     the mapped object that serves malloc, whatever it is
//
// Two threads allocate and free blocks of varied sizes all the time, paced to
// a few percent of a core, so the allocator really serves the process (and
// its arenas and thread caches exist) while the probes look at it. Writes
// nothing to the filesystem: runs under readOnlyRootFilesystem and any uid.
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { kChurnThreads = 2, kSlots = 512, kMaxBlock = 64 * 1024 };

// Copies into `path` the pathname of the mapping of /proc/self/maps that
// contains `addr` ("" for an anonymous one). Returns 0 when found.
static int MappingOf(uintptr_t addr, char* path, size_t size) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return -1;
  char line[4096];
  int found = -1;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long start = 0;
    unsigned long end = 0;
    int name_at = 0;
    // start-end perms offset dev inode   pathname
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &start, &end, &name_at) < 2) continue;
    if (addr < start || addr >= end) continue;
    char* name = line + name_at;
    name[strcspn(name, "\n")] = '\0';
    snprintf(path, size, "%s", name);
    found = 0;
    break;
  }
  fclose(maps);
  return found;
}

static const char* Basename(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

// The object serving malloc, and whether it is one of the allocators
// allocguard injects (judged by the library's file name).
static void MallocObject(char* path, size_t size, int* is_allocator) {
  *is_allocator = 0;
  // Taken in code, not in a static initializer: a position independent
  // executable then loads it from the GOT, where the dynamic loader put the
  // malloc it bound (an LD_PRELOADed allocator's comes first). An initialized
  // function pointer makes older linkers (binutils 2.35, Debian 11) give the
  // executable a canonical PLT entry for malloc, whose address is the
  // executable's own whatever serves the calls. Volatile: no folding.
  void* (*volatile malloc_fn)(size_t) = malloc;
  if (MappingOf((uintptr_t)malloc_fn, path, size) != 0) {
    snprintf(path, size, "unknown (/proc/self/maps unreadable)");
    return;
  }
  const char* base = Basename(path);
  *is_allocator = strstr(base, "jemalloc") != NULL || strstr(base, "mimalloc") != NULL ||
                  strstr(base, "tcmalloc") != NULL;
}

static uint32_t NextRandom(uint32_t* state) {  // xorshift32
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

static void* Churn(void* arg) {
  const long index = *(const long*)arg;
  uint32_t state = 2463534242u + (uint32_t)index;
  void* slots[kSlots] = {0};
  const struct timespec pause = {0, 20L * 1000 * 1000};
  for (;;) {
    for (int i = 0; i < 2000; i++) {
      uint32_t r = NextRandom(&state);
      size_t slot = r % kSlots;
      free(slots[slot]);
      // Mostly small blocks, some large ones (different size classes and,
      // for glibc, the mmap threshold region).
      size_t n = (r >> 16) % 8 == 0 ? 16 + (r >> 9) % kMaxBlock : 16 + (r >> 9) % 512;
      slots[slot] = malloc(n);
      if (slots[slot] != NULL) memset(slots[slot], (int)(r & 0xff), n);
    }
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void Respond(int fd, int status, const char* body) {
  const char* reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Method Not Allowed";
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.0 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   status, reason, strlen(body));
  if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0) {
    // The client went away; nothing to tell it.
  }
}

static void Serve(int fd) {
  char request[2048];
  size_t used = 0;
  // Reads until the end of the header block (or a full buffer): a client
  // that gets its answer before it finished sending would see a reset.
  while (used < sizeof request - 1) {
    ssize_t got = read(fd, request + used, sizeof request - 1 - used);
    if (got <= 0) break;
    used += (size_t)got;
    request[used] = '\0';
    if (strstr(request, "\r\n\r\n") != NULL || strstr(request, "\n\n") != NULL) break;
  }
  request[used] = '\0';
  char method[16] = "";
  char target[256] = "";
  if (sscanf(request, "%15s %255s", method, target) != 2) return;
  if (strcmp(method, "GET") != 0) {
    Respond(fd, 405, "only GET\n");
    return;
  }
  char path[4096];
  char body[4200];
  int is_allocator = 0;
  if (strcmp(target, "/healthz") == 0) {
    Respond(fd, 200, "ok\n");
  } else if (strcmp(target, "/allocator") == 0) {
    MallocObject(path, sizeof path, &is_allocator);
    snprintf(body, sizeof body, "%s\n", is_allocator ? path : "none");
    Respond(fd, 200, body);
  } else if (strcmp(target, "/pid") == 0) {
    snprintf(body, sizeof body, "%ld\n", (long)getpid());
    Respond(fd, 200, body);
  } else if (strcmp(target, "/malloc") == 0) {
    MallocObject(path, sizeof path, &is_allocator);
    snprintf(body, sizeof body, "%s\n", path);
    Respond(fd, 200, body);
  } else {
    Respond(fd, 404, "not found\n");
  }
}

// As PID 1 of a container a signal without a handler is ignored: SIGTERM
// would wait out the grace period.
static void OnTerm(int sig) {
  (void)sig;
  _exit(0);
}

int main(int argc, char** argv) {
  int port = 8080;
  int processes = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      port = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--processes") == 0 && i + 1 < argc) {
      processes = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--port N] [--processes N]\n", argv[0]);
      return 2;
    }
  }
  if (processes < 1 || processes > 64) {
    fprintf(stderr, "libc_demo: --processes must be 1 to 64\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, OnTerm);
  signal(SIGINT, OnTerm);

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) {
    perror("libc_demo: socket");
    return 1;
  }
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons((uint16_t)port);
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(listener, 64) != 0) {
    fprintf(stderr, "libc_demo: cannot listen on port %d: %s\n", port, strerror(errno));
    return 1;
  }

  // Pre-fork: before any thread starts, so each child starts its own.
  signal(SIGCHLD, SIG_IGN);  // children that exit are reaped by the kernel
  const pid_t parent = getpid();
  for (int i = 1; i < processes; i++) {
    pid_t child = fork();
    if (child < 0) {
      perror("libc_demo: fork");
      return 1;
    }
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(0);  // the parent is already gone
      break;
    }
  }

  static long churn_index[kChurnThreads];
  for (long i = 0; i < kChurnThreads; i++) {
    pthread_t t;
    churn_index[i] = i;
    int err = pthread_create(&t, NULL, Churn, &churn_index[i]);
    if (err != 0) {
      fprintf(stderr, "libc_demo: pthread_create: %s\n", strerror(err));
      return 1;
    }
    pthread_detach(t);
  }

  char path[4096];
  int is_allocator = 0;
  MallocObject(path, sizeof path, &is_allocator);
  printf("libc_demo: process %ld listening on port %d; malloc served by %s\n", (long)getpid(), port,
         path);
  fflush(stdout);

  for (;;) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR) continue;
      perror("libc_demo: accept");
      continue;
    }
    // A client that stalls must not block the probes behind it.
    struct timeval timeout = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    Serve(fd);
    close(fd);
  }
}
