// Package environment runs the stacks of an environment with the real Pulumi engine through the Automation API: the
// platform program as an inline program (no language plugin, no program build), on the state backend the project or
// PULUMI_BACKEND_URL names (a file URL, a bucket, Pulumi Cloud), with the secrets provider of the environment's stack
// file. An environment is one stack file: the platform stack of its name and, when the file splits it into tenant
// groups, one stack per group (Environment). The gpu-tenancy command, `make demo` and the end-to-end tests use it.
package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"
)

// Options say which stack to drive and where its state lives.
type Options struct {
	// RepoRoot holds the project: Pulumi.yaml and the stack files of its stackConfigDir.
	RepoRoot string
	// Stack names the stack, and its config Pulumi.<Stack>.yaml unless ConfigFrom or StackFile says otherwise.
	Stack string
	// ConfigFrom names the stack whose stack file holds the config, for the group stacks of an environment (which
	// read the environment's file) or a second stack with another's config; default Stack.
	ConfigFrom string
	// StackFile is the stack file itself; default <RepoRoot>/<stackConfigDir>/Pulumi.<ConfigFrom>.yaml. It is never
	// written, but by Environment.Move, which records a moved tenant's group in it.
	StackFile string
	// Backend is the state backend's URL: a file URL, a bucket (gs://, s3://, azblob://) or Pulumi Cloud
	// (https://api.pulumi.com). Default $PULUMI_BACKEND_URL, else the project's backend.url; one of them is needed.
	Backend string
	// WorkDir holds the workspace (a project file naming the backend, and the stack's working copy of its config);
	// default <RepoRoot>/.tools/engine/<stack>.
	WorkDir string
	// Tools holds the pulumi CLI (bin/pulumi) and its plugins (pulumi-home); default <RepoRoot>/.tools, as `make
	// tools` builds it, when it holds a CLI, else the pulumi CLI on PATH with its own plugins.
	Tools string
	// Passphrase protects the stack's secrets under the passphrase provider; default $PULUMI_CONFIG_PASSPHRASE, else
	// the local development value for a file backend under RepoRoot/.tools.
	Passphrase string
	// Config overrides keys of the stack file (full keys, raw values as a program receives them), in the working copy.
	Config map[string]string
	// SecretConfig sets secret keys, in the working copy.
	SecretConfig map[string]string
	// Progress receives the engine's progress output; nil discards it.
	Progress io.Writer `json:"-"`
	// PolicyPacks run on every preview and up (`--policy-pack`): paths to policy pack binaries, such as the
	// project's PolicyPack, or to PulumiPolicy.yaml directories; relative paths are taken from RepoRoot. A mandatory
	// violation fails the operation.
	PolicyPacks []string
	// SkipRefresh leaves out the refresh that Up and Preview run first, where speed matters more than seeing drift.
	SkipRefresh bool
	// NoCreate selects the stack and never creates it, as a preview must, which may hold no right to write the
	// backend: a stack the backend does not hold is a *MissingStackError.
	NoCreate bool
	// GroupCheckpoints keeps the group stacks' checkpoints: their state written after every step, as the platform
	// stack's always is, instead of once when an operation ends. Only the bench sets it, to weigh that layout
	// (docs/architecture.md, "Scale"): without checkpoints a group's up and destroy take about half the time, and what
	// a killed run leaves unrecorded is applied again or removed by the next operation (sweepUnrecorded).
	GroupCheckpoints bool
	// Program replaces the platform program as the inline program; nil runs platform.InlineProgram(RepoRoot, WorkDir).
	// Tests use it to run a deliberately broken program.
	Program pulumi.RunFunc `json:"-"`

	// skipCheckpoints sets PULUMI_SKIP_CHECKPOINTS for the stack: OpenEnvironment sets it on a group's stack.
	skipCheckpoints bool
}

// PolicyPackBinary is the file name of the project's policy pack (./policy), which `make tools` builds into
// .tools/bin.
const PolicyPackBinary = "gpu-tenancy-policy"

// PolicyPack is where `make tools` puts the project's policy pack under repoRoot.
func PolicyPack(repoRoot string) string {
	return filepath.Join(repoRoot, ".tools", "bin", PolicyPackBinary)
}

