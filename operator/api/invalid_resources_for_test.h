#pragma once

// Test data shared by policy_test.cc (the parser must refuse these) and
// crd_controlplane_test.cc (the API server must refuse them at apply): a valid
// AllocatorPolicy and ReplayCanary, and invalid variants of them as JSON merge
// patches, each with the field path the refusal must name.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace allocguard::api {

struct InvalidCaseForTest {
  const char* name;
  const char* patch;  // RFC 7386 merge patch applied to the valid object
  const char* field;  // the error must contain this field path
  // Refused by the API server only: kubectl's strict field validation refuses
  // unknown fields, which the parser ignores (the server prunes them).
  bool server_only = false;
};

inline nlohmann::json ValidPolicyForTest() {
  return nlohmann::json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "invalid"},
    "spec": {
      "selector": {"matchLabels": {"app": "web"}},
      "allocator": {"name": "jemalloc"},
      "limits": {"memory": "2Gi"},
      "canary": {
        "duration": "15m",
        "load": {"port": 8080, "requests": [
          {"name": "a", "path": "/a"}, {"name": "b", "path": "/b"}, {"name": "c", "path": "/c"}]}
      },
      "rollout": {"mode": "Enforce"}
    }})");
}

inline std::vector<InvalidCaseForTest> InvalidPolicyCasesForTest() {
  return {
      {"glibc tunables on jemalloc", R"({"spec":{"allocator":{"glibc":{"arenaMax":2}}}})",
       "spec.allocator.glibc"},
      {"jemalloc tunables on glibc",
       R"({"spec":{"allocator":{"name":"glibc","jemalloc":{"mallocConf":"narenas:1"}}}})",
       "spec.allocator.jemalloc"},
      {"mimalloc tunables on tcmalloc",
       R"({"spec":{"allocator":{"name":"tcmalloc","mimalloc":{"options":{"purge_delay":"0"}}}}})",
       "spec.allocator.mimalloc"},
      {"tcmalloc tunables on jemalloc", R"({"spec":{"allocator":{"tcmalloc":{"releaseRate":2}}}})",
       "spec.allocator.tcmalloc"},
      // The kubelet expands $(VAR) in env values; jemalloc prints a rejected
      // value to the log: a secret would leak.
      {"mallocConf expanding a variable",
       R"j({"spec":{"allocator":{"jemalloc":{"mallocConf":"narenas:$(DB_PASSWORD)"}}}})j",
       "spec.allocator.jemalloc.mallocConf"},
      {"mallocConf with a backtick",
       R"({"spec":{"allocator":{"jemalloc":{"mallocConf":"narenas:`id`"}}}})",
       "spec.allocator.jemalloc.mallocConf"},
      {"mallocConf with a control character",
       R"({"spec":{"allocator":{"jemalloc":{"mallocConf":"narenas:4\u0007"}}}})",
       "spec.allocator.jemalloc.mallocConf"},
      {"a variant's mallocConf expanding a variable",
       R"j({"spec":{"canary":{"variants":[{"name":"je","allocator":{"name":"jemalloc","jemalloc":{"mallocConf":"dirty_decay_ms:$(TOKEN)"}}}]}}})j",
       "spec.canary.variants[0].allocator.jemalloc.mallocConf"},
      {"unknown allocator", R"({"spec":{"allocator":{"name":"hoard"}}})", "spec.allocator.name"},
      {"unknown libc", R"({"spec":{"libc":"uclibc"}})", "spec.libc"},
      {"musl with tcmalloc, which has no musl build",
       R"({"spec":{"libc":"musl","allocator":{"name":"tcmalloc"}}})", "spec.libc"},
      {"musl with a tcmalloc variant",
       R"({"spec":{"libc":"musl","canary":{"variants":[{"name":"tc","allocator":{"name":"tcmalloc"}}]}}})",
       "spec.libc"},
      {"allocator without a name", R"({"spec":{"allocator":{"name":null}}})",
       "spec.allocator.name"},
      {"arenaMax zero", R"({"spec":{"allocator":{"name":"glibc","glibc":{"arenaMax":0}}}})",
       "spec.allocator.glibc.arenaMax"},
      {"mmapThreshold above glibc's maximum",
       R"({"spec":{"allocator":{"name":"glibc","glibc":{"mmapThreshold":"64Mi"}}}})",
       "spec.allocator.glibc.mmapThreshold"},
      {"trimThreshold not a quantity",
       R"({"spec":{"allocator":{"name":"glibc","glibc":{"trimThreshold":"lots"}}}})",
       "spec.allocator.glibc.trimThreshold"},
      {"mallocConf not option:value pairs",
       R"({"spec":{"allocator":{"jemalloc":{"mallocConf":"background_thread=true"}}}})",
       "spec.allocator.jemalloc.mallocConf"},
      {"mimalloc option name",
       R"({"spec":{"allocator":{"name":"mimalloc","mimalloc":{"options":{"Purge Delay":"0"}}}}})",
       "spec.allocator.mimalloc.options"},
      {"tcmalloc releaseRate above 10",
       R"({"spec":{"allocator":{"name":"tcmalloc","tcmalloc":{"releaseRate":11}}}})",
       "spec.allocator.tcmalloc.releaseRate"},
      {"memory limit zero", R"({"spec":{"limits":{"memory":"0"}}})", "spec.limits.memory"},
      {"memory limit with a unit Kubernetes does not know",
       R"({"spec":{"limits":{"memory":"2GB"}}})", "spec.limits.memory"},
      {"negative maxFloorSlopePerHour", R"({"spec":{"limits":{"maxFloorSlopePerHour":"-1Mi"}}})",
       "spec.limits.maxFloorSlopePerHour"},
      {"maxFloorSlopePerHour in exponent notation",
       R"({"spec":{"limits":{"maxFloorSlopePerHour":"5e8"}}})", "spec.limits.maxFloorSlopePerHour"},
      {"canary shorter than a minute", R"({"spec":{"canary":{"duration":"10s"}}})",
       "spec.canary.duration"},
      {"canary duration in words", R"({"spec":{"canary":{"duration":"15 minutes"}}})",
       "spec.canary.duration"},
      {"sampleInterval longer than duration",
       R"({"spec":{"canary":{"duration":"15m","sampleInterval":"20m"}}})",
       "spec.canary.sampleInterval"},
      {"maxDuration shorter than duration",
       R"({"spec":{"canary":{"duration":"20m","maxDuration":"15m"}}})", "spec.canary.maxDuration"},
      {"more inconclusive reruns than allowed", R"({"spec":{"canary":{"inconclusiveReruns":4}}})",
       "spec.canary.inconclusiveReruns"},
      {"negative inconclusive reruns", R"({"spec":{"canary":{"inconclusiveReruns":-1}}})",
       "spec.canary.inconclusiveReruns"},
      {"sampleInterval too short", R"({"spec":{"canary":{"sampleInterval":"10ms"}}})",
       "spec.canary.sampleInterval"},
      {"empty selector", R"({"spec":{"selector":{"matchLabels":null}}})", "spec.selector"},
      {"no selector", R"({"spec":{"selector":null}})", "spec.selector"},
      {"In without values",
       R"({"spec":{"selector":{"matchExpressions":[{"key":"tier","operator":"In"}]}}})",
       "spec.selector.matchExpressions[0].values"},
      {"unknown selector operator",
       R"({"spec":{"selector":{"matchExpressions":[{"key":"tier","operator":"Equals","values":["a"]}]}}})",
       "spec.selector.matchExpressions[0].operator"},
      {"label key with a space", R"({"spec":{"selector":{"matchLabels":{"bad key":"x"}}}})",
       "spec.selector.matchLabels"},
      {"variant name not a DNS label",
       R"({"spec":{"canary":{"variants":[{"name":"Bad_Name","allocator":{"name":"glibc"}}]}}})",
       "spec.canary.variants[0].name"},
      {"variant named candidate",
       R"({"spec":{"canary":{"variants":[{"name":"candidate","allocator":{"name":"glibc"}}]}}})",
       "spec.canary.variants[0].name"},
      {"variant names twice",
       R"({"spec":{"canary":{"variants":[{"name":"x","allocator":{"name":"glibc"}},{"name":"x","allocator":{"name":"mimalloc"}}]}}})",
       "spec.canary.variants[1]"},
      {"variant tunables for another allocator",
       R"({"spec":{"canary":{"variants":[{"name":"je","allocator":{"name":"jemalloc","glibc":{"arenaMax":4}}}]}}})",
       "spec.canary.variants[0].allocator.glibc"},
      {"request weight negative",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"/a"},{"name":"b","path":"/b"},{"name":"c","path":"/c","weight":-1}]}}}})",
       "spec.canary.load.requests[2].weight"},
      {"expected status code 700",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"/a","expect":[700]}]}}}})",
       "spec.canary.load.requests[0].expect[0]"},
      {"rate zero", R"({"spec":{"canary":{"load":{"rate":0}}}})", "spec.canary.load.rate"},
      {"too many workers", R"({"spec":{"canary":{"load":{"workers":2000}}}})",
       "spec.canary.load.workers"},
      {"port above 65535", R"({"spec":{"canary":{"load":{"port":70000}}}})",
       "spec.canary.load.port"},
      {"port zero", R"({"spec":{"canary":{"load":{"port":0}}}})", "spec.canary.load.port"},
      {"request path without a slash",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"render"}]}}}})",
       "spec.canary.load.requests[0].path"},
      {"unknown method",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"/","method":"FETCH"}]}}}})",
       "spec.canary.load.requests[0].method"},
      {"request names twice",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"/a"},{"name":"a","path":"/b"}]}}}})",
       "spec.canary.load.requests"},
      {"unknown arrival", R"({"spec":{"canary":{"load":{"arrival":"bursty"}}}})",
       "spec.canary.load.arrival"},
      {"keySpace zero",
       R"({"spec":{"canary":{"load":{"requests":[{"name":"a","path":"/{key}","keySpace":0}]}}}})",
       "spec.canary.load.requests[0].keySpace"},
      {"lateAfter zero", R"({"spec":{"canary":{"load":{"lateAfter":"0s"}}}})",
       "spec.canary.load.lateAfter"},
      {"ready path without a slash", R"({"spec":{"canary":{"load":{"ready":{"path":"healthz"}}}}})",
       "spec.canary.load.ready.path"},
      {"no requests while Enforce", R"({"spec":{"canary":{"load":{"requests":null}}}})",
       "spec.canary.load.requests"},
      {"productionCPUs zero", R"({"spec":{"canary":{"productionCPUs":0}}})",
       "spec.canary.productionCPUs"},
      {"bakeOff not a boolean", R"({"spec":{"canary":{"bakeOff":"yes"}}})", "spec.canary.bakeOff"},
      {"node selector value", R"({"spec":{"canary":{"nodeSelector":{"pool":"not valid!"}}}})",
       "spec.canary.nodeSelector"},
      {"unknown rollout mode", R"({"spec":{"rollout":{"mode":"Block"}}})", "spec.rollout.mode"},
      {"guard action without threshold",
       R"({"spec":{"guard":{"enabled":true,"action":"Restart"}}})", "spec.guard.threshold"},
      {"guard threshold zero",
       R"({"spec":{"guard":{"enabled":true,"threshold":"0","action":"Backpressure"}}})",
       "spec.guard.threshold"},
      {"guard threshold above the memory limit",
       R"({"spec":{"guard":{"enabled":true,"threshold":"3Gi","action":"Backpressure"}}})",
       "spec.guard.threshold"},
      {"unknown guard action", R"({"spec":{"guard":{"enabled":true,"action":"Kill"}}})",
       "spec.guard.action"},
      {"guard action while disabled",
       R"({"spec":{"guard":{"threshold":"1Gi","action":"Restart"}}})", "spec.guard.action"},
      {"container name not a DNS label", R"({"spec":{"containers":["Web_Server"]}})",
       "spec.containers[0]"},
      {"misspelt field", R"({"spec":{"canary":{"sampleIntervall":"5s"}}})",
       "spec.canary.sampleIntervall", true},
  };
}

