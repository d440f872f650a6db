package platform

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The group of a tenant is part of every environment's state: a change of the hash would move tenants between
// stacks. These are FNV-1a (32 bit) of the name modulo the groups, computed apart from this code.
func TestTenantGroupIsPinned(t *testing.T) {
	for tenant, want := range map[string][3]int{
		"legal-ai": {1, 2, 3}, "research-ai": {1, 0, 1}, "tenant-0": {0, 0, 0}, "tenant-1": {1, 2, 3},
	} {
		assert.Equal(t, want, [3]int{TenantGroup(tenant, 2), TenantGroup(tenant, 3), TenantGroup(tenant, 4)}, tenant)
	}
}

func TestTenantGroupsSpreadTenants(t *testing.T) {
	counts := make([]int, 10)
	for i := range 100 {
		counts[TenantGroup(fmt.Sprintf("tenant-%d", i), 10)]++
	}
	for g, n := range counts {
		assert.Positive(t, n, "group %d", g)
		assert.LessOrEqual(t, n, 20, "group %d holds %d of 100 tenants", g, n)
	}
}

func TestPartGroup(t *testing.T) {
	for part, want := range map[Part]int{"tenants-0": 0, "tenants-12": 12} {
		got, ok := part.Group()
		assert.True(t, ok, part)
		assert.Equal(t, want, got)
	}
	for _, part := range []Part{"", PlatformPart, "tenants-", "tenants--1", "tenants-01", "tenants-x"} {
		_, ok := part.Group()
		assert.False(t, ok, part)
	}
}

// Each part builds its share: the platform part everything but the tenants, each tenants part its group's tenants on
// the cluster the platform stack exports, and together they build every tenant once.
func TestPartsBuildTheirShare(t *testing.T) {
	const groups = 2
	seen := map[string]int{}
	for _, part := range []Part{PlatformPart, TenantsPart(0), TenantsPart(1)} {
		t.Run(string(part), func(t *testing.T) {
			rec, err := runStackAs(t, "scw-dev."+string(part), "scw-dev", map[string]string{
				"gpu-tenancy:tenantGroups": fmt.Sprint(groups), "gpu-tenancy:part": string(part)})
			require.NoError(t, err)
			_, isGroup := part.Group()
			if !isGroup {
				assert.Equal(t, 1, count(rec, "gpu-tenancy:scaleway:Cluster"))
				assert.Equal(t, 1, count(rec, "gpu-tenancy:tenancy:Catalog"))
				assert.Equal(t, 1, count(rec, "gpu-tenancy:dra:Driver"))
				assert.Zero(t, count(rec, "gpu-tenancy:tenancy:Tenant"))
				return
			}
			assert.Zero(t, count(rec, "gpu-tenancy:scaleway:Cluster"), "the cluster is the platform stack's")
			assert.Zero(t, count(rec, "gpu-tenancy:tenancy:Catalog"))
			assert.Zero(t, count(rec, "gpu-tenancy:dra:Driver"))
			refs := rec.ByType("pulumi:pulumi:StackReference")
			require.Len(t, refs, 1)
			assert.Equal(t, "organization/gpu-tenancy/scw-dev", refs[0].Inputs["name"].StringValue(), "the platform stack, by name")
			for _, tenant := range rec.ByType("gpu-tenancy:tenancy:Tenant") {
				seen[tenant.Name]++
				assert.Equal(t, mustGroup(t, part), TenantGroup(tenant.Name, groups))
			}
		})
	}
	assert.Equal(t, map[string]int{"legal-ai": 1, "research-ai": 1}, seen, "every tenant in one group")
}

func mustGroup(t *testing.T, p Part) int {
	g, ok := p.Group()
	require.True(t, ok)
	return g
}

func TestATenantsPartIsNamedAfterItsPlatformStack(t *testing.T) {
	_, err := runStackAs(t, "scw-dev", "scw-dev", map[string]string{"gpu-tenancy:tenantGroups": "2", "gpu-tenancy:part": "tenants-1"})
	require.ErrorContains(t, err, "the stack of part tenants-1 is named <platform stack>.tenants-1, not scw-dev")
}

func TestPartsListTheEnvironment(t *testing.T) {
	assert.Equal(t, []Part{""}, (&PlatformArgs{}).Parts())
	assert.Equal(t, []Part{PlatformPart, "tenants-0", "tenants-1", "tenants-2"}, (&PlatformArgs{TenantGroups: 3}).Parts())
	assert.True(t, slices.Contains((&PlatformArgs{TenantGroups: 3}).Parts(), TenantsPart(2)))
}
