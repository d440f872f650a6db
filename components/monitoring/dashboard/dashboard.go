// Package dashboard is the operators' Grafana dashboard: per tenant and class the devices requested, the quota that
// bounds them and the pods waiting for devices; the DRA driver's health; and the Service addresses held. Its queries
// are package rules' (rules.QueriesFor), so a panel and the alert about the same thing never disagree; it is built
// with grafana-foundation-sdk (https://github.com/grafana/grafana-foundation-sdk, go/ v0.0.22) rather than written
// as JSON.
package dashboard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// RateWindow is the range of the panels' rates: Grafana's own, at least four scrape intervals
// (https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/#use-__rate_interval).
const RateWindow = "$__rate_interval"

// PluginSource is where the kubelet plugin's metrics are defined: nothing on the local stack exposes them (its
// simulated plugin serves no metrics), so the panels on them are checked against this file's definitions.
const PluginSource = "kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 pkg/metrics/dra_requests.go"

// PluginMetrics are the metrics PluginSource defines that the panels read, with the labels it gives each; the
// scrape adds node (components/monitoring's PodMonitor and ClusterPodMonitoring).
var PluginMetrics = map[string][]string{
	"nvidia_dra_requests_total":            {"driver", "operation"},
	"nvidia_dra_node_prepare_errors_total": {"driver", "error_type"},
	"nvidia_dra_prepared_devices":          {"node", "driver", "device_type"},
}

// Kind is how a panel draws its queries.
type Kind string

const (
	// TimeSeries draws each series over time.
	TimeSeries Kind = "timeseries"
	// Table lists the series of an instant query, one row each.
	Table Kind = "table"
)

// Query is one PromQL query of a panel and the legend of its series.
type Query struct {
	Expr, Legend string
}

// Panel is one panel of the dashboard.
type Panel struct {
	Title, Description string
	Kind               Kind
	// Unit is Grafana's unit id ("none", "s", "percentunit", "reqps").
	Unit    string
	Queries []Query
	// CloudOnly marks a panel whose metrics no process of the local stack exposes: it reads PluginMetrics only.
	CloudOnly bool
}

// Row is a titled group of panels.
type Row struct {
	Title  string
	Panels []Panel
}

// WaitingPerTenantTitle is the title of the panel of rules.Queries.WaitingPerTenant.
const WaitingPerTenantTitle = "Pods waiting for devices per tenant"

// Rows are the dashboard's rows for p, with rates over window (RateWindow on a dashboard).
func Rows(p rules.Params, window string) []Row {
	q := rules.QueriesFor(p, window)
	byTenantClass := "{{" + rules.TenantLabel + "}} {{" + rules.ClassLabel + "}}"
	services := []Query{{Expr: q.ServicesHeld, Legend: "Services with a cluster IP"}}
	servicesUnit, servicesSaid := "none", "Services holding an address of the cluster's Service range, tenants' synced Services and vClusters included. "+
		"The range's size is not known to the platform here (an existing cluster without ServiceCIDRs to read): `gpu-tenancy capacity` shows what is known."
	if q.ServiceRangeUse != "" {
		services = []Query{{Expr: q.ServiceRangeUse, Legend: "share of the range held"}}
		servicesUnit, servicesSaid = "percentunit", fmt.Sprintf("The share of the cluster's Service range (%d addresses) that Services hold, tenants' synced "+
			"Services and vClusters included; %s fires above %.0f%%.", p.ServiceAddresses, rules.ServiceRangeNearlyFull, rules.ServiceRangeFullAbove*100)
	}
	return []Row{
		{Title: "Tenants' GPUs", Panels: []Panel{
			{Title: "Devices requested per tenant and class", Kind: TimeSeries, Unit: "none",
				Description: "Devices the tenant's ResourceClaims request per class, allocated or still waiting: its ResourceQuota's use, as the showback records it.",
				Queries:     []Query{{Expr: q.DevicesRequested, Legend: byTenantClass}}},
			{Title: "Device quota per tenant and class", Kind: TimeSeries, Unit: "none",
				Description: "Devices of each class the tenant may request (the tightest hard limit of its quotas): the capacity it is granted. " +
					"The devices the cluster has per class are in `gpu-tenancy capacity`: no exporter publishes ResourceSlices.",
				Queries: []Query{{Expr: q.DeviceQuota, Legend: byTenantClass}}},
			{Title: WaitingPerTenantTitle, Kind: TimeSeries, Unit: "none",
				Description: "Unscheduled pods that reference a ResourceClaim or ask for a class by its extended-resource name: their devices cannot be allocated yet. " +
					rules.ClaimPendingTooLong + " fires for one that waits longer than its threshold.",
				Queries: []Query{{Expr: q.WaitingPerTenant, Legend: "{{" + rules.TenantLabel + "}}"}}},
			{Title: "Longest waits", Kind: Table, Unit: "s",
				Description: "The 20 pods that have waited longest for their devices, in seconds since their creation; `gpu-tenancy pending` gives the scheduler's reason.",
				Queries:     []Query{{Expr: "topk(20, " + q.Waiting + ")"}}},
		}},
		{Title: "DRA driver", Panels: []Panel{
			{Title: "GPU nodes without a running kubelet plugin", Kind: Table, Unit: "none",
				Description: "Nodes of a GPU pool where no kubelet-plugin pod of the driver's namespace is Running: their GPUs are not published. " +
					rules.KubeletPluginNotRunning + " fires for one that stays so.",
				Queries: []Query{{Expr: q.PluginMissing}}},
			{Title: "Failed prepares per node", Kind: TimeSeries, Unit: "none", CloudOnly: true,
				Description: "NodePrepareResources calls that failed, by error type: a pod whose claim cannot be prepared never starts. From the kubelet plugin's metrics.",
				Queries:     []Query{{Expr: q.PrepareErrors, Legend: "{{node}} {{error_type}}"}}},
			{Title: "Prepare and unprepare requests per node", Kind: TimeSeries, Unit: "reqps", CloudOnly: true,
				Description: "The kubelet's prepare and unprepare calls to the plugin per second. From the kubelet plugin's metrics.",
				Queries:     []Query{{Expr: q.Requests, Legend: "{{node}} {{operation}}"}}},
			{Title: "Prepared devices per node", Kind: TimeSeries, Unit: "none", CloudOnly: true,
				Description: "Devices the plugin holds prepared for running pods, by device type. From the kubelet plugin's metrics.",
				Queries:     []Query{{Expr: q.PreparedDevices, Legend: "{{node}} {{device_type}}"}}},
		}},
		{Title: "Cluster", Panels: []Panel{
			{Title: "Service addresses", Kind: TimeSeries, Unit: servicesUnit, Description: servicesSaid, Queries: services},
		}},
	}
}

