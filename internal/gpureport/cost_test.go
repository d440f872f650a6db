package gpureport

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

// twoByTwo is a capacity report of two tenants that both use two classes.
func twoByTwo() *CapacityReport {
	return &CapacityReport{
		Classes: []ClassCapacity{{Name: "gpu-slice"}, {Name: "gpu-whole"}},
		Tenants: []TenantUsage{
			{Tenant: legal, Class: "gpu-slice", Allocated: 1},
			{Tenant: legal, Class: "gpu-whole", Allocated: 2},
			{Tenant: research, Class: "gpu-slice", Allocated: 3},
			{Tenant: research, Class: "gpu-whole", Allocated: 0},
		},
	}
}

func costs(r *CapacityReport) map[string]any {
	out := map[string]any{}
	for _, u := range r.Tenants {
		if u.CostPerHour == nil {
			out[u.Tenant+"/"+u.Class] = nil
			continue
		}
		out[u.Tenant+"/"+u.Class] = *u.CostPerHour
	}
	return out
}

func TestPrice(t *testing.T) {
	eur := func(perDeviceHour map[string]float64) rules.Prices {
		return rules.Prices{Currency: "EUR", PerDeviceHour: perDeviceHour}
	}
	for _, tc := range []struct {
		name   string
		prices rules.Prices
		check  func(t *testing.T, r *CapacityReport)
	}{
		{"each tenant and class costs its allocated devices times the class's price", eur(map[string]float64{"gpu-whole": 2.5, "gpu-slice": 0.5}),
			func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, map[string]any{
					legal + "/gpu-slice": 0.5, legal + "/gpu-whole": 5.0, research + "/gpu-slice": 1.5, research + "/gpu-whole": 0.0,
				}, costs(r))
			}},
		{"each tenant's cost is the sum over its classes", eur(map[string]float64{"gpu-whole": 2.5, "gpu-slice": 0.5}),
			func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, []TenantCost{{Tenant: legal, CostPerHour: 5.5}, {Tenant: research, CostPerHour: 1.5}}, r.TenantCosts)
			}},
		{"the report names the currency", eur(map[string]float64{"gpu-whole": 2.5}),
			func(t *testing.T, r *CapacityReport) { assert.Equal(t, "EUR", r.Currency) }},
		{"a class without a price has no cost", eur(map[string]float64{"gpu-whole": 2.5}),
			func(t *testing.T, r *CapacityReport) {
				assert.Nil(t, costs(r)[legal+"/gpu-slice"])
				assert.Nil(t, costs(r)[research+"/gpu-slice"])
			}},
		{"a class without a price adds nothing to the tenant's cost", eur(map[string]float64{"gpu-whole": 2.5}),
			func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, []TenantCost{{Tenant: legal, CostPerHour: 5}, {Tenant: research, CostPerHour: 0}}, r.TenantCosts)
			}},
		{"costs are computed in decimal, as written", eur(map[string]float64{"gpu-slice": 0.1}),
			func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, 0.3, *r.Tenants[2].CostPerHour, "3 x 0.1")
				assert.Equal(t, []TenantCost{{Tenant: legal, CostPerHour: 0.1}, {Tenant: research, CostPerHour: 0.3}}, r.TenantCosts)
			}},
		{"a priced class the cluster lacks is a warning", eur(map[string]float64{"gpu-whole": 2.5, "gpu-h100": 4}),
			func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, []string{"class gpu-h100 has a price but is not in the cluster's catalog"}, r.Warnings)
			}},
		{"without prices the report is unchanged", rules.Prices{},
			func(t *testing.T, r *CapacityReport) { assert.Equal(t, twoByTwo(), r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := twoByTwo()
			r.Price(tc.prices)
			tc.check(t, r)
		})
	}
}

func TestPricedCapacityJSON(t *testing.T) {
	s := localStack(t)
	r := Capacity(context.Background(), &s, now)
	r.Price(rules.Prices{Currency: "USD", PerDeviceHour: map[string]float64{"gpu-whole": 2.93}})
	var doc struct {
		Currency    string           `json:"currency"`
		TenantCosts []map[string]any `json:"tenantCosts"`
		Tenants     []map[string]any `json:"tenants"`
	}
	require.NoError(t, json.Unmarshal(render(t, r, JSON), &doc))
	assert.Equal(t, "USD", doc.Currency)
	assert.Equal(t, []map[string]any{{"tenant": legal, "costPerHour": 5.86}}, doc.TenantCosts, "research-ai's class has no price")
	require.Len(t, doc.Tenants, 2)
	assert.Equal(t, 5.86, doc.Tenants[0]["costPerHour"], "2 allocated x 2.93")
	assert.NotContains(t, doc.Tenants[1], "costPerHour", "an unpriced class has no costPerHour")
}

func TestPricedCapacityTable(t *testing.T) {
	s := localStack(t)
	r := Capacity(context.Background(), &s, now)
	r.Price(rules.Prices{Currency: "USD", PerDeviceHour: map[string]float64{"gpu-whole": 2.93}})
	out := string(render(t, r, Table))
	for _, l := range []string{
		"TENANT       CLASS      GRANTED  ALLOCATED  REQUESTED  QUOTA  PENDING  OLDEST PENDING  COST/H (USD)",
		"legal-ai     gpu-whole  yes      2          3          3      1        5m              5.86",
		"research-ai  gpu-slice  yes      0          0          2      0        -               -",
		"TENANT    COST/H (USD)\nlegal-ai  5.86\n",
	} {
		assert.Contains(t, out, l)
	}
}
