package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// typePrefix is the token prefix of the schema's object types.
const typePrefix = Name + ":index:"

// Schema generates the package schema: the Platform's input properties and their object types from the args' Go
// types (platform.Properties, JSON names as the stack config spells them), secrets marked, and every description
// from the config reference (docs/installation-configuration.md), whose rows must all name a property (a row for a key that does not exist
// fails the generation).
func Schema(reference []byte) ([]byte, error) {
	spec, _, err := packageSpec(reference)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// packageSpec is the package schema Schema writes, and the config reference's rows it read.
func packageSpec(reference []byte) (schema.PackageSpec, map[string]refRow, error) {
	docs, err := configReference(reference)
	if err != nil {
		return schema.PackageSpec{}, nil, err
	}
	g := &generator{docs: docs, used: map[string]bool{}, types: map[string]schema.ComplexTypeSpec{}, names: typeNames()}
	inputs := map[string]schema.PropertySpec{}
	for _, prop := range platform.Properties() {
		spec := g.property(prop.Name, prop.Types)
		spec.Secret = prop.Secret
		inputs[prop.Name] = spec
	}
	var unused []string
	for key := range docs {
		if !g.used[key] {
			unused = append(unused, key)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return schema.PackageSpec{}, nil, fmt.Errorf("the config reference documents keys the Platform does not have: %s", strings.Join(unused, ", "))
	}
	g.types[typePrefix+"TenantOutputs"] = schema.ComplexTypeSpec{ObjectTypeSpec: schema.ObjectTypeSpec{
		Type:        "object",
		Description: "What a tenant got: its host namespace, granted classes and vCluster kubeconfig.",
		Properties: map[string]schema.PropertySpec{
			"namespace":        {TypeSpec: schema.TypeSpec{Type: "string"}, Description: "The tenant's host namespace."},
			"classes":          {TypeSpec: schema.TypeSpec{Type: "array", Items: &schema.TypeSpec{Type: "string"}}, Description: "The GPU classes granted to the tenant."},
			"kubeconfigSecret": {TypeSpec: schema.TypeSpec{Type: "string"}, Description: "The host Secret (`<namespace>/<name>`) holding the vCluster's kubeconfig, when tenants get a vCluster."},
			"kubeconfig":       {TypeSpec: schema.TypeSpec{Type: "string"}, Secret: true, Description: "The vCluster's kubeconfig, while `vcluster.await` is on."},
		},
		Required: []string{"namespace", "classes"},
	}}
	spec := schema.PackageSpec{
		Name:        Name,
		DisplayName: "GPU tenancy",
		Version:     Version,
		Description: "A multi-tenant GPU Kubernetes platform as one component: cloud cluster, NVIDIA DRA driver, vCluster Platform, per-tenant GPU classes and virtual clusters, with host-side guard rails.",
		Keywords:    []string{"kubernetes", "gpu", "multi-tenancy", "category/cloud", "kind/component"},
		License:     "Apache-2.0",
		Resources: map[string]schema.ResourceSpec{platform.Type: {
			IsComponent: true,
			ObjectTypeSpec: schema.ObjectTypeSpec{
				Type: "object",
				Description: "The whole GPU tenancy platform on one cluster. Its arguments are the documented stack config " +
					"(docs/installation-configuration.md, \"Config reference\"), validated whole, every problem at once with its property path, before " +
					"anything is registered.",
				Properties: map[string]schema.PropertySpec{
					"tenants": {TypeSpec: schema.TypeSpec{Type: "object", AdditionalProperties: &schema.TypeSpec{Ref: "#/types/" + typePrefix + "TenantOutputs"}},
						Description: "Each tenant's namespace, classes and kubeconfig, by tenant name."},
					"kubeconfig": {TypeSpec: schema.TypeSpec{Type: "string"}, Secret: true, Description: "Reaches the host cluster."},
					"flavour":    {TypeSpec: schema.TypeSpec{Type: "string"}, Description: "Where the cluster comes from: `gke`, `scaleway` or `existing`."},
				},
				Required: []string{"tenants", "kubeconfig", "flavour"},
			},
			InputProperties: inputs,
			RequiredInputs:  []string{"cloud"},
		}},
		Types: g.types,
		// The SDK names the TypeScript and Python snippets of the docs use.
		Language: map[string]schema.RawMessage{
			"nodejs": schema.RawMessage(`{"packageName":"@gpu-tenancy/gpu-tenancy"}`),
			"python": schema.RawMessage(`{"packageName":"pulumi_gpu_tenancy"}`),
		},
	}
	return spec, docs, nil
}

// generator walks the args' Go types into schema types.
type generator struct {
	docs  map[string]refRow
	used  map[string]bool
	types map[string]schema.ComplexTypeSpec
	names map[reflect.Type]string
}

// property is the property at path, of one Go type, or of several whose fields merge (the pools of each cloud).
func (g *generator) property(path string, types []reflect.Type) schema.PropertySpec {
	spec := schema.PropertySpec{TypeSpec: g.typeSpec(path, types)}
	spec.Description = g.describe(path)
	if spec.Description == "" && (spec.Type == "object" && spec.AdditionalProperties != nil) {
		spec.Description = g.describe(path + ".<>")
	}
	return spec
}

func (g *generator) describe(path string) string {
	d, ok := g.docs[path]
	if ok {
		g.used[path] = true
	}
	return withDefault(d.meaning, d.def)
}

func (g *generator) typeSpec(path string, types []reflect.Type) schema.TypeSpec {
	// An optional block (a pointer) has its struct's schema.
	types = slices.Clone(types)
	for i := range types {
		for types[i].Kind() == reflect.Pointer {
			types[i] = types[i].Elem()
		}
	}
	t := types[0]
	switch t.Kind() {
	case reflect.String:
		return schema.TypeSpec{Type: "string"}
	case reflect.Bool:
		return schema.TypeSpec{Type: "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return schema.TypeSpec{Type: "integer"}
	case reflect.Float64:
		return schema.TypeSpec{Type: "number"}
	case reflect.Slice:
		items := g.typeSpec(path+"[]", elems(types))
		return schema.TypeSpec{Type: "array", Items: &items}
	case reflect.Map:
		values := g.typeSpec(path+".<>", elems(types))
		return schema.TypeSpec{Type: "object", AdditionalProperties: &values}
	case reflect.Struct:
		return schema.TypeSpec{Ref: "#/types/" + g.object(path, types)}
	}
	panic(fmt.Sprintf("schema: %s has Go type %s, which has no schema type", path, t))
}

func elems(types []reflect.Type) []reflect.Type {
	out := make([]reflect.Type, len(types))
	for i, t := range types {
		out[i] = t.Elem()
	}
	return out
}

// object registers the object type of the structs at path and returns its token. Several structs merge into one
// type: the pools of each cloud, whose fields are used on their own cloud only.
func (g *generator) object(path string, types []reflect.Type) string {
	name, ok := blockTypes[path]
	if !ok {
		name = g.names[types[0]]
	}
	token := typePrefix + name
	if _, done := g.types[token]; done {
		return token
	}
	g.types[token] = schema.ComplexTypeSpec{} // a placeholder against recursion
	fields := map[string][]reflect.Type{}
	for _, t := range types {
		for name, ft := range platform.JSONFields(t) {
			fields[name] = append(fields[name], ft)
		}
	}
	props := map[string]schema.PropertySpec{}
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		props[field] = g.property(path+"."+field, fields[field])
	}
	g.types[token] = schema.ComplexTypeSpec{ObjectTypeSpec: schema.ObjectTypeSpec{Type: "object", Properties: props}}
	return token
}

// blockTypes name the types of the top-level blocks (and their items) after their key: their Go names (Settings,
// Spec) say little out of their package, and an SDK adds its own Args suffix.
var blockTypes = map[string]string{
	"gke": "GkeCluster", "scaleway": "ScalewayCluster", "existing": "ExistingCluster", "gpuPools[]": "GpuPool",
	"gpuClasses[]": "GpuClass", "tenants[]": "Tenant", "draDriver": "DraDriver", "platform": "VClusterPlatform",
	"vcluster": "VClusters", "admission": "Admission", "monitoring": "Monitoring", "monitoring.gke": "MonitoringGke",
	"ownership": "Ownership", "timeouts": "Timeouts", "prices": "Prices",
}

// typeNames names every struct type the args reach: its Go name without an Args or Spec suffix, prefixed with its
// package's where two packages have a type of that name (gke's and scaleway's SystemPoolArgs).
func typeNames() map[reflect.Type]string {
	var structs []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		structs = append(structs, t)
		for _, ft := range platform.JSONFields(t) {
			walk(ft)
		}
	}
	for _, p := range platform.Properties() {
		for _, t := range p.Types {
			walk(t)
		}
	}
	short := func(t reflect.Type) string { return strings.TrimSuffix(strings.TrimSuffix(t.Name(), "Args"), "Spec") }
	count := map[string]int{}
	for _, t := range structs {
		count[short(t)]++
	}
	names := map[reflect.Type]string{}
	for _, t := range structs {
		names[t] = short(t)
		if count[short(t)] > 1 {
			pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
			names[t] = strings.ToUpper(pkg[:1]) + pkg[1:] + short(t)
		}
	}
	return names
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	mdLink   = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)
	mapPart  = regexp.MustCompile(`<[a-z]+>`)
)

