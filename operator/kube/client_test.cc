#include "operator/kube/client.h"

#include <gtest/gtest.h>

#include "operator/kube/testing/fake_transport.h"

namespace allocguard::kube {
namespace {

using testing::FakeReply;
using testing::FakeTransport;

// ---- LineSplitter -----------------------------------------------------------

std::vector<std::string> SplitInPieces(const std::string& stream, const std::vector<size_t>& cuts) {
  LineSplitter splitter(1 << 20);
  std::vector<std::string> lines;
  size_t start = 0;
  auto feed = [&](std::string_view piece) {
    EXPECT_TRUE(splitter
                    .Feed(piece,
                          [&](std::string_view line) {
                            lines.emplace_back(line);
                            return true;
                          })
                    .ok());
  };
  const std::string_view all = stream;
  for (size_t cut : cuts) {
    feed(all.substr(start, cut - start));
    start = cut;
  }
  feed(all.substr(start));
  return lines;
}

TEST(LineSplitterTest, SameLinesWhereverTheStreamIsCut) {
  const std::string stream =
      "{\"type\":\"ADDED\",\"n\":1}\n{\"type\":\"MODIFIED\",\"n\":2}\n\n{\"type\":\"DELETED\"}\n";
  const std::vector<std::string> want = {R"({"type":"ADDED","n":1})",
                                         R"({"type":"MODIFIED","n":2})", R"({"type":"DELETED"})"};
  // Every single cut and every pair of cuts.
  for (size_t a = 0; a <= stream.size(); ++a) {
    EXPECT_EQ(SplitInPieces(stream, {a}), want) << "cut at " << a;
    for (size_t b = a; b <= stream.size(); ++b) {
      ASSERT_EQ(SplitInPieces(stream, {a, b}), want) << "cuts at " << a << ", " << b;
    }
  }
  // One byte at a time.
  std::vector<size_t> all;
  for (size_t i = 1; i < stream.size(); ++i) all.push_back(i);
  EXPECT_EQ(SplitInPieces(stream, all), want);
}

TEST(LineSplitterTest, KeepsAnUnfinishedLineAsPending) {
  LineSplitter splitter(100);
  int lines = 0;
  ASSERT_TRUE(
      splitter.Feed("{\"a\":1}\n{\"b\"", [&](std::string_view) { return ++lines, true; }).ok());
  EXPECT_EQ(lines, 1);
  EXPECT_EQ(splitter.pending(), 4u);
}

TEST(LineSplitterTest, RejectsALineLongerThanTheLimit) {
  LineSplitter splitter(10);
  auto ignore = [](std::string_view) { return true; };
  EXPECT_TRUE(splitter.Feed("12345", ignore).ok());
  Status s = splitter.Feed("678901234", ignore);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceeds 10 bytes"), std::string::npos);
}

// ---- API errors -----------------------------------------------------------------

TEST(ApiErrorTest, KeepsReasonMessageAndCauses) {
  ApiError e = ParseApiError(422, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
      "message":"ConfigMap \"x\" is invalid","reason":"Invalid","code":422,
      "details":{"name":"x","kind":"ConfigMap","causes":[
        {"reason":"FieldValueInvalid","message":"Invalid value: \"A\"","field":"metadata.name"}]}})");
  EXPECT_EQ(e.code, 422);
  EXPECT_EQ(e.reason, "Invalid");
  EXPECT_EQ(e.message, "ConfigMap \"x\" is invalid");
  ASSERT_EQ(e.causes.size(), 1u);
  EXPECT_EQ(e.causes[0].field, "metadata.name");
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      e.ToString(),
      "Invalid (422): ConfigMap \"x\" is invalid; causes: metadata.name: Invalid value: \"A\"");
}

TEST(ApiErrorTest, ClassifiesConflictsAndAlreadyExists) {
  ApiError conflict = ParseApiError(409, R"({"kind":"Status","reason":"Conflict","code":409,
      "message":"the object has been modified"})");
  EXPECT_TRUE(conflict.IsConflict());
  EXPECT_FALSE(conflict.IsAlreadyExists());
  ApiError exists = ParseApiError(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})");
  EXPECT_TRUE(exists.IsAlreadyExists());
  EXPECT_FALSE(exists.IsConflict());
  EXPECT_TRUE(ParseApiError(410, R"({"kind":"Status","reason":"Expired","code":410})").IsGone());
}

TEST(ApiErrorTest, NonJsonBodyStillGivesAUsableError) {
  ApiError e = ParseApiError(502, "<html>Bad Gateway</html>\n", "7");
  EXPECT_EQ(e.code, 502);
  EXPECT_EQ(e.reason, "InternalError");
  EXPECT_NE(e.message.find("<html>Bad Gateway</html>"), std::string::npos);
  EXPECT_EQ(e.retry_after, std::chrono::seconds(7));
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kUnavailable);
}

