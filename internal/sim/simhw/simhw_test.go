package simhw

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
)

func load(t *testing.T) *Hardware {
	t.Helper()
	hw, err := Load()
	require.NoError(t, err)
	return hw
}

func nodesInPool(hw *Hardware, pool string) []string {
	var names []string
	for _, n := range hw.Nodes {
		if n.Labels[cluster.PoolLabel] == pool {
			names = append(names, n.Name)
		}
	}
	return names
}

func TestNodesCarryThePoolLabelsAndTaintTheComponentsSet(t *testing.T) {
	hw := load(t)
	require.NotEmpty(t, hw.Nodes)
	taint := corev1.Taint{Key: cluster.GPUTaint.Key, Value: cluster.GPUTaint.Value, Effect: corev1.TaintEffect(cluster.GPUTaint.Effect)}
	for _, n := range hw.Nodes {
		pool := n.Labels[cluster.PoolLabel]
		for k, v := range cluster.GPUNodeLabels(pool) {
			assert.Equal(t, v, n.Labels[k], "node %s label %s", n.Name, k)
		}
		assert.Equal(t, []corev1.Taint{taint}, n.Spec.Taints, "node %s", n.Name)
		assert.Equal(t, n.Name, n.Labels[corev1.LabelHostname], "node %s", n.Name)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			assert.False(t, n.Status.Capacity.Name(r, resource.DecimalSI).IsZero(), "node %s capacity %s", n.Name, r)
			assert.False(t, n.Status.Allocatable.Name(r, resource.DecimalSI).IsZero(), "node %s allocatable %s", n.Name, r)
		}
	}
}

func TestInventoryHasTheDocumentedPools(t *testing.T) {
	hw := load(t)
	assert.Equal(t, []string{"gpu-a100-whole-0", "gpu-a100-whole-1"}, nodesInPool(hw, PoolWhole))
	assert.Equal(t, []string{"gpu-a100-mig-0"}, nodesInPool(hw, PoolMIG))
	assert.Len(t, hw.Nodes, 3, "every node belongs to a documented pool")
}

func TestSlicesArePublishedLikeTheDriverDoes(t *testing.T) {
	hw := load(t)
	nodes := map[string]bool{}
	for _, n := range hw.Nodes {
		nodes[n.Name] = true
	}
	perNode := map[string]int{}
	for _, s := range hw.Slices {
		node := ptr.Deref(s.Spec.NodeName, "")
		assert.Equal(t, Driver, s.Spec.Driver, "slice %s", s.Name)
		assert.True(t, nodes[node], "slice %s names node %q, which is not in the fixtures", s.Name, node)
		assert.Equal(t, node, s.Spec.Pool.Name, "slice %s: one pool per node, named after it", s.Name)
		assert.Equal(t, int64(1), s.Spec.Pool.ResourceSliceCount, "slice %s", s.Name)
		assert.True(t, strings.HasPrefix(s.Name, node+"-"+Driver+"-"), "slice %s: named <node>-<driver>-", s.Name)
		perNode[node]++
	}
	for n := range nodes {
		assert.Equal(t, 1, perNode[n], "node %s has exactly one slice", n)
	}
}

func devicesOnPool(hw *Hardware, pool string) []resourcev1.Device {
	nodes := nodesInPool(hw, pool)
	var devs []resourcev1.Device
	for _, s := range hw.Slices {
		if slices.Contains(nodes, ptr.Deref(s.Spec.NodeName, "")) {
			devs = append(devs, s.Spec.Devices...)
		}
	}
	return devs
}

func str(d resourcev1.Device, name string) string {
	return ptr.Deref(d.Attributes[resourcev1.QualifiedName(name)].StringValue, "")
}

