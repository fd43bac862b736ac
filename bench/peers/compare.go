package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// allowedDifferences are the paths where the two patched Pods may differ,
// each with the reason it does not change the Pod the API server stores.
var allowedDifferences = map[string]string{}

// runCompare sends one AdmissionReview to two webhooks, applies each answer's
// JSON Patch to the review's Pod and compares the two Pods as JSON values.
// It exits non-zero when they differ anywhere but allowedDifferences, or when
// either webhook did not patch.
func runCompare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	reviewFile := fs.String("review", "", "an AdmissionReview (webhook_bench --dump-review)")
	urlA := fs.String("a", "", "first webhook URL (allocguard)")
	caA := fs.String("a-ca", "", "its CA")
	urlB := fs.String("b", "", "second webhook URL (the peer)")
	caB := fs.String("b-ca", "", "its CA")
	out := fs.String("out", "", "directory to write the two patched Pods into (optional)")
	_ = fs.Parse(args)
	review, err := os.ReadFile(*reviewFile)
	if err != nil {
		return err
	}
	var request struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	if err := json.Unmarshal(review, &request); err != nil {
		return fmt.Errorf("%s: %w", *reviewFile, err)
	}
	podA, err := patchedPod(*urlA, *caA, review, request.Request.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", *urlA, err)
	}
	podB, err := patchedPod(*urlB, *caB, review, request.Request.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", *urlB, err)
	}
	if *out != "" {
		for name, pod := range map[string]any{"a.json": podA, "b.json": podB} {
			data, _ := json.MarshalIndent(pod, "", "  ")
			if err := os.WriteFile(*out+"/"+name, data, 0o644); err != nil {
				return err
			}
		}
	}
	var differences []string
	diff("", podA, podB, &differences)
	unexplained := 0
	for _, d := range differences {
		if why, ok := allowedDifferences[d]; ok {
			fmt.Printf("  differs at %s: allowed, %s\n", d, why)
			continue
		}
		fmt.Printf("  differs at %s\n", d)
		unexplained++
	}
	if unexplained > 0 {
		return fmt.Errorf("the patched Pods differ at %d paths", unexplained)
	}
	fmt.Printf("the patched Pods are the same (%d allowed differences)\n", len(differences))
	return nil
}

// patchedPod posts review to url and applies the answer's patch to pod.
func patchedPod(url, caFile string, review, pod []byte) (any, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := httpClient.Post(url, "application/json", bytes.NewReader(review))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	var answer struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   []byte `json:"patch"` // base64 in JSON
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	if !answer.Response.Allowed || len(answer.Response.Patch) == 0 {
		return nil, fmt.Errorf("no patch in the answer: %s", body)
	}
	patch, err := jsonpatch.DecodePatch(answer.Response.Patch)
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(pod)
	if err != nil {
		return nil, err
	}
	var value any
	return value, json.Unmarshal(patched, &value)
}

// diff appends the JSON Pointer of every place a and b differ.
func diff(path string, a, b any, out *[]string) {
	mapA, okA := a.(map[string]any)
	mapB, okB := b.(map[string]any)
	if okA && okB {
		keys := map[string]bool{}
		for k := range mapA {
			keys[k] = true
		}
		for k := range mapB {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diff(path+"/"+k, mapA[k], mapB[k], out)
		}
		return
	}
	listA, okA := a.([]any)
	listB, okB := b.([]any)
	if okA && okB && len(listA) == len(listB) {
		for i := range listA {
			diff(fmt.Sprintf("%s/%d", path, i), listA[i], listB[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}
