package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// checkCase is one behaviour of a resource check: the resource, and the fragments its one violation's message holds
// (none: compliant, or not applicable).
type checkCase struct {
	name string
	r    resource
	want []string
	// n is the number of violations when more than one is expected.
	n int
}

func runCases(t *testing.T, check func(resource) []violation, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check(c.r)
			if c.want == nil {
				assert.Empty(t, messages(got))
				return
			}
			n := c.n
			if n == 0 {
				n = 1
			}
			require.Len(t, got, n, "violations: %q", messages(got))
			for _, v := range got {
				assert.Equal(t, c.r.URN, v.URN, "a violation names its resource's URN")
				assert.Contains(t, v.Message, c.r.Name, "a message names its resource")
			}
			all := strings.Join(messages(got), "\n")
			for _, f := range c.want {
				assert.Contains(t, all, f)
			}
		})
	}
}

// with returns a copy of base with the entry at path (keys through nested maps) set to v, or deleted when v is
// deleted. The base map is never changed, so table rows can share it.
func with(base map[string]any, path string, v any) map[string]any {
	out := make(map[string]any, len(base))
	for k, e := range base {
		out[k] = e
	}
	key, rest, nested := strings.Cut(path, ".")
	switch {
	case nested:
		inner, _ := out[key].(map[string]any)
		out[key] = with(inner, rest, v)
	case v == deleted:
		delete(out, key)
	default:
		out[key] = v
	}
	return out
}

// deleted removes an entry in with.
var deleted = &struct{}{}

// --- dedicated-pool-taint ---------------------------------------------------------------------------------------

func TestDedicatedPoolTaint(t *testing.T) {
	gke := with(gkeGPUPool(), "nodeConfig.labels", map[string]any{dedicatedKey: "legal-ai"})
	gke = with(gke, "nodeConfig.taints", []any{
		map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
		map[string]any{"key": dedicatedKey, "value": "legal-ai", "effect": "NO_SCHEDULE"}})
	kapsule := with(kapsuleGPUPool(), "labels", map[string]any{dedicatedKey: "legal-ai"})
	kapsule = with(kapsule, "taints", []any{
		map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
		map[string]any{"key": dedicatedKey, "value": "legal-ai", "effect": "NoSchedule"}})
	gpuOnly := func(effect string) []any {
		return []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": effect}}
	}
	runCases(t, checkDedicatedPoolTaint, []checkCase{
		{name: "GKE pool labelled and tainted for its tenant", r: res(gkeNodePoolType, "gke-a100-legal", gke)},
		{name: "GKE shared pool needs no dedicated taint", r: res(gkeNodePoolType, "gke-a100-whole", gkeGPUPool())},
		{name: "GKE pool labelled for a tenant without its taint",
			r:    res(gkeNodePoolType, "gke-a100-legal", with(gke, "nodeConfig.taints", gpuOnly("NO_SCHEDULE"))),
			want: []string{"GKE node pool gke-a100-legal", "gpu-tenancy.io/dedicated=legal-ai", "every tenant's pods", `effect: "NO_SCHEDULE"`}},
		{name: "GKE pool tainted for another tenant",
			r: res(gkeNodePoolType, "gke-a100-legal", with(gke, "nodeConfig.taints", []any{
				map[string]any{"key": dedicatedKey, "value": "research-ai", "effect": "NO_SCHEDULE"}})),
			want: []string{"no taint gpu-tenancy.io/dedicated=legal-ai"}},
		{name: "GKE pool with the tenant's taint at PREFER_NO_SCHEDULE",
			r: res(gkeNodePoolType, "gke-a100-legal", with(gke, "nodeConfig.taints", []any{
				map[string]any{"key": dedicatedKey, "value": "legal-ai", "effect": "PREFER_NO_SCHEDULE"}})),
			want: []string{"gke-a100-legal"}},
		{name: "GKE labels unknown: not applicable", r: res(gkeNodePoolType, "gke-a100-legal",
			with(with(gke, "nodeConfig.labels", unknown), "nodeConfig.taints", deleted))},
		{name: "GKE taint value unknown: not applicable", r: res(gkeNodePoolType, "gke-a100-legal", with(gke, "nodeConfig.taints", []any{
			map[string]any{"key": dedicatedKey, "value": unknown, "effect": "NO_SCHEDULE"}}))},

		{name: "Kapsule pool labelled and tainted for its tenant", r: res(kapsulePoolType, "kapsule-l4-legal", kapsule)},
		{name: "Kapsule pool labelled for a tenant without its taint",
			r:    res(kapsulePoolType, "kapsule-l4-legal", with(kapsule, "taints", gpuOnly("NoSchedule"))),
			want: []string{"Kapsule pool kapsule-l4-legal", `effect: "NoSchedule"`}},
	})
}

