#include "operator/replay/workload_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

namespace allocguard::replay {

std::string WorkloadExit::Describe() const {
  if (!exited) return "still running";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit code " + std::to_string(exit_code);
}

Result<WorkloadProcess> WorkloadProcess::Start(const WorkloadLaunch& launch) {
  if (launch.argv.empty()) return InvalidArgument("no workload command given");
  // Everything the child needs is prepared before fork: after fork in a
  // multi-threaded process only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : launch.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = launch.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_fd = open(launch.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = open(launch.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return PermissionDenied("cannot create workload log files " + launch.stdout_path + ", " +
                            launch.stderr_path + ": " + std::strerror(errno));
  }
  int cg_fd = -1;
  if (!launch.cgroup_procs_path.empty()) {
    cg_fd = open(launch.cgroup_procs_path.c_str(), O_WRONLY | O_CLOEXEC);
    if (cg_fd < 0) {
      close(out_fd);
      close(err_fd);
      return PermissionDenied("cannot open " + launch.cgroup_procs_path + ": " +
                              std::strerror(errno));
    }
  }
  // exec failures travel back through a close-on-exec pipe: EOF means exec
  // succeeded, an int means errno.
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    return Internal(std::string("pipe: ") + std::strerror(errno));
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) {
    return Unavailable(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    setpgid(0, 0);
    // The workload must not outlive the replay that measures it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int err = 0;
    if (cg_fd >= 0) {
      char buf[24];
      int n = 0;
      char digits[24];
      for (pid_t p = getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
      for (int i = 0; i < n; ++i) buf[i] = digits[n - 1 - i];
      if (write(cg_fd, buf, static_cast<size_t>(n)) != n) err = errno;
      close(cg_fd);
    }
    if (err == 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
      execvpe(argv[0], argv.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(pipe_fds[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(pipe_fds[1]);
  close(out_fd);
  close(err_fd);
  if (cg_fd >= 0) close(cg_fd);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == sizeof child_errno) {
    int status;
    waitpid(pid, &status, 0);
    return FailedPrecondition("cannot start workload \"" + launch.argv[0] +
                              "\": " + std::strerror(child_errno));
  }
  return WorkloadProcess(pid);
}

WorkloadProcess::WorkloadProcess(WorkloadProcess&& other) noexcept
    : pid_(other.pid_), exit_(other.exit_) {
  other.pid_ = -1;
}

WorkloadProcess::~WorkloadProcess() {
  if (pid_ > 0) Stop(std::chrono::milliseconds(2000));
}

WorkloadExit WorkloadProcess::Poll() {
  if (pid_ <= 0 || exit_.exited) return exit_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_.exited = true;
    if (WIFEXITED(status)) exit_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exit_.signal = WTERMSIG(status);
    // Leftover children of the group go with it.
    kill(-pid_, SIGKILL);
  }
  return exit_;
}

WorkloadExit WorkloadProcess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return exit_;
  if (!Poll().exited) {
    kill(-pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (!Poll().exited && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!exit_.exited) {
      kill(-pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      exit_.exited = true;
      exit_.signal = SIGKILL;
    }
  }
  return exit_;
}

std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace allocguard::replay
