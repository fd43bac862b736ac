#include "operator/certs/rotation.h"

#include <algorithm>

namespace allocguard::certs {

const char* RotationActionName(RotationAction action) {
  switch (action) {
    case RotationAction::kNone:
      return "None";
    case RotationAction::kCreateCa:
      return "CreateCA";
    case RotationAction::kIssueServing:
      return "IssueServing";
    case RotationAction::kAddNextCa:
      return "AddNextCA";
    case RotationAction::kDropOldCas:
      return "DropOldCAs";
  }
  return "?";
}

WallTime RenewalTime(const Validity& v, const RotationPolicy& policy) {
  auto lifetime = v.not_after - v.not_before;
  return v.not_before + std::chrono::duration_cast<WallTime::duration>(
                            lifetime * std::clamp(policy.renew_fraction, 0.0, 1.0));
}

RotationDecision DecideRotation(const RotationState& state, const RotationPolicy& policy,
                                WallTime now) {
  auto act = [](RotationAction a, std::string why) {
    return RotationDecision{a, std::move(why), WallTime()};
  };
  // 1. A usable CA: present, with its key, not expired.
  if (state.cas.empty()) return act(RotationAction::kCreateCa, "no CA certificate");
  if (!state.newest_ca_key_valid) {
    return act(RotationAction::kCreateCa, "the CA key is missing or does not match the CA");
  }
  const Validity& newest = state.cas.back();
  const int newest_index = static_cast<int>(state.cas.size()) - 1;
  if (now >= newest.not_after) return act(RotationAction::kCreateCa, "the CA has expired");

  // 2. A serving certificate that works at all. Nothing to wait for: the
  // current one fails every handshake anyway.
  if (!state.serving) {
    return act(RotationAction::kIssueServing, "no serving certificate, or its key does not match");
  }
  if (state.serving_issuer < 0) {
    return act(RotationAction::kIssueServing,
               "the serving certificate is not signed by a CA in "
               "the bundle");
  }
  if (now >= state.serving->not_after) {
    return act(RotationAction::kIssueServing, "the serving certificate has expired");
  }

  // 3. The CA is due: a successor joins the bundle first.
  WallTime ca_renewal = RenewalTime(newest, policy);
  if (now >= ca_renewal) return act(RotationAction::kAddNextCa, "the CA is due for renewal");

  // 4. The serving certificate moves to the newest CA once clients trust it.
  if (state.serving_issuer != newest_index) {
    if (state.bundle_published_since) {
      WallTime ready = *state.bundle_published_since + policy.bundle_propagation;
      if (now >= ready) {
        return act(RotationAction::kIssueServing,
                   "the new CA has reached every webhook configuration");
      }
      return {RotationAction::kNone, "waiting for the new CA bundle to propagate", ready};
    }
    return {RotationAction::kNone,
            "waiting for every webhook configuration to hold the new CA bundle", now};
  }

  // 5. Renewal and name changes of the serving certificate.
  WallTime serving_renewal = RenewalTime(*state.serving, policy);
  if (now >= serving_renewal) {
    return act(RotationAction::kIssueServing, "the serving certificate is due for renewal");
  }
  if (!state.serving_names_match) {
    return act(RotationAction::kIssueServing, "the serving certificate names other hosts");
  }

  // 6. Old CAs leave once nobody can still be presenting a certificate of
  // theirs.
  WallTime next = std::min(ca_renewal, serving_renewal);
  if (state.cas.size() > 1) {
    WallTime drop = state.serving->not_before + policy.backdate + policy.ca_overlap;
    if (now >= drop) {
      return act(RotationAction::kDropOldCas, "the serving certificate moved to the new CA");
    }
    next = std::min(next, drop);
  }
  return {RotationAction::kNone, "certificates are current", next};
}

}  // namespace allocguard::certs
