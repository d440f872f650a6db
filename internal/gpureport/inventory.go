package gpureport

import (
	"context"
	"fmt"
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

// deviceID names a device the way allocation results do.
type deviceID struct{ driver, pool, device string }

// device is one device of the newest generation of its pool.
type device struct {
	id   deviceID
	node string
	spec *resourcev1.Device
	// gpu identifies the physical GPU the device is (part of) within its pool.
	gpu string
}

// pool is one driver pool as the scheduler sees it: the slices of its newest generation only.
type pool struct {
	driver, name string
	node         string
	generation   int64
	slices       int
	// declared is the pool's resourceSliceCount; fewer slices than that means the driver is still publishing.
	declared int64
	devices  []*device
	// counterSets are the pool's shared counters (partitionable devices, KEP-4815) by counter set name.
	counterSets map[string]map[string]resourcev1.Counter
}

type poolKey struct{ driver, pool string }

// inventory is every device of the cluster's newest pool generations.
type inventory struct {
	pools []*pool
	byID  map[deviceID]*device
}

// newInventory keeps, like the scheduler's GatherPools, only the slices of each pool's highest generation: a driver
// republishing a pool bumps the generation, and slices of older generations are stale until they are deleted.
func newInventory(slices []resourcev1.ResourceSlice) *inventory {
	newest := map[poolKey]int64{}
	for i := range slices {
		s := &slices[i].Spec
		k := poolKey{s.Driver, s.Pool.Name}
		if g, ok := newest[k]; !ok || s.Pool.Generation > g {
			newest[k] = s.Pool.Generation
		}
	}
	pools := map[poolKey]*pool{}
	inv := &inventory{byID: map[deviceID]*device{}}
	for i := range slices {
		s := &slices[i].Spec
		k := poolKey{s.Driver, s.Pool.Name}
		if s.Pool.Generation != newest[k] {
			continue
		}
		p := pools[k]
		if p == nil {
			p = &pool{driver: s.Driver, name: s.Pool.Name, generation: s.Pool.Generation, counterSets: map[string]map[string]resourcev1.Counter{}}
			pools[k] = p
			inv.pools = append(inv.pools, p)
		}
		p.slices++
		p.declared = s.Pool.ResourceSliceCount
		if p.node == "" {
			p.node = ptr.Deref(s.NodeName, "")
		}
		for _, cs := range s.SharedCounters {
			p.counterSets[cs.Name] = cs.Counters
		}
		for j := range s.Devices {
			spec := &s.Devices[j]
			d := &device{
				id:   deviceID{s.Driver, s.Pool.Name, spec.Name},
				node: ptr.Deref(s.NodeName, ptr.Deref(spec.NodeName, "")),
				spec: spec,
				gpu:  physicalGPU(s.Driver, spec),
			}
			p.devices = append(p.devices, d)
			inv.byID[d.id] = d
		}
	}
	sort.Slice(inv.pools, func(i, j int) bool {
		a, b := inv.pools[i], inv.pools[j]
		if a.driver != b.driver {
			return a.driver < b.driver
		}
		return a.name < b.name
	})
	return inv
}

// physicalGPU identifies the GPU behind a device, so a GPU published both whole and as partitions counts once.
// Partitionable devices name it through the counter set they consume (the NVIDIA driver has one per GPU); static
// MIG devices through the parent GPU's UUID; a whole GPU through its own UUID.
func physicalGPU(driver string, d *resourcev1.Device) string {
	if len(d.ConsumesCounters) > 0 {
		return "counterset/" + d.ConsumesCounters[0].CounterSet
	}
	if u := stringAttribute(driver, d, "parentUUID"); u != "" {
		return "uuid/" + u
	}
	if u := stringAttribute(driver, d, "uuid"); u != "" {
		return "uuid/" + u
	}
	return "device/" + d.Name
}

// stringAttribute reads an attribute given with or without the driver's domain, as the CEL environment does.
func stringAttribute(driver string, d *resourcev1.Device, name string) string {
	for _, k := range []resourcev1.QualifiedName{resourcev1.QualifiedName(name), resourcev1.QualifiedName(driver + "/" + name)} {
		if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// physicalGPUs counts the distinct GPUs of a pool: one per counter set, plus those of devices without counters.
func (p *pool) physicalGPUs() map[string]bool {
	gpus := make(map[string]bool, len(p.counterSets)+len(p.devices))
	for name := range p.counterSets {
		gpus["counterset/"+name] = true
	}
	for _, d := range p.devices {
		gpus[d.gpu] = true
	}
	return gpus
}

// deviceState is whether a device can still be allocated.
type deviceState int

const (
	free deviceState = iota
	allocated
	// unavailable: not allocated itself, but another device drew on the shared counters it needs (a MIG partition
	// of a GPU that is allocated whole, or the whole GPU of which a partition is allocated).
	unavailable
)

type counterKey struct {
	pool poolKey
	set  string
}

// occupancy is what the allocated devices take from the inventory.
type occupancy struct {
	allocated map[deviceID]bool
	remaining map[counterKey]map[string]resource.Quantity
}

// occupy records the claims' allocations. Like the scheduler (dynamicresources/allocateddevices.go), results with
// admin access do not make a device unavailable to others.
func (inv *inventory) occupy(claims []resourcev1.ResourceClaim) *occupancy {
	o := &occupancy{allocated: map[deviceID]bool{}, remaining: map[counterKey]map[string]resource.Quantity{}}
	for i := range claims {
		a := claims[i].Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) {
				o.allocated[deviceID{r.Driver, r.Pool, r.Device}] = true
			}
		}
	}
	for _, p := range inv.pools {
		for name, counters := range p.counterSets {
			rem := make(map[string]resource.Quantity, len(counters))
			for c, v := range counters {
				rem[c] = v.Value.DeepCopy()
			}
			o.remaining[counterKey{poolKey{p.driver, p.name}, name}] = rem
		}
	}
	for id := range o.allocated {
		d := inv.byID[id]
		if d == nil {
			continue
		}
		for _, use := range d.spec.ConsumesCounters {
			rem := o.remaining[counterKey{poolKey{id.driver, id.pool}, use.CounterSet}]
			for c, v := range use.Counters {
				if q, ok := rem[c]; ok {
					q.Sub(v.Value)
					rem[c] = q
				}
			}
		}
	}
	return o
}

// state is the scheduler's view of one device: allocated, or free only if every counter it consumes has enough left.
func (o *occupancy) state(d *device) deviceState {
	if o.allocated[d.id] {
		return allocated
	}
	for _, use := range d.spec.ConsumesCounters {
		rem := o.remaining[counterKey{poolKey{d.id.driver, d.id.pool}, use.CounterSet}]
		for c, v := range use.Counters {
			if q, ok := rem[c]; ok && q.Cmp(v.Value) < 0 {
				return unavailable
			}
		}
	}
	return free
}

// classMatch is the devices a class selects, or why it selects none.
type classMatch struct {
	devices []*device
	// problem is the first CEL error met; the scheduler fails any allocation from the class on such an error.
	problem string
}

// matcher evaluates DeviceClass selectors against devices with the scheduler's own CEL library and environment
// (structured allocator, stable variant: every selector of the class must match).
type matcher struct {
	inv   *inventory
	cache *dracel.Cache
	done  map[string]classMatch
}

func newMatcher(inv *inventory) *matcher {
	// Features{} is the scheduler's choice while DRAConsumableCapacity is off, as it is by default in 1.34.
	return &matcher{inv: inv, cache: dracel.NewCache(64, dracel.Features{}), done: map[string]classMatch{}}
}

// match returns the devices that class selects, computed once per class.
func (m *matcher) match(ctx context.Context, class *resourcev1.DeviceClass) classMatch {
	if r, ok := m.done[class.Name]; ok {
		return r
	}
	r := m.evaluate(ctx, class)
	m.done[class.Name] = r
	return r
}

func (m *matcher) evaluate(ctx context.Context, class *resourcev1.DeviceClass) classMatch {
	progs := make([]dracel.CompilationResult, 0, len(class.Spec.Selectors))
	for i, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			return classMatch{problem: fmt.Sprintf("DeviceClass %s: selector #%d is not a CEL selector", class.Name, i)}
		}
		p := m.cache.GetOrCompile(sel.CEL.Expression)
		if p.Error != nil {
			return classMatch{problem: fmt.Sprintf("DeviceClass %s: selector #%d: %s", class.Name, i, p.Error.Detail)}
		}
		progs = append(progs, p)
	}
	var r classMatch
	for _, p := range m.inv.pools {
		for _, d := range p.devices {
			ok, err := matchesAll(ctx, progs, d)
			if err != nil && r.problem == "" {
				r.problem = fmt.Sprintf("DeviceClass %s: device %s/%s/%s: CEL runtime error: %v", class.Name, d.id.driver, d.id.pool, d.id.device, err)
			}
			if ok {
				r.devices = append(r.devices, d)
			}
		}
	}
	return r
}

func matchesAll(ctx context.Context, progs []dracel.CompilationResult, d *device) (bool, error) {
	in := dracel.Device{Driver: d.id.driver, Attributes: d.spec.Attributes, Capacity: d.spec.Capacity}
	for _, p := range progs {
		ok, _, err := p.DeviceMatches(ctx, in)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