// projectName is the Pulumi project, as the program's config namespace spells it.
const projectName = platform.ConfigNamespace

// EngineGCPercent is the GOGC of the pulumi processes a stack runs (the CLI, its providers and policy packs) when the
// caller sets none.
const EngineGCPercent = 400

// callerSetsGOGC reports whether the caller chose a GOGC, which then wins over EngineGCPercent.
func callerSetsGOGC() bool {
	_, set := os.LookupEnv("GOGC")
	return set
}

// UseEngineGC gives the calling process the engines' heap goal (EngineGCPercent) unless GOGC is set: it runs every
// stack's program inline, whose registrations are CPU work of the same kind as the engines'.
func UseEngineGC() {
	if !callerSetsGOGC() {
		debug.SetGCPercent(EngineGCPercent)
	}
}

// LocalPassphrase is the passphrase of stacks run on the local control plane when none is given; it protects
// nothing of value (the local cluster's throwaway credentials) and is documented in the README.
const LocalPassphrase = "gpu-tenancy-local"

// Stack is a stack ready for up, preview and destroy.
type Stack struct {
	auto.Stack
	opts Options
	// partConfig is the config its part builds from (partConfig), for the record of what an up applied.
	partConfig map[string]any
	// args are the stack file's args, decoded, for the tenants it holds.
	args *platform.PlatformArgs
	// cli runs the pulumi CLI for what the Automation API has no call for (state move, unprotect, stack ls).
	cli auto.PulumiCommand
	env map[string]string
}

// resolve fills in the options' defaults and checks them.
func (o Options) resolve() (Options, error) {
	if o.RepoRoot == "" || o.Stack == "" {
		return o, errors.New("environment: RepoRoot and Stack are required")
	}
	project, err := readProject(o.RepoRoot)
	if err != nil {
		return o, err
	}
	if o.ConfigFrom == "" {
		o.ConfigFrom = o.Stack
	}
	if o.StackFile == "" {
		o.StackFile = filepath.Join(o.RepoRoot, project.StackConfigDir, "Pulumi."+o.ConfigFrom+".yaml")
	}
	if o.Backend, err = resolveBackend(o.Backend, project, o.RepoRoot); err != nil {
		return o, err
	}
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(o.RepoRoot, ".tools", "engine", o.Stack)
	}
	if o.Tools == "" {
		o.Tools = filepath.Join(o.RepoRoot, ".tools")
		if _, err := os.Stat(filepath.Join(o.Tools, "bin", "pulumi")); err != nil {
			o.Tools = ""
		}
	}
	if o.Passphrase == "" {
		o.Passphrase = os.Getenv("PULUMI_CONFIG_PASSPHRASE")
	}
	if dir, ok := fileStateDir(o.Backend); o.Passphrase == "" && ok && isUnder(dir, filepath.Join(o.RepoRoot, ".tools")) {
		o.Passphrase = LocalPassphrase
	}
	return o, nil
}

