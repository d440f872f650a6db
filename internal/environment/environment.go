package environment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"k8s.io/client-go/metadata"
)

// Environment is the stacks of one environment: the platform stack, named after the environment, and, when its stack
// file splits it into tenant groups (gpu-tenancy:tenantGroups), one stack per group, <env>.tenants-<i>, each reading
// the same stack file and building its own part (platform.Part). A group stack of a higher group that is still on the
// backend with resources (left by a lower tenantGroups) is part of it too, so it is never forgotten. One command drives
// them all: Up brings the platform stack up, then the groups in parallel; Destroy takes the groups down in parallel,
// then the platform; Preview, Refresh and Recover run every stack; Move hands a tenant from one group to another.
type Environment struct {
	// Stacks are the platform stack first, then the groups in order, then any group stack left beyond the groups;
	// one stack without tenant groups.
	Stacks []*Stack
	// Parallel is how many group stacks run at once (default the number of CPUs): the engine's work is CPU-bound.
	// Destroy, which mostly waits, runs every group at once.
	Parallel int
	// OnlyChanged makes Up skip a stack whose last up through the environment applied what it would apply now: the
	// same program, the config of its part, and for a group's stack the same platform kubeconfig. One tenant added
	// to a large environment then runs the platform stack and that tenant's group only. A skipped stack is not
	// refreshed, so drift in it is neither seen nor put back: an Up without OnlyChanged does that.
	OnlyChanged bool
	// Skipped are the stacks the last Up skipped.
	Skipped []string
	// Missing are the group stacks the stack file implies that the backend does not hold, left out when the
	// environment is opened without creating stacks (Options.NoCreate): a preview says so instead of creating them.
	Missing []string
	// DeleteTenants are the tenants a destroy (or the recovery of one) may delete although the stack file lists them:
	// each such tenant of the stacks it destroys must be named here (gpu-tenancy --delete-tenants), so that no
	// destroy deletes a listed tenant that its command did not name. Retired tenants need no naming.
	DeleteTenants []string

	opts   Options
	groups int
	// all are the environment's stacks as opened, which Only does not narrow: every state the environment holds.
	all []*Stack
	// onlyGroup narrows operations to the one group stack Only kept: the platform stack (Stacks[0]) is there to read
	// from, and is not run.
	onlyGroup bool
	// restoreState puts a backup back into a stack when a move is undone; nil is Stack.Import. Tests make it fail to
	// see what a move whose restore failed tells its operator.
	restoreState func(context.Context, *Stack, apitype.UntypedDeployment) error
}

// Changes are the steps of an operation by kind, summed over the environment's stacks.
type Changes map[string]int

func (c Changes) add(m map[string]int) {
	for k, v := range m {
		c[k] += v
	}
}

// ListedTenants are the tenants the environment's stack file lists (not those it retires).
func (e *Environment) ListedTenants() []string { return e.Stacks[0].args.TenantNames() }

// Name is the environment's name: its platform stack's.
func (e *Environment) Name() string { return e.Stacks[0].opts.Stack }

// OpenEnvironment opens every stack of the environment (Open, for each): those its stack file implies
// (platform.EnvironmentStacks), then any group stack beyond them that the backend still holds with resources. Every
// stack must use the environment's secrets provider, since each group's stack reads the platform stack's secret
// outputs.
func OpenEnvironment(ctx context.Context, o Options) (*Environment, error) {
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	sc, err := platform.ReadStackFile(o.StackFile)
	if err != nil {
		return nil, err
	}
	groupsKey := platform.ConfigNamespace + ":tenantGroups"
	if raw, ok := o.Config[groupsKey]; ok {
		sc.Values[groupsKey] = raw
	}
	names, err := platform.EnvironmentStacks(o.Stack, sc)
	if err != nil {
		return nil, err
	}
	env := &Environment{opts: o, groups: len(names) - 1}
	open := func(name string) (*Stack, error) {
		po := o
		po.Stack = name
		// The platform stack holds the cloud cluster, whose record a killed engine must not lose: it keeps its
		// checkpoints. A group's stack holds Kubernetes objects only, which the next operation applies again or
		// removes (sweepUnrecorded).
		po.skipCheckpoints = !o.GroupCheckpoints && name != o.Stack && env.groups > 0
		if name != o.Stack {
			po.Progress = prefixed(o.Progress, o.Stack, platform.PartOf(name, max(env.groups, 1)))
			po.WorkDir = o.WorkDir + strings.TrimPrefix(name, o.Stack)
		}
		if env.groups > 0 && name == o.Stack {
			po.Progress = prefixed(o.Progress, o.Stack, platform.PlatformPart)
		}
		return Open(ctx, po)
	}
	for i, name := range names {
		st, err := open(name)
		var missing *MissingStackError
		if i > 0 && errors.As(err, &missing) {
			// A group stack a preview (NoCreate) finds missing: the first up creates it.
			env.Missing = append(env.Missing, name)
			continue
		}
		if err != nil {
			return nil, err
		}
		env.Stacks = append(env.Stacks, st)
	}
	var left []string
	if env.groups > 0 {
		p := env.Stacks[0]
		if left, err = leftoverGroups(ctx, p.cli, p.opts.WorkDir, p.cliEnv(), o, env.groups); err != nil {
			return nil, err
		}
	}
	for _, name := range left {
		st, err := open(name)
		if err != nil {
			return nil, err
		}
		env.Stacks = append(env.Stacks, st)
	}
	if err := env.checkSecretsProviders(ctx); err != nil {
		return nil, err
	}
	env.all = env.Stacks
	return env, nil
}

