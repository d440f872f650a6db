package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ruleNamed(t *testing.T, rs []rules.Rule, name string) rules.Rule {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	require.Failf(t, "no rule", "%s", name)
	return rules.Rule{}
}

func TestRulesAreTheFourAlerts(t *testing.T) {
	var names []string
	for _, r := range rules.Rules(rules.DefaultParams()) {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{rules.ClaimPendingTooLong, rules.TenantQuotaExhausted, rules.KubeletPluginPrepareErr, rules.KubeletPluginNotRunning}, names)
}

func TestRuleParameters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params rules.Params
		rule   string
		check  func(t *testing.T, r rules.Rule)
	}{
		{"pending threshold defaults to 15m, in seconds", rules.DefaultParams(), rules.ClaimPendingTooLong, func(t *testing.T, r rules.Rule) {
			assert.True(t, strings.HasSuffix(r.Expr, " > 900"), r.Expr)
		}},
		{"pending threshold is the parameter", rules.Params{PendingClaimAfter: 90 * time.Second, Jobs: rules.JobsFor("")}, rules.ClaimPendingTooLong, func(t *testing.T, r rules.Rule) {
			assert.True(t, strings.HasSuffix(r.Expr, " > 90"), r.Expr)
		}},
		{"the pending rule is age-based and holds for no time", rules.DefaultParams(), rules.ClaimPendingTooLong, func(t *testing.T, r rules.Rule) {
			assert.Zero(t, r.For)
		}},
		{"quota hold time defaults to 30m", rules.DefaultParams(), rules.TenantQuotaExhausted, func(t *testing.T, r rules.Rule) {
			assert.Equal(t, 30*time.Minute, r.For)
		}},
		{"quota hold time is the parameter", rules.Params{QuotaExhaustedFor: time.Hour, Jobs: rules.JobsFor("")}, rules.TenantQuotaExhausted, func(t *testing.T, r rules.Rule) {
			assert.Equal(t, time.Hour, r.For)
		}},
		{"kube-state-metrics selectors name the job", rules.Params{Jobs: rules.JobsFor("gke-dev")}, rules.KubeletPluginNotRunning, func(t *testing.T, r rules.Rule) {
			assert.Equal(t, 4, strings.Count(r.Expr, `job="gpu-tenancy-gke-dev-kube-state-metrics"`), r.Expr)
		}},
		{"plugin selectors name the plugin job and the driver's namespace", rules.Params{Jobs: rules.JobsFor("gke-dev")}, rules.KubeletPluginPrepareErr, func(t *testing.T, r rules.Rule) {
			assert.Contains(t, r.Expr, `nvidia_dra_node_prepare_errors_total{job="gpu-tenancy-gke-dev-dra-kubelet-plugin", namespace="dra-driver-nvidia-gpu"}`)
		}},
		{"the driver's namespace is a parameter", rules.Params{DriverNamespace: "nvidia-dra", Jobs: rules.JobsFor("")}, rules.KubeletPluginNotRunning, func(t *testing.T, r rules.Rule) {
			assert.Equal(t, 3, strings.Count(r.Expr, `namespace="nvidia-dra"`), r.Expr)
		}},
		{"the quota key suffix is matched literally", rules.DefaultParams(), rules.TenantQuotaExhausted, func(t *testing.T, r rules.Rule) {
			assert.Contains(t, r.Expr, `resource=~".+\\.deviceclass\\.resource\\.k8s\\.io/devices"`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, ruleNamed(t, rules.Rules(tc.params), tc.rule)) })
	}
}

