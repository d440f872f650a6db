package vcluster

import (
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testLabel = "tenant.gpu-tenancy.io/team-a"

func tenantArgs(edit func(*VirtualClusterArgs)) *VirtualClusterArgs {
	a := &VirtualClusterArgs{
		Tenant:             "team-a",
		Namespace:          pulumi.String("vcluster-team-a"),
		ClassSelectorLabel: testLabel,
	}
	if edit != nil {
		edit(a)
	}
	return a
}

// runVirtualCluster builds one vCluster named "team-a" under mocks.
func runVirtualCluster(t *testing.T, r *mocktest.Recorder, args *VirtualClusterArgs) *VirtualCluster {
	t.Helper()
	var vc *VirtualCluster
	run(t, r, func(ctx *pulumi.Context) error {
		var err error
		vc, err = NewVirtualCluster(ctx, "team-a", args)
		return err
	})
	return vc
}

func tenantValues(t *testing.T, args *VirtualClusterArgs) vclusterValues {
	t.Helper()
	r := newRecorder()
	runVirtualCluster(t, r, args)
	return decode[vclusterValues](t, valuesOf(t, r, "team-a"))
}

func TestVirtualClusterSyncsOnlyGrantedDeviceClasses(t *testing.T) {
	got := tenantValues(t, tenantArgs(nil)).Sync.FromHost.DeviceClasses
	assert.True(t, got.Enabled)
	assert.Equal(t, map[string]string{testLabel: "true"}, got.Selector.MatchLabels)
}

func TestVirtualClusterSyncsClaimsToHost(t *testing.T) {
	got := tenantValues(t, tenantArgs(nil)).Sync.ToHost
	assert.True(t, got.ResourceClaims.Enabled)
	assert.True(t, got.ResourceClaimTemplates.Enabled)
}

func TestVirtualClusterEnforcesGPUTolerations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		taints []cluster.Taint
		want   *podSyncValues
	}{
		{"no taints leave pod sync alone", nil, nil},
		{"a valued taint is tolerated for that value", []cluster.Taint{cluster.GPUTaint},
			&podSyncValues{EnforceTolerations: []string{"nvidia.com/gpu=present:NoSchedule"}}},
		{"a valueless taint is tolerated for any value", []cluster.Taint{cluster.GPUTaint, {Key: "example.com/h100", Effect: "NoExecute"}},
			&podSyncValues{EnforceTolerations: []string{"nvidia.com/gpu=present:NoSchedule", "example.com/h100:NoExecute"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.GPUTolerations = tc.taints }))
			assert.Equal(t, tc.want, got.Sync.ToHost.Pods)
		})
	}
}

func TestVirtualClusterPutsADedicatedTenantOnItsOwnPools(t *testing.T) {
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) {
		a.GPUTolerations = []cluster.Taint{cluster.GPUTaint}
		a.Dedicated = true
	}))
	assert.Equal(t, &podSyncValues{EnforceTolerations: []string{"nvidia.com/gpu=present:NoSchedule",
		naming.DedicatedNodeKey + "=" + tenantArgs(nil).Tenant + ":NoSchedule"}}, got.Sync.ToHost.Pods,
		"its pods tolerate its own pools' taint, with its name as the value")
	assert.Equal(t, &nodeSyncValues{Selector: nodeSelectorValues{Labels: map[string]string{naming.DedicatedNodeKey: tenantArgs(nil).Tenant}}},
		got.Sync.FromHost.Nodes, "and select its own pools' nodes")

	shared := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.GPUTolerations = []cluster.Taint{cluster.GPUTaint} }))
	assert.Nil(t, shared.Sync.FromHost.Nodes, "a tenant without pools of its own selects no nodes")
}

func TestVirtualClusterControlPlaneSizing(t *testing.T) {
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) {
		a.ControlPlane = ControlPlane{CPU: "200m", Memory: "2Gi", StorageSize: "10Gi", StorageClass: "standard-rwo"}
	}))
	require.NotNil(t, got.ControlPlane)
	require.NotNil(t, got.ControlPlane.StatefulSet)
	assert.Equal(t, &resourceValues{Requests: map[string]string{"cpu": "200m", "memory": "2Gi"},
		Limits: map[string]string{"memory": "2Gi"}}, got.ControlPlane.StatefulSet.Resources, "memory is requested and limited alike")
	assert.Equal(t, &persistenceValues{VolumeClaim: volumeClaimValues{Size: "10Gi", StorageClass: "standard-rwo"}},
		got.ControlPlane.StatefulSet.Persistence)
}