// backendStack is a stack as `pulumi stack ls --json` lists it (pulumi pkg v3.274.1 cmd/pulumi/stack/stack_list.go).
type backendStack struct {
	Name          string `json:"name"`
	ResourceCount *int   `json:"resourceCount"`
	// LastUpdate is when the stack's state was last written, to the millisecond (cmd/pulumi/cmd/time.go); on a
	// file or bucket backend the state's own time (backend/diy/stack.go, diyStackSummary.LastUpdate).
	LastUpdate string `json:"lastUpdate"`
	// UpdateInProgress is set by backends that track updates (Pulumi Cloud), which then leave LastUpdate out.
	UpdateInProgress *bool `json:"updateInProgress"`
}

// listStacks lists the project's stacks on the backend, with the CLI and work directory of a stack of environment o.
func listStacks(ctx context.Context, cli auto.PulumiCommand, workDir string, env []string, o Options) ([]backendStack, error) {
	out, errOut, code, err := cli.Run(ctx, workDir, nil, nil, nil, env, "stack", "ls", "--json", "--project", projectName)
	if err != nil || code != 0 {
		return nil, fmt.Errorf("listing the stacks of environment %s on %s: exit %d: %v: %s", o.Stack, o.Backend, code, err, strings.TrimSpace(errOut))
	}
	var listed []backendStack
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		return nil, fmt.Errorf("listing the stacks of environment %s: %w", o.Stack, err)
	}
	for i, b := range listed {
		listed[i].Name = b.Name[strings.LastIndex(b.Name, "/")+1:]
	}
	return listed, nil
}

// leftoverGroups names the group stacks of the environment env, beyond its groups, that the backend holds with
// resources, in group order.
func leftoverGroups(ctx context.Context, cli auto.PulumiCommand, workDir string, env []string, o Options, groups int) ([]string, error) {
	listed, err := listStacks(ctx, cli, workDir, env, o)
	if err != nil {
		return nil, err
	}
	group := regexp.MustCompile("^" + regexp.QuoteMeta(o.Stack) + `\.tenants-(\d+)$`)
	var found []int
	for _, b := range listed {
		m := group.FindStringSubmatch(b.Name)
		if m == nil || b.ResourceCount == nil || *b.ResourceCount == 0 {
			continue
		}
		if i, err := strconv.Atoi(m[1]); err == nil && i >= groups && string(platform.TenantsPart(i)) == "tenants-"+m[1] {
			found = append(found, i)
		}
	}
	slices.Sort(found)
	names := make([]string, len(found))
	for i, g := range found {
		names[i] = o.Stack + "." + string(platform.TenantsPart(g))
	}
	return names, nil
}

// StackRef is one stack of an environment as List names it.
type StackRef struct {
	// Name is the stack's name; Part what it builds.
	Name string
	Part platform.Part
	// Leftover marks a group stack beyond the environment's groups, which an up destroys once it holds no tenant.
	Leftover bool
	cloud    string
}

func (r StackRef) String() string {
	if r.Leftover {
		return r.Name + " (left beyond the environment's groups)"
	}
	return r.Name
}

// List names the stacks of an environment in the order an up runs them, without creating any: those its stack file
// implies, then the group stacks beyond them that the backend holds with resources.
func List(ctx context.Context, o Options) ([]StackRef, error) {
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	sc, err := platform.ReadStackFile(o.StackFile)
	if err != nil {
		return nil, err
	}
	names, err := platform.EnvironmentStacks(o.Stack, sc)
	if err != nil {
		return nil, err
	}
	groups := len(names) - 1
	cloud := sc.Values[platform.ConfigNamespace+":cloud"]
	var refs []StackRef
	for _, n := range names {
		refs = append(refs, StackRef{Name: n, Part: platform.PartOf(n, groups), cloud: cloud})
	}
	if groups == 0 {
		return refs, nil
	}
	work, err := os.MkdirTemp("", "gpu-tenancy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	project := fmt.Sprintf("name: %s\nruntime: go\nbackend:\n  url: %s\n", projectName, o.Backend)
	if err := os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(project), 0o600); err != nil {
		return nil, err
	}
	env := map[string]string{}
	if o.Passphrase != "" {
		env["PULUMI_CONFIG_PASSPHRASE"] = o.Passphrase
	}
	_, cli, err := workspaceCLI(o.Tools, env)
	if err != nil {
		return nil, err
	}
	left, err := leftoverGroups(ctx, cli, work, cliEnv(o.Tools, env), o, groups)
	if err != nil {
		return nil, err
	}
	for _, n := range left {
		refs = append(refs, StackRef{Name: n, Part: platform.PartOf(n, groups), Leftover: true, cloud: cloud})
	}
	return refs, nil
}

