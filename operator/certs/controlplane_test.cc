// CertificateManager against a real etcd + kube-apiserver (e2e/cluster/up.sh).
// Skipped when ALLOCGUARD_TEST_KUBECONFIG is unset.

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "operator/certs/certificate_manager.h"
#include "operator/certs/x509.h"
#include "operator/common/base64.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/testing/controlplane_support.h"
#include "operator/net/http.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::certs {
namespace {

using kube::testing::Env;
using kube::testing::RandomSuffix;

class CertsControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string kubeconfig = Env("ALLOCGUARD_TEST_KUBECONFIG");
    if (kubeconfig.empty()) GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECONFIG unset";
    auto config = kube::LoadKubeconfig({kubeconfig, "", "", ""});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto client = kube::Client::Create(*config);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    ns_ = "certs-" + RandomSuffix();
    ASSERT_TRUE(client_->Create(kube::Namespaces(), "", {{"metadata", {{"name", ns_}}}}).ok());
    webhook_ = "allocguard-test-" + RandomSuffix();
    kube::Object config_object = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "MutatingWebhookConfiguration"},
        {"metadata", {{"name", webhook_}}},
        {"webhooks",
         {{{"name", "pods.allocguard.io"},
           {"admissionReviewVersions", {"v1"}},
           {"sideEffects", "None"},
           {"failurePolicy", "Ignore"},
           {"clientConfig", {{"url", "https://127.0.0.1:9443/mutate-pods"}}},
           {"namespaceSelector",
            {{"matchLabels", {{"allocguard-test", "never-matches-" + webhook_}}}}},
           {"rules",
            {{{"operations", {"CREATE"}},
              {"apiGroups", {""}},
              {"apiVersions", {"v1"}},
              {"resources", {"pods"}}}}}},
          {{"name", "deployments.allocguard.io"},
           {"admissionReviewVersions", {"v1"}},
           {"sideEffects", "None"},
           {"failurePolicy", "Ignore"},
           {"clientConfig", {{"url", "https://127.0.0.1:9443/mutate-deployments"}}},
           {"namespaceSelector",
            {{"matchLabels", {{"allocguard-test", "never-matches-" + webhook_}}}}},
           {"rules",
            {{{"operations", {"UPDATE"}},
              {"apiGroups", {"apps"}},
              {"apiVersions", {"v1"}},
              {"resources", {"deployments"}}}}}}}}};
    auto created = client_->Create(kube::MutatingWebhookConfigurations(), "", config_object);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  void TearDown() override {
    if (client_ == nullptr) return;
    (void)client_->Delete(kube::MutatingWebhookConfigurations(), "", webhook_);
    (void)client_->Delete(kube::Namespaces(), "", ns_);
  }

  CertificateManagerOptions Options(Clock* clock) {
    CertificateManagerOptions o;
    o.secret_namespace = ns_;
    o.secret_name = "webhook-tls";
    o.dns_names = ServiceDnsNames("allocguard-webhook", ns_);
    o.ip_addresses = {"127.0.0.1"};
    o.mutating_webhook_configurations = {webhook_};
    o.clock = clock;
    return o;
  }

  // The caBundle of every webhook in the configuration, decoded.
  std::vector<std::string> CaBundles() {
    std::vector<std::string> out;
    auto got = client_->Get(kube::MutatingWebhookConfigurations(), "", webhook_);
    EXPECT_TRUE(got.ok());
    if (!got.ok()) return out;
    for (const auto& hook : (*got)["webhooks"]) {
      auto decoded = DecodeBase64(hook["clientConfig"].value("caBundle", ""));
      out.push_back(decoded.ok() ? *decoded : "<bad base64>");
    }
    return out;
  }

  std::string SecretField(const char* key, const std::string& secret = "webhook-tls") {
    auto got = client_->Get(kube::Secrets(), ns_, secret);
    EXPECT_TRUE(got.ok());
    if (!got.ok()) return "";
    auto decoded = DecodeBase64((*got)["data"].value(key, ""));
    return decoded.ok() ? *decoded : "";
  }
  std::string CaSecretField(const char* key) { return SecretField(key, "webhook-tls-ca"); }

  std::unique_ptr<kube::Client> client_;
  std::string ns_;
  std::string webhook_;
};

