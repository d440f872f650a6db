package dra

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	chartType     = "kubernetes:helm.sh/v4:Chart"
	quotaType     = "kubernetes:core/v1:ResourceQuota"
	configType    = "kubernetes:yaml/v2:ConfigFile"
	patchType     = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
	namespaceType = "kubernetes:core/v1:Namespace"
)

// dependsOn lists the names of the resources a registration explicitly depends on.
func dependsOn(t *testing.T, rec *mocktest.Recorder, typ, name string) []string {
	t.Helper()
	reg, err := rec.Get(typ, name)
	require.NoError(t, err)
	return reg.DependencyNames()
}

var (
	a100Pool = cluster.GPUPool{Name: "a100", Model: cluster.A100x40GB, GPUsPerNode: 1, MaxNodes: 1, Taint: cluster.GPUTaint,
		Labels: cluster.GPUNodeLabels("a100")}
	reservedPool = cluster.GPUPool{Name: "l4", Model: cluster.L4, GPUsPerNode: 1, MaxNodes: 1,
		Taint: cluster.Taint{Key: "example.com/reserved", Value: "l4", Effect: "NoExecute"}}
	tenantPool = cluster.GPUPool{Name: "a100-legal", Model: cluster.A100x40GB, GPUsPerNode: 1, MaxNodes: 1, Taint: cluster.GPUTaint,
		Tenant: "legal-ai"}
	everyTenantsPool = map[string]any{"key": naming.DedicatedNodeKey, "operator": "Exists", "effect": "NoSchedule"}
)

func run(t *testing.T, args *DriverArgs) *mocktest.Recorder {
	t.Helper()
	rec := &mocktest.Recorder{}
	require.NoError(t, mocktest.Run("test", func(ctx *pulumi.Context) error {
		_, err := NewDriver(ctx, "dra", args)
		return err
	}, rec))
	return rec
}

func releaseValues(t *testing.T, rec *mocktest.Recorder) map[string]any {
	t.Helper()
	rel, err := rec.Get(chartType, "dra")
	require.NoError(t, err)
	return rel.Inputs["values"].Mappable().(map[string]any)
}

// at walks nested maps by key; a misspelt key in the values struct makes it fail.
func at(t *testing.T, m map[string]any, keys ...string) any {
	t.Helper()
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		require.Truef(t, ok, "%s: not a map", strings.Join(keys, "."))
		cur, ok = mm[k]
		require.Truef(t, ok, "%s: key %q missing", strings.Join(keys, "."), k)
	}
	return cur
}

func TestDriverRootFollowsTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		args DriverArgs
		want string
	}{
		{"the contract's root", DriverArgs{Flavour: cluster.GKE, GPUPools: []cluster.GPUPool{a100Pool}, DriverRoot: "/home/kubernetes/bin/nvidia"}, "/home/kubernetes/bin/nvidia"},
		{"the host root when the contract names none", DriverArgs{Flavour: cluster.Existing}, "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := releaseValues(t, run(t, &tc.args))
			assert.Equal(t, tc.want, at(t, vals, "nvidiaDriverRoot"))
		})
	}
}

func TestDriverValuesEnableGPUAllocation(t *testing.T) {
	for _, f := range []cluster.Flavour{cluster.GKE, cluster.Scaleway, cluster.Existing} {
		t.Run(string(f), func(t *testing.T) {
			vals := releaseValues(t, run(t, &DriverArgs{Flavour: f, GPUPools: []cluster.GPUPool{a100Pool}}))
			assert.Equal(t, true, at(t, vals, "gpuResourcesEnabledOverride"))
			assert.Equal(t, true, at(t, vals, "resources", "gpus", "enabled"))
			assert.Equal(t, false, at(t, vals, "resources", "computeDomains", "enabled"))
			assert.Equal(t, "resource.k8s.io/v1", at(t, vals, "resourceApiVersion"))
		})
	}
}

func TestDriverComputeDomainsFollowArgs(t *testing.T) {
	vals := releaseValues(t, run(t, &DriverArgs{Flavour: cluster.Existing, ComputeDomains: true}))
	assert.Equal(t, true, at(t, vals, "resources", "computeDomains", "enabled"))
}

func TestKubeletPluginRunsOnlyOnGPUNodes(t *testing.T) {
	vals := releaseValues(t, run(t, &DriverArgs{Flavour: cluster.Existing}))
	assert.Equal(t, map[string]any{"nvidia.com/gpu.present": "true"}, at(t, vals, "kubeletPlugin", "nodeSelector"))
}