// Open validates the stack file (every problem at once, unknown keys included) and prepares the stack, creating it
// on the backend when new, with the secrets provider its stack file names.
func Open(ctx context.Context, o Options) (*Stack, error) {
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	sc, err := platform.ReadStackFile(o.StackFile)
	if err != nil {
		return nil, err
	}
	for k, v := range o.Config {
		sc.Values[k] = v
	}
	for k := range o.SecretConfig {
		sc.Values[k] = platform.SecretPlaceholder
		sc.Secrets = append(sc.Secrets, k)
	}
	args, err := platform.Load(sc.Source(), platform.ConfigKeys)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", o.Stack, err)
	}
	config, err := partConfig(o, o.StackFile, args, nil)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", o.Stack, err)
	}
	if err := os.MkdirAll(o.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	if dir, ok := fileStateDir(o.Backend); ok {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("environment: %w", err)
		}
		repaired, err := repairState(dir, time.Now())
		if err != nil {
			return nil, err
		}
		for _, line := range repaired {
			fmt.Fprintln(progressOf(o), line)
		}
	}
	provider, err := writeWorkspace(o, o.StackFile)
	if err != nil {
		return nil, err
	}
	// The CLI runs in WorkDir, so a relative pack path would be looked up there.
	packs := make([]string, len(o.PolicyPacks))
	for i, p := range o.PolicyPacks {
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.RepoRoot, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("environment: policy pack: %w", err)
		}
		packs[i] = p
	}
	o.PolicyPacks = packs
	program := o.Program
	if program == nil {
		program = platform.InlineProgram(o.RepoRoot, o.WorkDir)
	}

	env := engineEnv(o)
	wsOpts, cli, err := workspaceCLI(o.Tools, env)
	if err != nil {
		return nil, err
	}
	ws, err := auto.NewLocalWorkspace(ctx, append(wsOpts,
		auto.WorkDir(o.WorkDir),
		// A stack is created with its stack file's provider: without it the CLI would give a new stack on a DIY
		// backend the passphrase provider and drop the file's key (pulumi pkg v3.274.1 secrets/passphrase/manager.go).
		auto.SecretsProvider(provider),
		auto.Program(program),
	)...)
	if err != nil {
		return nil, fmt.Errorf("environment: workspace for stack %s: %w", o.Stack, err)
	}
	var st auto.Stack
	if o.NoCreate {
		st, err = auto.SelectStack(ctx, o.Stack, ws)
		if auto.IsSelectStack404Error(err) {
			return nil, &MissingStackError{Stack: o.Stack}
		}
	} else {
		st, err = auto.UpsertStack(ctx, o.Stack, ws)
	}
	if err != nil {
		return nil, fmt.Errorf("environment: selecting stack %s on %s: %w", o.Stack, o.Backend, err)
	}
	s := &Stack{Stack: st, opts: o, partConfig: config, args: args, cli: cli, env: env}
	if len(o.Config) > 0 {
		if err := s.setConfig(ctx, o.Config); err != nil {
			return nil, err
		}
	}
	// The Automation API's SetAllConfig puts each value on the pulumi CLI's command line (pulumi sdk v3.274.1
	// go/auto/local_workspace.go), where any user of the machine reads it: a secret goes through stdin, which
	// `pulumi config set` reads when no value is given.
	for _, k := range slices.Sorted(maps.Keys(o.SecretConfig)) {
		if _, err := s.runWithInput(ctx, strings.NewReader(o.SecretConfig[k]),
			"config", "set", "--stack", o.Stack, "--secret", "--raw", k); err != nil {
			return nil, fmt.Errorf("environment: setting secret %s of stack %s: %w", k, o.Stack, err)
		}
	}
	return s, nil
}

