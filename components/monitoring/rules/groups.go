package rules

import "time"

// EvaluationInterval is how often the rules are evaluated everywhere; Cloud Monitoring accepts only multiples of
// 30s (pulumi-gcp sdk v8.41.1 go/gcp/monitoring AlertPolicyConditionConditionPrometheusQueryLanguage.EvaluationInterval).
const EvaluationInterval = 30 * time.Second

// Annotation keys of every alert.
const (
	SummaryAnnotation     = "summary"
	DescriptionAnnotation = "description"
	RunbookAnnotation     = "runbook"
	SeverityLabel         = "severity"
)

// File is a Prometheus rule file (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/).
type File struct {
	Groups []Group `json:"groups"`
}

// Group is a Prometheus rule group, the shape of a rule file's groups, of a PrometheusRule's spec.groups
// (prometheus-operator v0.95.2 pkg/apis/monitoring/v1/prometheusrule_types.go RuleGroup) and of a Managed Service for
// Prometheus ClusterRules' spec.groups (GoogleCloudPlatform/prometheus-engine pkg/operator/apis/monitoring/v1/
// rules_types.go RuleGroup).
type Group struct {
	Name     string      `json:"name"`
	Interval string      `json:"interval,omitempty"`
	Rules    []GroupRule `json:"rules"`
}

// GroupRule is one rule of a group: an alerting rule (Alert set) or a recording rule (Record set), never both, as
// all three schemas above require.
type GroupRule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Groups renders rules as one Prometheus rule group evaluated every EvaluationInterval.
func Groups(rs []Rule) []Group {
	g := Group{Name: GroupName, Interval: PromDuration(EvaluationInterval)}
	for _, r := range rs {
		ar := GroupRule{
			Alert:  r.Name,
			Expr:   r.Expr,
			Labels: map[string]string{SeverityLabel: string(r.Severity)},
			Annotations: map[string]string{
				SummaryAnnotation: r.Summary, DescriptionAnnotation: r.Description, RunbookAnnotation: r.Runbook,
			},
		}
		if r.For > 0 {
			ar.For = PromDuration(r.For)
		}
		g.Rules = append(g.Rules, ar)
	}
	return []Group{g}
}
