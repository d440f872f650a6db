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
				Type: "kubernetes:core/v1:X", Parent: top})
		}
	}
	return res
}

// A copy left in a source is dropped only when the destination holds every resource of it, whatever the stacks' names.
func TestNotHeld(t *testing.T) {
	source := stateOfTenant("dev.tenants-0", "team-a")
	cases := map[string]struct {
		dest    []stateResource
		missing int
	}{
		"the destination's copy is whole":                {stateOfTenant("dev.tenants-2", "team-a"), 0},
		"the destination lacks an object of the tenant":  {stateOfTenant("dev.tenants-2", "team-a", "quota"), 1},
		"the destination holds another tenant only":      {stateOfTenant("dev.tenants-2", "team-b"), 4},
		"the destination holds more than the source did": {append(stateOfTenant("dev.tenants-2", "team-a"), stateOfTenant("dev.tenants-2", "team-b")...), 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Len(t, notHeld(c.dest, source, "team-a"), c.missing)
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
		assert.Empty(t, notHeld(moved, source, "team-a"))
	})
}

// The plan of a move that finishes one stopped between its two writes says which copy it drops.
func TestMovePlanNamesTheCopyItDrops(t *testing.T) {
	plan := MovePlan{To: "dev.tenants-2", Moves: []TenantMove{{Tenant: "team-a", From: "dev.tenants-2", AlsoIn: "dev.tenants-0"}}}
	assert.Contains(t, plan.String(), "tenant team-a: already in dev.tenants-2's state")
	assert.Contains(t, plan.String(), "its copy in dev.tenants-0's state, left by a move stopped between its two writes, is dropped from that state")
}