// --- platform-pool-taint ----------------------------------------------------------------------------------------

func TestPlatformPoolTaint(t *testing.T) {
	gke := map[string]any{"nodeConfig": map[string]any{"labels": map[string]any{platformPoolKey: "true"},
		"taints": []any{map[string]any{"key": platformPoolKey, "value": "true", "effect": "NO_SCHEDULE"}}}}
	kapsule := map[string]any{"labels": map[string]any{platformPoolKey: "true"},
		"taints": []any{map[string]any{"key": platformPoolKey, "value": "true", "effect": "NoSchedule"}}}
	runCases(t, checkPlatformPoolTaint, []checkCase{
		{name: "GKE platform pool labelled and tainted", r: res(gkeNodePoolType, "gke-system", gke)},
		{name: "GKE pool without the label needs no taint", r: res(gkeNodePoolType, "gke-system", map[string]any{"nodeConfig": map[string]any{}})},
		{name: "GKE platform pool without its taint", r: res(gkeNodePoolType, "gke-system", with(gke, "nodeConfig.taints", deleted)),
			want: []string{"GKE node pool gke-system", "gpu-tenancy.io/platform-pool=true", "tenants' pods", `effect: "NO_SCHEDULE"`}},
		{name: "GKE platform pool tainted PREFER_NO_SCHEDULE",
			r: res(gkeNodePoolType, "gke-system", with(gke, "nodeConfig.taints", []any{
				map[string]any{"key": platformPoolKey, "value": "true", "effect": "PREFER_NO_SCHEDULE"}})),
			want: []string{"gke-system"}},
		{name: "GKE taints unknown: not applicable", r: res(gkeNodePoolType, "gke-system", with(gke, "nodeConfig.taints", unknown))},
		{name: "Kapsule platform pool labelled and tainted", r: res(kapsulePoolType, "kapsule-system", kapsule)},
		{name: "Kapsule platform pool without its taint", r: res(kapsulePoolType, "kapsule-system", with(kapsule, "taints", deleted)),
			want: []string{"Kapsule pool kapsule-system", `effect: "NoSchedule"`}},
	})
}

// --- gpu-pool-taint -----------------------------------------------------------------------------------------------

func gkeGPUPool() map[string]any {
	return map[string]any{
		"name": "a100-whole",
		"nodeConfig": map[string]any{
			"guestAccelerators": []any{map[string]any{"type": "nvidia-tesla-a100", "count": 1}},
			"taints":            []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}},
		},
	}
}

func kapsuleGPUPool() map[string]any {
	return map[string]any{
		"name":     "l4",
		"nodeType": "L4-1-24G",
		"taints":   []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}},
	}
}

