package gke

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
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

func testArgs() *ClusterArgs {
	return &ClusterArgs{
		Project: "acme-gpu", Zone: "us-central1-a",
		KubernetesVersion: "1.35", ReleaseChannel: "RAPID", DeletionProtection: ptr(true),
		SystemPool: SystemPoolArgs{MachineType: "e2-standard-4", NodeBounds: cluster.NodeBounds{MinNodes: ptr(1), MaxNodes: ptr(3)}},
		GPUPools: []GPUPoolSpec{
			{PoolSpec: cluster.PoolSpec{Name: "a100", NodeBounds: cluster.NodeBounds{MinNodes: ptr(0), MaxNodes: ptr(2)}},
				MachineType: "a2-highgpu-1g", Accelerator: "nvidia-tesla-a100", GPUCount: 1},
			{PoolSpec: cluster.PoolSpec{Name: "a100-mig", Partition: "1g.5gb", NodeBounds: cluster.NodeBounds{MinNodes: ptr(1), MaxNodes: ptr(4)}},
				MachineType: "a2-highgpu-2g", Accelerator: "nvidia-tesla-a100"},
		},
	}
}

// run builds the cluster under mocks; inspect, when given, runs inside the program with the component.
func run(t *testing.T, args *ClusterArgs, inspect func(ctx *pulumi.Context, c *Cluster)) *mocktest.Recorder {
	t.Helper()
	rec := &mocktest.Recorder{
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
				assert.Equal(t, float64(gpusOf(p.MachineType)), guestAccelerator(in)["count"].NumberValue(),
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
			{"labels hand the GPUs to the DRA driver", func(t *testing.T) {
				assert.Equal(t, map[string]any{
					cluster.PoolLabel:          p.Name,
					cluster.GPUPresentLabel:    "true",
					NoDefaultDevicePluginLabel: "true",
					DRADriverLabel:             "true",
				}, at(in, "nodeConfig", "labels").Mappable())
			}},
			{"taint in GKE casing", func(t *testing.T) {
				taints := at(in, "nodeConfig", "taints").ArrayValue()
				require.Len(t, taints, 1)
				assert.Equal(t, map[string]any{
					"key": cluster.GPUTaint.Key, "value": cluster.GPUTaint.Value, "effect": "NO_SCHEDULE",
				}, taints[0].Mappable())
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
	}{{"on", ptr(true), true}, {"off", ptr(false), false}, {"unset protects, as GKE does", nil, true}} {
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
	args.SystemPool = SystemPoolArgs{}
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
	assert.Equal(t, DriverRoot, got.DriverRoot, "where the COS driver installer puts the driver")
	assert.True(t, kubeconfig.Secret, "contract kubeconfig must be secret")
	require.Len(t, got.GPUPools, len(args.GPUPools))
	for i, p := range args.GPUPools {
		pool := got.GPUPools[i]
		assert.Equal(t, p.Name, pool.Name)
		assert.Equal(t, cluster.A100x40GB, pool.Model)
		assert.Equal(t, gpusOf(p.MachineType), pool.GPUsPerNode)
		assert.Equal(t, p.Partition, pool.MIGProfile)
		assert.Equal(t, p.Max(), pool.MaxNodes)
		assert.Equal(t, p.Name, pool.Labels[cluster.PoolLabel])
		assert.Equal(t, "true", pool.Labels[NoDefaultDevicePluginLabel])
		// Pods tolerate taints in Kubernetes casing, whatever the GKE API spells.
		assert.Equal(t, cluster.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}, pool.Taint)
	}
}

func TestRejectsImpossibleArgs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(a *ClusterArgs) *ClusterArgs
	}{
		{"nil args", func(*ClusterArgs) *ClusterArgs { return nil }},
		{"no project", func(a *ClusterArgs) *ClusterArgs { a.Project = ""; return a }},
		{"no zone", func(a *ClusterArgs) *ClusterArgs { a.Zone = ""; return a }},
		{"a zone without the pool's accelerator", func(a *ClusterArgs) *ClusterArgs { a.Zone = "europe-west1-b"; return a }},
		{"an unknown accelerator", func(a *ClusterArgs) *ClusterArgs { a.GPUPools[0].Accelerator = "nvidia-tesla-v100"; return a }},
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

func TestCostStackValueIsValidHere(t *testing.T) {
	for _, stack := range []string{"dev", "Prod", "eu.prod.1", "dev-", strings.Repeat("s", 80)} {
		got := naming.CostStackValue("gpu-tenancy", stack)
		assert.Empty(t, validateLabelValue(field.NewPath("stack"), naming.CostStackKey, got), "%q is a valid GCP label value", got)
	}
}

func TestValidateRefusesPoolNamesThatAreNoLabelValues(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
	}{
		{"upper case", "A100"},
		{"a dot", "a100.whole"},
		{"longer than 63 characters", strings.Repeat("a", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := testArgs()
			args.GPUPools[0].Name = tc.pool
			errs := args.Validate(field.NewPath("gpu-tenancy:gke"), field.NewPath("gpu-tenancy:gpuPools"))
			var labelErrs []string
			for _, e := range errs {
				if strings.Contains(e.Detail, "GCP label "+naming.CostPoolKey) {
					labelErrs = append(labelErrs, e.Field)
				}
			}
			assert.Equal(t, []string{"gpu-tenancy:gpuPools[0].name"}, labelErrs, "%v", errs)
		})
	}
}

// Every accelerator's GPU model becomes a label value: a table entry whose key GCP would refuse must fail here, not at
// `up`.
func TestEveryAcceleratorModelIsALabelValue(t *testing.T) {
	for name, acc := range accelerators {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, validateLabelValue(field.NewPath("accelerator"), naming.CostGPUModelKey, acc.model.Key))
		})
	}
}
