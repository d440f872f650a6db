package main

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"sigs.k8s.io/yaml"
)

// The program deploys each tenant's vCluster as a helm/v4 Chart (components/vcluster; pulumi-kubernetes sdk v4.32.0
// go/kubernetes/helm/v4/chart.go), whose provider renders the chart and registers each object as a child resource,
// among them the config Secret (secretType). Nothing deploys a vCluster as a helm/v3 Release any more (the vCluster
// Platform and kube-state-metrics Releases install other charts), so the Release is not checked.
//
// The check looks at both resources because the engine hands an analyzer different things:
//   - the Chart's inputs (chart, name, namespace, values) reach only the provider's Construct. A remote component's own
//     registration skips the step generator (pkg v3.274.1 resource/deploy/source_eval.go, "Remote components don't go
//     through the step generator"); the provider registers the component again from inside Construct with no
//     properties (pulumi-kubernetes provider pkg/provider/helm/v4/chart.go Construct calls RegisterComponentResource,
//     which sends none: sdk go/pulumi/context.go), and that empty registration is what the step generator analyzes
//     (resource/deploy/step_generator.go analyzes every resource it steps, components included). So in a preview or
//     an update the Chart shows no values and the Chart case is not applicable; it applies where the Chart's inputs
//     are recorded, the offline plans (stacks/plans, checked by TestCommittedPlans).
//   - the rendered config Secret is a custom resource, analyzed with its inputs on every preview and update. Its
//     config.yaml is the chart's effective values, the config the vCluster mounts and runs with, so this is the check
//     that holds the deployed vCluster to the rule.
const (
	helmChartType = "kubernetes:helm.sh/v4:Chart"
	secretType    = "kubernetes:core/v1:Secret"
)

// vclusterChart is the vCluster chart's name (https://charts.loft.sh, and chart/Chart.yaml in loft-sh/vcluster
// v0.36.1; components/vcluster VClusterChartName).
const vclusterChart = "vcluster"

// Where the vCluster chart stores a vCluster's effective config: Secret vc-config-<release> in the release's namespace,
// labelled app=vcluster, whose data key config.yaml is the chart's values as YAML, base64-encoded as Secret data is
// (loft-sh/vcluster v0.36.1 chart/templates/config-secret.yaml; components/vcluster ConfigSecretPrefix and
// ConfigSecretKey, not imported so that the pack does not link the kubernetes SDK).
const (
	configSecretPrefix = "vc-config-"
	configSecretKey    = "config.yaml"
	vclusterAppLabel   = "app"
	vclusterApp        = "vcluster"
)

// deviceClassSync is where a vCluster's values switch on syncing DeviceClasses from the host and select which
// (loft-sh/vcluster v0.36.1 config/config.go SyncFromHost.DeviceClasses, EnableSwitchWithPatchesAndSelector).
var deviceClassSync = []string{"sync", "fromHost", "deviceClasses"}

// isVClusterChart reports whether a chart argument is the vCluster chart: by name ("vcluster", "loft/vcluster",
// "oci://…/vcluster") or as a local chart directory named vcluster (".tools/charts/vcluster"). vcluster-platform and
// other charts are not.
func isVClusterChart(chart string) bool {
	c := strings.TrimRight(chart, "/")
	if i := strings.LastIndex(c, "/"); i >= 0 {
		c = c[i+1:]
	}
	return c == vclusterChart
}

// checkVClusterClassSelector: a vCluster that syncs DeviceClasses from the host selects them by exactly its tenant's
// grant label, matchLabels {tenant.gpu-tenancy.io/<tenant>: "true"} and nothing else. Without a selector vCluster
// syncs every DeviceClass of the host ("If not set, all resources of that type will be synced": loft-sh/vcluster
// v0.36.1 config/config.go EnableSwitchWithPatchesAndSelector.Selector), the NVIDIA driver's unrestricted classes
// included; another tenant's label shows the tenant someone else's classes; matchExpressions (NotIn, DoesNotExist)
// can widen the set in ways a reviewer cannot read off the values. It checks the vCluster Chart's values and the
// config Secret the chart renders (see helmChartType for why both).
func checkVClusterClassSelector(r resource) []violation {
	switch r.Type {
	case helmChartType:
		return checkVClusterChart(r)
	case secretType:
		return checkVClusterConfig(r)
	}
	return nil
}