// MatrixEntry is one job of a CI fan-out over environments' stacks: the environment (the GitHub environment that
// protects its deploys, and the stack file), the stack and what it builds, and the cloud whose credentials it needs.
type MatrixEntry struct {
	Environment string `json:"environment"`
	Stack       string `json:"stack"`
	Part        string `json:"part"`
	Cloud       string `json:"cloud"`
}

// CIMatrix is the fan-out of environments' stacks as GitHub Actions matrices (strategy.matrix.include:
// fromJSON(...)): the platform stacks, whose jobs run first, and the group stacks, whose jobs need them; All is both,
// for jobs that need no order (a drift check).
type CIMatrix struct {
	Platforms []MatrixEntry `json:"platforms"`
	Groups    []MatrixEntry `json:"groups"`
	All       []MatrixEntry `json:"all"`
	HasGroups bool          `json:"hasGroups"`
}

// Matrix is the CI matrix of environments' stacks, each as List returns them.
func Matrix(environments ...[]StackRef) CIMatrix {
	m := CIMatrix{Platforms: []MatrixEntry{}, Groups: []MatrixEntry{}}
	for _, stacks := range environments {
		env := stacks[0]
		m.Platforms = append(m.Platforms, MatrixEntry{Environment: env.Name, Stack: env.Name, Part: string(env.Part), Cloud: env.cloud})
		for _, s := range stacks[1:] {
			m.Groups = append(m.Groups, MatrixEntry{Environment: env.Name, Stack: s.Name, Part: string(s.Part), Cloud: env.cloud})
		}
	}
	m.All = append(slices.Clone(m.Platforms), m.Groups...)
	m.HasGroups = len(m.Groups) > 0
	return m
}

// Only narrows the environment to one of its stacks, for a CI job of a fan-out: the workflow orders the jobs, the
// platform's before the groups'.
func (e *Environment) Only(stack string) error {
	for _, s := range e.Stacks {
		if s.opts.Stack == stack {
			if s != e.Stacks[0] {
				e.Stacks = []*Stack{e.Stacks[0], s}
				e.onlyGroup = true
			} else {
				e.Stacks = []*Stack{s}
			}
			return nil
		}
	}
	if slices.Contains(e.Missing, stack) {
		return &MissingStackError{Stack: stack}
	}
	var names []string
	for _, s := range e.Stacks {
		names = append(names, s.opts.Stack)
	}
	return fmt.Errorf("stack %s is not one of environment %s's: %s", stack, e.Name(), strings.Join(names, ", "))
}

// secretsProviderOf is the secrets provider a stack's state is encrypted with: its type, and for a cloud provider its
// key's URL (pulumi sdk v3.274.1 go/common/apitype/core.go SecretsProvidersV1); "" for a stack without state.
func (s *Stack) secretsProviderOf(ctx context.Context) (string, error) {
	state, err := s.Export(ctx)
	if err != nil {
		return "", fmt.Errorf("stack %s: reading its state: %w", s.opts.Stack, err)
	}
	if len(state.Deployment) == 0 {
		return "", nil
	}
	var d struct {
		SecretsProviders *struct {
			Type  string `json:"type"`
			State struct {
				URL string `json:"url"`
			} `json:"state"`
		} `json:"secrets_providers"`
	}
	if err := json.Unmarshal(state.Deployment, &d); err != nil || d.SecretsProviders == nil {
		return "", err
	}
	if d.SecretsProviders.State.URL != "" {
		return d.SecretsProviders.State.URL, nil
	}
	return d.SecretsProviders.Type, nil
}

// checkSecretsProviders refuses an environment whose group stacks encrypt with another secrets provider than its
// platform stack: a group stack reads the platform's kubeconfig, a secret, through a stack reference, which its own
// run decrypts with the platform stack's provider and its own credentials (pulumi pkg v3.274.1
// resource/deploy/builtins.go readStackReference); a passphrase that does not fit yields an empty value, not an error.
func (e *Environment) checkSecretsProviders(ctx context.Context) error {
	if len(e.Stacks) == 1 {
		return nil
	}
	want, err := e.Stacks[0].secretsProviderOf(ctx)
	if err != nil || want == "" {
		return err
	}
	for _, s := range e.Stacks[1:] {
		got, err := s.secretsProviderOf(ctx)
		if err != nil {
			return err
		}
		if got != "" && got != want {
			return fmt.Errorf("stack %s encrypts its secrets with %s, but the environment's platform stack %s with %s: every stack "+
				"of an environment needs the one provider, or the group cannot read the platform's kubeconfig. Run `pulumi stack "+
				"change-secrets-provider --stack %s <the platform stack's provider>`", s.opts.Stack, got, e.Name(), want, s.opts.Stack)
		}
	}
	return nil
}

