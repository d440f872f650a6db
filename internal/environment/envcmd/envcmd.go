// Package envcmd is the environment's part of the gpu-tenancy command line: stacks, preview, up, refresh, destroy,
// recover and move, each on the stacks of one environment (its stack file, stacks/Pulumi.<env>.yaml: the platform
// stack and, with gpu-tenancy:tenantGroups, one stack per tenant group) with the real Pulumi engine, on the state
// backend --backend, PULUMI_BACKEND_URL or the project's backend.url names, the platform program running inline
// (internal/environment). The secrets passphrase comes from PULUMI_CONFIG_PASSPHRASE. The local stack (`make demo`)
// is the environment `local` on the file backend .tools/state, the default when nothing names a backend.
package envcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/spf13/cobra"
)

// GroupID is the help's group of the environment's commands; the command line that adds them declares it.
const GroupID = "environment"

// ExitFailed is the exit code of an operation that ran and failed, as a command's error carries it (Failed).
const ExitFailed = 1

// Failed marks an error as the failure of an operation that ran, not a usage error; the command line turns it into
// ExitFailed.
type Failed struct{ Err error }

func (f *Failed) Error() string { return f.Err.Error() }
func (f *Failed) Unwrap() error { return f.Err }

// ExitCode is the process's exit code for it.
func (f *Failed) ExitCode() int { return ExitFailed }

// flags are the settings every environment command shares, and those of one.
type flags struct {
	backend, stackFile, only, deleteTenants, op string
	skipRefresh, changedOnly, asJSON, preview   bool
	expectNoChanges                             bool
	parallel, to                                int
	policyPacks                                 []string
}

// Commands are the environment's commands, printing to stdout (progress and results) and stderr (warnings).
func Commands(stdout, stderr io.Writer) []*cobra.Command {
	run := func(verb string, f *flags) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			err := execute(cmd.Context(), stdout, stderr, verb, args, f)
			if err != nil {
				return &Failed{Err: err}
			}
			return nil
		}
	}
	command := func(use, short, long string, args cobra.PositionalArgs, examples ...string) (*cobra.Command, *flags) {
		f := &flags{}
		verb, _, _ := strings.Cut(use, " ")
		cmd := &cobra.Command{Use: use, Short: short, Long: long, Args: args, RunE: run(verb, f), GroupID: GroupID,
			Example: "  gpu-tenancy " + strings.Join(examples, "\n  gpu-tenancy ")}
		fs := cmd.Flags()
		fs.StringVar(&f.backend, "backend", "", "The state backend's URL (default $PULUMI_BACKEND_URL, else the project's backend.url)")
		fs.StringVar(&f.stackFile, "stack-file", "", "The environment's stack file (default <stackConfigDir>/Pulumi.<env>.yaml)")
		if verb != "stacks" && verb != "move" {
			fs.StringVar(&f.only, "only", "", "Run this one stack of the environment (a CI job of the fan-out); an up takes no environment lock")
		}
		if usesPolicyPack(verb) {
			fs.StringArrayVar(&f.policyPacks, "policy-pack", nil, "A policy pack to run (repeatable; default .tools/bin/gpu-tenancy-policy when built)")
		}
		return cmd, f
	}

	stacks, sf := command("stacks <env>...", "List the stacks of environments, in order",
		`The stacks of each environment, in the order they run: the platform stack, its tenant groups, and any group stack
the backend still holds with resources beyond them. --json prints a GitHub Actions matrix.`, cobra.MinimumNArgs(1),
		"stacks prod", "stacks --json gke-dev scw-dev")
	stacks.Flags().BoolVar(&sf.asJSON, "json", false, "Print a GitHub Actions matrix")

	preview, pf := command("preview <env>", "Preview every stack of an environment, refreshed first",
		`Previews every stack of the environment, each refreshed first, with the policy pack; creates no stack (a group stack
the backend does not hold yet is named instead).`, cobra.ExactArgs(1),
		"preview prod", "preview prod --only prod.tenants-3 --expect-no-changes")
	preview.Flags().BoolVar(&pf.skipRefresh, "skip-refresh", false, "Preview without refreshing first (drift is not seen)")
	preview.Flags().BoolVar(&pf.expectNoChanges, "expect-no-changes", false, "Fail when any stack would change (a drift check, with the refresh)")

	up, uf := command("up <env>", "Bring an environment up: the platform stack, then the groups in parallel",
		`Brings the platform stack up, then the tenant groups in parallel, each refreshed first. It refuses a stack file that
lost a tenant the states still hold (retire it first), and after a destroy that did not finish (recover).`, cobra.ExactArgs(1),
		"up prod", "up prod --changed-only")
	up.Flags().BoolVar(&uf.skipRefresh, "skip-refresh", false, "Up without refreshing first (drift is not seen)")
	up.Flags().BoolVar(&uf.changedOnly, "changed-only", false, "Skip each stack whose last up applied what it would apply now; a skipped stack is not refreshed")
	up.Flags().IntVar(&uf.parallel, "parallel", 0, "Group stacks at once (default the number of CPUs)")

	refresh, _ := command("refresh <env>", "Refresh every stack of an environment", "Refreshes every stack of the environment.",
		cobra.ExactArgs(1), "refresh prod")

	destroy, df := command("destroy <env>", "Destroy an environment: the groups in parallel, then the platform stack",
		`Destroys the tenant groups in parallel, then the platform stack. Every tenant the stack file lists that the destroy
would delete must be named with --delete-tenants; a retired tenant needs no naming.`, cobra.ExactArgs(1),
		"destroy prod --delete-tenants team-a,team-b")
	destroy.Flags().StringVar(&df.deleteTenants, "delete-tenants", "", "The tenants the stack file lists that this destroy may delete, comma-separated")

	recover, rf := command("recover <env>", "Converge an environment after a killed run, then run the operation again",
		`Releases the locks of engines that are gone, repairs what they left, and runs the interrupted operation again (--op
to choose), saying first what it runs on which stacks. A destroy it resumes needs the destroy's --delete-tenants.`,
		cobra.ExactArgs(1), "recover prod", "recover prod --op destroy --delete-tenants team-a")
	recover.Flags().StringVar(&rf.op, "op", "", "The operation to run again (up or destroy); default the interrupted one, else up")
	recover.Flags().StringVar(&rf.deleteTenants, "delete-tenants", "", "The tenants the stack file lists that a destroy it resumes may delete, comma-separated")

	move, mf := command("move <env> <tenant>...", "Hand tenants to another tenant group",
		`Hands tenants, their objects and data untouched, from the group stacks that hold them to group --to, and records the
group in the stack file; every state and the stack file are backed up first. --preview says what would move.`,
		cobra.MinimumNArgs(2), "move prod team-a team-b --to 3 --preview", "move prod team-a team-b --to 3")
	move.Flags().IntVar(&mf.to, "to", 0, "The group to move the tenants to (required)")
	move.Flags().BoolVar(&mf.preview, "preview", false, "Say what would move, change nothing")
	cobra.CheckErr(move.MarkFlagRequired("to"))

	return []*cobra.Command{stacks, preview, up, refresh, destroy, recover, move}
}

