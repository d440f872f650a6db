package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// Kubernetes core types the stack policy reads (pulumi-kubernetes sdk v4.32.0 go/kubernetes/core/v1).
const (
	namespaceType     = "kubernetes:core/v1:Namespace"
	resourceQuotaType = "kubernetes:core/v1:ResourceQuota"
)

// quota is what the stack policy needs of a ResourceQuota.
type quota struct {
	namespace      string
	namespaceKnown bool
	// counts is false for a quota with scopes or a scopeSelector: ResourceClaims match no quota scope, so such a
	// quota never caps devices (k8s.io/kubernetes v1.34.4 pkg/quota/v1/evaluator/core/resource_claims.go Matches with
	// generic.MatchesNoScopeFunc; k8s.io/apiserver v0.34.4 pkg/quota/v1/generic/evaluator.go Matches).
	counts      bool
	countsKnown bool
	hard        map[string]property.Value
	hardKnown   bool
}

func readQuota(r resource) quota {
	q := quota{}
	ns, nsKnown := lookup(r.Props, "metadata", "namespace")
	q.namespace, _ = str(ns)
	q.namespaceKnown = nsKnown
	scopes, scopesKnown := lookup(r.Props, "spec", "scopes")
	selector, selectorKnown := lookup(r.Props, "spec", "scopeSelector")
	q.countsKnown = scopesKnown && selectorKnown
	q.counts = len(elements(scopes)) == 0 && selector.IsNull()
	hard, hardKnown := lookup(r.Props, "spec", "hard")
	q.hard, q.hardKnown = entries(hard), hardKnown
	return q
}

// covers tells whether the quota caps a resource key in namespace ns.
func (q quota) covers(ns, key string) presence {
	switch {
	case q.namespaceKnown && q.namespace != ns, q.countsKnown && !q.counts:
		return absent
	case !q.namespaceKnown || !q.countsKnown || !q.hardKnown:
		return unknowable
	}
	if _, ok := q.hard[key]; ok {
		return present
	}
	return absent
}

// in tells whether the quota is one of namespace ns's quotas that count.
func (q quota) in(ns string) presence {
	switch {
	case q.namespaceKnown && q.namespace != ns, q.countsKnown && !q.counts:
		return absent
	case !q.namespaceKnown || !q.countsKnown:
		return unknowable
	}
	return present
}

// strongest folds presences: present beats unknowable beats absent.
func strongest(ps ...presence) presence {
	out := absent
	for _, p := range ps {
		if p == present {
			return present
		}
		if p == unknowable {
			out = unknowable
		}
	}
	return out
}

// checkTenantNamespaces is the stack policy: every tenant namespace (a Namespace labelled naming.TenantNamespaceLabel)
// enforces a tenant Pod Security level (naming.TenantPodSecurityLevels; privileged would let a pod on a GPU node see
// every GPU of the node outside any claim) and has an unscoped ResourceQuota whose spec.hard caps the devices of every
// DeviceClass labelled for its tenant (naming.DeviceQuotaKey): a class without a quota key can be claimed without
// limit up to the whole pool. It reads the stack's final state, so it sees the quotas and classes of every resource.
func checkTenantNamespaces(resources []resource) []violation {
	var quotas []quota
	var classes []resource
	for _, r := range resources {
		switch {
		case r.Type == resourceQuotaType:
			quotas = append(quotas, readQuota(r))
		case slices.Contains(deviceClassTypes, r.Type):
			classes = append(classes, r)
		}
	}

	var out []violation
	for _, r := range resources {
		if r.Type != namespaceType {
			continue
		}
		labels, known := lookup(r.Props, "metadata", "labels")
		tenantValue, isTenant := entries(labels)[naming.TenantNamespaceLabel]
		if !known || !isTenant {
			continue
		}
		nameValue, _ := lookup(r.Props, "metadata", "name")
		ns, nsKnown := str(nameValue)
		what := fmt.Sprintf("tenant namespace %s", r.Name)
		if nsKnown {
			what = fmt.Sprintf("tenant namespace %s (resource %s)", ns, r.Name)
		}
		report := func(format string, args ...any) {
			out = append(out, violation{URN: r.URN, Message: what + " " + fmt.Sprintf(format, args...)})
		}

		levels := strings.Join(naming.TenantPodSecurityLevels, " or ")
		switch level := entries(labels)[naming.PodSecurityEnforceLabel]; {
		case level.IsComputed():
		case level.IsNull():
			report("has no label %s, so Pod Security Admission enforces nothing there (privileged) and a pod on a "+
				"GPU node may see every GPU of the node outside any claim: set the label to %s (tenants[].podSecurity)",
				naming.PodSecurityEnforceLabel, levels)
		case !slices.Contains(naming.TenantPodSecurityLevels, stringOr(level, "")):
			report("enforces Pod Security %s (label %s), which lets a pod on a GPU node see every GPU of the node "+
				"outside any claim: set the label to %s (tenants[].podSecurity)", show(level), naming.PodSecurityEnforceLabel, levels)
		}

		if !nsKnown {
			continue
		}
		inNamespace := make([]presence, len(quotas))
		for i, q := range quotas {
			inNamespace[i] = q.in(ns)
		}
		if strongest(inNamespace...) == absent {
			report("has no ResourceQuota (without scopes) in it, so nothing caps the devices its tenant may claim: "+
				"create one with metadata.namespace %s and a spec.hard key %s for each class granted to the tenant "+
				"(tenants[].gpuQuota)", ns, naming.DeviceQuotaKey("<class>"))
			continue
		}
		tenant, tenantKnown := str(tenantValue)
		if !tenantKnown {
			continue
		}
		for _, c := range classes {
			o := deviceClassOwners(c)
			nameValue, _ := lookup(c.Props, "metadata", "name")
			class, classKnown := str(nameValue)
			if !classKnown || !slices.Contains(o.Tenants, tenant) {
				continue
			}
			key := naming.DeviceQuotaKey(class)
			if !covered(quotas, ns, key) {
				report("has no quota on DeviceClass %s, which is granted to tenant %s (label %s=true), so the tenant "+
					"may claim its devices without limit: add %s to spec.hard of the namespace's ResourceQuota "+
					"(tenants[].gpuQuota.%s)", class, tenant, naming.ClassTenantLabel(tenant), key, class)
			}
			// A pod asking for the class by name is charged the name at creation only if the quota caps it; else it
			// is refused only when the scheduler creates its claim, and waits there.
			resourceValue, _ := lookup(c.Props, "spec", "extendedResourceName")
			if name, named := str(resourceValue); named && name != "" && !covered(quotas, ns, naming.RequestsQuotaKey(name)) {
				report("has no quota on %s, the extended-resource name of DeviceClass %s, which is granted to tenant %s: "+
					"a pod asking for more than its quota waits in the scheduler instead of being refused: add %s to "+
					"spec.hard of the namespace's ResourceQuota (tenants[].gpuQuota.%s)", name, class, tenant,
					naming.RequestsQuotaKey(name), class)
			}
		}
	}
	return out
}

// covered says whether any quota may cap key in namespace ns.
func covered(quotas []quota, ns, key string) bool {
	presences := make([]presence, len(quotas))
	for i, q := range quotas {
		presences[i] = q.covers(ns, key)
	}
	return strongest(presences...) != absent
}

// stringOr is v's string, or def when v is not a known string.
func stringOr(v property.Value, def string) string {
	if s, ok := str(v); ok {
		return s
	}
	return def
}
