// Command gpu-tenancy-env drives the stacks of one environment (its stack file, stacks/Pulumi.<env>.yaml: the platform
// stack and, with gpu-tenancy:tenantGroups, one stack per tenant group) with the real Pulumi engine, on the state
// backend the project's backend.url or PULUMI_BACKEND_URL names, the platform program running inline
// (internal/environment). The secrets passphrase comes from PULUMI_CONFIG_PASSPHRASE.
//
//	gpu-tenancy-env [flags] stacks  <env>...                   the environments' stacks, in order (-json: a CI matrix)
//	gpu-tenancy-env [flags] preview <env>                      preview every stack (refreshed first)
//	gpu-tenancy-env [flags] up      <env>                      the platform, then the groups in parallel
//	gpu-tenancy-env [flags] refresh <env>
//	gpu-tenancy-env [flags] destroy <env>                      the groups, then the platform
//	gpu-tenancy-env [flags] recover <env>                      converge after a killed engine, then run it again
//	gpu-tenancy-env [flags] move    <env> <tenant>... -to <group> hand tenants to another group (-preview: say what)
//
// The local stack (`make demo`) is the environment `local` on the file backend .tools/state, which is the default
// when nothing names a backend and the environment is local.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	// The environments' stacks build every cloud.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
)

const usage = `usage: gpu-tenancy-env [flags] stacks|preview|up|refresh|destroy|recover <env>
       gpu-tenancy-env [flags] move <env> <tenant>... -to <group> [-preview]`

func main() {
	environment.UseEngineGC()
	fs := flag.NewFlagSet("gpu-tenancy-env", flag.ContinueOnError)
	backend := fs.String("backend", "", "the state backend's URL (default $PULUMI_BACKEND_URL, else the project's backend.url)")
	stackFile := fs.String("stack-file", "", "the environment's stack file (default <stackConfigDir>/Pulumi.<env>.yaml)")
	only := fs.String("only", "", "run this one stack of the environment (a CI job of the fan-out); an up takes no environment lock")
	deleteTenants := fs.String("delete-tenants", "", "destroy, recover: the tenants the stack file lists that this run may delete, "+
		"comma-separated; each listed tenant of the stacks it destroys must be named")
	skipRefresh := fs.Bool("skip-refresh", false, "preview and up without refreshing first (drift is not seen)")
	changedOnly := fs.Bool("changed-only", false, "up: skip each stack whose last up applied what it would apply now; a skipped stack is not refreshed")
	parallel := fs.Int("parallel", 0, "group stacks at once (default the number of CPUs)")
	op := fs.String("op", "", "recover: the operation to run again (up or destroy); default the interrupted one, else up")
	asJSON := fs.Bool("json", false, "stacks: print a GitHub Actions matrix")
	to := fs.Int("to", -1, "move: the group to move the tenant to")
	preview := fs.Bool("preview", false, "move: say what would move, change nothing")
	expectNoChanges := fs.Bool("expect-no-changes", false, "preview: fail when any stack would change (a drift check, with the refresh)")
	var packs stringsFlag
	fs.Var(&packs, "policy-pack", "a policy pack to run on previews and ups (repeatable; default .tools/bin/gpu-tenancy-policy when built)")
	fs.Usage = func() { fmt.Fprintln(os.Stderr, usage); fs.PrintDefaults() }
	// Flags may follow the arguments too (gpu-tenancy-env move prod team-a -to 2).
	args, err := parseInterspersed(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil || len(args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	verb, env := args[0], args[1]
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	// A preview creates no stack: it may run with a backend credential that cannot write the states.
	o := environment.Options{RepoRoot: root, Stack: env, StackFile: *stackFile, Backend: *backend, Progress: os.Stdout,
		SkipRefresh: *skipRefresh, NoCreate: verb == "preview"}
	if o.Backend == "" && os.Getenv(environment.BackendEnv) == "" && env == "local" {
		o.Backend = environment.LocalBackend(root)
	}
	if len(packs) == 0 && verb != "destroy" && verb != "stacks" {
		if pack := environment.PolicyPack(root); exists(pack) {
			packs = append(packs, pack)
		} else {
			fmt.Fprintf(os.Stderr, "gpu-tenancy-env: no policy pack at %s (run `make tools`): running %s without the guard-rail policies\n", pack, verb)
		}
	}
	o.PolicyPacks = packs
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, o, verb, args[2:], *only, *asJSON, *changedOnly, *parallel, *op, *to, *preview, *expectNoChanges,
		splitList(*deleteTenants)); err != nil {
		fail(err)
	}
}

func run(ctx context.Context, o environment.Options, verb string, rest []string, only string, asJSON, changedOnly bool,
	parallel int, op string, to int, preview, expectNoChanges bool, deleteTenants []string) error {
	if verb == "stacks" {
		var all [][]environment.StackRef
		for _, name := range append([]string{o.Stack}, rest...) {
			eo := o
			eo.Stack = name
			stacks, err := environment.List(ctx, eo)
			if err != nil {
				return err
			}
			all = append(all, stacks)
		}
		if asJSON {
			return json.NewEncoder(os.Stdout).Encode(environment.Matrix(all...))
		}
		for _, stacks := range all {
			for _, s := range stacks {
				fmt.Println(s)
			}
		}
		return nil
	}
	env, err := environment.OpenEnvironment(ctx, o)
	var missing *environment.MissingStackError
	if verb == "preview" && errors.As(err, &missing) {
		fmt.Printf("%v; nothing to preview against (a preview creates no stack)\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	env.OnlyChanged, env.Parallel, env.DeleteTenants = changedOnly, parallel, deleteTenants
	if only != "" {
		err := env.Only(only)
		if verb == "preview" && errors.As(err, &missing) {
			fmt.Printf("%v, with the tenants the stack file places there; nothing to preview against (a preview creates "+
				"no stack), and the committed plan (stacks/plans) shows them\n", err)
			return nil
		}
		if err != nil {
			return err
		}
	}
	switch verb {
	case "up":
		_, err = env.Up(ctx)
	case "preview":
		var opts []optpreview.Option
		if expectNoChanges {
			// The engine's own check: the preview fails on any step but "same".
			opts = append(opts, optpreview.ExpectNoChanges())
		}
		_, err = env.Preview(ctx, opts...)
	case "refresh":
		_, err = env.Refresh(ctx)
	case "destroy":
		_, err = env.Destroy(ctx)
	case "recover":
		err = env.Recover(ctx, environment.Op(op))
	case "move":
		if len(rest) == 0 || to < 0 {
			return fmt.Errorf("move needs tenants and -to <group>: %s", usage)
		}
		var plan environment.MovePlan
		plan, err = env.Move(ctx, rest, to, preview)
		if err == nil && preview {
			fmt.Println(plan)
		}
	default:
		return fmt.Errorf("unknown verb %q: %s", verb, usage)
	}
	return err
}

// parseInterspersed parses flags wherever they stand among the arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

type stringsFlag []string

func (s *stringsFlag) String() string     { return fmt.Sprint([]string(*s)) }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gpu-tenancy-env:", err)
	os.Exit(1)
}

// splitList is a comma-separated flag's values, blanks dropped.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