TEST_F(CertsControlPlaneTest, CreatesTheSecretSharesItAndWritesTheCaBundle) {
  CertificateManager first(client_.get(), Options(RealClock::Get()));
  Status tick = first.Tick();
  ASSERT_TRUE(tick.ok()) << tick.ToString();
  auto pair = first.Current();
  ASSERT_NE(pair, nullptr);

  auto secret = client_->Get(kube::Secrets(), ns_, "webhook-tls");
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ((*secret)["type"], "kubernetes.io/tls");
  EXPECT_EQ(SecretField(kSecretCertKey), pair->cert_chain_pem);
  EXPECT_EQ(SecretField(kSecretCaKey), pair->ca_bundle_pem);
  // The CA key is in the CA Secret, never beside the serving pair.
  EXPECT_FALSE((*secret)["data"].contains(kSecretCaKeyKey)) << secret->dump();
  EXPECT_EQ(CaSecretField(kSecretCaKey), pair->ca_bundle_pem);
  EXPECT_TRUE(KeyMatchesCertificate(CaSecretField(kSecretCaKey), CaSecretField(kSecretCaKeyKey)));
  EXPECT_TRUE(IsSignedBy(pair->cert_chain_pem, pair->ca_bundle_pem));
  auto leaf = ParseCertificates(pair->cert_chain_pem);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->front().dns_names, ServiceDnsNames("allocguard-webhook", ns_));
  EXPECT_EQ(leaf->front().ip_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(CaBundles(), (std::vector<std::string>{pair->ca_bundle_pem, pair->ca_bundle_pem}));

  // A second replica adopts the same certificate instead of making its own.
  const std::string rv = secret->at("metadata").value("resourceVersion", "");
  CertificateManager second(client_.get(), Options(RealClock::Get()));
  ASSERT_TRUE(second.Tick().ok());
  ASSERT_NE(second.Current(), nullptr);
  EXPECT_EQ(second.Current()->cert_chain_pem, pair->cert_chain_pem);
  EXPECT_EQ(second.Current()->key_pem, pair->key_pem);
  auto again = client_->Get(kube::Secrets(), ns_, "webhook-tls");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->at("metadata").value("resourceVersion", ""), rv) << "the Secret was rewritten";
}

// A serving Secret of the earlier one-Secret layout (ca.key beside the
// serving pair) is migrated: the CA Secret is written, ca.key removed from
// the serving Secret, and the serving pair served all along is unchanged.
TEST_F(CertsControlPlaneTest, TheOneSecretLayoutIsMigratedWithoutChangingTheServingPair) {
  CertificateManager first(client_.get(), Options(RealClock::Get()));
  ASSERT_TRUE(first.Tick().ok());
  const std::string cert = SecretField(kSecretCertKey);
  const std::string ca_key = CaSecretField(kSecretCaKeyKey);
  // Rewrite the layout as an earlier operator left it.
  ASSERT_TRUE(client_->Delete(kube::Secrets(), ns_, "webhook-tls-ca").ok());
  auto legacy = client_->UpdateWithRetry(kube::Secrets(), ns_, "webhook-tls", [&](kube::Object& s) {
    s["data"][kSecretCaKeyKey] = EncodeBase64(ca_key);
    return Status::Ok();
  });
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();

  // A replica that may not write serves the pair (and reads no CA key).
  CertificateManagerOptions reader_options = Options(RealClock::Get());
  reader_options.may_write = [] { return false; };
  CertificateManager reader(client_.get(), reader_options);
  ASSERT_TRUE(reader.Tick().ok());
  ASSERT_NE(reader.Current(), nullptr);
  EXPECT_EQ(reader.Current()->cert_chain_pem, cert);

  CertificateManager writer(client_.get(), Options(RealClock::Get()));
  Status tick = writer.Tick();
  ASSERT_TRUE(tick.ok()) << tick.ToString();
  ASSERT_NE(writer.Current(), nullptr);
  EXPECT_EQ(writer.Current()->cert_chain_pem, cert) << "the migration reissued the serving pair";
  EXPECT_EQ(SecretField(kSecretCertKey), cert);
  EXPECT_EQ(SecretField(kSecretCaKeyKey), "") << "ca.key left beside the serving pair";
  EXPECT_EQ(CaSecretField(kSecretCaKeyKey), ca_key);
  EXPECT_TRUE(IsSignedBy(cert, CaSecretField(kSecretCaKey)));
}

TEST_F(CertsControlPlaneTest, AReplicaThatMayNotWriteOnlyReads) {
  auto options = Options(RealClock::Get());
  options.may_write = [] { return false; };
  CertificateManager follower(client_.get(), options);
  ASSERT_TRUE(follower.Tick().ok());
  EXPECT_EQ(follower.Current(), nullptr);
  EXPECT_TRUE(client_->Get(kube::Secrets(), ns_, "webhook-tls").error().IsNotFound());
  CertificateManager leader(client_.get(), Options(RealClock::Get()));
  ASSERT_TRUE(leader.Tick().ok());
  ASSERT_TRUE(follower.Tick().ok());
  ASSERT_NE(follower.Current(), nullptr);
  EXPECT_EQ(follower.Current()->cert_chain_pem, leader.Current()->cert_chain_pem);
}

