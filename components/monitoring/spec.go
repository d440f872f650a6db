package monitoring

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Spec is the monitoring section of the stack config (`gpu-tenancy:monitoring`). Empty fields take the defaults
// named on each.
type Spec struct {
	// Enabled turns monitoring on or off; unset, it follows the flavour (see EnabledFor).
	Enabled *bool `json:"enabled"`
	// Namespace holds kube-state-metrics and, on prometheus-operator clusters, the scrape and rule objects.
	// Default DefaultNamespace.
	Namespace string `json:"namespace"`
	// PendingClaimAfter is how long a pod may wait for its ResourceClaims before an alert, a Go duration of at least
	// 1m. Default 15m.
	PendingClaimAfter string `json:"pendingClaimAfter"`
	// QuotaExhaustedFor is how long a tenant must sit at a class's device quota before an alert, a Go duration of at
	// least 1m. Default 30m.
	QuotaExhaustedFor  string                 `json:"quotaExhaustedFor"`
	KubeStateMetrics   KubeStateMetricsSpec   `json:"kubeStateMetrics"`
	GKE                GKESpec                `json:"gke"`
	PrometheusOperator PrometheusOperatorSpec `json:"prometheusOperator"`
	Grafana            GrafanaSpec            `json:"grafana"`
}

// GrafanaSpec ships the operators' dashboard (package dashboard) as a ConfigMap where a Grafana dashboard sidecar
// loads it: the grafana chart's sidecar.dashboards loads ConfigMaps labelled with its `label` (grafana_dashboard) of
// value `labelValue` (any value when empty) from the namespaces it searches (grafana/helm-charts charts/grafana
// values.yaml); kube-prometheus-stack labels its own dashboards grafana_dashboard: "1".
type GrafanaSpec struct {
	// Namespace is one the sidecar searches; unset, no ConfigMap is made (the dashboard's JSON is in docs/).
	Namespace string `json:"namespace"`
	// Label is the label key the sidecar selects. Default DefaultGrafanaLabel.
	Label string `json:"label"`
	// LabelValue is the label's value. Default DefaultGrafanaLabelValue.
	LabelValue string `json:"labelValue"`
}

// The grafana chart's sidecar label, and the value kube-prometheus-stack gives its own dashboards.
const (
	DefaultGrafanaLabel      = "grafana_dashboard"
	DefaultGrafanaLabelValue = "1"
)

// KubeStateMetricsSpec places the kube-state-metrics chart.
type KubeStateMetricsSpec struct {
	// Chart defaults to DefaultKubeStateMetricsChart.
	Chart helmchart.Chart `json:"chart"`
	// ImageTag is the kube-state-metrics image tag, v2.20.0 or later. Default rules.KubeStateMetricsVersion.
	ImageTag string `json:"imageTag"`
}

// GKESpec is used on GKE only.
type GKESpec struct {
	// NotificationChannels receive every alert policy: Cloud Monitoring channel names,
	// projects/<project>/notificationChannels/<id>.
	NotificationChannels []string `json:"notificationChannels"`
}

// PrometheusOperatorSpec is used on prometheus-operator clusters (Scaleway, existing) only.
type PrometheusOperatorSpec struct {
	// Labels go on the PrometheusRule and PodMonitors, for a Prometheus whose ruleSelector and podMonitorSelector
	// require them (kube-prometheus-stack selects `release: <its release>` by default).
	Labels map[string]string `json:"labels"`
}

// DefaultNamespace is the namespace of kube-state-metrics and the prometheus-operator objects.
const DefaultNamespace = "gpu-tenancy-monitoring"

// minHold bounds both thresholds from below: a shorter wait reports pods the scheduler is still working through, and
// a shorter hold at quota reports every tenant that momentarily fills its grant.
const minHold = time.Minute

var (
	notificationChannelRE = regexp.MustCompile(`^projects/[^/]+/notificationChannels/[^/]+$`)
	imageTagRE            = regexp.MustCompile(`^v([0-9]+)\.([0-9]+)\.([0-9]+)$`)
)

// NamespaceOrDefault is the namespace monitoring runs in.
func (s Spec) NamespaceOrDefault() string {
	if s.Namespace == "" {
		return DefaultNamespace
	}
	return s.Namespace
}

// EnabledFor says whether monitoring runs on a cluster of flavour f: as configured, else on for the clouds and off
// for an existing cluster, which may have no prometheus-operator to read the rules.
func (s Spec) EnabledFor(f cluster.Flavour) bool {
	if s.Enabled != nil {
		return *s.Enabled
	}
	return f != cluster.Existing
}