func execute(ctx context.Context, stdout, stderr io.Writer, verb string, args []string, f *flags) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	env := args[0]
	// A preview creates no stack: it may run with a backend credential that cannot write the states.
	o := environment.Options{RepoRoot: root, Stack: env, StackFile: f.stackFile, Backend: f.backend, Progress: stdout,
		SkipRefresh: f.skipRefresh, NoCreate: verb == "preview"}
	if o.Backend == "" && os.Getenv(environment.BackendEnv) == "" && env == "local" {
		o.Backend = environment.LocalBackend(root)
	}
	packs := f.policyPacks
	if len(packs) == 0 && usesPolicyPack(verb) {
		if pack := environment.PolicyPack(root); exists(pack) {
			packs = append(packs, pack)
		} else {
			fmt.Fprintf(stderr, "gpu-tenancy: no policy pack at %s (run `make tools`): running %s without the guard-rail policies\n", pack, verb)
		}
	}
	o.PolicyPacks = packs
	if verb == "stacks" {
		return listStacks(ctx, stdout, o, args, f.asJSON)
	}
	e, err := environment.OpenEnvironment(ctx, o)
	var missing *environment.MissingStackError
	if verb == "preview" && errors.As(err, &missing) {
		fmt.Fprintf(stdout, "%v; nothing to preview against (a preview creates no stack)\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	e.OnlyChanged, e.Parallel, e.DeleteTenants = f.changedOnly, f.parallel, splitList(f.deleteTenants)
	if f.only != "" {
		err := e.Only(f.only)
		if verb == "preview" && errors.As(err, &missing) {
			fmt.Fprintf(stdout, "%v, with the tenants the stack file places there; nothing to preview against (a preview "+
				"creates no stack), and the committed plan (stacks/plans) shows them\n", err)
			return nil
		}
		if err != nil {
			return err
		}
	}
	switch verb {
	case "up":
		_, err = e.Up(ctx)
	case "preview":
		var opts []optpreview.Option
		if f.expectNoChanges {
			// The engine's own check: the preview fails on any step but "same".
			opts = append(opts, optpreview.ExpectNoChanges())
		}
		_, err = e.Preview(ctx, opts...)
	case "refresh":
		_, err = e.Refresh(ctx)
	case "destroy":
		_, err = e.Destroy(ctx)
	case "recover":
		err = e.Recover(ctx, environment.Op(f.op))
	case "move":
		var plan environment.MovePlan
		plan, err = e.Move(ctx, args[1:], f.to, f.preview)
		if err == nil && f.preview {
			fmt.Fprintln(stdout, plan)
		}
	}
	return err
}

func listStacks(ctx context.Context, stdout io.Writer, o environment.Options, envs []string, asJSON bool) error {
	var all [][]environment.StackRef
	for _, name := range envs {
		eo := o
		eo.Stack = name
		stacks, err := environment.List(ctx, eo)
		if err != nil {
			return err
		}
		all = append(all, stacks)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(environment.Matrix(all...))
	}
	for _, stacks := range all {
		for _, s := range stacks {
			fmt.Fprintln(stdout, s)
		}
	}
	return nil
}

// usesPolicyPack says whether an operation runs the policy pack: all but a destroy and the listing.
func usesPolicyPack(verb string) bool { return verb != "destroy" && verb != "stacks" }

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

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
