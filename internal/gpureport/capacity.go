package gpureport

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/servicerange"
)

// CapacityReport is `gpu-tenancy capacity`: per catalog class the devices that exist, are allocated and are free;
// per tenant and class what the tenant holds, requests and may request; per GPU pool its physical GPUs.
type CapacityReport struct {
	APIVersion  string          `json:"apiVersion"`
	Kind        string          `json:"kind"`
	GeneratedAt time.Time       `json:"generatedAt"`
	Classes     []ClassCapacity `json:"classes"`
	Tenants     []TenantUsage   `json:"tenants"`
	Pools       []PoolInventory `json:"pools"`
	// Currency is the currency of every cost, present when prices were given (see Price).
	Currency string `json:"currency,omitempty"`
	// TenantCosts are, when prices were given, each tenant's hourly cost summed over its priced classes.
	TenantCosts []TenantCost `json:"tenantCosts,omitempty"`
	// ServiceAddresses is the cluster's Service range and who holds it; absent where the cluster serves no
	// ServiceCIDR.
	ServiceAddresses *ServiceAddresses `json:"serviceAddresses,omitempty"`
	// Warnings are problems that make a count unreliable, such as a class selector that fails on some device.
	Warnings []string `json:"warnings,omitempty"`
}

// ServiceAddresses is the Service range every tenant's Services share (servicerange.Room): its size, the addresses
// held and free, and each tenant's, its vCluster's own Services and those vCluster copies for it, against its quota.
type ServiceAddresses struct {
	Ranges  []string         `json:"ranges"`
	Size    int64            `json:"size"`
	Used    int64            `json:"used"`
	Free    int64            `json:"free"`
	Tenants []TenantServices `json:"tenants"`
}

// TenantServices is one tenant's share of the Service range.
type TenantServices struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Used      int64  `json:"used"`
	// Quota is the tenant's Service quota (its ResourceQuota's services), absent when none caps it.
	Quota *int64 `json:"quota,omitempty"`
}

// DeviceCounts splits the devices a class selects: Exist = Allocated + Unavailable + Free.
type DeviceCounts struct {
	Exist     int `json:"exist"`
	Allocated int `json:"allocated"`
	// Unavailable devices are not allocated themselves but share a physical GPU with an allocated device.
	Unavailable int `json:"unavailable"`
	Free        int `json:"free"`
}

func (c *DeviceCounts) add(s deviceState) {
	c.Exist++
	switch s {
	case allocated:
		c.Allocated++
	case unavailable:
		c.Unavailable++
	default:
		c.Free++
	}
}

// ClassCapacity is one DeviceClass of the catalog.
type ClassCapacity struct {
	Name string `json:"name"`
	// Tenants are the tenants the class is granted to.
	Tenants []string `json:"tenants"`
	DeviceCounts
	// Pools break the counts down by pool; pools without a matching device are left out.
	Pools []ClassPool `json:"pools"`
}

// ClassPool is a class's devices in one pool.
type ClassPool struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	// Node is empty for devices not bound to one node.
	Node string `json:"node"`
	DeviceCounts
}

// TenantUsage is one tenant's use of one catalog class.
type TenantUsage struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Class     string `json:"class"`
	// Granted: the class carries the tenant's grant label.
	Granted bool `json:"granted"`
	// Allocated counts the devices allocated to the tenant's claims for this class.
	Allocated int `json:"allocated"`
	// Requested is the namespace's ResourceQuota status.used for the class's device key: devices requested by
	// existing claims, allocated or not. Null when no quota has the key.
	Requested *int64 `json:"requested"`
	// Quota is the ResourceQuota's status.hard for the key (the smallest, if several quotas have it); null without one.
	Quota *int64 `json:"quota"`
	// Pending counts the tenant's unallocated claims that may be allocated from this class.
	Pending int `json:"pending"`
	// PendingPods counts the tenant's unscheduled pods that ask for the class by an extended-resource name: the
	// scheduler makes their claims only when it binds them, so Pending does not count them.
	PendingPods int `json:"pendingPods"`
	// OldestPendingSeconds is the age of the oldest pending claim or pod, 0 when none.
	OldestPendingSeconds int64 `json:"oldestPendingSeconds"`
	// CostPerHour is Allocated times the class's price per device-hour, in the report's Currency; absent when the
	// class has no price.
	CostPerHour *float64 `json:"costPerHour,omitempty"`
}

