package environment

import (
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/stretchr/testify/assert"
)

func TestATenantLeavesOnlyWhenRetired(t *testing.T) {
	args := &platform.PlatformArgs{
		Tenants:        []platform.TenantArgs{{TenantArgs: tenancy.TenantArgs{Name: "team-a"}}},
		RetiredTenants: []string{"team-c"},
	}
	for _, tc := range []struct {
		name string
		held []string
		want string
	}{
		{"a listed tenant", []string{"team-a"}, ""},
		{"a retired tenant", []string{"team-a", "team-c"}, ""},
		{"a tenant whose entry is gone is refused, with both ways on", []string{"team-b", "team-a"},
			"stack dev holds tenant team-b, which the stack file lists neither in tenants nor in retiredTenants: nothing is " +
				"deleted for a missing line. Put its entry back in tenants to keep it, or name it in retiredTenants"},
		{"every lost tenant is named", []string{"team-d", "team-b"}, "holds tenant team-b, team-d,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unlisted("dev", tc.held, args)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestURNType(t *testing.T) {
	for urn, want := range map[string]string{
		"urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenancy:Tenant::team-a":                                 "gpu-tenancy:tenancy:Tenant",
		"urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenancy:Tenant$kubernetes:core/v1:Namespace::team-a-ns": "kubernetes:core/v1:Namespace",
		"urn:pulumi:dev::gpu-tenancy::a$b$kubernetes:helm.sh/v4:Chart::team-a":                            "kubernetes:helm.sh/v4:Chart",
	} {
		assert.Equal(t, want, urnType(urn), urn)
	}
}
