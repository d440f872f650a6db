// Command demo runs the local stack on the local control plane (scripts/local-cluster.sh) and shows, per tenant,
// what it can see and claim: `demo up` applies the stack and prints the table, `demo down` destroys the stack. The
// logic is internal/localdemo; this command runs it on the control plane of scripts/local-cluster.sh (GT_CLUSTER_DIR,
// GT_NODES as it reads them), with the state and workspace under .tools.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localdemo"
)

func main() {
	verb := "up"
	if len(os.Args) > 1 {
		verb = os.Args[1]
	}
	if err := run(verb); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(verb string) error {
	do := map[string]func(context.Context, localdemo.Options) error{"up": localdemo.Up, "down": localdemo.Down}[verb]
	if do == nil {
		return fmt.Errorf("usage: demo up|down")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	logName := filepath.Join(".tools", "demo-"+verb+".log")
	logFile, err := os.Create(filepath.Join(root, logName))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The control plane scripts/local-cluster.sh runs: its directory and whether it has real nodes, as its
	// environment says.
	return do(ctx, localdemo.Options{RepoRoot: root, ClusterDir: os.Getenv("GT_CLUSTER_DIR"), Nodes: os.Getenv("GT_NODES") != "",
		Progress: logFile, ProgressName: logName, Out: os.Stdout})
}