inline nlohmann::json ValidCanaryForTest() {
  return nlohmann::json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "ReplayCanary",
    "metadata": {"name": "invalid"},
    "spec": {
      "policyRef": {"name": "web"},
      "target": {"kind": "Deployment", "name": "web"},
      "templateHash": "5d8f7c9b6",
      "template": {"metadata": {"labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "web", "image": "web:2"}]}},
      "candidate": {"allocator": {"name": "jemalloc"}},
      "canary": {"duration": "5m", "load": {"requests": [{"path": "/"}]}},
      "limits": {"memory": "1Gi"}
    }})");
}

inline std::vector<InvalidCaseForTest> InvalidCanaryCasesForTest() {
  return {
      {"no template", R"({"spec":{"template":null}})", "spec.template"},
      {"no candidate", R"({"spec":{"candidate":null}})", "spec.candidate"},
      {"candidate tunables for another allocator",
       R"({"spec":{"candidate":{"allocator":{"glibc":{"arenaMax":2}}}}})",
       "spec.candidate.allocator.glibc"},
      {"no requests", R"({"spec":{"canary":{"load":{"requests":null}}}})",
       "spec.canary.load.requests"},
      {"target kind Pod", R"({"spec":{"target":{"kind":"Pod"}}})", "spec.target.kind"},
      {"sampleInterval not shorter than duration", R"({"spec":{"canary":{"sampleInterval":"5m"}}})",
       "spec.canary.sampleInterval"},
      {"limits memory negative", R"({"spec":{"limits":{"memory":"-1Gi"}}})", "spec.limits.memory"},
  };
}

}  // namespace allocguard::api