func TestVirtualClusterEnforcesTheTenantsPodSecurity(t *testing.T) {
	for _, level := range []string{"baseline", "restricted"} {
		t.Run(level, func(t *testing.T) {
			got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = level }))
			require.NotNil(t, got.Policies)
			assert.Equal(t, level, got.Policies.PodSecurityStandard, "the tenant hears of a refused pod from its own API server")
		})
	}
}

func TestVirtualClusterControlPlanePassesRestricted(t *testing.T) {
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = "restricted" }))
	require.NotNil(t, got.ControlPlane)
	require.NotNil(t, got.ControlPlane.StatefulSet)
	sec := got.ControlPlane.StatefulSet.Security
	require.NotNil(t, sec)
	id := int64(NonRootID)
	// Every container, the init containers included, runs as a non-root user with the runtime's seccomp profile,
	// no privilege escalation and no capabilities.
	assert.Equal(t, &securityContext{RunAsNonRoot: ptr(true), RunAsUser: &id, RunAsGroup: &id, FSGroup: &id,
		SeccompProfile: &seccompProfile{Type: "RuntimeDefault"}}, sec.PodSecurityContext)
	container := &securityContext{RunAsNonRoot: ptr(true), RunAsUser: &id, RunAsGroup: &id,
		AllowPrivilegeEscalation: ptr(false), Capabilities: &capabilities{Drop: []string{"ALL"}}}
	assert.Equal(t, container, sec.ContainerSecurityContext)
	require.NotNil(t, got.ControlPlane.Distro)
	assert.Equal(t, container, got.ControlPlane.Distro.K8s.SecurityContext, "the kubernetes init container too")
}

func TestVirtualClusterKeepsTheChartsSecurityUnderBaseline(t *testing.T) {
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = "baseline" }))
	assert.Nil(t, got.ControlPlane, "the chart's defaults pass baseline")
}

func TestVirtualClusterKeepsChartDefaultsWhenUnset(t *testing.T) {
	got := tenantValues(t, tenantArgs(nil))
	assert.Nil(t, got.ControlPlane)
	assert.Nil(t, got.ExportKubeConfig)
	assert.Nil(t, got.Platform)
}

func TestVirtualClusterExportsKubeconfigForServer(t *testing.T) {
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "https://team-a.vc.example.com:443" }))
	assert.Equal(t, &exportKubeConfigValues{Server: "https://team-a.vc.example.com:443"}, got.ExportKubeConfig)
	require.NotNil(t, got.ControlPlane)
	assert.Equal(t, &proxyValues{ExtraSANs: []string{"team-a.vc.example.com"}}, got.ControlPlane.Proxy)
}

func TestVirtualClusterImageTagFollowsChartSource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart helmchart.Chart
		want  *imageValues
	}{
		{"a published chart picks its own images", helmchart.Chart{}, nil},
		{"a local chart is pinned to the default release", helmchart.Chart{Path: "/mod/vcluster@v0.36.1/chart"}, &imageValues{Tag: "0.36.1"}},
		{"a local chart is pinned to the version given", helmchart.Chart{Path: "/mod/chart", Version: "0.35.0"}, &imageValues{Tag: "0.35.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.Chart = tc.chart }))
			var image *imageValues
			if got.ControlPlane != nil && got.ControlPlane.StatefulSet != nil {
				image = got.ControlPlane.StatefulSet.Image
			}
			assert.Equal(t, tc.want, image)
		})
	}
}

func TestVirtualClusterRelease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      *VirtualClusterArgs
		wantChart string
		wantRepo  bool
		wantSkip  bool
	}{
		{"published chart, awaited", tenantArgs(func(a *VirtualClusterArgs) { a.Await = true }), "vcluster", true, false},
		{"local chart, not awaited", tenantArgs(func(a *VirtualClusterArgs) { a.Chart = helmchart.Chart{Path: "/charts/vcluster"} }),
			"/charts/vcluster", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			runVirtualCluster(t, r, tc.args)
			rel, err := r.Get(chartType, "team-a")
			require.NoError(t, err)
			assert.Equal(t, "team-a", rel.Inputs["name"].StringValue())
			assert.Equal(t, "vcluster-team-a", rel.Inputs["namespace"].StringValue())
			assert.Equal(t, tc.wantChart, rel.Inputs["chart"].StringValue())
			assert.Equal(t, tc.wantRepo, rel.Inputs.HasValue("repositoryOpts"))
			assert.Equal(t, tc.wantSkip, rel.Inputs["skipAwait"].BoolValue())
			assert.Equal(t, "team-a", rel.ParentName())
		})
	}
}

