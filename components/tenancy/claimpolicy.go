package tenancy

import (
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// The policies on ResourceClaims and ResourceClaimTemplates: which classes a tenant may name, where GPU classes may
// be claimed at all, who may write a claim's allocation, and that a tenant cannot release a device it still holds.

// entitlementPolicy lets a tenant's namespace name only its granted classes in claims and templates, in every field
// that names a DeviceClass in resource.k8s.io/v1 (exactly.deviceClassName, firstAvailable[*].deviceClassName:
// k8s.io/api v0.34.4 resource/v1/types.go DeviceRequest, ExactDeviceRequest, DeviceSubRequest), and never
// adminAccess. Requests in v1beta1 and v1beta2 are converted to v1 first (matchPolicy Equivalent: k8s.io/apiserver
// v0.34.4 pkg/admission/plugin/policy/matching/matching.go). On the status subresource it refuses a new allocation
// or reservation of a claim that names a class no longer granted, so a revoked grant stops new pods on old claims.
// Device taints (KEP-5055: k8s.io/api v0.34.4 resource/v1/types.go DeviceToleration) keep faulty or quarantined
// devices from claims that do not tolerate them; a tenant may tolerate only the keys the platform lists, never every
// taint (an empty key). Kubernetes 1.34 stores claim tolerations even with DRADeviceTaints off, 1.36 turns it on.
func entitlementPolicy(tenant string, granted, tolerableDeviceTaints []string) admissionPolicy {
	return admissionPolicy{
		name: naming.EntitlementPolicy(tenant),
		rules: []admissionRule{
			{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate},
			{group: "resource.k8s.io", resources: []string{"resourceclaims/status"}, operations: update},
		},
		matchConditions: []celNamed{{"claim-created-changed-or-reserved", `request.?subResource.orValue('') == 'status'
	? (object.?status.?allocation.hasValue() && !oldObject.?status.?allocation.hasValue()) ||
		object.?status.?reservedFor.orValue([]).exists(r, !(r in oldObject.?status.?reservedFor.orValue([])))
	: ` + celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"tenant", `$TENANT`},
			{"granted", `$GRANTED`},
			{"spec", celSpec},
			{"requests", celRequests},
			{"requestClasses", celRequestClasses},
			{"deniedClasses", `variables.requestClasses
	.map(cs, cs.filter(c, !(c in variables.granted)))
	.filter(cs, size(cs) > 0)
	.map(cs, cs.join(', '))`},
			{"adminRequests", `request.?subResource.orValue('') == 'status' ? [] : variables.requests
	.filter(r, has(r.exactly) && r.exactly.?adminAccess.orValue(false) == true)
	.map(r, r.name)`},
			{"tolerating", `request.?subResource.orValue('') == 'status' ? [] : variables.requests
	.filter(r, (has(r.exactly) && r.exactly.?tolerations.orValue([]).exists(t, !(t.?key.orValue('') in $TOLERABLE_DEVICE_TAINTS))) ||
		r.?firstAvailable.orValue([]).exists(s, s.?tolerations.orValue([]).exists(t, !(t.?key.orValue('') in $TOLERABLE_DEVICE_TAINTS))))
	.map(r, r.name)`},
		},
		validations: []celValidation{
			{
				expression: `size(variables.deniedClasses) == 0`,
				message: `request.?subResource.orValue('') == 'status'
	? 'claim ' + object.metadata.name + ' of tenant ' + variables.tenant + ' names DeviceClass ' +
		variables.deniedClasses.join(', ') + ', which is no longer granted to the tenant: no pod may start using it'
	: 'tenant ' + variables.tenant + ' is not granted DeviceClass ' + variables.deniedClasses.join(', ') +
		'; its classes are the DeviceClasses labelled ' + $CLASS_LABEL_PREFIX + variables.tenant + '=true'`,
			},
			{
				expression: `size(variables.adminRequests) == 0`,
				message: `'tenant ' + variables.tenant + ' may not request adminAccess to devices (request ' +
	variables.adminRequests.join(', ') + ')'`,
			},
			{
				expression: `size(variables.tolerating) == 0`,
				message: `'tenant ' + variables.tenant + ': requests ' + variables.tolerating.join(', ') +
	' tolerate device taints, which keep faulty or quarantined devices from claims; tolerable device taints: ' +
	($TOLERABLE_DEVICE_TAINTS.size() == 0 ? 'none' : $TOLERABLE_DEVICE_TAINTS.join(', '))`,
			},
		},
		literals: map[string]string{
			"TENANT": celString(tenant), "GRANTED": celList(granted), "CLASS_LABEL_PREFIX": celString(naming.ClassTenantLabelPrefix),
			"TOLERABLE_DEVICE_TAINTS": celList(tolerableDeviceTaints),
		},
	}
}

// claimNamespacePolicy fails closed: a claim or template naming a catalog class or one of the NVIDIA driver's
// classes is refused in any namespace that is not exactly one tenant's host namespace (its name and tenant label
// agreeing, for a tenant that exists). The binding leaves out the platform namespaces.
func claimNamespacePolicy(classes, tenants []string) admissionPolicy {
	return admissionPolicy{
		name:            ClaimNamespacePolicy,
		rules:           []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate}},
		matchConditions: []celNamed{{"created-or-spec-changed", celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"spec", celSpec},
			{"requests", celRequests},
			{"requestClasses", celRequestClasses},
			{"gpuClasses", `variables.requestClasses
	.map(cs, cs.filter(c, c in $CATALOG_CLASSES || c == $DRIVER_DOMAIN || c.endsWith($DRIVER_CLASS_SUFFIX)))
	.filter(cs, size(cs) > 0)
	.map(cs, cs.join(', '))`},
			{"tenant", `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue('')`},
			{"tenantNamespace", `variables.tenant in $TENANTS && namespaceObject.metadata.name == $NAMESPACE_PREFIX + variables.tenant`},
		},
		validations: []celValidation{{
			expression: `size(variables.gpuClasses) == 0 || variables.tenantNamespace`,
			message: `'namespace ' + namespaceObject.metadata.name + ' is not a tenant host namespace: DeviceClass ' +
	variables.gpuClasses.join(', ') + ' may be claimed only in ' + $NAMESPACE_PREFIX + '<tenant> labelled ' +
	$TENANT_LABEL + '=<tenant> for a tenant of the platform, or in a platform namespace'`,
		}},
		literals: map[string]string{
			"CATALOG_CLASSES": celList(classes), "TENANTS": celList(tenants), "TENANT_LABEL": celString(naming.TenantNamespaceLabel),
			"NAMESPACE_PREFIX": celString(naming.NamespacePrefix), "DRIVER_CLASS_SUFFIX": celString(naming.DriverClassSuffix),
			"DRIVER_DOMAIN": celString(strings.TrimPrefix(naming.DriverClassSuffix, ".")),
		},
	}
}

