package monitoring

import (
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var specPath = field.NewPath("gpu-tenancy:monitoring")

func boolPtr(b bool) *bool { return &b }

func TestSpecValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"the empty spec, all defaults", Spec{}},
		{"every field set", Spec{
			Enabled: boolPtr(true), Namespace: "observability", PendingClaimAfter: "10m", QuotaExhaustedFor: "1h",
			KubeStateMetrics:   KubeStateMetricsSpec{Chart: helmchart.Chart{Repo: "https://charts.example.com", Name: "kube-state-metrics", Version: "8.5.0"}, ImageTag: "v2.21.3"},
			GKE:                GKESpec{NotificationChannels: []string{"projects/gpu-dev/notificationChannels/123", "projects/gpu-dev/notificationChannels/456"}},
			PrometheusOperator: PrometheusOperatorSpec{Labels: map[string]string{"release": "kube-prometheus-stack"}},
			Grafana:            GrafanaSpec{Namespace: "grafana", Label: "grafana_dashboard", LabelValue: "1"},
		}},
		{"thresholds at their minimum", Spec{PendingClaimAfter: "1m", QuotaExhaustedFor: "60s"}},
		{"a later major version of kube-state-metrics", Spec{KubeStateMetrics: KubeStateMetricsSpec{ImageTag: "v3.0.0"}}},
		{"a local chart", Spec{KubeStateMetrics: KubeStateMetricsSpec{Chart: helmchart.Chart{Path: "/charts/kube-state-metrics"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Empty(t, tc.spec.Validate(specPath)) })
	}
}

func TestSpecValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  Spec
		field string
		typ   field.ErrorType
		bad   any
		says  string
	}{
		{"a namespace that is not a DNS label", Spec{Namespace: "Monitoring"},
			"gpu-tenancy:monitoring.namespace", field.ErrorTypeInvalid, "Monitoring", "RFC 1123"},
		{"a threshold without a unit", Spec{PendingClaimAfter: "15"},
			"gpu-tenancy:monitoring.pendingClaimAfter", field.ErrorTypeInvalid, "15", "such as 90s, 15m or 1h"},
		{"a threshold below a minute", Spec{PendingClaimAfter: "30s"},
			"gpu-tenancy:monitoring.pendingClaimAfter", field.ErrorTypeInvalid, "30s", "at least 1m"},
		{"a threshold in fractions of a second", Spec{PendingClaimAfter: "90.5s"},
			"gpu-tenancy:monitoring.pendingClaimAfter", field.ErrorTypeInvalid, "90.5s", "whole seconds"},
		{"a negative hold time", Spec{QuotaExhaustedFor: "-5m"},
			"gpu-tenancy:monitoring.quotaExhaustedFor", field.ErrorTypeInvalid, "-5m", "at least 1m"},
		{"a Prometheus-style day duration", Spec{QuotaExhaustedFor: "1d"},
			"gpu-tenancy:monitoring.quotaExhaustedFor", field.ErrorTypeInvalid, "1d", "such as 90s, 15m or 1h"},
		{"a kube-state-metrics release without kube_pod_resourceclaim_info", Spec{KubeStateMetrics: KubeStateMetricsSpec{ImageTag: "v2.19.1"}},
			"gpu-tenancy:monitoring.kubeStateMetrics.imageTag", field.ErrorTypeInvalid, "v2.19.1", "v2.20.0 or later"},
		{"an image tag that is not a release", Spec{KubeStateMetrics: KubeStateMetricsSpec{ImageTag: "latest"}},
			"gpu-tenancy:monitoring.kubeStateMetrics.imageTag", field.ErrorTypeInvalid, "latest", "v2.20.0 or later"},
		{"a chart both local and from a repository", Spec{KubeStateMetrics: KubeStateMetricsSpec{Chart: helmchart.Chart{Path: "/charts/ksm", Repo: "https://charts.example.com", Name: "kube-state-metrics"}}},
			"gpu-tenancy:monitoring.kubeStateMetrics.chart.path", field.ErrorTypeForbidden, "", "either a local chart path or repo+name"},
		{"a notification channel that is not a channel name", Spec{GKE: GKESpec{NotificationChannels: []string{"oncall@example.com"}}},
			"gpu-tenancy:monitoring.gke.notificationChannels[0]", field.ErrorTypeInvalid, "oncall@example.com", "projects/<project>/notificationChannels/<id>"},
		{"a notification channel given twice", Spec{GKE: GKESpec{NotificationChannels: []string{"projects/p1/notificationChannels/1", "projects/p1/notificationChannels/1"}}},
			"gpu-tenancy:monitoring.gke.notificationChannels[1]", field.ErrorTypeDuplicate, "projects/p1/notificationChannels/1", "Duplicate value"},
		{"a label key with a space", Spec{PrometheusOperator: PrometheusOperatorSpec{Labels: map[string]string{"my release": "x"}}},
			"gpu-tenancy:monitoring.prometheusOperator.labels[my release]", field.ErrorTypeInvalid, "my release", "label key"},
		{"a label value with a slash", Spec{PrometheusOperator: PrometheusOperatorSpec{Labels: map[string]string{"release": "a/b"}}},
			"gpu-tenancy:monitoring.prometheusOperator.labels[release]", field.ErrorTypeInvalid, "a/b", "label value"},
		{"a Grafana label without the namespace its sidecar searches", Spec{Grafana: GrafanaSpec{Label: "grafana_dashboard"}},
			"gpu-tenancy:monitoring.grafana.namespace", field.ErrorTypeRequired, "", "the namespace whose ConfigMaps"},
		{"a Grafana namespace that is not a DNS label", Spec{Grafana: GrafanaSpec{Namespace: "Grafana"}},
			"gpu-tenancy:monitoring.grafana.namespace", field.ErrorTypeInvalid, "Grafana", "RFC 1123"},
		{"a Grafana label key with a space", Spec{Grafana: GrafanaSpec{Namespace: "grafana", Label: "grafana dashboard"}},
			"gpu-tenancy:monitoring.grafana.label", field.ErrorTypeInvalid, "grafana dashboard", "label key"},
		{"a Grafana label value with a slash", Spec{Grafana: GrafanaSpec{Namespace: "grafana", LabelValue: "a/b"}},
			"gpu-tenancy:monitoring.grafana.labelValue", field.ErrorTypeInvalid, "a/b", "label value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.spec.Validate(specPath)
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.field, errs[0].Field)
			assert.Equal(t, tc.typ, errs[0].Type)
			if tc.typ != field.ErrorTypeForbidden {
				assert.Equal(t, tc.bad, errs[0].BadValue)
			}
			assert.Contains(t, errs[0].Error(), tc.says)
		})
	}
}

