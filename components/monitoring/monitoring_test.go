package monitoring

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	componentType      = "gpu-tenancy:monitoring:Monitoring"
	namespaceType      = "kubernetes:core/v1:Namespace"
	releaseType        = "kubernetes:helm.sh/v3:Release"
	podMonitorType     = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
	prometheusRuleType = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
	clusterPodMonType  = "kubernetes:monitoring.googleapis.com/v1:ClusterPodMonitoring"
	clusterRulesType   = "kubernetes:monitoring.googleapis.com/v1:ClusterRules"
	providerType       = "pulumi:providers:kubernetes"
)

var (
	gkeArgs      = MonitoringArgs{Flavour: cluster.GKE, Project: "gpu-dev-123"}
	scalewayArgs = MonitoringArgs{Flavour: cluster.Scaleway}
)

// run builds the component under mocks for stack "gke-dev", with the kubernetes provider (and, with anchor, the
// cluster's DeletedWith) a cluster hands its in-cluster components.
func run(t *testing.T, args MonitoringArgs, anchor bool) *mocktest.Recorder {
	t.Helper()
	rec := &mocktest.Recorder{}
	require.NoError(t, mocktest.Run("gke-dev", func(ctx *pulumi.Context) error {
		provider, err := kubernetes.NewProvider(ctx, "k8s", &kubernetes.ProviderArgs{})
		if err != nil {
			return err
		}
		cl := &cluster.Cluster{Flavour: args.Flavour, Provider: provider}
		if anchor {
			if cl.Anchor, err = corev1.NewNamespace(ctx, "anchor", nil); err != nil {
				return err
			}
		}
		_, err = NewMonitoring(ctx, "monitoring", &args, cl.ResourceOptions()...)
		return err
	}, rec))
	return rec
}

func get(t *testing.T, rec *mocktest.Recorder, typ, name string) mocktest.Registration {
	t.Helper()
	reg, err := rec.Get(typ, name)
	require.NoError(t, err)
	return reg
}

func specOf(t *testing.T, reg mocktest.Registration) map[string]any {
	t.Helper()
	return reg.Inputs["spec"].Mappable().(map[string]any)
}

// at walks nested maps and lists (an int key indexes a list); a misspelt key in a typed struct makes it fail.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.Truef(t, ok, "%v: not a map at %q", path, k)
			v, ok = m[k]
			require.Truef(t, ok, "%v: key %q missing", path, k)
		case int:
			l, ok := v.([]any)
			require.Truef(t, ok, "%v: not a list at %d", path, k)
			require.Greaterf(t, len(l), k, "%v: index %d", path, k)
			v = l[k]
		}
	}
	return v
}

func TestRegistrationsPerFlavour(t *testing.T) {
	for _, tc := range []struct {
		name string
		args MonitoringArgs
		want map[string]int
	}{
		{"prometheus-operator clusters get PrometheusRules for alerts and showback, and PodMonitors", scalewayArgs, map[string]int{
			namespaceType: 1, releaseType: 1, podMonitorType: 2, prometheusRuleType: 2, clusterPodMonType: 0, clusterRulesType: 0, alertPolicyType: 0}},
		{"an existing cluster is rendered like Scaleway", MonitoringArgs{Flavour: cluster.Existing}, map[string]int{
			namespaceType: 1, releaseType: 1, podMonitorType: 2, prometheusRuleType: 2, clusterPodMonType: 0, clusterRulesType: 0, alertPolicyType: 0}},
		{"GKE gets ClusterPodMonitorings, one alert policy per rule and ClusterRules for showback", gkeArgs, map[string]int{
			namespaceType: 1, releaseType: 1, podMonitorType: 0, prometheusRuleType: 0, clusterPodMonType: 2, clusterRulesType: 1, alertPolicyType: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := run(t, tc.args, false)
			for typ, n := range tc.want {
				assert.Lenf(t, rec.ByType(typ), n, "%s", typ)
			}
		})
	}
}

