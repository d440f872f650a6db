package rules

import (
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// KubeStateMetricsVersion is the first kube-state-metrics release with kube_pod_resourceclaim_info, which the
// pending-claim rule needs (k8s.io/kube-state-metrics/v2@v2.20.0 CHANGELOG.md, PR #3005).
const KubeStateMetricsVersion = "v2.20.0"

// KubeStateMetricsSettings are the kube-state-metrics options the rules need: only the collectors and metrics they
// read, and the Kubernetes labels they join on.
type KubeStateMetricsSettings struct {
	// Collectors are kube-state-metrics resources (--resources).
	Collectors []string
	// MetricLabelsAllowlist entries are "<resource>=[<label key>,...]" (--metric-labels-allowlist).
	MetricLabelsAllowlist []string
	// MetricAllowlist are the metric names exposed (--metric-allowlist).
	MetricAllowlist []string
}

// collectors maps a metric name prefix to the kube-state-metrics resource that generates it
// (k8s.io/kube-state-metrics/v2@v2.20.0 docs/metrics/*).
var collectors = []struct{ prefix, resource string }{
	{"kube_namespace_", "namespaces"},
	{"kube_node_", "nodes"},
	{"kube_pod_", "pods"},
	{"kube_resourcequota", "resourcequotas"},
	{"kube_service_", "services"},
}

// Collector is the kube-state-metrics resource that generates metric, or "" if the metric is not kube-state-metrics'.
func Collector(metric string) string {
	for _, c := range collectors {
		if strings.HasPrefix(metric, c.prefix) {
			return c.resource
		}
	}
	return ""
}

// KubeStateMetrics returns the settings that expose what the alert rules rs and the recording rules recs read.
func KubeStateMetrics(rs []Rule, recs ...Recording) KubeStateMetricsSettings {
	var s KubeStateMetricsSettings
	var metrics []string
	for _, r := range rs {
		metrics = append(metrics, r.Metrics...)
	}
	for _, r := range recs {
		metrics = append(metrics, r.Metrics...)
	}
	for _, m := range metrics {
		if c := Collector(m); c != "" {
			s.MetricAllowlist = append(s.MetricAllowlist, m)
			s.Collectors = append(s.Collectors, c)
		}
	}
	slices.Sort(s.MetricAllowlist)
	s.MetricAllowlist = slices.Compact(s.MetricAllowlist)
	slices.Sort(s.Collectors)
	s.Collectors = slices.Compact(s.Collectors)
	s.MetricLabelsAllowlist = []string{
		"namespaces=[" + naming.TenantNamespaceLabel + "]",
		"nodes=[" + naming.PoolLabel + "]",
		"pods=[" + KubeletPluginComponentLabel + "]",
	}
	return s
}

// Flags are the command-line flags the settings become, spelled as the kube-state-metrics chart writes them from
// its values collectors, metricLabelsAllowlist and metricAllowlist (prometheus-community/helm-charts
// charts/kube-state-metrics 8.4.0 templates/deployment.yaml).
func (s KubeStateMetricsSettings) Flags() []string {
	return []string{
		"--resources=" + strings.Join(s.Collectors, ","),
		"--metric-labels-allowlist=" + strings.Join(s.MetricLabelsAllowlist, ","),
		"--metric-allowlist=" + strings.Join(s.MetricAllowlist, ","),
	}
}