func TestSpecValidateReportsEveryProblem(t *testing.T) {
	errs := Spec{Namespace: "A", PendingClaimAfter: "soon", QuotaExhaustedFor: "later"}.Validate(specPath)
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	assert.Equal(t, []string{"gpu-tenancy:monitoring.namespace", "gpu-tenancy:monitoring.pendingClaimAfter", "gpu-tenancy:monitoring.quotaExhaustedFor"}, fields)
}

func TestSpecValidateForFlavour(t *testing.T) {
	channels := GKESpec{NotificationChannels: []string{"projects/gpu-dev/notificationChannels/1"}}
	labels := PrometheusOperatorSpec{Labels: map[string]string{"release": "kube-prometheus-stack"}}
	for _, tc := range []struct {
		name    string
		spec    Spec
		flavour cluster.Flavour
		field   string
	}{
		{"notification channels on GKE are used", Spec{GKE: channels}, cluster.GKE, ""},
		{"prometheus-operator labels on Scaleway are used", Spec{PrometheusOperator: labels}, cluster.Scaleway, ""},
		{"notification channels on Scaleway are refused", Spec{GKE: channels}, cluster.Scaleway, "gpu-tenancy:monitoring.gke.notificationChannels"},
		{"notification channels on an existing cluster are refused", Spec{GKE: channels}, cluster.Existing, "gpu-tenancy:monitoring.gke.notificationChannels"},
		{"prometheus-operator labels on GKE are refused", Spec{PrometheusOperator: labels}, cluster.GKE, "gpu-tenancy:monitoring.prometheusOperator.labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.spec.ValidateFor(specPath, tc.flavour)
			if tc.field == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.field, errs[0].Field)
			assert.Equal(t, field.ErrorTypeForbidden, errs[0].Type)
			assert.Contains(t, errs[0].Error(), "is not used on "+string(tc.flavour))
		})
	}
}

func TestEnabledFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled *bool
		flavour cluster.Flavour
		want    bool
	}{
		{"on by default on GKE", nil, cluster.GKE, true},
		{"on by default on Scaleway", nil, cluster.Scaleway, true},
		{"off by default on an existing cluster", nil, cluster.Existing, false},
		{"off when configured off on a cloud", boolPtr(false), cluster.GKE, false},
		{"on when configured on for an existing cluster", boolPtr(true), cluster.Existing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Spec{Enabled: tc.enabled}.EnabledFor(tc.flavour))
		})
	}
}
