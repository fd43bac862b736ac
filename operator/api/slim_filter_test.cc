// The slim caches' member filters (KeptBySlimDeployment, KeptBySlimStatefulSet,
// KeptBySlimPod): an object parsed with its filter, then slimmed as the
// operator's cache does, is the object parsed whole and slimmed.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "operator/api/workload_kinds.h"
#include "operator/api/workloads.h"
#include "operator/kube/informer.h"
#include "operator/kube/pruned_parse.h"

namespace allocguard::api {
namespace {

using nlohmann::json;

// As the manager's cache transform: managedFields dropped, then slimmed.
json Cached(json object, const std::function<void(json&)>& slim) {
  kube::StripManagedFields(object);
  slim(object);
  return object;
}

// Parsed whole and with `filter`, each then cached; both must be the same,
// and the filter must have dropped something (else the test proves nothing).
void ExpectSameSlimObject(const std::string& text, const MemberFilter& filter,
                          const std::function<void(json&)>& slim) {
  const json whole = json::parse(text);
  const json pruned = kube::ParsePruned(text, {}, filter);
  ASSERT_FALSE(pruned.is_discarded());
  EXPECT_LT(pruned.dump().size(), whole.dump().size()) << "the filter dropped nothing";
  EXPECT_EQ(Cached(pruned, slim), Cached(whole, slim)) << text;
  // The same inside a watch event, as the informer parses it.
  const json event =
      kube::ParsePruned(R"({"type":"ADDED","object":)" + text + "}", {{"object"}}, filter);
  EXPECT_EQ(Cached(event.at("object"), slim), Cached(whole, slim));
}

// managedFields as kubectl create and the controller-manager leave them.
constexpr char kManagedFields[] = R"([
  {"manager":"kubectl-create","operation":"Update","apiVersion":"apps/v1",
   "time":"2026-12-05T12:00:00Z","fieldsType":"FieldsV1",
   "fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}},
     "f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},
       "f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},
       "f:type":{}},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},
       "f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{".":{},"f:image":{},"f:name":{},
       "f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},
       "f:containerPort":{},"f:name":{},"f:protocol":{}}}}}}}}}},
  {"manager":"kube-controller-manager","operation":"Update","apiVersion":"apps/v1",
   "time":"2026-12-05T12:00:05Z","fieldsType":"FieldsV1","subresource":"status",
   "fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}},
     "f:status":{"f:availableReplicas":{},"f:conditions":{},"f:observedGeneration":{}}}}])";

std::string PodTemplate(const std::string& app) {
  return R"({"metadata":{"labels":{"app":")" + app +
         R"("},"annotations":{"allocguard.io/allocator":"jemalloc","prometheus.io/scrape":"true"}},
    "spec":{"containers":[{"name":"server","image":"registry.example/shop/web:1.4.2",
      "args":["--port=8080"],"env":[{"name":"MODE","value":"production"}],
      "ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],
      "resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"512Mi"}},
      "readinessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"},
        "timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},
      "terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",
      "imagePullPolicy":"IfNotPresent"}],
      "restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
      "securityContext":{},"schedulerName":"default-scheduler"}})";
}

std::string Metadata(const std::string& name, const std::string& extra = "") {
  return R"({"name":")" + name +
         R"(","namespace":"shop","uid":"4f3c2b1a-0000-4000-8000-000000000001",
    "resourceVersion":"81234","generation":3,"creationTimestamp":"2026-12-05T12:00:00Z",
    "labels":{"app":"web","tier":"backend"},
    "annotations":{"deployment.kubernetes.io/revision":"3","allocguard.io/held-candidate":"5d8f"},)" +
         extra + R"("managedFields":)" + kManagedFields + "}";
}

TEST(SlimFilterTest, DeploymentAsTheServerSendsIt) {
  const std::string deployment = R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":)" +
                                 Metadata("web") + R"(,
    "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":)" +
                                 PodTemplate("web") + R"(,
      "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},
      "revisionHistoryLimit":10,"progressDeadlineSeconds":600,"paused":true},
    "status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"readyReplicas":2,
      "availableReplicas":2,"conditions":[{"type":"Available","status":"True",
      "lastUpdateTime":"2026-12-05T12:00:05Z","reason":"MinimumReplicasAvailable",
      "message":"Deployment has minimum availability."}]}})";
  ExpectSameSlimObject(deployment, KeptBySlimDeployment, SlimDeployment);
}

TEST(SlimFilterTest, DaemonSetAsTheServerSendsIt) {
  const std::string daemonset = R"({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":)" +
                                Metadata("agent") + R"(,
    "spec":{"selector":{"matchLabels":{"app":"agent"}},"template":)" +
                                PodTemplate("agent") + R"(,
      "updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}},
      "revisionHistoryLimit":10},
    "status":{"currentNumberScheduled":3,"numberMisscheduled":0,"desiredNumberScheduled":3,
      "numberReady":3,"observedGeneration":3}})";
  ExpectSameSlimObject(daemonset, KeptBySlimDeployment, SlimDeployment);
}

