// Command plan writes the offline plan of each stack: the whole program run under Pulumi mocks with the stack's
// config, no cloud and no credentials, as stacks/plans/<stack>.json (every resource with its type, name, parent,
// provider and inputs; secrets read "[secret]"), plus a short tree on stdout. Committed plans show a pull request's
// infrastructure change as a plain diff. A stack file with tenant groups gives a plan per stack of its environment,
// <stack>.json for the platform and <stack>.tenants-<i>.json for each group.
//
//	go run ./scripts/plan [stack...]          write the plans (no stack: every stacks/Pulumi.<stack>.yaml)
//	go run ./scripts/plan -check [stack...]   fail when a committed plan is stale or missing; write nothing
//	go run ./scripts/plan -root DIR ...       for a project directory other than the working one
//
// A stack whose config is invalid fails with the validation errors and its plan is left as it was.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	// The plans are of every cloud's stacks.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/plan"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

// plansDir holds the plans, relative to the project directory.
const plansDir = "stacks/plans"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	flags.SetOutput(stderr)
	check := flags.Bool("check", false, "compare with the committed plans instead of writing them")
	root := flags.String("root", ".", "the project directory, holding stacks/")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	// The program resolves relative config paths (chart paths) against the directory it is given; running from the
	// project directory with "." keeps them as the stack file spells them, whatever the machine.
	if err := os.Chdir(*root); err != nil {
		fmt.Fprintln(stderr, "plan:", err)
		return 1
	}
	stacks := flags.Args()
	all := len(stacks) == 0
	if all {
		var err error
		if stacks, err = stackNames(); err != nil {
			fmt.Fprintln(stderr, "plan:", err)
			return 1
		}
	}

	failed := 0
	var planned []string
	for _, file := range stacks {
		env, err := environmentStacks(file)
		if err != nil {
			fmt.Fprintf(stderr, "plan: %v\n", err)
			failed++
			continue
		}
		for _, stack := range env {
			planned = append(planned, stack)
			if *check {
				err = checkPlan(stack, file)
			} else {
				err = writePlan(stack, file, stdout)
			}
			if err != nil {
				fmt.Fprintf(stderr, "plan: %v\n", err)
				failed++
			}
		}
	}
	if all {
		if err := orphans(planned, *check, stdout); err != nil {
			fmt.Fprintf(stderr, "plan: %v\n", err)
			failed++
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// stackNames lists the stacks with a stacks/Pulumi.<stack>.yaml, sorted.
func stackNames() ([]string, error) {
	files, err := filepath.Glob("stacks/Pulumi.*.yaml")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no stacks/Pulumi.<stack>.yaml here: run from the project directory or give -root")
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "Pulumi."), ".yaml"))
	}
	sort.Strings(names)
	return names, nil
}

func planPath(stack string) string { return plansDir + "/" + stack + ".json" }

func stackFile(file string) string { return "stacks/Pulumi." + file + ".yaml" }

// environmentStacks are the stacks whose plans the stack file gives: its own, and with tenant groups one per group
// (platform.EnvironmentStacks), so that a pull request's diff shows the change of each stack it touches.
func environmentStacks(file string) ([]string, error) {
	sc, err := platform.ReadStackFile(stackFile(file))
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", file, err)
	}
	return platform.EnvironmentStacks(file, sc)
}

// makePlan validates the stack's config, from the stack file of its environment, and runs the program under mocks.
func makePlan(stack, file string) (*plan.Plan, error) {
	sc, err := platform.ReadStackFile(stackFile(file))
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", stack, err)
	}
	// Load through the stack file, not the program: only a source that lists its keys reports misspelt ones.
	if _, err := platform.Load(sc.Source(), platform.ConfigKeys); err != nil {
		return nil, fmt.Errorf("stack %s: %w", stack, err)
	}
	sc, err = withoutKubeconfigFile(sc)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", stack, err)
	}
	rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
	return plan.Make(stack, plan.Config{Values: sc.Values, Secrets: sc.Secrets}, platform.Program("."), rec)
}

// withoutKubeconfigFile swaps an existing cluster's kubeconfigPath for the secret kubeconfig holding the
// placeholder. The plan shows a kubeconfig only as "[secret]" either way; this way it never reads the file, which
// exists only on the machine whose cluster it reaches.
func withoutKubeconfigFile(sc platform.StackConfig) (platform.StackConfig, error) {
	const existingKey, kubeconfigKey = platform.ConfigNamespace + ":existing", platform.ConfigNamespace + ":kubeconfig"
	raw, ok := sc.Values[existingKey]
	if !ok {
		return sc, nil
	}
	var existing map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &existing); err != nil {
		return sc, fmt.Errorf("reading %s: %w", existingKey, err)
	}
	if _, ok := existing["kubeconfigPath"]; !ok {
		return sc, nil
	}
	delete(existing, "kubeconfigPath")
	enc, err := json.Marshal(existing)
	if err != nil {
		return sc, fmt.Errorf("encoding %s: %w", existingKey, err)
	}
	values := make(map[string]string, len(sc.Values)+1)
	for k, v := range sc.Values {
		values[k] = v
	}
	values[existingKey] = string(enc)
	values[kubeconfigKey] = platform.SecretPlaceholder
	sc.Values = values
	sc.Secrets = append(append([]string(nil), sc.Secrets...), kubeconfigKey)
	return sc, nil
}

// render returns the plan document and its tree.
func render(stack, file string) (doc []byte, tree string, err error) {
	p, err := makePlan(stack, file)
	if err != nil {
		return nil, "", err
	}
	doc, err = p.JSON()
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	if err := p.WriteTree(&b); err != nil {
		return nil, "", err
	}
	return doc, b.String(), nil
}

func writePlan(stack, file string, stdout io.Writer) error {
	doc, tree, err := render(stack, file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(plansDir, 0o755); err != nil {
		return err
	}
	// Through a temporary file, so an interrupted run never leaves half a plan.
	tmp, err := os.CreateTemp(plansDir, "."+stack+".json.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(doc); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", planPath(stack), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", planPath(stack), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), planPath(stack)); err != nil {
		return fmt.Errorf("writing %s: %w", planPath(stack), err)
	}
	_, err = fmt.Fprintf(stdout, "%swrote %s\n\n", tree, planPath(stack))
	return err
}

// errStale is what every stale or missing plan reports, so people know the one command that fixes it.
var errStale = errors.New("run `make plan`")

// checkPlan fails when the committed plan differs from what the program registers now.
func checkPlan(stack, file string) error {
	doc, _, err := render(stack, file)
	if err != nil {
		return err
	}
	committed, err := os.ReadFile(planPath(stack))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: %w", planPath(stack), errStale)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(committed, doc) {
		return fmt.Errorf("%s is stale: %w", planPath(stack), errStale)
	}
	return nil
}

// orphans handles plans of no stack, their stack file gone or its tenant groups fewer: -check reports them, writing
// removes them.
func orphans(stacks []string, check bool, stdout io.Writer) error {
	files, err := filepath.Glob(plansDir + "/*.json")
	if err != nil {
		return err
	}
	var stale []string
	for _, f := range files {
		stack := strings.TrimSuffix(filepath.Base(f), ".json")
		if slices.Contains(stacks, stack) {
			continue
		}
		if check {
			stale = append(stale, planPath(stack))
			continue
		}
		if err := os.Remove(f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s: no stack of stacks/ plans it\n", planPath(stack))
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s plan no stack of stacks/: %w", strings.Join(stale, ", "), errStale)
	}
	return nil
}