TEST(ApiErrorTest, RetryAfterSecondsFromStatusDetails) {
  ApiError e = ParseApiError(429, R"({"kind":"Status","reason":"TooManyRequests","code":429,
      "details":{"retryAfterSeconds":3}})");
  EXPECT_EQ(e.retry_after, std::chrono::seconds(3));
}

// ---- Client against a fake transport -----------------------------------------

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() {
    ClientOptions options;
    options.clock = &clock_;
    client_ = std::make_unique<Client>(transport_, nullptr, options);
  }
  FakeClock clock_;
  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, BuildsPathsForCoreGroupsAndClusterScope) {
  EXPECT_EQ(ConfigMaps().ObjectPath("ns1", "a"), "/api/v1/namespaces/ns1/configmaps/a");
  EXPECT_EQ(Deployments().CollectionPath(""), "/apis/apps/v1/deployments");
  EXPECT_EQ(Namespaces().ObjectPath("ignored", "kube-system"), "/api/v1/namespaces/kube-system");
}

TEST_F(ClientTest, ListFollowsContinueTokens) {
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"10","continue":"c1"},
      "items":[{"metadata":{"name":"a","namespace":"n"}}]})"));
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"10"},
      "items":[{"metadata":{"name":"b","namespace":"n"}}]})"));
  auto list = client_->List(ConfigMaps(), "n", {.page_size = 1});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1]["metadata"]["name"], "b");
  EXPECT_EQ(list->items[0]["kind"], "ConfigMap");
  EXPECT_EQ(list->resource_version, "10");
  auto requests = transport_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[1].path.find("continue=c1"), std::string::npos);
}

TEST_F(ClientTest, ListRestartsOnceWhenTheContinueTokenExpires) {
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"10","continue":"c1"},
      "items":[{"metadata":{"name":"stale","namespace":"n"}}]})"));
  transport_->Queue(FakeReply::Json(410, R"({"kind":"Status","reason":"Expired","code":410})"));
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"20"},
      "items":[{"metadata":{"name":"fresh","namespace":"n"}}]})"));
  auto list = client_->List(ConfigMaps(), "n");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]["metadata"]["name"], "fresh");
  EXPECT_EQ(list->resource_version, "20");
}

TEST_F(ClientTest, ListKeepsItemsThatAreNotObjectsAsTheyAreWithoutThrowing) {
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"10"},
      "items":[7, "x", {"metadata":{"name":"a","namespace":"n"}}]})"));
  auto list = client_->List(ConfigMaps(), "n");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_EQ(list->items[0], 7);
  EXPECT_EQ(list->items[2]["kind"], "ConfigMap");
}

// A filter that drops metadata.managedFields, as the operator's slim caches
// do while they parse.
bool NoManagedFields(const MemberPath& path) {
  return !(path.size() == 2 && path[0].key == "metadata" && path[1].key == "managedFields");
}

TEST_F(ClientTest, ListLeavesOutWhatTheMemberFilterDropsFromEachItem) {
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"resourceVersion":"10"},
      "items":[{"metadata":{"name":"a","namespace":"n","managedFields":[{"manager":"k"}]}},
               {"metadata":{"name":"b","namespace":"n"},"data":{"managedFields":"kept"}}]})"));
  auto list = client_->List(ConfigMaps(), "n", {.member_filter = NoManagedFields});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[0]["metadata"], Object::parse(R"({"name":"a","namespace":"n"})"));
  EXPECT_EQ(list->items[0]["kind"], "ConfigMap");
  EXPECT_EQ(list->items[1]["data"]["managedFields"], "kept");
  EXPECT_EQ(list->resource_version, "10");
}

TEST_F(ClientTest, HonoursRetryAfterOn429) {
  FakeReply throttled = FakeReply::Json(429, R"({"kind":"Status","reason":"TooManyRequests"})");
  throttled.headers.emplace("Retry-After", "4");
  transport_->Queue(throttled);
  transport_->Queue(FakeReply::Json(201, R"({"metadata":{"name":"a"}})"));
  auto before = clock_.Now();
  auto created = client_->Create(ConfigMaps(), "n", {{"metadata", {{"name", "a"}}}});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(clock_.Now() - before, std::chrono::seconds(4));
  EXPECT_EQ(transport_->requests().size(), 2u);
}

