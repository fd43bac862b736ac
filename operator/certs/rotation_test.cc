#include "operator/certs/rotation.h"

#include <gtest/gtest.h>

namespace allocguard::certs {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr auto kDay = hours(24);
const WallTime kT0 = WallTime() + hours(24 * 365 * 50);  // ~2020

RotationPolicy Policy() {
  RotationPolicy p;
  p.ca_validity = kDay * 300;
  p.serving_validity = kDay * 90;
  p.renew_fraction = 2.0 / 3.0;
  p.backdate = hours(1);
  p.bundle_propagation = minutes(1);
  p.ca_overlap = hours(1);
  return p;
}

// A healthy state at kT0: one CA (valid 300 days from kT0), a serving
// certificate from it (90 days), names right, bundle published an hour ago.
RotationState Healthy() {
  RotationState s;
  s.cas = {{kT0, kT0 + kDay * 300}};
  s.newest_ca_key_valid = true;
  s.serving = Validity{kT0, kT0 + kDay * 90};
  s.serving_issuer = 0;
  s.serving_names_match = true;
  s.bundle_published_since = kT0;
  return s;
}

// In the middle of a CA rotation: old CA (due), new CA just added, serving
// still from the old one.
RotationState NewCaAdded(WallTime added) {
  RotationState s = Healthy();
  s.cas = {{kT0, kT0 + kDay * 300}, {added, added + kDay * 300}};
  s.serving = Validity{added - kDay * 10, added + kDay * 80};
  s.serving_issuer = 0;
  s.bundle_published_since = added;
  return s;
}

struct Case {
  const char* name;
  RotationState state;
  WallTime now;
  RotationAction want;
};

TEST(DecideRotationTest, Table) {
  const WallTime ca_due = kT0 + kDay * 200;  // 2/3 of 300 days
  std::vector<Case> cases;
  cases.push_back({"healthy: nothing to do", Healthy(), kT0 + kDay, RotationAction::kNone});
  {
    RotationState s = Healthy();
    s.cas.clear();
    s.serving.reset();
    s.serving_issuer = -1;
    cases.push_back({"empty Secret: create a CA", s, kT0, RotationAction::kCreateCa});
  }
  {
    RotationState s = Healthy();
    s.newest_ca_key_valid = false;
    cases.push_back({"CA key missing: new CA", s, kT0 + kDay, RotationAction::kCreateCa});
  }
  cases.push_back({"CA expired: new CA", Healthy(), kT0 + kDay * 300, RotationAction::kCreateCa});
  {
    RotationState s = Healthy();
    s.serving.reset();
    s.serving_issuer = -1;
    cases.push_back({"serving missing: issue", s, kT0 + kDay, RotationAction::kIssueServing});
  }
  {
    RotationState s = Healthy();
    s.serving_issuer = -1;
    cases.push_back(
        {"serving from a foreign CA: issue", s, kT0 + kDay, RotationAction::kIssueServing});
  }
  cases.push_back({"serving at 2/3 of its life: renew", Healthy(), kT0 + kDay * 60,
                   RotationAction::kIssueServing});
  cases.push_back({"serving just before 2/3: keep", Healthy(), kT0 + kDay * 60 - seconds(1),
                   RotationAction::kNone});
  {
    RotationState s = Healthy();
    s.serving_names_match = false;
    cases.push_back({"names changed: reissue", s, kT0 + kDay, RotationAction::kIssueServing});
  }
  {
    RotationState s = Healthy();
    s.serving = Validity{ca_due - kDay, ca_due + kDay * 89};
    cases.push_back(
        {"CA at 2/3 of its life: add a successor", s, ca_due, RotationAction::kAddNextCa});
    cases.push_back({"CA just before 2/3: keep", s, ca_due - seconds(1), RotationAction::kNone});
  }
  {
    RotationState s = NewCaAdded(ca_due);
    s.bundle_published_since.reset();
    cases.push_back({"new CA not yet in every webhook configuration: wait", s, ca_due + kDay,
                     RotationAction::kNone});
  }
  cases.push_back({"new CA published, still propagating: wait", NewCaAdded(ca_due),
                   ca_due + seconds(59), RotationAction::kNone});
  cases.push_back({"new CA published and propagated: serving switches", NewCaAdded(ca_due),
                   ca_due + minutes(1), RotationAction::kIssueServing});
  {
    RotationState s = NewCaAdded(ca_due);
    s.bundle_published_since.reset();
    s.serving = Validity{ca_due - kDay * 90, ca_due};
    cases.push_back({"serving expired while waiting: issue at once", s, ca_due + minutes(5),
                     RotationAction::kIssueServing});
  }
  {
    // Switched: serving from the new CA, issued (not_before + backdate) at
    // ca_due + 1 min.
    RotationState s = NewCaAdded(ca_due);
    const WallTime issued = ca_due + minutes(1);
    s.serving = Validity{issued - hours(1), issued - hours(1) + kDay * 90};
    s.serving_issuer = 1;
    cases.push_back({"switched, overlap not over: keep both CAs", s, issued + hours(1) - seconds(1),
                     RotationAction::kNone});
    cases.push_back({"switched, overlap over: drop the old CA", s, issued + hours(1),
                     RotationAction::kDropOldCas});
  }
  for (const auto& c : cases) {
    RotationDecision d = DecideRotation(c.state, Policy(), c.now);
    EXPECT_EQ(RotationActionName(d.action), std::string(RotationActionName(c.want)))
        << c.name << " (reason: " << d.reason << ")";
    EXPECT_FALSE(d.reason.empty()) << c.name;
  }
}

TEST(DecideRotationTest, NextReviewIsTheEarliestDueTime) {
  RotationDecision d = DecideRotation(Healthy(), Policy(), kT0 + kDay);
  ASSERT_EQ(d.action, RotationAction::kNone);
  EXPECT_EQ(d.next_review, kT0 + kDay * 60);  // the serving renewal comes before the CA's
}

TEST(DecideRotationTest, WaitingForPropagationReviewsWhenItEnds) {
  const WallTime added = kT0 + kDay * 200;
  RotationDecision d = DecideRotation(NewCaAdded(added), Policy(), added + seconds(10));
  ASSERT_EQ(d.action, RotationAction::kNone);
  EXPECT_EQ(d.next_review, added + minutes(1));
}

// Walks a whole CA rotation by applying each decision to a model of the
// Secret: at every step the serving certificate's issuer is in the bundle
// the webhook configurations hold, which is what keeps admissions working.
TEST(DecideRotationTest, AFullCaRotationNeverServesAnUntrustedCertificate) {
  const RotationPolicy p = Policy();
  RotationState s = Healthy();
  WallTime now = kT0;
  std::vector<Validity> published = s.cas;  // what the configurations hold
  int steps = 0;
  int ca_rotations = 0;
  while (now < kT0 + kDay * 700 && steps < 1000) {
    ++steps;
    RotationDecision d = DecideRotation(s, p, now);
    const WallTime start = now - p.backdate;
    switch (d.action) {
      case RotationAction::kNone:
        // Configurations catch up with the Secret on the next tick.
        if (published.size() != s.cas.size() ||
            published.back().not_before != s.cas.back().not_before) {
          published = s.cas;
          s.bundle_published_since = now;
        }
        now = std::max(now + minutes(1), std::min(d.next_review, now + kDay));
        continue;
      case RotationAction::kCreateCa:
        FAIL() << "a healthy rotation never starts over: " << d.reason;
      case RotationAction::kIssueServing:
        s.serving = Validity{start, std::min(start + p.serving_validity, s.cas.back().not_after)};
        s.serving_issuer = static_cast<int>(s.cas.size()) - 1;
        break;
      case RotationAction::kAddNextCa:
        ++ca_rotations;
        s.cas.push_back({start, start + p.ca_validity});
        s.bundle_published_since.reset();
        break;
      case RotationAction::kDropOldCas:
        s.cas.erase(s.cas.begin(), s.cas.end() - 1);
        s.serving_issuer = 0;
        s.bundle_published_since.reset();
        break;
    }
    // The issuer of what is served must be trusted by what is published.
    const Validity& issuer = s.cas[static_cast<size_t>(s.serving_issuer)];
    bool trusted = false;
    for (const auto& v : published) trusted |= v.not_before == issuer.not_before;
    EXPECT_TRUE(trusted) << "after " << RotationActionName(d.action) << " at step " << steps;
    EXPECT_LT(now, s.serving->not_after);
  }
  EXPECT_GE(ca_rotations, 2);
}

}  // namespace
}  // namespace allocguard::certs