func TestVirtualClusterReadsKubeconfigAfterRelease(t *testing.T) {
	r := newRecorder()
	vc := runVirtualCluster(t, r, tenantArgs(func(a *VirtualClusterArgs) { a.Await = true }))

	read, err := r.Get(secretType, "team-a-kubeconfig")
	require.NoError(t, err)
	require.True(t, read.Read, "the kubeconfig Secret is read")
	assert.Equal(t, "vcluster-team-a/vc-team-a", read.ID)
	assert.Contains(t, read.Dependencies,
		"urn:pulumi:test::gpu-tenancy::gpu-tenancy:vcluster:VirtualCluster$kubernetes:helm.sh/v4:Chart::team-a")
	want, err := pinnedKubeconfig([]byte(testKubeconfig), "", "team-a")
	require.NoError(t, err)
	assert.Equal(t, want, awaitOutput(t, vc.Kubeconfig), "the export rebuilt from its pinned parts")
}

// The tenant can rewrite its kubeconfig Secret: the deployment goes on for every tenant, and that tenant's kubeconfig
// is exported empty.
func TestATamperedKubeconfigSecretExportsNothingAndFailsNothing(t *testing.T) {
	r := newRecorder()
	r.Outputs = nil
	var vc *VirtualCluster
	run(t, r, func(ctx *pulumi.Context) (err error) {
		vc, err = NewVirtualCluster(ctx, "team-a", tenantArgs(func(a *VirtualClusterArgs) { a.Await = true }))
		return err
	})
	assert.Empty(t, awaitOutput(t, vc.Kubeconfig))
}

func TestVirtualClusterKubeconfigIsSecret(t *testing.T) {
	for _, await := range []bool{true, false} {
		r := newRecorder()
		vc := runVirtualCluster(t, r, tenantArgs(func(a *VirtualClusterArgs) { a.Await = await }))
		assert.Truef(t, pulumi.IsSecret(vc.Kubeconfig), "await=%v", await)
	}
}

func TestVirtualClusterWithoutAwaitReadsNothing(t *testing.T) {
	r := newRecorder()
	vc := runVirtualCluster(t, r, tenantArgs(nil))
	assert.Empty(t, reads(r))
	assert.Equal(t, "vcluster-team-a", awaitOutput(t, vc.KubeconfigSecretNamespace))
	assert.Equal(t, "vc-team-a", awaitOutput(t, vc.KubeconfigSecretName))
	assert.Equal(t, "", awaitOutput(t, vc.Kubeconfig))
}

func TestNewVirtualClusterRejectsInvalidArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args *VirtualClusterArgs
		want string
	}{
		{"nil args", nil, "args are required"},
		{"no class selector label", tenantArgs(func(a *VirtualClusterArgs) { a.ClassSelectorLabel = "" }), "every host DeviceClass"},
		{"malformed class selector label", tenantArgs(func(a *VirtualClusterArgs) { a.ClassSelectorLabel = "tenant/a/b" }), "classSelectorLabel"},
		{"tenant not a DNS label", tenantArgs(func(a *VirtualClusterArgs) { a.Tenant = "Team_A" }), `virtualCluster.tenant: Invalid value: "Team_A"`},
		{"tenant too long for its StatefulSet", tenantArgs(func(a *VirtualClusterArgs) { a.Tenant = strings.Repeat("a", 53) }), "more than 52"},
		{"no namespace", tenantArgs(func(a *VirtualClusterArgs) { a.Namespace = nil }), "virtualCluster.namespace: Required value"},
		{"GKE-cased toleration effect", tenantArgs(func(a *VirtualClusterArgs) {
			a.GPUTolerations = []cluster.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}}
		}), "virtualCluster.gpuTolerations[0].effect"},
		{"bad quantity", tenantArgs(func(a *VirtualClusterArgs) { a.ControlPlane.Memory = "lots" }), "virtualCluster.controlPlane.memory"},
		{"zero CPU", tenantArgs(func(a *VirtualClusterArgs) { a.ControlPlane.CPU = "0" }), "virtualCluster.controlPlane.cpu"},
		{"server without scheme", tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "team-a.example.com" }), "virtualCluster.kubeconfigServer"},
		{"server in clear text", tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "http://team-a.example.com" }), "https URL"},
		{"the service IP with a port of its own", tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "https://{serviceIP}:6443" }),
			"the cluster IP stands alone"},
		{"platform without a host", tenantArgs(func(a *VirtualClusterArgs) { a.Platform = &PlatformConnection{Project: "default"} }),
			"virtualCluster.platform.host: Required value"},
		{"an access key without a platform", tenantArgs(func(a *VirtualClusterArgs) { a.PlatformAccessKey = pulumi.String("k") }),
			"virtualCluster.platformAccessKey: Forbidden"},
		{"privileged pod security", tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = "privileged" }), "virtualCluster.podSecurity"},
		{"an image without a tag", tenantArgs(func(a *VirtualClusterArgs) {
			a.Images.ControlPlane = "ghcr.io/loft-sh/vcluster-oss@sha256:3743b40baa49a6675f0e25eebc8da6955fc1fcc40ccbf6100a9cedd922a1e398"
		}), "virtualCluster.images.controlPlane: Invalid value: \"ghcr.io/loft-sh/vcluster-oss@sha256:3743b40baa49a6675f0e25eebc8da6955fc1fcc40ccbf6100a9cedd922a1e398\": needs a tag"},
		{"an image that is no reference", tenantArgs(func(a *VirtualClusterArgs) { a.Images.Kubernetes = "ghcr.io/Loft/kubernetes:v1" }),
			"virtualCluster.images.kubernetes: Invalid value: \"ghcr.io/Loft/kubernetes:v1\": not an image reference"},
		{"a CoreDNS image with a bad tag", tenantArgs(func(a *VirtualClusterArgs) { a.Images.CoreDNS = "coredns/coredns:" }),
			"virtualCluster.images.coreDNS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &mocktest.Recorder{}
			err := mocktest.Run("test", func(ctx *pulumi.Context) error {
				_, err := NewVirtualCluster(ctx, "team-a", tc.args)
				return err
			}, rec)
			require.ErrorContains(t, err, tc.want)
			assert.Empty(t, rec.All())
		})
	}
}

