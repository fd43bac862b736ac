#include "operator/kube/informer.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "operator/kube/testing/controlplane_support.h"
#include "operator/kube/testing/fake_transport.h"

namespace allocguard::kube {
namespace {

using testing::Eventually;  // kube::testing: every wait here has a deadline

using testing::FakeReply;
using testing::FakeTransport;

Object Cm(const std::string& name, const std::string& rv, const std::string& app = "x") {
  return {
      {"metadata",
       {{"name", name}, {"namespace", "n"}, {"resourceVersion", rv}, {"labels", {{"app", app}}}}}};
}

struct Recorder {
  EventHandlers Handlers() {
    return {[this](const Object& o) { Log("add " + ObjectKey(o)); },
            [this](const Object&, const Object& o) { Log("update " + ObjectKey(o)); },
            [this](const Object& o) { Log("delete " + ObjectKey(o)); }};
  }
  void Log(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(s);
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(log, {});
  }
  std::mutex mu;
  std::vector<std::string> log;
};

TEST(StoreTest, ReplaceEmitsAddsUpdatesAndTheDeletesThatWereMissed) {
  Store store;
  Recorder rec;
  store.SetHandlers(rec.Handlers());
  store.Replace({Cm("a", "1"), Cm("b", "1"), Cm("c", "1")});
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add n/a", "add n/b", "add n/c"}));
  store.Replace({Cm("a", "1"), Cm("b", "2"), Cm("d", "3")});
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"delete n/c", "update n/b", "add n/d"}));
  EXPECT_EQ(store.Keys(), (std::vector<std::string>{"n/a", "n/b", "n/d"}));
}

TEST(StoreTest, IndexesFollowUpdatesAndDeletes) {
  Store store;
  store.AddIndex("app", [](const Object& o) {
    return std::vector<std::string>{o["metadata"]["labels"].value("app", "")};
  });
  store.Upsert(Cm("a", "1", "web"));
  store.Upsert(Cm("b", "1", "web"));
  EXPECT_EQ(store.ByIndex("app", "web").size(), 2u);
  store.Upsert(Cm("a", "2", "db"));
  EXPECT_EQ(store.ByIndex("app", "web").size(), 1u);
  EXPECT_EQ(store.ByIndex("app", "db").size(), 1u);
  EXPECT_TRUE(store.InIndex("app", "db", "n/a"));
  EXPECT_FALSE(store.InIndex("app", "web", "n/a")) << "moved to db";
  EXPECT_TRUE(store.InIndex("app", "web", "n/b"));
  store.Remove(Cm("b", "3", "web"));
  EXPECT_TRUE(store.ByIndex("app", "web").empty());
  EXPECT_FALSE(store.InIndex("app", "web", "n/b"));
  EXPECT_FALSE(store.InIndex("no-such-index", "db", "n/a"));
}

TEST(StoreTest, HandsOutSharedEntriesThatOutliveTheirReplacement) {
  Store store;
  store.AddIndex("app", [](const Object& o) {
    return std::vector<std::string>{o["metadata"]["labels"].value("app", "")};
  });
  store.Upsert(Cm("a", "1", "web"));
  const ObjectRef first = store.Get("n/a");
  ASSERT_NE(first, nullptr);
  // No copies: every reader gets the cached entry itself.
  EXPECT_EQ(store.Get("n/a"), first);
  EXPECT_EQ(store.ByIndex("app", "web").refs().at(0), first);
  EXPECT_EQ(store.List().refs().at(0), first);
  EXPECT_EQ(&store.ByIndex("app", "web")[0], first.get());

  store.Upsert(Cm("a", "2", "db"));
  store.Remove(Cm("a", "3", "db"));
  // A holder keeps reading the version it got.
  EXPECT_EQ(ResourceVersionOf(*first), "1");
  EXPECT_EQ(store.Get("n/a"), nullptr);
  EXPECT_TRUE(store.List().empty());
}

// What a hostile or just unusual object may hold: every JSON type, negative
// and large numbers, non-ASCII and invalid UTF-8, empty containers, keys
// that are not identifiers.
Object Unusual(const std::string& name, const std::string& rv) {
  Object o = Cm(name, rv, "web");
  o["metadata"]["annotations"] = {{"allocguard.io/note", "ünïcødé ✓"}, {"", ""}};
  o["metadata"]["generation"] = 9007199254740993;  // above a double's exact range
  o["spec"] = {{"paused", true},
               {"replicas", -3},
               {"ratio", 0.25},
               {"nothing", nullptr},
               {"empty", Object::object()},
               {"list", Object::array({1, "two", Object::array(), false})},
               {"bytes", std::string("\xff\xfe not UTF-8")},
               {"big", 18446744073709551615ULL}};
  return o;
}