func TestGPUPoolTaint(t *testing.T) {
	gke, kapsule := gkeGPUPool(), kapsuleGPUPool()
	taint := func(key, effect any) []any {
		return []any{map[string]any{"key": key, "value": "present", "effect": effect}}
	}
	runCases(t, checkGPUPoolTaint, []checkCase{
		{name: "GKE GPU pool with the GPU taint", r: res(gkeNodePoolType, "gke-a100-whole", gke)},
		{name: "GKE pool without GPUs needs no taint",
			r: res(gkeNodePoolType, "gke-system", map[string]any{"nodeConfig": map[string]any{"machineType": "e2-standard-4"}})},
		{name: "GKE pool with an empty accelerator list needs no taint",
			r: res(gkeNodePoolType, "gke-system", with(with(gke, "nodeConfig.guestAccelerators", []any{}), "nodeConfig.taints", deleted))},
		{name: "GKE GPU pool without taints",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", deleted)),
			want: []string{"GKE node pool gke-a100-whole", "nodeConfig.taints", `effect: "NO_SCHEDULE"`}},
		{name: "GKE GPU pool with the taint at PREFER_NO_SCHEDULE",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint("nvidia.com/gpu", "PREFER_NO_SCHEDULE"))),
			want: []string{"PREFER_NO_SCHEDULE"}},
		{name: "GKE GPU pool with another taint key",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint("gpu", "NO_SCHEDULE"))),
			want: []string{"no taint nvidia.com/gpu"}},
		{name: "GKE GPU pool with the Kubernetes spelling NoSchedule, which the GKE API does not take",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint("nvidia.com/gpu", "NoSchedule"))),
			want: []string{"NO_SCHEDULE"}},
		{name: "GKE accelerators unknown: not applicable",
			r: res(gkeNodePoolType, "gke-a100-whole", with(with(gke, "nodeConfig.guestAccelerators", unknown), "nodeConfig.taints", deleted))},
		{name: "GKE nodeConfig unknown: not applicable", r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig", unknown))},
		{name: "GKE taints unknown: not applicable", r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", unknown))},
		{name: "GKE taint entry unknown: not applicable",
			r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", []any{unknown}))},
		{name: "GKE taint effect unknown: not applicable",
			r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint("nvidia.com/gpu", unknown)))},
		{name: "GKE taint key unknown: not applicable",
			r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint(unknown, "NO_SCHEDULE")))},
		{name: "GKE taint with unknown key but a wrong effect",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", taint(unknown, "NO_EXECUTE"))),
			want: []string{"NO_EXECUTE"}},
		{name: "GKE secret taints are read", r: res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints",
			secretOf{taint("nvidia.com/gpu", "NO_SCHEDULE")}))},
		{name: "GKE secret taints without the GPU taint, not echoed",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gke, "nodeConfig.taints", secretOf{taint("other", "NO_SCHEDULE")})),
			want: []string{"it has [secret]"}},

		{name: "Kapsule GPU pool with the GPU taint", r: res(kapsulePoolType, "kapsule-l4", kapsule)},
		{name: "Kapsule CPU pool needs no taint",
			r: res(kapsulePoolType, "kapsule-system", map[string]any{"nodeType": "PRO2-S"})},
		{name: "Kapsule GPU pool without taints",
			r:    res(kapsulePoolType, "kapsule-h100", with(with(kapsule, "nodeType", "H100-SXM-2-80G"), "taints", deleted)),
			want: []string{"Kapsule pool kapsule-h100", "in taints", `effect: "NoSchedule"`}},
		{name: "Kapsule GPU pool with the GKE spelling NO_SCHEDULE",
			r:    res(kapsulePoolType, "kapsule-l4", with(kapsule, "taints", taint("nvidia.com/gpu", "NO_SCHEDULE"))),
			want: []string{"NoSchedule"}},
		{name: "Kapsule GPU pool of an uncatalogued GPU family without taints",
			r:    res(kapsulePoolType, "kapsule-render", with(with(kapsule, "nodeType", "RENDER-S"), "taints", deleted)),
			want: []string{"kapsule-render"}},
		{name: "Kapsule node type unknown: not applicable",
			r: res(kapsulePoolType, "kapsule-l4", with(with(kapsule, "nodeType", unknown), "taints", deleted))},
		{name: "Kapsule taints unknown: not applicable", r: res(kapsulePoolType, "kapsule-l4", with(kapsule, "taints", unknown))},

		{name: "other types are not checked",
			r: res("kubernetes:core/v1:Node", "gpu-node", map[string]any{"nodeConfig": gke["nodeConfig"]})},
	})
}

func TestIsScalewayGPUType(t *testing.T) {
	for _, c := range []struct {
		nodeType string
		gpu      bool
	}{
		{"L4-1-24G", true}, {"L4-8-24G", true}, {"L40S-1-48G", true}, {"H100-1-80G", true}, {"H100-2-80G", true},
		{"H100-SXM-2-80G", true}, {"H100-SXM-8-80G", true}, {"GPU-3070-S", true}, {"RENDER-S", true},
		{"B300-SXM-8-288G", true}, {"l4-1-24g", true}, {"h100_sxm_2_80g", true},
		{"PRO2-S", false}, {"DEV1-M", false}, {"POP2-HC-16C-32G", false}, {"GP1-XS", false}, {"", false}, {"L4", false},
	} {
		t.Run(c.nodeType, func(t *testing.T) { assert.Equal(t, c.gpu, isScalewayGPUType(c.nodeType)) })
	}
}

