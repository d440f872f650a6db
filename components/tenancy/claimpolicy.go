package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// The policies on ResourceClaims and ResourceClaimTemplates: which classes a tenant may name, where GPU classes may
// be claimed at all, who may write a claim's allocation, and that a tenant cannot release a device it still holds.

// entitlementPolicy lets each tenant's namespace name only its granted classes in claims and templates, in every
// field that names a DeviceClass in resource.k8s.io/v1 (exactly.deviceClassName, firstAvailable[*].deviceClassName:
// k8s.io/api v0.34.4 resource/v1/types.go DeviceRequest, ExactDeviceRequest, DeviceSubRequest), and never
// adminAccess. Requests in v1beta1 and v1beta2 are converted to v1 first (matchPolicy Equivalent: k8s.io/apiserver
// v0.34.4 pkg/admission/plugin/policy/matching/matching.go). On the status subresource it refuses a new allocation
// or reservation of a claim that names a class no longer granted, so a revoked grant stops new pods on old claims.
// Device taints (KEP-5055: k8s.io/api v0.34.4 resource/v1/types.go DeviceToleration) keep faulty or quarantined
// devices from claims that do not tolerate them; a tenant may tolerate only the keys the platform lists, never every
// taint (an empty key). Kubernetes 1.34 stores claim tolerations even with DRADeviceTaints off, 1.36 turns it on.
//
// One policy and one binding serve every tenant, so a claim write costs the same with ten tenants as with a thousand:
// the grants are the namespace's own labels (naming.ClassGrantLabel), which the platform sets and no tenant identity
// can write (a tenant's syncer has no rights on namespaces: loft-sh/vcluster v0.36.1 chart/templates/clusterrole.yaml,
// and docs/threat-model.md). Not params: a binding's params are read through an informer that kube-apiserver 1.34
// can leave stopped (see policy.go).
func entitlementPolicy(tolerableDeviceTaints []string) admissionPolicy {
	return admissionPolicy{
		name: naming.EntitlementPolicy,
		rules: []admissionRule{
			{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate},
			{group: "resource.k8s.io", resources: []string{"resourceclaims/status"}, operations: update},
		},
		matchConditions: []celNamed{{"claim-created-changed-or-reserved", `request.?subResource.orValue('') == 'status'
	? (object.?status.?allocation.hasValue() && !oldObject.?status.?allocation.hasValue()) ||
		object.?status.?reservedFor.orValue([]).exists(r, !(r in oldObject.?status.?reservedFor.orValue([])))
	: ` + celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"tenant", celTenant},
			{"labels", `namespaceObject.metadata.?labels.orValue({})`},
			{"spec", celSpec},
			{"requests", celRequests},
			{"requestClasses", celRequestClasses},
			{"deniedClasses", `variables.requestClasses
	.map(cs, cs.filter(c, variables.labels[?($GRANT_PREFIX + c)].orValue('') != 'true'))
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
			"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "GRANT_PREFIX": celString(naming.ClassGrantLabelPrefix),
			"CLASS_LABEL_PREFIX":      celString(naming.ClassTenantLabelPrefix),
			"TOLERABLE_DEVICE_TAINTS": celList(tolerableDeviceTaints),
		},
	}
}

// claimNamespacePolicy fails closed: a claim or template naming a catalog class or one of the NVIDIA driver's
// classes is refused in any namespace that is not exactly one tenant's host namespace: its name and tenant label
// agreeing (namespaceLabelPolicy keeps the label off every other namespace), made by the platform (its managed-by
// label). No list of tenants: a claim's cost does not grow with them. The binding leaves out the platform namespaces.
func claimNamespacePolicy(classes []string) admissionPolicy {
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
			{"tenantNamespace", `variables.tenant != '' && namespaceObject.metadata.name == $NAMESPACE_PREFIX + variables.tenant &&
	namespaceObject.metadata.?labels[?$MANAGED_BY_LABEL].orValue('') == $MANAGED_BY`},
		},
		validations: []celValidation{{
			expression: `size(variables.gpuClasses) == 0 || variables.tenantNamespace`,
			message: `'namespace ' + namespaceObject.metadata.name + ' is not a tenant host namespace: DeviceClass ' +
	variables.gpuClasses.join(', ') + ' may be claimed only in ' + $NAMESPACE_PREFIX + '<tenant> labelled ' +
	$TENANT_LABEL + '=<tenant> for a tenant of the platform, or in a platform namespace'`,
		}},
		literals: map[string]string{
			"CATALOG_CLASSES": celList(classes), "TENANT_LABEL": celString(naming.TenantNamespaceLabel),
			"MANAGED_BY_LABEL": celString(naming.ManagedByLabel), "MANAGED_BY": celString(naming.ManagedBy),
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

// ExtendedResourceClaimAnnotation marks the claim the scheduler makes for a pod that asks for a class by its
// extended-resource name (kubernetes v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go;
// k8s.io/api v0.36.3 resource/v1 ExtendedResourceClaimAnnotation).
const ExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"

// extendedResourceClaimPolicy: the quota charges such a claim only what its pod does not already pay
// (kubernetes v1.36.3 pkg/quota/v1/evaluator/core/resource_claims.go getVerifiedPodUsage), so a claim a tenant marked
// itself could be charged less than its devices. Only the claim-status writers, the scheduler first among them, may
// add, change or remove the mark; they already allocate every claim.
func extendedResourceClaimPolicy(writers []string) admissionPolicy {
	return admissionPolicy{
		name:  ExtendedResourceClaimPolicy,
		rules: []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims"}, operations: createUpdate}},
		matchConditions: []celNamed{{"mark-set-or-changed", `request.operation == 'CREATE'
	? object.metadata.?annotations[?$ANNOTATION].hasValue()
	: object.metadata.?annotations[?$ANNOTATION] != oldObject.metadata.?annotations[?$ANNOTATION]`}},
		validations: []celValidation{{
			expression: `request.userInfo.username in $WRITERS`,
			message: `'ResourceClaim ' + object.metadata.name + ': only ' + $WRITERS.join(', ') + ' may set or change ' + $ANNOTATION +
	', which marks a claim the scheduler made for a pod\'s extended resources; ' + request.userInfo.username + ' may not'`,
		}},
		literals: map[string]string{"ANNOTATION": celString(ExtendedResourceClaimAnnotation), "WRITERS": celList(writers)},
	}
}

// extendedResourceClassPolicy keeps the extended-resource names DeviceClasses map to the catalog's (named: every catalog class's name
// to its class) and the NVIDIA driver's nvidia.com/ ones, whoever writes the class. The scheduler maps a name to a
// class cluster-wide, the newer class winning (k8s.io/dynamic-resource-allocation v0.36.3
// deviceclass/extendedresourcecache/extendedresourcecache.go), so a class outside the catalog that took a tenant's name
// would change what the tenant's pods get, and one with a name of its own would open a path to its devices that no
// grant covers; the pod guard refuses nvidia.com/ names in tenant namespaces.
func extendedResourceClassPolicy(named map[string]string) admissionPolicy {
	return admissionPolicy{
		name:  ExtendedResourceClassPolicy,
		rules: []admissionRule{{group: "resource.k8s.io", resources: []string{"deviceclasses"}, operations: createUpdate}},
		// Only a name set or changed: a class that took its name while the catalog allowed it keeps being updated
		// (labels, and the garbage collector's finalizers when it is deleted), whatever the catalog says now; a name
		// the catalog no longer carries leaves no path around the grants, since the scheduler's claims meet every
		// claim guard.
		matchConditions: []celNamed{{"sets-a-name", `object.spec.?extendedResourceName.orValue('') != '' &&
	(request.operation == 'CREATE' || object.spec.?extendedResourceName.orValue('') != oldObject.spec.?extendedResourceName.orValue(''))`}},
		variables: []celNamed{{"name", `object.spec.extendedResourceName`}},
		validations: []celValidation{{
			expression: `variables.name in $NAMED ? $NAMED[variables.name] == object.metadata.name : variables.name.startsWith($DRIVER_PREFIX)`,
			message: `variables.name in $NAMED
	? 'DeviceClass ' + object.metadata.name + ' may not map ' + variables.name + ', the extended-resource name of the catalog\'s class ' + $NAMED[variables.name]
	: 'DeviceClass ' + object.metadata.name + ' may not map ' + variables.name + ': tenants ask for GPUs by the names of the catalog\'s classes (' +
		($NAMED.size() == 0 ? 'none' : $NAMED.map(k, k).join(', ')) + ') and of the NVIDIA driver\'s (' + $DRIVER_PREFIX + '*) only'`,
		}},
		literals: map[string]string{"NAMED": celMap(named), "DRIVER_PREFIX": celString("nvidia.com/")},
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

// Limits on what one tenant claim or template may ask of the scheduler. The API server's own limits are far wider
// (k8s.io/api v0.34.4 resource/v1/types.go: 32 requests, 8 subrequests, 32 selectors, 10 KiB per CEL expression,
// 32 constraints), and the scheduler tries each request's alternatives and evaluates each selector against every
// published device while it searches: one claim at those sizes costs it far more than the device it gets. These fit
// what a GPU job asks for (a few requests, a few alternatives, a selector or two) with room to spare.
const (
	MaxClaimRequests       = 8
	MaxClaimSubRequests    = 8
	MaxClaimSelectors      = 4
	MaxClaimSelectorLength = 1024
	MaxClaimConstraints    = 4
)

// claimShapePolicy bounds a tenant's claims and templates: requests, alternatives, selectors and constraints within
// the limits above; no allocationMode All, which takes every matching device of the pool (up to 32, what the quota
// charges it: kubernetes v1.34.4 pkg/quota/v1/evaluator/core/resource_claims.go); and no opaque driver
// configuration (spec.devices.config), which only the class may carry. The NVIDIA driver reads a claim's config to set
// up sharing (MPS, time-slicing) and passthrough: inert while the driver's feature gates are off, and once an operator
// turns one on, a tenant that configures the device it shares decides how another's work runs on it
// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 api/nvidia.com/resource/v1beta1 GpuConfig, sharing.go).
var claimShapePolicy = admissionPolicy{
	name:            ClaimShapePolicy,
	rules:           []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate}},
	matchConditions: []celNamed{{"created-or-spec-changed", celCreatedOrSpecChanged}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"spec", celSpec},
		{"requests", celRequests},
	},
	validations: []celValidation{
		{
			expression: `size(variables.requests) <= $MAX_REQUESTS`,
			message: `'tenant ' + variables.tenant + ': ' + object.metadata.name + ' has ' + string(size(variables.requests)) +
	' device requests; a tenant claim may have at most ' + string($MAX_REQUESTS)`,
		},
		{
			expression: `variables.requests.all(r, size(r.?firstAvailable.orValue([])) <= $MAX_SUBREQUESTS)`,
			message: `'tenant ' + variables.tenant + ': ' + object.metadata.name + ' has a request with more than ' +
	string($MAX_SUBREQUESTS) + ' firstAvailable alternatives'`,
		},
		{
			expression: `variables.requests.all(r,
	(!has(r.exactly) || (size(r.exactly.?selectors.orValue([])) <= $MAX_SELECTORS &&
		r.exactly.?selectors.orValue([]).all(s, size(s.?cel.?expression.orValue('')) <= $MAX_SELECTOR_LENGTH))) &&
	r.?firstAvailable.orValue([]).all(d, size(d.?selectors.orValue([])) <= $MAX_SELECTORS &&
		d.?selectors.orValue([]).all(s, size(s.?cel.?expression.orValue('')) <= $MAX_SELECTOR_LENGTH)))`,
			message: `'tenant ' + variables.tenant + ': ' + object.metadata.name + ' has a request with more than ' +
	string($MAX_SELECTORS) + ' selectors or a selector longer than ' + string($MAX_SELECTOR_LENGTH) + ' characters'`,
		},
		{
			expression: `variables.requests.all(r, r.?exactly.?allocationMode.orValue('ExactCount') != 'All' &&
	r.?firstAvailable.orValue([]).all(d, d.?allocationMode.orValue('ExactCount') != 'All'))`,
			message: `'tenant ' + variables.tenant + ': ' + object.metadata.name +
	' asks for allocationMode All (every matching device); tenant claims name a count'`,
		},
		{
			expression: `size(variables.spec.?devices.?constraints.orValue([])) <= $MAX_CONSTRAINTS`,
			message:    `'tenant ' + variables.tenant + ': ' + object.metadata.name + ' has more than ' + string($MAX_CONSTRAINTS) + ' constraints'`,
		},
		{
			expression: `size(variables.spec.?devices.?config.orValue([])) == 0`,
			message: `'tenant ' + variables.tenant + ': ' + object.metadata.name +
	' carries device configuration (spec.devices.config); the driver\'s configuration is the DeviceClass\'s to set, not a tenant\'s'`,
		},
	},
	literals: map[string]string{
		"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "MAX_REQUESTS": fmt.Sprint(MaxClaimRequests),
		"MAX_SUBREQUESTS": fmt.Sprint(MaxClaimSubRequests), "MAX_SELECTORS": fmt.Sprint(MaxClaimSelectors),
		"MAX_SELECTOR_LENGTH": fmt.Sprint(MaxClaimSelectorLength), "MAX_CONSTRAINTS": fmt.Sprint(MaxClaimConstraints),
	},
}
