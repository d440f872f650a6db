// Command gpu-tenancy is the GPU platform's operators' tool: capacity, pending claims and an audit of the live
// cluster (docs/cli.md). Installed as kubectl-gpu_tenancy on PATH, it is also the kubectl plugin `kubectl gpu-tenancy`.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	app := cli.New(os.Stdout, os.Stderr)
	app.Name = filepath.Base(os.Args[0])
	code := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
