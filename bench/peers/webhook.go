package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// podInjector is the mutating webhook, written as controller-runtime's
// users write one: decode, mutate a copy, answer with the patch between the
// raw request and the mutated object.
type podInjector struct {
	decoder  admission.Decoder
	injector *injector
}

func (h *podInjector) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !h.injector.Inject(req.Namespace, pod) {
		return admission.Allowed("not injected")
	}
	mutated, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

func runWebhook(args []string) error {
	fs := flag.NewFlagSet("webhook", flag.ExitOnError)
	port := fs.Int("port", 9443, "port to serve on (127.0.0.1)")
	certDir := fs.String("cert-dir", "", "where to write the generated serving certificate")
	caOut := fs.String("ca-out", "", "where to write the CA certificate clients verify with")
	_ = fs.Parse(args)
	if *certDir == "" || *caOut == "" {
		return fmt.Errorf("--cert-dir and --ca-out are required")
	}
	if err := writeCertificates(*certDir, *caOut); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	// As the kubebuilder scaffold does: HTTP/2 off.
	disableHTTP2 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	server := webhook.NewServer(webhook.Options{
		Host:    "127.0.0.1",
		Port:    *port,
		CertDir: *certDir,
		TLSOpts: []func(*tls.Config){disableHTTP2},
	})
	server.Register("/mutate-pods", &webhook.Admission{Handler: &podInjector{
		decoder: admission.NewDecoder(scheme),
		injector: &injector{
			Policies:          benchPolicies(),
			OperatorNamespace: "allocguard-system",
			Image:             "ghcr.io/allocguard/allocguard:0.1.0",
		},
	}})
	fmt.Printf("listening on https://127.0.0.1:%d/mutate-pods\n", *port)
	return server.Start(ctrl.SetupSignalHandler())
}

// writeCertificates makes a CA and a serving certificate for 127.0.0.1 and
// localhost (ECDSA P-256, as allocguard's), writing tls.crt and tls.key into
// dir and the CA to caOut.
func writeCertificates(dir, caOut string) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "peer-bench-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(12 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, serving, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(dir, "tls.crt"): pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		filepath.Join(dir, "tls.key"): pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		caOut:                         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
