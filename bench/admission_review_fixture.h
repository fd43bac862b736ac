#pragma once

// What the webhook benchmarks send and answer: a realistic Pod CREATE
// AdmissionReview and the real pod-injection handler (or a stand-in when the
// build has no operator/admission).

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/webhook/admission_server.h"

#if defined(AG_BENCH_POD_INJECTION) && __has_include("operator/admission/pod_injection.h")
#include "operator/admission/pod_injection.h"
#define AG_BENCH_REAL_HANDLER 1
#endif

namespace allocguard::bench {

using nlohmann::json;

// A Pod as a ReplicaSet creates it: two containers, probes, resources, env,
// volumes, tolerations, owner reference (about 4 KB of JSON).
inline json Pod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "generateName": "web-7d9f8c6b5-", "namespace": "shop",
      "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": "frontend"},
      "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                           "uid": "3f1c2b9e-6a77-4f0e-9d7b-0c6f3c1d2e4a", "controller": true,
                           "blockOwnerDeletion": true}]
    },
    "spec": {
      "containers": [
        {"name": "web", "image": "registry.example.com/shop/web:1.42.0",
         "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
         "env": [{"name": "LOG_LEVEL", "value": "info"},
                 {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                 {"name": "DB_URL", "valueFrom": {"secretKeyRef": {"name": "web-db", "key": "url"}}}],
         "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                       "limits": {"cpu": "1", "memory": "1Gi"}},
         "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
         "livenessProbe": {"httpGet": {"path": "/live", "port": "http"}, "initialDelaySeconds": 10},
         "volumeMounts": [{"name": "config", "mountPath": "/etc/web", "readOnly": true},
                          {"name": "kube-api-access-x1", "readOnly": true,
                           "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
         "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent",
         "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}},
        {"name": "envoy", "image": "envoyproxy/envoy:v1.30.1",
         "args": ["-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"],
         "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
      ],
      "volumes": [
        {"name": "config", "configMap": {"name": "web-config"}},
        {"name": "kube-api-access-x1", "projected": {"sources": [
          {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
          {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
        ]}}
      ],
      "serviceAccountName": "web", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
      "dnsPolicy": "ClusterFirst",
      "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                       "effect": "NoExecute", "tolerationSeconds": 300}]
    },
    "status": {}
  })");
}

inline std::string PodCreateReview(int i) {
  json pod = Pod();
  char uid[64];
  std::snprintf(uid, sizeof uid, "6c1f3a2b-%04x-4d5e-8f90-%012d", i & 0xffff, i);
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", uid},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"operation", "CREATE"},
                   {"namespace", "shop"},
                   {"userInfo",
                    {{"username", "system:serviceaccount:kube-system:replicaset-controller"},
                     {"uid", "a7b6c5d4-0000-4000-8000-000000000001"},
                     {"groups",
                      {"system:serviceaccounts", "system:serviceaccounts:kube-system",
                       "system:authenticated"}}}},
                   {"object", pod},
                   {"oldObject", nullptr},
                   {"dryRun", false},
                   {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
  return review.dump();
}

#ifdef AG_BENCH_REAL_HANDLER
constexpr bool kHaveInjection = true;
inline webhook::AdmissionHandler MakeInjectionHandler() {
  std::vector<api::AllocatorPolicy> policies;
  for (const char* app : {"web", "checkout", "search"}) {
    api::AllocatorPolicy p;
    p.ns = "shop";
    p.name = std::string(app) + "-jemalloc";
    p.uid = std::string("uid-") + app;
    p.generation = 3;
    p.spec.selector.match_labels = {{"app", app}};
    p.spec.containers = {std::string(app) == "web" ? "web" : app};
    p.spec.allocator.name = api::Allocator::kJemalloc;
    p.spec.allocator.jemalloc_malloc_conf = "background_thread:true,dirty_decay_ms:1000";
    p.spec.guard.enabled = true;
    p.spec.guard.threshold_bytes = int64_t{1536} << 20;
    policies.push_back(p);
  }
  return [policies](const webhook::AdmissionRequest& request) {
    admission::PodInjectionInput input;
    input.pod = request.object;
    input.ns = request.namespace_;
    input.policies = policies;
    input.operator_namespace = "allocguard-system";
    input.options.image = "ghcr.io/allocguard/allocguard:0.1.0";
    admission::PodInjectionDecision decision = admission::DecidePodInjection(input);
    webhook::AdmissionResponse response;
    response.patch = std::move(decision.patch);
    response.audit_annotations = std::move(decision.annotations);
    response.warnings = std::move(decision.conflicts);
    return response;
  };
}
#else
constexpr bool kHaveInjection = false;
inline webhook::AdmissionHandler MakeInjectionHandler() { return nullptr; }
#endif

// The stand-in: the review is parsed and answered, with no patch.
inline webhook::AdmissionHandler MakeEmptyHandler() {
  return [](const webhook::AdmissionRequest&) { return webhook::AdmissionResponse::Allow(); };
}

}  // namespace allocguard::bench
