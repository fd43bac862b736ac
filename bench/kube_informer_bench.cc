// kube_informer_bench: prints the Kubernetes client's memory per cached object
// and its list and watch throughput.
//
//   kube_informer_bench [--objects N]      # default 10000 Deployments
//
// With ALLOCGUARD_TEST_KUBECONFIG set (source the env file of
// e2e/cluster/up.sh) it measures against that real kube-apiserver: creates N
// Deployments in a fresh namespace, lists them, caches them in an informer and
// watches a burst of updates. Without it, it measures the informer's store on
// the same objects served by an in-memory fake (memory figures only: the
// list response as a parsed tree, whole and with managedFields left out while
// parsing, and the informer's store).

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>

#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/informer.h"
#include "operator/kube/pruned_parse.h"
#include "operator/kube/testing/fake_transport.h"

namespace allocguard::kube {
namespace {

using Seconds = std::chrono::duration<double>;

double Since(std::chrono::steady_clock::time_point t) {
  return Seconds(std::chrono::steady_clock::now() - t).count();
}

size_t HeapInUse() {
  malloc_trim(0);
  return mallinfo2().uordblks;
}

Object MakeDeployment(const std::string& ns, int i) {
  std::string name = "bench-" + std::to_string(i);
  Object labels = {{"app", name}, {"tier", "backend"}, {"allocguard.io/governed", "true"}};
  Object container = {
      {"name", "server"},
      {"image", "registry.example/team/service:1.4.2"},
      {"args", {"--port=8080", "--workers=4"}},
      {"env", Object::array({{{"name", "MALLOC_ARENA_MAX"}, {"value", "2"}}})},
      {"ports", Object::array({{{"containerPort", 8080}, {"protocol", "TCP"}}})},
      {"resources",
       {{"requests", {{"cpu", "250m"}, {"memory", "256Mi"}}}, {"limits", {{"memory", "512Mi"}}}}}};
  Object pod_template = {{"metadata", {{"labels", labels}}},
                         {"spec", {{"containers", Object::array({container})}}}};
  Object spec = {{"replicas", 2},
                 {"selector", {{"matchLabels", {{"app", name}}}}},
                 {"template", pod_template}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec", spec}};
}

// What the server would add: uid, resourceVersion, generation, timestamps,
// managed fields, defaulted fields. Used for the fake only.
Object AsServerWouldReturn(Object o, int i) {
  o["metadata"]["uid"] = "0b5e1c2a-7d3f-4a8e-9c61-" + std::to_string(100000000000 + i);
  o["metadata"]["resourceVersion"] = std::to_string(1000 + i);
  o["metadata"]["generation"] = 1;
  o["metadata"]["creationTimestamp"] = "2026-11-29T19:00:00Z";
  o["metadata"]["managedFields"] = Object::array(
      {{{"manager", "kube_informer_bench"},
        {"operation", "Update"},
        {"apiVersion", "apps/v1"},
        {"time", "2026-11-29T19:00:00Z"},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:metadata", {{"f:labels", {{".", Object::object()}, {"f:app", Object::object()}}}}},
          {"f:spec", {{"f:replicas", Object::object()}, {"f:template", Object::object()}}}}}}});
  auto& spec = o["spec"];
  spec["strategy"] = {{"type", "RollingUpdate"},
                      {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}};
  spec["revisionHistoryLimit"] = 10;
  spec["progressDeadlineSeconds"] = 600;
  auto& pod = spec["template"]["spec"];
  pod["restartPolicy"] = "Always";
  pod["terminationGracePeriodSeconds"] = 30;
  pod["dnsPolicy"] = "ClusterFirst";
  pod["securityContext"] = Object::object();
  pod["schedulerName"] = "default-scheduler";
  auto& c = pod["containers"][0];
  c["terminationMessagePath"] = "/dev/termination-log";
  c["terminationMessagePolicy"] = "File";
  c["imagePullPolicy"] = "IfNotPresent";
  o["status"] = Object::object();
  return o;
}

int FakeRun(int n) {
  auto transport = std::make_shared<testing::FakeTransport>();
  Object list = {{"metadata", {{"resourceVersion", "99999"}}}, {"items", Object::array()}};
  size_t json_bytes = 0;
  for (int i = 0; i < n; ++i) {
    Object d = AsServerWouldReturn(MakeDeployment("bench", i), i);
    json_bytes += d.dump().size();
    list["items"].push_back(std::move(d));
  }
  std::string body = list.dump();
  list = Object();
  Client client(transport, nullptr);
  std::printf("objects:                  %d Deployments (fake server)\n", n);
  std::printf("JSON size per object:     %.0f bytes\n", static_cast<double>(json_bytes) / n);
  // Before anything is cached, a list response (and each watch event) is a
  // tree while it is read; ParsePruned leaves out, as it reads, what the
  // cache would drop (here managedFields, as StripManagedFields does).
  const MemberFilter no_managed_fields = [](const MemberPath& path) {
    return !(path.size() == 2 && !path[0].element && path[0].key == "metadata" &&
             path[1].key == "managedFields");
  };
  for (bool pruned : {false, true}) {
    size_t before = HeapInUse();
    Object tree = ParsePruned(body, {{"items"}, {{}, true}}, pruned ? no_managed_fields : nullptr);
    size_t after = HeapInUse();
    std::printf("list response as a tree:  %.0f bytes per object (%s)\n",
                static_cast<double>(after - before) / n,
                pruned ? "managedFields left out while parsing" : "parsed whole");
  }
  for (bool packed : {false, true}) {
    for (bool strip : {false, true}) {
      // Before the reply is queued: the transport frees its copy of the body
      // when the informer has read it.
      size_t before = HeapInUse();
      transport->Queue(testing::FakeReply::Json(200, body));
      InformerOptions options{.namespace_ = "bench"};
      if (strip) options.transform = StripManagedFields;
      options.packed = packed;
      Informer informer(&client, Deployments(), options);
      informer.Start();
      informer.WaitForSync();
      size_t after = HeapInUse();
      informer.Stop();
      std::printf("memory per cached object: %.0f bytes (heap in use, informer store%s%s)\n",
                  static_cast<double>(after - before) / informer.store().size(),
                  strip ? ", managedFields stripped" : "", packed ? ", packed" : "");
      // What a reader pays to visit every object (a policy reconcile over
      // its namespace): a decoding each when packed.
      auto t0 = std::chrono::steady_clock::now();
      size_t members = 0;
      for (const Object& o : informer.store().List()) members += o.size();
      std::printf("reading every object:     %.2f us per object (%zu members)\n",
                  Since(t0) * 1e6 / informer.store().size(), members);
    }
  }
  return 0;
}

int RealRun(int n, const std::string& kubeconfig) {
  auto config = LoadKubeconfig({kubeconfig, "", "", ""});
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  auto client_or = Client::Create(*config);
  if (!client_or.ok()) {
    std::fprintf(stderr, "%s\n", client_or.status().ToString().c_str());
    return 1;
  }
  Client& client = **client_or;
  std::string ns = "bench-" + std::to_string(std::random_device{}() % 1000000);
  if (auto r = client.Create(Namespaces(), "", {{"metadata", {{"name", ns}}}}); !r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }

  // Create N Deployments with 4 writers.
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  writers.reserve(4);
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        if (!client.Create(Deployments(), ns, MakeDeployment(ns, i)).ok()) failed++;
      }
    });
  }
  for (auto& t : writers) t.join();
  double create_s = Since(t0);
  std::printf("created:                  %d Deployments in %.1f s (%.0f/s, %d failed)\n", n,
              create_s, n / create_s, failed.load());

  // List throughput: paginated, 500 per page.
  t0 = std::chrono::steady_clock::now();
  auto list = client.List(Deployments(), ns);
  double list_s = Since(t0);
  if (!list.ok()) {
    std::fprintf(stderr, "%s\n", list.status().ToString().c_str());
    return 1;
  }
  size_t bytes = 0;
  for (const auto& o : list->items) bytes += o.dump().size();
  std::printf("list:                     %zu objects in %.2f s (%.0f objects/s, %.1f MB/s)\n",
              list->items.size(), list_s, list->items.size() / list_s, bytes / list_s / 1e6);
  std::printf("JSON size per object:     %.0f bytes\n",
              static_cast<double>(bytes) / list->items.size());
  list = ApiResult<ObjectList>(ObjectList{});

  // Memory of the informer's cache.
  size_t before = HeapInUse();
  Informer informer(&client, Deployments(), {.namespace_ = ns});
  std::atomic<int> updates_seen{0};
  informer.store().SetHandlers(
      {nullptr, [&](const Object&, const Object&) { updates_seen++; }, nullptr});
  t0 = std::chrono::steady_clock::now();
  informer.Start();
  informer.WaitForSync();
  double sync_s = Since(t0);
  size_t after = HeapInUse();
  std::printf("informer sync:            %zu objects in %.2f s\n", informer.store().size(), sync_s);
  std::printf("memory per cached object: %.0f bytes (heap in use, informer store)\n",
              static_cast<double>(after - before) / informer.store().size());

  // Watch throughput: 4 writers patch every Deployment once; time until the
  // informer has seen every change (bound by how fast the server writes).
  int changes = n;
  next = 0;
  t0 = std::chrono::steady_clock::now();
  writers.clear();
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&] {
      for (int i = next++; i < changes; i = next++) {
        (void)client.Patch(Deployments(), ns, "bench-" + std::to_string(i), PatchType::kMerge,
                           {{"metadata", {{"annotations", {{"bench/round", "1"}}}}}});
      }
    });
  }
  for (auto& t : writers) t.join();
  double write_s = Since(t0);
  while (updates_seen.load() < changes && Since(t0) < 300) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double watch_s = Since(t0);
  std::printf(
      "watch:                    %d updates delivered in %.2f s (%.0f events/s; "
      "writes took %.2f s)\n",
      updates_seen.load(), watch_s, updates_seen.load() / watch_s, write_s);
  informer.Stop();

  // Watch streaming alone, not bound by writes: a watch from
  // resourceVersion "0" starts with an ADDED event for every object, served
  // from the apiserver's watch cache.
  t0 = std::chrono::steady_clock::now();
  int streamed = 0;
  auto replay = client.Watch(
      Deployments(), ns, {.resource_version = "0"},
      [&](WatchEventType type, Object&) {
        if (type == WatchEventType::kAdded) ++streamed;
        return streamed < n;
      },
      nullptr);
  double replay_s = Since(t0);
  if (replay.ok()) {
    std::printf("watch stream:             %d events in %.2f s (%.0f events/s)\n", streamed,
                replay_s, streamed / replay_s);
  } else {
    std::printf("watch stream:             not measured: %s\n", replay.error().ToString().c_str());
  }

  {
    size_t before_strip = HeapInUse();
    Informer stripped(&client, Deployments(), {.namespace_ = ns, .transform = StripManagedFields});
    stripped.Start();
    stripped.WaitForSync();
    size_t after_strip = HeapInUse();
    std::printf("memory per cached object: %.0f bytes (managedFields stripped)\n",
                static_cast<double>(after_strip - before_strip) / stripped.store().size());
  }
  (void)client.Delete(Namespaces(), "", ns);
  return 0;
}

}  // namespace
}  // namespace allocguard::kube

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int n = 10000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--objects") == 0) n = std::atoi(argv[i + 1]);
  }
  if (n <= 0) {
    std::fprintf(stderr, "usage: %s [--objects N]\n", argv[0]);
    return 2;
  }
  const char* kubeconfig = std::getenv("ALLOCGUARD_TEST_KUBECONFIG");
  try {
    if (kubeconfig != nullptr && *kubeconfig != '\0') {
      return allocguard::kube::RealRun(n, kubeconfig);
    }
    return allocguard::kube::FakeRun(n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kube_informer_bench: %s\n", e.what());
    return 1;
  }
}
