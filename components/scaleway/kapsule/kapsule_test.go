package kapsule

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

const (
	clusterType  = "scaleway:kubernetes/cluster:Cluster"
	poolType     = "scaleway:kubernetes/pool:Pool"
	networkType  = "scaleway:network/privateNetwork:PrivateNetwork"
	providerType = "pulumi:providers:kubernetes"
	configFile   = "apiVersion: v1\nkind: Config\n# kapsule admin token\n"
)

func testArgs() *scaleway.ClusterArgs {
	return &scaleway.ClusterArgs{
		Zone: "fr-par-2", KubernetesVersion: "1.35", CNI: "cilium",
		DeleteAdditionalResources: true,
		AutoUpgrade:               scaleway.AutoUpgradeArgs{Enabled: pulumi.BoolRef(true), MaintenanceWindowDay: "sunday", MaintenanceWindowStartHour: pulumi.IntRef(3)},
		Autoscaler:                scaleway.AutoscalerArgs{ScaleDownUnneededTime: "15m", Expander: "least_waste", IgnoreDaemonsetsUtilization: true},
		SystemPool:                scaleway.SystemPoolArgs{NodeType: "PRO2-S", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(1), MaxNodes: pulumi.IntRef(3)}},
		GPUPools: []scaleway.GPUPoolSpec{
			{PoolSpec: cluster.PoolSpec{Name: "l4", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(0), MaxNodes: pulumi.IntRef(3)}}, NodeType: "L4-1-24G"},
			{PoolSpec: cluster.PoolSpec{Name: "h100-mig", Partition: "1g.10gb", Tenant: "legal-ai", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(1), MaxNodes: pulumi.IntRef(2)}}, NodeType: "H100-1-80G"},
		},
	}
}

// recorder records the resources under mocks, the cluster handing out a kubeconfig as Kapsule does.
func recorder() *mocktest.Recorder {
	return &mocktest.Recorder{
		Outputs: map[string]func(resource.PropertyMap) resource.PropertyMap{
			clusterType: func(resource.PropertyMap) resource.PropertyMap {
				return resource.PropertyMap{"kubeconfigs": resource.NewArrayProperty([]resource.PropertyValue{
					resource.NewObjectProperty(resource.PropertyMap{"configFile": resource.NewStringProperty(configFile)}),
				})}
			},
		},
	}
}

// run builds the cluster under mocks; inspect, when given, runs inside the program with the component.
func run(t *testing.T, args *scaleway.ClusterArgs, inspect func(ctx *pulumi.Context, c *Cluster)) *mocktest.Recorder {
	t.Helper()
	rec := recorder()
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		c, err := NewCluster(ctx, "scw", args)
		if err != nil {
			return err
		}
		if inspect != nil {
			inspect(ctx, c)
		}
		return nil
	}, pulumi.WithMocks("gpu-tenancy", "test", rec))
	require.NoError(t, err)
	return rec
}

func TestKapsule(t *testing.T) {
	args := testArgs()
	rec := run(t, args, nil)
	reg, err := rec.Get(clusterType, "scw")
	require.NoError(t, err)
	in := reg.Inputs
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"on its private network", func(t *testing.T) {
			pn, err := rec.Get(networkType, "scw")
			require.NoError(t, err)
			assert.Equal(t, "fr-par", pn.Inputs["region"].StringValue())
			assert.Equal(t, pn.Name+"-id", in["privateNetworkId"].StringValue())
		}},
		{"CNI", func(t *testing.T) { assert.Equal(t, args.CNI, in["cni"].StringValue()) }},
		{"version", func(t *testing.T) { assert.Equal(t, args.KubernetesVersion, in["version"].StringValue()) }},
		{"region of the zone", func(t *testing.T) { assert.Equal(t, "fr-par", in["region"].StringValue()) }},
		{"delete additional resources", func(t *testing.T) {
			assert.Equal(t, args.DeleteAdditionalResources, in["deleteAdditionalResources"].BoolValue())
		}},
		{"auto-upgrade window", func(t *testing.T) {
			assert.Equal(t, map[string]any{
				"enable": true, "maintenanceWindowDay": "sunday", "maintenanceWindowStartHour": float64(3),
			}, in["autoUpgrade"].Mappable())
		}},
		{"tagged with the stack", func(t *testing.T) {
			assert.Equal(t, []any{naming.CostStackKey + "=gpu-tenancy_test"}, in["tags"].Mappable())
		}},
		{"autoscaler knobs set, unset ones left to Scaleway", func(t *testing.T) {
			assert.Equal(t, map[string]any{
				"disableScaleDown": false, "scaleDownUnneededTime": "15m", "expander": "least_waste",
				"ignoreDaemonsetsUtilization": true,
			}, in["autoscalerConfig"].Mappable())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestAutoUpgradeDisabledIsSent(t *testing.T) {
	args := testArgs()
	args.AutoUpgrade = scaleway.AutoUpgradeArgs{Enabled: pulumi.BoolRef(false)}
	reg, err := run(t, args, nil).Get(clusterType, "scw")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"enable": false, "maintenanceWindowDay": "any", "maintenanceWindowStartHour": float64(0),
	}, reg.Inputs["autoUpgrade"].Mappable())
}

