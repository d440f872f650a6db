package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/dashboard"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/ruletest"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// params are a stack's: its own jobs, a Service range, a class asked for by its extended-resource name.
func params() rules.Params {
	return rules.Params{Jobs: rules.JobsFor("dev"), ServiceAddresses: 4096, ExtendedResourceNames: []string{"example.com/gpu-whole"}}
}

func evaluate(t *testing.T, req ruletest.Request) *ruletest.Response {
	t.Helper()
	if _, err := toolbin.Path(ruletest.PromQLEval); err != nil && testing.Short() {
		t.Skip(err)
	}
	resp, err := ruletest.Eval(context.Background(), req)
	require.NoError(t, err)
	return resp
}

func TestTheShippedDashboardIsCurrent(t *testing.T) {
	want, err := dashboard.Shipped()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(dashboard.ShippedFile)))
	require.NoError(t, err)
	// Not a diff of the whole file: the message is the fix.
	assert.True(t, string(want) == string(got), "%s is stale: run make schema", dashboard.ShippedFile)
}

// Nothing on the local stack exposes the kubelet plugin's metrics, so the panels on them are checked against the
// plugin's source: over series with the names and labels dashboard.PluginMetrics copies from it (plus the scrape's
// job, namespace and node), each such panel reads only those metrics and shows a series with every label its legend
// names.
func TestCloudOnlyPanelsReadThePluginsMetricsAsItsSourceDefinesThem(t *testing.T) {
	p := params()
	rs, of := ruletest.PanelRules(dashboard.Rows(p, "5m"), func(p dashboard.Panel) bool { return p.CloudOnly })
	require.NotEmpty(t, rs)
	var load strings.Builder
	load.WriteString("load 1m\n")
	for _, metric := range slices.Sorted(maps.Keys(dashboard.PluginMetrics)) {
		labels := map[string]string{"job": p.Jobs.KubeletPlugin, "namespace": naming.DriverNamespace, "node": "gpu-node-1"}
		for _, l := range dashboard.PluginMetrics[metric] {
			if labels[l] == "" {
				labels[l] = l + "-value"
			}
		}
		fmt.Fprintf(&load, "  %s%s 0+1x20\n", metric, promLabels(labels))
	}
	resp := evaluate(t, ruletest.Request{Rules: rules.File{Groups: rules.Groups(rs)}, Load: load.String(),
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), EvalTimes: []string{"10m"}})
	for _, r := range rs {
		for _, m := range resp.Selectors[r.Name] {
			assert.Contains(t, dashboard.PluginMetrics, m, "%s reads %s, which %s does not define", r.Name, m, dashboard.PluginSource)
		}
		series := resp.At("10m", r.Name, "firing")
		require.NotEmpty(t, series, "%s shows nothing over the plugin's series", r.Name)
		for _, l := range ruletest.LegendLabels(of[r.Name].Legend) {
			assert.NotEmpty(t, series[0].Labels[l], "%s: its legend names %s, which its series lack", r.Name, l)
		}
	}
}

// Every other panel reads only metrics that the platform's kube-state-metrics is told to expose (its allowlist follows
// the alert and recording rules): a panel on a metric left out would be empty on every cluster.
func TestPanelsReadOnlyWhatKubeStateMetricsExposes(t *testing.T) {
	p := params()
	rs, _ := ruletest.PanelRules(dashboard.Rows(p, "5m"), func(p dashboard.Panel) bool { return !p.CloudOnly })
	require.NotEmpty(t, rs)
	resp := evaluate(t, ruletest.Request{Rules: rules.File{Groups: rules.Groups(rs)}, Exposition: "\n", Start: 1767225600, EvalTimes: []string{"0s"}})
	exposed := rules.KubeStateMetrics(rules.Rules(p), rules.Recordings(p)...).MetricAllowlist
	for _, r := range rs {
		require.NotEmpty(t, resp.Selectors[r.Name], r.Name)
		for _, m := range resp.Selectors[r.Name] {
			assert.Contains(t, exposed, m, "%s reads %s, which kube-state-metrics is not told to expose", r.Name, m)
		}
	}
}

