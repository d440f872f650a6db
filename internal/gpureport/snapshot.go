// Package gpureport answers the operators' questions about the platform from typed Kubernetes objects: how many GPU
// devices each class of the catalog has and who holds them (Capacity), which claims wait and why (Pending), and
// which of the platform's invariants the live cluster breaks (Audit). Every function here is pure over a Snapshot,
// so the reports are tested without a cluster; the kube subpackage fills a Snapshot from an API server.
package gpureport

import (
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// APIVersion versions the capacity and pending documents (AuditAPIVersion the audit's): each kind is versioned on its
// own, and a change that breaks a consumer of its JSON gets it a new version.
const APIVersion = "gpu-tenancy.io/v1alpha1"

// Snapshot is what the reports read from the cluster. Each command fills only what it needs (see Needs); the
// functions filter again themselves, so a server that ignores a field selector gives the same answer.
type Snapshot struct {
	// Namespaces are the tenants' host namespaces (label naming.TenantNamespaceLabel).
	Namespaces     []corev1.Namespace
	DeviceClasses  []resourcev1.DeviceClass
	ResourceSlices []resourcev1.ResourceSlice
	ResourceClaims []resourcev1.ResourceClaim
	ClaimTemplates []resourcev1.ResourceClaimTemplate
	ResourceQuotas []corev1.ResourceQuota
	LimitRanges    []corev1.LimitRange
	// Pods are the pods the scheduler has not bound yet.
	Pods []corev1.Pod
	// Events are the FailedResourceClaimCreation events: the resource claim controller's, or anyone's who may write
	// events in their namespace.
	Events         []corev1.Event
	PolicyBindings []admissionv1.ValidatingAdmissionPolicyBinding
	Policies       []admissionv1.ValidatingAdmissionPolicy
	// VClusterConfigs are each tenant's own vCluster config Secret, read by name whatever its labels; the audit reads
	// the config Secrets among them.
	VClusterConfigs []corev1.Secret
	// VClusterStatefulSets are each tenant's own vCluster StatefulSet, read by name: the control planes whose pod
	// templates pin their config's hash.
	VClusterStatefulSets []appsv1.StatefulSet
	// ServiceCIDRs and IPAddresses are the cluster's Service range and the addresses held in it; none where the API
	// server does not serve them (before Kubernetes 1.33).
	ServiceCIDRs []networkingv1.ServiceCIDR
	IPAddresses  []networkingv1.IPAddress
}

// Need names one kind of object a report reads.
type Need int

// The kinds of objects the reports read.
const (
	NeedNamespaces Need = 1 << iota
	NeedDeviceClasses
	NeedResourceSlices
	NeedResourceClaims
	NeedClaimTemplates
	NeedResourceQuotas
	NeedLimitRanges
	NeedPods
	NeedEvents
	NeedPolicies
	NeedVClusterConfigs
	NeedServiceRange
)

// What each report reads.
const (
	CapacityNeeds = NeedNamespaces | NeedDeviceClasses | NeedResourceSlices | NeedResourceClaims | NeedResourceQuotas |
		NeedServiceRange
	PendingNeeds = NeedNamespaces | NeedDeviceClasses | NeedResourceSlices | NeedResourceClaims | NeedClaimTemplates |
		NeedPods | NeedEvents
	AuditNeeds = NeedNamespaces | NeedDeviceClasses | NeedResourceClaims | NeedResourceQuotas | NeedLimitRanges |
		NeedPolicies | NeedVClusterConfigs
)

// Has reports whether n includes all of m.
func (n Need) Has(m Need) bool { return n&m == m }

// tenants maps each tenant namespace to its tenant.
func (s *Snapshot) tenants() map[string]string {
	out := make(map[string]string, len(s.Namespaces))
	for i := range s.Namespaces {
		ns := &s.Namespaces[i]
		if t := ns.Labels[naming.TenantNamespaceLabel]; t != "" && ns.DeletionTimestamp == nil {
			out[ns.Name] = t
		}
	}
	return out
}

// classes indexes the DeviceClasses by name.
func (s *Snapshot) classes() map[string]*resourcev1.DeviceClass {
	out := make(map[string]*resourcev1.DeviceClass, len(s.DeviceClasses))
	for i := range s.DeviceClasses {
		out[s.DeviceClasses[i].Name] = &s.DeviceClasses[i]
	}
	return out
}

// granted reports whether class carries the grant label of tenant.
func granted(class *resourcev1.DeviceClass, tenant string) bool {
	return class != nil && class.Labels[naming.ClassTenantLabel(tenant)] == "true"
}

// catalog reports whether the platform manages class.
func catalog(class *resourcev1.DeviceClass) bool {
	return class.Labels[naming.ManagedByLabel] == naming.ManagedBy
}

// claimClasses lists the classes a claim (or template) may be allocated from, in request order, once each.
func claimClasses(spec *resourcev1.ResourceClaimSpec) []string {
	var out []string
	add := func(c string) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			add(r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			add(sub.DeviceClassName)
		}
	}
	return out
}

// resultClass is the class an allocation result was allocated for: results name their request "<request>" or, for
// a firstAvailable choice, "<request>/<subrequest>".
func resultClass(spec *resourcev1.ResourceClaimSpec, request string) string {
	main, sub, isSub := strings.Cut(request, "/")
	for _, r := range spec.Devices.Requests {
		if r.Name != main {
			continue
		}
		if !isSub {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}

// ageSeconds is how long ago t was, never negative (clocks of client and server differ).
func ageSeconds(now, t time.Time) int64 {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return int64(now.Sub(t) / time.Second)
}
