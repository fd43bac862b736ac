// Tests against a real etcd + kube-apiserver started by e2e/cluster/up.sh.
// They read ALLOCGUARD_TEST_KUBECONFIG and ALLOCGUARD_TEST_ETCD and are
// skipped (reported as "Not Run" by ctest) when those are unset; scripts/test.sh
// runs them in its control-plane tier.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/kube/leader_election.h"
#include "operator/kube/testing/controlplane_support.h"
#include "operator/net/http.h"

namespace allocguard::kube {
namespace {

using kube::testing::Env;
using kube::testing::Eventually;
using kube::testing::RandomSuffix;

ResourceType ServiceAccounts() { return {"", "v1", "serviceaccounts", "ServiceAccount", true}; }
ResourceType Roles() { return {"rbac.authorization.k8s.io", "v1", "roles", "Role", true}; }
ResourceType RoleBindings() {
  return {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true};
}
ResourceType Widgets() { return {"e2e.allocguard.io", "v1", "widgets", "Widget", true}; }

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubeconfig_ = Env("ALLOCGUARD_TEST_KUBECONFIG");
    if (kubeconfig_.empty()) GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECONFIG unset";
    auto config = LoadKubeconfig({kubeconfig_, "", "", ""});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    auto client = Client::Create(config_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    ns_ = "t-" + RandomSuffix();
    auto created = client_->Create(Namespaces(), "", {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  void TearDown() override {
    // Without a controller-manager the namespace stays Terminating; its
    // random name keeps tests apart.
    if (client_) (void)client_->Delete(Namespaces(), "", ns_);
  }

  Object ConfigMap(const std::string& name, Object data) {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"data", std::move(data)}};
  }

  std::string kubeconfig_;
  RestConfig config_;
  std::unique_ptr<Client> client_;
  std::string ns_;
};

TEST_F(ControlPlaneTest, ConfigMapCrudPatchAndErrorsKeepTheServersReason) {
  auto created = client_->Create(ConfigMaps(), ns_, ConfigMap("a", {{"k", "v1"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto again = client_->Create(ConfigMaps(), ns_, ConfigMap("a", {{"k", "v1"}}));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.error().IsAlreadyExists());
  EXPECT_NE(again.error().ToString().find("configmaps \"a\" already exists"), std::string::npos)
      << again.error().ToString();

  auto got = client_->Get(ConfigMaps(), ns_, "a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["data"]["k"], "v1");

  Object changed = *got;
  changed["data"]["k"] = "v2";
  auto updated = client_->Update(ConfigMaps(), changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ((*updated)["data"]["k"], "v2");

  auto merged =
      client_->Patch(ConfigMaps(), ns_, "a", PatchType::kMerge, {{"data", {{"added", "m"}}}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ((*merged)["data"]["added"], "m");
  EXPECT_EQ((*merged)["data"]["k"], "v2");

  auto json_patched =
      client_->Patch(ConfigMaps(), ns_, "a", PatchType::kJson,
                     Object::array({{{"op", "replace"}, {"path", "/data/k"}, {"value", "v3"}},
                                    {{"op", "add"},
                                     {"path", "/metadata/labels"},
                                     {"value", {{"app.kubernetes.io/name", "x"}}}}}));
  ASSERT_TRUE(json_patched.ok()) << json_patched.status().ToString();
  EXPECT_EQ((*json_patched)["data"]["k"], "v3");

  auto failed_test =
      client_->Patch(ConfigMaps(), ns_, "a", PatchType::kJson,
                     Object::array({{{"op", "test"}, {"path", "/data/k"}, {"value", "nope"}}}));
  ASSERT_FALSE(failed_test.ok());
  EXPECT_EQ(failed_test.error().code, 422);

  ASSERT_TRUE(client_->Create(ConfigMaps(), ns_, ConfigMap("b", {})).ok());
  auto list = client_->List(ConfigMaps(), ns_, {.label_selector = "app.kubernetes.io/name=x"});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]["metadata"]["name"], "a");
  EXPECT_FALSE(list->resource_version.empty());

  // Paginated: 1 per page still returns both (plus kube-root-ca.crt if a
  // controller-manager runs).
  auto paged = client_->List(ConfigMaps(), ns_, {.page_size = 1});
  ASSERT_TRUE(paged.ok());
  EXPECT_GE(paged->items.size(), 2u);

  auto deleted = client_->Delete(ConfigMaps(), ns_, "a", {.propagation = Propagation::kBackground});
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  auto gone = client_->Get(ConfigMaps(), ns_, "a");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.error().IsNotFound());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);

  auto invalid = client_->Create(ConfigMaps(), ns_, ConfigMap("Not_Valid", {}));
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().reason, "Invalid");
  ASSERT_FALSE(invalid.error().causes.empty());
  EXPECT_EQ(invalid.error().causes[0].field, "metadata.name");
}

TEST_F(ControlPlaneTest, StaleUpdateConflictsAndUpdateWithRetryLosesNoIncrement) {
  ASSERT_TRUE(client_->Create(ConfigMaps(), ns_, ConfigMap("counter", {{"n", "0"}})).ok());
  auto stale = client_->Get(ConfigMaps(), ns_, "counter");
  ASSERT_TRUE(
      client_->Patch(ConfigMaps(), ns_, "counter", PatchType::kMerge, {{"data", {{"x", "1"}}}})
          .ok());
  (*stale)["data"]["n"] = "100";
  auto conflict = client_->Update(ConfigMaps(), *stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(conflict.error().IsConflict()) << conflict.error().ToString();
  EXPECT_NE(conflict.error().message.find("the object has been modified"), std::string::npos);

  constexpr int kThreads = 4;
  constexpr int kIncrements = 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        auto r = client_->UpdateWithRetry(
            ConfigMaps(), ns_, "counter",
            [](Object& o) {
              o["data"]["n"] = std::to_string(std::stoi(o["data"]["n"].get<std::string>()) + 1);
              return Status::Ok();
            },
            "", /*attempts=*/50);
        if (!r.ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ((*client_->Get(ConfigMaps(), ns_, "counter"))["data"]["n"],
            std::to_string(kThreads * kIncrements));
}

TEST_F(ControlPlaneTest, WatchSeesEveryChangeInOrder) {
  ASSERT_TRUE(client_->Create(ConfigMaps(), ns_, ConfigMap("w", {{"i", "0"}})).ok());
  auto list = client_->List(ConfigMaps(), ns_);
  ASSERT_TRUE(list.ok());
  constexpr int kChanges = 30;
  std::vector<std::string> seen;
  Canceller cancel;
  std::thread watcher([&] {
    auto r = client_->Watch(
        ConfigMaps(), ns_, {.resource_version = list->resource_version},
        [&](WatchEventType type, Object& o) {
          if (type == WatchEventType::kModified) {
            seen.push_back(o["data"]["i"].get<std::string>());
          } else if (type == WatchEventType::kDeleted) {
            seen.emplace_back("deleted");
            return false;
          }
          return true;
        },
        &cancel);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  });
  for (int i = 1; i <= kChanges; ++i) {
    ASSERT_TRUE(client_
                    ->Patch(ConfigMaps(), ns_, "w", PatchType::kMerge,
                            {{"data", {{"i", std::to_string(i)}}}})
                    .ok());
  }
  ASSERT_TRUE(client_->Delete(ConfigMaps(), ns_, "w").ok());
  watcher.join();
  std::vector<std::string> want;
  for (int i = 1; i <= kChanges; ++i) want.push_back(std::to_string(i));
  want.emplace_back("deleted");
  EXPECT_EQ(seen, want);
}

TEST_F(ControlPlaneTest, CancellingAWatchReturnsPromptly) {
  Canceller cancel;
  std::atomic<bool> returned{false};
  std::thread watcher([&] {
    (void)client_->Watch(
        ConfigMaps(), ns_, {}, [](WatchEventType, Object&) { return true; }, &cancel);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load());  // the watch is open and quiet
  cancel.Cancel();
  watcher.join();
  EXPECT_TRUE(returned.load());
}

// Wraps a transport and holds new streams while closed: lets a test keep an
// informer disconnected while the server moves on.
class GatedTransport final : public Transport {
 public:
  explicit GatedTransport(std::shared_ptr<Transport> inner) : inner_(std::move(inner)) {}
  Result<net::HttpResponse> Send(const net::HttpRequest& r) override { return inner_->Send(r); }
  Status Stream(const net::HttpRequest& r, const net::StreamHandlers& h, Canceller* c) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.wait(lock, [&] { return open_ || (c != nullptr && c->cancelled()); });
      --waiting_;
    }
    return inner_->Stream(r, h, c);
  }
  void SetOpen(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  void Wake() { cv_.notify_all(); }

 private:
  std::shared_ptr<Transport> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

Result<std::string> EtcdPost(const std::string& path, const std::string& body) {
  AG_ASSIGN_OR_RETURN(auto http, net::NewHttpClient({.base_url = Env("ALLOCGUARD_TEST_ETCD")}));
  net::HttpRequest req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.content_type = "application/json";
  AG_ASSIGN_OR_RETURN(auto res, http->Send(req));
  if (res.status != 200)
    return Unavailable("etcd " + path + ": HTTP " + std::to_string(res.status) + " " + res.body);
  return res.body;
}

TEST_F(ControlPlaneTest, InformerRelistsAfterCompactionAndConvergesToTheServer) {
  ASSERT_FALSE(Env("ALLOCGUARD_TEST_ETCD").empty());
  auto make_secret = [&](const std::string& name) {
    return Object{{"metadata", {{"name", name}, {"namespace", ns_}}},
                  {"stringData", {{"k", name}}}};
  };
  for (const char* n : {"s1", "s2", "s3"})
    ASSERT_TRUE(client_->Create(Secrets(), ns_, make_secret(n)).ok());

  HttpTransportOptions topts;
  topts.client.base_url = config_.server;
  topts.client.tls = config_.tls;
  auto inner = NewHttpTransport(topts);
  ASSERT_TRUE(inner.ok());
  auto gate = std::make_shared<GatedTransport>(std::shared_ptr<Transport>(std::move(*inner)));
  Client informer_client(gate, nullptr);
  InformerOptions iopts;
  iopts.namespace_ = ns_;
  iopts.min_watch_timeout_seconds = 1;  // re-watch often, so the gate catches it soon
  iopts.initial_backoff = std::chrono::milliseconds(50);
  Informer informer(&informer_client, Secrets(), iopts);
  std::mutex mu;
  std::vector<std::string> deletes;
  informer.store().SetHandlers({nullptr, nullptr, [&](const Object& o) {
                                  std::lock_guard<std::mutex> lock(mu);
                                  deletes.push_back(o["metadata"]["name"]);
                                }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync());
  ASSERT_TRUE(Eventually([&] { return informer.store().size() == 3; }));

  // Disconnect the informer, change things behind its back, compact etcd.
  gate->SetOpen(false);
  ASSERT_TRUE(Eventually([&] { return gate->waiting() == 1; }));
  ASSERT_TRUE(client_->Delete(Secrets(), ns_, "s2").ok());
  ASSERT_TRUE(client_->Create(Secrets(), ns_, make_secret("s4")).ok());
  ASSERT_TRUE(
      client_->Patch(Secrets(), ns_, "s1", PatchType::kMerge, {{"stringData", {{"k", "changed"}}}})
          .ok());
  auto range = EtcdPost("/v3/kv/range", R"({"key":"AA=="})");  // any key: we want the header
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  std::string revision = Object::parse(*range)["header"]["revision"].get<std::string>();
  auto compacted =
      EtcdPost("/v3/kv/compaction", R"({"revision":")" + revision + R"(","physical":true})");
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  int lists_before = informer.lists();
  gate->SetOpen(true);

  ASSERT_TRUE(Eventually([&] { return informer.lists() > lists_before; }))
      << "no relist; last error: " << informer.last_error();
  ASSERT_TRUE(Eventually(
      [&] { return informer.store().size() == 3 && informer.store().Get(ns_ + "/s4"); }));
  EXPECT_NE(informer.last_error().find("410"), std::string::npos) << informer.last_error();
  auto server = client_->List(Secrets(), ns_);
  ASSERT_TRUE(server.ok());
  std::vector<std::string> server_keys;
  for (const auto& o : server->items) server_keys.push_back(ObjectKey(o));
  EXPECT_EQ(informer.store().Keys(), server_keys);
  EXPECT_EQ(informer.store().Get(ns_ + "/s1")->at("data").at("k"), "Y2hhbmdlZA==");  // "changed"
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(deletes, std::vector<std::string>{"s2"});
  }
  informer.Stop();
}

Object WidgetCrd() {
  return Object::parse(R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.e2e.allocguard.io"},
  "spec": {"group": "e2e.allocguard.io", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
          "size": {"type": "integer"}, "color": {"type": "string"}}},
        "status": {"type": "object", "properties": {
          "observedGeneration": {"type": "integer"},
          "conditions": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object", "required": ["type", "status"], "properties": {
              "type": {"type": "string"}, "status": {"type": "string"},
              "reason": {"type": "string"}, "message": {"type": "string"}}}}}}}}}}]}})");
}

