package pipeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Source is where raw stack config comes from: the Pulumi context in a program, a stack file or a map in tests.
// Keys are given without the namespace.
type Source interface {
	Get(key string) (string, bool)
	IsSecret(key string) bool
	// Keys lists every key set in the namespace, so typos are reported; nil when the source cannot list them.
	Keys() []string
}

// ConfigError lists every problem found in a stack config, one per line, each naming its key path.
type ConfigError struct{ Errs field.ErrorList }

func (e *ConfigError) Error() string {
	lines := make([]string, 0, len(e.Errs))
	for _, err := range e.Errs {
		lines = append(lines, "  - "+err.Error())
	}
	return fmt.Sprintf("invalid stack config (%d problems):\n%s", len(e.Errs), strings.Join(lines, "\n"))
}

// Load reads, defaults and validates the whole stack config. It returns every problem at once and touches nothing.
func Load(src Source) (*Config, error) {
	var cfg Config
	var errs field.ErrorList

	if keys := src.Keys(); keys != nil {
		for _, k := range keys {
			if !slices.Contains(knownKeys, k) {
				errs = append(errs, field.NotSupported(path(k), "(set)", knownKeys))
			}
		}
	}

	cfg.Cloud, _ = src.Get(keyCloud)
	objects := []struct {
		key string
		out any
	}{
		{keyGKE, &cfg.GKE}, {keyScaleway, &cfg.Scaleway}, {keyExisting, &cfg.Existing}, {keyGPUPools, &cfg.GPUPools},
		{keyGPUClasses, &cfg.GPUClasses}, {keyTenants, &cfg.Tenants}, {keyDRADriver, &cfg.DRADriver},
		{keyPlatform, &cfg.Platform}, {keyVCluster, &cfg.VCluster},
	}
	for _, o := range objects {
		if raw, ok := src.Get(o.key); ok {
			errs = append(errs, decodeStrict(raw, o.out, path(o.key))...)
		}
	}

	secrets := []struct {
		key string
		out *Secret
	}{
		{keyKubeconfig, &cfg.Secrets.Kubeconfig}, {keyAdminPassword, &cfg.Secrets.PlatformAdminPassword},
		{keyLicenseToken, &cfg.Secrets.PlatformLicenseToken}, {keyAccessKey, &cfg.Secrets.PlatformAccessKey},
	}
	for _, s := range secrets {
		raw, ok := src.Get(s.key)
		if !ok {
			continue
		}
		if !src.IsSecret(s.key) {
			errs = append(errs, field.Invalid(path(s.key), "(plain text)",
				fmt.Sprintf("must be a secret: pulumi config set --secret %s:%s", Namespace, s.key)))
			continue
		}
		*s.out = Secret(raw)
	}

	applyDefaults(&cfg)
	errs = append(errs, validate(&cfg)...)
	if len(errs) > 0 {
		return nil, &ConfigError{Errs: errs}
	}
	return &cfg, nil
}

func path(key string) *field.Path { return field.NewPath(Namespace + ":" + key) }

// decodeStrict decodes a structured config value into out. It first checks the value's shape against out's type,
// reporting every unknown key (a typo must fail, not fall back to a default) and every wrongly typed value with its
// exact path, and decodes only a value of the right shape.
func decodeStrict(raw string, out any, p *field.Path) field.ErrorList {
	var generic any
	if err := json.Unmarshal([]byte(raw), &generic); err != nil {
		return field.ErrorList{field.Invalid(p, raw, "not valid structured config: "+err.Error())}
	}
	if errs := checkShape(generic, reflect.TypeOf(out).Elem(), p); len(errs) > 0 {
		return errs
	}
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return field.ErrorList{field.Invalid(p, raw, err.Error())}
	}
	return nil
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Slice:
		return "list"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

func checkShape(v any, t reflect.Type, p *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil
	}
	wrong := field.ErrorList{field.TypeInvalid(p, v, "must be "+article(jsonKind(t)))}
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrong
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrong
		}
	case reflect.Int:
		if f, ok := v.(float64); !ok || f != float64(int(f)) {
			return wrong
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return wrong
		}
		var errs field.ErrorList
		for i, item := range items {
			errs = append(errs, checkShape(item, t.Elem(), p.Index(i))...)
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong
		}
		var errs field.ErrorList
		for _, k := range sortedKeys(m) {
			errs = append(errs, checkShape(m[k], t.Elem(), p.Child(k))...)
		}
		return errs
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
				names = append(names, name)
			}
		}
		var errs field.ErrorList
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, field.NotSupported(p.Child(k), "(unknown key)", names))
				continue
			}
			errs = append(errs, checkShape(m[k], ft, p.Child(k))...)
		}
		return errs
	}
	return nil
}

func article(kind string) string {
	if strings.IndexAny(kind[:1], "aeiou") == 0 {
		return "an " + kind
	}
	return "a " + kind
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
