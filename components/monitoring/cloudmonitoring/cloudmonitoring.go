// Package cloudmonitoring creates the Cloud Monitoring alert policies of monitoring on GKE, one per alert rule, with
// the pulumi-gcp SDK. Importing it registers them with package monitoring (monitoring.RegisterAlertPolicies), so
// only the programs that monitor GKE link the SDK.
package cloudmonitoring

import (
	"regexp"
	"strconv"
	"time"

	gcpmonitoring "github.com/pulumi/pulumi-gcp/sdk/v8/go/gcp/monitoring"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

func init() { monitoring.RegisterAlertPolicies(newAlertPolicy) }

// newAlertPolicy is the monitoring.AlertPolicyFunc of Cloud Monitoring.
func newAlertPolicy(ctx *pulumi.Context, name string, p monitoring.AlertPolicy, opts ...pulumi.ResourceOption) (pulumi.StringOutput, error) {
	policy, err := gcpmonitoring.NewAlertPolicy(ctx, name, alertPolicyArgs(p), opts...)
	if err != nil {
		return pulumi.StringOutput{}, err
	}
	return policy.Name, nil
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
func alertPolicyArgs(p monitoring.AlertPolicy) *gcpmonitoring.AlertPolicyArgs {
	r := p.Rule
	args := &gcpmonitoring.AlertPolicyArgs{
		Project:     pulumi.String(p.Project),
		DisplayName: pulumi.String(p.DisplayName),
		Combiner:    pulumi.String("OR"),
		Conditions: gcpmonitoring.AlertPolicyConditionArray{gcpmonitoring.AlertPolicyConditionArgs{
			DisplayName: pulumi.String(r.Name),
			ConditionPrometheusQueryLanguage: &gcpmonitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs{
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
		Documentation: &gcpmonitoring.AlertPolicyDocumentationArgs{
			Subject:  pulumi.String(gcpText(r.Summary)),
			Content:  pulumi.String(gcpText(r.Description) + "\n\nRunbook: " + gcpText(r.Runbook)),
			MimeType: pulumi.String("text/markdown"),
		},
		NotificationChannels: pulumi.ToStringArray(p.NotificationChannels),
		UserLabels:           pulumi.ToStringMap(p.UserLabels),
	}
	if sev, ok := gcpSeverities[r.Severity]; ok {
		args.Severity = pulumi.String(sev)
	}
	return args
}
