#include "operator/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <cerrno>
#include <cstring>
#include <thread>

namespace allocguard {

std::string SubprocessExit::Describe() const {
  if (!exited) return "still running";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit code " + std::to_string(exit_code);
}

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

namespace {

// Closes the descriptors it holds when it goes out of scope.
struct Fds {
  int out = -1, err = -1, cgroup = -1, capture_read = -1, capture_write = -1;
  int exec_read = -1, exec_write = -1;
  ~Fds() {
    for (int fd : {out, err, cgroup, capture_read, capture_write, exec_read, exec_write}) {
      if (fd >= 0) close(fd);
    }
  }
};

Status OpenForWriting(const std::string& path, int flags, int* fd) {
  if (path.empty()) return Status::Ok();
  *fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
  if (*fd < 0) return PermissionDenied("cannot open " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

// argv or envp for exec: pointers into `strings`, null-terminated.
std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size());
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Writes pid in decimal to fd using only async-signal-safe calls.
int WritePid(int fd, pid_t pid) {
  char digits[24];
  char buf[24];
  int n = 0;
  for (pid_t p = pid; p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
  for (int i = 0; i < n; ++i) buf[i] = digits[n - 1 - i];
  return write(fd, buf, static_cast<size_t>(n)) == n ? 0 : errno;
}

// The child between fork and exec: async-signal-safe calls only. Never
// returns; an errno that prevented exec goes to fds.exec_write.
[[noreturn]] void RunChild(const SubprocessOptions& options, const Fds& fds, pid_t parent,
                           char* const* argv, char* const* envp) {
  if (options.new_process_group) setpgid(0, 0);
  if (options.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
  }
  int err = 0;
  if (fds.cgroup >= 0) err = WritePid(fds.cgroup, getpid());
  if (err == 0) {
    if (fds.capture_write >= 0) {
      dup2(fds.capture_write, STDOUT_FILENO);
    } else if (fds.out >= 0) {
      dup2(fds.out, STDOUT_FILENO);
    }
    if (fds.err >= 0) dup2(fds.err, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execvpe(argv[0], argv, envp);
    err = errno;
  }
  ssize_t ignored = write(fds.exec_write, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

}  // namespace

Result<Subprocess> Subprocess::Spawn(const SubprocessOptions& options) {
  if (options.argv.empty()) return InvalidArgument("no command given");
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options.env ? *options.env : CurrentEnvironment()) {
    env_strings.push_back(std::string(k).append("=").append(v));
  }
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env_strings);

  Fds fds;
  if (!options.capture_stdout) {
    AG_RETURN_IF_ERROR(OpenForWriting(options.stdout_path, O_CREAT | O_TRUNC, &fds.out));
  }
  AG_RETURN_IF_ERROR(OpenForWriting(options.stderr_path, O_CREAT | O_TRUNC, &fds.err));
  AG_RETURN_IF_ERROR(OpenForWriting(options.cgroup_procs_path, 0, &fds.cgroup));
  int pipe_fds[2];
  if (options.capture_stdout) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
    fds.capture_read = pipe_fds[0];
    fds.capture_write = pipe_fds[1];
  }
  // exec failures travel back through a close-on-exec pipe: EOF means exec
  // succeeded, an int means errno.
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
  fds.exec_read = pipe_fds[0];
  fds.exec_write = pipe_fds[1];

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) RunChild(options, fds, parent, argv.data(), envp.data());

  close(fds.exec_write);
  fds.exec_write = -1;
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(fds.exec_read, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof child_errno) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return FailedPrecondition(std::strerror(child_errno));
  }
  Subprocess child(pid, fds.capture_read, options.new_process_group);
  fds.capture_read = -1;  // owned by the child's handle now
  return child;
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), stdout_fd_(other.stdout_fd_), group_(other.group_), exit_(other.exit_) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

Subprocess::~Subprocess() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (pid_ > 0 && !Poll().exited) {
    Signal(SIGKILL);
    Wait();
  }
}

void Subprocess::Reaped(int wait_status) {
  exit_.exited = true;
  if (WIFEXITED(wait_status)) exit_.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) exit_.signal = WTERMSIG(wait_status);
  // Leftover children of the group go with it.
  if (group_) kill(-pid_, SIGKILL);
}

SubprocessExit Subprocess::Poll() {
  if (pid_ <= 0 || exit_.exited) return exit_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) Reaped(status);
  return exit_;
}

SubprocessExit Subprocess::Wait() {
  if (pid_ <= 0 || exit_.exited) return exit_;
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_) Reaped(status);
  return exit_;
}

void Subprocess::Signal(int sig) const {
  if (pid_ <= 0 || exit_.exited) return;
  kill(group_ ? -pid_ : pid_, sig);
}

SubprocessExit Subprocess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || Poll().exited) return exit_;
  Signal(SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (!Poll().exited && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exit_.exited) {
    Signal(SIGKILL);
    Wait();
  }
  return exit_;
}

Result<std::string> Subprocess::ReadStdout(std::chrono::milliseconds timeout, size_t max_bytes) {
  if (stdout_fd_ < 0) return FailedPrecondition("stdout was not captured");
  std::string output;
  Status status = Status::Ok();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (output.size() <= max_bytes) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int n = left.count() > 0 ? poll(&pfd, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) status = DeadlineExceeded("no end of output within the timeout");
    if (n <= 0) break;
    char buf[4096];
    ssize_t r = read(stdout_fd_, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    output.append(buf, static_cast<size_t>(r));
  }
  close(stdout_fd_);
  stdout_fd_ = -1;
  if (!status.ok()) return status;
  return output;
}

}  // namespace allocguard
