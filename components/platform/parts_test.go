package platform

import (
	"fmt"
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
			stack := "scw-dev." + string(part)
			if part == PlatformPart {
				stack = "scw-dev"
			}
			rec, err := runStackAs(t, stack, "scw-dev", map[string]string{"gpu-tenancy:tenantGroups": fmt.Sprint(groups)})
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

// A stack named for a group the environment does not have is refused, naming the key that decides the groups.
func TestAStackBeyondTheGroupsIsRefused(t *testing.T) {
	_, err := runStackAs(t, "scw-dev.tenants-2", "scw-dev", map[string]string{"gpu-tenancy:tenantGroups": "2"})
	require.ErrorContains(t, err, "gpu-tenancy:tenantGroups")
	require.ErrorContains(t, err, "this stack is named for tenant group 2 (tenants-2), which an environment of 2 groups does not have")
}

// The stack's name says its part: the environment's own name is the platform, <env>.tenants-<i> group i, and
// without groups every stack is the whole platform, whatever its name.
func TestPartOfAStack(t *testing.T) {
	for _, c := range []struct {
		stack  string
		groups int
		want   Part
	}{
		{"prod", 0, ""},
		{"prod.tenants-1", 0, ""},
		{"prod", 3, PlatformPart},
		{"prod.tenants-1", 3, TenantsPart(1)},
		{"eu.prod.tenants-0", 3, TenantsPart(0)},
		{"prod.tenants-x", 3, PlatformPart},
		{"tenants-1", 3, PlatformPart},
	} {
		assert.Equal(t, c.want, PartOf(c.stack, c.groups), "%s in %d groups", c.stack, c.groups)
	}
}

func TestEnvironmentStacksAreNamedAfterTheEnvironment(t *testing.T) {
	stacks, err := EnvironmentStacks("prod", StackConfig{Values: map[string]string{"gpu-tenancy:tenantGroups": "3"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"prod", "prod.tenants-0", "prod.tenants-1", "prod.tenants-2"}, stacks)
	for i, s := range stacks[1:] {
		assert.Equal(t, TenantsPart(i), PartOf(s, 3))
	}
	stacks, err = EnvironmentStacks("dev", StackConfig{Values: map[string]string{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"dev"}, stacks)
	_, err = EnvironmentStacks("dev", StackConfig{Values: map[string]string{"gpu-tenancy:tenantGroups": "two"}})
	assert.ErrorContains(t, err, `gpu-tenancy:tenantGroups: "two" is not 0 (one stack) or more`)
}