// setConfig writes plaintext values into the stack's working copy of its config (WorkDir's Pulumi.<stack>.yaml),
// which the engine reads, rather than through the Automation API's SetConfig and SetAllConfig: those put each value
// on the pulumi CLI's command line (pulumi sdk v3.274.1 go/auto/local_workspace.go), and one value longer than 128 KiB
// (MAX_ARG_STRLEN, https://man7.org/linux/man-pages/man2/execve.2.html), such as the placement of 1,000 tenants, is
// refused with "argument list too long". It also spares a CLI process per stack.
func (s *Stack) setConfig(ctx context.Context, values map[string]string) error {
	ws := s.Workspace()
	settings := &workspace.ProjectStack{}
	// A stack that exists on the backend has no working copy of its config in a new WorkDir yet: the CLI would start
	// one, as this does.
	switch _, err := os.Stat(filepath.Join(s.opts.WorkDir, "Pulumi."+s.opts.Stack+".yaml")); {
	case err == nil:
		if settings, err = ws.StackSettings(ctx, s.opts.Stack); err != nil {
			return fmt.Errorf("environment: reading the config of stack %s: %w", s.opts.Stack, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		// Writing a file of these values alone would drop the secrets provider, the salt and the secure values.
		return fmt.Errorf("environment: reading the config of stack %s: %w", s.opts.Stack, err)
	}
	if settings.Config == nil {
		settings.Config = config.Map{}
	}
	for k, v := range values {
		key, err := config.ParseKey(k)
		if err != nil {
			return fmt.Errorf("environment: config of stack %s: %w", s.opts.Stack, err)
		}
		settings.Config[key] = config.NewValue(v)
	}
	if err := ws.SaveStackSettings(ctx, s.opts.Stack, settings); err != nil {
		return fmt.Errorf("environment: setting config of stack %s: %w", s.opts.Stack, err)
	}
	return nil
}

// MissingStackError is a stack the backend does not hold, opened with NoCreate.
type MissingStackError struct{ Stack string }

func (e *MissingStackError) Error() string {
	return fmt.Sprintf("stack %s is not on the backend yet: its first up creates it", e.Stack)
}

// engineEnv is what the stack's pulumi processes get in their environment beyond the caller's own.
func engineEnv(o Options) map[string]string {
	env := map[string]string{}
	if o.Passphrase != "" {
		env["PULUMI_CONFIG_PASSPHRASE"] = o.Passphrase
	}
	if o.skipCheckpoints {
		env["PULUMI_SKIP_CHECKPOINTS"] = "true"
	}
	// The engines' CPU is what bounds an environment on a few cores, and garbage collection was about 30% of the pulumi
	// CLI's CPU in a preview's profile: a heap goal four times the default's took a third off a 100-tenant up and
	// preview, for about 1.4 times the memory (docs/benchmarks.md). A GOGC of the caller's wins.
	if !callerSetsGOGC() {
		env["GOGC"] = strconv.Itoa(EngineGCPercent)
	}
	return env
}

// workspaceCLI are the workspace options that run the pulumi CLI of tools (as `make tools` builds it: plugins from
// there only, nothing downloaded), or the one on PATH when tools is empty, with env added to the CLI's environment.
func workspaceCLI(tools string, env map[string]string) ([]auto.LocalWorkspaceOption, auto.PulumiCommand, error) {
	all := map[string]string{"PULUMI_SKIP_UPDATE_CHECK": "true"}
	maps.Copy(all, env)
	if tools == "" {
		cmd, err := auto.NewPulumiCommand(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("environment: the pulumi CLI on PATH (or run `make tools`): %w", err)
		}
		return []auto.LocalWorkspaceOption{auto.Pulumi(cmd), auto.EnvVars(all)}, cmd, nil
	}
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: tools})
	if err != nil {
		return nil, nil, fmt.Errorf("environment: the pulumi CLI in %s/bin (run `make tools`): %w", tools, err)
	}
	all["PATH"] = filepath.Join(tools, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	all["PULUMI_HOME"] = filepath.Join(tools, "pulumi-home")
	return []auto.LocalWorkspaceOption{auto.PulumiHome(filepath.Join(tools, "pulumi-home")), auto.Pulumi(cmd), auto.EnvVars(all)}, cmd, nil
}

// CLI are the workspace options that run the pulumi CLI `make tools` built in repoRoot/.tools, with plugins from
// there only (nothing may be downloaded) and env added to the CLI's environment.
func CLI(repoRoot string, env map[string]string) ([]auto.LocalWorkspaceOption, error) {
	opts, _, err := workspaceCLI(filepath.Join(repoRoot, ".tools"), env)
	return opts, err
}

// writeWorkspace writes the project file (the project's name and runtime, and the backend) and the stack's working
// copy of its config, and returns the secrets provider the stack file names. The working copy keeps the encryption
// salt of an earlier run, so secrets already in the state stay readable.
func writeWorkspace(o Options, stackFile string) (string, error) {
	project := fmt.Sprintf("name: %s\nruntime: go\nbackend:\n  url: %s\n", projectName, o.Backend)
	if err := os.WriteFile(filepath.Join(o.WorkDir, "Pulumi.yaml"), []byte(project), 0o600); err != nil {
		return "", fmt.Errorf("environment: writing project file: %w", err)
	}
	src, err := os.ReadFile(stackFile)
	if err != nil {
		return "", fmt.Errorf("environment: %w", err)
	}
	var file struct {
		SecretsProvider string `json:"secretsprovider"`
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		return "", fmt.Errorf("environment: %s: %w", stackFile, err)
	}
	provider := file.SecretsProvider
	if provider == "" || provider == "default" {
		provider = "passphrase"
	}
	copyPath := filepath.Join(o.WorkDir, "Pulumi."+o.Stack+".yaml")
	var salt string
	if old, err := os.ReadFile(copyPath); err == nil {
		var doc struct {
			EncryptionSalt string `json:"encryptionsalt"`
		}
		if yaml.Unmarshal(old, &doc) == nil {
			salt = doc.EncryptionSalt
		}
	}
	// The stack file's own salt decrypts its secure values, so a first run keeps it when there are some (every stack
	// of a grouped environment reads the same file, with the same passphrase). A file without any (the local stack's,
	// whose salt serves the CLI run from the repository root with the local passphrase) leaves the salt to this
	// stack, whose passphrase may differ. A salt of an earlier run wins: the state was encrypted with it.
	sc, err := platform.ReadStackFile(stackFile)
	if err != nil {
		return "", fmt.Errorf("environment: %w", err)
	}
	out := string(src)
	if salt != "" || len(sc.Secrets) == 0 {
		var lines []string
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "encryptionsalt:") {
				lines = append(lines, line)
			}
		}
		out = strings.Join(lines, "\n")
	}
	if salt != "" {
		out = "encryptionsalt: " + salt + "\n" + out
	}
	if err := os.WriteFile(copyPath, []byte(out), 0o600); err != nil {
		return "", fmt.Errorf("environment: writing working stack config: %w", err)
	}
	return provider, nil
}

