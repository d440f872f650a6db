package rules

import (
	"fmt"
	"regexp"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// Showback recording rules: per tenant and GPU class, the devices the tenant's claims hold and what they cost per
// hour. No cloud bill can give this: DRA devices are not container requests, and a pool's nodes are shared by tenants.
const (
	// DevicesRequested is the devices a tenant's claims request of a class: its ResourceQuota's `used` for the class's
	// device key. A claim counts from its creation to its deletion, allocated or still waiting, as the quota counts it
	// (k8s.io/api v0.34.4 core/v1 ResourceClaimsPerClass). Labels job, tenant, class.
	DevicesRequested = "gpu_tenancy:devices_requested:sum"
	// CostPerHour is DevicesRequested times the class's price per device-hour, for priced classes only. Labels job,
	// tenant, class, currency.
	CostPerHour = "gpu_tenancy:cost_per_hour:sum"
	// CurrencyLabel carries Prices.Currency on CostPerHour.
	CurrencyLabel = "currency"
	// ShowbackGroupName is the rule group of the recording rules.
	ShowbackGroupName = "gpu-tenancy-showback"
)

// ShowbackInterval is how often the recording rules run: claims come and go minutes apart, and Managed Service for
// Prometheus bills each recorded sample (https://cloud.google.com/stackdriver/pricing). A multiple
// of EvaluationInterval.
const ShowbackInterval = time.Minute

// Recording is one recording rule.
type Recording struct {
	Record string
	Expr   string
	// Labels are added to every recorded series.
	Labels map[string]string
	// Metrics are the metric names Expr reads, sorted; they bound what the scrapes must keep.
	Metrics []string
}

// Recordings returns the showback recording rules for p: the devices requested per tenant and class, and, for each
// class p.Prices prices, their cost per hour. Jobs must be set.
func Recordings(p Params) []Recording {
	metrics := []string{"kube_namespace_labels", "kube_resourcequota"}
	out := []Recording{{
		Record:  DevicesRequested,
		Expr:    devicesOfQuota(p.Jobs, "used", deviceKeys),
		Metrics: metrics,
	}}
	// One rule per class, each from the raw series rather than from DevicesRequested: a rule that reads another's
	// output would see it one evaluation late where rules run against a remote store (Managed Service for Prometheus).
	for _, class := range p.Prices.Classes() {
		out = append(out, Recording{
			Record: CostPerHour,
			Expr: devicesOfQuota(p.Jobs, "used", `resource="`+promString(naming.DeviceQuotaKey(class))+`"`) +
				" * " + FormatPrice(p.Prices.PerDeviceHour[class]),
			Labels:  map[string]string{CurrencyLabel: p.Prices.Currency},
			Metrics: metrics,
		})
	}
	return out
}

// devicesOfQuota sums, per tenant and class, the quota's figure of type quotaType ("used" or "hard") of the device
// keys resourceMatcher selects. Of several quotas on one key the largest use counts (they all count the same claims)
// and the tightest hard limit, the one that holds; namespaces without the tenant label are left out; each selector
// names the kube-state-metrics job, whose label the result keeps so that two clusters recording into one store never
// collide.
func devicesOfQuota(jobs Jobs, quotaType, resourceMatcher string) string {
	job := `job="` + jobs.KubeStateMetrics + `"`
	of := "max"
	if quotaType == "hard" {
		of = "min"
	}
	return fmt.Sprintf(`sum by (job, %s, %s) (label_replace(%s by (job, namespace, resource) (%s), "%s", "$1", "resource", "(.+)%s") `+
		`* on (namespace) group_left (%s) max by (namespace, %s) (label_replace(%s, "%s", "$1", "%s", "(.+)")))`,
		TenantLabel, ClassLabel, of,
		selector("kube_resourcequota", job, `type="`+quotaType+`"`, resourceMatcher), ClassLabel, promString(regexp.QuoteMeta(naming.DeviceQuotaSuffix)),
		TenantLabel, TenantLabel,
		selector("kube_namespace_labels", job, namespaceTenantLabel+`!=""`), TenantLabel, namespaceTenantLabel)
}

// ShowbackGroups renders recording rules as one Prometheus rule group evaluated every ShowbackInterval.
func ShowbackGroups(rs []Recording) []Group {
	g := Group{Name: ShowbackGroupName, Interval: PromDuration(ShowbackInterval)}
	for _, r := range rs {
		g.Rules = append(g.Rules, GroupRule{Record: r.Record, Expr: r.Expr, Labels: r.Labels})
	}
	return []Group{g}
}
