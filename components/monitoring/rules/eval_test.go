package rules_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/ruletest"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The series below are shaped as kube-state-metrics v2.20.0 exposes them (k8s.io/kube-state-metrics/v2@v2.20.0
// docs/metrics/workload/pod-metrics.md, cluster/namespace-metrics.md, cluster/node-metrics.md,
// policy/resourcequota-metrics.md; internal/store/pod.go for the condition and phase series), plus the job and
// instance labels a scrape adds; the DRA plugin's counter as dra-driver-nvidia-gpu v0.4.0 pkg/metrics/dra_requests.go
// declares it, plus the pod, namespace and node labels the scrape objects add.

// start is the time of the first sample: 2026-01-01T00:00:00Z.
const start int64 = 1767225600

// steps is how many one-minute samples each series has after the first.
const steps = 45

var jobs = rules.JobsFor("test")

const (
	legalNS    = "vcluster-legal-ai"
	researchNS = "vcluster-research-ai"
	ksmA       = "10.0.0.5:8080"
	ksmB       = "10.0.0.6:8080"
)

// series writes one promqltest series line with labels in a stable order.
func series(metric string, labels map[string]string, values string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if labels[k] != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
		}
	}
	return metric + "{" + strings.Join(parts, ", ") + "} " + values
}

func constant(v int64) string { return fmt.Sprintf("%dx%d", v, steps) }

// ksm adds the labels of the kube-state-metrics scrape to a series' own.
func ksm(metric string, labels map[string]string, values string) string {
	return ksmFrom(ksmA, metric, labels, values)
}

func ksmFrom(instance, metric string, labels map[string]string, values string) string {
	l := maps.Clone(labels)
	l["job"], l["instance"] = jobs.KubeStateMetrics, instance
	return series(metric, l, values)
}

func namespace(ns, tenant string) []string {
	return []string{ksm("kube_namespace_labels", map[string]string{"namespace": ns, "label_gpu_tenancy_io_tenant": tenant}, constant(1))}
}

// pod is what kube-state-metrics knows of one pod.
type pod struct {
	ns, name string
	// created is the creation time in seconds relative to start.
	created int64
	// scheduled is the PodScheduled condition status ("True", "False"), empty before the scheduler saw the pod.
	scheduled string
	phase     string
	node      string
	// claim is a ResourceClaim the pod names; template a ResourceClaimTemplate it uses (with claim the generated claim).
	claim, template string
	labels          map[string]string
	// asks is an extended resource its container requests one of, as the tenant wrote it.
	asks string
}

func (p pod) uid() string { return "uid-" + p.name }

func (p pod) series() []string {
	return p.seriesFrom(ksmA)
}

func (p pod) seriesFrom(instance string) []string {
	id := map[string]string{"namespace": p.ns, "pod": p.name, "uid": p.uid()}
	with := func(k, v string) map[string]string {
		l := maps.Clone(id)
		l[k] = v
		return l
	}
	out := []string{ksmFrom(instance, "kube_pod_created", id, constant(start+p.created))}
	if p.scheduled != "" {
		for _, c := range []string{"true", "false", "unknown"} {
			v := int64(0)
			if strings.EqualFold(c, p.scheduled) {
				v = 1
			}
			out = append(out, ksmFrom(instance, "kube_pod_status_scheduled", with("condition", c), constant(v)))
		}
	}
	phase := p.phase
	if phase == "" {
		phase = "Pending"
	}
	for _, ph := range []string{"Pending", "Succeeded", "Failed", "Unknown", "Running"} {
		v := int64(0)
		if ph == phase {
			v = 1
		}
		out = append(out, ksmFrom(instance, "kube_pod_status_phase", with("phase", ph), constant(v)))
	}
	info := maps.Clone(id)
	info["node"], info["created_by_kind"], info["created_by_name"], info["host_network"] = p.node, "DaemonSet", "ds", "false"
	out = append(out, ksmFrom(instance, "kube_pod_info", info, constant(1)))
	podLabels := maps.Clone(id)
	for k, v := range p.labels {
		podLabels["label_"+strings.NewReplacer(".", "_", "-", "_", "/", "_").Replace(k)] = v
	}
	out = append(out, ksmFrom(instance, "kube_pod_labels", podLabels, constant(1)))
	if p.claim != "" || p.template != "" {
		claim := maps.Clone(id)
		claim["claim_name"], claim["resourceclaim_name"], claim["resourceclaim_template_name"] = "gpu", p.claim, p.template
		out = append(out, ksmFrom(instance, "kube_pod_resourceclaim_info", claim, constant(1)))
	}
	if p.asks != "" {
		req := maps.Clone(id)
		req["container"], req["node"], req["unit"] = "main", p.node, "integer"
		req["resource"] = strings.NewReplacer(".", "_", "-", "_", "/", "_").Replace(p.asks)
		out = append(out, ksmFrom(instance, "kube_pod_container_resource_requests", req, constant(1)))
	}
	return out
}