// checkVClusterChart checks a vCluster Chart's values. The tenant is the Chart's namespace without
// naming.NamespacePrefix, or, while the namespace is unknown in a preview, the release name (the program names each
// vCluster after its tenant).
func checkVClusterChart(r resource) []violation {
	chartValue, known := lookup(r.Props, "chart")
	chart, _ := str(chartValue)
	if !known || !isVClusterChart(chart) {
		return nil
	}
	sync, known := lookup(r.Props, append([]string{"values"}, deviceClassSync...)...)
	if !known {
		return nil
	}
	release, _ := str(r.Props.Get("name"))
	namespace, nsKnown := lookup(r.Props, "namespace")
	return checkClassSync(r.URN, "vCluster chart "+r.Name, nil, sync, namespace, nsKnown, release)
}

// checkVClusterConfig checks the config Secret the vCluster chart renders: its decoded config.yaml, the vCluster's
// values as the chart merged them. The tenant is the Secret's namespace without naming.NamespacePrefix, or, while it is
// unknown, the release the Secret is named after. Secret data arrives secret-wrapped (the provider marks every
// rendered Secret's data secret: pulumi-kubernetes provider pkg/provider/yaml/v2/yaml.go) and is read like any value;
// messages show only the DeviceClass selector and the namespace, never the rest of the config.
func checkVClusterConfig(r resource) []violation {
	nameValue, known := lookup(r.Props, "metadata", "name")
	name, _ := str(nameValue)
	release, isConfig := strings.CutPrefix(name, configSecretPrefix)
	app, appKnown := lookup(r.Props, "metadata", "labels", vclusterAppLabel)
	if !known || !isConfig || !appKnown || !isString(app, vclusterApp) {
		return nil
	}
	what, detail := "vCluster config Secret "+name, []string{"resource " + r.Name}
	data, known := lookup(r.Props, "data", configSecretKey)
	if !known {
		return nil
	}
	config, err := decodeConfig(data)
	if err != nil {
		return []violation{{URN: r.URN, Message: fmt.Sprintf("%s cannot be read (%v), so the DeviceClasses its vCluster "+
			"syncs cannot be checked: leave the Secret as the vCluster chart renders it, data.%s holding the chart's "+
			"values as YAML", named(what, detail...), err, configSecretKey)}}
	}
	sync, _ := lookup(config, deviceClassSync...)
	namespace, nsKnown := lookup(r.Props, "metadata", "namespace")
	return checkClassSync(r.URN, what, detail, sync, namespace, nsKnown, release)
}

// decodeConfig turns a config Secret's config.yaml (base64 of YAML) into a property map.
func decodeConfig(data property.Value) (property.Map, error) {
	encoded, ok := str(data)
	switch {
	case data.IsNull():
		return property.Map{}, fmt.Errorf("it has no data.%s", configSecretKey)
	case !ok:
		return property.Map{}, fmt.Errorf("data.%s is not a string", configSecretKey)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return property.Map{}, fmt.Errorf("data.%s is not base64: %w", configSecretKey, err)
	}
	var config map[string]any
	if err := yaml.Unmarshal(raw, &config); err != nil {
		return property.Map{}, fmt.Errorf("data.%s is not a YAML map: %w", configSecretKey, err)
	}
	return fromGo(config).AsMap(), nil
}

// fromGo turns decoded YAML (maps, lists, strings, numbers, bools and nulls, as sigs.k8s.io/yaml decodes through JSON)
// into a property value.
func fromGo(v any) property.Value {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]property.Value, len(v))
		for k, e := range v {
			m[k] = fromGo(e)
		}
		return property.New(m)
	case []any:
		a := make([]property.Value, len(v))
		for i, e := range v {
			a[i] = fromGo(e)
		}
		return property.New(a)
	case string:
		return property.New(v)
	case bool:
		return property.New(v)
	case float64:
		return property.New(v)
	}
	return property.Value{}
}

