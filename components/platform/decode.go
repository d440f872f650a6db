package platform

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Source is where the raw args come from: the Pulumi context in a program, a stack file, a component provider's
// properties or a map in tests. Keys are the top-level keys, without the config namespace; a structured value is its
// JSON.
type Source interface {
	Get(key string) (string, bool)
	IsSecret(key string) bool
	// Keys lists every key set, so typos are reported; nil when the source cannot list them.
	Keys() []string
}

// Keys says how errors name the top-level keys, and what the args are called.
type Keys struct {
	prefix, noun string
}

var (
	// ConfigKeys names keys as the stack config spells them: gpu-tenancy:tenants[0].name.
	ConfigKeys = Keys{prefix: ConfigNamespace + ":", noun: "stack config"}
	// PropertyKeys names them as the component's properties: tenants[0].name. The zero Keys is the same.
	PropertyKeys = Keys{}
)

// Path is the path of a top-level key.
func (k Keys) Path(key string) *field.Path { return field.NewPath(k.prefix + key) }

// setSecret says how to give key (a path below it when sub is set, such as "<tenant>") as a secret, with placeholder
// as the value.
func (k Keys) setSecret(key, sub, placeholder string) string {
	if k.prefix == "" {
		p := key
		if sub != "" {
			p += "." + sub
		}
		return fmt.Sprintf("pass %s as a secret input (pulumi.ToSecret, or fn::secret in YAML)", p)
	}
	if sub != "" {
		return fmt.Sprintf("pulumi config set --secret --path '%s%s.%s' %s", k.prefix, key, sub, placeholder)
	}
	return fmt.Sprintf("pulumi config set --secret %s%s %s", k.prefix, key, placeholder)
}

func (k Keys) what() string {
	if k.noun == "" {
		return "Platform arguments"
	}
	return k.noun
}

// ArgsError lists every problem found in the args, one per line, each naming its key path.
type ArgsError struct {
	Keys Keys
	Errs field.ErrorList
}

func (e *ArgsError) Error() string {
	lines := make([]string, 0, len(e.Errs))
	for _, err := range e.Errs {
		lines = append(lines, "  - "+err.Error())
	}
	return fmt.Sprintf("invalid %s (%d problems):\n%s", e.Keys.what(), len(e.Errs), strings.Join(lines, "\n"))
}

// SecretPlaceholder stands for a secret value that cannot be read where the args are decoded: a stack file read
// without its secrets provider. Decoding checks that the key is a secret and leaves its content to the program.
const SecretPlaceholder = "[secret]"

// Load reads the args from src, then defaults and validates them: every problem at once, and nothing touched. The
// args it returns name their keys as keys does, so NewPlatform's own validation reports the same paths.
func Load(src Source, keys Keys) (*PlatformArgs, error) {
	cfg, errs := decode(src, keys)
	// A block that failed to decode is left empty and validated as such: its own errors come first, and the rules
	// of the blocks that did decode are still checked.
	*cfg = cfg.WithDefaults()
	errs = append(errs, cfg.Validate()...)
	if len(errs) > 0 {
		return nil, &ArgsError{Keys: keys, Errs: errs}
	}
	return cfg, nil
}

// decode reads every key of src into the args: each block straight into its spec, with every unknown key and wrong
// type reported at its path. It applies no default and checks no rule.
func decode(src Source, keys Keys) (*PlatformArgs, field.ErrorList) {
	cfg := PlatformArgs{Keys: keys}
	var errs field.ErrorList
	path := keys.Path

	if set := src.Keys(); set != nil {
		for _, k := range set {
			if !slices.Contains(knownKeys, k) {
				errs = append(errs, field.NotSupported(path(k), k, knownKeys))
			}
		}
	}

	// A block set as a secret would lose its secrecy: its values become names, labels and plain resource inputs.
	// It is refused, and not decoded, so that no error quotes it.
	plain := func(key string) (string, bool) {
		raw, ok := src.Get(key)
		if ok && src.IsSecret(key) {
			errs = append(errs, field.Forbidden(path(key), "is set as a secret, but its values become plain resource "+
				"inputs (names, labels, policies) that would not stay secret: set it in plain text"))
			return "", false
		}
		return raw, ok
	}
	cloud, _ := plain(keyCloud)
	cfg.Cloud = cluster.Flavour(cloud)
	for _, b := range blocks {
		if raw, ok := plain(b.key); ok {
			errs = append(errs, decodeStrict(raw, b.field(&cfg), path(b.key))...)
		}
	}
	if raw, ok := plain(keyGPUPools); ok {
		if pools := poolSpecs(&cfg); pools != nil {
			errs = append(errs, decodeStrict(raw, pools, path(keyGPUPools))...)
		}
	}
	errs = foreignPoolFields(errs, path(keyGPUPools), cfg.Cloud)

	for _, s := range secretStrings {
		if raw, ok := secretValue(src, keys, s.key, &errs); ok {
			*s.field(&cfg) = Secret(raw)
		}
	}
	// A stack file read without its secrets provider holds SecretPlaceholder: the keys are checked when the program runs.
	if raw, ok := secretValue(src, keys, keyAccessKeys, &errs); ok && raw != SecretPlaceholder {
		// Decoded apart from the other blocks: an error must never quote the value.
		if err := json.Unmarshal([]byte(raw), &cfg.Secrets.PlatformAccessKeys); err != nil {
			errs = append(errs, field.Invalid(path(keyAccessKeys), Secret(raw).String(),
				"must map each tenant to its access key: "+keys.setSecret(keyAccessKeys, "<tenant>", "<key>")))
		}
	}
	if _, ok := src.Get(keyAccessKey); ok {
		errs = append(errs, field.Forbidden(path(keyAccessKey), fmt.Sprintf(
			"one key for every tenant's vCluster lets each tenant act on the platform as the key's creator: give each tenant "+
				"a key of its own, scoped to its virtual cluster (%s), and remove this one", keys.setSecret(keyAccessKeys, "<tenant>", "<key>"))))
	}

	return &cfg, errs
}