// On every flavour, no tenant namespace reaches the monitoring namespace (kube-state-metrics), and every other one
// does, so the cluster's Prometheus still scrapes it.
func TestTenantNamespacesCannotReachKubeStateMetrics(t *testing.T) {
	for name, args := range map[string]MonitoringArgs{"prometheus-operator": scalewayArgs, "GKE": gkeArgs} {
		t.Run(name, func(t *testing.T) {
			rec := run(t, args, false)
			policies := rec.ByType("kubernetes:networking.k8s.io/v1:NetworkPolicy")
			require.Len(t, policies, 1)
			spec := specOf(t, policies[0])
			assert.Equal(t, map[string]any{}, spec["podSelector"], "every pod of the namespace")
			assert.Equal(t, []any{"Ingress"}, spec["policyTypes"])
			assert.Equal(t, []any{map[string]any{"key": naming.TenantNamespaceLabel, "operator": "DoesNotExist"}},
				at(t, spec, "ingress", 0, "from", 0, "namespaceSelector", "matchExpressions"))
		})
	}
}

func TestChildrenAreParentedAndInheritTheProvider(t *testing.T) {
	for _, args := range []MonitoringArgs{scalewayArgs, gkeArgs} {
		t.Run(string(args.Flavour), func(t *testing.T) {
			rec := run(t, args, false)
			for _, reg := range rec.All() {
				if reg.Type == componentType || reg.Type == providerType {
					continue
				}
				assert.Equalf(t, "monitoring", reg.ParentName(), "%s %s", reg.Type, reg.Name)
				if strings.HasPrefix(reg.Type, "kubernetes:") {
					assert.Equalf(t, "k8s", reg.ProviderName(), "%s %s uses the cluster's provider", reg.Type, reg.Name)
				}
			}
		})
	}
}

func TestAlertPoliciesOutliveTheCluster(t *testing.T) {
	rec := run(t, gkeArgs, true)
	anchor := get(t, rec, namespaceType, "anchor")
	for _, reg := range rec.All() {
		switch {
		case reg.Type == alertPolicyType:
			assert.Emptyf(t, reg.DeletedWith, "%s is in the GCP project and must be deleted on its own", reg.Name)
		case reg.Custom && strings.HasPrefix(reg.Type, "kubernetes:") && reg.Name != "anchor":
			assert.Equalf(t, anchor.URN, reg.DeletedWith, "%s %s goes with the cluster", reg.Type, reg.Name)
		}
	}
}

func TestKubeStateMetricsRelease(t *testing.T) {
	rel := get(t, run(t, scalewayArgs, false), releaseType, "monitoring-kube-state-metrics")
	vals := rel.Inputs["values"].Mappable().(map[string]any)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"chart repository", rel.Inputs["repositoryOpts"].ObjectValue()["repo"].StringValue(), "https://prometheus-community.github.io/helm-charts"},
		{"chart name", rel.Inputs["chart"].StringValue(), "kube-state-metrics"},
		{"chart version with appVersion 2.20.0", rel.Inputs["version"].StringValue(), "8.4.0"},
		{"release name the selectors expect", rel.Inputs["name"].StringValue(), KubeStateMetricsRelease},
		{"namespace", rel.Inputs["namespace"].StringValue(), DefaultNamespace},
		{"image tag set explicitly", at(t, vals, "image", "tag"), "v2.20.0"},
		{"tenant, pool and plugin labels allowed through", at(t, vals, "metricLabelsAllowlist"),
			[]any{"namespaces=[gpu-tenancy.io/tenant]", "nodes=[gpu-tenancy.io/pool]", "pods=[nvidia-dra-driver-gpu-component]"}},
		{"the pod collector, which holds kube_pod_resourceclaim_info, is on", at(t, vals, "collectors"),
			[]any{"namespaces", "nodes", "pods", "resourcequotas"}},
		{"kube_pod_resourceclaim_info is exposed", slices.Contains(at(t, vals, "metricAllowlist").([]any), any("kube_pod_resourceclaim_info")), true},
		{"no scrape annotation", at(t, vals, "prometheusScrape"), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
	assert.Contains(t, rel.DependencyNames(), "monitoring-namespace")
}

func hasKey(m any, key string) bool {
	_, ok := m.(map[string]any)[key]
	return ok
}

func TestKubeStateMetricsReleaseFollowsSpec(t *testing.T) {
	args := scalewayArgs
	args.Spec = Spec{Namespace: "observability", KubeStateMetrics: KubeStateMetricsSpec{ImageTag: "v2.21.0"}}
	rec := run(t, args, false)
	rel := get(t, rec, releaseType, "monitoring-kube-state-metrics")
	assert.Equal(t, "observability", rel.Inputs["namespace"].StringValue())
	assert.Equal(t, "v2.21.0", at(t, rel.Inputs["values"].Mappable(), "image", "tag"))
}

