package rules_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/ruletest"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorded is one series a recording rule wrote, as the probes report it.
type recorded struct {
	labels map[string]string
	value  float64
}

// probeAlert is the alert that reports the series of one recorded metric. promql-eval reports alerts only, so each
// recorded metric gets an alerting rule without `for` that selects it: such a rule fires at once, one alert per
// series, with the series' labels and value. Rules of a group run in order at one evaluation time, so the probes,
// placed after the recording rules, see this evaluation's results.
func probeAlert(record string) string { return "Probe_" + strings.ReplaceAll(record, ":", "_") }

// recordings evaluates the showback recording rules for prices over the series and returns, at time at, the series
// of each recorded metric.
func recordings(t *testing.T, prices rules.Prices, lines []string, at string) map[string][]recorded {
	t.Helper()
	if _, err := toolbin.Path(ruletest.PromQLEval); err != nil && testing.Short() {
		t.Skipf("-short without tools: %v", err)
	}
	groups := rules.ShowbackGroups(rules.Recordings(rules.Params{Jobs: jobs, Prices: prices}))
	for _, record := range []string{rules.DevicesRequested, rules.CostPerHour} {
		groups[0].Rules = append(groups[0].Rules, rules.GroupRule{Alert: probeAlert(record), Expr: record})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules: rules.File{Groups: groups},
		Load:  "load 1m\n  " + strings.Join(lines, "\n  ") + "\n",
		Start: start, EvalTimes: []string{at},
	})
	require.NoError(t, err)
	out := map[string][]recorded{}
	for _, record := range []string{rules.DevicesRequested, rules.CostPerHour} {
		for _, a := range resp.At(at, probeAlert(record), "firing") {
			delete(a.Labels, "alertname")
			out[record] = append(out[record], recorded{labels: a.Labels, value: a.Value})
		}
		sortRecorded(out[record])
	}
	return out
}

// sortRecorded orders series by their labels, as fmt prints them (keys sorted).
func sortRecorded(rs []recorded) {
	sort.Slice(rs, func(i, j int) bool { return fmt.Sprint(rs[i].labels) < fmt.Sprint(rs[j].labels) })
}

func deviceKey(class string) string { return class + naming.DeviceQuotaSuffix }

// requested is the series kube-state-metrics exposes for one tenant-quota device key with used devices out of hard.
func requested(ns, class, used string) []string {
	return quota(ns, naming.TenantQuota, deviceKey(class), used, constant(4))
}

func held(tenant, class string, v float64) recorded {
	return recorded{labels: map[string]string{"job": jobs.KubeStateMetrics, "tenant": tenant, "class": class}, value: v}
}

func cost(tenant, class, currency string, v float64) recorded {
	r := held(tenant, class, v)
	r.labels["currency"] = currency
	return r
}

