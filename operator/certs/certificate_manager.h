#pragma once

// Self-managed webhook certificates: a CA and a serving certificate kept in
// two Secrets, rotated as DecideRotation says, with the CA bundle written
// into the webhook configurations that call the server.
//
// The serving Secret (secret_name, type kubernetes.io/tls) holds tls.crt,
// tls.key and ca.crt (the bundle: one CA, or two during a CA rotation,
// oldest first): everything a replica needs to serve, and every replica
// reads it. The CA Secret (ca_secret_name, type Opaque) holds ca.crt (the
// newest CA) and ca.key (its key): only the writing replica reads it, when
// it issues or rotates, so the key that can mint certificates the webhook
// configurations trust is never where the serving pair is read or mounted.
// A serving Secret in the earlier one-Secret layout (with ca.key) is
// migrated by the writer: the CA Secret is written first, then ca.key is
// removed from the serving Secret; the serving pair stays the same
// throughout, so no admission fails. Several replicas may share the
// Secrets: every write is a create or a resourceVersion-guarded update, so a
// replica that lost a race re-reads and adopts the other's fresh certificate
// instead of overwriting it.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "operator/certs/certificate_source.h"
#include "operator/certs/rotation.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"

namespace allocguard::certs {

inline constexpr const char* kSecretCertKey = "tls.crt";
inline constexpr const char* kSecretKeyKey = "tls.key";
inline constexpr const char* kSecretCaKey = "ca.crt";
inline constexpr const char* kSecretCaKeyKey = "ca.key";  // in the CA Secret

struct CertificateManagerOptions {
  std::string secret_namespace;
  std::string secret_name;     // the serving Secret
  std::string ca_secret_name;  // the CA Secret; empty: secret_name + "-ca"
  // Names the serving certificate carries (see ServiceDnsNames); at least one.
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  // Webhook configurations whose every webhook gets the bundle as caBundle.
  std::vector<std::string> mutating_webhook_configurations;
  std::vector<std::string> validating_webhook_configurations;
  RotationPolicy policy;
  std::string ca_common_name = "allocguard-webhook-ca";
  // Whether this replica may write (e.g. it is the leader). Empty: always.
  // A replica that may not write only reads the Secret and serves it.
  std::function<bool()> may_write;
  Clock* clock = nullptr;  // nullptr: the client's clock
};

// "svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local".
std::vector<std::string> ServiceDnsNames(const std::string& service, const std::string& ns);

class CertificateManager final : public CertificateSource {
 public:
  // client must outlive the manager.
  CertificateManager(kube::Client* client, CertificateManagerOptions options);

  // One round, meant to be called periodically (every few seconds to a
  // minute) from one thread: reads the Secret; if this replica may write,
  // brings the webhook configurations' caBundle up to date and creates or
  // rotates the certificates until DecideRotation says kNone; then serves
  // the Secret's pair. Returns the first error; the last good pair stays in
  // service whatever happens.
  Status Tick();

  // The pair from the Secret as last read; nullptr before the first
  // successful Tick that found one. Thread-safe.
  std::shared_ptr<const KeyPair> Current() override;

  // The decision of the last Tick (for status and logs). Thread-safe.
  RotationDecision last_decision() const;

 private:
  struct SecretView;
  Result<SecretView> ReadSecret(bool writer);
  Status WriteCaSecret(const SecretView& view, const std::string& ca_pem, const std::string& ca_key,
                       bool* lost_race);
  const std::string& CaSecretName() const { return ca_secret_name_; }
  kube::Object OwnerReferences();
  // Creates (exists false) or updates `secret` with the owner references;
  // *lost_race when another replica created or wrote it first.
  Status PutSecret(kube::Object secret, bool exists, bool* lost_race);
  RotationState StateOf(const SecretView& view);
  Result<std::optional<WallTime>> SyncCaBundle(const std::string& bundle_pem);
  Status Apply(RotationAction action, const SecretView& view, bool* lost_race);
  void Adopt(const SecretView& view);

  kube::Client* client_;
  CertificateManagerOptions options_;
  std::string ca_secret_name_;
  Clock* clock_;

  // The bundle every webhook configuration was last seen holding, and since
  // when (this process's observation; a restart waits the propagation again).
  std::string published_bundle_;
  WallTime published_since_{};

  mutable std::mutex mu_;
  std::shared_ptr<const KeyPair> current_;
  RotationDecision last_decision_;
};

}  // namespace allocguard::certs
