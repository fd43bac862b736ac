// kube_leader_demo: campaigns for a Lease and prints when it leads. Used by
// the control-plane tests (two processes, the leader killed) and handy for
// watching failover by hand:
//
//   kube_leader_demo KUBECONFIG NAMESPACE LEASE IDENTITY
//
// Prints "leading IDENTITY" when it becomes leader, "stopped IDENTITY" when it
// stops; SIGTERM/SIGINT release the lease and exit 0; losing it exits 1.

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/leader_election.h"

using allocguard::Status;
using allocguard::kube::Canceller;
using allocguard::kube::Client;
using allocguard::kube::LeaderElectionConfig;
using allocguard::kube::LeaderElector;
using allocguard::kube::LoadKubeconfig;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s KUBECONFIG NAMESPACE LEASE IDENTITY\n", argv[0]);
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config = LoadKubeconfig({argv[1], "", "", ""});
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  auto client = Client::Create(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  Canceller cancel;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    cancel.Cancel();
  });
  waiter.detach();

  LeaderElectionConfig le;
  le.lease_namespace = argv[2];
  le.lease_name = argv[3];
  le.identity = argv[4];
  le.on_started_leading = [&] {
    std::printf("leading %s\n", argv[4]);
    std::fflush(stdout);
  };
  le.on_stopped_leading = [&] {
    std::printf("stopped %s\n", argv[4]);
    std::fflush(stdout);
  };
  LeaderElector elector(client->get(), le);
  Status s = elector.Run(&cancel);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
