#pragma once

// Self-managed webhook certificates: a CA and a serving certificate kept in a
// Secret, rotated as DecideRotation says, with the CA bundle written into the
// webhook configurations that call the server.
//
// The Secret (type kubernetes.io/tls) holds tls.crt, tls.key, ca.crt (the
// bundle: one CA, or two during a CA rotation, oldest first) and ca.key (the
// key of the newest CA). Several operator replicas may share it: every write
// is a create or a resourceVersion-guarded update, so a replica that lost a
// race re-reads and adopts the other's fresh certificate instead of
// overwriting it.

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
inline constexpr const char* kSecretCaKeyKey = "ca.key";

struct CertificateManagerOptions {
  std::string secret_namespace;
  std::string secret_name;
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
  Result<SecretView> ReadSecret();
  RotationState StateOf(const SecretView& view);
  Result<std::optional<WallTime>> SyncCaBundle(const std::string& bundle_pem);
  Status Apply(RotationAction action, const SecretView& view, bool* lost_race);
  void Adopt(const SecretView& view);

  kube::Client* client_;
  CertificateManagerOptions options_;
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
