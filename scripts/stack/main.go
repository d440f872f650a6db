// Command stack runs the real Pulumi engine on a stack of stacks/ through the Automation API, with the pipeline as
// an inline program, state in .tools/state and the passphrase secrets provider (PULUMI_CONFIG_PASSPHRASE, or the
// local development passphrase). Tools come from `make tools`.
//
//	go run ./scripts/stack up|preview|destroy [stack]     (stack defaults to local)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/gpu-tenancy/gpu-tenancy/internal/engine"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: stack up|preview|destroy [stack]")
		os.Exit(2)
	}
	stack := "local"
	if len(os.Args) == 3 {
		stack = os.Args[2]
	}
	if err := run(os.Args[1], stack); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(verb, stack string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	st, err := engine.Open(ctx, engine.Options{RepoRoot: root, Stack: stack, Progress: os.Stdout})
	if err != nil {
		return err
	}
	switch verb {
	case "up":
		_, err = st.Up(ctx)
	case "preview":
		_, err = st.Preview(ctx)
	case "destroy":
		_, err = st.Destroy(ctx)
	default:
		return fmt.Errorf("unknown verb %q: up, preview or destroy", verb)
	}
	return err
}
