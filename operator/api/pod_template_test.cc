#include "operator/api/pod_template.h"

#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;

json Template() {
  return json::parse(R"({
    "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
    "spec": {
      "containers": [{
        "name": "app", "image": "web:1", "args": ["--port", "8080"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {}}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
        "resources": {"limits": {"memory": "512Mi", "cpu": 1}},
        "securityContext": {"runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePolicy": "File",
        "ports": [{"containerPort": 8080}]
      }],
      "volumes": [{"name": "data", "emptyDir": {}}],
      "nodeSelector": {"pool": "a"},
      "serviceAccountName": "web"
    }})");
}

TEST(CheckPodTemplateTest, AcceptsAnOrdinaryTemplate) {
  EXPECT_TRUE(CheckPodTemplate(Template(), "spec.template").ok())
      << CheckPodTemplate(Template(), "spec.template").message();
  // What the API server returns for a Deployment's template.
  json from_server = Template();
  from_server["metadata"]["creationTimestamp"] = nullptr;
  from_server["spec"]["securityContext"] = json::object();
  EXPECT_TRUE(CheckPodTemplate(from_server, "spec.template").ok());
}

// Each malformed template is refused with the field's whole path; the first
// three are the gate-integrity issue's own examples, which used to throw out
// of the canary reconciler and abort the operator.
TEST(CheckPodTemplateTest, RefusesWrongTypesNamingTheField) {
  struct Case {
    const char* pointer;  // JSON pointer to replace
    json value;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"/spec/containers/0/terminationMessagePolicy", 5,
       "spec.template.spec.containers[0].terminationMessagePolicy"},
      {"/spec/containers/0/env/0/name", 5, "spec.template.spec.containers[0].env[0].name"},
      {"/spec/containers/0/volumeMounts/0/mountPath", 5,
       "spec.template.spec.containers[0].volumeMounts[0].mountPath"},
      {"/spec/containers/0/name", nullptr, "spec.template.spec.containers[0].name"},
      {"/spec/containers/0/image", json::array(), "spec.template.spec.containers[0].image"},
      {"/spec/containers/0/args/1", 8080, "spec.template.spec.containers[0].args[1]"},
      {"/spec/containers/0/env/0/value", true, "spec.template.spec.containers[0].env[0].value"},
      {"/spec/containers/0/env/1", "B=2", "spec.template.spec.containers[0].env[1]"},
      {"/spec/containers/0/env", json::object(), "spec.template.spec.containers[0].env"},
      {"/spec/containers/0/resources/limits/memory", json::object(),
       "spec.template.spec.containers[0].resources.limits.memory"},
      {"/spec/containers/0/securityContext/capabilities/drop", "ALL",
       "spec.template.spec.containers[0].securityContext.capabilities.drop"},
      {"/spec/containers/0/securityContext/privileged", "yes",
       "spec.template.spec.containers[0].securityContext.privileged"},
      {"/spec/volumes/0/name", 1, "spec.template.spec.volumes[0].name"},
      {"/spec/volumes/0/emptyDir", "yes", "spec.template.spec.volumes[0].emptyDir"},
      {"/spec/nodeSelector/pool", 1, "spec.template.spec.nodeSelector[\"pool\"]"},
      {"/spec/hostPID", "true", "spec.template.spec.hostPID"},
      {"/spec/serviceAccountName", 1, "spec.template.spec.serviceAccountName"},
      {"/spec/containers", json::array(), "spec.template.spec.containers"},
      {"/spec/containers", "app", "spec.template.spec.containers"},
      {"/spec/initContainers", json::array({1}), "spec.template.spec.initContainers[0]"},
      {"/metadata/labels/app", 5, "spec.template.metadata.labels[\"app\"]"},
      {"/metadata/annotations", "x", "spec.template.metadata.annotations"},
      {"/spec", "x", "spec.template.spec"},
  };
  for (const Case& c : cases) {
    json t = Template();
    t[json::json_pointer(c.pointer)] = c.value;
    Status s = CheckPodTemplate(t, "spec.template");
    EXPECT_FALSE(s.ok()) << c.pointer;
    EXPECT_NE(s.message().find(std::string(c.field) + ":"), std::string::npos)
        << c.pointer << ": " << s.message();
  }
  EXPECT_FALSE(CheckPodTemplate(json::array(), "spec.template").ok());
  json no_name = Template();
  no_name["spec"]["containers"][0].erase("name");
  EXPECT_NE(CheckPodTemplate(no_name, "t").message().find("t.spec.containers[0].name: is required"),
            std::string::npos);
}

TEST(HostAccessFieldsTest, NamesEachWayOutOfTheContainer) {
  EXPECT_TRUE(HostAccessFields(Template()).empty());
  json t = Template();
  t["spec"]["hostPID"] = true;
  t["spec"]["hostNetwork"] = false;
  t["spec"]["nodeName"] = "node-1";
  t["spec"]["volumes"].push_back({{"name", "root"}, {"hostPath", {{"path", "/"}}}});
  t["spec"]["containers"][0]["securityContext"]["privileged"] = true;
  t["spec"]["initContainers"] = {
      {{"name", "init"}, {"securityContext", {{"capabilities", {{"add", {"SYS_ADMIN"}}}}}}}};
  EXPECT_EQ(
      HostAccessFields(t),
      (std::vector<std::string>{
          "spec.hostPID", "spec.nodeName", "spec.containers[0].securityContext.privileged",
          "spec.initContainers[0].securityContext.capabilities.add", "spec.volumes[1].hostPath"}));
}

TEST(RightsBeyondAnOrdinaryPodTest, AddsAServiceAccountOtherThanDefault) {
  json t = Template();
  EXPECT_EQ(RightsBeyondAnOrdinaryPod(t),
            (std::vector<std::string>{"spec.serviceAccountName (web)"}));
  t["spec"].erase("serviceAccountName");
  EXPECT_TRUE(RightsBeyondAnOrdinaryPod(t).empty());
  t["spec"]["serviceAccountName"] = "default";
  EXPECT_TRUE(RightsBeyondAnOrdinaryPod(t).empty()) << "every pod may run as default";
  t["spec"]["serviceAccountName"] = "builder";
  t["spec"]["serviceAccount"] = "deployer";
  t["spec"]["hostIPC"] = true;
  EXPECT_EQ(RightsBeyondAnOrdinaryPod(t),
            (std::vector<std::string>{"spec.hostIPC", "spec.serviceAccountName (builder)",
                                      "spec.serviceAccount (deployer)"}));
  t["spec"]["serviceAccountName"] = 7;
  EXPECT_EQ(RightsBeyondAnOrdinaryPod(t),
            (std::vector<std::string>{"spec.hostIPC", "spec.serviceAccount (deployer)"}))
      << "a malformed name is CheckPodTemplate's to refuse, not a right";
  EXPECT_TRUE(RightsBeyondAnOrdinaryPod(json("not a template")).empty());
}

}  // namespace
}  // namespace allocguard::api