// PoolInventory is one pool of the NVIDIA driver (one per node): its physical GPUs and its devices.
type PoolInventory struct {
	Driver     string `json:"driver"`
	Pool       string `json:"pool"`
	Node       string `json:"node"`
	Generation int64  `json:"generation"`
	Slices     int    `json:"slices"`
	// Incomplete: fewer slices than the pool's resourceSliceCount are published (the driver is still writing).
	Incomplete bool `json:"incomplete"`
	// PhysicalGPUs counts each GPU once, however many devices (whole, MIG partitions) publish it.
	PhysicalGPUs int `json:"physicalGPUs"`
	// GPUsInUse counts the physical GPUs with at least one allocated device.
	GPUsInUse        int `json:"gpusInUse"`
	Devices          int `json:"devices"`
	AllocatedDevices int `json:"allocatedDevices"`
}

// serviceAddresses is the Service range's use, tenants in name order; nil without a ServiceCIDR.
func serviceAddresses(s *Snapshot) *ServiceAddresses {
	room := servicerange.Of(s.ServiceCIDRs, s.IPAddresses)
	if room == nil {
		return nil
	}
	out := &ServiceAddresses{Ranges: room.CIDRs, Size: room.Size, Used: room.UsedTotal(), Tenants: []TenantServices{}}
	out.Free = max(out.Size-out.Used, 0)
	quotas := map[string]int64{}
	for _, q := range s.ResourceQuotas {
		hard, ok := q.Spec.Hard[corev1.ResourceServices]
		if !ok {
			continue
		}
		if have, seen := quotas[q.Namespace]; !seen || hard.Value() < have {
			quotas[q.Namespace] = hard.Value()
		}
	}
	for ns, tenant := range s.tenants() {
		ts := TenantServices{Tenant: tenant, Namespace: ns, Used: room.Used[ns]}
		if q, ok := quotas[ns]; ok {
			ts.Quota = &q
		}
		out.Tenants = append(out.Tenants, ts)
	}
	sort.Slice(out.Tenants, func(i, j int) bool { return out.Tenants[i].Tenant < out.Tenants[j].Tenant })
	return out
}

// Capacity computes the capacity report. now stamps the report and ages the pending claims.
func Capacity(ctx context.Context, s *Snapshot, now time.Time) *CapacityReport {
	inv := newInventory(s.ResourceSlices)
	occ := inv.occupy(s.ResourceClaims)
	m := newMatcher(inv)
	rep := &CapacityReport{APIVersion: APIVersion, Kind: "CapacityReport", GeneratedAt: now.UTC().Truncate(time.Second),
		Classes: []ClassCapacity{}, Tenants: []TenantUsage{}, Pools: []PoolInventory{}}

	var cat []*resourcev1.DeviceClass
	for i := range s.DeviceClasses {
		if catalog(&s.DeviceClasses[i]) {
			cat = append(cat, &s.DeviceClasses[i])
		}
	}
	sort.Slice(cat, func(i, j int) bool { return cat[i].Name < cat[j].Name })

	for _, class := range cat {
		match := m.match(ctx, class)
		if match.problem != "" {
			rep.Warnings = append(rep.Warnings, match.problem)
		}
		cc := ClassCapacity{Name: class.Name, Tenants: grantees(class), Pools: []ClassPool{}}
		byPool := map[poolKey]int{}
		for _, d := range match.devices {
			st := occ.state(d)
			cc.add(st)
			k := poolKey{d.id.driver, d.id.pool}
			i, ok := byPool[k]
			if !ok {
				i = len(cc.Pools)
				byPool[k] = i
				cc.Pools = append(cc.Pools, ClassPool{Driver: k.driver, Pool: k.pool, Node: d.node})
			}
			cc.Pools[i].add(st)
		}
		rep.Classes = append(rep.Classes, cc)
	}

	rep.Tenants = tenantUsage(s, cat, now)
	rep.ServiceAddresses = serviceAddresses(s)

	for _, p := range inv.pools {
		if p.driver != naming.Driver {
			continue
		}
		gpus := p.physicalGPUs()
		inUse := map[string]bool{}
		pi := PoolInventory{Driver: p.driver, Pool: p.name, Node: p.node, Generation: p.generation, Slices: p.slices,
			Incomplete: int64(p.slices) != p.declared, PhysicalGPUs: len(gpus), Devices: len(p.devices)}
		for _, d := range p.devices {
			if occ.allocated[d.id] {
				pi.AllocatedDevices++
				inUse[d.gpu] = true
			}
		}
		pi.GPUsInUse = len(inUse)
		rep.Pools = append(rep.Pools, pi)
	}
	return rep
}