TEST_F(CertsControlPlaneTest, ARacingReplicaDoesNotOverwriteAFreshCertificate) {
  // Both replicas see the serving certificate due. B reads the Secret, then
  // A renews it before B writes: B's guarded update conflicts, and B adopts
  // A's certificate instead of replacing it with its own.
  FakeClock clock;
  clock.Advance(std::chrono::system_clock::now().time_since_epoch());
  CertificateManager a(client_.get(), Options(&clock));
  ASSERT_TRUE(a.Tick().ok());
  const std::string original = a.Current()->cert_chain_pem;
  auto b_options = Options(&clock);
  CertificateManager b(client_.get(), b_options);
  ASSERT_TRUE(b.Tick().ok());
  EXPECT_EQ(b.Current()->cert_chain_pem, original);

  clock.Advance(std::chrono::hours(24 * 61));  // past 2/3 of 90 days
  bool raced = false;
  b_options.may_write = [&] {  // called by b.Tick() after it read the Secret
    if (!raced) {
      raced = true;
      EXPECT_TRUE(a.Tick().ok());
    }
    return true;
  };
  CertificateManager b_racing(client_.get(), b_options);
  Status tick = b_racing.Tick();
  ASSERT_TRUE(tick.ok()) << tick.ToString();
  ASSERT_TRUE(raced);
  const std::string renewed = a.Current()->cert_chain_pem;
  EXPECT_NE(renewed, original);
  EXPECT_EQ(SecretField(kSecretCertKey), renewed) << "B overwrote A's fresh certificate";
  EXPECT_EQ(b_racing.Current()->cert_chain_pem, renewed);
}

TEST_F(CertsControlPlaneTest, CaRotationPublishesBothCasBeforeSwitchingTheServingCertificate) {
  FakeClock clock;
  clock.Advance(std::chrono::system_clock::now().time_since_epoch());
  auto options = Options(&clock);
  CertificateManager manager(client_.get(), options);
  ASSERT_TRUE(manager.Tick().ok());
  const std::string old_ca = manager.Current()->ca_bundle_pem;
  const RotationPolicy& policy = options.policy;

  // Past 2/3 of the CA's life: the new CA joins the bundle, in the Secret and
  // in every webhook; the serving certificate still comes from the old CA.
  clock.Advance(std::chrono::duration_cast<Clock::Duration>(policy.ca_validity * 0.7));
  Status tick = manager.Tick();
  ASSERT_TRUE(tick.ok()) << tick.ToString();
  auto during = manager.Current();
  auto bundle = ParseCertificates(during->ca_bundle_pem);
  ASSERT_TRUE(bundle.ok());
  ASSERT_EQ(bundle->size(), 2u);
  EXPECT_EQ((*bundle)[0].pem, old_ca);
  const std::string new_ca = (*bundle)[1].pem;
  EXPECT_EQ(CaBundles(), (std::vector<std::string>{old_ca + new_ca, old_ca + new_ca}));
  EXPECT_TRUE(IsSignedBy(during->cert_chain_pem, old_ca));
  EXPECT_EQ(manager.last_decision().action, RotationAction::kNone);

  // Once the bundle has propagated, the serving certificate moves to the new CA.
  clock.Advance(policy.bundle_propagation);
  ASSERT_TRUE(manager.Tick().ok());
  EXPECT_TRUE(IsSignedBy(manager.Current()->cert_chain_pem, new_ca));
  EXPECT_EQ(manager.Current()->ca_bundle_pem, old_ca + new_ca);

  // After the overlap, the old CA leaves the Secret and the webhooks.
  clock.Advance(policy.ca_overlap + policy.backdate);
  ASSERT_TRUE(manager.Tick().ok());
  EXPECT_EQ(manager.Current()->ca_bundle_pem, new_ca);
  EXPECT_EQ(CaBundles(), (std::vector<std::string>{new_ca, new_ca}));
}