// secretValue reads a key that may only be set as a secret, reporting one set in plain text.
func secretValue(src Source, keys Keys, key string, errs *field.ErrorList) (string, bool) {
	raw, ok := src.Get(key)
	if !ok {
		return "", false
	}
	if !src.IsSecret(key) {
		*errs = append(*errs, field.Invalid(keys.Path(key), "(plain text)", "must be a secret: "+keys.setSecret(key, "", "<value>")))
		return "", false
	}
	return raw, true
}

// poolSpecs is where `gpuPools` decodes for the chosen cloud: each cloud has its own pool spec. Nil when the cloud
// is unknown (that is reported on its own).
func poolSpecs(cfg *PlatformArgs) any {
	switch cfg.Cloud {
	case cluster.GKE:
		return &cfg.GKE.GPUPools
	case cluster.Scaleway:
		return &cfg.Scaleway.GPUPools
	case cluster.Existing:
		return &cfg.Existing.GPUPools
	}
	return nil
}

// poolTypes are each cloud's pool spec, to tell a field of another cloud from a typo.
var poolTypes = map[cluster.Flavour]reflect.Type{
	cluster.GKE:      reflect.TypeFor[gke.GPUPoolSpec](),
	cluster.Scaleway: reflect.TypeFor[scaleway.GPUPoolSpec](),
	cluster.Existing: reflect.TypeFor[cluster.ExistingPoolSpec](),
}

// foreignPoolFields turns "unknown key" errors in a pool into "not used on this cloud" when the key is another
// cloud's pool field: such a key is likely a stack mixed up with another, not a typo.
func foreignPoolFields(errs field.ErrorList, pools *field.Path, cloud cluster.Flavour) field.ErrorList {
	prefix := pools.String() + "["
	for i, e := range errs {
		if e.Type != field.ErrorTypeNotSupported || e.BadValue != unknownKey || !strings.HasPrefix(e.Field, prefix) {
			continue
		}
		key := e.Field[strings.LastIndex(e.Field, ".")+1:]
		for _, other := range Clouds {
			if f := cluster.Flavour(other); f != cloud && slices.Contains(jsonFields(poolTypes[f]), key) {
				errs[i] = &field.Error{Type: field.ErrorTypeForbidden, Field: e.Field,
					Detail: fmt.Sprintf("is not used on cloud %s (it is a %s field)", cloud, other)}
			}
		}
	}
	return errs
}

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
	case reflect.Float64:
		return "number"
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
	case reflect.Int, reflect.Int32, reflect.Int64:
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			return wrong
		}
	case reflect.Float64:
		if _, ok := v.(float64); !ok {
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
			errs = append(errs, checkShape(m[k], t.Elem(), p.Key(k))...)
		}
		return errs
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong
		}
		fields := JSONFields(t)
		names := jsonFields(t)
		var errs field.ErrorList
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, field.NotSupported(p.Child(k), unknownKey, names))
				continue
			}
			errs = append(errs, checkShape(m[k], ft, p.Child(k))...)
		}
		return errs
	}
	return nil
}

// unknownKey is the value reported for a key the config's type does not have.
const unknownKey = "(unknown key)"

// JSONFields maps the JSON names of a struct's fields to their types, flattening embedded structs as encoding/json
// does: the keys a block of the args accepts.
func JSONFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		switch {
		case f.Anonymous && name == "":
			for k, v := range JSONFields(f.Type) {
				fields[k] = v
			}
		case name != "" && name != "-":
			fields[name] = f.Type
		}
	}
	return fields
}

// jsonFields lists a struct's JSON field names, sorted.
func jsonFields(t reflect.Type) []string { return sortedKeys(JSONFields(t)) }

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
