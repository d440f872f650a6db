package monitoring

import (
	"regexp"
	"strconv"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/pulumi/pulumi-gcp/sdk/v8/go/gcp/monitoring"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	Port     intstr.IntOrString `json:"port"`
	Path     string             `json:"path,omitempty"`
	Interval string             `json:"interval"`
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
// scrape", common_types.go ScrapeEndpoint.Port), labelling each series with its namespace, pod and node.
func kubeletPluginClusterPodMonitoring() clusterPodMonitoringSpec {
	return clusterPodMonitoringSpec{
		Selector:     labelSelector{MatchLabels: map[string]string{rules.KubeletPluginComponentLabel: rules.KubeletPluginComponent}},
		Endpoints:    []scrapeEndpoint{{Port: intstr.FromInt32(kubeletPluginMetricsPort), Path: "/metrics", Interval: scrapeInterval}},
		TargetLabels: clusterTargetLabels{Metadata: []string{"namespace", "node", "pod"}},
	}
}

// gcpSeverities maps alert severities to Cloud Monitoring's (CRITICAL, ERROR, WARNING: pulumi-gcp sdk v8.41.1
// go/gcp/monitoring/alertPolicy.go Severity); info has no counterpart and leaves the policy's severity unset.
var gcpSeverities = map[rules.Severity]string{rules.Critical: "CRITICAL", rules.Warning: "WARNING"}

// labelRef is the one template form rule texts use.
var labelRef = regexp.MustCompile(`\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// gcpText turns a rule text's {{ $labels.x }} into Cloud Monitoring's documentation variable ${metric.label.x}
// (https://cloud.google.com/monitoring/alerts/doc-variables).
func gcpText(s string) string { return labelRef.ReplaceAllString(s, `$${metric.label.$1}`) }

// gcpDuration writes a protobuf JSON duration, whole seconds ("900s"), as the Monitoring API takes it.
func gcpDuration(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }

// alertPolicyArgs renders one rule as a Cloud Monitoring alert policy with a PromQL condition: the same query, hold
// time and labels as the rule, and its texts as documentation.
func alertPolicyArgs(r rules.Rule, project, displayPrefix string, channels []string, userLabels map[string]string) *monitoring.AlertPolicyArgs {
	args := &monitoring.AlertPolicyArgs{
		Project:     pulumi.String(project),
		DisplayName: pulumi.String(displayPrefix + r.Name),
		Combiner:    pulumi.String("OR"),
		Conditions: monitoring.AlertPolicyConditionArray{monitoring.AlertPolicyConditionArgs{
			DisplayName: pulumi.String(r.Name),
			ConditionPrometheusQueryLanguage: &monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs{
				Query:              pulumi.String(r.Expr),
				Duration:           pulumi.String(gcpDuration(r.For)),
				EvaluationInterval: pulumi.String(gcpDuration(rules.EvaluationInterval)),
				RuleGroup:          pulumi.String(rules.GroupName),
				AlertRule:          pulumi.String(r.Name),
				Labels:             pulumi.StringMap{rules.SeverityLabel: pulumi.String(string(r.Severity))},
				// The first `up` creates the policies in the same run that installs kube-state-metrics, before any of
				// the metrics exist in the project; with validation on, the Monitoring API would refuse them
				// ("Whether to disable metric existence validation for this condition",
				// https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#PrometheusQueryLanguageCondition).
				DisableMetricValidation: pulumi.Bool(true),
			},
		}},
		Documentation: &monitoring.AlertPolicyDocumentationArgs{
			Subject:  pulumi.String(gcpText(r.Summary)),
			Content:  pulumi.String(gcpText(r.Description) + "\n\nRunbook: " + gcpText(r.Runbook)),
			MimeType: pulumi.String("text/markdown"),
		},
		NotificationChannels: pulumi.ToStringArray(channels),
		UserLabels:           pulumi.ToStringMap(userLabels),
	}
	if sev, ok := gcpSeverities[r.Severity]; ok {
		args.Severity = pulumi.String(sev)
	}
	return args
}