// quota is one ResourceQuota key: used and hard as series values.
func quota(ns, name, resource, used, hard string) []string {
	l := map[string]string{"namespace": ns, "resourcequota": name, "resource": resource}
	u, h := maps.Clone(l), maps.Clone(l)
	u["type"], h["type"] = "used", "hard"
	return []string{ksm("kube_resourcequota", u, used), ksm("kube_resourcequota", h, hard)}
}

func node(name, pool string) []string {
	return []string{ksm("kube_node_labels", map[string]string{"node": name, "label_gpu_tenancy_io_pool": pool}, constant(1))}
}

func prepareErrors(nodeName, values string) []string {
	return []string{series("nvidia_dra_node_prepare_errors_total", map[string]string{
		"driver": naming.Driver, "error_type": "CDIUpdateFailed", "job": jobs.KubeletPlugin, "instance": "10.0.1.7:8080",
		"namespace": naming.DriverNamespace, "pod": "dra-driver-nvidia-gpu-kubelet-plugin-x", "node": nodeName,
	}, values)}
}

// inNamespace moves the plugin's series to another namespace, as GKE labels those of a pod scraped there.
func inNamespace(ns string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Replace(l, `namespace="`+naming.DriverNamespace+`"`, `namespace="`+ns+`"`, 1)
	}
	return out
}

var pluginLabels = map[string]string{rules.KubeletPluginComponentLabel: rules.KubeletPluginComponent}

func join(parts ...[]string) []string { return slices.Concat(parts...) }

// evaluate runs every rule over the series and reports the alerts at each eval time.
func evaluate(t *testing.T, p rules.Params, lines []string, at ...string) *ruletest.Response {
	t.Helper()
	if _, err := toolbin.Path(ruletest.PromQLEval); err != nil && testing.Short() {
		t.Skipf("-short without tools: %v", err)
	}
	p.Jobs = jobs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules: rules.File{Groups: rules.Groups(rules.Rules(p))},
		Load:  "load 1m\n  " + strings.Join(lines, "\n  ") + "\n",
		Start: start, EvalTimes: at,
	})
	require.NoError(t, err)
	return resp
}

// alertCase is one behaviour of one rule: at time at, the alerts of rule in state are exactly want, each given as the
// labels it must carry ("" for a label it must not carry).
type alertCase struct {
	name   string
	params rules.Params
	series []string
	at     string
	state  string
	want   []map[string]string
}

func runCases(t *testing.T, rule string, cases []alertCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := evaluate(t, tc.params, tc.series, tc.at)
			got := resp.At(tc.at, rule, tc.state)
			if len(tc.want) == 0 {
				assert.Empty(t, resp.At(tc.at, rule, "pending"), "no pending %s", rule)
				assert.Empty(t, resp.At(tc.at, rule, "firing"), "no firing %s", rule)
				return
			}
			require.Len(t, got, len(tc.want), "%s alerts %s at %s: %+v", rule, tc.state, tc.at, got)
			sort.Slice(got, func(i, j int) bool { return fmt.Sprint(got[i].Labels) < fmt.Sprint(got[j].Labels) })
			for i, want := range tc.want {
				for k, v := range want {
					if v == "" {
						assert.NotContains(t, got[i].Labels, k)
					} else {
						assert.Equal(t, v, got[i].Labels[k], "label %s of %+v", k, got[i].Labels)
					}
				}
			}
		})
	}
}