func TestShowbackRecordings(t *testing.T) {
	tenants := join(namespace(legalNS, "legal-ai"), namespace(researchNS, "research-ai"))
	// legal-ai requests 2 whole GPUs and 1 slice, research-ai 1 whole GPU and 3 slices.
	twoByTwo := join(tenants,
		requested(legalNS, "gpu-whole", constant(2)), requested(legalNS, "gpu-slice", constant(1)),
		requested(researchNS, "gpu-whole", constant(1)), requested(researchNS, "gpu-slice", constant(3)))
	bothPriced := rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 2.5, "gpu-slice": 0.5}}
	wholeOnly := rules.Prices{Currency: "USD", PerDeviceHour: map[string]float64{"gpu-whole": 3.25}}
	devicesOfTwoByTwo := []recorded{
		held("legal-ai", "gpu-slice", 1), held("legal-ai", "gpu-whole", 2),
		held("research-ai", "gpu-slice", 3), held("research-ai", "gpu-whole", 1),
	}
	for _, tc := range []struct {
		name   string
		prices rules.Prices
		series []string
		at     string
		record string
		want   []recorded
	}{
		{name: "devices requested per tenant and class, two tenants and two classes",
			prices: bothPriced, series: twoByTwo, at: "5m", record: rules.DevicesRequested, want: devicesOfTwoByTwo},
		{name: "cost per hour is devices times the class's price, in the currency",
			prices: bothPriced, series: twoByTwo, at: "5m", record: rules.CostPerHour, want: []recorded{
				cost("legal-ai", "gpu-slice", "EUR", 0.5), cost("legal-ai", "gpu-whole", "EUR", 5),
				cost("research-ai", "gpu-slice", "EUR", 1.5), cost("research-ai", "gpu-whole", "EUR", 2.5)}},
		{name: "a class without a price has no cost series",
			prices: wholeOnly, series: twoByTwo, at: "5m", record: rules.CostPerHour, want: []recorded{
				cost("legal-ai", "gpu-whole", "USD", 6.5), cost("research-ai", "gpu-whole", "USD", 3.25)}},
		{name: "a class without a price still has its devices recorded",
			prices: wholeOnly, series: twoByTwo, at: "5m", record: rules.DevicesRequested, want: devicesOfTwoByTwo},
		{name: "without prices there is no cost series",
			series: twoByTwo, at: "5m", record: rules.CostPerHour},
		{name: "the figures follow the quota over time",
			prices: wholeOnly, series: join(tenants, requested(legalNS, "gpu-whole", "1x10 3x35")), at: "20m", record: rules.CostPerHour,
			want: []recorded{cost("legal-ai", "gpu-whole", "USD", 9.75)}},
		{name: "a tenant holding nothing of a granted class costs nothing",
			prices: wholeOnly, series: join(tenants, requested(legalNS, "gpu-whole", constant(0))), at: "5m", record: rules.CostPerHour,
			want: []recorded{cost("legal-ai", "gpu-whole", "USD", 0)}},
		{name: "a namespace without the tenant label is no tenant's",
			prices: bothPriced, series: join(namespace("ml-platform", ""), requested("ml-platform", "gpu-whole", constant(2))), at: "5m",
			record: rules.DevicesRequested},
		{name: "quota keys other than devices are left out",
			prices: bothPriced, series: join(tenants, quota(legalNS, naming.TenantQuota, "requests.cpu", constant(8), constant(16))), at: "5m",
			record: rules.DevicesRequested},
		{name: "two quotas on one key count the devices once",
			prices: wholeOnly, series: join(tenants, requested(legalNS, "gpu-whole", constant(2)),
				quota(legalNS, "extra", deviceKey("gpu-whole"), constant(2), constant(8))), at: "5m", record: rules.CostPerHour,
			want: []recorded{cost("legal-ai", "gpu-whole", "USD", 6.5)}},
		{name: "two kube-state-metrics instances count the devices once",
			prices: wholeOnly, series: join(tenants, requested(legalNS, "gpu-whole", constant(2)),
				[]string{ksmFrom(ksmB, "kube_namespace_labels", map[string]string{"namespace": legalNS, "label_gpu_tenancy_io_tenant": "legal-ai"}, constant(1)),
					ksmFrom(ksmB, "kube_resourcequota", map[string]string{"namespace": legalNS, "resourcequota": naming.TenantQuota,
						"resource": deviceKey("gpu-whole"), "type": "used"}, constant(2))}), at: "5m", record: rules.CostPerHour,
			want: []recorded{cost("legal-ai", "gpu-whole", "USD", 6.5)}},
		{name: "series of another job are ignored",
			prices: bothPriced, series: otherJob(twoByTwo), at: "5m", record: rules.DevicesRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordings(t, tc.prices, tc.series, tc.at)[tc.record]
			sortRecorded(tc.want)
			require.Len(t, got, len(tc.want), "%s at %s: %+v", tc.record, tc.at, got)
			for i, want := range tc.want {
				assert.Equal(t, want.labels, got[i].labels)
				assert.InDelta(t, want.value, got[i].value, 1e-9, "%s %v", tc.record, want.labels)
			}
		})
	}
}

func TestDeclaredRecordingMetricsAreWhatTheExpressionsRead(t *testing.T) {
	if _, err := toolbin.Path(ruletest.PromQLEval); err != nil && testing.Short() {
		t.Skipf("-short without tools: %v", err)
	}
	recs := rules.Recordings(rules.Params{Jobs: jobs, Prices: rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 1}}})
	// promql-eval lists the metrics of alerting rules: each recording's expression goes in as one.
	g := rules.Group{Name: "selectors"}
	for i, r := range recs {
		g.Rules = append(g.Rules, rules.GroupRule{Alert: fmt.Sprintf("Recording%d", i), Expr: r.Expr})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules: rules.File{Groups: []rules.Group{g}}, Load: "load 1m\n  " + strings.Join(namespace(legalNS, "legal-ai"), "\n  ") + "\n",
		Start: start, EvalTimes: []string{"0s"},
	})
	require.NoError(t, err)
	for i, r := range recs {
		t.Run(fmt.Sprintf("%d %s", i, r.Record), func(t *testing.T) {
			assert.Equal(t, r.Metrics, resp.Selectors[fmt.Sprintf("Recording%d", i)])
		})
	}
}
