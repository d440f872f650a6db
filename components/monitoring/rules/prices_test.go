package rules_test

import (
	"math"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	pricesPath = field.NewPath("gpu-tenancy:prices")
	catalog    = []string{"gpu-slice", "gpu-whole"}
)

func TestPricesValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prices rules.Prices
	}{
		{"no prices", rules.Prices{}},
		{"a price for every class", rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 2.93, "gpu-slice": 0.42}}},
		{"a price for some classes", rules.Prices{Currency: "USD", PerDeviceHour: map[string]float64{"gpu-whole": 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Empty(t, tc.prices.Validate(pricesPath, catalog)) })
	}
}

func TestPricesValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prices rules.Prices
		field  string
		typ    field.ErrorType
		says   string
	}{
		{"prices without a currency", rules.Prices{PerDeviceHour: map[string]float64{"gpu-whole": 2}},
			"gpu-tenancy:prices.currency", field.ErrorTypeRequired, "ISO 4217"},
		{"a currency that is no ISO 4217 code", rules.Prices{Currency: "euro", PerDeviceHour: map[string]float64{"gpu-whole": 2}},
			"gpu-tenancy:prices.currency", field.ErrorTypeInvalid, "three capital letters"},
		{"a currency without prices", rules.Prices{Currency: "EUR"},
			"gpu-tenancy:prices.perDeviceHour", field.ErrorTypeRequired, "at least one GPU class"},
		{"a class the catalog does not have", rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-h100": 4}},
			"gpu-tenancy:prices.perDeviceHour[gpu-h100]", field.ErrorTypeNotSupported, `"gpu-slice", "gpu-whole"`},
		{"a price of zero", rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 0}},
			"gpu-tenancy:prices.perDeviceHour[gpu-whole]", field.ErrorTypeInvalid, "positive price"},
		{"a negative price", rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": -1.5}},
			"gpu-tenancy:prices.perDeviceHour[gpu-whole]", field.ErrorTypeInvalid, "positive price"},
		{"an infinite price", rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": math.Inf(1)}},
			"gpu-tenancy:prices.perDeviceHour[gpu-whole]", field.ErrorTypeInvalid, "positive price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.prices.Validate(pricesPath, catalog)
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.field, errs[0].Field)
			assert.Equal(t, tc.typ, errs[0].Type)
			assert.Contains(t, errs[0].Error(), tc.says)
		})
	}
}

func TestRecordings(t *testing.T) {
	priced := rules.Params{Jobs: rules.JobsFor("gke-dev"),
		Prices: rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 2.93, "gpu-slice": 0.42}}}
	records := func(rs []rules.Recording) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Record)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		check func(t *testing.T)
	}{
		{"without prices only the devices are recorded", func(t *testing.T) {
			assert.Equal(t, []string{rules.DevicesRequested}, records(rules.Recordings(rules.Params{Jobs: rules.JobsFor("")})))
		}},
		{"one cost rule per priced class, in class order", func(t *testing.T) {
			rs := rules.Recordings(priced)
			assert.Equal(t, []string{rules.DevicesRequested, rules.CostPerHour, rules.CostPerHour}, records(rs))
			assert.Contains(t, rs[1].Expr, `resource="gpu-slice.deviceclass.resource.k8s.io/devices"`)
			assert.Contains(t, rs[2].Expr, `resource="gpu-whole.deviceclass.resource.k8s.io/devices"`)
		}},
		{"a cost rule multiplies by the price as written", func(t *testing.T) {
			assert.Regexp(t, `\) \* 2\.93$`, rules.Recordings(priced)[2].Expr)
		}},
		{"cost series carry the currency", func(t *testing.T) {
			assert.Equal(t, map[string]string{rules.CurrencyLabel: "EUR"}, rules.Recordings(priced)[1].Labels)
		}},
		{"selectors name the kube-state-metrics job", func(t *testing.T) {
			for _, r := range rules.Recordings(priced) {
				assert.Contains(t, r.Expr, `kube_resourcequota{job="gpu-tenancy-gke-dev-kube-state-metrics"`)
				assert.Contains(t, r.Expr, `kube_namespace_labels{job="gpu-tenancy-gke-dev-kube-state-metrics"`)
			}
		}},
		{"the group is a recording group evaluated every minute", func(t *testing.T) {
			g := rules.ShowbackGroups(rules.Recordings(priced))
			require.Len(t, g, 1)
			assert.Equal(t, rules.ShowbackGroupName, g[0].Name)
			assert.Equal(t, "1m", g[0].Interval)
			for _, r := range g[0].Rules {
				assert.Empty(t, r.Alert)
				assert.NotEmpty(t, r.Record)
			}
		}},
		{"kube-state-metrics exposes what the recordings read", func(t *testing.T) {
			s := rules.KubeStateMetrics(nil, rules.Recordings(priced)...)
			assert.Equal(t, []string{"kube_namespace_labels", "kube_resourcequota"}, s.MetricAllowlist)
			assert.Equal(t, []string{"namespaces", "resourcequotas"}, s.Collectors)
		}},
	} {
		t.Run(tc.name, tc.check)
	}
}
