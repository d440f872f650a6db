package monitoring

import (
	"fmt"
	"regexp"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Google Cloud Managed Service for Prometheus scrape objects (GoogleCloudPlatform/prometheus-engine
// pkg/operator/apis/monitoring/v1/pod_types.go, common_types.go @2ffde4e). GKE's managed collection scrapes them and
// writes to Cloud Monitoring, where the alert policies query with PromQL; GMP does not read monitoring.coreos.com
// objects.
const (
	gmpAPIVersion            = "monitoring.googleapis.com/v1"
	clusterPodMonitoringKind = "ClusterPodMonitoring"
	clusterRulesKind         = "ClusterRules"
)

// clusterRulesSpec is v1.RulesSpec (pkg/operator/apis/monitoring/v1/rules_types.go). The recording rules go to
// ClusterRules, not to Cloud Monitoring like the alerts: Cloud Monitoring alert policies only alert. The managed rule
// evaluator, which GKE runs wherever managed collection is on, evaluates ClusterRules against the project's metrics
// scoped to this cluster (every selector gets the cluster's project_id, location and cluster, and so does every
// result) and writes the results back, where PromQL in Cloud Monitoring reads them
// (https://cloud.google.com/stackdriver/docs/managed-prometheus/rules-managed; rules_config.go ClusterRules
// RuleGroupsConfig). Namespaced Rules would scope the selectors to their own namespace, away from the tenants' quotas.
type clusterRulesSpec struct {
	Groups []rules.Group `json:"groups"`
}

// clusterPodMonitoringSpec is v1.ClusterPodMonitoringSpec. Its job label is the object's name.
type clusterPodMonitoringSpec struct {
	Selector     labelSelector       `json:"selector"`
	Endpoints    []scrapeEndpoint    `json:"endpoints"`
	TargetLabels clusterTargetLabels `json:"targetLabels"`
}

type scrapeEndpoint struct {
	Port             intstr.IntOrString `json:"port"`
	Path             string             `json:"path,omitempty"`
	Interval         string             `json:"interval"`
	MetricRelabeling []relabelingRule   `json:"metricRelabeling,omitempty"`
}

// relabelingRule is v1.RelabelingRule (pod_types.go): a keep rule here.
type relabelingRule struct {
	Action       string   `json:"action"`
	SourceLabels []string `json:"sourceLabels"`
	Regex        string   `json:"regex"`
}

// clusterTargetLabels.Metadata is never omitted: an empty list is meaningful (no pod metadata labels).
type clusterTargetLabels struct {
	Metadata []string `json:"metadata"`
}

// kubeStateMetricsClusterPodMonitoring scrapes this platform's kube-state-metrics with no pod metadata labels, so
// that its namespace and pod labels describe the objects, not kube-state-metrics' own pod
// (prometheus-engine examples/kube-state-metrics/kube-state-metrics.yaml: "explicitly empty so the metric labels are
// respected").
func kubeStateMetricsClusterPodMonitoring() clusterPodMonitoringSpec {
	return clusterPodMonitoringSpec{
		Selector:     labelSelector{MatchLabels: kubeStateMetricsSelector},
		Endpoints:    []scrapeEndpoint{{Port: intstr.FromString(kubeStateMetricsPort), Interval: scrapeInterval}},
		TargetLabels: clusterTargetLabels{Metadata: []string{}},
	}
}

// kubeletPluginClusterPodMonitoring scrapes the DRA kubelet plugin by port number ("Name or number of the port to
// scrape", common_types.go ScrapeEndpoint.Port), labelling each series with its namespace, pod and node. A
// ClusterPodMonitoring selects the labelled pods of every namespace (it has no namespace selector: pod_types.go
// ClusterPodMonitoring.endpointScrapeConfig), and a tenant may label its own pods as the plugin's: the samples of pods
// outside the driver's namespace are dropped by their namespace label before they are stored, so that a tenant's pod
// neither feeds the plugin's series nor adds to the project's metrics bill. Its pods are still scraped.
func kubeletPluginClusterPodMonitoring(driverNamespace string) clusterPodMonitoringSpec {
	onlyDriver := relabelingRule{Action: "keep", SourceLabels: []string{"namespace"}, Regex: regexp.QuoteMeta(driverNamespace)}
	return clusterPodMonitoringSpec{
		Selector: labelSelector{MatchLabels: map[string]string{rules.KubeletPluginComponentLabel: rules.KubeletPluginComponent}},
		Endpoints: []scrapeEndpoint{{Port: intstr.FromInt32(kubeletPluginMetricsPort), Path: "/metrics", Interval: scrapeInterval,
			MetricRelabeling: []relabelingRule{onlyDriver}}},
		TargetLabels: clusterTargetLabels{Metadata: []string{"namespace", "node", "pod"}},
	}
}

// alertPolicyType is the type token of Cloud Monitoring alert policies (pulumi-gcp sdk v8.41.1
// go/gcp/monitoring/alertPolicy.go), by which outliveCluster knows them without linking the SDK.
const alertPolicyType = "gcp:monitoring/alertPolicy:AlertPolicy"

// AlertPolicy is one alert rule as a Cloud Monitoring alert policy with a PromQL condition: the project it lives in,
// its display name, the channels it notifies and its user labels.
type AlertPolicy struct {
	Rule                 rules.Rule
	Project              string
	DisplayName          string
	NotificationChannels []string
	UserLabels           map[string]string
}

// AlertPolicyFunc creates policy as the resource called name, with opts, and returns its name in Cloud Monitoring.
type AlertPolicyFunc func(ctx *pulumi.Context, name string, policy AlertPolicy, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error)

// AlertPoliciesPackage is the package that registers GKE's alert policies.
const AlertPoliciesPackage = "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"

// newAlertPolicy creates GKE's alert policies. AlertPoliciesPackage registers it from init, so that only a program
// that monitors GKE links the pulumi-gcp SDK.
var newAlertPolicy AlertPolicyFunc

// RegisterAlertPolicies makes monitoring on GKE possible in this program; AlertPoliciesPackage calls it from init. A
// second registration is a wiring mistake no program could resolve, so it panics.
func RegisterAlertPolicies(f AlertPolicyFunc) {
	if newAlertPolicy != nil {
		panic("monitoring: alert policies are already registered")
	}
	newAlertPolicy = f
}

// AlertPoliciesRegistered says whether this program can create GKE's alert policies.
func AlertPoliciesRegistered() bool { return newAlertPolicy != nil }

// AlertPoliciesNotIncluded is the error, at path, for monitoring on GKE in a program that cannot create its alert
// policies.
func AlertPoliciesNotIncluded(path *field.Path) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: path.String(), BadValue: string(cluster.GKE),
		Detail: fmt.Sprintf("this program does not include the alert policies of monitoring on %s: import _ %q",
			cluster.GKE, AlertPoliciesPackage)}
}
