package gkecluster

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

const (
	clusterType  = "gcp:container/cluster:Cluster"
	nodePoolType = "gcp:container/nodePool:NodePool"
	providerType = "pulumi:providers:kubernetes"
	endpoint     = "203.0.113.10"
	caData       = "Q0EtREFUQQ=="
)

func testArgs() *gke.ClusterArgs {
	return &gke.ClusterArgs{
		Project: "acme-gpu", Zone: "us-central1-a",
		KubernetesVersion: "1.35", ReleaseChannel: "RAPID", DeletionProtection: pulumi.BoolRef(true),
		SystemPool: gke.SystemPoolArgs{MachineType: "e2-standard-4", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(1), MaxNodes: pulumi.IntRef(3)}},
		GPUPools: []gke.GPUPoolSpec{
			{PoolSpec: cluster.PoolSpec{Name: "a100", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(0), MaxNodes: pulumi.IntRef(2)}},
				MachineType: "a2-highgpu-1g", Accelerator: "nvidia-tesla-a100", GPUCount: 1},
			{PoolSpec: cluster.PoolSpec{Name: "a100-mig", Partition: "1g.5gb", Tenant: "legal-ai", NodeBounds: cluster.NodeBounds{MinNodes: pulumi.IntRef(1), MaxNodes: pulumi.IntRef(4)}},
				MachineType: "a2-highgpu-2g", Accelerator: "nvidia-tesla-a100"},
		},
	}
}

// gpusPerNode are the GPUs the machine types of testArgs' pools carry: a2-highgpu-1g one, a2-highgpu-2g two.
var gpusPerNode = map[string]int{"a100": 1, "a100-mig": 2}

// recorder records the resources under mocks, the control plane answering with its name, endpoint and CA.
func recorder() *mocktest.Recorder {
	return &mocktest.Recorder{
		Outputs: map[string]func(resource.PropertyMap) resource.PropertyMap{
			clusterType: func(resource.PropertyMap) resource.PropertyMap {
				return resource.PropertyMap{
					"name":     resource.NewStringProperty("gke-1234"),
					"endpoint": resource.NewStringProperty(endpoint),
					"masterAuth": resource.NewObjectProperty(resource.PropertyMap{
						"clusterCaCertificate": resource.NewStringProperty(caData),
					}),
				}
			},
		},
	}
}

