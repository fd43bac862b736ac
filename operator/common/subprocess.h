#pragma once

// Starting a child process without a shell, watching it, reading what it
// prints and ending it: the one spawner of allocguard, used for replay
// workloads (replay/workload_process.h) and for exec credential plugins
// (kube/credentials.h).
//
// The child is started with fork and exec, everything it needs prepared
// before the fork (after fork in a multi-threaded process only
// async-signal-safe calls are allowed). Its stdin is /dev/null. Whether it
// gets a process group of its own, dies with its parent or joins a cgroup
// before exec are options, because a measured workload needs all three and a
// credential plugin none of them.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard {

struct SubprocessOptions {
  // argv[0] is searched in PATH. REQUIRES: not empty.
  std::vector<std::string> argv;
  // The complete environment of the child; nullopt: this process's own.
  std::optional<std::map<std::string, std::string>> env;
  // Where stdout and stderr go: a file created or truncated, else (empty)
  // inherited from this process. capture_stdout wins over stdout_path.
  std::string stdout_path;
  std::string stderr_path;
  // stdout into a pipe that ReadStdout() reads.
  bool capture_stdout = false;
  // The child leads a process group of its own; Signal() and Stop() then
  // reach every process of the group, and an exit of the leader takes the
  // rest of the group with it (see Poll()).
  bool new_process_group = false;
  // The child is killed (SIGKILL) when this process dies.
  bool die_with_parent = false;
  // When set, the child writes its pid into this file (a cgroup's
  // cgroup.procs) before exec, so nothing it allocates escapes the cgroup.
  std::string cgroup_procs_path;
};

// How a child ended.
struct SubprocessExit {
  bool exited = false;           // false: still running
  int exit_code = -1;            // when it exited normally
  int signal = 0;                // when a signal ended it
  std::string Describe() const;  // "exit code 3", "killed by signal 9 (SIGKILL)"
};

// One started child. Move-only; not thread-safe. The destructor kills
// (SIGKILL, its group with new_process_group) and reaps a child that still
// runs, so no child outlives its handle as a zombie.
class Subprocess {
 public:
  // Starts the child. Failures: the files or the cgroup could not be opened
  // (kPermissionDenied, naming the path), no pipe or fork (kUnavailable,
  // kInternal), or exec failed: kFailedPrecondition whose message is only the
  // system's reason ("No such file or directory"), for the caller to say
  // what it was starting.
  static Result<Subprocess> Spawn(const SubprocessOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }

  // Non-blocking; once exited, stays exited. With new_process_group, the
  // leader's exit kills what is left of its group.
  SubprocessExit Poll();
  // Blocks until the child has exited.
  SubprocessExit Wait();
  // Sends `sig` to the child (to its group with new_process_group), unless
  // it has been reaped.
  void Signal(int sig) const;
  // SIGTERM, then SIGKILL after `grace` when it still runs. Returns how it
  // ended.
  SubprocessExit Stop(std::chrono::milliseconds grace);

  // REQUIRES: capture_stdout. Reads the child's stdout until it closes it,
  // `max_bytes` have arrived (the rest is left unread), or `timeout` passes
  // (kDeadlineExceeded; the child is left running for the caller to kill).
  Result<std::string> ReadStdout(std::chrono::milliseconds timeout, size_t max_bytes);

 private:
  Subprocess(pid_t pid, int stdout_fd, bool group)
      : pid_(pid), stdout_fd_(stdout_fd), group_(group) {}
  void Reaped(int wait_status);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool group_ = false;
  SubprocessExit exit_;
};

// This process's environment as a map, to extend for a child.
std::map<std::string, std::string> CurrentEnvironment();

}  // namespace allocguard
