package tenancy

import (
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// servicePolicy refuses externalIPs on tenant Services. kube-proxy (and CNIs that implement them) captures traffic to
// a Service's external IP from every pod and node of the cluster, so a tenant naming an address other tenants talk to
// intercepts or black-holes their traffic (CVE-2020-8554, https://github.com/kubernetes/kubernetes/issues/97076).
// vCluster copies externalIPs from the virtual Service to the host (loft-sh/vcluster v0.36.1
// pkg/controllers/resources/services/syncer.go), and the syncer may create host Services itself. Kubernetes' own
// DenyServiceExternalIPs admission plugin is off by default and not ours to turn on in a managed control plane.
var servicePolicy = admissionPolicy{
	name:  ServicePolicy,
	rules: []admissionRule{{group: "", resources: []string{"services"}, operations: createUpdate}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"externalIPs", `object.spec.?externalIPs.orValue([])
	.filter(ip, request.operation == 'CREATE' || !(ip in oldObject.spec.?externalIPs.orValue([])))`},
	},
	validations: []celValidation{
		{
			expression: `size(variables.externalIPs) == 0`,
			message: `'tenant ' + variables.tenant + ': Service ' + object.metadata.name + ' sets externalIPs ' +
	variables.externalIPs.join(', ') + ', which would capture other tenants\' traffic to those addresses'`,
		},
		{
			expression: `size(object.spec.?ports.orValue([])) <= $MAX_PORTS`,
			message: `'tenant ' + variables.tenant + ': Service ' + object.metadata.name + ' has ' + string(size(object.spec.ports)) +
	' ports; a tenant Service may have at most ' + string($MAX_PORTS) + ': every port of every endpoint is programmed on every node'`,
		},
	},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "MAX_PORTS": fmt.Sprint(MaxEndpointPorts)},
}

// Limits on one tenant object's share of the dataplane. kube-proxy (or the CNI) programs every endpoint of every port
// of every Service on every node, so the cost of a tenant's EndpointSlice is its endpoints' addresses times its ports,
// cluster-wide (an endpoint holds up to 100 addresses, and Cilium makes each a backend); the quota counts objects only. The EndpointSlice controller itself puts at most 100 endpoints in a slice
// (kube-controller-manager --max-endpoints-per-slice, default 100), and vCluster's own Services have at most three
// ports (loft-sh/vcluster v0.36.1 chart/templates/service.yaml, pkg/coredns/template.go). A tenant's whole share is
// then at most its EndpointSlice quota times MaxEndpoints times MaxEndpointPorts (README, "Limits and quotas").
const (
	MaxEndpoints     = 100
	MaxEndpointPorts = 10
)

// endpointsPolicy bounds each EndpointSlice and Endpoints object in a tenant namespace, whoever writes it: the
// tenant's syncer (vCluster copies the endpoints of selector-less Services: pkg/controllers/resources/endpoints,
// endpointslices) or the host's controllers, whose objects follow the tenant's Services and pods.
var endpointsPolicy = admissionPolicy{
	name: EndpointsPolicy,
	rules: []admissionRule{
		{group: "discovery.k8s.io", resources: []string{"endpointslices"}, operations: createUpdate},
		{group: "", resources: []string{"endpoints"}, operations: createUpdate},
	},
	variables: []celNamed{
		{"tenant", celTenant},
		{"slice", `request.resource.resource == 'endpointslices'`},
		// An EndpointSlice's endpoints and ports are kept even when empty (k8s.io/api v0.34.4 discovery/v1 types.go:
		// no omitempty), and an empty list arrives as null (protobuf tells no empty list from none): the EndpointSlice
		// controller's placeholder slice of a Service whose selector matches no pod carries `endpoints: null`, which
		// size() does not take.
		// Each endpoint of a slice may hold up to 100 addresses, and Cilium (GKE's Dataplane V2, Kapsule's default)
		// programs every one as a backend: a slice counts its addresses (k8s v1.34.4 pkg/apis/discovery/validation).
		{"endpoints", `variables.slice ? (object.?endpoints.orValue(null) == null ? 0 :
	object.endpoints.map(e, size(e.?addresses.orValue([]))).sum()) :
	object.?subsets.orValue([]).map(s, size(s.?addresses.orValue([])) + size(s.?notReadyAddresses.orValue([]))).sum()`},
		{"ports", `variables.slice ? (object.?ports.orValue(null) == null ? 0 : size(object.ports)) :
	object.?subsets.orValue([]).map(s, size(s.?ports.orValue([]))).sum()`},
	},
	validations: []celValidation{{
		expression: `variables.endpoints <= $MAX_ENDPOINTS && variables.ports <= $MAX_PORTS`,
		message: `'tenant ' + variables.tenant + ': ' + request.kind.kind + ' ' + object.metadata.name + ' has ' +
	string(variables.endpoints) + ' endpoint addresses and ' + string(variables.ports) + ' ports; at most ' + string($MAX_ENDPOINTS) +
	' and ' + string($MAX_PORTS) + ': every endpoint of every port is programmed on every node'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel),
		"MAX_ENDPOINTS": fmt.Sprint(MaxEndpoints), "MAX_PORTS": fmt.Sprint(MaxEndpointPorts)},
}
