package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const deviceClassV1 = "kubernetes:resource.k8s.io/v1:DeviceClass"

func tenantNamespace(tenant, level string) map[string]any {
	labels := map[string]any{"gpu-tenancy.io/tenant": tenant, "app.kubernetes.io/managed-by": "gpu-tenancy"}
	if level != "" {
		labels["pod-security.kubernetes.io/enforce"] = level
	}
	return map[string]any{"metadata": map[string]any{"name": "vcluster-" + tenant, "labels": labels}}
}

func tenantQuota(namespace any, hard map[string]any) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"name": "tenant-quota", "namespace": namespace},
		"spec":     map[string]any{"hard": hard},
	}
}

// localStack is the local stack's tenancy as stacks/plans/local.json shows it: two tenants, a class each.
func localStack() []resource {
	return []resource{
		res(namespaceType, "legal-ai-namespace", tenantNamespace("legal-ai", "restricted")),
		res(namespaceType, "research-ai-namespace", tenantNamespace("research-ai", "baseline")),
		res(resourceQuotaType, "legal-ai-quota", tenantQuota("vcluster-legal-ai",
			map[string]any{"gpu-whole.deviceclass.resource.k8s.io/devices": "3", "requests.cpu": "8"})),
		res(resourceQuotaType, "research-ai-quota", tenantQuota("vcluster-research-ai",
			map[string]any{"gpu-slice.deviceclass.resource.k8s.io/devices": "2", "requests.cpu": "8"})),
		res(deviceClassV1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole", map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"})),
		res(deviceClassV1, "gpu-catalog-gpu-slice", deviceClass("gpu-slice", map[string]any{"tenant.gpu-tenancy.io/research-ai": "true"})),
		res("kubernetes:core/v1:Namespace", "platform-namespace", map[string]any{"metadata": map[string]any{"name": "vcluster-platform"}}),
	}
}

// replace returns the stack with the resource named name replaced by r (or removed when r is nil), and extra added.
func replace(stack []resource, name string, r *resource, extra ...resource) []resource {
	var out []resource
	for _, s := range stack {
		switch {
		case s.Name != name:
			out = append(out, s)
		case r != nil:
			out = append(out, *r)
		}
	}
	return append(out, extra...)
}

func ptrTo(r resource) *resource { return &r }

