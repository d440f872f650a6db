// Command gpu-tenancy is the GPU platform's command line: capacity, pending claims and an audit of the live cluster
// (docs/cli.md), and an environment's stacks driven with the Pulumi engine: stacks, preview, up, refresh, destroy,
// recover and move (docs/operating.md). Installed as kubectl-gpu_tenancy on PATH, it is also the kubectl plugin
// `kubectl gpu-tenancy`.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	// The environments' stacks build every cloud.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment/envcmd"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/cli"
)

func main() {
	environment.UseEngineGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	app := cli.New(os.Stdout, os.Stderr)
	app.Name = filepath.Base(os.Args[0])
	app.Commands = envcmd.Commands(os.Stdout, os.Stderr)
	code := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