// groupStacks are the environment's group stacks, the ones left beyond its groups included.
func (e *Environment) groupStacks() []*Stack { return e.Stacks[1:] }

// leftover reports whether a group stack is beyond the environment's groups.
func (e *Environment) leftover(s *Stack) bool {
	g, ok := platform.PartOf(s.opts.Stack, max(e.groups, 1)).Group()
	return ok && g >= e.groups
}

// Up brings the platform stack up, then every group in parallel, under the environment's lock. A group stack left
// beyond the groups is destroyed when it holds no tenant, and refused (with what to run) when it holds some. With
// OnlyChanged, a stack whose last up through the environment applied what it would apply now is skipped and named in
// Skipped.
func (e *Environment) Up(ctx context.Context, opts ...optup.Option) (Changes, error) {
	if e.interrupted() == OpDestroy {
		// An up would bring back part of what the destroy deleted, and leave a record that a later recover reads as
		// the destroy to finish: the operator decides which.
		return nil, fmt.Errorf("a destroy of environment %s did not finish (recorded in %s): finish it (gpu-tenancy recover "+
			"%s, naming the listed tenants it deletes with --delete-tenants), or abandon it and bring every stack up again "+
			"(gpu-tenancy recover --op up %s)", e.Name(), filepath.Join(e.Stacks[0].opts.WorkDir, environmentOpMarker),
			e.Name(), e.Name())
	}
	unlock, err := e.lock(ctx, "up")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return e.up(ctx, opts...)
}

// up is Up under a lock the caller holds.
func (e *Environment) up(ctx context.Context, opts ...optup.Option) (Changes, error) {
	changes := Changes{}
	held, live, err := e.checkPlacement(ctx)
	if err != nil {
		return changes, err
	}
	if err := e.pinPlacement(ctx, held, live); err != nil {
		return changes, err
	}
	if held != nil && !e.onlyGroup {
		// What each group's up applies, for --changed-only: its tenants as the states place them.
		for _, s := range e.groupStacks() {
			if s.partConfig, err = partConfig(s.opts, s.opts.StackFile, s.args, held); err != nil {
				return changes, err
			}
		}
	}
	var mu sync.Mutex
	e.Skipped = nil
	// The platform stack keeps its checkpoints: nothing to sweep after it.
	sweep := func(*Stack) error { return nil }
	up := func(s *Stack, upstream string) (map[string]int, error) {
		if e.leftover(s) {
			res, err := s.Destroy(ctx)
			if err != nil {
				return nil, err
			}
			s.say("%s: a group beyond the environment's %d groups, holding no tenant: destroyed", s.opts.Stack, e.groups)
			return *res.Summary.ResourceChanges, sweep(s)
		}
		if e.OnlyChanged && s.unchanged(upstream) {
			s.say("%s: unchanged since its last up (the same program, config and cluster): skipped, not refreshed", s.opts.Stack)
			mu.Lock()
			defer mu.Unlock()
			e.Skipped = append(e.Skipped, s.opts.Stack)
			return nil, nil
		}
		res, err := s.Up(ctx, opts...)
		var counts map[string]int
		if res.Summary.ResourceChanges != nil {
			counts = *res.Summary.ResourceChanges
		}
		if err == nil {
			err = sweep(s)
		}
		if err == nil {
			err = s.recordApplied(upstream)
		}
		return counts, err
	}
	if !e.onlyGroup {
		counts, err := up(e.Stacks[0], "")
		changes.add(counts)
		if err != nil || len(e.Stacks) == 1 {
			return changes, err
		}
	}
	// A group's stack reaches the cluster through the platform stack's kubeconfig: when that changes, so does
	// what the group's up applies.
	outputs, err := e.Stacks[0].Outputs(ctx)
	if err != nil {
		return changes, fmt.Errorf("stack %s: reading its outputs: %w", e.Name(), err)
	}
	upstream := fmt.Sprint(outputs["kubeconfig"].Value)
	if sweep, err = e.sweeper(ctx); err != nil {
		return changes, err
	}
	err = e.eachGroup(func(s *Stack) (map[string]int, error) { return up(s, upstream) }, changes)
	return changes, err
}

