#include "operator/replay/replay_env.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

namespace allocguard::replay {

namespace {

class PosixCgroup final : public RunCgroup {
 public:
  explicit PosixCgroup(std::unique_ptr<MemoryCgroup> cgroup) : cgroup_(std::move(cgroup)) {}
  std::string Describe() const override {
    return "v" + std::to_string(cgroup_->version()) + " " + cgroup_->path();
  }
  std::string ProcsPath() const override { return cgroup_->path() + "/cgroup.procs"; }
  Result<CgroupMemoryStat> ReadStat() const override { return cgroup_->ReadStat(); }

 private:
  std::unique_ptr<MemoryCgroup> cgroup_;
};

Result<std::unique_ptr<RunCgroup>> Wrap(Result<std::unique_ptr<MemoryCgroup>> cgroup) {
  if (!cgroup.ok()) return cgroup.status();
  return std::unique_ptr<RunCgroup>(std::make_unique<PosixCgroup>(std::move(cgroup).value()));
}

class PosixProcess final : public RunProcess {
 public:
  explicit PosixProcess(WorkloadProcess process) : process_(std::move(process)) {}
  pid_t pid() const override { return process_.pid(); }
  WorkloadExit Poll() override { return process_.Poll(); }
  WorkloadExit Stop(std::chrono::milliseconds grace) override { return process_.Stop(grace); }

 private:
  WorkloadProcess process_;
};

class DriverLoad final : public RunLoad {
 public:
  DriverLoad(const LoadSpec& spec, HttpClientFactory client_factory, Clock* clock,
             UnexpectedResponseSink sink)
      : driver_(spec, std::move(client_factory), clock, std::move(sink)) {}
  Status Start() override { return driver_.Start(); }
  void Stop() override { driver_.Stop(); }
  LoadStats Snapshot() const override { return driver_.Snapshot(); }

 private:
  LoadDriver driver_;
};

class PosixReplayEnv final : public ReplayEnv {
 public:
  Result<ProcessTreeUsage> ReadUsage(const std::vector<pid_t>& roots) override {
    return proc_.ReadUsage(roots);
  }
  std::vector<ProcessInfo> ListProcesses() override { return proc_.ListProcesses(); }
  Result<std::vector<std::string>> MappedLibraries(pid_t pid) override {
    return proc_.MappedLibraries(pid);
  }
  Result<std::string> CanonicalPath(const std::string& path) override {
    std::error_code ec;
    auto canonical = std::filesystem::canonical(path, ec);
    if (ec) return NotFound(path + ": " + ec.message());
    return canonical.string();
  }
  Result<std::vector<BooksFile>> ReadBooks(const std::string& dir) override {
    return ReadAllocatorBooksTree(dir);
  }

  Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& name,
                                                  std::optional<int64_t> limit_bytes) override {
    return Wrap(MemoryCgroup::Create(name, limit_bytes));
  }
  Result<std::unique_ptr<RunCgroup>> CgroupOfProcess(pid_t pid) override {
    return Wrap(MemoryCgroup::OfProcess(pid));
  }

  Result<std::unique_ptr<RunProcess>> StartWorkload(const WorkloadLaunch& launch) override {
    auto process = WorkloadProcess::Start(launch);
    if (!process.ok()) return process.status();
    return std::unique_ptr<RunProcess>(std::make_unique<PosixProcess>(std::move(process).value()));
  }

  // The workload binds the port next; the window in which another process
  // could take it is small and only costs a Failed run.
  Result<int> PickFreePort() override {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Unavailable("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      close(fd);
      return Unavailable("cannot find a free port");
    }
    close(fd);
    return static_cast<int>(ntohs(addr.sin_port));
  }

  Result<std::unique_ptr<net::HttpClient>> NewHttpClient(
      const net::HttpClientOptions& options) override {
    return net::NewHttpClient(options);
  }
  std::unique_ptr<RunLoad> NewLoad(const LoadSpec& spec, HttpClientFactory client_factory,
                                   Clock* clock, UnexpectedResponseSink sink) override {
    return std::make_unique<DriverLoad>(spec, std::move(client_factory), clock, std::move(sink));
  }

 private:
  const ProcReader proc_;
};

}  // namespace

ReplayEnv* ReplayEnv::Default() {
  static auto* env = new PosixReplayEnv();
  return env;
}

}  // namespace allocguard::replay