// Validate checks the spec at path (the lead passes `gpu-tenancy:monitoring`); it is the single owner of these
// rules. Every error names its path, the value given and what is allowed.
func (s Spec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Namespace != "" {
		errs = append(errs, fieldcheck.DNSLabel(path.Child("namespace"), s.Namespace, validation.DNS1123LabelMaxLength)...)
	}
	if s.PendingClaimAfter != "" {
		errs = append(errs, validateDuration(path.Child("pendingClaimAfter"), s.PendingClaimAfter, minHold)...)
	}
	if s.QuotaExhaustedFor != "" {
		errs = append(errs, validateDuration(path.Child("quotaExhaustedFor"), s.QuotaExhaustedFor, minHold)...)
	}
	kp := path.Child("kubeStateMetrics")
	errs = append(errs, s.KubeStateMetrics.Chart.Validate(kp.Child("chart"))...)
	if tag := s.KubeStateMetrics.ImageTag; tag != "" && !atLeastKubeStateMetricsVersion(tag) {
		errs = append(errs, field.Invalid(kp.Child("imageTag"), tag, fmt.Sprintf(
			"must be a kube-state-metrics release tag %s or later, such as %s: earlier releases lack kube_pod_resourceclaim_info",
			rules.KubeStateMetricsVersion, rules.KubeStateMetricsVersion)))
	}
	cp := path.Child("gke", "notificationChannels")
	for i, ch := range s.GKE.NotificationChannels {
		switch {
		case !notificationChannelRE.MatchString(ch):
			errs = append(errs, field.Invalid(cp.Index(i), ch, "must be a notification channel name, projects/<project>/notificationChannels/<id>"))
		case slices.Index(s.GKE.NotificationChannels, ch) < i:
			errs = append(errs, field.Duplicate(cp.Index(i), ch))
		}
	}
	gp := path.Child("grafana")
	if s.Grafana.Namespace != "" {
		errs = append(errs, fieldcheck.DNSLabel(gp.Child("namespace"), s.Grafana.Namespace, validation.DNS1123LabelMaxLength)...)
	} else if s.Grafana != (GrafanaSpec{}) {
		errs = append(errs, field.Required(gp.Child("namespace"), "the namespace whose ConfigMaps the Grafana dashboard sidecar loads: label and labelValue say nothing without it"))
	}
	if s.Grafana.Label != "" {
		for _, msg := range validation.IsQualifiedName(s.Grafana.Label) {
			errs = append(errs, field.Invalid(gp.Child("label"), s.Grafana.Label, "label key: "+msg))
		}
	}
	for _, msg := range validation.IsValidLabelValue(s.Grafana.LabelValue) {
		errs = append(errs, field.Invalid(gp.Child("labelValue"), s.Grafana.LabelValue, "label value: "+msg))
	}
	lp := path.Child("prometheusOperator", "labels")
	for _, k := range sortedKeys(s.PrometheusOperator.Labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(lp.Key(k), k, "label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(s.PrometheusOperator.Labels[k]) {
			errs = append(errs, field.Invalid(lp.Key(k), s.PrometheusOperator.Labels[k], "label value: "+msg))
		}
	}
	return errs
}

// ValidateFor is Validate plus the checks that need the cluster's flavour: a section of another flavour's renderer
// is refused, as it is most likely a stack mix-up.
func (s Spec) ValidateFor(path *field.Path, f cluster.Flavour) field.ErrorList {
	errs := s.Validate(path)
	if f == cluster.GKE && len(s.PrometheusOperator.Labels) > 0 {
		errs = append(errs, field.Forbidden(path.Child("prometheusOperator", "labels"), fmt.Sprintf(
			"is not used on %s, where Managed Service for Prometheus and Cloud Monitoring take the rules (given %v)", f, s.PrometheusOperator.Labels)))
	}
	if f != cluster.GKE && len(s.GKE.NotificationChannels) > 0 {
		errs = append(errs, field.Forbidden(path.Child("gke", "notificationChannels"), fmt.Sprintf(
			"is not used on %s, where a PrometheusRule takes the rules and Alertmanager notifies (given %v)", f, s.GKE.NotificationChannels)))
	}
	return errs
}

func validateDuration(p *field.Path, value string, minimum time.Duration) field.ErrorList {
	d, err := time.ParseDuration(value)
	if err != nil || d < minimum || d%time.Second != 0 {
		return field.ErrorList{field.Invalid(p, value, fmt.Sprintf(
			"must be a duration in whole seconds of at least %s, such as 90s, 15m or 1h", rules.PromDuration(minimum)))}
	}
	return nil
}

func atLeastKubeStateMetricsVersion(tag string) bool {
	want, got := imageTagRE.FindStringSubmatch(rules.KubeStateMetricsVersion), imageTagRE.FindStringSubmatch(tag)
	if got == nil {
		return false
	}
	for i := 1; i <= 3; i++ {
		g, _ := strconv.Atoi(got[i])
		w, _ := strconv.Atoi(want[i])
		if g != w {
			return g > w
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// params are the rule thresholds of a valid spec.
func (s Spec) params(jobs rules.Jobs) rules.Params {
	p := rules.Params{Jobs: jobs}
	// Validate has accepted both, so parse errors cannot occur; empty values parse to zero, which rules.Rules reads
	// as its defaults.
	p.PendingClaimAfter, _ = time.ParseDuration(s.PendingClaimAfter)
	p.QuotaExhaustedFor, _ = time.ParseDuration(s.QuotaExhaustedFor)
	return p
}