func TestGPUPools(t *testing.T) {
	args := testArgs()
	rec := run(t, args, nil)
	for _, p := range args.GPUPools {
		reg, err := rec.Get(poolType, "scw-"+p.Name)
		require.NoError(t, err)
		in := reg.Inputs
		tests := []struct {
			name  string
			check func(t *testing.T)
		}{
			{"pool is named after the config", func(t *testing.T) { assert.Equal(t, p.Name, in["name"].StringValue()) }},
			{"node type", func(t *testing.T) { assert.Equal(t, p.NodeType, in["nodeType"].StringValue()) }},
			{"zone", func(t *testing.T) { assert.Equal(t, args.Zone, in["zone"].StringValue()) }},
			{"in the cluster", func(t *testing.T) { assert.Equal(t, "scw-id", in["clusterId"].StringValue()) }},
			{"autoscaling bounds, starting at the minimum", func(t *testing.T) {
				assert.True(t, in["autoscaling"].BoolValue())
				assert.Equal(t, float64(p.Min()), in["minSize"].NumberValue())
				assert.Equal(t, float64(p.Max()), in["maxSize"].NumberValue())
				assert.Equal(t, float64(p.Min()), in["size"].NumberValue())
			}},
			{"autohealing", func(t *testing.T) { assert.True(t, in["autohealing"].BoolValue()) }},
			{"waits until ready", func(t *testing.T) { assert.True(t, in["waitForPoolReady"].BoolValue()) }},
			{"labels", func(t *testing.T) {
				want := map[string]any{
					cluster.PoolLabel: p.Name, cluster.GPUPresentLabel: "true",
				}
				if p.Partition != "" {
					want[scaleway.MIGConfigLabel] = "all-" + p.Partition
				}
				if p.Tenant != "" {
					want[naming.DedicatedNodeKey] = p.Tenant
				}
				assert.Equal(t, want, in["labels"].Mappable())
			}},
			{"tagged with the stack, the pool and the GPU model", func(t *testing.T) {
				model := map[string]string{"l4": "l4", "h100-mig": "h100-pcie-80gb"}[p.Name]
				assert.Equal(t, []any{naming.CostGPUModelKey + "=" + model, naming.CostPoolKey + "=" + p.Name, naming.CostStackKey + "=gpu-tenancy_test"},
					in["tags"].Mappable())
			}},
			{"taints in Kubernetes casing: the GPU taint, and a dedicated pool's tenant", func(t *testing.T) {
				want := []any{map[string]any{"key": cluster.GPUTaint.Key, "value": cluster.GPUTaint.Value, "effect": "NoSchedule"}}
				if p.Tenant != "" {
					want = append(want, map[string]any{"key": naming.DedicatedNodeKey, "value": p.Tenant, "effect": "NoSchedule"})
				}
				assert.Equal(t, want, in["taints"].Mappable())
			}},
			{"replaced by deleting first, size left to the autoscaler", func(t *testing.T) {
				assert.True(t, reg.Request.GetDeleteBeforeReplace())
				assert.Contains(t, reg.Request.GetIgnoreChanges(), "size")
				assert.Equal(t, []string{"taints"}, reg.Request.GetReplaceOnChanges(), "a change of tenant gets new nodes")
			}},
		}
		for _, tc := range tests {
			t.Run(p.Name+"/"+tc.name, tc.check)
		}
	}
}

