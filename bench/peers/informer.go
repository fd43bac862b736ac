package main

import (
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// runInformer caches every Deployment of the cluster through a
// controller-runtime manager, in one of four modes:
//
//	full            appsv1.Deployment as the API server sends it
//	strip           the same, managedFields dropped by cache.TransformStripManagedFields
//	metadata        metav1.PartialObjectMetadata (a metadata-only watch)
//	metadata-strip  metadata-only, managedFields dropped
//
// peer_cached_deployments on /metrics counts what the cache holds; /readyz
// answers once the cache has synced.
func runInformer(args []string) error {
	fs := flag.NewFlagSet("informer", flag.ExitOnError)
	mode := fs.String("mode", "full", "full, strip, metadata or metadata-strip")
	metricsAddr := fs.String("metrics-bind-address", "127.0.0.1:8080", "")
	probeAddr := fs.String("health-probe-bind-address", "127.0.0.1:8081", "")
	kubeconfig := fs.String("kubeconfig", "", "the cluster (default: in-cluster or $KUBECONFIG)")
	_ = fs.Parse(args)
	config, err := ctrl.GetConfig()
	if *kubeconfig != "" {
		config, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	}
	if err != nil {
		return err
	}

	var object client.Object
	var transform toolscache.TransformFunc
	switch *mode {
	case "full":
		object = &appsv1.Deployment{}
	case "strip":
		object, transform = &appsv1.Deployment{}, cache.TransformStripManagedFields()
	case "metadata":
		object = deploymentMetadata()
	case "metadata-strip":
		object, transform = deploymentMetadata(), cache.TransformStripManagedFields()
	default:
		return fmt.Errorf("--mode %q: want full, strip, metadata or metadata-strip", *mode)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		Cache:                  cache.Options{DefaultTransform: transform},
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	informer, err := mgr.GetCache().GetInformer(ctx, object)
	if err != nil {
		return err
	}
	var cached atomic.Int64
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { cached.Add(1) },
		DeleteFunc: func(any) { cached.Add(-1) },
	}); err != nil {
		return err
	}
	metrics.Registry.MustRegister(prometheus.NewGaugeFunc(
		prometheus.GaugeOpts{Name: "peer_cached_deployments", Help: "Deployments in the informer's cache."},
		func() float64 { return float64(cached.Load()) }))
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", func(r *http.Request) error {
		if !informer.HasSynced() {
			return fmt.Errorf("cache not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func deploymentMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return m
}
