package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// volumeClaimPolicy: a PersistentVolumeClaim naming a volume (spec.volumeName) or selecting volumes by label
// (spec.selector) binds an existing, available PersistentVolume, whoever's data it holds, instead of a new one its
// storage class provisions. vCluster copies both fields to the host untranslated while PersistentVolume sync is off
// (loft-sh/vcluster v0.36.1 pkg/controllers/resources/persistentvolumeclaims/translate.go), and the syncer may create
// host claims itself. So does storageClassName "" (no class): such a claim is never provisioned, only bound to an
// existing volume without a class (kubernetes v1.34.4 pkg/controller/volume/persistentvolume/pv_controller.go), and so
// does the empty class given by its annotation (betaStorageClassAnnotation). So does a claim of no class at all where
// the cluster has no default class: the DefaultStorageClass admission plugin, which runs before this policy, leaves it
// without one, and the controller binds it to a volume without a class before it looks for a default class to give it
// (pv_controller.go syncUnboundClaim, findBestMatchForClaim before assignDefaultStorageClass). Where there is a default
// class, the plugin has filled it in by the time this policy reads the claim. Refused at creation, and a tenant
// identity may not set volumeName, the class or its annotation later either (an unbound claim's volumeName may be set
// by update, which the persistent-volume controller does under its own identity; a nil class may be set once, where no
// default class filled it).
var volumeClaimPolicy = admissionPolicy{
	name:  VolumeClaimPolicy,
	rules: []admissionRule{{group: "", resources: []string{"persistentvolumeclaims"}, operations: createUpdate}},
	matchConditions: []celNamed{{"created-or-changed-by-the-tenant", `request.operation == 'CREATE' || (` + celTenantIdentity +
		` && (object.spec.?volumeName.orValue('') != oldObject.spec.?volumeName.orValue('') ||
	object.spec.?storageClassName != oldObject.spec.?storageClassName ||
	object.metadata.?annotations[?$BETA_CLASS] != oldObject.metadata.?annotations[?$BETA_CLASS]))`}},
	variables: []celNamed{{"tenant", celTenant}},
	validations: []celValidation{
		{
			expression: `object.spec.?volumeName.orValue('') == ''`,
			message: `'tenant ' + variables.tenant + ': PersistentVolumeClaim ' + object.metadata.name + ' names volume ' +
	object.spec.volumeName + '; tenant claims get new volumes from a storage class, not existing ones'`,
		},
		{
			// A data source in another namespace (alpha gate CrossNamespaceVolumeDataSource, with a ReferenceGrant there)
			// fills the new volume from another namespace's volume or snapshot; vCluster copies the namespace as written
			// (persistentvolumeclaims/translate.go).
			// Read as a map key through dyn: "namespace" is a CEL reserved word, not a field name CEL can select.
			expression: `!has(object.spec.dataSourceRef) || !('namespace' in dyn(object.spec.dataSourceRef)) ||
	string(dyn(object.spec.dataSourceRef)['namespace']) in ['', request.namespace]`,
			message: `'tenant ' + variables.tenant + ': PersistentVolumeClaim ' + object.metadata.name +
	' fills its volume from namespace ' + string(dyn(object.spec.dataSourceRef)['namespace']) +
	'; the data source of a tenant claim must be in its own namespace'`,
		},
		{
			expression: `!has(object.spec.selector)`,
			message: `'tenant ' + variables.tenant + ': PersistentVolumeClaim ' + object.metadata.name +
	' selects existing volumes by label; tenant claims get new volumes from a storage class'`,
		},
		{
			expression: `object.spec.?storageClassName.hasValue() || object.metadata.?annotations[?$BETA_CLASS].hasValue()`,
			message: `'tenant ' + variables.tenant + ': PersistentVolumeClaim ' + object.metadata.name +
	' names no storage class and the cluster has no default class to give it, so it would bind an existing volume without a class; ' +
	'name a storage class, or give the cluster a default one'`,
		},
		{
			expression: `(!has(object.spec.storageClassName) || object.spec.storageClassName != '') &&
	object.metadata.?annotations[?$BETA_CLASS].orValue('-') != ''`,
			message: `'tenant ' + variables.tenant + ': PersistentVolumeClaim ' + object.metadata.name +
	' asks for the empty storage class, which binds an existing volume without a class; tenant claims get new volumes from a storage class'`,
		},
	},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "BETA_CLASS": celString(betaStorageClassAnnotation)},
}

