package main

import (
	"context"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a policy manager that keeps what a policy reports.
type recorder struct{ reports []violation }

func (r *recorder) ReportViolation(message, urn string) {
	r.reports = append(r.reports, violation{URN: urn, Message: message})
}

func TestPack(t *testing.T) {
	pack, err := newPack()
	require.NoError(t, err)
	assert.Equal(t, "gpu-tenancy", pack.Name())
	assert.Equal(t, "0.1.0", pack.Version().String())

	// policyx ignores the pack's level, so each policy carries its own; the zero level would be advisory.
	levels := map[string]policyx.EnforcementLevel{}
	for _, p := range pack.Policies() {
		levels[p.Name()] = p.EnforcementLevel()
		assert.NotEmpty(t, p.Description(), p.Name())
	}
	assert.Equal(t, map[string]policyx.EnforcementLevel{
		"gpu-pool-taint":                 policyx.EnforcementLevelMandatory,
		"dedicated-pool-taint":           policyx.EnforcementLevelMandatory,
		"platform-pool-taint":            policyx.EnforcementLevelMandatory,
		"vcluster-device-class-selector": policyx.EnforcementLevelMandatory,
		"device-class-owner":             policyx.EnforcementLevelMandatory,
		"tenant-namespace-guard-rails":   policyx.EnforcementLevelMandatory,
		"cloud-cost-labels":              policyx.EnforcementLevelAdvisory,
	}, levels)
}

func policyNamed(t *testing.T, name string) policyx.Policy {
	t.Helper()
	for _, p := range policies() {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no policy %s", name)
	return nil
}

func TestResourcePolicyReportsOnTheResource(t *testing.T) {
	rogue := res(deviceClassV1, "rogue", deviceClass("gpu-rogue", nil))
	owned := res(deviceClassV1, "gpu-catalog-gpu-whole", deviceClass("gpu-whole", map[string]any{"tenant.gpu-tenancy.io/legal-ai": "true"}))
	p := policyNamed(t, deviceClassOwnerPolicy).(policyx.ResourceValidationPolicy)
	for _, c := range []struct {
		name string
		r    resource
		want int
	}{{"violating", rogue, 1}, {"compliant", owned, 0}} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			err := p.Validate(context.Background(), policyx.ResourceValidationArgs{Manager: rec, Resource: policyx.AnalyzerResource{
				Type: c.r.Type, URN: c.r.URN, Name: c.r.Name, Properties: c.r.Props,
			}})
			require.NoError(t, err)
			require.Len(t, rec.reports, c.want)
			for _, v := range rec.reports {
				assert.Equal(t, c.r.URN, v.URN)
				assert.Contains(t, v.Message, "gpu-rogue")
			}
		})
	}
}

func TestStackPolicyReportsOnTheNamespace(t *testing.T) {
	p := policyNamed(t, tenantNamespacePolicy).(policyx.StackValidationPolicy)
	for _, c := range []struct {
		name  string
		stack []resource
		want  int
	}{{"violating", replace(localStack(), "legal-ai-quota", nil), 1}, {"compliant", localStack(), 0}} {
		t.Run(c.name, func(t *testing.T) {
			var resources []policyx.AnalyzerResource
			for _, r := range c.stack {
				resources = append(resources, policyx.AnalyzerResource{Type: r.Type, URN: r.URN, Name: r.Name, Properties: r.Props})
			}
			rec := &recorder{}
			require.NoError(t, p.Validate(context.Background(), policyx.StackValidationArgs{Manager: rec, Resources: resources}))
			require.Len(t, rec.reports, c.want)
			for _, v := range rec.reports {
				assert.Equal(t, urnOf(namespaceType, "legal-ai-namespace"), v.URN)
			}
		})
	}
}