func TestClaimPendingTooLong(t *testing.T) {
	waiting := pod{ns: legalNS, name: "whole-c", scheduled: "False", claim: "whole-c"}
	running := pod{ns: legalNS, name: "whole-a", scheduled: "True", node: "gpu-a100-whole-0", claim: "whole-a"}
	tenants := join(namespace(legalNS, "legal-ai"), namespace(researchNS, "research-ai"))
	fires := []map[string]string{{
		"alertname": rules.ClaimPendingTooLong, "severity": "warning", "tenant": "legal-ai", "namespace": legalNS,
		"pod": "whole-c", "uid": "uid-whole-c", "claim_name": "gpu", "resourceclaim_name": "whole-c",
		"job": "", "instance": "",
	}}
	oldWait := pod{ns: legalNS, name: "whole-c", scheduled: "False", claim: "whole-c", created: -20 * 60}
	fromTemplate := pod{ns: researchNS, name: "slice-b", scheduled: "False", claim: "slice-b-gpu-7xk2p", template: "slice"}
	otherTenant := pod{ns: researchNS, name: "slice-a", scheduled: "True", node: "gpu-a100-mig-0", claim: "slice-a-gpu-abcde", template: "slice"}
	untenanted := pod{ns: "ml-platform", name: "trainer", scheduled: "False", claim: "trainer"}
	secondKSM := join(waiting.seriesFrom(ksmB), []string{ksmFrom(ksmB, "kube_namespace_labels",
		map[string]string{"namespace": legalNS, "label_gpu_tenancy_io_tenant": "legal-ai"}, constant(1))})
	runCases(t, rules.ClaimPendingTooLong, []alertCase{
		{name: "an unscheduled pod with a claim fires past the threshold, with its tenant",
			series: join(tenants, waiting.series()), at: "16m", state: "firing", want: fires},
		{name: "an unscheduled pod within the threshold is silent",
			series: join(tenants, waiting.series()), at: "14m"},
		{name: "a scheduled pod with a claim is silent",
			series: join(tenants, running.series()), at: "20m"},
		{name: "an unscheduled pod without a claim is silent",
			series: join(tenants, pod{ns: legalNS, name: "cpu-only", scheduled: "False"}.series()), at: "20m"},
		{name: "a pod the scheduler has not considered yet is silent",
			series: join(tenants, pod{ns: legalNS, name: "new", claim: "new"}.series()), at: "20m"},
		{name: "a pod already waiting past the threshold fires at the first evaluation, as after an evaluator restart",
			series: join(tenants, oldWait.series()), at: "0s", state: "firing", want: fires},
		{name: "the threshold is a parameter",
			params: rules.Params{PendingClaimAfter: 5 * time.Minute},
			series: join(tenants, waiting.series()), at: "6m", state: "firing", want: fires},
		{name: "a claim from a template is reported with its template",
			series: join(tenants, fromTemplate.series()), at: "16m", state: "firing", want: []map[string]string{{
				"tenant": "research-ai", "pod": "slice-b", "resourceclaim_name": "slice-b-gpu-7xk2p", "resourceclaim_template_name": "slice"}}},
		{name: "only the waiting tenant's pod fires while another tenant's pod is scheduled",
			series: join(tenants, waiting.series(), otherTenant.series()), at: "16m", state: "firing", want: fires},
		{name: "a namespace without the tenant label fires without a tenant",
			series: join(tenants, namespace("ml-platform", ""), untenanted.series()), at: "16m", state: "firing",
			want: []map[string]string{{"namespace": "ml-platform", "pod": "trainer", "tenant": ""}}},
		{name: "two kube-state-metrics instances still give one alert",
			series: join(tenants, waiting.series(), secondKSM), at: "16m", state: "firing", want: fires},
		{name: "series of another job are ignored",
			series: join(tenants, otherJob(waiting.series())), at: "16m"},
	})
}