func TestKubeStateMetricsRunsOnThePlatformPool(t *testing.T) {
	args := scalewayArgs
	args.Placement = cluster.Placement{NodeSelector: map[string]string{naming.PlatformPoolKey: "true"}, Tolerations: []cluster.Taint{cluster.PlatformPoolTaint}}
	vals := get(t, run(t, args, false), releaseType, "monitoring-kube-state-metrics").Inputs["values"].Mappable()
	assert.Equal(t, map[string]any{naming.PlatformPoolKey: "true"}, at(t, vals, "nodeSelector"))
	assert.Equal(t, []any{map[string]any{"key": naming.PlatformPoolKey, "operator": "Equal", "value": "true"}},
		at(t, vals, "tolerations"))
}

func TestKubeStateMetricsKeepsTheChartsPlacementWithoutAPlatformPool(t *testing.T) {
	vals := get(t, run(t, scalewayArgs, false), releaseType, "monitoring-kube-state-metrics").Inputs["values"].Mappable().(map[string]any)
	assert.NotContains(t, vals, "nodeSelector")
	assert.NotContains(t, vals, "tolerations")
}

func TestPodMonitors(t *testing.T) {
	args := scalewayArgs
	args.DriverNamespace = "nvidia-dra"
	args.Spec.PrometheusOperator.Labels = map[string]string{"release": "kube-prometheus-stack"}
	rec := run(t, args, false)
	ksm := get(t, rec, podMonitorType, "monitoring-kube-state-metrics")
	plugin := get(t, rec, podMonitorType, "monitoring-dra-kubelet-plugin")
	rule := get(t, rec, prometheusRuleType, "monitoring-rules")
	ksmSpec, pluginSpec := specOf(t, ksm), specOf(t, plugin)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"kube-state-metrics PodMonitor is named after its job", ksm.Inputs["metadata"].ObjectValue()["name"].StringValue(), "gpu-tenancy-gke-dev-kube-state-metrics"},
		{"kube-state-metrics PodMonitor selects this release only", at(t, ksmSpec, "selector", "matchLabels"),
			map[string]any{"app.kubernetes.io/name": "kube-state-metrics", "app.kubernetes.io/instance": "gpu-tenancy-kube-state-metrics"}},
		{"kube-state-metrics is scraped in its namespace", at(t, ksmSpec, "namespaceSelector", "matchNames"), []any{DefaultNamespace}},
		{"kube-state-metrics is scraped on its object-metrics port", at(t, ksmSpec, "podMetricsEndpoints", 0, "port"), "http"},
		{"kube-state-metrics labels are honoured", at(t, ksmSpec, "podMetricsEndpoints", 0, "honorLabels"), true},
		{"kube-state-metrics job is the one the rules select", at(t, ksmSpec, "podMetricsEndpoints", 0, "relabelings", 0),
			map[string]any{"action": "replace", "targetLabel": "job", "replacement": "gpu-tenancy-gke-dev-kube-state-metrics"}},
		{"kube-state-metrics is scraped as often as rules run", at(t, ksmSpec, "podMetricsEndpoints", 0, "interval"), "30s"},
		{"plugin PodMonitor selects the kubelet-plugin pods", at(t, pluginSpec, "selector", "matchLabels"),
			map[string]any{"nvidia-dra-driver-gpu-component": "kubelet-plugin"}},
		{"plugin is looked for in the driver's namespace", at(t, pluginSpec, "namespaceSelector", "matchNames"), []any{"nvidia-dra"}},
		{"plugin is scraped by port number", at(t, pluginSpec, "podMetricsEndpoints", 0, "portNumber"), 8080.0},
		{"plugin endpoint names no port", hasKey(at(t, pluginSpec, "podMetricsEndpoints", 0), "port"), false},
		{"plugin job is the one the rules select", at(t, pluginSpec, "podMetricsEndpoints", 0, "relabelings", 0, "replacement"), "gpu-tenancy-gke-dev-dra-kubelet-plugin"},
		{"plugin series carry their node", at(t, pluginSpec, "podMetricsEndpoints", 0, "relabelings", 1),
			map[string]any{"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}},
		{"PrometheusRule carries the configured labels", rule.Inputs["metadata"].ObjectValue()["labels"].Mappable(),
			map[string]any{"app.kubernetes.io/managed-by": "gpu-tenancy", "release": "kube-prometheus-stack"}},
		{"PodMonitors carry the configured labels", ksm.Inputs["metadata"].ObjectValue()["labels"].Mappable().(map[string]any)["release"], "kube-prometheus-stack"},
		{"PrometheusRule lives in the monitoring namespace", rule.Inputs["metadata"].ObjectValue()["namespace"].StringValue(), DefaultNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

func TestClusterPodMonitorings(t *testing.T) {
	rec := run(t, gkeArgs, false)
	ksm := get(t, rec, clusterPodMonType, "monitoring-kube-state-metrics")
	plugin := get(t, rec, clusterPodMonType, "monitoring-dra-kubelet-plugin")
	ksmSpec, pluginSpec := specOf(t, ksm), specOf(t, plugin)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"kube-state-metrics job is the object's name", ksm.Inputs["metadata"].ObjectValue()["name"].StringValue(), "gpu-tenancy-gke-dev-kube-state-metrics"},
		{"ClusterPodMonitoring is cluster-scoped", ksm.Inputs["metadata"].ObjectValue()["namespace"].IsNull(), true},
		{"kube-state-metrics keeps its own namespace and pod labels", at(t, ksmSpec, "targetLabels", "metadata"), []any{}},
		{"kube-state-metrics is scraped on its object-metrics port", at(t, ksmSpec, "endpoints", 0, "port"), "http"},
		{"kube-state-metrics selects this release only", at(t, ksmSpec, "selector", "matchLabels", "app.kubernetes.io/instance"), "gpu-tenancy-kube-state-metrics"},
		{"plugin job is the object's name", plugin.Inputs["metadata"].ObjectValue()["name"].StringValue(), "gpu-tenancy-gke-dev-dra-kubelet-plugin"},
		{"plugin is scraped by port number", at(t, pluginSpec, "endpoints", 0, "port"), 8080.0},
		{"plugin series carry namespace, node and pod", at(t, pluginSpec, "targetLabels", "metadata"), []any{"namespace", "node", "pod"}},
		{"plugin series are kept from the driver's namespace only", at(t, pluginSpec, "endpoints", 0, "metricRelabeling"),
			[]any{map[string]any{"action": "keep", "sourceLabels": []any{"namespace"}, "regex": DefaultDriverNamespace}}},
		{"scrapes run as often as rules", at(t, pluginSpec, "endpoints", 0, "interval"), "30s"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

func condition(t *testing.T, reg mocktest.Registration) map[string]any {
	t.Helper()
	return at(t, reg.Inputs.Mappable(), "conditions", 0, "conditionPrometheusQueryLanguage").(map[string]any)
}

func TestAlertPolicies(t *testing.T) {
	args := gkeArgs
	args.Spec.GKE.NotificationChannels = []string{"projects/gpu-dev-123/notificationChannels/42"}
	rec := run(t, args, false)
	pending := get(t, rec, alertPolicyType, "monitoring-dra-claim-pending-too-long")
	quota := get(t, rec, alertPolicyType, "monitoring-tenant-gpu-quota-exhausted")
	pluginDown := get(t, rec, alertPolicyType, "monitoring-dra-kubelet-plugin-not-running")
	doc := pending.Inputs["documentation"].Mappable().(map[string]any)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"policies live in the project", pending.Inputs["project"].StringValue(), "gpu-dev-123"},
		{"display name names the scope and the rule", pending.Inputs["displayName"].StringValue(), "gpu-tenancy gke-dev: DRAClaimPendingTooLong"},
		{"notifications go to the configured channels", pending.Inputs["notificationChannels"].Mappable(), []any{"projects/gpu-dev-123/notificationChannels/42"}},
		{"warning maps to WARNING", pending.Inputs["severity"].StringValue(), "WARNING"},
		{"critical maps to CRITICAL", pluginDown.Inputs["severity"].StringValue(), "CRITICAL"},
		{"info leaves the severity unset", quota.Inputs["severity"].IsNull(), true},
		{"an age-based rule holds for no time", condition(t, pending)["duration"], "0s"},
		{"a held rule keeps its hold time, in seconds", condition(t, quota)["duration"], "1800s"},
		{"rules are evaluated every 30s", condition(t, pending)["evaluationInterval"], "30s"},
		{"the rule group and alert name are kept", []any{condition(t, pending)["ruleGroup"], condition(t, pending)["alertRule"]}, []any{"gpu-tenancy-dra", "DRAClaimPendingTooLong"}},
		{"the severity is an alert label", condition(t, pending)["labels"], map[string]any{"severity": "warning"}},
		{"policies may be created before their metrics exist", condition(t, pending)["disableMetricValidation"], true},
		{"the subject names the tenant through a documentation variable", doc["subject"],
			"Pod ${metric.label.namespace}/${metric.label.pod} of tenant ${metric.label.tenant} waits for ResourceClaim ${metric.label.resourceclaim_name}"},
		{"no Prometheus template survives in the documentation", strings.Contains(doc["content"].(string), "{{"), false},
		{"the documentation ends with the runbook", strings.Contains(doc["content"].(string), "\n\nRunbook: Run `gpu-tenancy pending`"), true},
		{"policies are labelled as the platform's", pending.Inputs["userLabels"].Mappable(), map[string]any{"managed-by": "gpu-tenancy", "gpu-tenancy-scope": "gke-dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

// exprs returns, per alert name, the PromQL each renderer carries.
func operatorExprs(t *testing.T, rec *mocktest.Recorder) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range at(t, specOf(t, get(t, rec, prometheusRuleType, "monitoring-rules")), "groups", 0, "rules").([]any) {
		rule := r.(map[string]any)
		out[rule["alert"].(string)] = rule["expr"].(string)
	}
	return out
}

func gkeExprs(t *testing.T, rec *mocktest.Recorder) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, reg := range rec.ByType(alertPolicyType) {
		c := condition(t, reg)
		out[c["alertRule"].(string)] = c["query"].(string)
	}
	return out
}

func TestBothRenderersCarryIdenticalExprs(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"defaults", Spec{}},
		{"thresholds from the spec", Spec{PendingClaimAfter: "5m", QuotaExhaustedFor: "1h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, gke := scalewayArgs, gkeArgs
			op.Spec, gke.Spec = tc.spec, tc.spec
			fromOperator, fromGKE := operatorExprs(t, run(t, op, false)), gkeExprs(t, run(t, gke, false))
			require.Len(t, fromOperator, 4)
			assert.Equal(t, fromOperator, fromGKE)
		})
	}
}

func TestRenderedRulesFollowSpec(t *testing.T) {
	args := scalewayArgs
	args.Spec = Spec{PendingClaimAfter: "5m", QuotaExhaustedFor: "1h"}
	rec := run(t, args, false)
	exprs := operatorExprs(t, rec)
	holds := map[string]any{}
	for _, r := range at(t, specOf(t, get(t, rec, prometheusRuleType, "monitoring-rules")), "groups", 0, "rules").([]any) {
		holds[r.(map[string]any)["alert"].(string)] = r.(map[string]any)["for"]
	}
	assert.True(t, strings.HasSuffix(exprs[rules.ClaimPendingTooLong], " > 300"), exprs[rules.ClaimPendingTooLong])
	assert.Equal(t, "1h", holds[rules.TenantQuotaExhausted])
}

func TestRulesTakeThePluginFromTheDriverNamespace(t *testing.T) {
	args := scalewayArgs
	args.DriverNamespace = "nvidia-dra"
	exprs := operatorExprs(t, run(t, args, false))
	for _, rule := range []string{rules.KubeletPluginPrepareErr, rules.KubeletPluginNotRunning} {
		t.Run(rule, func(t *testing.T) { assert.Contains(t, exprs[rule], `namespace="nvidia-dra"`) })
	}
}

func TestPrometheusRuleIsTheRuleGroups(t *testing.T) {
	rec := run(t, scalewayArgs, false)
	want, err := untyped(prometheusRuleSpec{Groups: rules.Groups(rules.Rules(rules.Params{Jobs: rules.JobsFor("gke-dev")}))})
	require.NoError(t, err)
	assert.Equal(t, want, specOf(t, get(t, rec, prometheusRuleType, "monitoring-rules")))
}

func TestScope(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope string
		want  string
	}{
		{"defaults to the stack name", "", "gpu-tenancy-gke-dev-kube-state-metrics"},
		{"can be given", "eu-prod", "gpu-tenancy-eu-prod-kube-state-metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := gkeArgs
			args.Scope = tc.scope
			reg := get(t, run(t, args, false), clusterPodMonType, "monitoring-kube-state-metrics")
			assert.Equal(t, tc.want, reg.Inputs["metadata"].ObjectValue()["name"].StringValue())
		})
	}
}