func TestJobsFor(t *testing.T) {
	for _, tc := range []struct {
		scope string
		want  rules.Jobs
	}{
		{"", rules.Jobs{KubeStateMetrics: "gpu-tenancy-kube-state-metrics", KubeletPlugin: "gpu-tenancy-dra-kubelet-plugin"}},
		{"scw-dev", rules.Jobs{KubeStateMetrics: "gpu-tenancy-scw-dev-kube-state-metrics", KubeletPlugin: "gpu-tenancy-scw-dev-dra-kubelet-plugin"}},
	} {
		t.Run(tc.scope, func(t *testing.T) { assert.Equal(t, tc.want, rules.JobsFor(tc.scope)) })
	}
}

func TestPromDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {30 * time.Second, "30s"}, {90 * time.Second, "90s"}, {15 * time.Minute, "15m"}, {2 * time.Hour, "2h"},
	} {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, rules.PromDuration(tc.in)) })
	}
}

func TestGroupsRenderEveryRuleOnce(t *testing.T) {
	rs := rules.Rules(rules.DefaultParams())
	groups := rules.Groups(rs)
	require.Len(t, groups, 1)
	g := groups[0]
	assert.Equal(t, "gpu-tenancy-dra", g.Name)
	assert.Equal(t, "30s", g.Interval)
	require.Len(t, g.Rules, len(rs))
	for i, r := range rs {
		t.Run(r.Name, func(t *testing.T) {
			got := g.Rules[i]
			assert.Equal(t, r.Name, got.Alert)
			assert.Equal(t, r.Expr, got.Expr)
			assert.Equal(t, map[string]string{"severity": string(r.Severity)}, got.Labels)
			assert.Equal(t, map[string]string{"summary": r.Summary, "description": r.Description, "runbook": r.Runbook}, got.Annotations)
		})
	}
}

func TestGroupsWriteForOnlyWhenHeld(t *testing.T) {
	got := map[string]string{}
	for _, r := range rules.Groups(rules.Rules(rules.DefaultParams()))[0].Rules {
		got[r.Alert] = r.For
	}
	assert.Equal(t, map[string]string{
		rules.ClaimPendingTooLong: "", rules.TenantQuotaExhausted: "30m",
		rules.KubeletPluginPrepareErr: "5m", rules.KubeletPluginNotRunning: "10m",
	}, got)
}

func TestKubeStateMetricsSettings(t *testing.T) {
	s := rules.KubeStateMetrics(rules.Rules(rules.DefaultParams()))
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"collectors are those the rules read", s.Collectors, []string{"namespaces", "nodes", "pods", "resourcequotas"}},
		{"labels allowlisted are the tenant, the pool and the plugin component", s.MetricLabelsAllowlist,
			[]string{"namespaces=[gpu-tenancy.io/tenant]", "nodes=[gpu-tenancy.io/pool]", "pods=[nvidia-dra-driver-gpu-component]"}},
		{"metrics are those the rules read", s.MetricAllowlist, []string{
			"kube_namespace_labels", "kube_node_labels", "kube_pod_created", "kube_pod_info", "kube_pod_labels",
			"kube_pod_resourceclaim_info", "kube_pod_status_phase", "kube_pod_status_scheduled", "kube_resourcequota"}},
		{"flags spell the settings as the chart does", s.Flags(), []string{
			"--resources=namespaces,nodes,pods,resourcequotas",
			"--metric-labels-allowlist=namespaces=[gpu-tenancy.io/tenant],nodes=[gpu-tenancy.io/pool],pods=[nvidia-dra-driver-gpu-component]",
			"--metric-allowlist=kube_namespace_labels,kube_node_labels,kube_pod_created,kube_pod_info,kube_pod_labels,kube_pod_resourceclaim_info,kube_pod_status_phase,kube_pod_status_scheduled,kube_resourcequota"}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

func TestEveryKubeStateMetricsMetricHasACollector(t *testing.T) {
	for _, r := range rules.Rules(rules.DefaultParams()) {
		for _, m := range r.Metrics {
			if strings.HasPrefix(m, "kube_") {
				assert.NotEmptyf(t, rules.Collector(m), "metric %s of %s", m, r.Name)
			}
		}
	}
}