func TestKubeletPluginToleratesPoolTaints(t *testing.T) {
	chartDefault := map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
	for _, tc := range []struct {
		name  string
		pools []cluster.GPUPool
		want  []any
	}{
		{"no pools keep the chart default", nil, []any{chartDefault}},
		{"the GPU taint is covered by the chart default", []cluster.GPUPool{a100Pool}, []any{chartDefault}},
		{"a custom pool taint is added with its value", []cluster.GPUPool{a100Pool, reservedPool}, []any{chartDefault,
			map[string]any{"key": "example.com/reserved", "operator": "Equal", "value": "l4", "effect": "NoExecute"}}},
		{"a taint shared by two pools is tolerated once", []cluster.GPUPool{reservedPool, reservedPool}, []any{chartDefault,
			map[string]any{"key": "example.com/reserved", "operator": "Equal", "value": "l4", "effect": "NoExecute"}}},
		{"the pools dedicated to tenants are tolerated, whichever tenant", []cluster.GPUPool{a100Pool, tenantPool},
			[]any{chartDefault, everyTenantsPool}},
		{"a valueless taint is tolerated with Exists", []cluster.GPUPool{{Name: "h100",
			Taint: cluster.Taint{Key: "example.com/h100", Effect: "NoSchedule"}}}, []any{chartDefault,
			map[string]any{"key": "example.com/h100", "operator": "Exists", "effect": "NoSchedule"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := releaseValues(t, run(t, &DriverArgs{Flavour: cluster.Scaleway, GPUPools: tc.pools}))
			assert.Equal(t, tc.want, at(t, vals, "kubeletPlugin", "tolerations"))
		})
	}
}

func TestControllerRunsOnThePlatformPool(t *testing.T) {
	platform := cluster.Placement{NodeSelector: map[string]string{naming.PlatformPoolKey: "true"}, Tolerations: []cluster.Taint{cluster.PlatformPoolTaint}}
	vals := releaseValues(t, run(t, &DriverArgs{Flavour: cluster.GKE, GPUPools: []cluster.GPUPool{a100Pool}, ComputeDomains: true, Controller: platform}))
	assert.Equal(t, map[string]any{naming.PlatformPoolKey: "true"}, at(t, vals, "controller", "nodeSelector"))
	assert.Equal(t, []any{
		// The chart's own, kept since a list in the values replaces the chart's.
		map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
		map[string]any{"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
		map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"},
		map[string]any{"key": naming.PlatformPoolKey, "operator": "Equal", "value": "true"},
	}, at(t, vals, "controller", "tolerations"))
}

func TestControllerKeepsTheChartsPlacementWithoutAPlatformPool(t *testing.T) {
	vals := releaseValues(t, run(t, &DriverArgs{Flavour: cluster.Existing, ComputeDomains: true}))
	assert.NotContains(t, vals, "controller")
}

func TestDriverReleaseUsesDefaultChartAndNamespace(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.Existing})
	rel, err := rec.Get(chartType, "dra")
	require.NoError(t, err)
	assert.Equal(t, "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", rel.Inputs["chart"].StringValue())
	assert.Equal(t, "0.4.0", rel.Inputs["version"].StringValue())
	assert.Equal(t, "dra-driver-nvidia-gpu", rel.Inputs["namespace"].StringValue())
	ns, err := rec.Get(namespaceType, "dra-namespace")
	require.NoError(t, err)
	assert.Equal(t, "dra-driver-nvidia-gpu", ns.Inputs["metadata"].ObjectValue()["name"].StringValue())
	assert.Contains(t, dependsOn(t, rec, chartType, "dra"), "dra-namespace")
}

func TestDriverChildrenAreParented(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.GKE, GPUPools: []cluster.GPUPool{a100Pool}})
	for _, reg := range rec.All() {
		if reg.Type == "gpu-tenancy:dra:Driver" {
			continue
		}
		assert.Equalf(t, "dra", reg.ParentName(), "%s %s is not a child of the driver", reg.Type, reg.Name)
	}
}

func TestGKEPrerequisitesPrecedeRelease(t *testing.T) {
	threeNodes := a100Pool
	threeNodes.MaxNodes = 3
	rec := run(t, &DriverArgs{Flavour: cluster.GKE, GPUPools: []cluster.GPUPool{threeNodes}})

	installer, err := rec.Get(configType, "dra-nvidia-driver-installer")
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^https://raw\.githubusercontent\.com/GoogleCloudPlatform/container-engine-accelerators/[0-9a-f]{40}/nvidia-driver-installer/cos/daemonset-preloaded\.yaml$`),
		installer.Inputs["file"].StringValue())

	quota, err := rec.Get(quotaType, "dra-critical-pods")
	require.NoError(t, err)
	assert.Equal(t, "dra-driver-nvidia-gpu", quota.Inputs["metadata"].ObjectValue()["namespace"].StringValue())
	spec := quota.Inputs["spec"].Mappable().(map[string]any)
	assert.Equal(t, map[string]any{"pods": "7"}, spec["hard"], "2 x 3 GPU nodes + 1")
	assert.Equal(t, []any{map[string]any{"scopeName": "PriorityClass", "operator": "In",
		"values": []any{"system-node-critical", "system-cluster-critical"}}}, at(t, spec, "scopeSelector", "matchExpressions"))

	assert.Subset(t, dependsOn(t, rec, chartType, "dra"), []string{"dra-nvidia-driver-installer", "dra-critical-pods"})
	assert.Empty(t, rec.ByType(patchType))
}