TEST_F(ControlPlaneTest, ServerSideApplyAndStatusSubresourceOnACustomResource) {
  auto crd = client_->Apply(CustomResourceDefinitions(), WidgetCrd(), "allocguard-e2e");
  ASSERT_TRUE(crd.ok()) << crd.status().ToString();
  ASSERT_TRUE(Eventually([&] {
    auto c = client_->Get(CustomResourceDefinitions(), "", "widgets.e2e.allocguard.io");
    if (!c.ok()) return false;
    for (const auto& cond : (*c)["status"].value("conditions", Object::array())) {
      if (cond["type"] == "Established" && cond["status"] == "True") return true;
    }
    return false;
  }));
  // Discovery may lag the condition briefly.
  ASSERT_TRUE(Eventually([&] { return client_->List(Widgets(), ns_).ok(); }));

  Object w = {{"apiVersion", "e2e.allocguard.io/v1"},
              {"kind", "Widget"},
              {"metadata", {{"name", "w1"}, {"namespace", ns_}}},
              {"spec", {{"size", 3}}}};
  auto applied = client_->Apply(Widgets(), w, "manager-a", /*force=*/false);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ((*applied)["spec"]["size"], 3);
  EXPECT_EQ((*applied)["metadata"]["generation"], 1);

  // Another manager wants the same field: conflict, naming the owner.
  Object other = w;
  other["spec"] = {{"size", 5}};
  auto conflict = client_->Apply(Widgets(), other, "manager-b", /*force=*/false);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.error().code, 409);
  ASSERT_FALSE(conflict.error().causes.empty());
  EXPECT_EQ(conflict.error().causes[0].type, "FieldManagerConflict");
  EXPECT_NE(conflict.error().ToString().find("manager-a"), std::string::npos)
      << conflict.error().ToString();
  auto forced = client_->Apply(Widgets(), other, "manager-b", /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)["spec"]["size"], 5);
  EXPECT_EQ((*forced)["metadata"]["generation"], 2);

  // Status through the subresource: spec changes there are ignored, the
  // generation does not move, conditions merge by type.
  Object status = {
      {"apiVersion", "e2e.allocguard.io/v1"},
      {"kind", "Widget"},
      {"metadata", {{"name", "w1"}, {"namespace", ns_}}},
      {"status",
       {{"observedGeneration", 2},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "Fine"}}}}}}};
  auto st = client_->Apply(Widgets(), status, "allocguard-status", true, "status");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto via_update = client_->UpdateWithRetry(
      Widgets(), ns_, "w1",
      [](Object& o) {
        o["spec"]["size"] = 99;  // ignored by /status
        o["status"]["conditions"].push_back({{"type", "Synced"}, {"status", "False"}});
        return Status::Ok();
      },
      "status");
  ASSERT_TRUE(via_update.ok()) << via_update.status().ToString();
  auto final_w = client_->Get(Widgets(), ns_, "w1");
  ASSERT_TRUE(final_w.ok());
  EXPECT_EQ((*final_w)["spec"]["size"], 5);
  EXPECT_EQ((*final_w)["metadata"]["generation"], 2);
  EXPECT_EQ((*final_w)["status"]["conditions"].size(), 2u);
  EXPECT_EQ((*final_w)["status"]["observedGeneration"], 2);

  // Writes to the main resource ignore .status.
  auto main_patch = client_->Patch(Widgets(), ns_, "w1", PatchType::kMerge,
                                   {{"status", {{"observedGeneration", 7}}}});
  ASSERT_TRUE(main_patch.ok());
  EXPECT_EQ((*main_patch)["status"]["observedGeneration"], 2);
}

