package monitoring

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

// The kube-state-metrics chart: 8.4.0 is the first chart version whose appVersion is 2.20.0
// (prometheus-community/helm-charts commit 1982f1c5828920f5d4ea5d04956169e81f8c5129, charts/kube-state-metrics/Chart.yaml).
const (
	KubeStateMetricsChartRepo    = "https://prometheus-community.github.io/helm-charts"
	KubeStateMetricsChartName    = "kube-state-metrics"
	KubeStateMetricsChartVersion = "8.4.0"
	// KubeStateMetricsRelease is the Helm release name; the chart names its objects after it and labels its pods
	// app.kubernetes.io/instance=<release> (charts/kube-state-metrics 8.4.0 templates/_helpers.tpl selectorLabels).
	KubeStateMetricsRelease = "gpu-tenancy-kube-state-metrics"
	// kubeStateMetricsPort is the container port serving the object metrics; "metrics" is the self-telemetry port
	// (charts/kube-state-metrics 8.4.0 templates/deployment.yaml).
	kubeStateMetricsPort = "http"
)

// DefaultKubeStateMetricsChart is the chart installed when the spec names none.
var DefaultKubeStateMetricsChart = helmchart.Chart{
	Repo: KubeStateMetricsChartRepo, Name: KubeStateMetricsChartName, Version: KubeStateMetricsChartVersion,
}

// kubeStateMetricsSelector selects the pods of this platform's kube-state-metrics only, not another release of the
// chart such as kube-prometheus-stack's or GKE's managed one.
var kubeStateMetricsSelector = map[string]string{
	"app.kubernetes.io/name":     KubeStateMetricsChartName,
	"app.kubernetes.io/instance": KubeStateMetricsRelease,
}

// kubeStateMetricsValues are the chart values this project sets (charts/kube-state-metrics 8.4.0 values.yaml);
// every other key keeps the chart default.
type kubeStateMetricsValues struct {
	Image imageValues `json:"image"`
	// Collectors, MetricLabelsAllowlist and MetricAllowlist become --resources, --metric-labels-allowlist and
	// --metric-allowlist (templates/deployment.yaml).
	Collectors            []string `json:"collectors"`
	MetricLabelsAllowlist []string `json:"metricLabelsAllowlist"`
	MetricAllowlist       []string `json:"metricAllowlist"`
	// PrometheusScrape off drops the Service's prometheus.io/scrape annotation (templates/service.yaml): the scrape
	// objects rendered here are the one scrape, and an annotation-driven scraper would ingest a second copy.
	PrometheusScrape bool `json:"prometheusScrape"`
	// NodeSelector and Tolerations place the Deployment (templates/deployment.yaml).
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations  []cluster.Toleration `json:"tolerations,omitempty"`
}

type imageValues struct {
	// Tag is set explicitly so that the version the rules need does not hang on the chart's appVersion.
	Tag string `json:"tag"`
}

func chartValues(s rules.KubeStateMetricsSettings, imageTag string, placement cluster.Placement) kubeStateMetricsValues {
	return kubeStateMetricsValues{
		Image:                 imageValues{Tag: imageTag},
		Collectors:            s.Collectors,
		MetricLabelsAllowlist: s.MetricLabelsAllowlist,
		MetricAllowlist:       s.MetricAllowlist,
		NodeSelector:          placement.NodeSelector,
		Tolerations:           placement.TolerationValues(),
	}
}
