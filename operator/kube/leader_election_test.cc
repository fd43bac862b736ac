#include "operator/kube/leader_election.h"

#include <gtest/gtest.h>

#include <mutex>

namespace allocguard::kube {
namespace {

// An in-memory API server for one Lease: GET, POST (create) and PUT with
// resourceVersion checks, like the real one.
class LeaseServer final : public Transport {
 public:
  Result<net::HttpResponse> Send(const net::HttpRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    net::HttpResponse res;
    if (req.method == "GET") {
      if (!lease_) return Reply(404, R"({"kind":"Status","reason":"NotFound","code":404})");
      return Reply(200, lease_->dump());
    }
    Object body = Object::parse(req.body);
    if (req.method == "POST") {
      if (lease_) return Reply(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})");
      body["metadata"]["resourceVersion"] = std::to_string(++rv_);
      lease_ = body;
      return Reply(201, lease_->dump());
    }
    if (req.method == "PUT") {
      if (!lease_ || ResourceVersionOf(body) != ResourceVersionOf(*lease_)) {
        return Reply(409, R"({"kind":"Status","reason":"Conflict","code":409})");
      }
      body["metadata"]["resourceVersion"] = std::to_string(++rv_);
      lease_ = body;
      return Reply(200, lease_->dump());
    }
    return Reply(405, "{}");
  }
  Status Stream(const net::HttpRequest&, const net::StreamHandlers&, Canceller*) override {
    return Unavailable("no streams");
  }
  Object lease() {
    std::lock_guard<std::mutex> lock(mu_);
    return lease_.value_or(Object());
  }
  // Another process's write, e.g. with a skewed clock.
  void Overwrite(const Object& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    (*lease_)["spec"] = spec;
    (*lease_)["metadata"]["resourceVersion"] = std::to_string(++rv_);
  }

 private:
  static Result<net::HttpResponse> Reply(int status, std::string body) {
    net::HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
  }
  std::mutex mu_;
  std::optional<Object> lease_;
  int rv_ = 0;
};

struct Candidate {
  Candidate(const std::shared_ptr<LeaseServer>& server, const std::string& id)
      : client(server, nullptr, {.clock = &clock}),
        elector(&client, {.lease_namespace = "ns", .lease_name = "lock", .identity = id}) {}
  FakeClock clock;
  Client client;
  LeaderElector elector;
};

TEST(LeaderElectionTest, AnotherHoldersLeaseExpiresByOurClockFromItsLastChange) {
  auto server = std::make_shared<LeaseServer>();
  Candidate a(server, "a");
  Candidate b(server, "b");
  ASSERT_TRUE(a.elector.TryAcquireOrRenewForTest());
  EXPECT_EQ(server->lease()["spec"]["holderIdentity"], "a");
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());  // b first sees a's record now

  b.clock.Advance(std::chrono::seconds(14));
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
  // a renews: the record changed, so b's 15 s start again.
  a.clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(a.elector.TryAcquireOrRenewForTest());
  b.clock.Advance(std::chrono::seconds(2));
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
  b.clock.Advance(std::chrono::seconds(14));
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
  b.clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(b.elector.TryAcquireOrRenewForTest());  // a silent for 15 s by b's clock
  Object spec = server->lease()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "b");
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_FALSE(a.elector.TryAcquireOrRenewForTest());  // a lost it
}

TEST(LeaderElectionTest, ARenewTimeFromASkewedClockDoesNotExpireTheLeaseEarly) {
  auto server = std::make_shared<LeaseServer>();
  Candidate a(server, "a");
  Candidate b(server, "b");
  ASSERT_TRUE(a.elector.TryAcquireOrRenewForTest());
  // a's clock is a day behind: its renewTime looks ancient to everybody.
  Object spec = server->lease()["spec"];
  spec["renewTime"] = "2000-01-01T00:00:00.000000Z";
  server->Overwrite(spec);
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
  b.clock.Advance(std::chrono::seconds(10));
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
}

TEST(LeaderElectionTest, AReleasedLeaseIsTakenAtOnce) {
  auto server = std::make_shared<LeaseServer>();
  Candidate a(server, "a");
  Candidate b(server, "b");
  ASSERT_TRUE(a.elector.TryAcquireOrRenewForTest());
  EXPECT_FALSE(b.elector.TryAcquireOrRenewForTest());
  Object spec = server->lease()["spec"];
  spec["holderIdentity"] = nullptr;
  server->Overwrite(spec);
  EXPECT_TRUE(b.elector.TryAcquireOrRenewForTest());
}

TEST(LeaderElectionTest, RejectsInconsistentDurations) {
  LeaderElectionConfig c{.lease_namespace = "ns", .lease_name = "l", .identity = "i"};
  EXPECT_TRUE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = std::chrono::seconds(15);
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = std::chrono::seconds(2);
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());  // not > 1.2 x 2 s
}

}  // namespace
}  // namespace allocguard::kube