// --- vcluster-device-class-selector -------------------------------------------------------------------------------

// vclusterSync is the DeviceClass sync the program gives a tenant's vCluster (components/vcluster).
func vclusterSync(tenant string) map[string]any {
	return map[string]any{
		"fromHost": map[string]any{"deviceClasses": map[string]any{
			"enabled":  true,
			"selector": map[string]any{"matchLabels": map[string]any{"tenant.gpu-tenancy.io/" + tenant: "true"}},
		}},
		"toHost": map[string]any{"resourceClaims": map[string]any{"enabled": true}},
	}
}

// vclusterChartInputs is a tenant's vCluster Chart as the program registers it (stacks/plans/local.json).
func vclusterChartInputs(tenant string) map[string]any {
	return map[string]any{
		"chart":     ".tools/charts/vcluster",
		"name":      tenant,
		"namespace": "vcluster-" + tenant,
		"skipAwait": true,
		"values":    map[string]any{"sync": vclusterSync(tenant)},
	}
}

func TestVClusterChartClassSelector(t *testing.T) {
	base := vclusterChartInputs("legal-ai")
	const sync = "values.sync.fromHost.deviceClasses"
	labels := func(m map[string]any) map[string]any { return with(base, sync+".selector.matchLabels", m) }
	chart := func(m map[string]any) resource { return res(helmChartType, "legal-ai", m) }
	runCases(t, checkVClusterClassSelector, []checkCase{
		{name: "selects exactly its tenant's label", r: chart(base)},
		{name: "chart by name from the repository", r: chart(with(base, "chart", "vcluster"))},
		{name: "DeviceClass sync off needs no selector", r: chart(with(with(base, sync+".enabled", false), sync+".selector", deleted))},
		{name: "no DeviceClass sync at all needs no selector", r: chart(with(base, "values", map[string]any{}))},
		{name: "another chart is not checked",
			r: chart(with(with(base, "chart", "vcluster-platform"), sync+".selector", deleted))},
		// What a preview or an update hands the analyzer: the provider registers the Chart with no inputs (see
		// helmChartType); the config Secret carries the check then.
		{name: "the Chart as the engine analyzes it, without inputs", r: chart(nil)},

		{name: "no selector", r: chart(with(base, sync+".selector", deleted)),
			want: []string{"vCluster chart legal-ai (namespace vcluster-legal-ai)", "without a label selector",
				`{"tenant.gpu-tenancy.io/legal-ai": "true"}`}},
		{name: "empty matchLabels", r: chart(labels(map[string]any{})), want: []string{"without a label selector"}},
		{name: "another tenant's label",
			r:    chart(labels(map[string]any{"tenant.gpu-tenancy.io/research-ai": "true"})),
			want: []string{`label "tenant.gpu-tenancy.io/research-ai"`, "does not select", "tenant.gpu-tenancy.io/legal-ai"}, n: 2},
		{name: "its label with a value other than true",
			r:    chart(labels(map[string]any{"tenant.gpu-tenancy.io/legal-ai": "yes"})),
			want: []string{`tenant.gpu-tenancy.io/legal-ai="yes"`}},
		{name: "an extra label besides its own",
			r:    chart(labels(map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true", "team": "a"})),
			want: []string{`label "team"`}},
		{name: "matchExpressions",
			r: chart(with(base, sync+".selector.matchExpressions",
				[]any{map[string]any{"key": "tenant.gpu-tenancy.io/legal-ai", "operator": "DoesNotExist"}})),
			want: []string{"matchExpressions"}},
		{name: "an empty matchExpressions list is no expression", r: chart(with(base, sync+".selector.matchExpressions", []any{}))},
		{name: "installed in the provider's default namespace",
			r:    chart(with(base, "namespace", deleted)),
			want: []string{"no namespace of its own", "vcluster-<tenant>"}},
		{name: "installed outside a tenant namespace",
			r:    chart(with(base, "namespace", "default")),
			want: []string{`namespace "default"`, "vcluster-<tenant>"}},

		{name: "namespace unknown: the release name is the tenant",
			r: chart(with(base, "namespace", unknown))},
		{name: "namespace unknown: another tenant's label is found through the release name",
			r:    chart(with(labels(map[string]any{"tenant.gpu-tenancy.io/research-ai": "true"}), "namespace", unknown)),
			want: []string{"tenant.gpu-tenancy.io/legal-ai"}, n: 2},
		{name: "tenant unknown: any one grant label may be its own",
			r: chart(with(with(labels(map[string]any{"tenant.gpu-tenancy.io/x": "true"}), "namespace", unknown), "name", unknown))},
		{name: "tenant unknown: a label that is no grant label",
			r:    chart(with(with(labels(map[string]any{"team": "true"}), "namespace", unknown), "name", unknown)),
			want: []string{`label "team"`}},
		{name: "tenant unknown: two grant labels",
			r: chart(with(with(labels(map[string]any{"tenant.gpu-tenancy.io/a": "true", "tenant.gpu-tenancy.io/b": "true"}),
				"namespace", unknown), "name", unknown)),
			want: []string{"by 2 labels"}},
		{name: "tenant unknown: still no selector",
			r:    chart(with(with(with(base, sync+".selector", deleted), "namespace", unknown), "name", unknown)),
			want: []string{"without a label selector"}},

		{name: "chart unknown: not applicable", r: chart(with(with(base, "chart", unknown), sync+".selector", deleted))},
		{name: "sync switch unknown: not applicable", r: chart(with(with(base, sync+".enabled", unknown), sync+".selector", deleted))},
		{name: "values unknown: not applicable", r: chart(with(base, "values", unknown))},
		{name: "selector unknown: not applicable", r: chart(with(base, sync+".selector", unknown))},
		{name: "matchLabels unknown: not applicable", r: chart(with(base, sync+".selector.matchLabels", unknown))},
		{name: "label value unknown: not applicable",
			r: chart(labels(map[string]any{"tenant.gpu-tenancy.io/legal-ai": unknown}))},
		{name: "secret values are read", r: chart(with(base, "values", secretOf{base["values"]}))},
		{name: "secret values without a selector",
			r:    chart(with(base, "values", secretOf{with(base, sync+".selector", deleted)["values"]})),
			want: []string{"without a label selector"}},
	})
}

// vclusterConfig is the config.yaml the vCluster chart renders for a tenant's vCluster: the chart's values, defaults
// and the program's merged (a few of the defaults here), with the given DeviceClass sync.
func vclusterConfig(deviceClasses map[string]any) string {
	values := map[string]any{
		"sync": map[string]any{
			"fromHost": map[string]any{"deviceClasses": deviceClasses, "nodes": map[string]any{"enabled": false}},
			"toHost":   map[string]any{"pods": map[string]any{"enabled": true}, "resourceClaims": map[string]any{"enabled": true}},
		},
		"controlPlane": map[string]any{"statefulSet": map[string]any{"image": map[string]any{"tag": "0.36.1"}}},
	}
	raw, err := yaml.Marshal(values)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// configSecretName is the config Secret's resource name: the Chart's name, then namespace/name of the object
// (pulumi-kubernetes provider pkg/provider/yaml/v2/yaml.go).
func configSecretName(tenant string) string {
	return tenant + ":vcluster-" + tenant + "/vc-config-" + tenant
}

// encoded is Secret data given as it is stored, already base64.
type encoded string

// configSecret is a tenant's vCluster config Secret as the Chart's provider registers it (loft-sh/vcluster v0.36.1
// chart/templates/config-secret.yaml): config, a YAML string base64-encoded (or any value as is), under
// data."config.yaml", the data secret.
func configSecret(tenant string, config any) map[string]any {
	data := map[string]any{}
	switch c := config.(type) {
	case nil:
	case string:
		data["config.yaml"] = base64.StdEncoding.EncodeToString([]byte(c))
	case encoded:
		data["config.yaml"] = string(c)
	default:
		data["config.yaml"] = c
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":        "vc-config-" + tenant,
			"namespace":   "vcluster-" + tenant,
			"labels":      map[string]any{"app": "vcluster", "chart": "vcluster-0.36.1", "release": tenant, "heritage": "Helm"},
			"annotations": map[string]any{"pulumi.com/skipAwait": "true"},
		},
		"type": "Opaque",
		"data": secretOf{data},
	}
}

func TestVClusterConfigClassSelector(t *testing.T) {
	own := vclusterSync("legal-ai")["fromHost"].(map[string]any)["deviceClasses"].(map[string]any)
	withSelector := func(selector any) string {
		return vclusterConfig(map[string]any{"enabled": true, "selector": selector})
	}
	secret := func(m map[string]any) resource { return res(secretType, configSecretName("legal-ai"), m) }
	base := configSecret("legal-ai", vclusterConfig(own))
	runCases(t, checkVClusterClassSelector, []checkCase{
		{name: "selects exactly its tenant's label", r: secret(base)},
		{name: "DeviceClass sync off, as the chart defaults it", r: secret(configSecret("legal-ai", vclusterConfig(map[string]any{"enabled": false})))},
		{name: "no DeviceClass sync in the config", r: secret(configSecret("legal-ai", vclusterConfig(nil)))},
		{name: "data not marked secret is read too", r: secret(with(base, "data", base["data"].(secretOf).v))},

		{name: "no selector", r: secret(configSecret("legal-ai", vclusterConfig(map[string]any{"enabled": true}))),
			want: []string{"vCluster config Secret vc-config-legal-ai (resource legal-ai:vcluster-legal-ai/vc-config-legal-ai, " +
				"namespace vcluster-legal-ai)", "without a label selector", `{"tenant.gpu-tenancy.io/legal-ai": "true"}`}},
		{name: "another tenant's label",
			r:    secret(configSecret("legal-ai", withSelector(map[string]any{"matchLabels": map[string]any{"tenant.gpu-tenancy.io/research-ai": "true"}}))),
			want: []string{`label "tenant.gpu-tenancy.io/research-ai"`, "does not select", "tenant.gpu-tenancy.io/legal-ai"}, n: 2},
		{name: "matchExpressions",
			r: secret(configSecret("legal-ai", withSelector(map[string]any{
				"matchLabels":      map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"},
				"matchExpressions": []any{map[string]any{"key": "tenant.gpu-tenancy.io/legal-ai", "operator": "DoesNotExist"}},
			}))),
			want: []string{"matchExpressions"}},
		{name: "rendered into a namespace that is no tenant's",
			r:    secret(with(base, "metadata.namespace", "default")),
			want: []string{`namespace "default"`, "vcluster-<tenant>"}},
		{name: "namespace unknown: the release the Secret is named after is the tenant",
			r:    secret(with(configSecret("legal-ai", withSelector(map[string]any{"matchLabels": map[string]any{"tenant.gpu-tenancy.io/research-ai": "true"}})), "metadata.namespace", unknown)),
			want: []string{"tenant.gpu-tenancy.io/legal-ai"}, n: 2},

		{name: "config not base64", r: secret(configSecret("legal-ai", encoded("not base64!"))), want: []string{"cannot be read", "not base64"}},
		{name: "config not a YAML map",
			r:    secret(configSecret("legal-ai", "- a list")),
			want: []string{"cannot be read", "not a YAML map"}},
		{name: "config missing", r: secret(configSecret("legal-ai", nil)), want: []string{"cannot be read", "no data.config.yaml"}},
		{name: "config not a string", r: secret(configSecret("legal-ai", map[string]any{"sync": "x"})), want: []string{"not a string"}},

		{name: "config unknown: not applicable", r: secret(configSecret("legal-ai", unknown))},
		{name: "data unknown: not applicable", r: secret(with(base, "data", unknown))},
		{name: "app label unknown: not applicable", r: secret(with(base, "metadata.labels.app", unknown))},
		{name: "a Secret the chart does not label as its own is not checked",
			r: secret(with(configSecret("legal-ai", encoded("not base64!")), "metadata.labels", deleted))},
		{name: "another Secret of the chart is not checked",
			r: res(secretType, "legal-ai:vcluster-legal-ai/vc-legal-ai", with(configSecret("legal-ai", encoded("not base64!")), "metadata.name", "vc-legal-ai"))},
		{name: "a config map of the same name is not checked",
			r: res("kubernetes:core/v1:ConfigMap", configSecretName("legal-ai"), configSecret("legal-ai", encoded("not base64!")))},
	})
}

func TestIsVClusterChart(t *testing.T) {
	for chart, want := range map[string]bool{
		"vcluster": true, "loft/vcluster": true, ".tools/charts/vcluster": true, "/abs/charts/vcluster/": true,
		"oci://ghcr.io/loft-sh/vcluster": true, "vcluster-platform": false, "charts/vcluster-k8s": false, "": false,
	} {
		t.Run(chart, func(t *testing.T) { assert.Equal(t, want, isVClusterChart(chart)) })
	}
}

// --- device-class-owner -------------------------------------------------------------------------------------------

func deviceClass(name string, labels map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "labels": labels}}
}