func TestTenantNamespaces(t *testing.T) {
	stack := localStack()
	legalNS := "legal-ai-namespace"
	legalQuota := func(namespace any, hard map[string]any) *resource {
		return ptrTo(res(resourceQuotaType, "legal-ai-quota", tenantQuota(namespace, hard)))
	}
	cpuOnly := map[string]any{"requests.cpu": "8"}
	whole := map[string]any{"gpu-whole.deviceclass.resource.k8s.io/devices": "3"}
	for _, c := range []struct {
		name  string
		stack []resource
		// want maps the URN of each resource with a violation to fragments of its message.
		want map[string][]string
	}{
		{name: "the local stack holds", stack: stack},
		{name: "a quota key in a second quota of the namespace counts",
			stack: replace(stack, "legal-ai-quota", legalQuota("vcluster-legal-ai", cpuOnly),
				res(resourceQuotaType, "legal-ai-devices", tenantQuota("vcluster-legal-ai", whole)))},
		{name: "a platform-only class needs no tenant quota", stack: append(stack,
			res(deviceClassV1, "gpu-catalog-gpu-ops", deviceClass("gpu-ops", map[string]any{"gpu-tenancy.io/platform-only": "true"})))},
		{name: "a namespace without the tenant label needs no quota", stack: append(stack,
			res(namespaceType, "other", map[string]any{"metadata": map[string]any{"name": "other"}}))},

		{name: "no quota in a tenant namespace", stack: replace(stack, "legal-ai-quota", nil),
			want: map[string][]string{legalNS: {"tenant namespace vcluster-legal-ai (resource legal-ai-namespace)", "has no ResourceQuota",
				"metadata.namespace vcluster-legal-ai"}}},
		{name: "the quota lacks a granted class's key", stack: replace(stack, "legal-ai-quota", legalQuota("vcluster-legal-ai", cpuOnly)),
			want: map[string][]string{legalNS: {"no quota on DeviceClass gpu-whole", "tenant legal-ai",
				"add gpu-whole.deviceclass.resource.k8s.io/devices to spec.hard"}}},
		{name: "a class granted to two tenants needs a key in both", stack: replace(stack, "gpu-catalog-gpu-whole",
			ptrTo(res(deviceClassV1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole",
				map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true", "tenant.gpu-tenancy.io/research-ai": "true"})))),
			want: map[string][]string{"research-ai-namespace": {"vcluster-research-ai", "no quota on DeviceClass gpu-whole"}}},
		{name: "a class asked for by name is capped on its name too", stack: replace(stack, "gpu-catalog-gpu-whole",
			ptrTo(res(deviceClassV1, "gpu-catalog-gpu-whole", with(deviceClass("gpu-whole", map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"}),
				"spec.extendedResourceName", "gpu-tenancy.io/gpu-whole"))),
			*legalQuota("vcluster-legal-ai", map[string]any{"gpu-whole.deviceclass.resource.k8s.io/devices": "3", "requests.gpu-tenancy.io/gpu-whole": "3"}))},
		{name: "the quota lacks a granted class's name", stack: replace(stack, "gpu-catalog-gpu-whole",
			ptrTo(res(deviceClassV1, "gpu-catalog-gpu-whole", with(deviceClass("gpu-whole", map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"}),
				"spec.extendedResourceName", "gpu-tenancy.io/gpu-whole")))),
			want: map[string][]string{legalNS: {"no quota on gpu-tenancy.io/gpu-whole, the extended-resource name of DeviceClass gpu-whole",
				"waits in the scheduler", "add requests.gpu-tenancy.io/gpu-whole to spec.hard"}}},
		{name: "a quota in another namespace does not count", stack: replace(stack, "legal-ai-quota", legalQuota("default", whole)),
			want: map[string][]string{legalNS: {"has no ResourceQuota"}}},
		{name: "a scoped quota never counts claims", stack: replace(stack, "legal-ai-quota", ptrTo(res(resourceQuotaType, "legal-ai-quota",
			with(tenantQuota("vcluster-legal-ai", whole), "spec.scopes", []any{"BestEffort"})))),
			want: map[string][]string{legalNS: {"has no ResourceQuota"}}},
		{name: "a quota with a scope selector never counts claims", stack: replace(stack, "legal-ai-quota", ptrTo(res(resourceQuotaType,
			"legal-ai-quota", with(tenantQuota("vcluster-legal-ai", whole), "spec.scopeSelector",
				map[string]any{"matchExpressions": []any{map[string]any{"scopeName": "PriorityClass", "operator": "Exists"}}})))),
			want: map[string][]string{legalNS: {"has no ResourceQuota"}}},
		{name: "no Pod Security label", stack: replace(stack, legalNS, ptrTo(res(namespaceType, legalNS, tenantNamespace("legal-ai", "")))),
			want: map[string][]string{legalNS: {"has no label pod-security.kubernetes.io/enforce", "baseline or restricted"}}},
		{name: "privileged Pod Security", stack: replace(stack, legalNS,
			ptrTo(res(namespaceType, legalNS, tenantNamespace("legal-ai", "privileged")))),
			want: map[string][]string{legalNS: {`enforces Pod Security "privileged"`}}},

		{name: "Pod Security level unknown: not applicable", stack: replace(stack, legalNS,
			ptrTo(res(namespaceType, legalNS, tenantNamespace("legal-ai", "")).withProp("metadata", map[string]any{"name": "vcluster-legal-ai",
				"labels": map[string]any{"gpu-tenancy.io/tenant": "legal-ai", "pod-security.kubernetes.io/enforce": unknown}})))},
		{name: "namespace labels unknown: not applicable", stack: replace(replace(stack, "legal-ai-quota", nil), legalNS,
			ptrTo(res(namespaceType, legalNS, map[string]any{"metadata": map[string]any{"name": "vcluster-legal-ai", "labels": unknown}})))},
		{name: "quota namespace unknown: not applicable", stack: replace(stack, "legal-ai-quota", legalQuota(unknown, cpuOnly))},
		{name: "quota hard unknown: not applicable", stack: replace(stack, "legal-ai-quota",
			ptrTo(res(resourceQuotaType, "legal-ai-quota", with(tenantQuota("vcluster-legal-ai", nil), "spec.hard", unknown))))},
		{name: "quota scopes unknown: not applicable", stack: replace(stack, "legal-ai-quota",
			ptrTo(res(resourceQuotaType, "legal-ai-quota", with(tenantQuota("vcluster-legal-ai", whole), "spec.scopes", unknown))))},
		{name: "namespace name unknown: not applicable", stack: replace(replace(stack, "legal-ai-quota", nil), legalNS,
			ptrTo(res(namespaceType, legalNS, tenantNamespace("legal-ai", "restricted")).withProp("metadata",
				map[string]any{"name": unknown, "labels": map[string]any{"gpu-tenancy.io/tenant": "legal-ai",
					"pod-security.kubernetes.io/enforce": "restricted"}})))},
		{name: "tenant unknown: not applicable", stack: replace(replace(stack, "legal-ai-quota", legalQuota("vcluster-legal-ai", cpuOnly)),
			legalNS, ptrTo(res(namespaceType, legalNS, tenantNamespace("legal-ai", "restricted")).withProp("metadata",
				map[string]any{"name": "vcluster-legal-ai", "labels": map[string]any{"gpu-tenancy.io/tenant": unknown,
					"pod-security.kubernetes.io/enforce": "restricted"}})))},
		{name: "class name unknown: not applicable", stack: replace(replace(stack, "legal-ai-quota", legalQuota("vcluster-legal-ai", cpuOnly)),
			"gpu-catalog-gpu-whole", ptrTo(res(deviceClassV1, "gpu-catalog-gpu-whole", map[string]any{"metadata": map[string]any{
				"name": unknown, "labels": map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"}}})))},
		{name: "class labels unknown: not applicable", stack: replace(replace(stack, "legal-ai-quota", legalQuota("vcluster-legal-ai", cpuOnly)),
			"gpu-catalog-gpu-whole", ptrTo(res(deviceClassV1, "gpu-catalog-gpu-whole", map[string]any{"metadata": map[string]any{
				"name": "gpu-whole", "labels": unknown}})))},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := checkTenantNamespaces(c.stack)
			byURN := map[string][]string{}
			for _, v := range got {
				byURN[v.URN] = append(byURN[v.URN], v.Message)
			}
			want := map[string][]string{}
			for name, fragments := range c.want {
				want[urnOf(namespaceType, name)] = fragments
			}
			require.Len(t, byURN, len(want), "violations: %q", messages(got))
			for urn, fragments := range want {
				require.Len(t, byURN[urn], 1, "one violation on %s: %q", urn, messages(got))
				for _, f := range fragments {
					assert.Contains(t, strings.Join(byURN[urn], "\n"), f)
				}
			}
		})
	}
}