TEST(StoreTest, PackedStoreGivesBackWhatItWasGivenWithEveryType) {
  Store store;
  store.SetPacked(true);
  const Object original = Unusual("a", "1");
  store.Upsert(original);
  const ObjectRef got = store.Get("n/a");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, original);
  EXPECT_EQ(got->dump(-1, ' ', false, Object::error_handler_t::replace),
            original.dump(-1, ' ', false, Object::error_handler_t::replace));
  EXPECT_TRUE((*got)["spec"]["replicas"].is_number_integer());
  EXPECT_EQ((*got)["spec"]["replicas"].get<int64_t>(), -3);
  EXPECT_EQ((*got)["metadata"]["generation"].get<int64_t>(), 9007199254740993);
  EXPECT_TRUE((*got)["spec"]["ratio"].is_number_float());
  // A top-level value that is not an object is kept as it came, too.
  store.Upsert(Object::array({1, 2}));
  EXPECT_EQ(*store.Get(""), Object::array({1, 2}));
}

TEST(StoreTest, PackedStoreEmitsTheSameEventsAndIndexesAsATreeStore) {
  for (bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed" : "trees");
    Store store;
    store.SetPacked(packed);
    Recorder rec;
    store.SetHandlers(rec.Handlers());
    store.AddIndex("app", [](const Object& o) {
      return std::vector<std::string>{o["metadata"]["labels"].value("app", "")};
    });
    store.Replace({Cm("a", "1", "web"), Cm("b", "1", "web"), Cm("c", "1", "db")});
    EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add n/a", "add n/b", "add n/c"}));
    store.Replace({Cm("a", "1", "web"), Cm("b", "2", "db"), Cm("d", "3", "db")});
    EXPECT_EQ(rec.Take(), (std::vector<std::string>{"delete n/c", "update n/b", "add n/d"}));
    std::vector<std::string> db;
    for (const Object& o : store.ByIndex("app", "db")) db.push_back(ObjectKey(o));
    EXPECT_EQ(db, (std::vector<std::string>{"n/b", "n/d"}));
    EXPECT_EQ(store.KeysByIndex("app", "db"), db);
    EXPECT_TRUE(store.KeysByIndex("app", "none").empty());
    store.Upsert(Cm("a", "2", "db"));
    store.Remove(Cm("d", "4", "db"));
    EXPECT_EQ(rec.Take(), (std::vector<std::string>{"update n/a", "delete n/d"}));
    EXPECT_TRUE(store.ByIndex("app", "web").empty());
    const ObjectRefs refs = store.ByIndex("app", "db");
    ASSERT_EQ(refs.size(), 2u);
    // operator[] hands out one object per index for as long as refs lives.
    EXPECT_EQ(&refs[0], &refs[0]);
    EXPECT_EQ(ObjectKey(refs[0]), "n/a");
    EXPECT_EQ(ResourceVersionOf(refs[1]), "2");
    EXPECT_EQ(store.List().Copies().size(), 2u);
  }
}

TEST(StoreTest, PackedEntryReadOutlivesItsReplacement) {
  Store store;
  store.SetPacked(true);
  store.Upsert(Cm("a", "1"));
  const ObjectRef first = store.Get("n/a");
  store.Upsert(Cm("a", "2"));
  store.Remove(Cm("a", "3"));
  EXPECT_EQ(ResourceVersionOf(*first), "1");
  EXPECT_EQ(store.Get("n/a"), nullptr);
}

TEST(CacheEntryTest, PackedEntryIsSmallerThanTheTextOfItsObject) {
  const Object o = Unusual("a", "1");
  const CacheEntryRef packed = CacheEntry::Make(std::make_shared<const Object>(o), true);
  const CacheEntryRef tree = CacheEntry::Make(std::make_shared<const Object>(o), false);
  EXPECT_TRUE(packed->packed());
  EXPECT_FALSE(tree->packed());
  EXPECT_GT(packed->packed_bytes(), 0u);
  EXPECT_LT(packed->packed_bytes(),
            o.dump(-1, ' ', false, Object::error_handler_t::replace).size());
  EXPECT_EQ(*packed->Get(), *tree->Get());
}

std::string ListBody(const std::string& rv, const std::vector<Object>& items) {
  return Object({{"metadata", {{"resourceVersion", rv}}}, {"items", items}}).dump();
}

