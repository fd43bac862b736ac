// The admission webhooks end to end, without TLS: an AdmissionReview body is
// parsed (webhook::ParseAdmissionReview), answered by the handler of its kind
// (admission::AdmissionHandlers: Pod injection, the Deployment gate and its
// unpause check, policy and canary validation), encoded
// (EncodeAdmissionReview), and the returned JSON patch is applied to the
// request's object.
//
// The input is an AdmissionReview (JSON) with one extra top-level member the
// API server never sends, "fuzz", removed before parsing: what the
// operator's caches hold and what the API server answers,
//   {"policies": [AllocatorPolicy...], "canaries": [ReplayCanary...],
//    "deployments": [Deployment...], "daemonsets": [DaemonSet...],
//    "allowed": bool, "operator": bool}
// The caches hold what the informers would: any object of any shape under a
// string namespace and name (the API server guarantees those). A GET of a
// DaemonSet (the Pod webhook reads the one a pod's controller reference
// names) answers the daemonsets entry of that name, or 404.
//
// Invariants: no exception out of a handler (a worker thread would die);
// a malformed review is refused with a message, never answered; the answer
// is an admission.k8s.io/v1 AdmissionReview with the request's uid and a
// boolean allowed; only the mutating webhooks patch; a patch is a base64
// JSON Patch that applies cleanly to the object; a Pod or Deployment
// admitted again with its patch applied (reinvocation) is not patched again.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "controllers/reconcilers.h"
#include "fuzz/fuzz_check.h"
#include "operator/admission/admission_handlers.h"
#include "operator/common/base64.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/credentials.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/kube/transport.h"
#include "operator/webhook/admission_review.h"

namespace {

using allocguard::fuzz::NoThrow;
using allocguard::fuzz::Show;
using nlohmann::json;
namespace kube = allocguard::kube;
namespace admission = allocguard::admission;
namespace webhook = allocguard::webhook;

constexpr char kOperatorUser[] = "system:serviceaccount:allocguard-system:allocguard";

// The API server as the handlers see it: SubjectAccessReviews answered as
// the input says; DaemonSets read from `daemonsets` (the harness's cache);
// Events accepted.
class FakeApiServer final : public kube::Transport {
 public:
  bool allowed = true;
  const kube::Store* daemonsets = nullptr;

  allocguard::Result<allocguard::net::HttpResponse> Send(
      const allocguard::net::HttpRequest& request) override {
    allocguard::net::HttpResponse r;
    r.status = 201;
    r.headers.emplace("Content-Type", "application/json");
    // GET /apis/apps/v1/namespaces/NS/daemonsets/NAME
    const std::string marker = "/daemonsets/";
    if (const size_t at = request.path.find(marker);
        request.method == "GET" && at != std::string::npos && daemonsets != nullptr) {
      const std::string prefix = "/namespaces/";
      const size_t ns_at = request.path.find(prefix);
      const std::string ns =
          ns_at == std::string::npos || ns_at + prefix.size() > at
              ? std::string()
              : request.path.substr(ns_at + prefix.size(), at - ns_at - prefix.size());
      kube::ObjectRef found = daemonsets->Get(ns + "/" + request.path.substr(at + marker.size()));
      r.status = found != nullptr ? 200 : 404;
      r.body = found != nullptr ? found->dump(-1, ' ', false, json::error_handler_t::replace)
                                : R"({"kind":"Status","code":404,"reason":"NotFound"})";
      return r;
    }
    json body = json::parse(request.body, nullptr, false);
    if (body.is_discarded()) body = json::object();
    if (request.path.find("subjectaccessreviews") != std::string::npos) {
      body["status"] = {{"allowed", allowed}, {"reason", allowed ? "" : "fuzz says no"}};
    }
    r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return r;
  }
  allocguard::Status Stream(const allocguard::net::HttpRequest&,
                            const allocguard::net::StreamHandlers&, kube::Canceller*) override {
    return allocguard::Unavailable("no watches here");
  }
};

class NoToken final : public kube::TokenSource {
 public:
  allocguard::Result<std::string> Token(bool) override { return std::string(); }
};

// Fills store with the objects of list that have a string namespace and name.
void Fill(kube::Store& store, const json& list) {
  if (!list.is_array()) return;
  for (const json& object : list) {
    if (!object.is_object()) continue;
    const json* meta = object.contains("metadata") ? &object["metadata"] : nullptr;
    if (meta == nullptr || !meta->is_object() || !meta->value("name", json()).is_string() ||
        !meta->value("namespace", json()).is_string()) {
      continue;
    }
    store.Upsert(object);
  }
}

struct Harness {
  std::shared_ptr<FakeApiServer> api = std::make_shared<FakeApiServer>();
  kube::Client client{api, std::make_shared<NoToken>()};
  kube::EventRecorder events{&client, {}};
  kube::Store policies, canaries, deployments, daemonsets;
  std::unique_ptr<admission::AdmissionHandlers> handlers;

