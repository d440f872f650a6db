package platform

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withServiceQuota is the stack file's tenants, each with a Service quota of quota.
func withServiceQuota(t *testing.T, stack string, quota int) string {
	t.Helper()
	sc, err := ReadStackFile(filepath.Join("..", "..", "stacks", "Pulumi."+stack+".yaml"))
	require.NoError(t, err)
	var tenants []map[string]any
	require.NoError(t, json.Unmarshal([]byte(sc.Values["gpu-tenancy:tenants"]), &tenants))
	for _, tenant := range tenants {
		quotas, _ := tenant["objectQuota"].(map[string]any)
		if quotas == nil {
			quotas = map[string]any{}
		}
		for _, key := range []string{"services", "count/endpoints", "count/endpointslices.discovery.k8s.io"} {
			quotas[key] = quota
		}
		tenant["objectQuota"] = quotas
	}
	raw, err := json.Marshal(tenants)
	require.NoError(t, err)
	return string(raw)
}

// cloudServiceRange is the Service range the stack's cloud cluster is made with ("" for the cloud's own) and whether
// the cluster is protected.
func cloudServiceRange(t *testing.T, rec *mocktest.Recorder, stack string) (string, bool) {
	t.Helper()
	token, field := "gcp:container/cluster:Cluster", "ipAllocationPolicy"
	if stack == "scw-dev" {
		token, field = "scaleway:kubernetes/cluster:Cluster", "serviceCidr"
	}
	clusters := rec.ByType(token)
	require.Len(t, clusters, 1, token)
	inputs := clusters[0].Inputs.Mappable()
	got := ""
	switch v := inputs[field].(type) {
	case string:
		got = v
	case map[string]any:
		got, _ = v["servicesIpv4CidrBlock"].(string)
	}
	return got, clusters[0].Request.GetProtect()
}

// The cloud cluster's Service range is the cloud's own while it holds twice the tenants' Service quotas, so that a
// cluster made before keeps its range and the committed plans show no replacement; tenants that need more get a range
// sized for them; a range of the stack's own is taken as given; quotas past any range are refused before anything is
// registered, naming the keys and the numbers.
func TestTheCloudClustersServiceRangeHoldsItsTenants(t *testing.T) {
	for _, tc := range []struct {
		stack, name string
		quota       int
		rangeConfig string
		want        string
		refused     []string
	}{
		{stack: "gke-dev", name: "default quotas keep GKE's range", quota: 20, want: ""},
		{stack: "scw-dev", name: "default quotas keep Kapsule's range", quota: 20, want: ""},
		{stack: "gke-dev", name: "quotas GKE's range holds keep it", quota: 1800, want: ""},
		{stack: "gke-dev", name: "quotas past GKE's range get one of their own, with twice their room", quota: 2000, want: "10.96.0.0/18"},
		{stack: "scw-dev", name: "quotas past Kapsule's range get a wider one at its address", quota: 2000, want: "10.32.0.0/18"},
		{stack: "gke-dev", name: "a range of the stack's own", quota: 20, rangeConfig: `{"cidr":"10.100.0.0/22"}`, want: "10.100.0.0/22"},
		{stack: "scw-dev", name: "a range of the stack's own that is too small", quota: 2000, rangeConfig: `{"cidr":"10.100.0.0/22"}`,
			refused: []string{"gpu-tenancy:tenants[*].objectQuota[services]) add up to 4000 for 2 tenants",
				"the Service range 10.100.0.0/22 holds 1022 addresses, of which 919 may be promised",
				"set gpu-tenancy:serviceRange.cidr to a wider range", "gpu-tenancy:serviceRange.replaceCluster"}},
		{stack: "gke-dev", name: "quotas past the widest range", quota: 30000,
			refused: []string{"add up to 60000 for 2 tenants", "the Service range 10.96.0.0/16 holds 65534 addresses",
				"no range up to 10.96.0.0/16, the widest the program gives a cluster, holds them"}},
		{stack: "gke-dev", name: "an IPv6 range", quota: 20, rangeConfig: `{"cidr":"fd00::/108"}`,
			refused: []string{"gpu-tenancy:serviceRange.cidr", "must be an IPv4 range"}},
		{stack: "scw-dev", name: "a range with host bits", quota: 20, rangeConfig: `{"cidr":"10.100.0.1/22"}`,
			refused: []string{"gpu-tenancy:serviceRange.cidr", "host bits"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			override := map[string]string{"gpu-tenancy:tenants": withServiceQuota(t, tc.stack, tc.quota)}
			if tc.rangeConfig != "" {
				override["gpu-tenancy:serviceRange"] = tc.rangeConfig
			}
			rec, err := runStack(t, tc.stack, override)
			if tc.refused != nil {
				require.Error(t, err)
				for _, want := range tc.refused {
					assert.ErrorContains(t, err, want)
				}
				assert.Empty(t, rec.All(), "nothing is registered")
				return
			}
			require.NoError(t, err)
			got, protected := cloudServiceRange(t, rec, tc.stack)
			assert.Equal(t, tc.want, got)
			assert.True(t, protected, "a cluster that holds tenants is protected, so a plan that replaces it is refused")
		})
	}
}

