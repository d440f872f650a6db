package platform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"
)

// Program is the gpu-tenancy Pulumi program: the stack's config, loaded and validated whole, as one Platform, and
// its outputs exported. Relative paths in the config are taken from baseDir, or the project directory when empty
// (drivers whose workspace is not the project directory give it).
func Program(baseDir string) pulumi.RunFunc { return InlineProgram(baseDir, "") }

// InlineProgram is Program run inline by the Automation API in workspace, the directory the CLI reads the project
// and stack files from. The SDK hands an inline program its config but no list of the keys set (and no project
// directory), so the keys are read from those files there, and a misspelt key fails the run as it fails Program.
func InlineProgram(baseDir, workspace string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		args, err := Load(contextSource{ctx: ctx, workspace: workspace}, ConfigKeys)
		if err != nil {
			return err
		}
		args.BaseDir = baseDir
		p, err := NewPlatform(ctx, ConfigNamespace, args)
		if err != nil {
			return err
		}
		ctx.Export("tenants", p.Tenants)
		ctx.Export("kubeconfig", p.Kubeconfig)
		ctx.Export("flavour", p.Flavour)
		return nil
	}
}

// contextSource reads config from a running Pulumi program; workspace is where the CLI read it from, when the
// program runs inline.
type contextSource struct {
	ctx       *pulumi.Context
	workspace string
}

func (s contextSource) Get(key string) (string, bool) {
	return s.ctx.GetConfig(ConfigNamespace + ":" + key)
}
func (s contextSource) IsSecret(key string) bool {
	return s.ctx.IsConfigSecret(ConfigNamespace + ":" + key)
}

// Keys lists the keys so that a misspelt one fails the run. The Go language host hands a program its config in
// PULUMI_CONFIG; an inline program of the Automation API gets no such list, so the keys come from the files the CLI
// read the config from: the project's own config and the stack file in the project's stackConfigDir. Nil (keys
// unchecked) only when there are no such files, as under mocks.
func (s contextSource) Keys() []string {
	if raw := os.Getenv(pulumi.EnvConfig); raw != "" {
		var all map[string]string
		if err := json.Unmarshal([]byte(raw), &all); err != nil {
			return nil
		}
		return namespaceKeys(all)
	}
	dir := s.workspace
	if dir == "" {
		dir = s.ctx.RootDirectory()
	}
	return projectKeys(dir, s.ctx.Stack())
}

// projectKeys are the config keys set for stack in the project in root: in Pulumi.yaml's config block and in the
// stack file. Nil when root holds no project file.
func projectKeys(root, stack string) []string {
	if root == "" {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(root, "Pulumi.yaml"))
	if err != nil {
		return nil
	}
	var project struct {
		StackConfigDir string         `json:"stackConfigDir"`
		Config         map[string]any `json:"config"`
	}
	if yaml.Unmarshal(raw, &project) != nil {
		return nil
	}
	keys := namespaceKeys(project.Config)
	sc, err := ReadStackFile(filepath.Join(root, project.StackConfigDir, "Pulumi."+stack+".yaml"))
	if err != nil {
		return keys
	}
	for _, k := range namespaceKeys(sc.Values) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func namespaceKeys[V any](all map[string]V) []string {
	keys := []string{}
	for k := range all {
		if rest, ok := strings.CutPrefix(k, ConfigNamespace+":"); ok {
			keys = append(keys, rest)
		}
	}
	sort.Strings(keys)
	return keys
}

// StackConfig is a stack file's config: full keys (`gpu-tenancy:tenants`) to raw values as a program receives them
// (structured values JSON-encoded). Secure values cannot be decrypted here: they hold SecretPlaceholder and their
// keys are listed in Secrets.
type StackConfig struct {
	Stack   string
	Values  map[string]string
	Secrets []string
}

// ReadStackFile reads a stack file, Pulumi.<stack>.yaml.
func ReadStackFile(file string) (StackConfig, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return StackConfig{}, fmt.Errorf("reading stack file: %w", err)
	}
	var doc struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return StackConfig{}, fmt.Errorf("parsing stack file %s: %w", file, err)
	}
	base := file[strings.LastIndex(file, "/")+1:]
	sc := StackConfig{
		Stack:  strings.TrimSuffix(strings.TrimPrefix(base, "Pulumi."), ".yaml"),
		Values: map[string]string{},
	}
	for _, k := range sortedKeys(doc.Config) {
		v, secret := replaceSecure(doc.Config[k])
		if secret {
			sc.Secrets = append(sc.Secrets, k)
		}
		if s, ok := v.(string); ok {
			sc.Values[k] = s
			continue
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return StackConfig{}, fmt.Errorf("encoding %s from %s: %w", k, file, err)
		}
		sc.Values[k] = string(enc)
	}
	return sc, nil
}

// replaceSecure swaps every `{secure: ...}` leaf for SecretPlaceholder and reports whether it found one.
func replaceSecure(v any) (any, bool) {
	switch val := v.(type) {
	case map[string]any:
		if _, ok := val["secure"]; ok && len(val) == 1 {
			return SecretPlaceholder, true
		}
		found := false
		for k, item := range val {
			var f bool
			val[k], f = replaceSecure(item)
			found = found || f
		}
		return val, found
	case []any:
		found := false
		for i, item := range val {
			var f bool
			val[i], f = replaceSecure(item)
			found = found || f
		}
		return val, found
	}
	return v, false
}

// Source returns the stack config as a Source, for validating a stack file without running a program.
func (sc StackConfig) Source() Source { return mapSource{values: sc.Values, secrets: sc.Secrets} }

type mapSource struct {
	values  map[string]string
	secrets []string
}

func (m mapSource) Get(key string) (string, bool) {
	v, ok := m.values[ConfigNamespace+":"+key]
	return v, ok
}
func (m mapSource) IsSecret(key string) bool {
	return slices.Contains(m.secrets, ConfigNamespace+":"+key)
}
func (m mapSource) Keys() []string { return namespaceKeys(m.values) }
