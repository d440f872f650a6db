package gpureport

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

const (
	legal    = "legal-ai"
	research = "research-ai"
)

var (
	legalNS    = naming.Namespace(legal)
	researchNS = naming.Namespace(research)
)

func class(t *testing.T, r *CapacityReport, name string) ClassCapacity {
	t.Helper()
	for _, c := range r.Classes {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("class %s not in report %+v", name, r.Classes)
	return ClassCapacity{}
}

func usage(t *testing.T, r *CapacityReport, tenant, className string) TenantUsage {
	t.Helper()
	for _, u := range r.Tenants {
		if u.Tenant == tenant && u.Class == className {
			return u
		}
	}
	t.Fatalf("no usage of %s by %s in %+v", className, tenant, r.Tenants)
	return TenantUsage{}
}

func poolOf(t *testing.T, r *CapacityReport, name string) PoolInventory {
	t.Helper()
	for _, p := range r.Pools {
		if p.Pool == name {
			return p
		}
	}
	t.Fatalf("pool %s not in report %+v", name, r.Pools)
	return PoolInventory{}
}

// partitionable is one GPU published whole and as seven 5Gi partitions, all drawing on one 40Gi counter set.
func partitionable(node string) resourcev1.ResourceSlice {
	devices := []resourcev1.Device{consumes(wholeGPU("gpu-0", "GPU-P"), "gpu-0-counters", "40Gi")}
	for _, d := range migDevices("GPU-P", 7) {
		devices = append(devices, consumes(d, "gpu-0-counters", "5Gi"))
	}
	s := nodeSlice(node, 1, devices...)
	s.Spec.SharedCounters = []resourcev1.CounterSet{counterSet("gpu-0-counters", "40Gi")}
	return s
}

func TestCapacity(t *testing.T) {
	catalog := []resourcev1.DeviceClass{deviceClass("gpu-whole", wholeCEL, legal), deviceClass("gpu-slice", sliceCEL, research)}
	tenants := []corev1.Namespace{tenantNamespace(legal), tenantNamespace(research)}
	cases := []struct {
		name  string
		snap  Snapshot
		check func(t *testing.T, r *CapacityReport)
	}{
		{
			name: "the whole-GPU class selects whole GPUs and no MIG device",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: simulatedSlices()},
			check: func(t *testing.T, r *CapacityReport) {
				c := class(t, r, "gpu-whole")
				assert.Equal(t, DeviceCounts{Exist: 2, Free: 2}, c.DeviceCounts)
				assert.Equal(t, []string{"gpu-a100-whole-0", "gpu-a100-whole-1"}, []string{c.Pools[0].Pool, c.Pools[1].Pool})
			},
		},
		{
			name: "the MIG class selects the 1g.5gb devices and no whole GPU",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: simulatedSlices()},
			check: func(t *testing.T, r *CapacityReport) {
				c := class(t, r, "gpu-slice")
				assert.Equal(t, DeviceCounts{Exist: 7, Free: 7}, c.DeviceCounts)
				require.Len(t, c.Pools, 1)
				assert.Equal(t, ClassPool{Driver: naming.Driver, Pool: "gpu-a100-mig-0", Node: "gpu-a100-mig-0", DeviceCounts: DeviceCounts{Exist: 7, Free: 7}}, c.Pools[0])
			},
		},
		{
			name: "a MIG class skips devices of another profile",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{
				nodeSlice("n", 1, migDevice("a", "GPU-1", "1g.5gb"), migDevice("b", "GPU-1", "2g.10gb"), migDevice("c", "GPU-1", "3g.20gb")),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, 1, class(t, r, "gpu-slice").Exist)
			},
		},
		{
			name: "only the newest generation of a pool counts",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{
				nodeSlice("n", 1, wholeGPU("gpu-0", "GPU-1"), wholeGPU("gpu-1", "GPU-2")),
				nodeSlice("n", 2, wholeGPU("gpu-0", "GPU-1")),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, 1, class(t, r, "gpu-whole").Exist)
				p := poolOf(t, r, "n")
				assert.Equal(t, int64(2), p.Generation)
				assert.Equal(t, 1, p.Devices)
			},
		},
		{
			name: "allocated devices are counted and are not free",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: simulatedSlices(), ResourceClaims: []resourcev1.ResourceClaim{
				allocate(claim(legalNS, "a", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0"),
				allocate(claim(researchNS, "s", now, "gpu-slice"), "gpu", "gpu-a100-mig-0", "gpu-0-mig-1g5gb-19-3"),
				claim(legalNS, "waiting", now, "gpu-whole"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, DeviceCounts{Exist: 2, Allocated: 1, Free: 1}, class(t, r, "gpu-whole").DeviceCounts)
				assert.Equal(t, DeviceCounts{Exist: 7, Allocated: 1, Free: 6}, class(t, r, "gpu-slice").DeviceCounts)
				p := poolOf(t, r, "gpu-a100-whole-0")
				assert.Equal(t, 1, p.AllocatedDevices)
				assert.Equal(t, 1, p.GPUsInUse)
			},
		},
		{
			name: "an allocation with admin access leaves the device free, as the scheduler does",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: simulatedSlices(), ResourceClaims: []resourcev1.ResourceClaim{
				func() resourcev1.ResourceClaim {
					c := allocate(claim("monitoring", "probe", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0")
					c.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
					return c
				}(),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, DeviceCounts{Exist: 2, Free: 2}, class(t, r, "gpu-whole").DeviceCounts)
			},
		},
		{
			name: "a GPU published whole and as partitions is one physical GPU",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{partitionable("p")}},
			check: func(t *testing.T, r *CapacityReport) {
				p := poolOf(t, r, "p")
				assert.Equal(t, 1, p.PhysicalGPUs)
				assert.Equal(t, 8, p.Devices)
			},
		},
		{
			name: "an allocated partition makes the whole GPU unavailable and leaves the other partitions free",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{partitionable("p")}, ResourceClaims: []resourcev1.ResourceClaim{
				allocate(claim(researchNS, "s", now, "gpu-slice"), "gpu", "p", "gpu-0-mig-1g5gb-19-0"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, DeviceCounts{Exist: 1, Unavailable: 1}, class(t, r, "gpu-whole").DeviceCounts)
				assert.Equal(t, DeviceCounts{Exist: 7, Allocated: 1, Free: 6}, class(t, r, "gpu-slice").DeviceCounts)
				assert.Equal(t, 1, poolOf(t, r, "p").GPUsInUse)
			},
		},
		{
			name: "an allocated whole GPU makes all its partitions unavailable",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{partitionable("p")}, ResourceClaims: []resourcev1.ResourceClaim{
				allocate(claim(legalNS, "w", now, "gpu-whole"), "gpu", "p", "gpu-0"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, DeviceCounts{Exist: 1, Allocated: 1}, class(t, r, "gpu-whole").DeviceCounts)
				assert.Equal(t, DeviceCounts{Exist: 7, Unavailable: 7}, class(t, r, "gpu-slice").DeviceCounts)
			},
		},
		{
			name: "static MIG devices count one physical GPU per parent",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: []resourcev1.ResourceSlice{
				nodeSlice("n", 1, append(migDevices("GPU-A", 3), migDevice("other", "GPU-B", "1g.5gb"))...),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, 2, poolOf(t, r, "n").PhysicalGPUs)
			},
		},
		{
			name: "a pool with fewer slices than announced is incomplete",
			snap: Snapshot{DeviceClasses: catalog, ResourceSlices: func() []resourcev1.ResourceSlice {
				s := nodeSlice("n", 1, wholeGPU("gpu-0", "GPU-1"))
				s.Spec.Pool.ResourceSliceCount = 2
				return []resourcev1.ResourceSlice{s}
			}()},
			check: func(t *testing.T, r *CapacityReport) {
				assert.True(t, poolOf(t, r, "n").Incomplete)
			},
		},
		{
			name: "classes outside the catalog are left out",
			snap: Snapshot{ResourceSlices: simulatedSlices(), DeviceClasses: append([]resourcev1.DeviceClass{{
				ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
				Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == 'gpu.nvidia.com'"}}}},
			}}, catalog...)},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, []string{"gpu-slice", "gpu-whole"}, []string{r.Classes[0].Name, r.Classes[1].Name})
			},
		},
		{
			name: "a selector failing on some device is a warning",
			snap: Snapshot{ResourceSlices: simulatedSlices(), DeviceClasses: []resourcev1.DeviceClass{
				deviceClass("unguarded", "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				require.Len(t, r.Warnings, 1)
				assert.Contains(t, r.Warnings[0], "DeviceClass unguarded")
				assert.Contains(t, r.Warnings[0], "CEL runtime error")
				assert.Equal(t, 7, class(t, r, "unguarded").Exist)
			},
		},
		{
			name: "a tenant's allocated, requested and quota come from its claims and its quota's status",
			snap: Snapshot{Namespaces: tenants, DeviceClasses: catalog, ResourceSlices: simulatedSlices(),
				ResourceClaims: []resourcev1.ResourceClaim{
					allocate(claim(legalNS, "whole-a", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0"),
					allocate(claim(legalNS, "whole-b", now, "gpu-whole"), "gpu", "gpu-a100-whole-1", "gpu-0"),
					claim(legalNS, "whole-c", now.Add(-90*time.Second), "gpu-whole"),
				},
				ResourceQuotas: []corev1.ResourceQuota{quota(legalNS,
					map[string]int64{naming.DeviceQuotaKey("gpu-whole"): 3, "requests.cpu": 8},
					map[string]int64{naming.DeviceQuotaKey("gpu-whole"): 3, "requests.cpu": 1})},
			},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, TenantUsage{
					Tenant: legal, Namespace: legalNS, Class: "gpu-whole", Granted: true, Allocated: 2,
					Requested: ptr.To[int64](3), Quota: ptr.To[int64](3), Pending: 1, OldestPendingSeconds: 90,
				}, usage(t, r, legal, "gpu-whole"))
			},
		},
		{
			name: "a tenant's pods asking for its class by name count as pending until the scheduler makes their claims",
			snap: func() Snapshot {
				named := slices.Clone(catalog)
				named[0].Spec.ExtendedResourceName = ptr.To("gpu-tenancy.io/gpu-whole")
				bound := podAsking(legalNS, "bound", now, "gpu-tenancy.io/gpu-whole", "1")
				bound.Spec.NodeName = "gpu-a100-whole-0"
				made := podAsking(legalNS, "made", now, "gpu-tenancy.io/gpu-whole", "1")
				made.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "made-extended-resources-x"}
				return Snapshot{Namespaces: tenants, DeviceClasses: named, ResourceSlices: simulatedSlices(), Pods: []corev1.Pod{
					podAsking(legalNS, "waiting", now.Add(-2*time.Minute), "gpu-tenancy.io/gpu-whole", "2"),
					podAsking(legalNS, "implicit", now, "deviceclass.resource.kubernetes.io/gpu-whole", "1"),
					bound, made,
				}}
			}(),
			check: func(t *testing.T, r *CapacityReport) {
				u := usage(t, r, legal, "gpu-whole")
				assert.Equal(t, 2, u.PendingPods, "the waiting pod and the one asking by the implicit name; not the bound one, nor one with its claim")
				assert.Equal(t, 0, u.Pending, "no claim waits")
				assert.Equal(t, int64(120), u.OldestPendingSeconds)
			},
		},
		{
			name: "a firstAvailable allocation counts for the class of the chosen subrequest",
			snap: Snapshot{Namespaces: tenants, DeviceClasses: []resourcev1.DeviceClass{
				deviceClass("gpu-whole", wholeCEL, research), deviceClass("gpu-slice", sliceCEL, research),
			}, ResourceSlices: simulatedSlices(), ResourceClaims: []resourcev1.ResourceClaim{
				allocate(claim(researchNS, "either", now, "gpu-whole", "gpu-slice"), "gpu/option-1", "gpu-a100-mig-0", "gpu-0-mig-1g5gb-19-0"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				assert.Equal(t, 1, usage(t, r, research, "gpu-slice").Allocated)
				assert.Equal(t, 0, usage(t, r, research, "gpu-whole").Allocated)
			},
		},
		{
			name: "a tenant without a quota key for a granted class has no requested and no quota figure",
			snap: Snapshot{Namespaces: tenants, DeviceClasses: catalog, ResourceSlices: simulatedSlices()},
			check: func(t *testing.T, r *CapacityReport) {
				u := usage(t, r, research, "gpu-slice")
				assert.True(t, u.Granted)
				assert.Nil(t, u.Requested)
				assert.Nil(t, u.Quota)
			},
		},
		{
			name: "a tenant holding a class no longer granted is shown as not granted",
			snap: Snapshot{Namespaces: tenants, DeviceClasses: catalog, ResourceSlices: simulatedSlices(), ResourceClaims: []resourcev1.ResourceClaim{
				allocate(claim(legalNS, "old", now, "gpu-slice"), "gpu", "gpu-a100-mig-0", "gpu-0-mig-1g5gb-19-0"),
			}},
			check: func(t *testing.T, r *CapacityReport) {
				u := usage(t, r, legal, "gpu-slice")
				assert.False(t, u.Granted)
				assert.Equal(t, 1, u.Allocated)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, Capacity(context.Background(), &tc.snap, now))
		})
	}
}