TEST_F(ControlPlaneTest, AnObjectOverTheServersLimitIsAClearError) {
  auto big =
      client_->Create(ConfigMaps(), ns_, ConfigMap("big", {{"k", std::string(2 << 20, 'x')}}));
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(big.error().code == 413 || big.error().code == 422) << big.error().ToString();
  EXPECT_FALSE(big.error().message.empty());
  // The client is still usable.
  EXPECT_TRUE(client_->Get(Namespaces(), "", ns_).ok());
}

// ---- TLS -----------------------------------------------------------------------------

TEST_F(ControlPlaneTest, TlsVerifiesTheServerAgainstTheConfiguredCaAndName) {
  auto try_config = [&](const RestConfig& rc) -> ApiResult<Object> {
    auto c = Client::Create(rc, {.max_transport_retries = 0});
    if (!c.ok()) return TransportError(c.status());
    return (*c)->Get(Namespaces(), "", "default");
  };
  EXPECT_TRUE(try_config(config_).ok());

  RestConfig by_name = config_;
  by_name.tls.server_name = "kubernetes.default.svc";  // a SAN of the serving cert
  auto named = try_config(by_name);
  EXPECT_TRUE(named.ok()) << named.status().ToString();

  RestConfig wrong_name = config_;
  wrong_name.tls.server_name = "not-the-apiserver.example";
  auto wn = try_config(wrong_name);
  ASSERT_FALSE(wn.ok());
  EXPECT_TRUE(wn.error().IsTransport());

  // A CA that did not sign the server's certificate.
  RestConfig other_ca = config_;
  other_ca.tls.ca_pem.clear();
  other_ca.tls.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  auto oc = try_config(other_ca);
  ASSERT_FALSE(oc.ok());
  EXPECT_NE(oc.error().message.find("not trusted"), std::string::npos) << oc.error().message;

  RestConfig insecure = other_ca;
  insecure.tls.insecure_skip_verify = true;
  EXPECT_TRUE(try_config(insecure).ok());
}

