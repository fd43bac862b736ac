#pragma once

// When the self-managed webhook certificates must change: a pure decision
// over the certificates' facts, tested by tables (the shape of cert-manager's
// trigger policies). The CertificateManager gathers the state, calls
// DecideRotation and applies the one action it returns, then decides again.
//
// CA rotation never fails an admission: a new CA is first added beside the
// old one in the bundle; the serving certificate switches to the new CA only
// once every webhook configuration has held that bundle for
// bundle_propagation; the old CA is dropped only ca_overlap after the switch,
// so replicas and API servers still on the old serving certificate keep
// verifying.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace allocguard::certs {

using WallTime = std::chrono::system_clock::time_point;

struct Validity {
  WallTime not_before;
  WallTime not_after;
};

struct RotationState {
  // The CAs in the bundle, oldest first; empty when absent or unparseable.
  std::vector<Validity> cas;
  // The stored CA key belongs to the newest CA (cas.back()).
  bool newest_ca_key_valid = false;
  // The serving certificate; nullopt when absent, unparseable or its key
  // does not match.
  std::optional<Validity> serving;
  // Index into cas of the CA that signed the serving certificate; -1 none.
  int serving_issuer = -1;
  // The serving certificate names exactly the desired DNS names and IPs.
  bool serving_names_match = false;
  // Since when every webhook configuration holds exactly this bundle;
  // nullopt when some does not (yet).
  std::optional<WallTime> bundle_published_since;
};

struct RotationPolicy {
  std::chrono::seconds ca_validity = std::chrono::hours(24 * 365 * 3);
  std::chrono::seconds serving_validity = std::chrono::hours(24 * 90);
  // A certificate is renewed once this fraction of its lifetime has passed.
  double renew_fraction = 2.0 / 3.0;
  // New certificates start this long before "now", for clock skew between
  // the operator and the API servers.
  std::chrono::seconds backdate = std::chrono::hours(1);
  // How long a new bundle must have been in every webhook configuration
  // before the serving certificate switches to the new CA.
  std::chrono::seconds bundle_propagation = std::chrono::minutes(1);
  // How long an old CA stays in the bundle after the serving certificate
  // switched away from it.
  std::chrono::seconds ca_overlap = std::chrono::hours(1);
};

enum class RotationAction {
  kNone,
  kCreateCa,      // new CA alone in the bundle, and a serving certificate from it
  kIssueServing,  // new serving certificate from the newest CA
  kAddNextCa,     // append a new CA to the bundle; serving stays as is
  kDropOldCas,    // bundle := the newest CA only
};

const char* RotationActionName(RotationAction action);

struct RotationDecision {
  RotationAction action = RotationAction::kNone;
  std::string reason;  // for logs and events
  // With kNone: when the decision would next change if nothing else does.
  WallTime next_review;
};

// When a certificate with this validity is due for renewal.
WallTime RenewalTime(const Validity& v, const RotationPolicy& policy);

RotationDecision DecideRotation(const RotationState& state, const RotationPolicy& policy,
                                WallTime now);

}  // namespace allocguard::certs