// betaStorageClassAnnotation is the storage class's older spelling, which the persistent-volume controller still reads
// before spec.storageClassName, and with which the DefaultStorageClass plugin leaves a claim alone
// (kubernetes v1.34.4 pkg/controller/volume/persistentvolume/pv_controller.go, pkg/api/v1/persistentvolume
// GetPersistentVolumeClaimClass): empty, it asks for no class too.
const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// podVolumeTypesPolicy: a tenant pod's inline volumes are of the kinds Pod Security's restricted level allows,
// whatever the namespace's level (k8s.io/pod-security-admission v0.34.4 policy/check_restrictedVolumes.go). At
// baseline, the default, Pod Security refuses hostPath only, and every other in-tree volume is mounted by the kubelet
// from the node's own network namespace with the node's credentials: an `nfs`, `iscsi`, `rbd`, `cephfs`, `glusterfs`
// or `fc` volume reaches any server the nodes can, outside the tenant's NetworkPolicies and blocked egress ranges, as
// any uid the pod picks; a cloud disk (`gcePersistentDisk` and the like, served by the cloud's CSI driver since their
// migration) is attached by name, whoever's it is; `gitRepo` runs git on the node; `flexVolume` runs a node binary.
// vCluster copies these volumes to the host as the virtual pod has them (loft-sh/vcluster v0.36.1
// pkg/controllers/resources/pods/translate/translator.go translateVolumes), so every pod in a tenant namespace is
// checked, whoever creates it. A tenant's own network storage is reached through a PersistentVolumeClaim of a class the
// operator provides (an NFS or Filestore CSI class), which the volume-claims guard and the storage quota bound.
// Inline CSI volumes stay allowed, as restricted allows them (docs/threat-model.md, "CSI inline volumes").
//
// A projected service-account token is requested by the kubelet, under the node's identity and so outside the
// tenant's API share, once for each distinct audience and lifetime a pod names, and again before each expires (k8s.io/kubernetes
// v1.36.3 pkg/kubelet/token/token_manager.go: its cache key is the account, audiences, lifetime and pod): a pod of
// many volumes, each of its own audience or of the shortest lifetime, makes the nodes ask the API server for a token
// per volume every 8 minutes, and an audience of the tenant's choosing is a token other systems that trust the
// cluster's issuer may take. Tenant pods need neither: vCluster gives a virtual pod's tokens as the virtual cluster's
// own, from an annotation, and never writes a token projection to the host (the pods its syncer writes, read on the
// local stack's real nodes: tests/nodes), so the only one allowed is the one the ServiceAccount admission plugin adds,
// the API server's audience and 3607 seconds (v1.36.3 plugin/pkg/admission/serviceaccount/admission.go
// TokenVolumeSource, pkg/serviceaccount/claims.go WarnOnlyBoundTokenExpirationSeconds): one token per pod.
var podVolumeTypesPolicy = admissionPolicy{
	name:  PodVolumeTypesPolicy,
	rules: []admissionRule{{group: "", resources: []string{"pods"}, operations: create}},
	variables: []celNamed{{"tenant", celTenant}, {"refused", `object.spec.?volumes.orValue([]).filter(v, !(` + celHasAny("v", tenantVolumeTypes) + `)).map(v, v.name)`},
		// A projected volume of no sources holds a null list, which no iteration takes (its field has no omitempty).
		{"tokens", `object.spec.?volumes.orValue([]).filter(v, has(v.projected) && type(v.projected.?sources.orValue([])) == list &&
	v.projected.sources.exists(s, has(s.serviceAccountToken) && (s.serviceAccountToken.?audience.orValue('') != '' || s.serviceAccountToken.?expirationSeconds.orValue(0) != $TOKEN_SECONDS))).map(v, v.name)`}},
	validations: []celValidation{{
		expression: `size(variables.refused) == 0`,
		message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' has volumes ' + variables.refused.join(', ') +
	' of a kind the node mounts with its own network and credentials; tenant pods may use ' + $TYPES.join(', ') +
	' volumes, and reach network storage through a PersistentVolumeClaim of a storage class'`,
	}, {
		expression: `size(variables.tokens) == 0`,
		message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' has volumes ' + variables.tokens.join(', ') +
	' projecting a service-account token of an audience or lifetime of its own, which the node requests under its own identity; ' +
	'tenant pods get the token the API server adds (its own audience, ' + string($TOKEN_SECONDS) + ' seconds), and a virtual pod its vCluster\'s token'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "TYPES": celList(tenantVolumeTypes),
		"TOKEN_SECONDS": fmt.Sprint(injectedTokenSeconds)},
}

// injectedTokenSeconds is the lifetime of the token volume the ServiceAccount admission plugin adds to a pod
// (k8s.io/kubernetes v1.36.3 pkg/serviceaccount/claims.go WarnOnlyBoundTokenExpirationSeconds).
const injectedTokenSeconds = 3607

// tenantVolumeTypes are the pod volume sources Pod Security's restricted level allows
// (k8s.io/pod-security-admission v0.34.4 policy/check_restrictedVolumes.go restrictedVolumes_1_0).
var tenantVolumeTypes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
	"projected", "secret"}

// celHasAny is CEL that is true when the object named v has any of the fields.
func celHasAny(v string, fields []string) string {
	terms := make([]string, len(fields))
	for i, f := range fields {
		terms[i] = "has(" + v + "." + f + ")"
	}
	return strings.Join(terms, " || ")
}