func TestSystemPool(t *testing.T) {
	args := testArgs()
	rec := run(t, args, nil)
	reg, err := rec.Get(poolType, "scw-system")
	require.NoError(t, err)
	in := reg.Inputs
	assert.Equal(t, args.SystemPool.NodeType, in["nodeType"].StringValue())
	assert.Equal(t, float64(*args.SystemPool.MinNodes), in["minSize"].NumberValue())
	assert.Equal(t, float64(*args.SystemPool.MaxNodes), in["maxSize"].NumberValue())
	assert.Equal(t, args.Zone, in["zone"].StringValue())
	assert.NotContains(t, in, resource.PropertyKey("taints"))
	assert.Equal(t, []any{naming.CostPoolKey + "=" + naming.CostSystemPool, naming.CostStackKey + "=gpu-tenancy_test"}, in["tags"].Mappable(),
		"stack and pool tags, no GPU model")
	// Autonamed and created before its old self goes: without a pool a Kapsule cluster has no API.
	assert.NotContains(t, in, resource.PropertyKey("name"))
	assert.False(t, reg.Request.GetDeleteBeforeReplace())
}

func TestTenantPoolMakesTheSystemPoolThePlatforms(t *testing.T) {
	args := testArgs()
	args.TenantPool = &scaleway.SystemPoolArgs{NodeType: "PRO2-M", NodeBounds: cluster.NodeBounds{MaxNodes: pulumi.IntRef(4)}}
	var contract *cluster.Cluster
	rec := run(t, args, func(_ *pulumi.Context, c *Cluster) { contract = c.Contract() })
	system, err := rec.Get(poolType, "scw-system")
	require.NoError(t, err)
	tenants, err := rec.Get(poolType, "scw-tenants")
	require.NoError(t, err)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the system pool is tainted for the platform alone, in Kubernetes casing", func(t *testing.T) {
			assert.Equal(t, []any{map[string]any{"key": naming.PlatformPoolKey, "value": "true", "effect": "NoSchedule"}},
				system.Inputs["taints"].Mappable())
		}},
		{"the system pool is labelled, so the platform's pods can select it", func(t *testing.T) {
			assert.Equal(t, map[string]any{naming.PlatformPoolKey: "true"}, system.Inputs["labels"].Mappable())
		}},
		{"the system pool gets new nodes when its taints change", func(t *testing.T) {
			assert.Contains(t, system.Request.GetReplaceOnChanges(), "taints")
		}},
		{"the tenant pool has neither taint nor label", func(t *testing.T) {
			assert.NotContains(t, tenants.Inputs, resource.PropertyKey("taints"))
			assert.NotContains(t, tenants.Inputs, resource.PropertyKey("labels"))
		}},
		{"the tenant pool takes its own size, with the defaults for what is unset", func(t *testing.T) {
			assert.Equal(t, "PRO2-M", tenants.Inputs["nodeType"].StringValue())
			assert.Equal(t, float64(1), tenants.Inputs["minSize"].NumberValue())
			assert.Equal(t, float64(4), tenants.Inputs["maxSize"].NumberValue())
		}},
		{"the tenant pool's costs are its own", func(t *testing.T) {
			assert.Contains(t, tenants.Inputs["tags"].Mappable(), naming.CostPoolKey+"="+naming.CostTenantPool)
		}},
		{"the contract says the cluster has a platform pool", func(t *testing.T) {
			assert.True(t, contract.PlatformPool)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestProvider(t *testing.T) {
	rec := run(t, testArgs(), nil)
	reg, err := rec.Get(providerType, "scw")
	require.NoError(t, err)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"kubeconfig is the cluster's, as a secret", func(t *testing.T) {
			require.True(t, reg.Inputs["kubeconfig"].IsSecret())
			assert.Equal(t, configFile, reg.Inputs["kubeconfig"].SecretValue().Element.StringValue())
		}},
		{"waits for every pool", func(t *testing.T) {
			want, err := rec.URNs(poolType, "scw-system", "scw-l4", "scw-h100-mig")
			require.NoError(t, err)
			assert.Subset(t, reg.Dependencies, want)
		}},
		{"replaced only with the cluster", func(t *testing.T) {
			assert.Equal(t, "scw-id", reg.Inputs["clusterIdentifier"].StringValue())
		}},
		{"parented to the component", func(t *testing.T) { assert.Equal(t, "scw", reg.ParentName()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestChildrenParentedToComponent(t *testing.T) {
	rec := run(t, testArgs(), nil)
	assert.Empty(t, rec.Strays("scw"))
	assert.Len(t, rec.ByType("gpu-tenancy:scaleway:Cluster"), 1)
}

func TestContract(t *testing.T) {
	args := testArgs()
	var got *cluster.Cluster
	var kubeconfig internals.UnsafeAwaitOutputResult
	run(t, args, func(ctx *pulumi.Context, c *Cluster) {
		got = c.Contract()
		var err error
		kubeconfig, err = internals.UnsafeAwaitOutput(ctx.Context(), got.Kubeconfig)
		require.NoError(t, err)
		assert.Same(t, c.Kapsule, got.Anchor)
		assert.Same(t, c.Provider, got.Provider)
	})
	assert.Equal(t, cluster.Scaleway, got.Flavour)
	assert.Equal(t, scaleway.DriverRoot, got.DriverRoot, "where the GPU Operator's driver container exposes the driver")
	assert.True(t, kubeconfig.Secret, "contract kubeconfig must be secret")
	assert.Equal(t, configFile, kubeconfig.Value)
	require.Len(t, got.GPUPools, len(args.GPUPools))
	models := []cluster.GPUModel{cluster.L4, cluster.H100PCIe}
	for i, p := range args.GPUPools {
		pool := got.GPUPools[i]
		assert.Equal(t, p.Name, pool.Name)
		assert.Equal(t, models[i], pool.Model)
		assert.Equal(t, 1, pool.GPUsPerNode)
		assert.Equal(t, p.Partition, pool.MIGProfile)
		assert.Equal(t, p.Max(), pool.MaxNodes)
		assert.Equal(t, p.Name, pool.Labels[cluster.PoolLabel])
		assert.Equal(t, cluster.GPUTaint, pool.Taint)
		assert.Equal(t, p.Tenant, pool.Tenant, "the tenant a pool is dedicated to")
	}
}

func TestRejectsImpossibleArgs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(a *scaleway.ClusterArgs) *scaleway.ClusterArgs
	}{
		{"nil args", func(*scaleway.ClusterArgs) *scaleway.ClusterArgs { return nil }},
		{"no zone", func(a *scaleway.ClusterArgs) *scaleway.ClusterArgs { a.Zone = ""; return a }},
		{"a zone without the pool's node type", func(a *scaleway.ClusterArgs) *scaleway.ClusterArgs { a.Zone = "nl-ams-1"; return a }},
		{"no CNI", func(a *scaleway.ClusterArgs) *scaleway.ClusterArgs { a.CNI = ""; return a }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.mutate(testArgs())
			err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				_, err := NewCluster(ctx, "scw", args)
				return err
			}, pulumi.WithMocks("gpu-tenancy", "test", &mocktest.Recorder{}))
			assert.ErrorContains(t, err, `Kapsule cluster "scw"`)
		})
	}
}

func TestRegistersTheScalewayBuilder(t *testing.T) {
	build, ok := cluster.BuilderOf(cluster.Scaleway)
	require.True(t, ok, "importing kapsule makes the scaleway flavour buildable")
	for _, tc := range []struct {
		name    string
		args    any
		wantErr string
	}{
		{"its own args build the Scaleway contract", testArgs(), ""},
		{"another flavour's args are refused", &cluster.ExistingArgs{}, `scaleway cluster "scw": args are *cluster.ExistingArgs, not *scaleway.ClusterArgs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *cluster.Cluster
			err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				var err error
				got, err = build(ctx, "scw", tc.args)
				return err
			}, pulumi.WithMocks("gpu-tenancy", "test", recorder()))
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, cluster.Scaleway, got.Flavour)
		})
	}
}
