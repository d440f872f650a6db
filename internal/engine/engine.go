// Package engine drives the real Pulumi engine for a stack of this project through the Automation API, with the
// pipeline as an inline program (no language plugin, no program build), a local file state backend and a
// passphrase secrets provider. `make demo` and the end-to-end tests use it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpu-tenancy/gpu-tenancy/infra/pipeline"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"sigs.k8s.io/yaml"
)

// Options say which stack to drive and where its state lives.
type Options struct {
	// RepoRoot holds Pulumi.yaml, stacks/ and .tools/.
	RepoRoot string
	// Stack names stacks/Pulumi.<Stack>.yaml.
	Stack string
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
	Progress io.Writer
}

// LocalPassphrase is the passphrase of stacks run on the local control plane when none is given; it protects
// nothing of value (the local cluster's throwaway credentials) and is documented in the README.
const LocalPassphrase = "gpu-tenancy-local"

// Stack is a stack ready for up, preview and destroy.
type Stack struct {
	auto.Stack
	opts Options
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
	stackFile := filepath.Join(o.RepoRoot, "stacks", "Pulumi."+o.Stack+".yaml")
	sc, err := pipeline.ReadStackFile(stackFile)
	if err != nil {
		return nil, err
	}
	for k, v := range o.Config {
		sc.Values[k] = v
	}
	for k := range o.SecretConfig {
		sc.Values[k] = pipeline.SecretPlaceholder
		sc.Secrets = append(sc.Secrets, k)
	}
	if _, err := pipeline.Load(sc.Source()); err != nil {
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

	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: tools})
	if err != nil {
		return nil, fmt.Errorf("engine: the pulumi CLI in %s/bin (run `make tools`): %w", tools, err)
	}
	env := map[string]string{
		"PULUMI_CONFIG_PASSPHRASE": o.Passphrase,
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		// Plugins come from .tools only: nothing may be downloaded.
		"PATH": filepath.Join(tools, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	ws, err := auto.NewLocalWorkspace(ctx,
		auto.WorkDir(o.WorkDir),
		auto.PulumiHome(filepath.Join(tools, "pulumi-home")),
		auto.Pulumi(cmd),
		auto.EnvVars(env),
		auto.SecretsProvider("passphrase"),
		auto.Program(pipeline.Program(o.RepoRoot)),
	)
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
	return &Stack{Stack: st, opts: o}, nil
}

// writeWorkspace writes the project file and the stack's working copy of its config. The working copy keeps the
// encryption salt of an earlier run, so secrets already in the state stay readable.
func writeWorkspace(o Options, stackFile string) error {
	project := fmt.Sprintf("name: gpu-tenancy\nruntime: go\nbackend:\n  url: file://%s\n", o.StateDir)
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
	out := string(src)
	if salt != "" {
		out = "encryptionsalt: " + salt + "\n" + out
	}
	if err := os.WriteFile(copyPath, []byte(out), 0o600); err != nil {
		return fmt.Errorf("engine: writing working stack config: %w", err)
	}
	return nil
}

func (s *Stack) progress() io.Writer {
	if s.opts.Progress == nil {
		return io.Discard
	}
	return s.opts.Progress
}

// Up applies the stack.
func (s *Stack) Up(ctx context.Context) (auto.UpResult, error) {
	return s.Stack.Up(ctx, optup.ProgressStreams(s.progress()), optup.ErrorProgressStreams(s.progress()))
}

// Preview previews the stack, showing the diff.
func (s *Stack) Preview(ctx context.Context) (auto.PreviewResult, error) {
	return s.Stack.Preview(ctx, optpreview.Diff(), optpreview.ProgressStreams(s.progress()),
		optpreview.ErrorProgressStreams(s.progress()))
}

// Destroy deletes everything the stack created; the stack itself stays, with empty state.
func (s *Stack) Destroy(ctx context.Context) (auto.DestroyResult, error) {
	return s.Stack.Destroy(ctx, optdestroy.ProgressStreams(s.progress()), optdestroy.ErrorProgressStreams(s.progress()))
}
