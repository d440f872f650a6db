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
			assert.Equal(t, tc.want, droppedResources(tc.res, []string{"a100"}, nil))
		})
	}
}

// A tenant whose vCluster no longer connects to the platform (gpuAccess extendedResources) drops the platform's ingress
// policy and its access key; every other tenant keeps them.
func TestDroppedPlatformObjects(t *testing.T) {
	const tenantPrefix = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:index:Platform$gpu-tenancy:tenancy:Tenant$"
	const vclusterPrefix = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:index:Platform$gpu-tenancy:vcluster:VirtualCluster$"
	policy := func(tenant string) stateResource {
		return stateResource{URN: tenantPrefix + networkPolicyType + "::" + tenant + "-allow-ingress-platform", Type: networkPolicyType, Protect: true}
	}
	key := func(tenant string) stateResource {
		return stateResource{URN: vclusterPrefix + secretType + "::" + tenant + "-platform-api-key", Type: secretType, Protect: true}
	}
	other := stateResource{URN: tenantPrefix + networkPolicyType + "::research-ai-allow-ingress-api-clients", Type: networkPolicyType, Protect: true}
	res := []stateResource{policy("research-ai"), key("research-ai"), policy("legal-ai"), key("legal-ai"), other}
	assert.Equal(t, []stateResource{policy("research-ai"), key("research-ai")}, droppedResources(res, nil, []string{"research-ai"}))
	assert.Empty(t, droppedResources(res, nil, nil), "tenants on claims keep both")
}

func TestRenderedConfigs(t *testing.T) {
	const chart = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:index:Platform$gpu-tenancy:vcluster:VirtualCluster$kubernetes:helm.sh/v4:Chart$"
	config := stateResource{URN: chart + secretType + "::legal-ai:vcluster-legal-ai/vc-config-legal-ai", Type: secretType, Protect: true}
	kubeconfig := stateResource{URN: chart + secretType + "::legal-ai:vcluster-legal-ai/vc-legal-ai", Type: secretType, Protect: true}
	platformKey := stateResource{URN: "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:index:Platform$gpu-tenancy:vcluster:VirtualCluster$" +
		secretType + "::legal-ai-platform-api-key", Type: secretType, Protect: true}
	statefulSet := stateResource{URN: chart + "kubernetes:apps/v1:StatefulSet::legal-ai:vcluster-legal-ai/legal-ai",
		Type: "kubernetes:apps/v1:StatefulSet", Protect: true}
	unprotected := config
	unprotected.Protect = false
	for _, tc := range []struct {
		name string
		res  []stateResource
		want []stateResource
	}{
		{"the config the chart renders from the values", []stateResource{config}, []stateResource{config}},
		{"the chart's other Secrets are kept", []stateResource{kubeconfig}, nil},
		{"a Secret outside the chart is kept", []stateResource{platformKey}, nil},
		{"what holds the tenant's volume is kept", []stateResource{statefulSet}, nil},
		{"an unprotected config needs nothing", []stateResource{unprotected}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, renderedConfigs(tc.res)) })
	}
}
