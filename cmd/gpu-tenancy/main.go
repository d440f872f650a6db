// Command gpu-tenancy is the GPU platform's operators' tool: capacity, pending claims and an audit of the live
// cluster (docs/cli.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.New(os.Stdout, os.Stderr).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
