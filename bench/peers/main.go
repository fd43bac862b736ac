// Command peers is what a platform team would run instead of allocguard,
// written the way controller-runtime's users write it, for allocguard's
// benchmarks to measure beside it (docs/benchmarks.md):
//
//	peers webhook  --port N --cert-dir DIR --ca-out FILE   the Pod injection webhook
//	peers informer --mode full|strip|metadata|metadata-strip  a Deployment cache
//	peers compare  --review FILE ...                        the two webhooks' Pods, compared
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	ctrl.SetLogger(zap.New())
	commands := map[string]func([]string) error{
		"webhook":  runWebhook,
		"informer": runInformer,
		"compare":  runCompare,
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: peers webhook|informer|compare [flags]")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "peers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
