package environment

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDroppedResources(t *testing.T) {
	const (
		levelType = "kubernetes:flowcontrol.apiserver.k8s.io/v1:PriorityLevelConfiguration"
		prefix    = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenancy:Catalog$"
	)
	kept := stateResource{URN: prefix + deviceClassType + "::gpu-catalog-a100", Type: deviceClassType, Protect: true}
	droppedClass := stateResource{URN: prefix + deviceClassType + "::gpu-catalog-h100", Type: deviceClassType, Protect: true}
	sharedLevel := stateResource{URN: prefix + levelType + "::gpu-catalog-tenants-priority-level", Type: levelType, Protect: true}
	tenantLevel := stateResource{URN: "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenancy:Tenant$" + levelType + "::tenant-a-priority-level",
		Type: levelType, Protect: true}
	// A tenant named gpu-catalog-tenants has a level of that resource name, under its own component.
	tenantNamedLikeIt := stateResource{URN: "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenancy:Tenant$" + levelType +
		"::gpu-catalog-tenants-priority-level", Type: levelType, Protect: true}
	unprotected := sharedLevel
	unprotected.Protect = false
	for _, tc := range []struct {
		name string
		res  []stateResource
		want []stateResource
	}{
		{"a class still in config is kept", []stateResource{kept}, nil},
		{"a class the config dropped is dropped", []stateResource{kept, droppedClass}, []stateResource{droppedClass}},
		{"the level every tenant shared is retired", []stateResource{sharedLevel}, []stateResource{sharedLevel}},
		{"a tenant's own level is kept", []stateResource{tenantLevel}, nil},
		{"the level of a tenant named like the retired one is kept", []stateResource{tenantNamedLikeIt}, nil},
		{"an unprotected resource needs nothing", []stateResource{unprotected}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, droppedResources(tc.res, []string{"a100"}))
		})
	}
}
