#include "operator/certs/certificate_manager.h"

#include <algorithm>
#include <set>

#include "operator/certs/file_certificate_source.h"
#include "operator/certs/x509.h"
#include "operator/common/base64.h"
#include "operator/kube/config.h"
#include "operator/kube/object.h"

namespace allocguard::certs {
namespace {

// A Secret's data field, base64-decoded; "" when absent or malformed.
std::string DecodedField(const kube::Object& secret, const char* key) {
  auto decoded = DecodeBase64(kube::StringField(kube::ObjectField(secret, "data"), key));
  return decoded.ok() ? *decoded : std::string();
}

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

// The CA Secret's keys: the newest CA and its key, and the CA before it with
// its key (so that a serving Secret write that lost a race to another
// replica, after the CA Secret was written, still finds the key of the
// newest CA it does hold).
constexpr const char* kCaSecretPreviousCert = "previous.crt";
constexpr const char* kCaSecretPreviousKey = "previous.key";

// clang-tidy finds a possible exception in an implicit special member of
// this aggregate of strings, vectors and JSON, and names no throw.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct CertificateManager::SecretView {
  bool exists = false;
  kube::Object object;
  std::string cert;
  std::string key;
  std::string ca;
  std::string ca_key;                // of the newest CA in `ca`, from wherever it was found
  std::vector<CertificateInfo> cas;  // parsed ca, oldest first
  bool legacy_ca_key = false;        // the serving Secret still holds ca.key (earlier layout)
  // The CA Secret (read by the writing replica only).
  bool ca_exists = false;
  kube::Object ca_object;
  std::string ca_secret_cert;  // its newest CA
  std::string ca_secret_key;
};

CertificateManager::CertificateManager(kube::Client* client, CertificateManagerOptions options)
    : client_(client),
      options_(std::move(options)),
      ca_secret_name_(options_.ca_secret_name.empty() ? options_.secret_name + "-ca"
                                                      : options_.ca_secret_name),
      clock_(options_.clock != nullptr ? options_.clock : client->clock()) {}

Result<CertificateManager::SecretView> CertificateManager::ReadSecret(bool writer) {
  SecretView view;
  auto got = client_->Get(kube::Secrets(), options_.secret_namespace, options_.secret_name);
  if (!got.ok()) {
    if (got.error().IsNotFound()) return view;
    return got.status().WithContext("reading Secret " + options_.secret_namespace + "/" +
                                    options_.secret_name);
  }
  view.exists = true;
  view.object = std::move(*got);
  view.cert = DecodedField(view.object, kSecretCertKey);
  view.key = DecodedField(view.object, kSecretKeyKey);
  view.ca = DecodedField(view.object, kSecretCaKey);
  const std::string legacy_key = DecodedField(view.object, kSecretCaKeyKey);
  view.legacy_ca_key = !legacy_key.empty();
  if (auto cas = ParseCertificates(view.ca); cas.ok()) view.cas = std::move(*cas);
  if (!writer) return view;  // serving needs no CA key

  // The key of the newest CA of the bundle: from the CA Secret (its newest
  // or previous CA), else from the earlier layout's serving Secret.
  const std::string newest = view.cas.empty() ? "" : view.cas.back().pem;
  auto matching = [&](const std::string& cert_pem, const std::string& key_pem) {
    return !newest.empty() && !key_pem.empty() && KeyMatchesCertificate(newest, key_pem) &&
           KeyMatchesCertificate(cert_pem, key_pem);
  };
  auto ca_got = client_->Get(kube::Secrets(), options_.secret_namespace, CaSecretName());
  if (!ca_got.ok() && !ca_got.error().IsNotFound()) {
    return ca_got.status().WithContext("reading Secret " + options_.secret_namespace + "/" +
                                       CaSecretName());
  }
  if (ca_got.ok()) {
    view.ca_exists = true;
    view.ca_object = std::move(*ca_got);
    auto ca_field = [&](const char* key) { return DecodedField(view.ca_object, key); };
    view.ca_secret_cert = ca_field(kSecretCaKey);
    view.ca_secret_key = ca_field(kSecretCaKeyKey);
    if (matching(view.ca_secret_cert, view.ca_secret_key)) {
      view.ca_key = view.ca_secret_key;
    } else if (matching(ca_field(kCaSecretPreviousCert), ca_field(kCaSecretPreviousKey))) {
      view.ca_key = ca_field(kCaSecretPreviousKey);
    }
  }
  if (view.ca_key.empty() && view.legacy_ca_key && !newest.empty() &&
      KeyMatchesCertificate(newest, legacy_key)) {
    view.ca_key = legacy_key;
  }
  return view;
}

kube::Object CertificateManager::OwnerReferences() {
  // The Secrets live as long as the webhook configuration that trusts their
  // CA: once that is deleted (helm uninstall), the garbage collector deletes
  // them too. Before the configuration exists they have no owner.
  if (options_.mutating_webhook_configurations.empty()) return nullptr;
  const std::string& owner = options_.mutating_webhook_configurations.front();
  auto config = client_->Get(kube::MutatingWebhookConfigurations(), "", owner);
  const std::string uid =
      config.ok() ? kube::StringField(kube::ObjectField(*config, "metadata"), "uid") : "";
  if (uid.empty()) return nullptr;
  return kube::Object::array({{{"apiVersion", "admissionregistration.k8s.io/v1"},
                               {"kind", "MutatingWebhookConfiguration"},
                               {"name", owner},
                               {"uid", uid}}});
}

Status CertificateManager::WriteCaSecret(const SecretView& view, const std::string& ca_pem,
                                         const std::string& ca_key, bool* lost_race) {
  kube::Object secret = view.ca_exists ? view.ca_object : kube::Object::object();
  secret["apiVersion"] = "v1";
  secret["kind"] = "Secret";
  secret["metadata"]["name"] = CaSecretName();
  secret["metadata"]["namespace"] = options_.secret_namespace;
  secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "allocguard";
  secret["type"] = "Opaque";
  kube::Object data = kube::Object::object();
  data[kSecretCaKey] = EncodeBase64(ca_pem);
  data[kSecretCaKeyKey] = EncodeBase64(ca_key);
  if (!view.ca_secret_cert.empty() && view.ca_secret_cert != ca_pem) {
    data[kCaSecretPreviousCert] = EncodeBase64(view.ca_secret_cert);
    data[kCaSecretPreviousKey] = EncodeBase64(view.ca_secret_key);
  } else if (view.ca_exists) {
    const kube::Object& old = kube::ObjectField(view.ca_object, "data");
    for (const char* k : {kCaSecretPreviousCert, kCaSecretPreviousKey}) {
      if (old.is_object() && old.contains(k)) data[k] = old[k];
    }
  }
  secret["data"] = std::move(data);
  return PutSecret(std::move(secret), view.ca_exists, lost_race);
}

Status CertificateManager::PutSecret(kube::Object secret, bool exists, bool* lost_race) {
  if (kube::Object owners = OwnerReferences(); !owners.is_null()) {
    secret["metadata"]["ownerReferences"] = std::move(owners);
  }
  const std::string what =
      "Secret " + options_.secret_namespace + "/" + kube::StringField(secret["metadata"], "name");
  if (!exists) {
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
  const std::string encoded = EncodeBase64(bundle_pem);
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
  std::string cert = view.cert;
  std::string key = view.key;
  std::string ca_key = view.ca_key;
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
      // Nothing to rotate; what remains is moving an earlier layout's (or a
      // lost) CA key into the CA Secret (below).
      if (!view.legacy_ca_key && view.ca_exists && view.ca_secret_key == ca_key) {
        return Status::Ok();
      }
      break;
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

  // The CA Secret first: a serving Secret never names a CA whose key is not
  // kept. (A crash between the two writes leaves the CA Secret one CA ahead;
  // its previous.* keys still hold the key of the serving Secret's newest.)
  if (bundle.empty()) return Internal("no CA to keep");
  if (!view.ca_exists || view.ca_secret_cert != bundle.back() || view.ca_secret_key != ca_key) {
    AG_RETURN_IF_ERROR(WriteCaSecret(view, bundle.back(), ca_key, lost_race));
    if (*lost_race) return Status::Ok();
  }
  kube::Object secret = view.exists ? view.object : kube::Object::object();
  secret["apiVersion"] = "v1";
  secret["kind"] = "Secret";
  secret["metadata"]["name"] = options_.secret_name;
  secret["metadata"]["namespace"] = options_.secret_namespace;
  secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "allocguard";
  secret["type"] = "kubernetes.io/tls";
  secret["data"][kSecretCertKey] = EncodeBase64(cert);
  secret["data"][kSecretKeyKey] = EncodeBase64(key);
  secret["data"][kSecretCaKey] = EncodeBase64(Concat(bundle));
  secret["data"].erase(kSecretCaKeyKey);  // the CA key lives in the CA Secret only
  return PutSecret(std::move(secret), view.exists, lost_race);
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
    const bool writer = !options_.may_write || options_.may_write();
    AG_ASSIGN_OR_RETURN(SecretView view, ReadSecret(writer));
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
    const bool migrate =
        view.exists && !view.cas.empty() && !view.ca_key.empty() &&
        (view.legacy_ca_key || !view.ca_exists || view.ca_secret_key != view.ca_key);
    if (decision.action == RotationAction::kNone && !migrate) {
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