std::string Event(const std::string& type, const Object& o) {
  return Object({{"type", type}, {"object", o}}).dump() + "\n";
}

std::string PageBody(const std::string& rv, const std::string& cont,
                     const std::vector<Object>& items) {
  return Object({{"metadata", {{"resourceVersion", rv}, {"continue", cont}}}, {"items", items}})
      .dump();
}

FakeReply Expired() {
  return FakeReply::Json(410, R"({"kind":"Status","code":410,"reason":"Expired",)"
                              R"("message":"The provided continue parameter is too old"})");
}

TEST(InformerTest, ListsPageByPageAndTransformsEachPageBeforeAskingForTheNext) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  transport->Queue(FakeReply::Json(200, PageBody("10", "c1", {Cm("a", "5"), Cm("b", "6")})));
  transport->Queue(FakeReply::Json(200, PageBody("10", "", {Cm("c", "7")})));
  // For each item transformed: how many requests the server had seen then.
  std::mutex mu;
  std::map<std::string, size_t> requests_at_transform;
  InformerOptions options{.namespace_ = "n"};
  options.page_size = 2;
  options.transform = [&](Object& o) {
    std::lock_guard<std::mutex> lock(mu);
    requests_at_transform[ObjectKey(o)] = transport->requests().size();
    o["metadata"].erase("labels");
  };
  Informer informer(&client, ConfigMaps(), options);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync());
  informer.Stop();

  EXPECT_EQ(informer.store().Keys(), (std::vector<std::string>{"n/a", "n/b", "n/c"}));
  EXPECT_EQ(informer.last_resource_version(), "10");
  EXPECT_FALSE(informer.store().Get("n/a")->at("metadata").contains("labels"));
  EXPECT_EQ(requests_at_transform,
            (std::map<std::string, size_t>{{"n/a", 1}, {"n/b", 1}, {"n/c", 2}}));
  auto requests = transport->requests();
  ASSERT_GE(requests.size(), 2u);
  EXPECT_NE(requests[0].path.find("limit=2"), std::string::npos) << requests[0].path;
  EXPECT_EQ(requests[0].path.find("continue="), std::string::npos) << requests[0].path;
  EXPECT_NE(requests[1].path.find("continue=c1"), std::string::npos) << requests[1].path;
}

TEST(InformerTest, AnExpiredContinueTokenRestartsTheListWithoutTheOlderPages) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  // b was on the first page of the old snapshot and is gone from the new one.
  transport->Queue(FakeReply::Json(200, PageBody("10", "c1", {Cm("a", "5"), Cm("b", "6")})));
  transport->Queue(Expired());
  transport->Queue(FakeReply::Json(200, PageBody("30", "c2", {Cm("a", "5")})));
  transport->Queue(FakeReply::Json(200, PageBody("30", "", {Cm("c", "29")})));
  InformerOptions options{.namespace_ = "n"};
  options.page_size = 2;
  Informer informer(&client, ConfigMaps(), options);
  Recorder rec;
  informer.store().SetHandlers(rec.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync());
  informer.Stop();

  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add n/a", "add n/c"}));
  EXPECT_EQ(informer.last_resource_version(), "30");
  EXPECT_EQ(informer.lists(), 1);
  auto requests = transport->requests();
  ASSERT_GE(requests.size(), 4u);
  EXPECT_EQ(requests[2].path.find("continue="), std::string::npos) << requests[2].path;
  EXPECT_NE(requests[3].path.find("continue=c2"), std::string::npos) << requests[3].path;
}

TEST(InformerTest, RelistsAfterBackingOffWhenTheRestartedListExpiresToo) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  transport->Queue(FakeReply::Json(200, PageBody("10", "c1", {Cm("a", "5")})));
  transport->Queue(Expired());
  transport->Queue(FakeReply::Json(200, PageBody("20", "c2", {Cm("a", "5")})));
  transport->Queue(Expired());
  transport->Queue(FakeReply::Json(200, PageBody("40", "", {Cm("d", "39")})));
  InformerOptions options{.namespace_ = "n"};
  options.page_size = 1;
  Informer informer(&client, ConfigMaps(), options);
  Recorder rec;
  informer.store().SetHandlers(rec.Handlers());
  const auto start = clock.Now();
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync());
  informer.Stop();

  // Nothing from the expired snapshots reached the store or the handlers.
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add n/d"}));
  EXPECT_EQ(informer.last_resource_version(), "40");
  EXPECT_EQ(informer.lists(), 2);
  EXPECT_NE(informer.last_error().find("Expired"), std::string::npos) << informer.last_error();
  EXPECT_GE(clock.Now() - start, std::chrono::milliseconds(800));
}