// A cluster that holds tenants is protected, so that a changed range, which replaces it, is refused at preview;
// serviceRange.replaceCluster lifts the protection for the plan that replaces it, and a cluster without tenants has
// none to lose.
func TestACloudClusterIsReplacedOnlyWhenTheOperatorSaysSo(t *testing.T) {
	for _, stack := range []string{"gke-dev", "scw-dev"} {
		t.Run(stack, func(t *testing.T) {
			rec, err := runStack(t, stack, map[string]string{"gpu-tenancy:serviceRange": `{"cidr":"10.100.0.0/20","replaceCluster":true}`})
			require.NoError(t, err)
			got, protected := cloudServiceRange(t, rec, stack)
			assert.Equal(t, "10.100.0.0/20", got)
			assert.False(t, protected, "the operator confirmed the replacement")

			rec, err = runStack(t, stack, map[string]string{"gpu-tenancy:tenants": "[]", "gpu-tenancy:gpuClasses": "[]", "gpu-tenancy:prices": "{}"})
			require.NoError(t, err)
			_, protected = cloudServiceRange(t, rec, stack)
			assert.False(t, protected, "no tenant to lose")
		})
	}
}

// The range keys are a cloud cluster's: an existing cluster's range is read from its ServiceCIDRs.
func TestAnExistingClusterTakesNoRangeOfTheStacks(t *testing.T) {
	override := localOverride(t)
	override["gpu-tenancy:serviceRange"] = `{"cidr":"10.100.0.0/20","replaceCluster":true}`
	_, err := runStack(t, "local", override)
	require.Error(t, err)
	for _, key := range []string{"gpu-tenancy:serviceRange.cidr", "gpu-tenancy:serviceRange.replaceCluster"} {
		assert.ErrorContains(t, err, key+": Forbidden: is for a cluster the program makes")
	}
}

// An overcommit the operator states for a cloud cluster is said at every preview, with the range it weighs.
func TestACloudClustersOvercommitIsSaid(t *testing.T) {
	tenant := func(name string) TenantArgs {
		var t TenantArgs
		t.Name, t.ObjectQuota = name, map[string]int{"services": 1000}
		return t
	}
	c := PlatformArgs{Cloud: cluster.Scaleway, Scaleway: scaleway.ClusterArgs{KubernetesVersion: "1.36", TenantPool: &scaleway.SystemPoolArgs{}},
		Tenants: []TenantArgs{tenant("team-a"), tenant("team-b")}}
	for _, said := range c.exposures() {
		assert.NotContains(t, said, "overcommit", "no ratio stated, none said")
	}
	c.ServiceRange.Overcommit = 1.5
	assert.Contains(t, strings.Join(c.exposures(), "\n"), "serviceRange.overcommit is 1.5: the tenants' Service quotas "+
		"(tenants[*].objectQuota[services]) add up to 2000 for 2 tenants, and the Service range 10.32.0.0/20 holds 4094 addresses")
}

// Quotas past the cloud's own range are said at every preview: a cluster made before with it would be replaced.
func TestARangeSizedPastTheCloudsOwnIsSaid(t *testing.T) {
	c := PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{KubernetesVersion: "1.36", TenantPool: &gke.SystemPoolArgs{}}}
	for _, name := range []string{"team-a", "team-b"} {
		var tenant TenantArgs
		tenant.Name, tenant.ObjectQuota = name, map[string]int{"services": 1800}
		c.Tenants = append(c.Tenants, tenant)
	}
	for _, said := range c.exposures() {
		assert.NotContains(t, said, "Service range", "3600 fit GKE's own range")
	}
	c.Tenants[1].ObjectQuota["services"] = 2000
	assert.Contains(t, strings.Join(c.exposures(), "\n"), "add up to 3800, more than the cloud's own Service range "+
		"34.118.224.0/20 can promise (3684): a new cluster is made with 10.96.0.0/18, twice their room; a cluster made "+
		"before with the cloud's range would be replaced, which is refused while it holds tenants unless "+
		"serviceRange.replaceCluster is set")
}