  explicit Harness(const json& setup) {
    for (kube::Store* s : {&policies, &canaries, &deployments, &daemonsets}) {
      allocguard::controllers::AddNamespaceIndex(*s);
    }
    api->daemonsets = &daemonsets;
    if (setup.is_object()) {
      Fill(policies, setup.value("policies", json()));
      Fill(canaries, setup.value("canaries", json()));
      Fill(deployments, setup.value("deployments", json()));
      Fill(daemonsets, setup.value("daemonsets", json()));
      api->allowed = setup.value("allowed", json(true)) != false;
    }
    const bool known_operator = setup.is_object() && setup.value("operator", json()) == true;
    handlers = std::make_unique<admission::AdmissionHandlers>(
        admission::AdmissionHandlerOptions{"allocguard-system", "registry.example/allocguard:fuzz",
                                           known_operator ? kOperatorUser : ""},
        admission::AdmissionHandlerDeps{&client, &policies, &canaries, &deployments, &events,
                                        nullptr, &daemonsets});
  }
};

using Handler = webhook::AdmissionResponse (admission::AdmissionHandlers::*)(
    const webhook::AdmissionRequest&) const;

struct Route {
  const char* name;
  Handler handler;
  bool mutating;
};

constexpr Route kPod{"MutatePod", &admission::AdmissionHandlers::MutatePod, true};
constexpr Route kGate{"MutateDeployment", &admission::AdmissionHandlers::MutateDeployment, true};
constexpr Route kUnpause{"ValidateDeployment", &admission::AdmissionHandlers::ValidateDeployment,
                         false};
constexpr Route kPolicy{"ValidatePolicy", &admission::AdmissionHandlers::ValidatePolicy, false};
constexpr Route kCanary{"ValidateCanary", &admission::AdmissionHandlers::ValidateCanary, false};

std::vector<Route> RoutesFor(const std::string& kind) {
  if (kind == "Pod") return {kPod};
  if (kind == "Deployment") return {kGate, kUnpause};
  if (kind == "AllocatorPolicy") return {kPolicy};
  if (kind == "ReplayCanary") return {kCanary};
  return {kPod, kGate, kUnpause, kPolicy, kCanary};  // a kind no webhook is registered for
}

// The answer as the API server reads it; returns the patch (null: none).
json CheckAnswer(const Route& route, const webhook::AdmissionRequest& request,
                 const webhook::AdmissionResponse& response) {
  const std::string body = NoThrow("EncodeAdmissionReview", [&] {
    return webhook::EncodeAdmissionReview(request.uid, response);
  });
  const json review = json::parse(body, nullptr, false);
  AG_FUZZ_CHECK(review.is_object(), std::string(route.name) + " answered non-JSON: " + body);
  AG_FUZZ_CHECK(review.value("apiVersion", json()) == "admission.k8s.io/v1" &&
                    review.value("kind", json()) == "AdmissionReview",
                body);
  const json r = review.value("response", json());
  AG_FUZZ_CHECK(r.is_object() && r.value("uid", json()) == request.uid, body);
  AG_FUZZ_CHECK(r.value("allowed", json()).is_boolean(), body);
  if (!r.contains("patch")) return nullptr;
  AG_FUZZ_CHECK(route.mutating, std::string(route.name) + " is validating but patched: " + body);
  AG_FUZZ_CHECK(r.value("patchType", json()) == "JSONPatch", body);
  AG_FUZZ_CHECK(r["patch"].is_string(), body);
  auto decoded = allocguard::DecodeBase64(r["patch"].get<std::string>());
  AG_FUZZ_CHECK(decoded.ok(), "the patch is not base64: " + body);
  json patch = json::parse(*decoded, nullptr, false);
  AG_FUZZ_CHECK(patch.is_array() && !patch.empty(), "the patch is no JSON Patch: " + *decoded);
  return patch;
}

json Apply(const Route& route, const json& object, const json& patch) {
  try {
    return object.patch(patch);
  } catch (const std::exception& e) {
    allocguard::fuzz::Fail("the patch applies to the object",
                           std::string(route.name) + ": " + e.what() + "\n  patch: " + Show(patch) +
                               "\n  object: " + Show(object));
  }
}

void Review(const Harness& h, const Route& route, const webhook::AdmissionRequest& request) {
  const webhook::AdmissionResponse response =
      NoThrow(route.name, [&] { return (*h.handlers.*route.handler)(request); });
  const json patch = CheckAnswer(route, request, response);
  if (std::getenv("AG_FUZZ_DEBUG") != nullptr) {  // what a seed reaches
    std::fprintf(stderr, "%s: %s\n", route.name,
                 webhook::EncodeAdmissionReview(request.uid, response).c_str());
  }
  if (patch.is_null()) return;
  webhook::AdmissionRequest again = request;
  again.object = Apply(route, request.object, patch);
  if (route.handler == kUnpause.handler) return;
  // Reinvocation (reinvocationPolicy IfNeeded, or a later webhook's change):
  // the patched object is admitted again; it must not be patched twice.
  const webhook::AdmissionResponse second =
      NoThrow(route.name, [&] { return (*h.handlers.*route.handler)(again); });
  const json second_patch = CheckAnswer(route, again, second);
  AG_FUZZ_CHECK(second_patch.is_null(), std::string(route.name) +
                                            " patched its own patch again:\n  " +
                                            Show(second_patch) + "\n  first: " + Show(patch));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json input = allocguard::fuzz::ParseInput(data, size);
  json setup;
  std::string body(reinterpret_cast<const char*>(data), size);
  if (input.is_object() && input.contains("fuzz")) {
    setup = input["fuzz"];
    input.erase("fuzz");
    body = input.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  auto request =
      NoThrow("ParseAdmissionReview", [&] { return webhook::ParseAdmissionReview(body); });
  if (!request.ok()) {
    AG_FUZZ_CHECK(!request.status().message().empty(), body);
    return 0;
  }
  AG_FUZZ_CHECK(!request->uid.empty(), "a parsed request without uid: " + body);
  Harness h(setup);
  for (const Route& route : RoutesFor(request->kind.kind)) Review(h, route, *request);
  return 0;
}