func TestEachVirtualClusterHasItsOwnPlatformKey(t *testing.T) {
	r := newRecorder()
	conn := &PlatformConnection{Host: "platform.example.com", Project: "default"}
	run(t, r, func(ctx *pulumi.Context) error {
		for _, tenant := range []string{"team-a", "team-b"} {
			args := tenantArgs(func(a *VirtualClusterArgs) {
				a.Tenant, a.Namespace = tenant, pulumi.String("vcluster-"+tenant)
				a.Platform, a.PlatformAccessKey = conn, pulumi.ToSecret(pulumi.String("key-of-"+tenant)).(pulumi.StringOutput)
			})
			if _, err := NewVirtualCluster(ctx, tenant, args); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tenant := range []string{"team-a", "team-b"} {
		key, err := r.Get(secretType, tenant+"-platform-api-key")
		require.NoError(t, err)
		meta := key.Inputs["metadata"].ObjectValue()
		assert.Equal(t, APIKeySecretName, meta["name"].StringValue())
		assert.Equal(t, "vcluster-"+tenant, meta["namespace"].StringValue(), "in the tenant's own namespace")
		data := key.Inputs["stringData"]
		require.True(t, data.IsSecret(), "the key is secret in inputs and state")
		assert.Equal(t, map[string]any{"accessKey": "key-of-" + tenant, "host": "platform.example.com", "project": "default",
			"insecure": "false", "name": tenant}, data.SecretValue().Element.Mappable())
		chart, err := r.Get(chartType, tenant)
		require.NoError(t, err)
		assert.Contains(t, chart.DependencyNames(), tenant+"-platform-api-key", "the chart's pods start with their key in place")
	}
}

func TestAKubeconfigServerAtTheServiceIPIsTheServicesClusterIP(t *testing.T) {
	r := newRecorder()
	r.Outputs["kubernetes:core/v1:Service"] = func(resource.PropertyMap) resource.PropertyMap {
		return resource.PropertyMap{"spec": resource.NewProperty(resource.PropertyMap{"clusterIP": resource.NewProperty("10.0.0.43")})}
	}
	vc := runVirtualCluster(t, r, tenantArgs(func(a *VirtualClusterArgs) {
		a.Await, a.KubeconfigServer = true, "https://"+ServiceIPPlaceholder
	}))
	svc, err := r.Get("kubernetes:core/v1:Service", "team-a-service")
	require.NoError(t, err)
	require.True(t, svc.Read, "the vCluster's Service is read")
	assert.Equal(t, "vcluster-team-a/team-a", svc.ID)
	want, err := pinnedKubeconfig([]byte(testKubeconfig), "https://10.0.0.43:443", "team-a")
	require.NoError(t, err)
	assert.Equal(t, want, awaitOutput(t, vc.Kubeconfig))
	got := tenantValues(t, tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "https://" + ServiceIPPlaceholder }))
	assert.Nil(t, got.ExportKubeConfig, "vCluster is not given a server it cannot parse")
	assert.Nil(t, got.ControlPlane, "no name is added to the certificate: vCluster puts the cluster IP in it")
}