func (s *Stack) progress() io.Writer { return progressOf(s.opts) }

func progressOf(o Options) io.Writer {
	if o.Progress == nil {
		return io.Discard
	}
	return o.Progress
}

// Up refreshes the stack (unless SkipRefresh), so that what was deleted or edited by hand is put back, then applies
// it with the policy packs; opts add to (or override) the defaults.
func (s *Stack) Up(ctx context.Context, opts ...optup.Option) (auto.UpResult, error) {
	defaults := []optup.Option{optup.ProgressStreams(s.progress()), optup.ErrorProgressStreams(s.progress())}
	if !s.opts.SkipRefresh {
		defaults = append(defaults, optup.Refresh())
	}
	if len(s.opts.PolicyPacks) > 0 {
		defaults = append(defaults, optup.PolicyPacks(s.opts.PolicyPacks...))
	}
	done, err := s.begin(OpUp)
	if err != nil {
		closeStreams(applied[optup.Options](opts).EventStreams)
		return auto.UpResult{}, err
	}
	defer done()
	if err := s.unprotectRetiredTenants(ctx); err != nil {
		closeStreams(applied[optup.Options](opts).EventStreams)
		return auto.UpResult{}, err
	}
	// A tenant's removal deletes its namespace: say what that waits for.
	finish := s.watchTerminating(ctx)
	res, err := s.Stack.Up(ctx, append(defaults, opts...)...)
	return res, finish(err)
}

// Preview refreshes (unless SkipRefresh), so drift shows as a diff, then previews the stack with the policy packs;
// opts add to (or override) the defaults. It refuses as Up does a tenant the stack holds that the stack file lists
// nowhere, and lists what the up deletes of each retired tenant, which it previews without: their protection, which
// only the up lifts, would fail the preview.
func (s *Stack) Preview(ctx context.Context, opts ...optpreview.Option) (auto.PreviewResult, error) {
	defaults := []optpreview.Option{optpreview.Diff(), optpreview.ProgressStreams(s.progress()),
		optpreview.ErrorProgressStreams(s.progress())}
	retiring, err := s.retiring(ctx)
	if err != nil {
		closeStreams(applied[optpreview.Options](opts).EventStreams)
		return auto.PreviewResult{}, err
	}
	if len(retiring) > 0 {
		defaults = append(defaults, optpreview.Exclude(retiring))
	}
	if !s.opts.SkipRefresh {
		defaults = append(defaults, optpreview.Refresh())
	}
	if len(s.opts.PolicyPacks) > 0 {
		defaults = append(defaults, optpreview.PolicyPacks(s.opts.PolicyPacks...))
	}
	return s.Stack.Preview(ctx, append(defaults, opts...)...)
}