func TestDevicesCarryTheDriversAttributes(t *testing.T) {
	common := []string{"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability",
		"driverVersion", "cudaDriverVersion", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot"}
	tests := []struct {
		name       string
		pool       string
		wantNames  []string
		wantType   string
		extraAttrs []string
		wantCaps   []string
		wantMemory string
	}{
		{
			name: "whole A100s are announced as gpu-0 with 40Gi", pool: PoolWhole,
			wantNames: []string{"gpu-0", "gpu-0"}, wantType: "gpu",
			wantCaps: []string{"memory"}, wantMemory: "40Gi",
		},
		{
			name: "an A100 in MIG mode is announced as seven 1g.5gb devices", pool: PoolMIG,
			wantNames: []string{"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-1g5gb-19-2",
				"gpu-0-mig-1g5gb-19-3", "gpu-0-mig-1g5gb-19-4", "gpu-0-mig-1g5gb-19-5", "gpu-0-mig-1g5gb-19-6"},
			wantType: "mig", extraAttrs: []string{"parentUUID", "profile"},
			wantCaps:   []string{"multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines", "memory"},
			wantMemory: "4864Mi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs := devicesOnPool(load(t), tt.pool)
			var names []string
			for _, d := range devs {
				names = append(names, d.Name)
				for _, a := range append(common, tt.extraAttrs...) {
					assert.Contains(t, d.Attributes, resourcev1.QualifiedName(a), "device %s", d.Name)
				}
				for _, c := range tt.wantCaps {
					assert.Contains(t, d.Capacity, resourcev1.QualifiedName(c), "device %s", d.Name)
				}
				assert.Equal(t, tt.wantType, str(d, "type"), "device %s", d.Name)
				assert.Equal(t, cluster.A100x40GB.ProductName, str(d, "productName"), "device %s", d.Name)
				mem := d.Capacity["memory"].Value
				assert.Equal(t, 0, mem.Cmp(resource.MustParse(tt.wantMemory)), "device %s memory %s", d.Name, mem.String())
			}
			sort.Strings(names)
			assert.Equal(t, tt.wantNames, names)
		})
	}
}

func TestMIGDevicesNameTheirProfileParentAndMemorySlice(t *testing.T) {
	hw := load(t)
	for _, d := range devicesOnPool(hw, PoolMIG) {
		profile := str(d, "profile")
		assert.True(t, cluster.A100x40GB.HasMIGProfile(profile), "device %s profile %q", d.Name, profile)
		assert.True(t, strings.HasPrefix(str(d, "parentUUID"), "GPU-"), "device %s", d.Name)
		assert.True(t, strings.HasPrefix(str(d, "uuid"), "MIG-"), "device %s", d.Name)
		placement := d.Name[strings.LastIndex(d.Name, "-")+1:]
		assert.Contains(t, d.Capacity, resourcev1.QualifiedName("memorySlice"+placement), "device %s", d.Name)
	}
}

func TestUUIDsAreUnique(t *testing.T) {
	seen := map[string]string{}
	for _, s := range load(t).Slices {
		for _, d := range s.Spec.Devices {
			where := s.Name + "/" + d.Name
			u := str(d, "uuid")
			require.NotEmpty(t, u, where)
			assert.NotContains(t, seen, u, "uuid of %s already used by %s", where, seen[u])
			seen[u] = where
		}
	}
}

// The selectors NVIDIA's own examples use for whole A100s and 1g.5gb slices (kubernetes-sigs/dra-driver-nvidia-gpu
// v0.4.0 demo/specs/quickstart/v1/gpu-test6.yaml, demo/specs/extended-resources/mig-1g-12gb.yaml) must pick exactly
// the intended devices.
func TestClassSelectorsPickTheIntendedDevices(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		wantPool string
		want     int
	}{
		{
			name:     "whole A100 selects both whole GPUs and no MIG device",
			selector: `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')`,
			wantPool: PoolWhole, want: 2,
		},
		{
			name:     "MIG 1g.5gb selects the seven MIG devices and no whole GPU",
			selector: `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.5gb'`,
			wantPool: PoolMIG, want: 7,
		},
		{
			name:     "memory of at least 40Gi selects only whole GPUs",
			selector: `device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0`,
			wantPool: PoolWhole, want: 2,
		},
	}
	hw := load(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(tt.selector, dracel.Options{})
			require.Nil(t, prog.Error)
			wantNodes := nodesInPool(hw, tt.wantPool)
			matched := 0
			for _, s := range hw.Slices {
				for _, d := range s.Spec.Devices {
					ok, _, err := prog.DeviceMatches(context.Background(),
						dracel.Device{Driver: s.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity})
					require.NoError(t, err, "device %s/%s", s.Name, d.Name)
					if ok {
						matched++
						assert.Contains(t, wantNodes, ptr.Deref(s.Spec.NodeName, ""), "device %s/%s", s.Name, d.Name)
					}
				}
			}
			assert.Equal(t, tt.want, matched)
		})
	}
}
