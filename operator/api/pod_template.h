#pragma once

// The shape of a pod template that the operator reads, checked before any
// code reads it. A ReplayCanary stores its template unvalidated
// (x-kubernetes-preserve-unknown-fields), and anyone allowed to create
// canaries may write one; the injection and the canary Job builder read the
// template's fields with accessors that expect their Kubernetes types. A
// template that passes CheckPodTemplate has every field those readers touch
// of the type they expect, so no reader can meet a number where it reads a
// string. The API server checks Deployments' and Pods' templates itself;
// this is for templates no API server has typed.
//
// Checked (each where present): metadata.labels and .annotations (string
// maps); spec.containers (required, non-empty), .initContainers and
// .ephemeralContainers, each with name (required), image, command, args,
// env[] (name required, value, valueFrom), envFrom[], volumeMounts[] (name
// and mountPath required), resources.limits/.requests (quantities),
// securityContext (privileged and friends booleans), terminationMessagePolicy,
// terminationMessagePath, imagePullPolicy, ports[], probes; spec.volumes[]
// (name required; hostPath.path), nodeSelector (string map), nodeName,
// serviceAccountName, serviceAccount, hostPID, hostNetwork, hostIPC,
// shareProcessNamespace, automountServiceAccountToken, restartPolicy,
// securityContext, tolerations[], affinity. Fields outside this list are
// neither read nor checked.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"

namespace allocguard::api {

// Ok, or InvalidArgument naming the first offending field by its path below
// `path` (for example "spec.template.spec.containers[0].env[1].name: must be
// a string, got 5").
Status CheckPodTemplate(const nlohmann::json& pod_template, const std::string& path);

// What a pod template asks of the node beyond an ordinary container: host
// namespaces, privileged containers, hostPath volumes, a fixed node. Empty
// when it asks for none. Each entry names the field ("spec.hostPID",
// "spec.containers[0].securityContext.privileged", "spec.volumes[2].hostPath",
// "spec.nodeName"). The template must have passed CheckPodTemplate.
std::vector<std::string> HostAccessFields(const nlohmann::json& pod_template);

// HostAccessFields, and a ServiceAccount other than "default"
// ("spec.serviceAccountName (builder)", also for the deprecated
// spec.serviceAccount): everything a template asks for that an ordinary pod
// of its namespace does not get. Empty when it asks for none.
std::vector<std::string> RightsBeyondAnOrdinaryPod(const nlohmann::json& pod_template);

}  // namespace allocguard::api