// applied are the options a list of them sets, as the Automation API applies them (optup.Options,
// optpreview.Options).
func applied[O any, A interface{ ApplyOption(*O) }](opts []A) O {
	var o O
	for _, opt := range opts {
		opt.ApplyOption(&o)
	}
	return o
}

// closeStreams closes the event streams a caller handed to an operation that does not run, as the engine closes them
// when one ends: a caller reading them would wait for ever.
func closeStreams(streams []chan<- events.EngineEvent) {
	for _, ch := range streams {
		close(ch)
	}
}

// retiring says, for each retired tenant the stack holds, every resource the up deletes with it, and returns their
// URNs; a tenant held and listed nowhere is refused (unlisted).
func (s *Stack) retiring(ctx context.Context) ([]string, error) {
	res, err := s.resources(ctx)
	if err != nil {
		return nil, err
	}
	held := tenantResources(res)
	if err := unlisted(s.opts.Stack, slices.Collect(maps.Keys(held)), s.args); err != nil {
		return nil, err
	}
	var urns []string
	for _, tenant := range slices.Sorted(maps.Keys(held)) {
		if !slices.Contains(s.args.RetiredTenants, tenant) {
			continue
		}
		lines := make([]string, len(held[tenant]))
		for i, urn := range held[tenant] {
			lines[i] = "    - delete " + urnType(urn) + " " + urnName(urn)
		}
		s.say("%s: tenant %s is retired (retiredTenants): the up deletes its namespace %s with every volume in it, "+
			"its vCluster, and these %d resources:\n%s", s.opts.Stack, tenant, naming.Namespace(tenant), len(lines),
			strings.Join(lines, "\n"))
		urns = append(urns, held[tenant]...)
	}
	return urns, nil
}

// Destroy deletes everything the stack created, protected tenants and guards included (a destroy is the decision to
// delete them); the stack itself stays, with empty state.
func (s *Stack) Destroy(ctx context.Context) (auto.DestroyResult, error) {
	return s.destroy(ctx, stackDestroy{})
}

// stackDestroy is what a destroy knows of the stack before it starts: its resources (nil: read them) and the
// namespaces it deletes ahead of its engine.
type stackDestroy struct {
	recorded []stateResource
	ahead    []recordedNamespace
}

// destroy is Destroy that also deletes the namespaces ahead (deleteNamespacesFirst) once the engine has started: at its
// first delete step, when it holds the stack's lock, has read its config and secrets and runs its providers, so an
// engine that cannot start leaves every namespace in place.
func (s *Stack) destroy(ctx context.Context, d stackDestroy) (res auto.DestroyResult, err error) {
	done, err := s.begin(OpDestroy)
	if err != nil {
		return auto.DestroyResult{}, err
	}
	// A destroy that failed stays recorded, so that recover resumes it instead of an up recreating what it deleted.
	defer func() {
		if err == nil {
			done()
		}
	}()
	if d.recorded == nil {
		if d.recorded, err = s.resources(ctx); err != nil {
			return auto.DestroyResult{}, err
		}
	}
	if err := s.unprotectAll(ctx, d.recorded); err != nil {
		return auto.DestroyResult{}, err
	}
	opts := []optdestroy.Option{optdestroy.ProgressStreams(s.progress()), optdestroy.ErrorProgressStreams(s.progress())}
	var started sync.WaitGroup
	if client := s.clusterClient(ctx); client != nil && len(d.ahead) > 0 {
		stream := make(chan events.EngineEvent)
		opts = append(opts, optdestroy.EventStreams(stream))
		started.Add(1)
		go func() {
			defer started.Done()
			deleted := false
			for ev := range stream {
				if pre := ev.ResourcePreEvent; pre != nil && pre.Metadata.Op == apitype.OpDelete && !deleted {
					deleted = true
					deleteNamespacesFirst(ctx, client, d.ahead, s.say)
				}
			}
		}()
	}
	finish := s.watchTerminating(ctx)
	res, err = s.Stack.Destroy(ctx, opts...)
	started.Wait()
	return res, finish(err)
}
