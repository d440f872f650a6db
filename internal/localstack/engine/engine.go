// Package engine drives the real Pulumi engine for a stack of this project through the Automation API, with the
// platform program as an inline program (no language plugin, no program build), a local file state backend and a
// passphrase secrets provider. `make demo` and the end-to-end tests use it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"
)

// Options say which stack to drive and where its state lives.
type Options struct {
	// RepoRoot holds Pulumi.yaml, stacks/ and .tools/.
	RepoRoot string
	// Stack names the stack, and its config stacks/Pulumi.<Stack>.yaml unless ConfigFrom is set.
	Stack string
	// ConfigFrom names the stack file to take the config from, stacks/Pulumi.<ConfigFrom>.yaml, for a second stack
	// with another's config; default Stack.
	ConfigFrom string
	// WorkDir holds the workspace (project file and the stack's working copy of its config); default
	// .tools/engine/<stack>. The committed stack file is never written.
	WorkDir string
	// StateDir is the file backend's directory; default .tools/state.
	StateDir string
	// Passphrase protects the stack's secrets; default $PULUMI_CONFIG_PASSPHRASE, else a local development value.
	Passphrase string
	// Config overrides keys of the stack file (full keys, raw values as a program receives them).
	Config map[string]string
	// SecretConfig sets secret keys.
	SecretConfig map[string]string
	// Progress receives the engine's progress output; nil discards it.
	Progress io.Writer `json:"-"`
	// PolicyPacks run on every preview and up (`--policy-pack`): paths to policy pack binaries, such as the
	// project's PolicyPack, or to PulumiPolicy.yaml directories; relative paths are taken from RepoRoot. A mandatory
	// violation fails the operation.
	PolicyPacks []string
	// SkipRefresh leaves out the refresh that Up and Preview run first, where speed matters more than seeing drift.
	SkipRefresh bool
	// Program replaces the platform program as the inline program; nil runs platform.InlineProgram(RepoRoot, WorkDir).
	// Tests use it to run
	// a deliberately broken program.
	Program pulumi.RunFunc `json:"-"`
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

// LocalPassphrase is the passphrase of stacks run on the local control plane when none is given; it protects
// nothing of value (the local cluster's throwaway credentials) and is documented in the README.
const LocalPassphrase = "gpu-tenancy-local"

// Stack is a stack ready for up, preview and destroy.
type Stack struct {
	auto.Stack
	opts Options
	// partConfig is the config its part builds from (partConfig), for the record of what an up applied.
	partConfig map[string]any
}

// Open validates the stack file (every problem at once, unknown keys included) and prepares the stack, creating it
// in the state backend when new.
func Open(ctx context.Context, o Options) (*Stack, error) {
	if o.RepoRoot == "" || o.Stack == "" {
		return nil, errors.New("engine: RepoRoot and Stack are required")
	}
	tools := filepath.Join(o.RepoRoot, ".tools")
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(tools, "engine", o.Stack)
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join(tools, "state")
	}
	if o.Passphrase == "" {
		o.Passphrase = os.Getenv("PULUMI_CONFIG_PASSPHRASE")
	}
	if o.Passphrase == "" {
		o.Passphrase = LocalPassphrase
	}
	if o.ConfigFrom == "" {
		o.ConfigFrom = o.Stack
	}
	stackFile := filepath.Join(o.RepoRoot, "stacks", "Pulumi."+o.ConfigFrom+".yaml")
	sc, err := platform.ReadStackFile(stackFile)
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
	config, err := partConfig(o, stackFile, args)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", o.Stack, err)
	}
	for _, dir := range []string{o.WorkDir, o.StateDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	if err := writeWorkspace(o, stackFile); err != nil {
		return nil, err
	}
	repaired, err := repairState(o.StateDir, time.Now())
	if err != nil {
		return nil, err
	}
	for _, line := range repaired {
		fmt.Fprintln(progressOf(o), line)
	}
	// The CLI runs in WorkDir, so a relative pack path would be looked up there.
	packs := make([]string, len(o.PolicyPacks))
	for i, p := range o.PolicyPacks {
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.RepoRoot, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("engine: policy pack: %w", err)
		}
		packs[i] = p
	}
	o.PolicyPacks = packs
	program := o.Program
	if program == nil {
		program = platform.InlineProgram(o.RepoRoot, o.WorkDir)
	}

	cli, err := CLI(o.RepoRoot, map[string]string{"PULUMI_CONFIG_PASSPHRASE": o.Passphrase})
	if err != nil {
		return nil, err
	}
	ws, err := auto.NewLocalWorkspace(ctx, append(cli,
		auto.WorkDir(o.WorkDir),
		auto.SecretsProvider("passphrase"),
		auto.Program(program),
	)...)
	if err != nil {
		return nil, fmt.Errorf("engine: workspace for stack %s: %w", o.Stack, err)
	}
	st, err := auto.UpsertStack(ctx, o.Stack, ws)
	if err != nil {
		return nil, fmt.Errorf("engine: selecting stack %s: %w", o.Stack, err)
	}
	cfg := auto.ConfigMap{}
	for k, v := range o.Config {
		cfg[k] = auto.ConfigValue{Value: v}
	}
	for k, v := range o.SecretConfig {
		cfg[k] = auto.ConfigValue{Value: v, Secret: true}
	}
	if len(cfg) > 0 {
		if err := st.SetAllConfig(ctx, cfg); err != nil {
			return nil, fmt.Errorf("engine: setting config of stack %s: %w", o.Stack, err)
		}
	}
	return &Stack{Stack: st, opts: o, partConfig: config}, nil
}