TEST_F(ClientTest, RetriesABrokenConnectionForGetButNotForPost) {
  transport_->Queue(FakeReply::Broken());
  transport_->Queue(FakeReply::Json(200, R"({"metadata":{"name":"a"}})"));
  EXPECT_TRUE(client_->Get(ConfigMaps(), "n", "a").ok());

  transport_->Queue(FakeReply::Broken());
  transport_->Queue(FakeReply::Json(201, R"({})"));
  auto created = client_->Create(ConfigMaps(), "n", {{"metadata", {{"name", "a"}}}});
  ASSERT_FALSE(created.ok());
  EXPECT_TRUE(created.error().IsTransport());
  EXPECT_EQ(transport_->requests().size(), 3u);
}

TEST_F(ClientTest, UnreachableServerGivesUpAfterBoundedRetries) {
  for (int i = 0; i < 10; ++i) transport_->Queue(FakeReply::Broken());
  auto got = client_->Get(ConfigMaps(), "n", "a");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.error().message.find("after 4 attempts"), std::string::npos) << got.error().message;
  EXPECT_EQ(transport_->requests().size(), 4u);
}

TEST_F(ClientTest, NonJsonSuccessBodyIsAnErrorNotACrash) {
  transport_->Queue(FakeReply::Json(200, "<html>proxy login</html>"));
  auto got = client_->Get(ConfigMaps(), "n", "a");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().reason, "InvalidResponse");
}

TEST_F(ClientTest, UpdateWithRetryRereadsAfterAConflict) {
  transport_->Queue(FakeReply::Json(
      200, R"({"metadata":{"name":"a","namespace":"n","resourceVersion":"1"},"data":{"n":"1"}})"));
  transport_->Queue(FakeReply::Json(409, R"({"kind":"Status","reason":"Conflict","code":409})"));
  transport_->Queue(FakeReply::Json(
      200, R"({"metadata":{"name":"a","namespace":"n","resourceVersion":"2"},"data":{"n":"5"}})"));
  transport_->Queue(FakeReply::Json(
      200, R"({"metadata":{"name":"a","namespace":"n","resourceVersion":"3"},"data":{"n":"6"}})"));
  auto updated = client_->UpdateWithRetry(ConfigMaps(), "n", "a", [](Object& o) {
    o["data"]["n"] = std::to_string(std::stoi(o["data"]["n"].get<std::string>()) + 1);
    return Status::Ok();
  });
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  auto requests = transport_->requests();
  ASSERT_EQ(requests.size(), 4u);
  // The second PUT carries the value computed from the re-read object.
  EXPECT_EQ(Object::parse(requests[3].body)["data"]["n"], "6");
  EXPECT_EQ(Object::parse(requests[3].body)["metadata"]["resourceVersion"], "2");
}

class CountingTokens final : public TokenSource {
 public:
  Result<std::string> Token(bool force_refresh) override {
    if (force_refresh) ++generation;
    return "token-" + std::to_string(generation);
  }
  int generation = 1;
};

TEST(ClientAuthTest, RefreshesTheTokenOnceAfter401) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  auto tokens = std::make_shared<CountingTokens>();
  Client client(transport, tokens, {.clock = &clock});
  transport->Queue(FakeReply::Json(401, R"({"kind":"Status","reason":"Unauthorized","code":401})"));
  transport->Queue(FakeReply::Json(200, R"({"metadata":{"name":"a"}})"));
  ASSERT_TRUE(client.Get(ConfigMaps(), "n", "a").ok());
  auto requests = transport->requests();
  EXPECT_EQ(requests[0].headers.find("Authorization")->second, "Bearer token-1");
  EXPECT_EQ(requests[1].headers.find("Authorization")->second, "Bearer token-2");

  // A second 401 in a row is the answer, not a loop.
  transport->Queue(FakeReply::Json(401, R"({"kind":"Status","reason":"Unauthorized","code":401})"));
  transport->Queue(FakeReply::Json(401, R"({"kind":"Status","reason":"Unauthorized","code":401})"));
  auto denied = client.Get(ConfigMaps(), "n", "a");
  ASSERT_FALSE(denied.ok());
  EXPECT_TRUE(denied.error().IsUnauthorized());
}

// ---- Watch -------------------------------------------------------------------------

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return Object({{"type", type},
                 {"object",
                  {{"metadata", {{"name", name}, {"namespace", "n"}, {"resourceVersion", rv}}}}}})
             .dump() +
         "\n";
}

