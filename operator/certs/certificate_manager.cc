#include "operator/certs/certificate_manager.h"

#include <algorithm>
#include <set>

#include "operator/certs/file_certificate_source.h"
#include "operator/certs/x509.h"
#include "operator/kube/config.h"
#include "operator/kube/object.h"

namespace allocguard::certs {
namespace {

std::string Concat(const std::vector<std::string>& pems) {
  std::string out;
  for (const auto& p : pems) out += p;
  return out;
}

}  // namespace

std::vector<std::string> ServiceDnsNames(const std::string& service, const std::string& ns) {
  return {service, service + "." + ns, service + "." + ns + ".svc",
          service + "." + ns + ".svc.cluster.local"};
}

struct CertificateManager::SecretView {
  bool exists = false;
  kube::Object object;
  std::string cert;
  std::string key;
  std::string ca;
  std::string ca_key;
  std::vector<CertificateInfo> cas;  // parsed ca, oldest first
};

CertificateManager::CertificateManager(kube::Client* client, CertificateManagerOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : client->clock()) {}

Result<CertificateManager::SecretView> CertificateManager::ReadSecret() {
  SecretView view;
  auto got = client_->Get(kube::Secrets(), options_.secret_namespace, options_.secret_name);
  if (!got.ok()) {
    if (got.error().IsNotFound()) return view;
    return got.status().WithContext("reading Secret " + options_.secret_namespace + "/" +
                                    options_.secret_name);
  }
  view.exists = true;
  view.object = std::move(*got);
  const kube::Object& data = kube::ObjectField(view.object, "data");
  auto field = [&](const char* key) {
    auto decoded = kube::DecodeBase64(kube::StringField(data, key));
    return decoded.ok() ? *decoded : std::string();
  };
  view.cert = field(kSecretCertKey);
  view.key = field(kSecretKeyKey);
  view.ca = field(kSecretCaKey);
  view.ca_key = field(kSecretCaKeyKey);
  if (auto cas = ParseCertificates(view.ca); cas.ok()) view.cas = std::move(*cas);
  return view;
}

RotationState CertificateManager::StateOf(const SecretView& view) {
  RotationState state;
  for (const auto& ca : view.cas) state.cas.push_back({ca.not_before, ca.not_after});
  state.newest_ca_key_valid =
      !view.cas.empty() && KeyMatchesCertificate(view.cas.back().pem, view.ca_key);
  auto serving = ParseCertificates(view.cert);
  if (serving.ok() && KeyMatchesCertificate(view.cert, view.key)) {
    const CertificateInfo& leaf = serving->front();
    state.serving = Validity{leaf.not_before, leaf.not_after};
    for (int i = static_cast<int>(view.cas.size()) - 1; i >= 0; --i) {
      if (IsSignedBy(view.cert, view.cas[static_cast<size_t>(i)].pem)) {
        state.serving_issuer = i;
        break;
      }
    }
    std::set<std::string> want(options_.dns_names.begin(), options_.dns_names.end());
    want.insert(options_.ip_addresses.begin(), options_.ip_addresses.end());
    std::set<std::string> have(leaf.dns_names.begin(), leaf.dns_names.end());
    have.insert(leaf.ip_addresses.begin(), leaf.ip_addresses.end());
    state.serving_names_match = want == have;
  }
  return state;
}

Result<std::optional<WallTime>> CertificateManager::SyncCaBundle(const std::string& bundle_pem) {
  const std::string encoded = kube::EncodeBase64(bundle_pem);
  Status first_error;
  bool all_hold = true;
  auto sync = [&](const kube::ResourceType& type, const std::string& name) {
    auto holds = [&](const kube::Object& config) {
      const kube::Object& hooks = config.contains("webhooks") ? config["webhooks"] : kube::Object();
      if (!hooks.is_array()) return true;
      for (const auto& hook : hooks) {
        if (kube::StringField(kube::ObjectField(hook, "clientConfig"), "caBundle") != encoded) {
          return false;
        }
      }
      return true;
    };
    auto got = client_->Get(type, "", name);
    if (got.ok() && holds(*got)) return;
    if (got.ok()) {
      auto updated = client_->UpdateWithRetry(type, "", name, [&](kube::Object& config) {
        if (!config.contains("webhooks") || !config["webhooks"].is_array()) return Status::Ok();
        for (auto& hook : config["webhooks"]) {
          if (hook.is_object()) hook["clientConfig"]["caBundle"] = encoded;
        }
        return Status::Ok();
      });
      if (updated.ok()) return;
      got = std::move(updated);
    }
    all_hold = false;
    if (first_error.ok()) {
      first_error = got.status().WithContext("caBundle of " + type.kind + " " + name);
    }
  };
  for (const auto& name : options_.mutating_webhook_configurations) {
    sync(kube::MutatingWebhookConfigurations(), name);
  }
  for (const auto& name : options_.validating_webhook_configurations) {
    sync(kube::ValidatingWebhookConfigurations(), name);
  }
  if (!all_hold) {
    published_bundle_.clear();
    return first_error;
  }
  if (published_bundle_ != bundle_pem) {
    published_bundle_ = bundle_pem;
    published_since_ = clock_->WallNow();
  }
  return std::optional<WallTime>(published_since_);
}

Status CertificateManager::Apply(RotationAction action, const SecretView& view, bool* lost_race) {
  const RotationPolicy& policy = options_.policy;
  const WallTime start = clock_->WallNow() - policy.backdate;
  std::string cert = view.cert, key = view.key, ca_key = view.ca_key;
  std::vector<std::string> bundle;
  for (const auto& ca : view.cas) bundle.push_back(ca.pem);

  auto issue = [&](const std::string& ca_pem, const std::string& signing_key,
                   WallTime ca_not_after) -> Status {
    ServingCertificateRequest request;
    request.common_name =
        options_.dns_names.empty() ? options_.ip_addresses.front() : options_.dns_names.front();
    request.dns_names = options_.dns_names;
    request.ip_addresses = options_.ip_addresses;
    request.not_before = start;
    request.not_after = std::min(start + policy.serving_validity, ca_not_after);
    AG_ASSIGN_OR_RETURN(PemCertificateAndKey serving,
                        IssueServingCertificate(request, ca_pem, signing_key));
    cert = std::move(serving.cert_pem);
    key = std::move(serving.key_pem);
    return Status::Ok();
  };

  switch (action) {
    case RotationAction::kNone:
      return Status::Ok();
    case RotationAction::kCreateCa: {
      AG_ASSIGN_OR_RETURN(PemCertificateAndKey ca,
                          GenerateCa(options_.ca_common_name, start, start + policy.ca_validity));
      AG_RETURN_IF_ERROR(issue(ca.cert_pem, ca.key_pem, start + policy.ca_validity));
      bundle = {ca.cert_pem};
      ca_key = ca.key_pem;
      break;
    }
    case RotationAction::kIssueServing:
      if (view.cas.empty()) return Internal("no CA to issue the serving certificate from");
      AG_RETURN_IF_ERROR(issue(view.cas.back().pem, view.ca_key, view.cas.back().not_after));
      break;
    case RotationAction::kAddNextCa: {
      AG_ASSIGN_OR_RETURN(PemCertificateAndKey ca,
                          GenerateCa(options_.ca_common_name, start, start + policy.ca_validity));
      bundle.clear();
      const WallTime now = clock_->WallNow();
      for (const auto& old : view.cas) {
        if (old.not_after > now) bundle.push_back(old.pem);
      }
      bundle.push_back(ca.cert_pem);
      ca_key = ca.key_pem;
      break;
    }
    case RotationAction::kDropOldCas:
      if (view.cas.empty()) return Internal("no CA to keep");
      bundle = {view.cas.back().pem};
      break;
  }

  kube::Object secret = view.exists ? view.object : kube::Object::object();
  secret["apiVersion"] = "v1";
  secret["kind"] = "Secret";
  secret["metadata"]["name"] = options_.secret_name;
  secret["metadata"]["namespace"] = options_.secret_namespace;
  secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "allocguard";
  secret["type"] = "kubernetes.io/tls";
  secret["data"][kSecretCertKey] = kube::EncodeBase64(cert);
  secret["data"][kSecretKeyKey] = kube::EncodeBase64(key);
  secret["data"][kSecretCaKey] = kube::EncodeBase64(Concat(bundle));
  secret["data"][kSecretCaKeyKey] = kube::EncodeBase64(ca_key);
  // The Secret lives as long as the webhook configuration that trusts its
  // CA: once that is deleted (helm uninstall), the garbage collector deletes
  // the Secret too. Before the configuration exists the Secret has no owner.
  if (!options_.mutating_webhook_configurations.empty()) {
    const std::string& owner = options_.mutating_webhook_configurations.front();
    auto config = client_->Get(kube::MutatingWebhookConfigurations(), "", owner);
    const std::string uid =
        config.ok() ? kube::StringField(kube::ObjectField(*config, "metadata"), "uid") : "";
    if (!uid.empty()) {
      secret["metadata"]["ownerReferences"] =
          kube::Object::array({{{"apiVersion", "admissionregistration.k8s.io/v1"},
                                {"kind", "MutatingWebhookConfiguration"},
                                {"name", owner},
                                {"uid", uid}}});
    }
  }
  const std::string what = "Secret " + options_.secret_namespace + "/" + options_.secret_name;
  if (!view.exists) {
    auto created = client_->Create(kube::Secrets(), options_.secret_namespace, secret);
    if (!created.ok() && created.error().IsAlreadyExists()) {
      *lost_race = true;
      return Status::Ok();
    }
    return created.status().WithContext("creating " + what);
  }
  // PUT with the resourceVersion read: 409 when another replica wrote first.
  auto updated = client_->Update(kube::Secrets(), secret);
  if (!updated.ok() && updated.error().IsConflict()) {
    *lost_race = true;
    return Status::Ok();
  }
  return updated.status().WithContext("updating " + what);
}

void CertificateManager::Adopt(const SecretView& view) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ != nullptr && current_->cert_chain_pem == view.cert &&
        current_->key_pem == view.key && current_->ca_bundle_pem == view.ca) {
      return;
    }
  }
  auto pair = MakeKeyPair(view.cert, view.key, view.ca);
  if (!pair.ok()) return;  // keep serving the last good pair
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::make_shared<const KeyPair>(std::move(*pair));
}