// checkClassSync applies the rule to one vCluster's known sync.fromHost.deviceClasses: what and detail name the
// resource in messages; namespace is where the vCluster is installed (nsKnown false while a preview cannot tell) and
// release its name, the tenant's when the namespace is unknown.
func checkClassSync(urn, what string, detail []string, sync, namespace property.Value, nsKnown bool,
	release string) []violation {
	if !sync.IsMap() {
		return nil
	}
	enabled := sync.AsMap().Get("enabled")
	if !enabled.IsBool() || !enabled.AsBool() {
		return nil
	}

	fix := "set values.sync.fromHost.deviceClasses.selector.matchLabels of the vCluster chart to {\"" +
		naming.ClassTenantLabelPrefix + "<tenant>\": \"true\"} and nothing else " +
		"(vcluster.VirtualClusterArgs.ClassSelectorLabel = naming.ClassTenantLabel(tenant))"
	where := named(what, detail...)
	tenant, tenantKnown := "", false
	if nsKnown {
		ns, _ := str(namespace)
		t, ok := strings.CutPrefix(ns, naming.NamespacePrefix)
		if !ok || t == "" {
			in := "namespace " + show(namespace)
			if ns == "" {
				in = "no namespace of its own (the provider's default)"
			}
			return []violation{{URN: urn, Message: fmt.Sprintf(
				"%s syncs DeviceClasses from the host but is installed in %s, which is no tenant's host "+
					"namespace, so no grant label applies to it: install it in %s<tenant> and %s",
				where, in, naming.NamespacePrefix, fix)}}
		}
		tenant, tenantKnown = t, true
		where = named(what, append(slices.Clip(detail), "namespace "+ns)...)
	} else if release != "" {
		tenant, tenantKnown = release, true
	}
	want := ""
	if tenantKnown {
		want = naming.ClassTenantLabel(tenant)
		fix = fmt.Sprintf("set values.sync.fromHost.deviceClasses.selector.matchLabels of the vCluster chart to {%q: "+
			"\"true\"} and nothing else (vcluster.VirtualClusterArgs.ClassSelectorLabel = naming.ClassTenantLabel(%q))",
			want, tenant)
	}

	selector := sync.AsMap().Get("selector")
	if selector.IsComputed() {
		return nil
	}
	var out []violation
	report := func(format string, args ...any) {
		out = append(out, violation{URN: urn, Message: fmt.Sprintf(format, args...) + ": " + fix})
	}

	var expressions, labels property.Value
	if selector.IsMap() {
		expressions, labels = selector.AsMap().Get("matchExpressions"), selector.AsMap().Get("matchLabels")
	}
	if !expressions.IsComputed() && !expressions.IsNull() && !(expressions.IsArray() && expressions.AsArray().Len() == 0) {
		report("%s selects the DeviceClasses it syncs from the host with matchExpressions %s, which can select "+
			"classes beyond its tenant's grant", where, show(expressions))
	}
	if labels.IsComputed() {
		return out
	}
	got := entries(labels)
	if len(got) == 0 {
		report("%s syncs DeviceClasses from the host without a label selector, so its tenant sees every DeviceClass "+
			"on the host, the NVIDIA driver's unrestricted classes included", where)
		return out
	}
	matched := false
	for _, key := range slices.Sorted(maps.Keys(got)) {
		value := got[key]
		switch {
		case want != "" && key != want, want == "" && !strings.HasPrefix(key, naming.ClassTenantLabelPrefix):
			report("%s selects the DeviceClasses it syncs by label %q, which is not its tenant's grant label", where, key)
		case value.IsComputed():
			matched = true
		case !isString(value, "true"):
			report("%s selects the DeviceClasses it syncs by %s=%s, but grants are labelled with the value \"true\"",
				where, key, show(value))
			matched = true
		default:
			matched = true
		}
	}
	switch {
	case want == "" && matched && len(got) > 1:
		report("%s selects the DeviceClasses it syncs by %d labels; it takes exactly its tenant's grant label", where, len(got))
	case want != "" && !matched:
		report("%s does not select the DeviceClasses it syncs by its tenant's grant label %s", where, want)
	}
	return out
}

// named is what a message calls a resource: what, then any details in parentheses.
func named(what string, detail ...string) string {
	if len(detail) == 0 {
		return what
	}
	return what + " (" + strings.Join(detail, ", ") + ")"
}
