package tenancy

import "github.com/gpu-tenancy/gpu-tenancy/components/naming"

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
	validations: []celValidation{{
		expression: `size(variables.externalIPs) == 0`,
		message: `'tenant ' + variables.tenant + ': Service ' + object.metadata.name + ' sets externalIPs ' +
	variables.externalIPs.join(', ') + ', which would capture other tenants\' traffic to those addresses'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel)},
}
