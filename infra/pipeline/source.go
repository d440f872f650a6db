package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"
)

// contextSource reads config from a running Pulumi program.
type contextSource struct{ ctx *pulumi.Context }

func (s contextSource) Get(key string) (string, bool) { return s.ctx.GetConfig(Namespace + ":" + key) }
func (s contextSource) IsSecret(key string) bool      { return s.ctx.IsConfigSecret(Namespace + ":" + key) }

// Keys comes from PULUMI_CONFIG, the channel through which the Go language host hands a program its config;
// programs run any other way (inline Automation API, mocks) cannot list keys, and the callers that drive them
// validate the stack file with ReadStackFile first.
func (s contextSource) Keys() []string {
	raw := os.Getenv(pulumi.EnvConfig)
	if raw == "" {
		return nil
	}
	var all map[string]string
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		return nil
	}
	return namespaceKeys(all)
}

func namespaceKeys[V any](all map[string]V) []string {
	keys := []string{}
	for k := range all {
		if rest, ok := strings.CutPrefix(k, Namespace+":"); ok {
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

// SecretPlaceholder stands in for a secure value read from a stack file without its secrets provider.
const SecretPlaceholder = "[secret]"

// ReadStackFile reads stacks/Pulumi.<stack>.yaml.
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

func (m mapSource) Get(key string) (string, bool) { v, ok := m.values[Namespace+":"+key]; return v, ok }
func (m mapSource) IsSecret(key string) bool      { return slices.Contains(m.secrets, Namespace+":"+key) }
func (m mapSource) Keys() []string                { return namespaceKeys(m.values) }