// A pod that asks for a class by its extended-resource name has no claim while it waits: the alert names what it asks for.
func TestClaimPendingTooLongForAPodAskingByName(t *testing.T) {
	tenants := join(namespace(legalNS, "legal-ai"), namespace(researchNS, "research-ai"))
	named := rules.Params{ExtendedResourceNames: []string{"gpu-tenancy.io/gpu-whole", "gpu-tenancy.io/gpu-slice"}}
	waiting := pod{ns: legalNS, name: "trainer", scheduled: "False", asks: "gpu-tenancy.io/gpu-whole"}
	fires := []map[string]string{{
		"alertname": rules.ClaimPendingTooLong, "severity": "warning", "tenant": "legal-ai", "namespace": legalNS,
		"pod": "trainer", "uid": "uid-trainer", "resource": "gpu_tenancy_io_gpu_whole",
		"resourceclaim_name": "none yet: it asks for gpu-tenancy.io/gpu-whole", "job": "", "instance": "",
	}}
	claimWaiting := pod{ns: researchNS, name: "slice-b", scheduled: "False", claim: "slice-b"}
	runCases(t, rules.ClaimPendingTooLong, []alertCase{
		{name: "an unscheduled pod asking by name fires past the threshold, with its tenant and the name",
			params: named, series: join(tenants, waiting.series()), at: "16m", state: "firing", want: fires},
		{name: "within the threshold it is silent",
			params: named, series: join(tenants, waiting.series()), at: "14m"},
		{name: "a scheduled pod asking by name is silent",
			params: named, series: join(tenants, pod{ns: legalNS, name: "trainer", scheduled: "True", node: "gpu-a100-whole-0",
				asks: "gpu-tenancy.io/gpu-whole"}.series()), at: "20m"},
		{name: "a pod asking for a name no class carries is silent",
			params: named, series: join(tenants, pod{ns: legalNS, name: "dongle", scheduled: "False", asks: "example.com/dongle"}.series()), at: "20m"},
		{name: "without names in the catalog the rule reads no request",
			series: join(tenants, waiting.series()), at: "20m"},
		{name: "a pod waiting for a claim still fires beside it",
			params: named, series: join(tenants, waiting.series(), claimWaiting.series()), at: "16m", state: "firing",
			want: append([]map[string]string{{"pod": "slice-b", "resourceclaim_name": "slice-b", "tenant": "research-ai"}}, fires...)},
	})
}

// otherJob moves series to a kube-state-metrics this platform does not run.
func otherJob(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Replace(l, `job="`+jobs.KubeStateMetrics+`"`, `job="kube-state-metrics"`, 1)
	}
	return out
}

func TestTenantQuotaExhausted(t *testing.T) {
	whole := "gpu-whole" + naming.DeviceQuotaSuffix
	tenants := namespace(legalNS, "legal-ai")
	fires := []map[string]string{{
		"alertname": rules.TenantQuotaExhausted, "severity": "info", "tenant": "legal-ai", "class": "gpu-whole",
		"namespace": legalNS, "resource": whole,
	}}
	tightest := join(quota(legalNS, naming.TenantQuota, whole, constant(3), constant(5)), quota(legalNS, "extra", whole, constant(3), constant(3)))
	runCases(t, rules.TenantQuotaExhausted, []alertCase{
		{name: "a tenant at a class's quota for 30m fires, with tenant and class",
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, constant(3), constant(3))), at: "30m", state: "firing", want: fires},
		{name: "a tenant at a class's quota for less than 30m is pending",
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, constant(3), constant(3))), at: "29m", state: "pending", want: fires},
		{name: "a tenant below a class's quota is silent",
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, constant(2), constant(3))), at: "30m"},
		{name: "a tenant that reached the quota 20m ago is still pending",
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, "2x10 3x35", constant(3))), at: "30m", state: "pending", want: fires},
		{name: "a class quota of zero devices is silent",
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, constant(0), constant(0))), at: "30m"},
		{name: "a CPU quota at its limit is silent",
			series: join(tenants, quota(legalNS, naming.TenantQuota, "requests.cpu", constant(16), constant(16))), at: "30m"},
		{name: "the tightest of two quotas on a class counts",
			series: join(tenants, tightest), at: "30m", state: "firing", want: fires},
		{name: "the hold time is a parameter",
			params: rules.Params{QuotaExhaustedFor: 10 * time.Minute},
			series: join(tenants, quota(legalNS, naming.TenantQuota, whole, constant(3), constant(3))), at: "10m", state: "firing", want: fires},
	})
}