// ---- Credentials: rotating token file, exec plugin -------------------------------------

// Creates a service account that may read ConfigMaps in ns, and returns a
// token for it bound to a new Secret (deleting the Secret revokes the token).
struct BoundToken {
  std::string token;
  std::string secret;
};

class CredentialsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    ControlPlaneTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(client_->Create(ServiceAccounts(), ns_, {{"metadata", {{"name", "robot"}}}}).ok());
    ASSERT_TRUE(client_
                    ->Create(Roles(), ns_,
                             {{"metadata", {{"name", "read-cm"}}},
                              {"rules",
                               {{{"apiGroups", {""}},
                                 {"resources", {"configmaps"}},
                                 {"verbs", {"get", "list"}}}}}})
                    .ok());
    ASSERT_TRUE(
        client_
            ->Create(RoleBindings(), ns_,
                     {{"metadata", {{"name", "robot-read-cm"}}},
                      {"roleRef",
                       {{"apiGroup", "rbac.authorization.k8s.io"},
                        {"kind", "Role"},
                        {"name", "read-cm"}}},
                      {"subjects",
                       {{{"kind", "ServiceAccount"}, {"name", "robot"}, {"namespace", ns_}}}}})
            .ok());
    ASSERT_TRUE(client_->Create(ConfigMaps(), ns_, ConfigMap("visible", {{"k", "v"}})).ok());
    char tmpl[] = "/tmp/kube-cred-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    ControlPlaneTest::TearDown();
  }

  BoundToken NewBoundToken() {
    std::string secret = "bind-" + RandomSuffix();
    auto s = client_->Create(Secrets(), ns_, {{"metadata", {{"name", secret}}}});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    ResourceType token_request = ServiceAccounts();
    auto tr = client_->Create({"", "v1", "serviceaccounts/robot/token", "TokenRequest", true}, ns_,
                              {{"apiVersion", "authentication.k8s.io/v1"},
                               {"kind", "TokenRequest"},
                               {"spec",
                                {{"expirationSeconds", 3600},
                                 {"boundObjectRef",
                                  {{"kind", "Secret"},
                                   {"apiVersion", "v1"},
                                   {"name", secret},
                                   {"uid", (*s)["metadata"]["uid"]}}}}}});
    EXPECT_TRUE(tr.ok()) << tr.status().ToString();
    return {(*tr)["status"]["token"].get<std::string>(), secret};
  }

  void WriteFile(const std::string& path, const std::string& content) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << content;
    std::filesystem::rename(tmp, path);  // atomic, as the kubelet does
  }

  std::string dir_;
};