// claimStatusPolicy: on Kubernetes 1.34 and 1.35 nothing checks that a claim's allocation matches its class or that
// the device is free, and RBAC lets anyone with update on resourceclaims/status write it; the vCluster chart grants
// each tenant's syncer exactly that in its host namespace (loft-sh/vcluster v0.36.1 chart/templates/role.yaml). Only
// the writers named here may change status.allocation or status.reservedFor: the scheduler allocates and reserves
// (kubernetes v1.34.4 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go bindClaim, Unreserve),
// the resource-claim controller reserves and releases (pkg/controller/resourceclaim/controller.go). The DRA
// driver's status.devices stays writable.
func claimStatusPolicy(writers []string) admissionPolicy {
	return admissionPolicy{
		name:  ClaimStatusPolicy,
		rules: []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims/status"}, operations: update}},
		matchConditions: []celNamed{{"allocation-or-reservations-changed", `object.?status.?allocation.hasValue() != oldObject.?status.?allocation.hasValue() ||
	(object.?status.?allocation.hasValue() && object.status.allocation != oldObject.status.allocation) ||
	object.?status.?reservedFor.orValue([]) != oldObject.?status.?reservedFor.orValue([])`}},
		validations: []celValidation{{
			expression: `request.userInfo.username in $WRITERS`,
			message: `'only ' + $WRITERS.join(', ') + ' may change the allocation or reservations of ResourceClaim ' +
	object.metadata.namespace + '/' + object.metadata.name + '; ' + request.userInfo.username + ' may not'`,
		}},
		literals: map[string]string{"WRITERS": celList(writers)},
	}
}

// DeleteProtectionFinalizer is what the scheduler adds to a claim when it allocates it and the resource-claim
// controller removes once the claim is deallocated (k8s.io/api v0.34.4 resource/v1/types.go Finalizer).
const DeleteProtectionFinalizer = "resource.kubernetes.io/delete-protection"

// claimDeleteProtectionPolicy keeps that finalizer on a tenant's claims against the tenant's own identities (every
// service account of its namespace, which its syncer's token can mint). Without the finalizer a deleted claim is
// gone at once: the scheduler frees its devices and the quota stops counting them, while the kubelet, which prepares
// a claim only when it starts a pod's sandbox, leaves the running container its device (kubernetes v1.34.4
// pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go, pkg/kubelet/kuberuntime/kuberuntime_manager.go).
// The next claim then gets a device that is still in use: more devices than the quota, and another tenant's pod
// that cannot start on it. The controller that removes the finalizer runs under its own identity.
var claimDeleteProtectionPolicy = admissionPolicy{
	name:            ClaimDeleteProtectionPolicy,
	rules:           []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims"}, operations: update}},
	matchConditions: []celNamed{{"tenant-identity", celTenantIdentity}},
	validations: []celValidation{{
		expression: `!($FINALIZER in oldObject.metadata.?finalizers.orValue([])) || $FINALIZER in object.metadata.?finalizers.orValue([])`,
		message: `'ResourceClaim ' + object.metadata.name + ': ' + request.userInfo.username + ' may not remove ' + $FINALIZER +
	'; it goes when the claim is deallocated, after every pod using it has ended'`,
	}},
	literals: map[string]string{"FINALIZER": celString(DeleteProtectionFinalizer)},
}
