// smoke-webhook is the admission webhook e2e/cluster/smoke.sh deploys to prove
// that the apiserver reaches a webhook served by a pod behind a Service. It
// denies every request it receives with a fixed message, so a denial seen by
// kubectl can only have come from this pod.
package main

import (
	"encoding/json"
	"log"
	"net/http"
)

type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    json.RawMessage `json:"request,omitempty"`
	Response   *response       `json:"response,omitempty"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
	Status  struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
}

func main() {
	http.HandleFunc("/deny", func(w http.ResponseWriter, r *http.Request) {
		var in review
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			UID string `json:"uid"`
		}
		_ = json.Unmarshal(in.Request, &req)
		out := review{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: &response{UID: req.UID}}
		out.Response.Status.Code = http.StatusForbidden
		out.Response.Status.Message = "denied by the allocguard-smoke webhook pod"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		log.Printf("denied request %s", req.UID)
	})
	log.Fatal(http.ListenAndServeTLS(":8443", "/tls/tls.crt", "/tls/tls.key", nil))
}
