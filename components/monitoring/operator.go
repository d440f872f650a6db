package monitoring

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

// prometheus-operator's API (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@v0.95.2 v1).
// Its Go module requires k8s.io/api v0.37, which would move the product's k8s.io modules off v0.34, so the few
// fields used are declared here with the same JSON names.
const (
	operatorAPIVersion = "monitoring.coreos.com/v1"
	podMonitorKind     = "PodMonitor"
	prometheusRuleKind = "PrometheusRule"
	// PrometheusRuleName names the PrometheusRule holding rules.GroupName.
	PrometheusRuleName = "gpu-tenancy-dra-alerts"
	// ShowbackRulesName names the PrometheusRule (or, on GKE, the ClusterRules) holding rules.ShowbackGroupName.
	ShowbackRulesName = "gpu-tenancy-showback"
)

// prometheusRuleSpec is v1.PrometheusRuleSpec (prometheusrule_types.go).
type prometheusRuleSpec struct {
	Groups []rules.Group `json:"groups"`
}

// podMonitorSpec is v1.PodMonitorSpec (podmonitor_types.go).
type podMonitorSpec struct {
	Selector            labelSelector        `json:"selector"`
	NamespaceSelector   namespaceSelector    `json:"namespaceSelector"`
	PodMetricsEndpoints []podMetricsEndpoint `json:"podMetricsEndpoints"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type namespaceSelector struct {
	MatchNames []string `json:"matchNames"`
}

// podMetricsEndpoint is v1.PodMetricsEndpoint: a named Port or, for a container that names none, a PortNumber.
type podMetricsEndpoint struct {
	Port        string          `json:"port,omitempty"`
	PortNumber  int32           `json:"portNumber,omitempty"`
	Path        string          `json:"path,omitempty"`
	Interval    string          `json:"interval"`
	HonorLabels bool            `json:"honorLabels,omitempty"`
	Relabelings []relabelConfig `json:"relabelings,omitempty"`
}

// relabelConfig is v1.RelabelConfig (prometheus_types.go).
type relabelConfig struct {
	Action       string   `json:"action"`
	SourceLabels []string `json:"sourceLabels,omitempty"`
	TargetLabel  string   `json:"targetLabel"`
	Replacement  string   `json:"replacement,omitempty"`
}

// scrapeInterval is how often both scrapes run: the rules' evaluation interval, so each evaluation sees a fresh
// sample.
var scrapeInterval = rules.PromDuration(rules.EvaluationInterval)

// jobLabel replaces the job prometheus-operator derives (<namespace>/<PodMonitor name>) by the job the rules select;
// user relabelings run after the operator's own (Documentation/user-guides/running-exporters.md: job is
// {metadata.namespace}/{metadata.name} of the PodMonitor unless jobLabel is set).
func jobLabel(job string) relabelConfig {
	return relabelConfig{Action: "replace", TargetLabel: "job", Replacement: job}
}

// kubeStateMetricsPodMonitor scrapes this platform's kube-state-metrics. honorLabels keeps the namespace and pod
// labels of the objects described instead of renaming them exported_namespace and exported_pod in favour of
// kube-state-metrics' own pod (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#scrape_config,
// honor_labels).
func kubeStateMetricsPodMonitor(namespace string, jobs rules.Jobs) podMonitorSpec {
	return podMonitorSpec{
		Selector:          labelSelector{MatchLabels: kubeStateMetricsSelector},
		NamespaceSelector: namespaceSelector{MatchNames: []string{namespace}},
		PodMetricsEndpoints: []podMetricsEndpoint{{
			Port: kubeStateMetricsPort, Interval: scrapeInterval, HonorLabels: true,
			Relabelings: []relabelConfig{jobLabel(jobs.KubeStateMetrics)},
		}},
	}
}

// kubeletPluginPodMonitor scrapes the NVIDIA DRA kubelet plugin's GPU metrics endpoint. The chart declares no
// container port, so the endpoint is addressed by number (dra-driver-nvidia-gpu v0.4.0 values.yaml
// kubeletPlugin.metrics.gpuHttpEndpoint ":8080"; templates/kubeletplugin.yaml). The node label names where
// preparation failed.
func kubeletPluginPodMonitor(driverNamespace string, jobs rules.Jobs) podMonitorSpec {
	return podMonitorSpec{
		Selector:          labelSelector{MatchLabels: map[string]string{rules.KubeletPluginComponentLabel: rules.KubeletPluginComponent}},
		NamespaceSelector: namespaceSelector{MatchNames: []string{driverNamespace}},
		PodMetricsEndpoints: []podMetricsEndpoint{{
			PortNumber: kubeletPluginMetricsPort, Path: "/metrics", Interval: scrapeInterval,
			Relabelings: []relabelConfig{
				jobLabel(jobs.KubeletPlugin),
				{Action: "replace", SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"},
			},
		}},
	}
}

// kubeletPluginMetricsPort is the kubelet plugin's GPU metrics port (dra-driver-nvidia-gpu v0.4.0 values.yaml).
const kubeletPluginMetricsPort = 8080