// BenchmarkCapacity computes the report for the large cluster, in memory: 1,000 GPU nodes of 8 devices
// (every fourth node MIG) and 10,000 claims, 4,000 of them allocated. scripts/bench/capacity measures the whole CLI
// against an API server.
func BenchmarkCapacity(b *testing.B) {
	s := Snapshot{DeviceClasses: []resourcev1.DeviceClass{deviceClass("gpu-whole", wholeCEL, legal), deviceClass("gpu-slice", sliceCEL, research)}}
	var free []resourcev1.ResourceClaim
	for n := range 1000 {
		node := fmt.Sprintf("node-%04d", n)
		var devices []resourcev1.Device
		for d := range 8 {
			if n%4 == 0 {
				devices = append(devices, migDevice(fmt.Sprintf("gpu-%d-mig-%d", d/4, d%4), fmt.Sprintf("GPU-%d-%d", n, d/4), "1g.5gb"))
			} else {
				devices = append(devices, wholeGPU(fmt.Sprintf("gpu-%d", d), fmt.Sprintf("GPU-%d-%d", n, d)))
			}
			if len(free) < 4000 {
				free = append(free, allocate(claim(legalNS, fmt.Sprintf("c-%d-%d", n, d), now, "gpu-whole"), "gpu", node, devices[d].Name))
			}
		}
		s.ResourceSlices = append(s.ResourceSlices, nodeSlice(node, 1, devices...))
	}
	s.ResourceClaims = free
	for i := len(free); i < 10000; i++ {
		s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, fmt.Sprintf("p-%d", i), now, "gpu-whole"))
	}
	b.ResetTimer()
	for b.Loop() {
		Capacity(context.Background(), &s, now)
	}
}