func TestDeviceClassOwner(t *testing.T) {
	const v1 = "kubernetes:resource.k8s.io/v1:DeviceClass"
	managed := map[string]any{"app.kubernetes.io/managed-by": "gpu-tenancy"}
	runCases(t, checkDeviceClassOwner, []checkCase{
		{name: "granted to a tenant",
			r: res(v1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole",
				map[string]any{"app.kubernetes.io/managed-by": "gpu-tenancy", "tenant.gpu-tenancy.io/legal-ai": "true"}))},
		{name: "granted to two tenants", r: res(v1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole",
			map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true", "tenant.gpu-tenancy.io/research-ai": "true"}))},
		{name: "platform-only", r: res(v1, "gpu-catalog-gpu-ops", deviceClass("gpu-ops", map[string]any{"gpu-tenancy.io/platform-only": "true"}))},

		{name: "no labels", r: res(v1, "rogue", deviceClass("gpu-rogue", nil)),
			want: []string{"DeviceClass gpu-rogue (resource rogue) carries no owner label", "tenant.gpu-tenancy.io/<tenant>=true",
				"gpu-tenancy.io/platform-only=true"}},
		{name: "only the managed-by label", r: res(v1, "rogue", deviceClass("gpu-rogue", managed)), want: []string{"no owner label"}},
		{name: "a grant label that is not true grants nothing",
			r:    res(v1, "rogue", deviceClass("gpu-rogue", map[string]any{"tenant.gpu-tenancy.io/legal-ai": "false"})),
			want: []string{"no owner label"}},
		{name: "granted and platform-only",
			r: res(v1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole",
				map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true", "gpu-tenancy.io/platform-only": "true"})),
			want: []string{"granted to tenant legal-ai and also labelled gpu-tenancy.io/platform-only=true"}},
		{name: "an older API version is the same object",
			r:    res("kubernetes:resource.k8s.io/v1beta1:DeviceClass", "rogue", deviceClass("gpu-rogue", nil)),
			want: []string{"no owner label"}},
		{name: "name unknown: the message names the resource",
			r:    res(v1, "rogue", deviceClass("", nil)).withProp("metadata", map[string]any{"name": unknown}),
			want: []string{"DeviceClass rogue (resource rogue)"}},

		{name: "labels unknown: not applicable", r: res(v1, "rogue", deviceClass("gpu-rogue", nil)).withProp("metadata",
			map[string]any{"name": "gpu-rogue", "labels": unknown})},
		{name: "metadata unknown: not applicable", r: res(v1, "rogue", map[string]any{"metadata": unknown})},
		{name: "grant label value unknown: not applicable",
			r: res(v1, "rogue", deviceClass("gpu-rogue", map[string]any{"tenant.gpu-tenancy.io/legal-ai": unknown}))},
		{name: "platform-only value unknown: not applicable",
			r: res(v1, "rogue", deviceClass("gpu-rogue", map[string]any{"gpu-tenancy.io/platform-only": unknown}))},
		{name: "secret labels are read", r: res(v1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole",
			map[string]any{"tenant.gpu-tenancy.io/legal-ai": secretOf{"true"}}))},

		{name: "other types are not checked", r: res("kubernetes:core/v1:ConfigMap", "cm", deviceClass("cm", nil))},
	})
}

// withProp returns r with one top-level property replaced.
func (r resource) withProp(key string, v any) resource {
	r.Props = r.Props.Set(key, val(v))
	return r
}

// --- cloud-cost-labels --------------------------------------------------------------------------------------------

func TestCloudCostLabels(t *testing.T) {
	stackLabel := map[string]any{"gpu-tenancy-stack": "gke-dev"}
	gkeCluster := map[string]any{"resourceLabels": stackLabel, "costManagementConfig": map[string]any{"enabled": true}}
	poolLabels := map[string]any{"gpu-tenancy-stack": "gke-dev", "gpu-tenancy-pool": "a100-whole", "gpu-tenancy-gpu-model": "a100-40gb"}
	gkePool := with(gkeGPUPool(), "nodeConfig.resourceLabels", poolLabels)
	kapsulePool := with(kapsuleGPUPool(), "tags", []any{"gpu-tenancy-stack=scw-dev", "gpu-tenancy-pool=l4", "gpu-tenancy-gpu-model=l4"})
	runCases(t, checkCostLabels, []checkCase{
		{name: "GKE cluster labelled with cost allocation on", r: res(gkeClusterType, "gke", gkeCluster)},
		{name: "GKE cluster without labels or cost allocation (today's plans)",
			r:    res(gkeClusterType, "gke", map[string]any{"location": "us-central1-a"}),
			want: []string{"GKE cluster gke", "resourceLabels lacks gpu-tenancy-stack", "costManagementConfig.enabled is not true"}},
		{name: "GKE cluster with cost allocation off",
			r:    res(gkeClusterType, "gke", with(gkeCluster, "costManagementConfig.enabled", false)),
			want: []string{"costManagementConfig.enabled"}},
		{name: "GKE cluster labels unknown: not applicable", r: res(gkeClusterType, "gke", with(gkeCluster, "resourceLabels", unknown))},
		{name: "GKE cost allocation unknown: not applicable",
			r: res(gkeClusterType, "gke", with(gkeCluster, "costManagementConfig", unknown))},

		{name: "GKE GPU pool labelled", r: res(gkeNodePoolType, "gke-a100-whole", gkePool)},
		{name: "GKE GPU pool without the GPU model label",
			r:    res(gkeNodePoolType, "gke-a100-whole", with(gkePool, "nodeConfig.resourceLabels.gpu-tenancy-gpu-model", deleted)),
			want: []string{"GKE node pool gke-a100-whole", "nodeConfig.resourceLabels lacks gpu-tenancy-gpu-model"}},
		{name: "GKE system pool needs no GPU model label",
			r: res(gkeNodePoolType, "gke-system", map[string]any{"nodeConfig": map[string]any{
				"resourceLabels": map[string]any{"gpu-tenancy-stack": "gke-dev", "gpu-tenancy-pool": "system"}}})},
		{name: "GKE pool labels unknown: not applicable",
			r: res(gkeNodePoolType, "gke-a100-whole", with(gkePool, "nodeConfig.resourceLabels", unknown))},

		{name: "Kapsule cluster tagged", r: res(kapsuleClusterType, "kapsule", map[string]any{"tags": []any{"gpu-tenancy-stack=scw-dev"}})},
		{name: "Kapsule cluster without tags (today's plans)", r: res(kapsuleClusterType, "kapsule", map[string]any{"cni": "cilium"}),
			want: []string{"Kapsule cluster kapsule", "tags lack gpu-tenancy-stack", "gpu-tenancy-stack=<stack>"}},
		{name: "Kapsule tag with an empty value",
			r:    res(kapsuleClusterType, "kapsule", map[string]any{"tags": []any{"gpu-tenancy-stack="}}),
			want: []string{"tags lack gpu-tenancy-stack"}},
		{name: "Kapsule GPU pool tagged", r: res(kapsulePoolType, "kapsule-l4", kapsulePool)},
		{name: "Kapsule GPU pool without the GPU model tag",
			r:    res(kapsulePoolType, "kapsule-l4", with(kapsulePool, "tags", []any{"gpu-tenancy-stack=scw-dev", "gpu-tenancy-pool=l4"})),
			want: []string{"tags lack gpu-tenancy-gpu-model"}},
		{name: "Kapsule CPU pool needs no GPU model tag", r: res(kapsulePoolType, "kapsule-system",
			map[string]any{"nodeType": "PRO2-S", "tags": []any{"gpu-tenancy-stack=scw-dev", "gpu-tenancy-pool=system"}})},
		{name: "Kapsule tags unknown: not applicable", r: res(kapsulePoolType, "kapsule-l4", with(kapsulePool, "tags", unknown))},
		{name: "Kapsule tag unknown: not applicable",
			r: res(kapsulePoolType, "kapsule-l4", with(kapsulePool, "tags", []any{"gpu-tenancy-stack=scw-dev", unknown}))},

		{name: "kubernetes resources are not checked", r: res(namespaceType, "ns", map[string]any{})},
	})
}