// CLI are the workspace options that run the pulumi CLI `make tools` built in repoRoot/.tools, with plugins from
// there only (nothing may be downloaded) and env added to the CLI's environment.
func CLI(repoRoot string, env map[string]string) ([]auto.LocalWorkspaceOption, error) {
	tools := filepath.Join(repoRoot, ".tools")
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: tools})
	if err != nil {
		return nil, fmt.Errorf("engine: the pulumi CLI in %s/bin (run `make tools`): %w", tools, err)
	}
	all := map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PATH":                     filepath.Join(tools, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	maps.Copy(all, env)
	return []auto.LocalWorkspaceOption{auto.PulumiHome(filepath.Join(tools, "pulumi-home")), auto.Pulumi(cmd), auto.EnvVars(all)}, nil
}

// writeWorkspace writes the project file and the stack's working copy of its config. The working copy keeps the
// encryption salt of an earlier run, so secrets already in the state stay readable.
func writeWorkspace(o Options, stackFile string) error {
	project := fmt.Sprintf("name: %s\nruntime: go\nbackend:\n  url: file://%s?%s\n", projectName, o.StateDir, metadataSkip)
	if err := os.WriteFile(filepath.Join(o.WorkDir, "Pulumi.yaml"), []byte(project), 0o600); err != nil {
		return fmt.Errorf("engine: writing project file: %w", err)
	}
	src, err := os.ReadFile(stackFile)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
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
		return fmt.Errorf("engine: %w", err)
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
		return fmt.Errorf("engine: writing working stack config: %w", err)
	}
	return nil
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
		return auto.UpResult{}, err
	}
	defer done()
	// A tenant's removal deletes its namespace: say what that waits for.
	finish := s.watchTerminating(ctx)
	res, err := s.Stack.Up(ctx, append(defaults, opts...)...)
	return res, finish(err)
}

// Preview refreshes (unless SkipRefresh), so drift shows as a diff, then previews the stack with the policy packs;
// opts add to (or override) the defaults.
func (s *Stack) Preview(ctx context.Context, opts ...optpreview.Option) (auto.PreviewResult, error) {
	defaults := []optpreview.Option{optpreview.Diff(), optpreview.ProgressStreams(s.progress()),
		optpreview.ErrorProgressStreams(s.progress())}
	if !s.opts.SkipRefresh {
		defaults = append(defaults, optpreview.Refresh())
	}
	if len(s.opts.PolicyPacks) > 0 {
		defaults = append(defaults, optpreview.PolicyPacks(s.opts.PolicyPacks...))
	}
	return s.Stack.Preview(ctx, append(defaults, opts...)...)
}

// Destroy deletes everything the stack created; the stack itself stays, with empty state.
func (s *Stack) Destroy(ctx context.Context) (auto.DestroyResult, error) {
	done, err := s.begin(OpDestroy)
	if err != nil {
		return auto.DestroyResult{}, err
	}
	defer done()
	finish := s.watchTerminating(ctx)
	res, err := s.Stack.Destroy(ctx, optdestroy.ProgressStreams(s.progress()), optdestroy.ErrorProgressStreams(s.progress()))
	return res, finish(err)
}
