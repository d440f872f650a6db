package gpureport

import (
	"fmt"
	"math/big"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

// TenantCost is one tenant's current hourly cost: the devices allocated to it times their classes' prices, summed
// over the classes that have a price.
type TenantCost struct {
	Tenant      string  `json:"tenant"`
	CostPerHour float64 `json:"costPerHour"`
}

// Price adds the current hourly cost to the report: per tenant and class the allocated devices times the class's
// price per device-hour, and per tenant the sum over its priced classes. Classes without a price get no cost; a
// priced class the cluster's catalog does not hold is reported under Warnings. Without prices the report is left as
// it is.
func (r *CapacityReport) Price(p rules.Prices) {
	if !p.IsSet() {
		return
	}
	r.Currency = p.Currency
	totals := map[string]*big.Rat{}
	var order []string
	for i := range r.Tenants {
		u := &r.Tenants[i]
		price, ok := p.PerDeviceHour[u.Class]
		if !ok {
			continue
		}
		c := cost(u.Allocated, price)
		u.CostPerHour = ratFloat(c)
		if totals[u.Tenant] == nil {
			totals[u.Tenant] = new(big.Rat)
			order = append(order, u.Tenant)
		}
		totals[u.Tenant].Add(totals[u.Tenant], c)
	}
	r.TenantCosts = make([]TenantCost, 0, len(order))
	for _, t := range order {
		r.TenantCosts = append(r.TenantCosts, TenantCost{Tenant: t, CostPerHour: *ratFloat(totals[t])})
	}
	for _, class := range p.Classes() {
		if !slices.ContainsFunc(r.Classes, func(c ClassCapacity) bool { return c.Name == class }) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("class %s has a price but is not in the cluster's catalog", class))
		}
	}
}

// cost is devices times price in decimal arithmetic, from the price as written (its shortest decimal), so that
// 3 x 0.1 is 0.3 as a person writes it, not the 0.30000000000000004 of binary floating point.
func cost(devices int, price float64) *big.Rat {
	// FormatPrice of a finite float is always a decimal SetString reads.
	c, _ := new(big.Rat).SetString(rules.FormatPrice(price))
	return c.Mul(c, new(big.Rat).SetInt64(int64(devices)))
}

// ratFloat is the float64 nearest to r.
func ratFloat(r *big.Rat) *float64 {
	f, _ := r.Float64()
	return &f
}