TEST_F(ClientTest, WatchDeliversEventsInOrderAcrossArbitraryPieces) {
  std::string stream = Event("ADDED", "a", "1") + Event("MODIFIED", "a", "2") +
                       Event("BOOKMARK", "", "3") + Event("DELETED", "a", "4");
  FakeReply reply;
  for (size_t i = 0; i < stream.size(); i += 7) reply.pieces.push_back(stream.substr(i, 7));
  transport_->QueueStream(reply);
  std::vector<std::string> seen;
  auto result = client_->Watch(
      ConfigMaps(), "n", {.resource_version = "0"},
      [&](WatchEventType t, Object& o) {
        seen.push_back(std::to_string(static_cast<int>(t)) + ":" + ResourceVersionOf(o));
        return true;
      },
      nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"0:1", "1:2", "3:3", "2:4"}));
  std::string path = transport_->requests()[0].path;
  EXPECT_NE(path.find("watch=1"), std::string::npos);
  EXPECT_NE(path.find("allowWatchBookmarks=true"), std::string::npos);
  EXPECT_NE(path.find("resourceVersion=0"), std::string::npos);
}

TEST_F(ClientTest, WatchErrorEventBecomesTheServersStatus) {
  transport_->QueueStream(FakeReply::Json(
      200,
      Event("ADDED", "a", "5") +
          R"json({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 5 (9)"}})json"
          "\n"));
  int events = 0;
  auto result = client_->Watch(
      ConfigMaps(), "n", {}, [&](WatchEventType, Object&) { return ++events, true; }, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().IsGone());
  EXPECT_EQ(result.error().message, "too old resource version: 5 (9)");
  EXPECT_EQ(events, 1);
}

TEST_F(ClientTest, WatchLeavesOutWhatTheMemberFilterDropsButReadsAnErrorWhole) {
  transport_->QueueStream(FakeReply::Json(
      200,
      R"json({"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"5","managedFields":[{"manager":"k"}]}}})json"
      "\n"
      // The filter would drop a Status' metadata.managedFields only; a filter
      // for Pods keeps no `code`, which must not turn a 410 into something else.
      R"json({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old","metadata":{"managedFields":1}}})json"
      "\n"));
  std::vector<Object> objects;
  WatchOptions options;
  options.member_filter = [](const MemberPath& path) {
    return NoManagedFields(path) && !(path.size() == 1 && path[0].key == "code");
  };
  auto result = client_->Watch(
      ConfigMaps(), "n", options,
      [&](WatchEventType, Object& o) {
        objects.push_back(o);
        return true;
      },
      nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().IsGone()) << result.error().ToString();
  EXPECT_EQ(result.error().message, "too old");
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0]["metadata"],
            Object::parse(R"({"name":"a","namespace":"n","resourceVersion":"5"})"));
}

TEST_F(ClientTest, WatchHttp410IsGone) {
  transport_->QueueStream(FakeReply::Json(410, R"({"kind":"Status","reason":"Gone","code":410})"));
  auto result = client_->Watch(
      ConfigMaps(), "n", {}, [](WatchEventType, Object&) { return true; }, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().IsGone());
}

TEST_F(ClientTest, TruncatedWatchStreamIsAnError) {
  std::string ev = Event("ADDED", "a", "1");
  FakeReply reply = FakeReply::Json(200, ev + ev.substr(0, ev.size() / 2));
  transport_->QueueStream(reply);
  int events = 0;
  auto result = client_->Watch(
      ConfigMaps(), "n", {}, [&](WatchEventType, Object&) { return ++events, true; }, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(events, 1);
  EXPECT_NE(result.error().message.find("middle of an event"), std::string::npos);
}

TEST_F(ClientTest, NonJsonWatchLineIsAnErrorNotACrash) {
  transport_->QueueStream(FakeReply::Json(200, "this is not json\n" + Event("ADDED", "a", "1")));
  int events = 0;
  auto result = client_->Watch(
      ConfigMaps(), "n", {}, [&](WatchEventType, Object&) { return ++events, true; }, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(events, 0);
  EXPECT_TRUE(result.error().IsTransport());
}

TEST_F(ClientTest, WatchCarriesA2MiBObject) {
  std::string big(2 << 20, 'x');
  Object obj = {
      {"type", "ADDED"},
      {"object",
       {{"metadata", {{"name", "big"}, {"resourceVersion", "7"}}}, {"data", {{"k", big}}}}}};
  std::string stream = obj.dump() + "\n";
  FakeReply reply;
  for (size_t i = 0; i < stream.size(); i += 4096) reply.pieces.push_back(stream.substr(i, 4096));
  transport_->QueueStream(reply);
  size_t size = 0;
  auto result = client_->Watch(
      ConfigMaps(), "n", {},
      [&](WatchEventType, Object& o) {
        size = o["data"]["k"].get<std::string>().size();
        return true;
      },
      nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(size, big.size());
}

}  // namespace
}  // namespace allocguard::kube
