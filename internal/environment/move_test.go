package environment

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// stateOfTenant is a group stack's state holding tenant: its Tenant component and the objects below it, less those
// named in missing.
func stateOfTenant(stack, tenant string, missing ...string) []stateResource {
	top := "urn:pulumi:" + stack + "::gpu-tenancy::" + tenantType + "::" + tenant
	res := []stateResource{{URN: top, Type: tenantType}}
	for _, child := range []string{"namespace", "quota", "limits"} {
		if !slices.Contains(missing, child) {
			res = append(res, stateResource{URN: "urn:pulumi:" + stack + "::gpu-tenancy::" + tenantType + "$kubernetes:core/v1:X::" + tenant + "-" + child,
				Type: "kubernetes:core/v1:X", Parent: top, ID: tenant + "-" + child})
		}
	}
	return res
}

// A copy left in a source is dropped only when the destination holds the same resources, with the same IDs, whatever
// the stacks' names and the parents the move gave the tenant's components.
func TestCopyDiffers(t *testing.T) {
	source := stateOfTenant("dev.tenants-0", "team-a")
	withID := func(res []stateResource, name, id string) []stateResource {
		out := slices.Clone(res)
		for i := range out {
			if strings.HasSuffix(out[i].URN, "::"+name) {
				out[i].ID = id
			}
		}
		return out
	}
	cases := map[string]struct {
		dest, source []stateResource
		differs      int
	}{
		"the destination's copy is the same":            {stateOfTenant("dev.tenants-2", "team-a"), source, 0},
		"the destination lacks an object of the tenant": {stateOfTenant("dev.tenants-2", "team-a", "quota"), source, 1},
		"the destination holds another tenant only":     {stateOfTenant("dev.tenants-2", "team-b"), source, 4},
		"another tenant beside it is not the tenant's":  {append(stateOfTenant("dev.tenants-2", "team-a"), stateOfTenant("dev.tenants-2", "team-b")...), source, 0},
		"an object replaced since (another ID)":         {withID(stateOfTenant("dev.tenants-2", "team-a"), "team-a-quota", "other"), source, 1},
		"an object the source no longer holds":          {stateOfTenant("dev.tenants-2", "team-a"), stateOfTenant("dev.tenants-0", "team-a", "limits"), 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Len(t, copyDiffers(c.dest, c.source, "team-a"), c.differs)
		})
	}
	t.Run("the move made the tenant's top a child of the stack, and rewrote the URNs below it", func(t *testing.T) {
		moved := stateOfTenant("dev.tenants-2", "team-a")
		platform := func(urn string) string {
			return strings.Replace(urn, "::gpu-tenancy::"+tenantType, "::gpu-tenancy::gpu-tenancy:index:Platform$"+tenantType, 1)
		}
		for i := range moved {
			moved[i].URN = platform(moved[i].URN)
			if moved[i].Parent != "" {
				moved[i].Parent = platform(moved[i].Parent)
			}
		}
		assert.Empty(t, copyDiffers(moved, source, "team-a"))
	})
}

// The plan of a move that finishes one stopped between its two writes says which copy it drops.
func TestMovePlanNamesTheCopyItDrops(t *testing.T) {
	plan := MovePlan{To: "dev.tenants-2", Moves: []TenantMove{{Tenant: "team-a", From: "dev.tenants-2", AlsoIn: "dev.tenants-0"}}}
	assert.Contains(t, plan.String(), "tenant team-a: already in dev.tenants-2's state")
	assert.Contains(t, plan.String(), "its copy in dev.tenants-0's state, left by a move stopped between its two writes, is dropped from that state")
}