func TestDefaultScope(t *testing.T) {
	for _, tc := range []struct{ stack, want string }{
		{"gke-dev", "gke-dev"}, {"Prod_EU.1", "prod-eu-1"}, {strings.Repeat("a", 80), strings.Repeat("a", maxScope)},
	} {
		t.Run(tc.stack, func(t *testing.T) { assert.Equal(t, tc.want, defaultScope(tc.stack)) })
	}
}

func TestKebab(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{rules.ClaimPendingTooLong, "dra-claim-pending-too-long"},
		{rules.TenantQuotaExhausted, "tenant-gpu-quota-exhausted"},
		{rules.KubeletPluginPrepareErr, "dra-kubelet-plugin-prepare-errors"},
		{rules.KubeletPluginNotRunning, "dra-kubelet-plugin-not-running"},
	} {
		t.Run(tc.in, func(t *testing.T) { assert.Equal(t, tc.want, kebab(tc.in)) })
	}
}

func TestNewMonitoringRejectsInvalidArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args *MonitoringArgs
		want string
	}{
		{"nil args", nil, "args are required"},
		{"unknown flavour", &MonitoringArgs{Flavour: "aks"}, `monitoring.flavour: Unsupported value: "aks"`},
		{"GKE without a project", &MonitoringArgs{Flavour: cluster.GKE}, "monitoring.project: Required value: the GCP project the alert policies live in"},
		{"an invalid spec, named by its path", &MonitoringArgs{Flavour: cluster.Scaleway, Spec: Spec{PendingClaimAfter: "soon"}}, "monitoring.pendingClaimAfter"},
		{"a scope that is not a DNS label", &MonitoringArgs{Flavour: cluster.Scaleway, Scope: "Prod EU"}, `monitoring.scope: Invalid value: "Prod EU"`},
		{"a driver namespace that is not a DNS label", &MonitoringArgs{Flavour: cluster.Scaleway, DriverNamespace: "NVIDIA"}, `monitoring.driverNamespace: Invalid value: "NVIDIA"`},
		{"another flavour's section", &MonitoringArgs{Flavour: cluster.Scaleway, Spec: Spec{GKE: GKESpec{NotificationChannels: []string{"projects/p/notificationChannels/1"}}}}, "monitoring.gke.notificationChannels"},
		{"invalid prices, named by their path", &MonitoringArgs{Flavour: cluster.Scaleway, Prices: rules.Prices{Currency: "euro", PerDeviceHour: map[string]float64{"gpu-whole": 2}}}, "prices.currency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &mocktest.Recorder{}
			err := mocktest.Run("gke-dev", func(ctx *pulumi.Context) error {
				_, err := NewMonitoring(ctx, "monitoring", tc.args)
				return err
			}, rec)
			require.ErrorContains(t, err, tc.want)
			assert.Empty(t, rec.All(), "nothing is registered for invalid args")
		})
	}
}