func TestKubeletPluginPrepareErrors(t *testing.T) {
	fires := []map[string]string{{
		"alertname": rules.KubeletPluginPrepareErr, "severity": "critical", "node": "gpu-a100-whole-0",
		"error_type": "CDIUpdateFailed", "driver": naming.Driver,
	}}
	runCases(t, rules.KubeletPluginPrepareErr, []alertCase{
		{name: "prepare errors that keep rising fire after 5m",
			series: prepareErrors("gpu-a100-whole-0", "0x5 1+1x40"), at: "12m", state: "firing", want: fires},
		{name: "a prepare error is pending for its first 5m",
			series: prepareErrors("gpu-a100-whole-0", "0x5 1+1x40"), at: "8m", state: "pending", want: fires},
		{name: "a counter that does not rise is silent",
			series: prepareErrors("gpu-a100-whole-0", constant(4)), at: "20m"},
		{name: "errors that stopped more than 10m ago are resolved",
			series: prepareErrors("gpu-a100-whole-0", "0+1x10 10x35"), at: "30m"},
		{name: "errors a tenant pod scraped as the plugin exposes are ignored",
			series: inNamespace(legalNS, prepareErrors("gpu-a100-whole-0", "0x5 1+1x40")), at: "12m"},
	})
}

func TestKubeletPluginNotRunning(t *testing.T) {
	plugin := pod{ns: naming.DriverNamespace, name: "plugin-0", scheduled: "True", phase: "Running", node: "gpu-a100-whole-0", labels: pluginLabels}
	fires := []map[string]string{{
		"alertname": rules.KubeletPluginNotRunning, "severity": "critical", "node": "gpu-a100-whole-0", "pool": "a100-whole",
	}}
	gpuNode := node("gpu-a100-whole-0", "a100-whole")
	notRunning := pod{ns: plugin.ns, name: plugin.name, scheduled: "True", phase: "Pending", node: plugin.node, labels: pluginLabels}
	elsewhere := pod{ns: plugin.ns, name: plugin.name, scheduled: "True", phase: "Running", node: "gpu-a100-mig-0", labels: pluginLabels}
	unlabelled := pod{ns: plugin.ns, name: "other", scheduled: "True", phase: "Running", node: plugin.node}
	impostor := pod{ns: legalNS, name: "kubelet-plugin", scheduled: "True", phase: "Running", node: plugin.node, labels: pluginLabels}
	runCases(t, rules.KubeletPluginNotRunning, []alertCase{
		{name: "a GPU node without a plugin pod fires after 10m, with its pool",
			series: gpuNode, at: "10m", state: "firing", want: fires},
		{name: "a GPU node without a plugin pod is pending for its first 10m",
			series: gpuNode, at: "9m", state: "pending", want: fires},
		{name: "a GPU node with a Running plugin pod is silent",
			series: join(gpuNode, plugin.series()), at: "20m"},
		{name: "a plugin pod that is not Running does not count",
			series: join(gpuNode, notRunning.series()), at: "10m", state: "firing", want: fires},
		{name: "a plugin pod on another node does not count",
			series: join(gpuNode, elsewhere.series()), at: "10m", state: "firing", want: fires},
		{name: "a Running pod without the plugin's label does not count",
			series: join(gpuNode, unlabelled.series()), at: "10m", state: "firing", want: fires},
		{name: "a tenant pod carrying the plugin's label does not count",
			series: join(gpuNode, impostor.series()), at: "10m", state: "firing", want: fires},
		{name: "the plugin counts in the driver namespace the parameters name",
			params: rules.Params{DriverNamespace: "nvidia-dra"},
			series: join(gpuNode, pod{ns: "nvidia-dra", name: plugin.name, scheduled: "True", phase: "Running", node: plugin.node, labels: pluginLabels}.series()),
			at:     "20m"},
		{name: "a node outside the GPU pools is silent",
			series: node("system-0", ""), at: "20m"},
	})
}