// The capacity report shows the Service range every tenant shares: its size, what is held and free, and each tenant's
// addresses against its Service quota; a cluster without ServiceCIDRs gets none.
func TestCapacityShowsTheServiceRangeAndEachTenantsShare(t *testing.T) {
	legal, research := naming.Namespace("legal-ai"), naming.Namespace("research-ai")
	ip := func(addr, namespace string) networkingv1.IPAddress {
		return networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: namespace, Name: "s"}}}
	}
	s := &Snapshot{
		Namespaces:     []corev1.Namespace{tenantNamespace("legal-ai"), tenantNamespace("research-ai")},
		ResourceQuotas: []corev1.ResourceQuota{quota(legal, map[string]int64{"services": 20}, nil)},
		ServiceCIDRs: []networkingv1.ServiceCIDR{{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/24"}}}},
		IPAddresses: []networkingv1.IPAddress{ip("10.0.0.1", "default"), ip("10.0.0.2", legal), ip("10.0.0.3", legal), ip("10.0.0.4", research)},
	}
	got := Capacity(context.Background(), s, time.Unix(0, 0)).ServiceAddresses
	require.NotNil(t, got)
	assert.Equal(t, &ServiceAddresses{Ranges: []string{"10.0.0.0/24"}, Size: 254, Used: 4, Free: 250, Tenants: []TenantServices{
		{Tenant: "legal-ai", Namespace: legal, Used: 2, Quota: ptr.To(int64(20))},
		{Tenant: "research-ai", Namespace: research, Used: 1},
	}}, got)

	var out bytes.Buffer
	require.NoError(t, Capacity(context.Background(), s, time.Unix(0, 0)).writeTable(&out))
	assert.Contains(t, out.String(), "SERVICE RANGE  ADDRESSES  USED  FREE\n10.0.0.0/24    254        4     250\n")
	assert.Contains(t, out.String(), "TENANT       SERVICE ADDRESSES  QUOTA\nlegal-ai     2                  20\nresearch-ai  1                  -\n")

	s.ServiceCIDRs = nil
	assert.Nil(t, Capacity(context.Background(), s, time.Unix(0, 0)).ServiceAddresses, "no ServiceCIDR: not known")
}