func TestGKEWithoutAlertPoliciesRegistersNothing(t *testing.T) {
	registered := newAlertPolicy
	newAlertPolicy = nil
	t.Cleanup(func() { newAlertPolicy = registered })
	args := gkeArgs
	rec := &mocktest.Recorder{}
	err := mocktest.Run("gke-dev", func(ctx *pulumi.Context) error {
		_, err := NewMonitoring(ctx, "monitoring", &args)
		return err
	}, rec)
	require.ErrorContains(t, err, `monitoring.flavour: Unsupported value: "gke": this program does not include the alert `+
		`policies of monitoring on gke: import _ "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"`)
	assert.Empty(t, rec.All(), "nothing is registered")
}

var prices = rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 2.93, "gpu-slice": 0.42}}

func TestShowbackRules(t *testing.T) {
	priced := func(args MonitoringArgs) MonitoringArgs { args.Prices = prices; return args }
	operatorRec, gkeRec := run(t, priced(scalewayArgs), false), run(t, priced(gkeArgs), false)
	operator := get(t, operatorRec, prometheusRuleType, "monitoring-showback")
	clusterRules := get(t, gkeRec, clusterRulesType, "monitoring-showback")
	want, err := untyped(prometheusRuleSpec{Groups: rules.ShowbackGroups(rules.Recordings(rules.Params{Jobs: rules.JobsFor("gke-dev"), Prices: prices}))})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"the PrometheusRule holds the showback group, with the prices", specOf(t, operator), want},
		{"the PrometheusRule is named for showback", operator.Inputs["metadata"].ObjectValue()["name"].StringValue(), ShowbackRulesName},
		{"the PrometheusRule lives in the monitoring namespace", operator.Inputs["metadata"].ObjectValue()["namespace"].StringValue(), DefaultNamespace},
		{"GKE's ClusterRules hold the same group", specOf(t, clusterRules), want},
		{"the ClusterRules are cluster-scoped", clusterRules.Inputs["metadata"].ObjectValue()["namespace"].IsNull(), true},
		{"a cost rule per priced class after the devices rule", len(at(t, want, "groups", 0, "rules").([]any)), 3},
		{"GKE alert policies stay the four alerts", len(gkeRec.ByType(alertPolicyType)), 4},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

