package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/dashboard"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/servicerange"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/ruletest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pendingThreshold stands in for the 15 minutes of production: long enough that a pod must really have waited.
const pendingThreshold = 2 * time.Second

// checkPendingClaimAlert runs the real kube-state-metrics v2.20.0 against this test's control plane, as the platform
// deploys it (the same flags the chart gets), and evaluates the pending-claim rule, rendered from the same Go
// definition with a short threshold, with Prometheus's rule evaluator over one scrape. It expects the state
// checkQuotaAndAllocation leaves: in legal-ai's namespace pod whole-c waits for claim whole-c (no whole GPU left)
// while whole-a and whole-b hold theirs, and research-ai's slice-a holds a MIG device.
func checkPendingClaimAlert(t *testing.T, ctx context.Context) {
	legalNS, researchNS := naming.Namespace(legal), naming.Namespace(research)
	waiting, err := client.CoreV1().Pods(legalNS).Get(ctx, "whole-c", metav1.GetOptions{})
	require.NoError(t, err)
	// kube_pod_created has whole seconds: wait a second past the threshold so the age is over it however it rounds.
	if wait := time.Until(waiting.CreationTimestamp.Add(pendingThreshold + time.Second)); wait > 0 {
		time.Sleep(wait)
	}

	jobs := rules.JobsFor("e2e")
	// The Service range's size too, so that kube-state-metrics exposes the Services, as a stack's does.
	params := rules.Params{PendingClaimAfter: pendingThreshold, Jobs: jobs,
		ServiceAddresses: servicerange.Addresses(netip.MustParsePrefix(e2eServiceCIDR))}
	rs := rules.Rules(params)
	ksm := startKubeStateMetrics(t, ctx, rs)

	// kube-state-metrics lists each resource on its own after start; scrape until every series the verdict rests on
	// is there, the other tenant's included, so that silence about research-ai means something.
	var exposition string
	eventually(t, ctx, func() error {
		if exposition, err = ksm.Scrape(ctx); err != nil {
			return err
		}
		for _, s := range []struct {
			metric string
			labels map[string]string
		}{
			{"kube_namespace_labels", map[string]string{"namespace": legalNS, "label_gpu_tenancy_io_tenant": legal}},
			{"kube_namespace_labels", map[string]string{"namespace": researchNS, "label_gpu_tenancy_io_tenant": research}},
			{"kube_pod_status_scheduled", map[string]string{"namespace": legalNS, "pod": "whole-c", "condition": "false"}},
			{"kube_pod_resourceclaim_info", map[string]string{"namespace": legalNS, "pod": "whole-c", "resourceclaim_name": "whole-c"}},
			{"kube_pod_status_scheduled", map[string]string{"namespace": legalNS, "pod": "whole-a", "condition": "true"}},
			{"kube_pod_status_scheduled", map[string]string{"namespace": researchNS, "pod": "slice-a", "condition": "true"}},
			{"kube_pod_resourceclaim_info", map[string]string{"namespace": researchNS, "pod": "slice-a", "resourceclaim_template_name": "slice"}},
			{"kube_resourcequota", map[string]string{"namespace": legalNS, "type": "used"}},
			{"kube_service_info", map[string]string{"namespace": "default", "service": "kubernetes"}},
		} {
			if len(ruletest.Series(exposition, s.metric, s.labels)) == 0 {
				return fmt.Errorf("kube-state-metrics does not expose %s%v yet", s.metric, s.labels)
			}
		}
		return nil
	})
	scrapedAt := time.Now().Unix()

	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules:        rules.File{Groups: rules.Groups(rs)},
		Exposition:   exposition,
		TargetLabels: map[string]string{"job": jobs.KubeStateMetrics, "instance": "127.0.0.1"},
		Start:        scrapedAt,
		EvalTimes:    []string{"0s"},
	})
	require.NoError(t, err)
	firing := resp.At("0s", rules.ClaimPendingTooLong, "firing")
	require.Len(t, firing, 1, "one pod waits for its claim: %+v", firing)
	got := firing[0].Labels
	assert.Equal(t, legal, got[rules.TenantLabel])
	assert.Equal(t, legalNS, got["namespace"])
	assert.Equal(t, "whole-c", got["pod"])
	assert.Equal(t, "whole-c", got["resourceclaim_name"])
	assert.Equal(t, string(waiting.UID), got["uid"])
	assert.GreaterOrEqual(t, firing[0].Value, pendingThreshold.Seconds(), "the value is the pod's age in seconds")
	for _, a := range firing {
		assert.NotEqual(t, research, a.Labels[rules.TenantLabel], "research-ai's pod is scheduled")
	}
	assert.Empty(t, resp.At("0s", rules.ClaimPendingTooLong, "pending"), "the rule holds for no time: firing or nothing")
	checkDashboardPanels(t, ctx, params, exposition, scrapedAt)
}

// checkDashboardPanels evaluates, with Prometheus's engine, every panel of the operators' dashboard that reads
// kube-state-metrics over the scrape checkPendingClaimAlert took: each shows at least one series, with every label its
// legend names, so that a renamed metric or label fails here and not on a dashboard; and the waiting pods per tenant
// are legal-ai's one (whole-c), not research-ai's. The panel of GPU nodes without a running plugin shows the
// simulated GPU nodes: no plugin runs on this control plane (tests/nodes runs one). The panels on the kubelet plugin's metrics are cloud-only
// (components/monitoring/dashboard's tests check them against the plugin's source).
func checkDashboardPanels(t *testing.T, ctx context.Context, p rules.Params, exposition string, scrapedAt int64) {
	rs, queries := ruletest.PanelRules(dashboard.Rows(p, "5m"), func(p dashboard.Panel) bool { return !p.CloudOnly })
	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules:        rules.File{Groups: rules.Groups(rs)},
		Exposition:   exposition,
		TargetLabels: map[string]string{"job": p.Jobs.KubeStateMetrics, "instance": "127.0.0.1"},
		Start:        scrapedAt,
		EvalTimes:    []string{"0s"},
	})
	require.NoError(t, err)
	for _, r := range rs {
		series := resp.At("0s", r.Name, "firing")
		if !assert.NotEmpty(t, series, "panel %s shows nothing over kube-state-metrics' scrape: %s", r.Name, r.Expr) {
			continue
		}
		for _, a := range series {
			for _, l := range ruletest.LegendLabels(queries[r.Name].Legend) {
				assert.NotEmpty(t, a.Labels[l], "panel %s: its legend names %s, which a series lacks: %v", r.Name, l, a.Labels)
			}
		}
	}
	waiting := map[string]float64{}
	for _, a := range resp.At("0s", ruletest.PanelRule(dashboard.Panel{Title: dashboard.WaitingPerTenantTitle}, 0), "firing") {
		waiting[a.Labels[rules.TenantLabel]] = a.Value
	}
	assert.Equal(t, map[string]float64{legal: 1}, waiting, "pods waiting for devices per tenant")
}

// startKubeStateMetrics runs the real kube-state-metrics against this suite's control plane with the flags the
// platform gives it for the rules rs, until the test ends; a failed test logs its log.
func startKubeStateMetrics(t *testing.T, ctx context.Context, rs []rules.Rule) *ruletest.KubeStateMetricsProcess {
	t.Helper()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ksm, err := ruletest.StartKubeStateMetrics(startCtx, kubeconfig, rules.KubeStateMetrics(rs).Flags())
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := ksm.Stop(); err != nil {
			t.Logf("stopping kube-state-metrics: %v", err)
		}
		if t.Failed() {
			t.Logf("kube-state-metrics log:\n%s", ksm.Log())
		}
	})
	return ksm
}