func TestAnnotationsNameTenantAndClass(t *testing.T) {
	whole := "gpu-whole" + naming.DeviceQuotaSuffix
	resp := evaluate(t, rules.Params{}, join(namespace(legalNS, "legal-ai"),
		pod{ns: legalNS, name: "whole-c", scheduled: "False", claim: "whole-c"}.series(),
		quota(legalNS, naming.TenantQuota, whole, constant(3), constant(3))), "30m")
	for _, tc := range []struct {
		rule, want string
	}{
		{rules.ClaimPendingTooLong, "Pod vcluster-legal-ai/whole-c of tenant legal-ai waits for ResourceClaim whole-c"},
		{rules.TenantQuotaExhausted, "Tenant legal-ai holds all its gpu-whole devices"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := resp.At("30m", tc.rule, "firing")
			require.Len(t, got, 1)
			assert.Equal(t, tc.want, got[0].Annotations[rules.SummaryAnnotation])
			assert.NotEmpty(t, got[0].Annotations[rules.RunbookAnnotation])
		})
	}
}

// services are n Services of namespace ns as kube_service_info shows them, each holding one address of the range
// (cluster_ip "None" for headless ones), for the whole of the series.
func services(ns string, n int, headless bool) []string {
	var out []string
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
		if headless {
			ip = "None"
		}
		out = append(out, ksm("kube_service_info", map[string]string{"namespace": ns, "service": fmt.Sprintf("s-%s-%d", ns, i),
			"uid": fmt.Sprintf("u-%s-%d", ns, i), "cluster_ip": ip}, constant(1)))
	}
	return out
}

func TestServiceRangeNearlyFull(t *testing.T) {
	fires := []map[string]string{{"alertname": rules.ServiceRangeNearlyFull, "severity": "warning"}}
	of254 := rules.Params{ServiceAddresses: 254}
	runCases(t, rules.ServiceRangeNearlyFull, []alertCase{
		{name: "more than 80% of the range held for 15m fires", params: of254,
			series: join(services(legalNS, 150, false), services(researchNS, 54, false)), at: "15m", state: "firing", want: fires},
		{name: "it is pending for its first 15m", params: of254,
			series: join(services(legalNS, 150, false), services(researchNS, 54, false)), at: "14m", state: "pending", want: fires},
		{name: "80% exactly is silent", params: rules.Params{ServiceAddresses: 250},
			series: services(legalNS, 200, false), at: "20m"},
		{name: "headless Services hold no address", params: of254,
			series: join(services(legalNS, 150, false), services(researchNS, 54, true)), at: "20m"},
		{name: "the size is the range the platform knows", params: rules.Params{ServiceAddresses: 65534},
			series: join(services(legalNS, 150, false), services(researchNS, 54, false)), at: "20m"},
	})
	for _, r := range rules.Rules(rules.Params{Jobs: jobs}) {
		assert.NotEqual(t, rules.ServiceRangeNearlyFull, r.Name, "left out where the platform does not know the range")
	}
}

func TestDeclaredMetricsAreWhatTheExpressionsRead(t *testing.T) {
	resp := evaluate(t, rules.Params{ServiceAddresses: 254}, namespace(legalNS, "legal-ai"), "0s")
	for _, r := range rules.Rules(rules.Params{Jobs: jobs, ServiceAddresses: 254}) {
		t.Run(r.Name, func(t *testing.T) {
			assert.Equal(t, r.Metrics, resp.Selectors[r.Name])
		})
	}
}