// checkPlacement refuses, before anything runs, a tenant held by one group stack whose config records it in another
// (a group edited instead of moved), a tenant two stacks hold, a group stack beyond the groups that holds tenants, and
// a tenant a stack holds that the stack file neither lists nor retires: each would have a stack delete a tenant it
// holds. The message says what to run. It returns the group whose stack holds each tenant, and the group each tenant's
// namespace on the cluster names (liveGroups).
func (e *Environment) checkPlacement(ctx context.Context) (held, live map[string]int, err error) {
	if e.groups == 0 {
		return nil, nil, nil
	}
	held = map[string]int{}
	args := e.Stacks[0].args
	recorded := map[string]int{}
	for _, t := range args.Tenants {
		if t.Group != nil {
			recorded[t.Name] = *t.Group
		}
	}
	// A tenant's namespace names the stack that last applied it: a move that stopped after handing the state over
	// leaves the namespace with the old stack's label while the new stack holds it.
	if live, err = e.liveGroups(ctx); err != nil {
		return nil, nil, err
	}
	holder := map[string]string{}
	var problems []string
	for _, s := range e.groupStacks() {
		tenants, err := s.Tenants(ctx)
		if err != nil {
			return nil, nil, err
		}
		g, _ := platform.PartOf(s.opts.Stack, e.groups).Group()
		for _, t := range tenants {
			held[t] = g
			if other, ok := holder[t]; ok {
				problems = append(problems, fmt.Sprintf("tenant %s is held by both %s and %s: restore one of them from its "+
					"backup (pulumi stack import) before anything runs", t, other, s.opts.Stack))
			}
			holder[t] = s.opts.Stack
			if !slices.Contains(args.TenantNames(), t) {
				if err := unlisted(s.opts.Stack, []string{t}, args); err != nil {
					problems = append(problems, err.Error())
				}
				continue
			}
			lg, isLive := live[t]
			switch want, ok := recorded[t]; {
			case e.leftover(s):
				problems = append(problems, fmt.Sprintf("tenant %s lives in %s, which %d groups leave out: move it first "+
					"(gpu-tenancy move %s %s --to <group>)", t, s.opts.Stack, e.groups, e.Name(), t))
			case ok && want != g:
				problems = append(problems, fmt.Sprintf("tenant %s lives in %s, but the stack file records group %d: move it "+
					"(gpu-tenancy move %s %s --to %d), which records the group itself; or, if a move to group %d did not "+
					"finish, finish it (gpu-tenancy move %s %s --to %d)", t, s.opts.Stack, want, e.Name(), t, want, g,
					e.Name(), t, g))
			case !ok && isLive && lg != g:
				problems = append(problems, fmt.Sprintf("tenant %s lives in %s, but its namespace is still group %d's (owner "+
					"label %s): a move to group %d did not finish; finish it (gpu-tenancy move %s %s --to %d)", t,
					s.opts.Stack, lg, naming.StackLabel, g, e.Name(), t, g))
			}
		}
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("the environment's stacks do not hold the tenants where its stack file places them:\n  - %s",
			strings.Join(problems, "\n  - "))
	}
	return held, live, nil
}

// pinPlacement hands each stack's program the group whose state holds each tenant the stack file places nowhere
// (no group recorded), so that the program places it there. The program alone would place such a tenant where its
// namespace's owner label says, else by the hash of its name: a namespace deleted by hand would send the tenant to
// the hash's group, which would create it while the group that holds it failed on its protection. The group that holds
// it recreates it instead, and a warning says that its data went with the namespace. held and live are
// checkPlacement's.
func (e *Environment) pinPlacement(ctx context.Context, held, live map[string]int) error {
	if e.groups == 0 {
		return nil
	}
	var err error
	if held, err = e.heldElsewhere(ctx, held, live); err != nil {
		return err
	}
	tenants := slices.Clone(e.Stacks[0].args.Tenants)
	pinned := false
	for i, t := range tenants {
		g, ok := held[t.Name]
		if t.Group != nil || !ok || g >= e.groups {
			continue
		}
		if _, isLive := live[t.Name]; live != nil && !isLive {
			e.Stacks[0].say("tenant %s: its namespace %s is not on the cluster (deleted by hand?): %s, whose state holds it, "+
				"recreates it empty; what the namespace held (volumes, Secrets, the vCluster's data) is gone", t.Name,
				naming.Namespace(t.Name), e.groupStack(g))
		}
		tenants[i].Group = &g
		pinned = true
	}
	if !pinned {
		return nil
	}
	raw, err := json.Marshal(tenants)
	if err != nil {
		return err
	}
	for _, s := range e.Stacks {
		if err := s.setConfig(ctx, map[string]string{platform.ConfigNamespace + ":tenants": string(raw)}); err != nil {
			return fmt.Errorf("stack %s: placing its tenants where the states hold them: %w", s.opts.Stack, err)
		}
	}
	return nil
}