void CheckRelistsAfterGoneAndEmitsTheDeletesItMissed(bool packed) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  transport->Queue(FakeReply::Json(200, ListBody("10", {Cm("a", "5"), Cm("b", "6")})));
  // First watch: one change, then the server says our version is too old.
  transport->QueueStream(FakeReply::Json(
      200, Event("MODIFIED", Cm("a", "11")) +
               R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"
               "\n"));
  // Meanwhile b was deleted and c created; the relist shows it.
  transport->Queue(FakeReply::Json(200, ListBody("20", {Cm("a", "11"), Cm("c", "19")})));
  // The second watch stays open until Stop().

  Informer informer(&client, ConfigMaps(), {.namespace_ = "n", .packed = packed});
  Recorder rec;
  informer.store().SetHandlers(rec.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync());
  ASSERT_TRUE(Eventually([&] {
    return informer.lists() >= 2 && informer.last_resource_version() == "20";
  })) << "lists "
      << informer.lists() << ", version " << informer.last_resource_version();
  ASSERT_TRUE(Eventually([&] { return transport->requests().size() >= 4; }))
      << transport->requests().size() << " requests";
  informer.Stop();

  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add n/a", "add n/b", "update n/a", "delete n/b",
                                                  "add n/c"}));
  EXPECT_EQ(informer.store().Keys(), (std::vector<std::string>{"n/a", "n/c"}));
  auto requests = transport->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_NE(requests[1].path.find("resourceVersion=10"), std::string::npos);
  EXPECT_EQ(requests[2].path.find("resourceVersion="), std::string::npos);  // consistent relist
  EXPECT_NE(requests[3].path.find("resourceVersion=20"), std::string::npos);
  EXPECT_EQ(informer.store().packed(), packed);
  EXPECT_EQ((*informer.store().Get("n/a"))["metadata"], Cm("a", "11")["metadata"]);
}

TEST(InformerTest, RelistsAfterGoneAndEmitsTheDeletesItMissed) {
  CheckRelistsAfterGoneAndEmitsTheDeletesItMissed(/*packed=*/false);
}

TEST(InformerTest, PackedStoreRelistsAfterGoneAndEmitsTheDeletesItMissed) {
  CheckRelistsAfterGoneAndEmitsTheDeletesItMissed(/*packed=*/true);
}

TEST(InformerTest, ResumesFromTheLastSeenVersionAfterABrokenStream) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  transport->Queue(FakeReply::Json(200, ListBody("10", {})));
  FakeReply broken = FakeReply::Json(
      200, Event("ADDED", Cm("a", "12")) + Event("BOOKMARK", Cm("", "15")) + R"({"type":"ADD)");
  transport->QueueStream(broken);
  Informer informer(&client, ConfigMaps(), {.namespace_ = "n"});
  informer.Start();
  ASSERT_TRUE(Eventually([&] { return transport->requests().size() >= 3; }))
      << transport->requests().size() << " requests";
  informer.Stop();
  auto requests = transport->requests();
  // No relist: the watch resumes after the bookmark's version.
  EXPECT_EQ(informer.lists(), 1);
  EXPECT_NE(requests[2].path.find("watch=1"), std::string::npos);
  EXPECT_NE(requests[2].path.find("resourceVersion=15"), std::string::npos);
  EXPECT_EQ(informer.store().size(), 1u);
}

TEST(InformerTest, BacksOffWhenTheServerEndsWatchesAtOnce) {
  FakeClock clock;
  auto transport = std::make_shared<FakeTransport>();
  Client client(transport, nullptr, {.clock = &clock});
  transport->Queue(FakeReply::Json(200, ListBody("10", {})));
  for (int i = 0; i < 3; ++i) transport->QueueStream(FakeReply::Json(200, ""));
  auto start = clock.Now();
  Informer informer(&client, ConfigMaps(), {.namespace_ = "n"});
  informer.Start();
  ASSERT_TRUE(Eventually([&] { return transport->requests().size() >= 5; }))
      << transport->requests().size() << " requests";
  informer.Stop();
  // 0.8 s + 1.6 s + 3.2 s of backoff between the four watches, not a busy loop.
  EXPECT_GE(clock.Now() - start, std::chrono::milliseconds(5600));
  EXPECT_EQ(informer.lists(), 1);
}

}  // namespace
}  // namespace allocguard::kube