// The real API server calls a webhook served with the manager's certificate
// while the CA rotates in real time (a 12 s CA, so the whole rotation fits in
// a test): every ConfigMap created on the way must pass through the webhook
// (failurePolicy Fail), i.e. no admission fails during the rotation.
TEST_F(CertsControlPlaneTest, TheApiServerAdmitsThroughAFullCaRotation) {
  auto options = Options(RealClock::Get());
  options.mutating_webhook_configurations = {webhook_ + "-live"};
  options.policy.ca_validity = std::chrono::seconds(12);
  options.policy.serving_validity = std::chrono::seconds(12);
  options.policy.backdate = std::chrono::seconds(0);
  options.policy.bundle_propagation = std::chrono::seconds(1);
  options.policy.ca_overlap = std::chrono::seconds(1);
  auto manager = std::make_shared<CertificateManager>(client_.get(), options);
  // Fails (the webhook configuration does not exist yet) but creates the Secret.
  (void)manager->Tick();
  ASSERT_NE(manager->Current(), nullptr);

  auto server = net::NewHttpsServer({.key_pair = TlsKeyPairProviderOf(manager)});
  ASSERT_TRUE(server.ok());
  webhook::AdmissionServer admission(server->get());
  admission.Handle("/label", [](const webhook::AdmissionRequest&) {
    webhook::AdmissionResponse r;
    r.patch = nlohmann::json::array(
        {{{"op", "add"}, {"path", "/metadata/labels"}, {"value", {{"webhooked", "yes"}}}}});
    return r;
  });
  ASSERT_TRUE((*server)->Bind().ok());
  struct Serving {
    net::HttpServer* server;
    std::thread thread;
    ~Serving() {
      server->Stop();
      thread.join();
    }
  } serving{server->get(), std::thread([&] { (*server)->Serve(); })};
  const std::string url = "https://127.0.0.1:" + std::to_string((*server)->port()) + "/label";
  kube::Object config = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "MutatingWebhookConfiguration"},
      {"metadata", {{"name", webhook_ + "-live"}}},
      {"webhooks",
       {{{"name", "configmaps.allocguard.io"},
         {"admissionReviewVersions", {"v1"}},
         {"sideEffects", "None"},
         {"failurePolicy", "Fail"},
         {"timeoutSeconds", 10},
         {"clientConfig", {{"url", url}}},
         {"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns_}}}}},
         {"rules",
          {{{"operations", {"CREATE"}},
            {"apiGroups", {""}},
            {"apiVersions", {"v1"}},
            {"resources", {"configmaps"}}}}}}}}};
  ASSERT_TRUE(client_->Create(kube::MutatingWebhookConfigurations(), "", config).ok());
  ASSERT_TRUE(manager->Tick().ok());  // writes the caBundle

  // Wait (bounded) until the API server calls the webhook at all.
  int created = 0;
  auto create = [&]() -> kube::ApiResult<kube::Object> {
    return client_->Create(
        kube::ConfigMaps(), ns_,
        {{"metadata", {{"name", "cm-" + std::to_string(created++)}}}, {"data", {{"a", "b"}}}});
  };
  bool reached = false;
  for (int i = 0; i < 100 && !reached; ++i) {
    auto cm = create();
    reached = cm.ok() && (*cm)["metadata"]["labels"].value("webhooked", "") == "yes";
    if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reached) << "the API server never admitted through the webhook";

  const std::string first_ca = manager->Current()->ca_bundle_pem;
  bool saw_two_cas = false;
  bool switched = false;
  bool dropped = false;
  int admitted = 0;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!dropped && std::chrono::steady_clock::now() < limit) {
    Status tick = manager->Tick();
    ASSERT_TRUE(tick.ok()) << tick.ToString();
    auto pair = manager->Current();
    auto cas = ParseCertificates(pair->ca_bundle_pem);
    ASSERT_TRUE(cas.ok());
    if (cas->size() == 2) saw_two_cas = true;
    if (saw_two_cas && !IsSignedBy(pair->cert_chain_pem, first_ca)) switched = true;
    if (switched && cas->size() == 1) dropped = true;
    auto cm = create();
    ASSERT_TRUE(cm.ok()) << "admission failed during the rotation: " << cm.status().ToString();
    EXPECT_EQ((*cm)["metadata"]["labels"].value("webhooked", ""), "yes");
    ++admitted;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(saw_two_cas);
  EXPECT_TRUE(switched);
  EXPECT_TRUE(dropped);
  EXPECT_NE(manager->Current()->ca_bundle_pem, first_ca);
  std::printf("admitted %d ConfigMaps through one CA rotation\n", admitted);

  (void)client_->Delete(kube::MutatingWebhookConfigurations(), "", webhook_ + "-live");
}

}  // namespace
}  // namespace allocguard::certs