TEST_F(CredentialsTest, RotatedTokenFileIsPickedUpAfterA401) {
  BoundToken first = NewBoundToken();
  BoundToken second = NewBoundToken();
  std::string token_file = dir_ + "/token";
  WriteFile(token_file, first.token);

  RestConfig rc;
  rc.server = config_.server;
  rc.tls.ca_pem = config_.tls.ca_pem;
  rc.tls.ca_file = config_.tls.ca_file;
  rc.token_file = token_file;
  auto rotating = Client::Create(rc);
  ASSERT_TRUE(rotating.ok()) << rotating.status().ToString();
  ASSERT_TRUE((*rotating)->Get(ConfigMaps(), ns_, "visible").ok());

  // Revoke the first token and rotate the file, as the kubelet would.
  ASSERT_TRUE(client_->Delete(Secrets(), ns_, first.secret).ok());
  RestConfig fixed = rc;
  fixed.token_file.clear();
  fixed.token = first.token;
  auto old_token_client = Client::Create(fixed);
  ASSERT_TRUE(old_token_client.ok());
  ASSERT_TRUE(Eventually([&] {
    auto r = (*old_token_client)->Get(ConfigMaps(), ns_, "visible");
    return !r.ok() && r.error().IsUnauthorized();
  })) << "the revoked token kept working";
  WriteFile(token_file, second.token);

  // Within the re-read period, so only the 401 makes the client re-read.
  auto after = (*rotating)->Get(ConfigMaps(), ns_, "visible");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)["data"]["k"], "v");
}