// heldElsewhere adds, for a run of one group (--only), which read only that group's state, the other groups' tenants
// that the program would otherwise place in this group: those with no group recorded and no namespace on the
// cluster that the hash sends here. A new tenant is one of them too, so the other groups' states are read only when
// there is such a tenant.
func (e *Environment) heldElsewhere(ctx context.Context, held, live map[string]int) (map[string]int, error) {
	if !e.onlyGroup {
		return held, nil
	}
	this, _ := platform.PartOf(e.Stacks[1].opts.Stack, e.groups).Group()
	ask := false
	for _, t := range e.Stacks[0].args.Tenants {
		_, isHeld := held[t.Name]
		_, isLive := live[t.Name]
		ask = ask || t.Group == nil && !isHeld && !isLive && platform.TenantGroup(t.Name, e.groups) == this
	}
	if !ask {
		return held, nil
	}
	out := maps.Clone(held)
	for _, s := range e.all[1:] {
		g, _ := platform.PartOf(s.opts.Stack, e.groups).Group()
		if g == this {
			continue
		}
		tenants, err := s.Tenants(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tenants {
			out[t] = g
		}
	}
	return out, nil
}

// groupStack is the name of group g's stack.
func (e *Environment) groupStack(g int) string {
	return e.Name() + "." + string(platform.TenantsPart(g))
}

// liveGroups is the group of the environment whose stack owns each tenant's namespace by its owner label, as the
// program places tenants (platform.TenantOwners, platform.LiveGroups); a tenant whose namespace is missing or
// another's is left out, and all of them when the platform stack has no cluster yet.
func (e *Environment) liveGroups(ctx context.Context) (map[string]int, error) {
	cfg := e.Stacks[0].clusterConfig(ctx)
	if cfg == nil {
		return nil, nil
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	owners, err := platform.TenantOwners(ctx, meta)
	if err != nil {
		return nil, fmt.Errorf("reading the owners of the tenants' namespaces: %w", err)
	}
	return platform.LiveGroups(owners, projectName, e.Name()), nil
}

// Preview previews every stack, the groups in parallel after the platform.
func (e *Environment) Preview(ctx context.Context, opts ...optpreview.Option) (Changes, error) {
	for _, name := range e.Missing {
		e.Stacks[0].say("%s: not on the backend yet, so not previewed (a preview creates no stack): its first up "+
			"creates it with the tenants the stack file places there; the committed plan (stacks/plans) shows them", name)
	}
	preview := func(s *Stack) (map[string]int, error) {
		res, err := s.Preview(ctx, opts...)
		counts := map[string]int{}
		for op, n := range res.ChangeSummary {
			counts[string(op)] = n
		}
		return counts, err
	}
	return e.platformThenGroups(preview)
}

// Refresh refreshes every stack: what the state says is read back from the cluster and the cloud.
func (e *Environment) Refresh(ctx context.Context) (Changes, error) {
	refresh := func(s *Stack) (map[string]int, error) {
		res, err := s.Refresh(ctx, optrefresh.ProgressStreams(s.progress()), optrefresh.ErrorProgressStreams(s.progress()))
		if res.Summary.ResourceChanges == nil {
			return nil, err
		}
		return *res.Summary.ResourceChanges, err
	}
	return e.platformThenGroups(refresh)
}

// platformThenGroups runs op on the platform stack (unless this environment is one group's), then on the groups in
// parallel, and adds up what each reports.
func (e *Environment) platformThenGroups(op func(*Stack) (map[string]int, error)) (Changes, error) {
	changes := Changes{}
	if !e.onlyGroup {
		counts, err := op(e.Stacks[0])
		changes.add(counts)
		if err != nil {
			return changes, err
		}
	}
	return changes, e.eachGroup(op, changes)
}

// Destroy takes every group down in parallel, then the platform stack, under the environment's lock: the platform's
// guards go last, when no tenant is left. It refuses, before anything runs, to delete a tenant the stack file lists
// that DeleteTenants does not name (checkDeletes).
func (e *Environment) Destroy(ctx context.Context) (changes Changes, err error) {
	unlock, err := e.lock(ctx, "destroy")
	if err != nil {
		return nil, err
	}
	defer unlock()
	changes = Changes{}
	if err := e.checkDeletes(ctx, "destroy"); err != nil {
		return changes, err
	}
	if !e.onlyGroup {
		// Recover runs a destroy of the whole environment again on every stack, and nothing else does; the record goes
		// only once the destroy has finished, so a failed one is resumed rather than undone by an up.
		var done func()
		if done, err = e.begin(OpDestroy); err != nil {
			return changes, err
		}
		defer func() {
			if err == nil {
				done()
			}
		}()
	}
	counted := func(res auto.DestroyResult, err error) (map[string]int, error) {
		if res.Summary.ResourceChanges == nil {
			return nil, err
		}
		return *res.Summary.ResourceChanges, err
	}
	sweep, err := e.sweeper(ctx)
	if err != nil {
		return changes, err
	}
	plans, err := e.groupDestroys(ctx)
	if err != nil {
		return changes, err
	}
	// A destroy mostly waits, for each tenant namespace to terminate, rather than computes: every group at once.
	groupDestroy := func(s *Stack) (map[string]int, error) {
		counts, err := counted(s.destroy(ctx, plans[s]))
		if err == nil {
			err = sweep(s)
		}
		return counts, err
	}
	if err = e.eachGroupAtOnce(len(e.Stacks), groupDestroy, changes); err != nil || e.onlyGroup {
		return changes, err
	}
	var counts map[string]int
	counts, err = counted(e.Stacks[0].Destroy(ctx))
	changes.add(counts)
	return changes, err
}

// checkDeletes refuses a destroy of the stacks this run works on (verb: destroy, or recover when it destroys) that
// would delete a tenant the stack file lists and DeleteTenants does not name, and a destroy of the platform stack
// alone while a group stack holds tenants, whose guards it would take away from under them.
func (e *Environment) checkDeletes(ctx context.Context, verb string) error {
	var destroyed []*Stack
	for _, s := range e.Stacks {
		if !e.onlyGroup || s != e.Stacks[0] {
			destroyed = append(destroyed, s)
		}
	}
	return e.checkNamed(ctx, verb, destroyed)
}

// checkNamed refuses to destroy stacks that hold a tenant the stack file lists and DeleteTenants does not name, and
// the platform stack while a group stack it does not destroy holds tenants.
func (e *Environment) checkNamed(ctx context.Context, verb string, stacks []*Stack) error {
	if e.groups > 0 && slices.Contains(stacks, e.all[0]) {
		for _, s := range e.all[1:] {
			if slices.Contains(stacks, s) {
				continue
			}
			held, err := s.Tenants(ctx)
			if err != nil {
				return err
			}
			if len(held) > 0 {
				return fmt.Errorf("%s of the platform stack %s alone: group stack %s still holds tenants %s, whose guards it "+
					"would take away; destroy the groups first", verb, e.Name(), s.opts.Stack, strings.Join(held, ", "))
			}
		}
	}
	listed := e.Stacks[0].args.TenantNames()
	var unnamed []string
	for _, s := range stacks {
		held, err := s.Tenants(ctx)
		if err != nil {
			return err
		}
		for _, t := range held {
			if slices.Contains(listed, t) && !slices.Contains(e.DeleteTenants, t) {
				unnamed = append(unnamed, t)
			}
		}
	}
	if len(unnamed) == 0 {
		return nil
	}
	slices.Sort(unnamed)
	return fmt.Errorf("this %s deletes tenants %s, which the stack file lists, with their namespaces, volumes and vClusters: "+
		"name each of them (--delete-tenants %s) to delete them, or retire them (retiredTenants) and up instead",
		verb, strings.Join(unnamed, ", "), strings.Join(unnamed, ","))
}

// groupDestroys reads every stack's state once, before the groups' destroy: each group's resources, and the namespaces
// its destroy deletes ahead of its engine (deleteNamespacesFirst), those its state records and no other stack's state
// does. A namespace another stack records too belongs to a move that did not finish; a destroy of the whole
// environment leaves it to the engines, and a destroy of one group (--only) is refused, since it would delete a tenant
// another group still holds.
func (e *Environment) groupDestroys(ctx context.Context) (map[*Stack]stackDestroy, error) {
	recordedBy := map[string][]string{}
	states := map[*Stack][]stateResource{}
	for _, s := range e.all {
		res, err := s.resources(ctx)
		if err != nil {
			return nil, err
		}
		states[s] = res
		for _, ns := range recordedNamespaces(res) {
			recordedBy[ns.Name] = append(recordedBy[ns.Name], s.opts.Stack)
		}
	}
	out := map[*Stack]stackDestroy{}
	for _, s := range e.groupStacks() {
		d := stackDestroy{recorded: states[s]}
		for _, ns := range recordedNamespaces(d.recorded) {
			if len(recordedBy[ns.Name]) == 1 {
				d.ahead = append(d.ahead, ns)
				continue
			}
			if e.onlyGroup {
				return nil, fmt.Errorf("namespace %s is recorded by stacks %s: a move did not finish; finish it "+
					"(gpu-tenancy move) before destroying %s alone", ns.Name, strings.Join(recordedBy[ns.Name], " and "), s.opts.Stack)
			}
		}
		out[s] = d
	}
	return out, nil
}

// Recover recovers every stack (Stack.Recover): for an up, the platform first; for a destroy, the groups first.
func (e *Environment) Recover(ctx context.Context, op Op) error {
	// Without an operation named, a destroy of the whole environment that was interrupted runs again on every stack;
	// otherwise each stack runs again what it left unfinished itself, else up (Stack.Recover), so one group's own
	// interrupted destroy (--only, or a leftover group's removal) never becomes the environment's.
	whole := op
	if whole == "" && !e.onlyGroup {
		whole = e.interrupted()
	}
	unlock, err := e.lock(ctx, "recover")
	if err != nil {
		return err
	}
	defer unlock()
	e.sayRecovery(op, whole)
	if whole == OpDestroy {
		if err := e.checkDeletes(ctx, "recover"); err != nil {
			return err
		}
		if err := e.recoverDestroy(ctx); err != nil || e.onlyGroup {
			return err
		}
		e.finished()
		return nil
	}
	// A stack whose own destroy was interrupted (or op destroy) is destroyed again: under the same rule as a destroy.
	var destroyed []*Stack
	for _, s := range e.Stacks {
		if (!e.onlyGroup || s != e.Stacks[0]) && (op == OpDestroy || op == "" && s.Interrupted() == OpDestroy) {
			destroyed = append(destroyed, s)
		}
	}
	if err := e.checkNamed(ctx, "recover", destroyed); err != nil {
		return err
	}
	if !e.onlyGroup {
		if err := e.Stacks[0].Recover(ctx, op); err != nil {
			return err
		}
	}
	if err := e.recoverGroups(ctx, op); err != nil {
		return err
	}
	if op == OpUp && !e.onlyGroup && e.interrupted() == OpDestroy {
		e.Stacks[0].say("recover: the interrupted destroy of environment %s is abandoned: every stack is up again", e.Name())
		e.finished()
	}
	return nil
}

// sayRecovery says, before anything runs, what a recovery runs on which stacks: for a whole destroy (whole), every
// stack's destroy, the groups first; otherwise each stack's own interrupted operation, else op, else up.
func (e *Environment) sayRecovery(op, whole Op) {
	var lines []string
	for _, s := range e.Stacks {
		if e.onlyGroup && s == e.Stacks[0] {
			continue
		}
		run := whole
		if run == "" {
			if run = s.Interrupted(); run == "" {
				run = OpUp
			}
		}
		lines = append(lines, fmt.Sprintf("  %s: refresh, then %s", s.opts.Stack, run))
	}
	if whole == OpDestroy && !e.onlyGroup && len(lines) > 1 {
		// The groups go first, the platform last.
		lines = append(lines[1:], lines[0])
	}
	e.Stacks[0].say("recover: environment %s, in this order:\n%s", e.Name(), strings.Join(lines, "\n"))
}

// recoverDestroy recovers a destroy: the groups first, then (unless --only) the platform.
func (e *Environment) recoverDestroy(ctx context.Context) error {
	if err := e.recoverGroups(ctx, OpDestroy); err != nil || e.onlyGroup {
		return err
	}
	return e.Stacks[0].Recover(ctx, OpDestroy)
}

// recoverGroups recovers every group stack with op ("": each its own), sweeping each after.
func (e *Environment) recoverGroups(ctx context.Context, op Op) error {
	sweep, err := e.sweeper(ctx)
	if err != nil {
		return err
	}
	return e.eachGroup(func(s *Stack) (map[string]int, error) {
		if err := s.Recover(ctx, op); err != nil {
			return nil, err
		}
		return nil, sweep(s)
	}, Changes{})
}

// eachGroup runs f on every group stack, Parallel at a time, adds what each returns to changes, and joins their
// errors, each naming its stack. Every group runs even when another fails: they are independent.
func (e *Environment) eachGroup(f func(*Stack) (map[string]int, error), changes Changes) error {
	parallel := e.Parallel
	if parallel <= 0 {
		parallel = runtime.NumCPU()
	}
	return e.eachGroupAtOnce(parallel, f, changes)
}

// eachGroupAtOnce is eachGroup with parallel group stacks at a time.
func (e *Environment) eachGroupAtOnce(parallel int, f func(*Stack) (map[string]int, error), changes Changes) error {
	slots := make(chan struct{}, parallel)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, s := range e.groupStacks() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			counts, err := f(s)
			mu.Lock()
			defer mu.Unlock()
			changes.add(counts)
			if err != nil {
				errs = append(errs, fmt.Errorf("stack %s: %w", s.opts.Stack, err))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prefixed writes each line to w with the stack's part before it, so that the progress of stacks that run at once
// can be told apart; nil stays nil.
func prefixed(w io.Writer, stack string, part platform.Part) io.Writer {
	if w == nil {
		return nil
	}
	return &linePrefixer{w: w, prefix: []byte(fmt.Sprintf("[%s %s] ", stack, part))}
}

type linePrefixer struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	partial []byte
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := append(append([]byte(nil), l.prefix...), l.partial[:i+1]...)
		l.partial = l.partial[i+1:]
		if _, err := l.w.Write(line); err != nil {
			return len(p), err
		}
	}
}