Status CertificateManager::Tick() {
  if (options_.dns_names.empty() && options_.ip_addresses.empty()) {
    return InvalidArgument("the serving certificate needs at least one DNS name or IP address");
  }
  constexpr int kMaxRounds = 6;
  for (int round = 0; round < kMaxRounds; ++round) {
    AG_ASSIGN_OR_RETURN(SecretView view, ReadSecret());
    const bool writer = !options_.may_write || options_.may_write();
    if (!writer) {
      Adopt(view);
      std::lock_guard<std::mutex> lock(mu_);
      last_decision_ = {RotationAction::kNone, "not the writing replica", clock_->WallNow()};
      return Status::Ok();
    }
    RotationState state = StateOf(view);
    Status sync_status;
    if (!view.cas.empty()) {
      auto published = SyncCaBundle(view.ca);
      if (published.ok()) {
        state.bundle_published_since = *published;
      } else {
        sync_status = published.status();
      }
    }
    RotationDecision decision = DecideRotation(state, options_.policy, clock_->WallNow());
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_decision_ = decision;
    }
    if (decision.action == RotationAction::kNone) {
      Adopt(view);
      return sync_status;
    }
    bool lost_race = false;
    Status applied = Apply(decision.action, view, &lost_race);
    if (!applied.ok()) {
      Adopt(view);
      return applied;
    }
    // Written, or another replica wrote first: read again and re-decide.
  }
  return Internal("certificates still changing after " + std::to_string(kMaxRounds) +
                  " rounds of Secret updates");
}

std::shared_ptr<const KeyPair> CertificateManager::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

RotationDecision CertificateManager::last_decision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_decision_;
}

}  // namespace allocguard::certs
