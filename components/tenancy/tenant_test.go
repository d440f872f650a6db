package tenancy

import (
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"maps"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func teamA() TenantArgs {
	return TenantArgs{
		Name:        "team-a",
		Classes:     []string{"a100", "a100-1g.5gb"},
		GPUQuota:    map[string]int{"a100": 2, "a100-1g.5gb": 7},
		CPUQuota:    "16",
		MemoryQuota: "64Gi",
	}
}

func teamB() TenantArgs {
	return TenantArgs{
		Name:        "team-b",
		Classes:     []string{"a100-1g.5gb", "l4"},
		GPUQuota:    map[string]int{"a100-1g.5gb": 3, "l4": 1},
		CPUQuota:    "8",
		MemoryQuota: "32Gi",
	}
}

func TestTenantNamespace(t *testing.T) {
	restricted := teamB()
	restricted.PodSecurity = naming.PodSecurityRestricted
	tests := []struct {
		tenant    TenantArgs
		wantLevel string
	}{
		{teamA(), "baseline"},
		{restricted, "restricted"},
	}
	rec := runPlatform(t, testClasses, teamA(), restricted)
	for _, tt := range tests {
		t.Run(tt.tenant.Name, func(t *testing.T) {
			name := tt.tenant.Name
			ns := child[corev1.Namespace](t, rec, namespaceType, name+"-namespace", tenantType)
			assert.Equal(t, naming.Namespace(name), ns.Name)
			assert.Equal(t, map[string]string{
				naming.ManagedByLabel:                        naming.ManagedBy,
				naming.TenantNamespaceLabel:                  name,
				"pod-security.kubernetes.io/enforce":         tt.wantLevel,
				"pod-security.kubernetes.io/enforce-version": "v1.34",
				"pod-security.kubernetes.io/warn":            "restricted",
				"pod-security.kubernetes.io/warn-version":    "v1.34",
				"pod-security.kubernetes.io/audit":           "restricted",
				"pod-security.kubernetes.io/audit-version":   "v1.34",
				naming.GrantsLabel:                           "true",
				naming.ClassGrantLabel(tt.tenant.Classes[0]): "true",
				naming.ClassGrantLabel(tt.tenant.Classes[1]): "true",
			}, ns.Labels)
			deps := get(t, rec, namespaceType, name+"-namespace").Dependencies
			for _, guard := range []string{"gpus-entitlements", "gpus-claim-namespaces", "gpus-runtime-env", "gpus-runtime-env-keys",
				"gpus-extended-resources", "gpus-claim-shape"} {
				assert.Contains(t, deps, get(t, rec, bindingType, guard).URN, "the namespace must not exist before %s", guard)
			}
		})
	}
}

// One entitlement policy serves every tenant: no tenant has a policy or binding of its own, and the policy reads each
// tenant's grants from its namespace's labels, so adding a tenant changes no policy.
func TestOneEntitlementPolicyForEveryTenant(t *testing.T) {
	specOf := func(tenants ...TenantArgs) (map[string]any, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		rec := runPlatform(t, testClasses, tenants...)
		for _, reg := range rec.ByType(policyType) {
			assert.NotEqual(t, tenantType, string(resource.URN(reg.Parent).Type()), "policy %s belongs to a tenant", reg.Name)
		}
		b := decode[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, get(t, rec, bindingType, "gpus-entitlements"))
		return get(t, rec, policyType, "gpus-entitlements").Inputs["spec"].Mappable().(map[string]any), b
	}
	one, binding := specOf(teamA())
	two, _ := specOf(teamA(), teamB())
	assert.Equal(t, one, two, "adding a tenant changes no policy")
	assert.Equal(t, naming.EntitlementPolicy, binding.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, binding.Spec.ValidationActions)
	require.NotNil(t, binding.Spec.MatchResources)
	assert.Equal(t, map[string]string{naming.GrantsLabel: "true"}, binding.Spec.MatchResources.NamespaceSelector.MatchLabels,
		"namespaces whose grants are labels; an earlier version's keep their own policy until labelled")
}

func TestTenantQuota(t *testing.T) {
	// Every object count a tenant could exhaust for everyone, at its default unless the tenant sets it.
	objects := func(overrides map[string]string) map[string]string {
		m := map[string]string{
			"pods": "100", "services": "20", "services.loadbalancers": "0", "services.nodeports": "0", "configmaps": "100",
			"secrets": "100", "persistentvolumeclaims": "10", "count/resourceclaims.resource.k8s.io": "100",
			"count/resourceclaimtemplates.resource.k8s.io": "50", "count/endpointslices.discovery.k8s.io": "100",
			"count/endpoints": "50",
		}
		maps.Copy(m, overrides)
		return m
	}
	b := teamB()
	b.ObjectQuota = map[string]int{"pods": 12, "services.loadbalancers": 1}
	b.StorageQuota = "20Gi"
	b.MemoryLimitQuota = "48Gi"
	tests := []struct {
		tenant TenantArgs
		want   map[string]string
	}{
		{teamA(), objects(map[string]string{
			"requests.cpu": "16", "requests.memory": "64Gi", "requests.storage": "100Gi",
			"a100.deviceclass.resource.k8s.io/devices": "2", "a100-1g.5gb.deviceclass.resource.k8s.io/devices": "7",
		})},
		{b, objects(map[string]string{
			"requests.cpu": "8", "requests.memory": "32Gi", "limits.memory": "48Gi", "requests.storage": "20Gi",
			"a100-1g.5gb.deviceclass.resource.k8s.io/devices": "3", "l4.deviceclass.resource.k8s.io/devices": "1",
			"pods": "12", "services.loadbalancers": "1",
		})},
	}
	rec := runPlatform(t, testClasses, teamA(), b)
	for _, tt := range tests {
		t.Run(tt.tenant.Name, func(t *testing.T) {
			q := child[corev1.ResourceQuota](t, rec, quotaType, tt.tenant.Name+"-quota", tenantType)
			assert.Equal(t, naming.Namespace(tt.tenant.Name), q.Namespace)
			assert.Equal(t, tt.want, quantities(q.Spec.Hard))
		})
	}
	// With l4 asked for by name, its name is capped as its devices are, for every tenant granted it.
	named := runPlatformNamed(t, []string{"l4"}, testClasses, teamA(), b)
	tests[1].want["requests.gpu-tenancy.io/l4"] = "1"
	for _, tt := range tests {
		t.Run(tt.tenant.Name+" with l4 asked for by name", func(t *testing.T) {
			q := child[corev1.ResourceQuota](t, named, quotaType, tt.tenant.Name+"-quota", tenantType)
			assert.Equal(t, naming.Namespace(tt.tenant.Name), q.Namespace)
			assert.Equal(t, tt.want, quantities(q.Spec.Hard))
		})
	}
}

func TestTenantLimitRange(t *testing.T) {
	tests := []struct {
		name        string
		limits      LimitRange
		wantRequest map[string]string
		wantLimit   map[string]string
	}{
		{
			name:        "a container without a limit may use up to the memory quota",
			wantRequest: map[string]string{"cpu": "100m", "memory": "128Mi"},
			wantLimit:   map[string]string{"memory": "64Gi"},
		},
		{
			name:        "configured values with a CPU limit",
			limits:      LimitRange{DefaultRequest: ContainerResources{CPU: "250m", Memory: "256Mi"}, DefaultLimit: ContainerResources{CPU: "2", Memory: "2Gi"}},
			wantRequest: map[string]string{"cpu": "250m", "memory": "256Mi"},
			wantLimit:   map[string]string{"cpu": "2", "memory": "2Gi"},
		},
		{
			name:        "unset fields keep their defaults",
			limits:      LimitRange{DefaultRequest: ContainerResources{CPU: "50m"}},
			wantRequest: map[string]string{"cpu": "50m", "memory": "128Mi"},
			wantLimit:   map[string]string{"memory": "64Gi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := teamA()
			args.LimitRange = tt.limits
			rec := runPlatform(t, testClasses, args)
			lr := child[corev1.LimitRange](t, rec, limitRangeType, "team-a-limits", tenantType)
			assert.Equal(t, naming.Namespace("team-a"), lr.Namespace)
			require.Len(t, lr.Spec.Limits, 1)
			item := lr.Spec.Limits[0]
			assert.Equal(t, corev1.LimitTypeContainer, item.Type)
			assert.Equal(t, tt.wantRequest, quantities(item.DefaultRequest))
			assert.Equal(t, tt.wantLimit, quantities(item.Default))
			assert.Equal(t, map[string]string{"cpu": "10m", "memory": "16Mi"}, quantities(item.Min), "no pod is free")
		})
	}
}

func quantities(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

func TestTenantOutputs(t *testing.T) {
	type outputs struct {
		namespace string
		classes   []string
	}
	got := make(chan outputs, 1)
	err := mocktest.Run("test", func(ctx *pulumi.Context) error {
		args := teamB()
		catalog, err := NewCatalog(ctx, "gpus", &CatalogArgs{Classes: testClasses[1:],
			Grants: map[string][]string{"team-b": args.Classes}, Admission: testAdmission})
		if err != nil {
			return err
		}
		args.Catalog = catalog
		tenant, err := NewTenant(ctx, "team-b", &args)
		if err != nil {
			return err
		}
		assert.Equal(t, "team-b", tenant.Name)
		pulumi.All(tenant.Namespace, tenant.Classes).ApplyT(func(v []any) error {
			got <- outputs{namespace: v[0].(string), classes: v[1].([]string)}
			return nil
		})
		return nil
	}, &mocktest.Recorder{})
	require.NoError(t, err)
	select {
	case o := <-got:
		assert.Equal(t, "vcluster-team-b", o.namespace)
		assert.Equal(t, []string{"a100-1g.5gb", "l4"}, o.classes)
	case <-time.After(10 * time.Second):
		t.Fatal("tenant outputs never resolved")
	}
}

func TestTenantDefaults(t *testing.T) {
	args := teamA()
	args.CPUQuota, args.MemoryQuota = "", ""
	rec := runPlatform(t, testClasses, args)
	q := decode[corev1.ResourceQuota](t, get(t, rec, quotaType, "team-a-quota"))
	assert.Equal(t, DefaultCPUQuota, quantities(q.Spec.Hard)["requests.cpu"])
	assert.Equal(t, DefaultMemoryQuota, quantities(q.Spec.Hard)["requests.memory"])
	assert.NotContains(t, q.Spec.Hard, corev1.ResourceLimitsMemory, "no cap on limits unless memoryLimitQuota sets one")
	lr := decode[corev1.LimitRange](t, get(t, rec, limitRangeType, "team-a-limits"))
	assert.Equal(t, DefaultMemoryQuota, quantities(lr.Spec.Limits[0].Default)["memory"], "a container without a limit may use the quota")
}

func TestNewTenantRejectsInvalidArgs(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*TenantArgs)
		wantErr []string
	}{
		{"bad name", func(a *TenantArgs) { a.Name = "Team_A" }, []string{`"Team_A"`, "RFC 1123"}},
		{"name too long for its namespace", func(a *TenantArgs) { a.Name = "a234567890123456789012345678901234567890123456789012345" },
			[]string{"more than 54"}},
		{"class not in the catalog", func(a *TenantArgs) { a.Classes = []string{"a100", "a100-1g.5gb", "h100"} },
			[]string{`Unsupported value: "h100"`}},
		{"class listed twice", func(a *TenantArgs) { a.Classes = []string{"a100", "a100", "a100-1g.5gb"} },
			[]string{`Duplicate value: "a100"`}},
		{"quota missing for a granted class", func(a *TenantArgs) { delete(a.GPUQuota, "a100") },
			[]string{"tenant.gpuQuota[a100]: Required value"}},
		{"quota for a foreign class", func(a *TenantArgs) { a.GPUQuota["l4"] = 1 },
			[]string{`class "l4" is not granted`}},
		{"negative quota", func(a *TenantArgs) { a.GPUQuota["a100"] = -1 }, []string{"must be 0 or more"}},
		{"CPU quota zero", func(a *TenantArgs) { a.CPUQuota = "0" }, []string{"tenant.cpuQuota", "positive"}},
		{"memory quota malformed", func(a *TenantArgs) { a.MemoryQuota = "64GB!" }, []string{"tenant.memoryQuota", "quantity"}},
		{"default request above default limit", func(a *TenantArgs) {
			a.LimitRange.DefaultRequest.Memory = "1Gi"
			a.LimitRange.DefaultLimit.Memory = "512Mi"
		}, []string{"tenant.limitRange.defaultRequest.memory", "must not be above the default limit 512Mi"}},
		{"a limit quota below the default limit", func(a *TenantArgs) { a.MemoryLimitQuota = "32Gi" },
			[]string{"tenant.memoryLimitQuota", "must not be below the default memory limit 64Gi (tenant.limitRange.defaultLimit.memory)"}},
		{"no room for the vCluster's own Services", func(a *TenantArgs) { a.ObjectQuota = map[string]int{"services": 4} },
			[]string{"tenant.objectQuota[services]: Invalid value: 4: must be at least 5"}},
		{"fewer EndpointSlices than Services", func(a *TenantArgs) {
			a.ObjectQuota = map[string]int{"services": 120, "count/endpoints": 120}
		}, []string{"tenant.objectQuota[count/endpointslices.discovery.k8s.io]: Invalid value: 100"}},
		{"blocked CIDR malformed", func(a *TenantArgs) { a.BlockedEgressCIDRs = []string{"10.0.0.0/33"} },
			[]string{"tenant.blockedEgressCIDRs[0]", "must be a CIDR"}},
		{"blocked CIDR with host bits", func(a *TenantArgs) { a.BlockedEgressCIDRs = []string{"10.1.2.3/8"} },
			[]string{"use 10.0.0.0/8"}},
		{"blocked CIDR blocks everything", func(a *TenantArgs) { a.BlockedEgressCIDRs = []string{"0.0.0.0/0"} },
			[]string{"would block all egress"}},
		{"API server port out of range", func(a *TenantArgs) { a.Network.APIServerPorts = []int{0} },
			[]string{"network.apiServerPorts[0]"}},
		{"ingress namespace malformed", func(a *TenantArgs) { a.Network.IngressFromNamespaces = []string{"Platform"} },
			[]string{`network.ingressFromNamespaces[0]: Invalid value: "Platform"`}},
		{"privileged pods", func(a *TenantArgs) { a.PodSecurity = "privileged" },
			[]string{`tenant.podSecurity: Unsupported value: "privileged"`, `"baseline", "restricted"`}},
		{"an object count quota cannot name", func(a *TenantArgs) { a.ObjectQuota = map[string]int{"requests.cpu": 2} },
			[]string{`tenant.objectQuota[requests.cpu]: Unsupported value: "requests.cpu"`, `"pods"`}},
		{"a negative object count", func(a *TenantArgs) { a.ObjectQuota = map[string]int{"pods": -1} },
			[]string{"tenant.objectQuota[pods]", "must be 0 or more"}},
		{"storage quota malformed", func(a *TenantArgs) { a.StorageQuota = "lots" }, []string{"tenant.storageQuota"}},
		{"minimum above the default request", func(a *TenantArgs) { a.LimitRange.MinRequest.CPU = "200m" },
			[]string{"tenant.limitRange.minRequest.cpu", "must not be above the default request 100m"}},
		{"every problem at once", func(a *TenantArgs) { a.CPUQuota = "-1"; a.GPUQuota["l4"] = 1 },
			[]string{"tenant.cpuQuota", `class "l4" is not granted`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := teamA()
			tt.edit(&args)
			rec, err := tryPlatform(testClasses, args)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.Empty(t, rec.ByType(tenantType), "nothing of the tenant may be registered when args are invalid")
		})
	}
	t.Run("nil catalog", func(t *testing.T) {
		err := mocktest.Run("test", func(ctx *pulumi.Context) error {
			args := teamA()
			_, err := NewTenant(ctx, "team-a", &args)
			return err
		}, &mocktest.Recorder{})
		assert.ErrorContains(t, err, "catalog is required")
	})
	t.Run("nil args", func(t *testing.T) {
		err := mocktest.Run("test", func(ctx *pulumi.Context) error {
			_, err := NewTenant(ctx, "team-a", nil)
			return err
		}, &mocktest.Recorder{})
		assert.ErrorContains(t, err, "args are required")
	})
}

func TestTenantArgsValidateWithoutACatalog(t *testing.T) {
	args := teamA()
	require.Empty(t, args.Validate(field.NewPath("tenant")))
	args.GPUQuota["l4"] = 1
	errs := args.Validate(field.NewPath("tenant"))
	require.Len(t, errs, 1)
	assert.Equal(t, "tenant.gpuQuota[l4]", errs[0].Field)
}