TEST(SlimFilterTest, StatefulSetKeepsItsClaims) {
  const std::string statefulset = R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":)" +
                                  Metadata("db") + R"(,
    "spec":{"replicas":3,"serviceName":"db","selector":{"matchLabels":{"app":"db"}},
      "template":)" + PodTemplate("db") +
                                  R"(,
      "volumeClaimTemplates":[{"apiVersion":"v1","kind":"PersistentVolumeClaim",
        "metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],
        "resources":{"requests":{"storage":"10Gi"}},"volumeMode":"Filesystem"},
        "status":{"phase":"Pending"}}],
      "podManagementPolicy":"OrderedReady","updateStrategy":{"type":"RollingUpdate",
      "rollingUpdate":{"partition":0}},"revisionHistoryLimit":10,
      "persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Retain","whenScaled":"Retain"}},
    "status":{"observedGeneration":3,"replicas":3,"readyReplicas":3,"currentReplicas":3,
      "updatedReplicas":3,"currentRevision":"db-6c5f","updateRevision":"db-6c5f",
      "collisionCount":0,"availableReplicas":3}})";
  ExpectSameSlimObject(statefulset, KeptBySlimStatefulSet, SlimStatefulSet);
  // The claims reach the slim object (the filter kept what SlimStatefulSet reads).
  json cached = Cached(kube::ParsePruned(statefulset, {}, KeptBySlimStatefulSet), SlimStatefulSet);
  EXPECT_EQ(cached["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "10Gi");
}

TEST(SlimFilterTest, PodWithManagedFieldsAndAStatus) {
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":)" +
                          Metadata("web-5d8f-abcde",
                                   R"("generateName":"web-5d8f-",
      "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-5d8f",
        "uid":"4f3c2b1a-0000-4000-8000-000000000002","controller":true,"blockOwnerDeletion":true}],)") +
                          R"(,
    "spec":{"volumes":[{"name":"kube-api-access","projected":{"sources":[{"serviceAccountToken":
      {"expirationSeconds":3607,"path":"token"}}],"defaultMode":420}}],
      "containers":[{"name":"server","image":"registry.example/shop/web:1.4.2",
        "env":[{"name":"LD_PRELOAD","value":"/allocguard/lib/libjemalloc.so"}],
        "volumeMounts":[{"name":"kube-api-access","readOnly":true,
        "mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}]}],
      "nodeName":"node-1","serviceAccountName":"default","priority":0,
      "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",
        "effect":"NoExecute","tolerationSeconds":300}]},
    "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastProbeTime":null,
      "lastTransitionTime":"2026-12-05T12:00:09Z"},{"type":"PodScheduled","status":"True",
      "lastTransitionTime":"2026-12-05T12:00:01Z","reason":"x","message":"y"}],
      "hostIP":"10.0.0.4","hostIPs":[{"ip":"10.0.0.4"}],"podIP":"10.244.1.7",
      "podIPs":[{"ip":"10.244.1.7"}],"startTime":"2026-12-05T12:00:01Z","qosClass":"Burstable",
      "initContainerStatuses":[{"name":"install-allocator","ready":true,"restartCount":0,
        "image":"allocguard:1","imageID":"sha256:aa","started":false,
        "state":{"terminated":{"exitCode":0,"reason":"Completed",
        "startedAt":"2026-12-05T12:00:02Z","finishedAt":"2026-12-05T12:00:03Z"}},"lastState":{}}],
      "containerStatuses":[{"name":"server","ready":true,"restartCount":1,
        "image":"registry.example/shop/web:1.4.2","imageID":"registry.example/shop/web@sha256:bb",
        "containerID":"containerd://cc","started":true,
        "state":{"running":{"startedAt":"2026-12-05T12:00:08Z"}},
        "lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled",
        "startedAt":"2026-12-05T12:00:04Z","finishedAt":"2026-12-05T12:00:07Z"}}}]}})";
  ExpectSameSlimObject(pod, KeptBySlimPod, SlimPod);
}

// Members of unexpected types: the filters drop only what the slim transforms
// drop, whatever the server (or whoever wrote the object) put there.
TEST(SlimFilterTest, HostileShapesSlimTheSameAsWhenParsedWhole) {
  const char* workloads[] = {
      R"({"metadata":[{"managedFields":1}],"spec":{"replicas":1,"template":7}})",
      R"({"metadata":{"managedFields":"x","name":"a"},"spec":[{"replicas":1}]})",
      R"({"metadata":{"name":"a"},"spec":{"template":{"metadata":[1]},"paused":"yes","x":1}})",
      R"({"metadata":{"name":"a"},"spec":{"volumeClaimTemplates":{"metadata":1},"x":[1]}})",
      R"([{"spec":{"replicas":1}}])",
  };
  for (const char* text : workloads) {
    for (auto [filter, slim] :
         {std::pair<MemberFilter, std::function<void(json&)>>{KeptBySlimDeployment, SlimDeployment},
          {KeptBySlimStatefulSet, SlimStatefulSet}}) {
      EXPECT_EQ(Cached(kube::ParsePruned(text, {}, filter), slim), Cached(json::parse(text), slim))
          << text;
    }
  }
  const char* pods[] = {
      R"({"metadata":{"annotations":["a"],"labels":{"x":"y"},"extra":1},"spec":[{"a":1}]})",
      R"({"metadata":{"annotations":{"allocguard.io/x":"1","other":"2"}},"spec":"x","status":[1]})",
      R"({"status":{"conditions":[1,{"type":"Ready","x":1},[{"type":"y"}]],"hostIP":"1"}})",
      R"({"status":{"containerStatuses":{"name":"a","image":"b"},"initContainerStatuses":[{"a":1}]}})",
      R"({"spec":{"nodeName":"n","containers":[]},"extra":{"metadata":{"name":1}}})",
  };
  for (const char* text : pods) {
    EXPECT_EQ(Cached(kube::ParsePruned(text, {}, KeptBySlimPod), SlimPod),
              Cached(json::parse(text), SlimPod))
        << text;
  }
}

}  // namespace
}  // namespace allocguard::api
