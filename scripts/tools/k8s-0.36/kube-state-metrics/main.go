// Command kube-state-metrics is upstream kube-state-metrics v2.20.0, built from the Go module proxy for the end-to-end
// alert test. Its own main (k8s.io/kube-state-metrics/v2@v2.20.0 main.go) cannot be imported and calls an internal
// wrapper that only adds config-file reloading; this main does what it does without that wrapper.
package main

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"k8s.io/kube-state-metrics/v2/pkg/app"
	"k8s.io/kube-state-metrics/v2/pkg/options"
)

func main() {
	opts := options.NewOptions()
	cmd := options.InitCommand
	cmd.Run = func(*cobra.Command, []string) {
		if err := app.RunKubeStateMetricsWrapper(context.Background(), opts); err != nil {
			klog.ErrorS(err, "Failed to run kube-state-metrics")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
	}
	opts.AddFlags(cmd)
	if err := opts.Parse(); err != nil {
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	if err := opts.Validate(); err != nil {
		klog.ErrorS(err, "Validating options error")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}
