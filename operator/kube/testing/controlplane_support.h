#pragma once

// Small helpers shared by the tests that run against the real control plane
// of e2e/cluster/up.sh (operator/*/..._controlplane_test.cc).

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "operator/kube/client.h"
#include "operator/kube/config.h"

namespace allocguard::kube::testing {

// The environment variable's value, or "" when unset.
inline std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// A client with the test control plane's admin kubeconfig
// (ALLOCGUARD_TEST_KUBECONFIG); nullptr when the variable is unset (the
// caller skips) or, with the reason in *error, when it cannot be used.
inline std::unique_ptr<Client> TestClient(std::string* error) {
  const char* kubeconfig = std::getenv("ALLOCGUARD_TEST_KUBECONFIG");
  if (kubeconfig == nullptr || *kubeconfig == '\0') return nullptr;
  auto config = LoadKubeconfig({kubeconfig, "", "", ""});
  if (!config.ok()) {
    *error = config.status().ToString();
    return nullptr;
  }
  auto client = Client::Create(*config);
  if (!client.ok()) {
    *error = client.status().ToString();
    return nullptr;
  }
  return std::move(*client);
}

// Six random [a-z0-9] characters, to keep names of concurrent runs apart.
inline std::string RandomSuffix() {
  static std::mt19937 rng(std::random_device{}());
  std::string s;
  for (int i = 0; i < 6; ++i) s.push_back("abcdefghijklmnopqrstuvwxyz0123456789"[rng() % 36]);
  return s;
}

// Polls cond every `poll` until it holds or `limit` has passed; returns its
// last value. The limit is a safety net so a broken build cannot hang, not a
// timing assertion.
template <typename F>
bool Eventually(F cond, std::chrono::seconds limit = std::chrono::seconds(60),
                std::chrono::milliseconds poll = std::chrono::milliseconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(poll);
  }
  return cond();
}

}  // namespace allocguard::kube::testing