func TestShowbackWithoutPricesRecordsDevicesOnly(t *testing.T) {
	rule := get(t, run(t, scalewayArgs, false), prometheusRuleType, "monitoring-showback")
	recorded := at(t, specOf(t, rule), "groups", 0, "rules").([]any)
	require.Len(t, recorded, 1)
	assert.Equal(t, rules.DevicesRequested, at(t, recorded[0], "record"))
}

// With monitoring.grafana, the dashboard goes into a ConfigMap of the namespace named, labelled for the sidecar, opening
// on this cluster; without it, there is none.
func TestTheDashboardShipsToGrafanaWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name         string
		grafana      GrafanaSpec
		wantLabel    string
		wantLabelVal string
	}{
		{"the sidecar's default label", GrafanaSpec{Namespace: "grafana"}, DefaultGrafanaLabel, DefaultGrafanaLabelValue},
		{"a label of the operator's", GrafanaSpec{Namespace: "grafana", Label: "dashboards.example.com/load", LabelValue: "yes"}, "dashboards.example.com/load", "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := scalewayArgs
			args.Spec.Grafana = tc.grafana
			reg := get(t, run(t, args, false), "kubernetes:core/v1:ConfigMap", "monitoring-dashboard")
			meta := reg.Inputs["metadata"].ObjectValue()
			assert.Equal(t, "gpu-tenancy-gke-dev-dashboard", meta["name"].StringValue())
			assert.Equal(t, "grafana", meta["namespace"].StringValue())
			assert.Equal(t, tc.wantLabelVal, meta["labels"].ObjectValue()[resource.PropertyKey(tc.wantLabel)].StringValue())
			raw := reg.Inputs["data"].ObjectValue()["gpu-tenancy-gke-dev-dashboard.json"].StringValue()
			var d struct {
				UID        string `json:"uid"`
				Templating struct {
					List []struct {
						Name    string `json:"name"`
						Current struct {
							Value string `json:"value"`
						} `json:"current"`
					} `json:"list"`
				} `json:"templating"`
			}
			require.NoError(t, json.Unmarshal([]byte(raw), &d))
			assert.Equal(t, DashboardUID("gke-dev"), d.UID)
			require.Len(t, d.Templating.List, 2)
			assert.Equal(t, "gke-dev", d.Templating.List[1].Current.Value, "opens on this cluster")
		})
	}
	assert.Empty(t, run(t, scalewayArgs, false).ByType("kubernetes:core/v1:ConfigMap"), "no ConfigMap without monitoring.grafana")
}

// Grafana takes a uid of at most 40 characters; two clusters keep two uids, scopes of the longest that differ only
// at their end included.
func TestDashboardUIDFitsGrafana(t *testing.T) {
	west1, west4 := strings.Repeat("a", maxScope-1)+"1", strings.Repeat("a", maxScope-1)+"4"
	for _, scope := range []string{"eu-prod", west1} {
		assert.LessOrEqual(t, len(DashboardUID(scope)), 40, scope)
	}
	assert.Equal(t, "gpu-tenancy-eu-prod", DashboardUID("eu-prod"), "a scope that fits is kept whole")
	assert.NotEqual(t, DashboardUID("eu-prod"), DashboardUID("us-prod"))
	assert.NotEqual(t, DashboardUID(west1), DashboardUID(west4))
}
