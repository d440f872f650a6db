package gpureport

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// cleanCluster is the local stack as the platform leaves it: two tenants with every guard rail, a granted claim
// each, and vClusters that sync only their own classes.
func cleanCluster(t *testing.T) Snapshot {
	s := Snapshot{
		Namespaces:    []corev1.Namespace{tenantNamespace(legal, "gpu-whole"), tenantNamespace(research, "gpu-slice")},
		DeviceClasses: []resourcev1.DeviceClass{deviceClass("gpu-whole", wholeCEL, legal), deviceClass("gpu-slice", sliceCEL, research)},
		ResourceClaims: []resourcev1.ResourceClaim{
			allocate(claim(legalNS, "whole-a", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0"),
			claim(researchNS, "slice-a", now, "gpu-slice"),
		},
		ResourceQuotas: []corev1.ResourceQuota{
			quota(legalNS, map[string]int64{naming.DeviceQuotaKey("gpu-whole"): 3}, nil),
			quota(researchNS, map[string]int64{naming.DeviceQuotaKey("gpu-slice"): 2}, nil),
		},
		LimitRanges: []corev1.LimitRange{limitRange(legalNS), limitRange(researchNS)},
		VClusterConfigs: []corev1.Secret{
			configSecret(t, legalNS, legal, tenantSelector(legal)),
			configSecret(t, researchNS, research, tenantSelector(research)),
		},
	}
	for _, c := range s.VClusterConfigs {
		s.VClusterStatefulSets = append(s.VClusterStatefulSets, controlPlane(c))
	}
	p, b := entitlement()
	s.Policies, s.PolicyBindings = append(s.Policies, p), append(s.PolicyBindings, b)
	return s
}

func TestAuditCleanCluster(t *testing.T) {
	s := cleanCluster(t)
	r := Audit(&s, now)
	assert.Empty(t, r.Findings)
	assert.Equal(t, AuditScope{Tenants: []string{legal, research}, DeviceClasses: 2, TenantClaims: 2, VClusters: 2}, r.Scope)
}

func TestAuditFindings(t *testing.T) {
	type found struct {
		Check, Tenant string
		Object        ObjectRef
	}
	cases := []struct {
		name   string
		modify func(t *testing.T, s *Snapshot)
		want   []found
	}{
		{
			name: "a tenant claim naming a class no longer granted",
			modify: func(t *testing.T, s *Snapshot) {
				delete(s.DeviceClasses[0].Labels, naming.ClassTenantLabel(legal))
				delete(s.Namespaces[0].Labels, naming.ClassGrantLabel("gpu-whole"))
			},
			want: []found{{CheckClaimClassNotGranted, legal, ObjectRef{"ResourceClaim", legalNS, "whole-a"}}},
		},
		{
			name: "a tenant claim naming a class that no longer exists",
			modify: func(t *testing.T, s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "stale", now, "gpu-retired"))
			},
			want: []found{{CheckClaimClassNotGranted, legal, ObjectRef{"ResourceClaim", legalNS, "stale"}}},
		},
		{
			name: "a tenant claim choosing a foreign class through firstAvailable",
			modify: func(t *testing.T, s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "mixed", now, "gpu-whole", "gpu-slice"))
			},
			want: []found{{CheckClaimClassNotGranted, legal, ObjectRef{"ResourceClaim", legalNS, "mixed"}}},
		},
		{
			name: "a class granted to a tenant that does not exist",
			modify: func(t *testing.T, s *Snapshot) {
				s.DeviceClasses[1].Labels[naming.ClassTenantLabel("departed")] = "true"
			},
			want: []found{{CheckClassGrantedToUnknownTenant, "departed", ObjectRef{Kind: "DeviceClass", Name: "gpu-slice"}}},
		},
		{
			name: "a tenant namespace without its quota",
			modify: func(t *testing.T, s *Snapshot) {
				s.ResourceQuotas = s.ResourceQuotas[1:]
			},
			want: []found{{CheckQuotaMissing, legal, ObjectRef{"ResourceQuota", legalNS, naming.TenantQuota}}},
		},
		{
			name: "a quota without the device key of a granted class",
			modify: func(t *testing.T, s *Snapshot) {
				s.DeviceClasses[1].Labels[naming.ClassTenantLabel(legal)] = "true"
				s.Namespaces[0].Labels[naming.ClassGrantLabel("gpu-slice")] = "true"
			},
			want: []found{{CheckQuotaDeviceKeyMissing, legal, ObjectRef{"ResourceQuota", legalNS, naming.TenantQuota}}},
		},
		{
			name: "a tenant namespace without its limit range",
			modify: func(t *testing.T, s *Snapshot) {
				s.LimitRanges = s.LimitRanges[:1]
			},
			want: []found{{CheckLimitRangeMissing, research, ObjectRef{"LimitRange", researchNS, naming.ContainerDefaults}}},
		},
		{
			name: "no entitlement binding",
			modify: func(t *testing.T, s *Snapshot) {
				s.PolicyBindings = nil
			},
			want: []found{
				{CheckEntitlementBindingMissing, legal, ObjectRef{Kind: "ValidatingAdmissionPolicyBinding", Name: naming.EntitlementPolicy}},
				{CheckEntitlementBindingMissing, research, ObjectRef{Kind: "ValidatingAdmissionPolicyBinding", Name: naming.EntitlementPolicy}},
			},
		},
		{
			name: "an entitlement binding whose policy is gone",
			modify: func(t *testing.T, s *Snapshot) {
				s.Policies = nil
			},
			want: []found{
				{CheckEntitlementPolicyMissing, legal, ObjectRef{Kind: "ValidatingAdmissionPolicy", Name: naming.EntitlementPolicy}},
				{CheckEntitlementPolicyMissing, research, ObjectRef{Kind: "ValidatingAdmissionPolicy", Name: naming.EntitlementPolicy}},
			},
		},
		{
			name: "an entitlement binding that only warns",
			modify: func(t *testing.T, s *Snapshot) {
				s.PolicyBindings[0].Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
			},
			want: []found{
				{CheckEntitlementNotDenying, legal, ObjectRef{Kind: "ValidatingAdmissionPolicyBinding", Name: naming.EntitlementPolicy}},
				{CheckEntitlementNotDenying, research, ObjectRef{Kind: "ValidatingAdmissionPolicyBinding", Name: naming.EntitlementPolicy}},
			},
		},
		{
			name: "a namespace granting a class its DeviceClass does not grant the tenant",
			modify: func(t *testing.T, s *Snapshot) {
				s.Namespaces[1].Labels[naming.ClassGrantLabel("gpu-whole")] = "true"
			},
			want: []found{{CheckEntitlementGrantsDiffer, research, ObjectRef{Kind: "Namespace", Name: researchNS}}},
		},
		{
			name: "a namespace the entitlement policy does not select",
			modify: func(t *testing.T, s *Snapshot) {
				delete(s.Namespaces[0].Labels, naming.GrantsLabel)
			},
			want: []found{{CheckEntitlementGrantsUnlabelled, legal, ObjectRef{Kind: "Namespace", Name: legalNS}}},
		},
		{
			name: "a tenant namespace without a Pod Security enforce label",
			modify: func(t *testing.T, s *Snapshot) {
				delete(s.Namespaces[0].Labels, naming.PodSecurityEnforceLabel)
			},
			want: []found{{CheckPodSecurityMissing, legal, ObjectRef{Kind: "Namespace", Name: legalNS}}},
		},
		{
			name: "a tenant namespace enforcing only the privileged level",
			modify: func(t *testing.T, s *Snapshot) {
				s.Namespaces[1].Labels[naming.PodSecurityEnforceLabel] = "privileged"
			},
			want: []found{{CheckPodSecurityTooWeak, research, ObjectRef{Kind: "Namespace", Name: researchNS}}},
		},
		{
			name: "a vCluster syncing DeviceClasses without a selector",
			modify: func(t *testing.T, s *Snapshot) {
				rerender(t, s, 0, map[string]any{"enabled": true})
			},
			want: []found{{CheckVClusterSyncsAllClasses, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster syncing DeviceClasses with an empty selector",
			modify: func(t *testing.T, s *Snapshot) {
				rerender(t, s, 0, map[string]any{"enabled": true, "selector": map[string]any{"matchLabels": map[string]any{}}})
			},
			want: []found{{CheckVClusterSyncsAllClasses, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster syncing another tenant's DeviceClasses",
			modify: func(t *testing.T, s *Snapshot) {
				rerender(t, s, 1, tenantSelector(legal))
			},
			want: []found{{CheckVClusterSyncsForeignClasses, research, ObjectRef{"Secret", researchNS, "vc-config-research-ai"}}},
		},
		{
			name: "a vCluster selecting its tenant's label with a value other than true",
			modify: func(t *testing.T, s *Snapshot) {
				rerender(t, s, 1, map[string]any{"enabled": true,
					"selector": map[string]any{"matchLabels": map[string]any{naming.ClassTenantLabel(research): "yes"}}})
			},
			want: []found{{CheckVClusterSyncsForeignClasses, research, ObjectRef{"Secret", researchNS, "vc-config-research-ai"}}},
		},
		{
			name: "a vCluster config rewritten after the chart rendered it",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterConfigs[0] = configSecret(t, legalNS, legal, map[string]any{"enabled": true, "selector": map[string]any{
					"matchLabels": map[string]any{naming.ClassTenantLabel(legal): "true", "gpu-tenancy.io/tier": "gold"}}})
			},
			want: []found{{CheckVClusterConfigTampered, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config holding the pinned values, written otherwise than the chart writes them",
			modify: func(t *testing.T, s *Snapshot) {
				c := &s.VClusterConfigs[0]
				c.Data[ConfigSecretKey] = append([]byte("# edited\n"), c.Data[ConfigSecretKey]...)
			},
			want: []found{{CheckVClusterConfigTampered, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config whose StatefulSet pins no hash",
			modify: func(t *testing.T, s *Snapshot) {
				delete(s.VClusterStatefulSets[1].Spec.Template.Annotations, ConfigHashAnnotation)
			},
			want: []found{{CheckVClusterConfigTampered, research, ObjectRef{"Secret", researchNS, "vc-config-research-ai"}}},
		},
		{
			name: "a vCluster config without its StatefulSet",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterStatefulSets = s.VClusterStatefulSets[1:]
			},
			want: []found{{CheckVClusterConfigTampered, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config pinned by a StatefulSet of another namespace",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterStatefulSets[0].Namespace = researchNS
			},
			want: []found{{CheckVClusterConfigTampered, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config rewritten, the chart's label taken off it and its StatefulSet",
			modify: func(t *testing.T, s *Snapshot) {
				c := &s.VClusterConfigs[0]
				c.Data[ConfigSecretKey] = append([]byte("# edited\n"), c.Data[ConfigSecretKey]...)
				delete(c.Labels, "app")
				delete(s.VClusterStatefulSets[0].Labels, "app")
			},
			want: []found{{CheckVClusterConfigTampered, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a running vCluster whose config Secret is not there",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterConfigs = s.VClusterConfigs[1:]
			},
			want: []found{{CheckVClusterConfigUnreadable, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config that is not YAML",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterConfigs[0].Data[ConfigSecretKey] = []byte("sync: [fromHost")
			},
			want: []found{{CheckVClusterConfigUnreadable, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
		{
			name: "a vCluster config without its key",
			modify: func(t *testing.T, s *Snapshot) {
				s.VClusterConfigs[0].Data = map[string][]byte{"values.yaml": s.VClusterConfigs[0].Data[ConfigSecretKey]}
			},
			want: []found{{CheckVClusterConfigUnreadable, legal, ObjectRef{"Secret", legalNS, "vc-config-legal-ai"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := cleanCluster(t)
			tc.modify(t, &s)
			r := Audit(&s, now)
			var got []found
			for _, f := range r.Findings {
				got = append(got, found{f.Check, f.Tenant, f.Object})
				assert.NotEmpty(t, f.Message, "finding %s needs a message", f.Check)
				assert.NotEmpty(t, f.Fix, "finding %s needs a fix", f.Check)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestAuditVClusterSync(t *testing.T) {
	// Shapes of the DeviceClass sync a vCluster may have, none of which lets the tenant see foreign classes.
	cases := []struct {
		name          string
		deviceClasses map[string]any
	}{
		{"exactly the tenant's label", tenantSelector(legal)},
		{"sync disabled", map[string]any{"enabled": false}},
		{"sync disabled with a selector left over", map[string]any{"enabled": false, "selector": map[string]any{}}},
		{"no DeviceClass sync in the config", nil},
		{"the tenant's label through matchExpressions", map[string]any{"enabled": true, "selector": map[string]any{
			"matchExpressions": []any{map[string]any{"key": naming.ClassTenantLabel(legal), "operator": "In", "values": []any{"true"}}},
		}}},
		{"the tenant's label narrowed further", map[string]any{"enabled": true, "selector": map[string]any{
			"matchLabels": map[string]any{naming.ClassTenantLabel(legal): "true", "gpu-tenancy.io/tier": "gold"},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := cleanCluster(t)
			rerender(t, &s, 0, tc.deviceClasses)
			r := Audit(&s, now)
			assert.Empty(t, r.Findings)
			assert.Equal(t, 2, r.Scope.VClusters)
		})
	}

	// Secrets the audit does not take for a tenant's vCluster config: each would be a finding if it were read.
	others := []struct {
		name   string
		secret func(t *testing.T) corev1.Secret
	}{
		{"a vCluster outside tenant namespaces", func(t *testing.T) corev1.Secret {
			return configSecret(t, "vcluster-platform", "loft", map[string]any{"enabled": true})
		}},
		{"another Secret of the vCluster chart", func(t *testing.T) corev1.Secret {
			s := configSecret(t, legalNS, legal, map[string]any{"enabled": true})
			s.Name = "vc-" + legal
			return s
		}},
		{"a vc-config- Secret without the chart's label", func(t *testing.T) corev1.Secret {
			s := configSecret(t, legalNS, "copy", map[string]any{"enabled": true})
			delete(s.Labels, "app")
			return s
		}},
		{"another release's config, labelled as the chart labels it", func(t *testing.T) corev1.Secret {
			return configSecret(t, legalNS, "copy", map[string]any{"enabled": true})
		}},
	}
	for _, tc := range others {
		t.Run(tc.name, func(t *testing.T) {
			s := cleanCluster(t)
			s.VClusterConfigs = append(s.VClusterConfigs, tc.secret(t))
			r := Audit(&s, now)
			assert.Empty(t, r.Findings)
			assert.Equal(t, 2, r.Scope.VClusters)
		})
	}
	t.Run("an unreadable config still counts as a vCluster found", func(t *testing.T) {
		s := cleanCluster(t)
		s.VClusterConfigs[1].Data[ConfigSecretKey] = []byte("- not a map")
		r := Audit(&s, now)
		require.Len(t, r.Findings, 1)
		assert.Equal(t, CheckVClusterConfigUnreadable, r.Findings[0].Check)
		assert.Contains(t, r.Findings[0].Message, "research-ai's config cannot be read")
		assert.Contains(t, r.Findings[0].Fix, `jsonpath='{.data.config\.yaml}'`)
		assert.Equal(t, 2, r.Scope.VClusters)
	})
}
