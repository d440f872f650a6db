// Command stack runs the real Pulumi engine on a stack of stacks/ through the Automation API, with the platform
// program as an inline program (on every stack of the environment when its config splits it into tenant groups:
// engine.Environment), state in .tools/state and the passphrase secrets provider (PULUMI_CONFIG_PASSPHRASE, or the
// local development passphrase). Tools come from `make tools`. Previews and ups run the project's policy pack
// (.tools/bin/gpu-tenancy-policy, built by `make tools`) when it is there, and say so on stderr when it is not.
// Previews and ups refresh first, so drift shows and is put back; -skip-refresh leaves that out. -changed-only skips,
// on up, each stack whose last up applied what it would apply now (engine.Environment.OnlyChanged).
//
//	go run ./scripts/stack [-skip-refresh] [-changed-only] up|preview|destroy [stack]     (stack defaults to local)
//	go run ./scripts/stack [-op up|destroy] recover [stack]
//
// recover converges a stack whose engine was killed (internal/engine Stack.Recover): it releases a lock left by a
// process that no longer runs, refreshes dropping pending creates, clears Helm releases left pending, then runs the
// interrupted operation again (or -op).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/engine"
)

func main() {
	skipRefresh := flag.Bool("skip-refresh", false, "preview and up without refreshing first (drift is not seen)")
	changedOnly := flag.Bool("changed-only", false, "up: skip each stack of the environment whose last up applied "+
		"what it would apply now (the same program and config); a skipped stack is not refreshed")
	op := flag.String("op", "", "recover: the operation to run again (up or destroy); default the interrupted one, else up")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: stack [-skip-refresh] [-changed-only] [-op up|destroy] up|preview|destroy|recover [stack]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 || flag.NArg() > 2 {
		flag.Usage()
		os.Exit(2)
	}
	stack := "local"
	if flag.NArg() == 2 {
		stack = flag.Arg(1)
	}
	if err := run(flag.Arg(0), stack, *skipRefresh, *changedOnly, engine.Op(*op)); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(verb, stack string, skipRefresh, changedOnly bool, op engine.Op) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	opts := engine.Options{RepoRoot: root, Stack: stack, Progress: os.Stdout, SkipRefresh: skipRefresh}
	if pack := engine.PolicyPack(root); verb != "destroy" {
		if _, err := os.Stat(pack); err == nil {
			opts.PolicyPacks = []string{pack}
		} else {
			fmt.Fprintf(os.Stderr, "stack: no policy pack at %s (run `make tools`): running %s without the guard-rail policies\n", pack, verb)
		}
	}
	env, err := engine.OpenEnvironment(ctx, opts)
	if err != nil {
		return err
	}
	env.OnlyChanged = changedOnly
	switch verb {
	case "up":
		_, err = env.Up(ctx)
	case "preview":
		_, err = env.Preview(ctx)
	case "destroy":
		_, err = env.Destroy(ctx)
	case "recover":
		err = env.Recover(ctx, op)
	default:
		return fmt.Errorf("unknown verb %q: up, preview, destroy or recover", verb)
	}
	return err
}