// run builds the cluster under mocks; inspect, when given, runs inside the program with the component.
func run(t *testing.T, args *gke.ClusterArgs, inspect func(ctx *pulumi.Context, c *Cluster)) *mocktest.Recorder {
	t.Helper()
	rec := recorder()
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		c, err := NewCluster(ctx, "gke", args)
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

// at walks nested objects by key.
func at(m resource.PropertyMap, keys ...resource.PropertyKey) resource.PropertyValue {
	v := resource.NewObjectProperty(m)
	for _, k := range keys {
		v = v.ObjectValue()[k]
	}
	return v
}

func guestAccelerator(in resource.PropertyMap) resource.PropertyMap {
	return at(in, "nodeConfig", "guestAccelerators").ArrayValue()[0].ObjectValue()
}

func TestGPUPools(t *testing.T) {
	args := testArgs()
	rec := run(t, args, nil)
	for _, p := range args.GPUPools {
		reg, err := rec.Get(nodePoolType, "gke-"+p.Name)
		require.NoError(t, err)
		in := reg.Inputs
		tests := []struct {
			name  string
			check func(t *testing.T)
		}{
			{"pool is named after the config", func(t *testing.T) {
				assert.Equal(t, p.Name, in["name"].StringValue())
			}},
			{"machine type", func(t *testing.T) {
				assert.Equal(t, p.MachineType, at(in, "nodeConfig", "machineType").StringValue())
			}},
			{"accelerator type and count", func(t *testing.T) {
				assert.Equal(t, p.Accelerator, guestAccelerator(in)["type"].StringValue())
				assert.Equal(t, float64(gpusPerNode[p.Name]), guestAccelerator(in)["count"].NumberValue(),
					"the count the machine type carries")
			}},
			{"partition size only on the MIG pool", func(t *testing.T) {
				size, ok := guestAccelerator(in)["gpuPartitionSize"]
				if p.Partition == "" {
					assert.False(t, ok && !size.IsNull(), "whole-GPU pool has partition size %v", size)
					return
				}
				assert.Equal(t, p.Partition, size.StringValue())
			}},
			{"GKE driver installation disabled", func(t *testing.T) {
				cfg := guestAccelerator(in)["gpuDriverInstallationConfig"].ObjectValue()
				assert.Equal(t, "INSTALLATION_DISABLED", cfg["gpuDriverVersion"].StringValue())
			}},
			{"labels hand the GPUs to the DRA driver, and name the tenant of a dedicated pool", func(t *testing.T) {
				want := map[string]any{
					cluster.PoolLabel:              p.Name,
					cluster.GPUPresentLabel:        "true",
					gke.NoDefaultDevicePluginLabel: "true",
					gke.DRADriverLabel:             "true",
				}
				if p.Tenant != "" {
					want[naming.DedicatedNodeKey] = p.Tenant
				}
				assert.Equal(t, want, at(in, "nodeConfig", "labels").Mappable())
			}},
			{"taints in GKE casing: the GPU taint, and a dedicated pool's tenant", func(t *testing.T) {
				want := []any{map[string]any{"key": cluster.GPUTaint.Key, "value": cluster.GPUTaint.Value, "effect": "NO_SCHEDULE"}}
				if p.Tenant != "" {
					want = append(want, map[string]any{"key": naming.DedicatedNodeKey, "value": p.Tenant, "effect": "NO_SCHEDULE"})
				}
				assert.Equal(t, want, at(in, "nodeConfig", "taints").Mappable())
			}},
			{"autoscaling bounds", func(t *testing.T) {
				assert.Equal(t, float64(p.Min()), at(in, "autoscaling", "minNodeCount").NumberValue())
				assert.Equal(t, float64(p.Max()), at(in, "autoscaling", "maxNodeCount").NumberValue())
			}},
			{"nodes only in the cluster's zone", func(t *testing.T) {
				assert.Equal(t, []any{args.Zone}, in["nodeLocations"].Mappable())
				assert.Equal(t, args.Zone, in["location"].StringValue())
			}},
			{"auto repair and upgrade", func(t *testing.T) {
				assert.Equal(t, map[string]any{"autoRepair": true, "autoUpgrade": true}, in["management"].Mappable())
			}},
			{"COS image, where the DRA driver root points", func(t *testing.T) {
				assert.Equal(t, "COS_CONTAINERD", at(in, "nodeConfig", "imageType").StringValue())
			}},
			{"no kubelet read-only port", func(t *testing.T) {
				assert.Equal(t, "FALSE", at(in, "nodeConfig", "kubeletConfig", "insecureKubeletReadonlyPortEnabled").StringValue())
			}},
			{"attached to the cluster", func(t *testing.T) {
				assert.Equal(t, "gke-1234", in["cluster"].StringValue())
				assert.Equal(t, args.Project, in["project"].StringValue())
			}},
			{"resource labels name the stack, the pool and the GPU model", func(t *testing.T) {
				assert.Equal(t, map[string]any{
					naming.CostStackKey: "gpu-tenancy_test", naming.CostPoolKey: p.Name, naming.CostGPUModelKey: "a100-40gb",
				}, at(in, "nodeConfig", "resourceLabels").Mappable())
			}},
			{"replaced by deleting first", func(t *testing.T) {
				assert.True(t, reg.Request.GetDeleteBeforeReplace())
				assert.Subset(t, reg.Request.GetIgnoreChanges(), []string{"initialNodeCount", "nodeCount"})
				assert.Equal(t, []string{"nodeConfig.taints"}, reg.Request.GetReplaceOnChanges(), "a change of tenant gets new nodes")
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
	reg, err := rec.Get(nodePoolType, "gke-system")
	require.NoError(t, err)
	in := reg.Inputs
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"machine type", func(t *testing.T) {
			assert.Equal(t, args.SystemPool.MachineType, at(in, "nodeConfig", "machineType").StringValue())
		}},
		{"no kubelet read-only port, where the vCluster control planes run", func(t *testing.T) {
			assert.Equal(t, "FALSE", at(in, "nodeConfig", "kubeletConfig", "insecureKubeletReadonlyPortEnabled").StringValue())
		}},
		{"autoscaling bounds", func(t *testing.T) {
			assert.Equal(t, float64(*args.SystemPool.MinNodes), at(in, "autoscaling", "minNodeCount").NumberValue())
			assert.Equal(t, float64(*args.SystemPool.MaxNodes), at(in, "autoscaling", "maxNodeCount").NumberValue())
		}},
		{"no accelerators, labels or taints", func(t *testing.T) {
			for _, k := range []resource.PropertyKey{"guestAccelerators", "labels", "taints"} {
				v, ok := at(in, "nodeConfig").ObjectValue()[k]
				assert.False(t, ok && !v.IsNull(), "system pool has %s %v", k, v)
			}
		}},
		{"resource labels name the stack and the system pool, no GPU model", func(t *testing.T) {
			assert.Equal(t, map[string]any{naming.CostStackKey: "gpu-tenancy_test", naming.CostPoolKey: naming.CostSystemPool},
				at(in, "nodeConfig", "resourceLabels").Mappable())
		}},
		{"autonamed so a replacement comes up first", func(t *testing.T) {
			_, named := in["name"]
			assert.False(t, named)
			assert.False(t, reg.Request.GetDeleteBeforeReplace())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestTenantPoolMakesTheSystemPoolThePlatforms(t *testing.T) {
	args := testArgs()
	args.TenantPool = &gke.SystemPoolArgs{MachineType: "e2-standard-8", NodeBounds: cluster.NodeBounds{MaxNodes: pulumi.IntRef(5)}}
	var contract *cluster.Cluster
	rec := run(t, args, func(_ *pulumi.Context, c *Cluster) { contract = c.Contract() })
	system, err := rec.Get(nodePoolType, "gke-system")
	require.NoError(t, err)
	tenants, err := rec.Get(nodePoolType, "gke-tenants")
	require.NoError(t, err)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the system pool is tainted for the platform alone, in GKE's spelling", func(t *testing.T) {
			assert.Equal(t, []any{map[string]any{"key": naming.PlatformPoolKey, "value": "true", "effect": "NO_SCHEDULE"}},
				at(system.Inputs, "nodeConfig", "taints").Mappable())
		}},
		{"the system pool is labelled, so the platform's pods can select it", func(t *testing.T) {
			assert.Equal(t, map[string]any{naming.PlatformPoolKey: "true"}, at(system.Inputs, "nodeConfig", "labels").Mappable())
		}},
		{"the system pool gets new nodes when its taints change", func(t *testing.T) {
			assert.Contains(t, system.Request.GetReplaceOnChanges(), "nodeConfig.taints")
		}},
		{"the tenant pool has neither taint nor label", func(t *testing.T) {
			for _, k := range []resource.PropertyKey{"guestAccelerators", "labels", "taints"} {
				v, ok := at(tenants.Inputs, "nodeConfig").ObjectValue()[k]
				assert.False(t, ok && !v.IsNull(), "tenant pool has %s %v", k, v)
			}
		}},
		{"the tenant pool takes its own size, with the defaults for what is unset", func(t *testing.T) {
			assert.Equal(t, "e2-standard-8", at(tenants.Inputs, "nodeConfig", "machineType").StringValue())
			assert.Equal(t, float64(1), at(tenants.Inputs, "autoscaling", "minNodeCount").NumberValue())
			assert.Equal(t, float64(5), at(tenants.Inputs, "autoscaling", "maxNodeCount").NumberValue())
		}},
		{"the tenant pool has the node settings of every pool", func(t *testing.T) {
			assert.Equal(t, "FALSE", at(tenants.Inputs, "nodeConfig", "kubeletConfig", "insecureKubeletReadonlyPortEnabled").StringValue())
			assert.Equal(t, "GKE_METADATA", at(tenants.Inputs, "nodeConfig", "workloadMetadataConfig", "mode").StringValue())
		}},
		{"the tenant pool's costs are its own", func(t *testing.T) {
			assert.Equal(t, naming.CostTenantPool, at(tenants.Inputs, "nodeConfig", "resourceLabels", naming.CostPoolKey).StringValue())
		}},
		{"the contract says the cluster has a platform pool", func(t *testing.T) {
			assert.True(t, contract.PlatformPool)
			assert.Equal(t, cluster.Placement{NodeSelector: map[string]string{naming.PlatformPoolKey: "true"},
				Tolerations: []cluster.Taint{cluster.PlatformPoolTaint}}, contract.PlatformPlacement())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestNoTenantPoolLeavesOnePoolForAll(t *testing.T) {
	var contract *cluster.Cluster
	rec := run(t, testArgs(), func(_ *pulumi.Context, c *Cluster) { contract = c.Contract() })
	_, err := rec.Get(nodePoolType, "gke-tenants")
	assert.Error(t, err, "no tenant pool without gke.tenantPool")
	assert.False(t, contract.PlatformPool)
	assert.Equal(t, cluster.Placement{}, contract.PlatformPlacement(), "the platform's pods go anywhere")
}

func TestControlPlane(t *testing.T) {
	args := testArgs()
	reg, err := run(t, args, nil).Get(clusterType, "gke")
	require.NoError(t, err)
	in := reg.Inputs
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"zonal", func(t *testing.T) { assert.Equal(t, args.Zone, in["location"].StringValue()) }},
		{"project", func(t *testing.T) { assert.Equal(t, args.Project, in["project"].StringValue()) }},
		{"release channel", func(t *testing.T) {
			assert.Equal(t, args.ReleaseChannel, at(in, "releaseChannel", "channel").StringValue())
		}},
		{"version", func(t *testing.T) {
			assert.Equal(t, args.KubernetesVersion, in["minMasterVersion"].StringValue())
		}},
		{"workload identity pool of the project", func(t *testing.T) {
			assert.Equal(t, args.Project+".svc.id.goog", at(in, "workloadIdentityConfig", "workloadPool").StringValue())
		}},
		{"managed Prometheus collection for the alerts' scrapes", func(t *testing.T) {
			assert.Equal(t, true, at(in, "monitoringConfig", "managedPrometheus", "enabled").BoolValue())
		}},
		{"network policies enforced by Dataplane V2", func(t *testing.T) {
			assert.Equal(t, "ADVANCED_DATAPATH", in["datapathProvider"].StringValue())
		}},
		{"cost allocation on", func(t *testing.T) {
			assert.Equal(t, map[string]any{"enabled": true}, in["costManagementConfig"].Mappable())
		}},
		{"never the autoscaling profile whose webhook sets every pod's scheduler", func(t *testing.T) {
			assert.Equal(t, map[string]any{"autoscalingProfile": "BALANCED", "enabled": false}, in["clusterAutoscaling"].Mappable())
		}},
		{"no Service externalIPs, which capture other tenants' traffic", func(t *testing.T) {
			assert.Equal(t, map[string]any{"enabled": false}, in["serviceExternalIpsConfig"].Mappable())
		}},
		{"resource labels name the stack", func(t *testing.T) {
			assert.Equal(t, map[string]any{naming.CostStackKey: "gpu-tenancy_test"}, in["resourceLabels"].Mappable())
		}},
		{"default pool removed", func(t *testing.T) {
			assert.True(t, in["removeDefaultNodePool"].BoolValue())
			assert.Equal(t, float64(1), in["initialNodeCount"].NumberValue())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestDeletionProtectionFollowsArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *bool
		want bool
	}{{"on", pulumi.BoolRef(true), true}, {"off", pulumi.BoolRef(false), false}, {"unset protects, as GKE does", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			args := testArgs()
			args.DeletionProtection = tc.set
			reg, err := run(t, args, nil).Get(clusterType, "gke")
			require.NoError(t, err)
			assert.Equal(t, tc.want, reg.Inputs["deletionProtection"].BoolValue())
		})
	}
}

func TestSystemPoolDefaults(t *testing.T) {
	args := testArgs()
	args.SystemPool = gke.SystemPoolArgs{}
	reg, err := run(t, args, nil).Get(nodePoolType, "gke-system")
	require.NoError(t, err)
	assert.Equal(t, "e2-standard-4", at(reg.Inputs, "nodeConfig", "machineType").StringValue())
	assert.Equal(t, float64(1), at(reg.Inputs, "autoscaling", "minNodeCount").NumberValue())
	assert.Equal(t, float64(3), at(reg.Inputs, "autoscaling", "maxNodeCount").NumberValue())
}

func TestReleaseChannelAndVersionLeftToGKEWhenUnset(t *testing.T) {
	args := testArgs()
	args.ReleaseChannel, args.KubernetesVersion = "", ""
	reg, err := run(t, args, nil).Get(clusterType, "gke")
	require.NoError(t, err)
	assert.NotContains(t, reg.Inputs, resource.PropertyKey("releaseChannel"))
	assert.NotContains(t, reg.Inputs, resource.PropertyKey("minMasterVersion"))
}

func TestProvider(t *testing.T) {
	args := testArgs()
	rec := run(t, args, nil)
	reg, err := rec.Get(providerType, "gke")
	require.NoError(t, err)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"kubeconfig is secret", func(t *testing.T) {
			assert.True(t, reg.Inputs["kubeconfig"].IsSecret())
		}},
		{"kubeconfig reaches the endpoint with the cluster CA through the GKE auth plugin", func(t *testing.T) {
			var kc struct {
				CurrentContext string `json:"current-context"`
				Clusters       []struct {
					Cluster struct {
						Server string `json:"server"`
						CA     string `json:"certificate-authority-data"`
					} `json:"cluster"`
				} `json:"clusters"`
				Users []struct {
					User struct {
						Exec map[string]any `json:"exec"`
					} `json:"user"`
				} `json:"users"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(reg.Inputs["kubeconfig"].SecretValue().Element.StringValue()), &kc))
			require.Len(t, kc.Clusters, 1)
			assert.Equal(t, "https://"+endpoint, kc.Clusters[0].Cluster.Server)
			assert.Equal(t, caData, kc.Clusters[0].Cluster.CA)
			assert.Equal(t, "gke_"+args.Project+"_"+args.Zone+"_gke-1234", kc.CurrentContext)
			require.Len(t, kc.Users, 1)
			assert.Equal(t, "gke-gcloud-auth-plugin", kc.Users[0].User.Exec["command"])
			assert.Equal(t, "client.authentication.k8s.io/v1beta1", kc.Users[0].User.Exec["apiVersion"])
			assert.Equal(t, true, kc.Users[0].User.Exec["provideClusterInfo"])
		}},
		{"waits for every pool", func(t *testing.T) {
			want, err := rec.URNs(nodePoolType, "gke-system", "gke-a100", "gke-a100-mig")
			require.NoError(t, err)
			assert.Subset(t, reg.Dependencies, want)
		}},
		{"replaced only with the cluster", func(t *testing.T) {
			assert.Equal(t, "gke-id", reg.Inputs["clusterIdentifier"].StringValue())
		}},
		{"parented to the component", func(t *testing.T) { assert.Equal(t, "gke", reg.ParentName()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestChildrenParentedToComponent(t *testing.T) {
	rec := run(t, testArgs(), nil)
	assert.Empty(t, rec.Strays("gke"))
	assert.Len(t, rec.ByType("gpu-tenancy:gke:Cluster"), 1)
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
		assert.Same(t, c.ControlPlane, got.Anchor)
		assert.Same(t, c.Provider, got.Provider)
	})
	assert.Equal(t, cluster.GKE, got.Flavour)
	assert.Equal(t, gke.DriverRoot, got.DriverRoot, "where the COS driver installer puts the driver")
	assert.True(t, kubeconfig.Secret, "contract kubeconfig must be secret")
	require.Len(t, got.GPUPools, len(args.GPUPools))
	for i, p := range args.GPUPools {
		pool := got.GPUPools[i]
		assert.Equal(t, p.Name, pool.Name)
		assert.Equal(t, cluster.A100x40GB, pool.Model)
		assert.Equal(t, gpusPerNode[p.Name], pool.GPUsPerNode)
		assert.Equal(t, p.Partition, pool.MIGProfile)
		assert.Equal(t, p.Max(), pool.MaxNodes)
		assert.Equal(t, p.Name, pool.Labels[cluster.PoolLabel])
		assert.Equal(t, "true", pool.Labels[gke.NoDefaultDevicePluginLabel])
		// Pods tolerate taints in Kubernetes casing, whatever the GKE API spells.
		assert.Equal(t, cluster.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, pool.Taint)
		assert.Equal(t, p.Tenant, pool.Tenant, "the tenant a pool is dedicated to")
	}
}

func TestRejectsImpossibleArgs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(a *gke.ClusterArgs) *gke.ClusterArgs
	}{
		{"nil args", func(*gke.ClusterArgs) *gke.ClusterArgs { return nil }},
		{"no project", func(a *gke.ClusterArgs) *gke.ClusterArgs { a.Project = ""; return a }},
		{"no zone", func(a *gke.ClusterArgs) *gke.ClusterArgs { a.Zone = ""; return a }},
		{"a zone without the pool's accelerator", func(a *gke.ClusterArgs) *gke.ClusterArgs { a.Zone = "europe-west1-b"; return a }},
		{"an unknown accelerator", func(a *gke.ClusterArgs) *gke.ClusterArgs { a.GPUPools[0].Accelerator = "nvidia-tesla-v100"; return a }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.mutate(testArgs())
			err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				_, err := NewCluster(ctx, "gke", args)
				return err
			}, pulumi.WithMocks("gpu-tenancy", "test", &mocktest.Recorder{}))
			assert.ErrorContains(t, err, `GKE cluster "gke"`)
		})
	}
}

func TestRegistersTheGKEBuilder(t *testing.T) {
	build, ok := cluster.BuilderOf(cluster.GKE)
	require.True(t, ok, "importing gkecluster makes the gke flavour buildable")
	for _, tc := range []struct {
		name    string
		args    any
		wantErr string
	}{
		{"its own args build the GKE contract", testArgs(), ""},
		{"another flavour's args are refused", &cluster.ExistingArgs{}, `gke cluster "gke": args are *cluster.ExistingArgs, not *gke.ClusterArgs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *cluster.Cluster
			err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				var err error
				got, err = build(ctx, "gke", tc.args)
				return err
			}, pulumi.WithMocks("gpu-tenancy", "test", recorder()))
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, cluster.GKE, got.Flavour)
		})
	}
}