// ScopeVariable is the dashboard's variable that picks a cluster: the scope of its scrape jobs (rules.JobsFor), so that
// one dashboard serves every cluster writing to the data source.
const ScopeVariable = "scope"

// Build builds the dashboard for p, with its uid and title; scope, when given, is the cluster the dashboard opens on.
// Its queries go to the Prometheus data source the `datasource` variable picks and read the jobs of the cluster the
// ScopeVariable picks, whatever p.Jobs says.
func Build(p rules.Params, scope, uid, title string) (dashboard.Dashboard, error) {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
	p.Jobs = rules.JobsFor("${" + ScopeVariable + "}")
	before, after, _ := strings.Cut(rules.JobsFor("SCOPE").KubeStateMetrics, "SCOPE")
	clusters := dashboard.NewQueryVariableBuilder(ScopeVariable).
		Label("Cluster").
		Description("The scope of the cluster's scrape jobs (" + before + "<scope>" + after + "), one per cluster writing to the data source.").
		Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(fmt.Sprintf(`label_values(kube_namespace_labels{job=~"%s.+%s"}, job)`,
			regexp.QuoteMeta(before), regexp.QuoteMeta(after)))}).
		Regex("/^" + regexp.QuoteMeta(before) + "(.+)" + regexp.QuoteMeta(after) + "$/").
		Refresh(dashboard.VariableRefreshOnDashboardLoad)
	if scope != "" {
		clusters.Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: &scope},
			Value: dashboard.StringOrArrayOfString{String: &scope}})
	}
	b := dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Tags([]string{"gpu-tenancy"}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(clusters)
	// Every panel, rows included, gets an id of its own: Grafana links to a panel by it (viewPanel).
	var id uint32
	for _, row := range Rows(p, RateWindow) {
		id++
		b.WithRow(dashboard.NewRowBuilder(row.Title).Id(id))
		for _, panel := range row.Panels {
			id++
			targets := panel.targets(ds)
			switch panel.Kind {
			case Table:
				b.WithPanel(setUp(table.NewPanelBuilder(), panel, id, ds, targets))
			default:
				b.WithPanel(setUp(timeseries.NewPanelBuilder(), panel, id, ds, targets))
			}
		}
	}
	return b.Build()
}

// JSON is Build's dashboard as Grafana imports it.
func JSON(p rules.Params, scope, uid, title string) ([]byte, error) {
	d, err := Build(p, scope, uid, title)
	if err != nil {
		return nil, fmt.Errorf("building the dashboard: %w", err)
	}
	return json.MarshalIndent(d, "", "  ")
}

// targets are the panel's queries: instant for a table, which lists the series now, else over the time range.
func (p Panel) targets(ds common.DataSourceRef) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, q := range p.Queries {
		t := prometheus.NewDataqueryBuilder().Expr(q.Expr).Datasource(ds).RefId(string(rune('A' + i)))
		if p.Kind == Table {
			t.Instant().Format(prometheus.PromQueryFormatTable)
		} else {
			t.Range().LegendFormat(q.Legend)
		}
		out = append(out, t)
	}
	return out
}

// panelBuilder is what the SDK's panel builders of every kind share.
type panelBuilder[B any] interface {
	*B
	cog.Builder[dashboard.Panel]
	Id(uint32) *B
	Title(string) *B
	Description(string) *B
	Datasource(common.DataSourceRef) *B
	Unit(string) *B
	Span(uint32) *B
	Height(uint32) *B
	Targets([]cog.Builder[variants.Dataquery]) *B
}

// setUp gives a panel builder of any kind the panel's id, title, description, unit, data source, queries and size.
func setUp[B any, P panelBuilder[B]](b P, panel Panel, id uint32, ds common.DataSourceRef, targets []cog.Builder[variants.Dataquery]) P {
	b.Id(id)
	b.Title(panel.Title)
	b.Description(panel.Description)
	b.Datasource(ds)
	b.Unit(panel.Unit)
	b.Targets(targets)
	b.Span(12)
	b.Height(8)
	return b
}

// ShippedFile is where the repository ships the dashboard for import by hand (scripts/dashboard writes it).
const ShippedFile = "docs/grafana-dashboard.json"

// Shipped is the dashboard of ShippedFile: the default thresholds, any cluster of the data source, and no Service range
// size (a stack's ConfigMap knows its own).
func Shipped() ([]byte, error) {
	raw, err := JSON(rules.DefaultParams(), "", "gpu-tenancy", "GPU tenancy")
	return append(raw, '\n'), err
}
