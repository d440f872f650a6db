package tenancy

import "github.com/gpu-tenancy/gpu-tenancy/components/naming"

// kubeconfigSecretPolicy keeps the Secret in which a tenant's vCluster exports its kubeconfig (vc-<tenant>) from the
// tenant's own identities' delete. Every up of the stack reads it, as a read of the engine, and a read of a Secret
// that is not there fails the whole deployment, every other tenant's changes with it: one tenant could hold up the
// platform's operations for all. What the Secret holds the tenant may still rewrite (vCluster writes it with the
// syncer's rights, which the tenant has): the platform exports only its pinned parts, and nothing, with a warning,
// when they are not there (components/vcluster/kubeconfig.go). vCluster writes the Secret and never deletes it
// (loft-sh/vcluster v0.36.1 pkg/util/kubeconfig/kubeconfig.go WriteKubeConfig); the namespace controller and the
// operators delete it under their own identities.
var kubeconfigSecretPolicy = admissionPolicy{
	name:            KubeconfigSecretPolicy,
	rules:           []admissionRule{{group: "", resources: []string{"secrets"}, operations: []string{"DELETE"}}},
	matchConditions: []celNamed{{"tenant-identity", celTenantIdentity}},
	variables:       []celNamed{{"tenant", celTenant}},
	validations: []celValidation{{
		expression: `oldObject.metadata.name != $PREFIX + variables.tenant`,
		message: `'tenant ' + variables.tenant + ': ' + request.userInfo.username + ' may not delete Secret ' + oldObject.metadata.name +
	', the kubeconfig the platform reads on every deployment; vCluster rewrites it in place'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "PREFIX": celString(naming.KubeconfigSecretPrefix)},
}