// NarrowToNamespace keeps only the tenant rows of namespace; empty keeps them all. The class and pool figures stay
// cluster-wide: the claims of every namespace draw on the same devices, so a device held elsewhere is not free to
// this namespace either. Call it before Price, so that the tenant costs are those of the rows kept.
func (r *CapacityReport) NarrowToNamespace(namespace string) {
	if namespace == "" {
		return
	}
	r.Tenants = slices.DeleteFunc(r.Tenants, func(u TenantUsage) bool { return u.Namespace != namespace })
}

// grantees are the tenants a class is granted to, sorted.
func grantees(class *resourcev1.DeviceClass) []string {
	out := []string{}
	for k, v := range class.Labels {
		if t, ok := strings.CutPrefix(k, naming.ClassTenantLabelPrefix); ok && v == "true" {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

type tenantClass struct{ namespace, class string }

// tenantUsage lists, per tenant namespace, each catalog class the tenant is granted, has a quota key for, holds or
// waits for.
func tenantUsage(s *Snapshot, cat []*resourcev1.DeviceClass, now time.Time) []TenantUsage {
	tenants := s.tenants()
	usage := map[tenantClass]*TenantUsage{}
	get := func(ns, class string) *TenantUsage {
		k := tenantClass{ns, class}
		if u := usage[k]; u != nil {
			return u
		}
		u := &TenantUsage{Tenant: tenants[ns], Namespace: ns, Class: class}
		usage[k] = u
		return u
	}
	inCatalog := map[string]bool{}
	for _, c := range cat {
		inCatalog[c.Name] = true
		for ns, t := range tenants {
			if granted(c, t) {
				get(ns, c.Name).Granted = true
			}
		}
	}
	for i := range s.ResourceClaims {
		claim := &s.ResourceClaims[i]
		if _, ok := tenants[claim.Namespace]; !ok {
			continue
		}
		if a := claim.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if c := resultClass(&claim.Spec, r.Request); inCatalog[c] {
					get(claim.Namespace, c).Allocated++
				}
			}
			continue
		}
		if claim.DeletionTimestamp != nil {
			continue
		}
		age := ageSeconds(now, claim.CreationTimestamp.Time)
		for _, c := range claimClasses(&claim.Spec) {
			if inCatalog[c] {
				u := get(claim.Namespace, c)
				u.Pending++
				u.OldestPendingSeconds = max(u.OldestPendingSeconds, age)
			}
		}
	}
	named := extendedResourceClasses(s.DeviceClasses)
	for i := range s.Pods {
		pod := &s.Pods[i]
		if _, ok := tenants[pod.Namespace]; !ok || !unscheduled(pod) {
			continue
		}
		age := ageSeconds(now, pod.CreationTimestamp.Time)
		var classes []string
		for _, name := range waitingFor(pod, named) {
			if c := named[name]; inCatalog[c] && !slices.Contains(classes, c) {
				classes = append(classes, c)
				u := get(pod.Namespace, c)
				u.PendingPods++
				u.OldestPendingSeconds = max(u.OldestPendingSeconds, age)
			}
		}
	}
	for i := range s.ResourceQuotas {
		q := &s.ResourceQuotas[i]
		if _, ok := tenants[q.Namespace]; !ok {
			continue
		}
		for c := range inCatalog {
			hard, ok := quotaValue(q.Status.Hard, q.Spec.Hard, naming.DeviceQuotaKey(c))
			if !ok {
				continue
			}
			u := get(q.Namespace, c)
			if u.Quota == nil || hard < *u.Quota {
				used := q.Status.Used[corev1.ResourceName(naming.DeviceQuotaKey(c))]
				u.Quota, u.Requested = &hard, new(used.Value())
			}
		}
	}
	out := make([]TenantUsage, 0, len(usage))
	for _, u := range usage {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Class < out[j].Class
	})
	return out
}

// quotaValue reads a quota's hard limit for key: status.hard is what the quota controller enforces; spec.hard
// stands in until the controller has synced a new quota.
func quotaValue(status, spec corev1.ResourceList, key string) (int64, bool) {
	name := corev1.ResourceName(key)
	if v, ok := status[name]; ok {
		return v.Value(), true
	}
	if v, ok := spec[name]; ok {
		return v.Value(), true
	}
	return 0, false
}