// refRow is what the config reference says of one key: what it means and its default.
type refRow struct{ meaning, def string }

// configReference reads the config reference table by key path: `gpuPools[].name`, a map's entries as
// `tenants[].gpuQuota.<>`. A row naming several keys (`a.b.c` / `d`, or `a.b`, `c`) describes siblings of the first:
// `a.b.c` and `a.b.d`.
func configReference(doc []byte) (map[string]refRow, error) {
	text := string(doc)
	start := strings.Index(text, "## Config reference")
	if start < 0 {
		return nil, fmt.Errorf("the configuration document has no \"## Config reference\" section")
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	docs := map[string]refRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 5 {
			return nil, fmt.Errorf("config reference row %q: want 3 cells (key, default, meaning)", line)
		}
		cells = cells[1:4]
		keys := codeSpan.FindAllStringSubmatch(cells[0], -1)
		first := mapPart.ReplaceAllString(keys[0][1], "<>")
		parent := first[:strings.LastIndex(first, ".")+1]
		meaning := strings.TrimSpace(mdLink.ReplaceAllString(cells[2], "$1"))
		// `a` / `b` with defaults `1` / `2`: each key its own default.
		defaults := []string{strings.TrimSpace(cells[1])}
		if parts := strings.Split(defaults[0], " / "); len(keys) > 1 && len(parts) == len(keys) {
			defaults = parts
		}
		for i, k := range keys {
			path := first
			if i > 0 {
				path = parent + k[1]
			}
			docs[path] = refRow{meaning: meaning, def: defaults[min(i, len(defaults)-1)]}
		}
	}
	return docs, nil
}

// withDefault adds a row's default to its meaning: "(required)" and the like as they are.
func withDefault(meaning, def string) string {
	switch {
	case strings.HasPrefix(def, "("):
		return meaning + " " + def
	case def != "":
		return meaning + " (default: " + def + ")"
	}
	return meaning
}