func TestGKEQuotaCountsAtLeastOneNodePerPool(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.GKE, GPUPools: []cluster.GPUPool{a100Pool, reservedPool}})
	quota, err := rec.Get(quotaType, "dra-critical-pods")
	require.NoError(t, err)
	assert.Equal(t, "5", quota.Inputs["spec"].ObjectValue()["hard"].ObjectValue()["pods"].StringValue())
}

func TestScalewayConfiguresTheGPUOperatorFirst(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.Scaleway})
	patch, err := rec.Get(patchType, "dra-gpu-operator-device-plugin-off")
	require.NoError(t, err)
	meta := patch.Inputs["metadata"].ObjectValue()
	assert.Equal(t, "cluster-policy", meta["name"].StringValue())
	assert.Equal(t, "true", meta["annotations"].ObjectValue()["pulumi.com/patchForce"].StringValue())
	spec := patch.Inputs["spec"].Mappable().(map[string]any)
	assert.Equal(t, false, at(t, spec, "devicePlugin", "enabled"))
	assert.Equal(t, true, at(t, spec, "cdi", "enabled"), "the device plugin and validator get GPUs through CDI, not the variable")
	assert.Equal(t, []any{
		map[string]any{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
		map[string]any{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "false"},
		map[string]any{"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "false"},
	}, at(t, spec, "toolkit", "env"), "image variables are ignored for unprivileged containers, and the NVIDIA runtime is never the default")
	assert.NotContains(t, spec, "daemonsets", "the operator's own tolerations are left alone while no pool is dedicated")
	assert.Contains(t, dependsOn(t, rec, chartType, "dra"), "dra-gpu-operator-device-plugin-off")
	assert.Empty(t, rec.ByType(quotaType))
	assert.Empty(t, rec.ByType(configType))
}

func TestScalewayGPUOperatorRunsOnDedicatedPools(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.Scaleway, GPUPools: []cluster.GPUPool{a100Pool, tenantPool}})
	patch, err := rec.Get(patchType, "dra-gpu-operator-device-plugin-off")
	require.NoError(t, err)
	spec := patch.Inputs["spec"].Mappable().(map[string]any)
	assert.Equal(t, []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, everyTenantsPool},
		at(t, spec, "daemonsets", "tolerations"), "the operator's default toleration, kept, and every dedicated pool's")
}

func TestExistingClusterHasNoCloudPrerequisites(t *testing.T) {
	rec := run(t, &DriverArgs{Flavour: cluster.Existing})
	assert.Empty(t, rec.ByType(quotaType))
	assert.Empty(t, rec.ByType(configType))
	assert.Empty(t, rec.ByType(patchType))
	assert.Len(t, rec.ByType(chartType), 1)
}

func TestNewDriverRejectsInvalidArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args *DriverArgs
		want string
	}{
		{"nil args", nil, "args are required"},
		{"unknown flavour", &DriverArgs{Flavour: "aks"}, `flavour: Unsupported value: "aks"`},
		{"namespace not a DNS label", &DriverArgs{Flavour: cluster.Existing, Namespace: "DRA"}, `draDriver.namespace: Invalid value: "DRA"`},
		{"default namespace", &DriverArgs{Flavour: cluster.Existing, Namespace: "default"}, "refused by the driver chart"},
		{"gke without pools", &DriverArgs{Flavour: cluster.GKE}, "critical-pod quota"},
		{"chart given twice", &DriverArgs{Flavour: cluster.Existing, Chart: helmchart.Chart{Path: "./c", Name: "c"}}, "not both"},
		{"gke-cased taint effect", &DriverArgs{Flavour: cluster.Existing, GPUPools: []cluster.GPUPool{{Name: "a100",
			Taint: cluster.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}}}}, `"NO_SCHEDULE"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &mocktest.Recorder{}
			err := mocktest.Run("test", func(ctx *pulumi.Context) error {
				_, err := NewDriver(ctx, "dra", tc.args)
				return err
			}, rec)
			require.ErrorContains(t, err, tc.want)
			assert.Empty(t, rec.All(), "nothing is registered for invalid args")
		})
	}
}