// The dashboard serves every cluster of its data source: each query goes to the data source the datasource variable
// picks and reads the jobs of the cluster the scope variable picks, whose values are the scopes of the
// kube-state-metrics jobs; a stack's dashboard opens on its own cluster.
func TestEveryQueryReadsTheChosenDataSourceAndCluster(t *testing.T) {
	raw, err := dashboard.JSON(params(), "dev", "gpu-tenancy-dev", "GPU tenancy: dev")
	require.NoError(t, err)
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int               `json:"id"`
			Type       string            `json:"type"`
			Title      string            `json:"title"`
			Datasource map[string]string `json:"datasource"`
			Targets    []struct {
				Expr       string            `json:"expr"`
				Datasource map[string]string `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name, Type, Regex string
				Query             any
				Current           struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	assert.Equal(t, "gpu-tenancy-dev", d.UID)
	var queries int
	ids := map[int]bool{}
	for _, panel := range d.Panels {
		assert.False(t, ids[panel.ID], "panel %s has the id of another", panel.Title)
		ids[panel.ID] = true
		if panel.Type == "row" {
			continue
		}
		assert.Equal(t, "${datasource}", panel.Datasource["uid"], panel.Title)
		for _, target := range panel.Targets {
			queries++
			assert.Equal(t, "${datasource}", target.Datasource["uid"], panel.Title)
			assert.Regexp(t, `job="gpu-tenancy-\$\{scope\}-(kube-state-metrics|dra-kubelet-plugin)"`, target.Expr, panel.Title)
			assert.NotContains(t, target.Expr, `gpu-tenancy-dev-`, "%s: the scope comes from the variable", panel.Title)
		}
	}
	var panels int
	for _, row := range dashboard.Rows(params(), dashboard.RateWindow) {
		for _, panel := range row.Panels {
			panels += len(panel.Queries)
		}
	}
	assert.Equal(t, panels, queries, "every query of every panel is in the JSON")

	require.Len(t, d.Templating.List, 2)
	scope := d.Templating.List[1]
	assert.Equal(t, dashboard.ScopeVariable, scope.Name)
	assert.Equal(t, "dev", scope.Current.Value, "opens on its own cluster")
	re := regexp.MustCompile(strings.Trim(scope.Regex, "/"))
	for _, s := range []string{"dev", "scw-prod"} {
		got := re.FindStringSubmatch(rules.JobsFor(s).KubeStateMetrics)
		require.Len(t, got, 2, "the variable's regex reads the scope of %s", rules.JobsFor(s).KubeStateMetrics)
		assert.Equal(t, s, got[1])
	}
	assert.Nil(t, re.FindStringSubmatch("kube-state-metrics"), "another kube-state-metrics' job is no cluster of the platform")
}

// The quota panel shows the tightest of a tenant's hard limits, the requests panel the largest use (every quota counts
// the same claims), and a pod that waits for two claims is one waiting pod.
func TestTenantPanelsCountAsTheQuotasAndTheSchedulerDo(t *testing.T) {
	p := params()
	q := rules.QueriesFor(p, "5m")
	job := p.Jobs.KubeStateMetrics
	key := naming.DeviceQuotaKey("gpu-whole")
	series := []string{
		fmt.Sprintf(`kube_namespace_labels{job=%q, namespace="vcluster-legal", label_gpu_tenancy_io_tenant="legal"}`, job),
		fmt.Sprintf(`kube_resourcequota{job=%q, namespace="vcluster-legal", resourcequota="gpu", resource=%q, type="hard"}`, job, key),
		fmt.Sprintf(`kube_resourcequota{job=%q, namespace="vcluster-legal", resourcequota="extra", resource=%q, type="hard"}`, job, key),
		fmt.Sprintf(`kube_resourcequota{job=%q, namespace="vcluster-legal", resourcequota="gpu", resource=%q, type="used"}`, job, key),
		fmt.Sprintf(`kube_resourcequota{job=%q, namespace="vcluster-legal", resourcequota="extra", resource=%q, type="used"}`, job, key),
		fmt.Sprintf(`kube_pod_created{job=%q, namespace="vcluster-legal", pod="train", uid="u1"}`, job),
		fmt.Sprintf(`kube_pod_status_scheduled{job=%q, namespace="vcluster-legal", pod="train", uid="u1", condition="false"}`, job),
	}
	values := []string{"1", "4", "2", "3", "3", "0", "1"}
	for _, claim := range []string{"a", "b"} {
		series = append(series, fmt.Sprintf(`kube_pod_resourceclaim_info{job=%q, namespace="vcluster-legal", pod="train", uid="u1", claim_name=%q, resourceclaim_name=%q}`,
			job, claim, "train-"+claim))
		values = append(values, "1")
	}
	var load strings.Builder
	load.WriteString("load 1m\n")
	for i, s := range series {
		fmt.Fprintf(&load, "  %s %sx5\n", s, values[i])
	}
	rs := []rules.Rule{
		{Name: "quota", Expr: q.DeviceQuota, Severity: rules.Info},
		{Name: "requested", Expr: q.DevicesRequested, Severity: rules.Info},
		{Name: "waiting", Expr: q.WaitingPerTenant, Severity: rules.Info},
	}
	resp := evaluate(t, ruletest.Request{Rules: rules.File{Groups: rules.Groups(rs)}, Load: load.String(), Start: 1767225600, EvalTimes: []string{"2m"}})
	for _, c := range []struct {
		rule string
		want float64
	}{{"quota", 2}, {"requested", 3}, {"waiting", 1}} {
		got := resp.At("2m", c.rule, "firing")
		require.Len(t, got, 1, c.rule)
		assert.Equal(t, c.want, got[0].Value, c.rule)
		assert.Equal(t, "legal", got[0].Labels[rules.TenantLabel], c.rule)
	}
}

func promLabels(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