TEST_F(CredentialsTest, KubeconfigWithAnExecPluginAuthenticatesAsThePluginsIdentity) {
  BoundToken t = NewBoundToken();
  std::string plugin = dir_ + "/credential-plugin";
  {
    std::ofstream p(plugin);
    p << "#!/bin/sh\n"
      << R"(echo "$$" >> ")" << dir_ << "/runs\"\n"
      << "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"%s\"}}' \"$TOKEN\"\n";
  }
  chmod(plugin.c_str(), 0755);
  std::string ca_line = config_.tls.ca_file.empty()
                            ? "certificate-authority: " + Env("ALLOCGUARD_TEST_CA")
                            : "certificate-authority: " + config_.tls.ca_file;
  std::ofstream(dir_ + "/kubeconfig")
      << "apiVersion: v1\nkind: Config\ncurrent-context: robot\n"
      << "clusters:\n- name: e2e\n  cluster:\n    server: " << config_.server << "\n    " << ca_line
      << "\n"
      << "users:\n- name: robot\n  user:\n    exec:\n"
      << "      apiVersion: client.authentication.k8s.io/v1\n"
      << "      command: ./credential-plugin\n"
      << "      interactiveMode: Never\n"
      << "      env: [{name: TOKEN, value: \"" << t.token << "\"}]\n"
      << "contexts:\n- name: robot\n  context: {cluster: e2e, user: robot, namespace: " << ns_
      << "}\n";
  auto rc = LoadKubeconfig({dir_ + "/kubeconfig", "", "", ""});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->namespace_, ns_);
  auto c = Client::Create(*rc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto review = (*c)->Create(
      {"authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", false}, "",
      {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
  ASSERT_TRUE(review.ok()) << review.status().ToString();
  EXPECT_EQ((*review)["status"]["userInfo"]["username"], "system:serviceaccount:" + ns_ + ":robot");
  ASSERT_TRUE((*c)->Get(ConfigMaps(), ns_, "visible").ok());
  // Cached: the plugin ran once for both calls.
  std::ifstream runs(dir_ + "/runs");
  int lines = 0;
  for (std::string l; std::getline(runs, l);) ++lines;
  EXPECT_EQ(lines, 1);
  // Forbidden is not Unauthorized: the reason survives.
  auto forbidden = (*c)->List(Secrets(), ns_);
  ASSERT_FALSE(forbidden.ok());
  EXPECT_EQ(forbidden.error().reason, "Forbidden");
  EXPECT_NE(forbidden.error().message.find("cannot list resource \"secrets\""), std::string::npos);
}

// ---- Events ------------------------------------------------------------------------------

TEST_F(ControlPlaneTest, RepeatedEventsAggregateIntoOneSeries) {
  auto cm = client_->Create(ConfigMaps(), ns_, ConfigMap("subject", {}));
  ASSERT_TRUE(cm.ok());
  EventRecorder recorder(client_.get(), {.reporting_instance = "test-instance"});
  for (int i = 0; i < 3; ++i) {
    Status s = recorder.Record(*cm, EventType::kWarning, "CanaryRatchet", "Gate",
                               "floor slope 2.1 GiB/h exceeds 0.5 GiB/h");
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  ASSERT_TRUE(recorder.Record(*cm, EventType::kNormal, "CanaryFlat", "Gate", "flat").ok());
  auto events = client_->List(EventsV1(), ns_);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->items.size(), 2u);
  int ratchets = 0;
  for (const auto& e : events->items) {
    EXPECT_EQ(e["regarding"]["name"], "subject");
    EXPECT_EQ(e["regarding"]["uid"], (*cm)["metadata"]["uid"]);
    EXPECT_EQ(e["reportingInstance"], "test-instance");
    if (e["reason"] == "CanaryRatchet") {
      ++ratchets;
      EXPECT_EQ(e["type"], "Warning");
      EXPECT_EQ(e["note"], "floor slope 2.1 GiB/h exceeds 0.5 GiB/h");
      EXPECT_EQ(e["series"]["count"], 3);
    } else {
      EXPECT_FALSE(e.contains("series"));
    }
  }
  EXPECT_EQ(ratchets, 1);
}

// ---- Leader election ---------------------------------------------------------------------

class LeaderProcess {
 public:
  LeaderProcess(const std::string& kubeconfig, const std::string& ns, const std::string& lease,
                const std::string& identity, const std::string& out_file)
      : out_file_(out_file) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> args = {KUBE_LEADER_DEMO, kubeconfig, ns, lease, identity};
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, KUBE_LEADER_DEMO, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~LeaderProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool Printed(const std::string& text) const {
    std::ifstream in(out_file_);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.find(text) != std::string::npos;
  }
  void Signal(int sig) const { kill(pid_, sig); }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  std::string out_file_;
  pid_t pid_ = -1;
};

TEST_F(ControlPlaneTest, LeaderKilledAnotherProcessTakesOverAndCleanShutdownReleases) {
  char tmpl[] = "/tmp/kube-leader-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  LeaderProcess a(kubeconfig_, ns_, "op-lock", "a", dir + "/a.out");
  ASSERT_TRUE(Eventually([&] { return a.Printed("leading a"); }));
  LeaderProcess b(kubeconfig_, ns_, "op-lock", "b", dir + "/b.out");
  ASSERT_TRUE(Eventually([&] {
    auto lease = client_->Get(Leases(), ns_, "op-lock");
    return lease.ok() && (*lease)["spec"]["holderIdentity"] == "a";
  }));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // let b observe a's renewals
  EXPECT_FALSE(b.Printed("leading b"));

  auto killed_at = std::chrono::steady_clock::now();
  a.Signal(SIGKILL);
  a.Wait();
  ASSERT_TRUE(Eventually([&] { return b.Printed("leading b"); }));
  double failover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::printf("leader failover after SIGKILL: %.1f s (lease 15 s, retry 2 s)\n", failover);
  RecordProperty("failover_seconds", std::to_string(failover));
  auto lease = client_->Get(Leases(), ns_, "op-lock");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);

  // A clean shutdown releases the lease at once.
  b.Signal(SIGTERM);
  int status = b.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto released = client_->Get(Leases(), ns_, "op-lock");
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE(!(*released)["spec"].contains("holderIdentity") ||
              (*released)["spec"]["holderIdentity"].is_null() ||
              (*released)["spec"]["holderIdentity"].empty());
  LeaderProcess c(kubeconfig_, ns_, "op-lock", "c", dir + "/c.out");
  ASSERT_TRUE(Eventually([&] { return c.Printed("leading c"); }));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allocguard::kube
