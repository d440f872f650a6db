package platform

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	// The tests build the stacks of every cloud.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

// leaveOut makes this test's program one without the cloud builders (clusters false) or GKE's alert policies
// (alertPolicies false), as a program that does not import their packages is.
func leaveOut(t *testing.T, clusters, alertPolicies bool) {
	t.Helper()
	builder, registered := builderOf, alertPoliciesRegistered
	t.Cleanup(func() { builderOf, alertPoliciesRegistered = builder, registered })
	if !clusters {
		builderOf = func(cluster.Flavour) (cluster.Builder, bool) { return nil, false }
	}
	if !alertPolicies {
		alertPoliciesRegistered = func() bool { return false }
	}
}

func TestACloudTheProgramDoesNotIncludeIsRefused(t *testing.T) {
	const (
		noGKE = `gpu-tenancy:cloud: Unsupported value: "gke": this program does not include the gke flavour: ` +
			`import _ "github.com/gpu-tenancy/gpu-tenancy/components/gke/gkecluster"`
		noScaleway = `gpu-tenancy:cloud: Unsupported value: "scaleway": this program does not include the scaleway flavour: ` +
			`import _ "github.com/gpu-tenancy/gpu-tenancy/components/scaleway/kapsule"`
		noAlertPolicies = `gpu-tenancy:cloud: Unsupported value: "gke": this program does not include the alert policies of ` +
			`monitoring on gke: import _ "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"`
	)
	gkeWithoutMonitoring := func() testConfig {
		tc := goodGKE()
		tc["monitoring"] = obj{"enabled": false}
		return tc
	}
	gkeInGroups := func() testConfig {
		tc := goodGKE()
		tc["tenantGroups"] = 2
		return tc
	}
	for _, tc := range []struct {
		name                    string
		config                  func() testConfig
		part                    Part
		clusters, alertPolicies bool
		want                    []string
	}{
		{"gke without its builder", goodGKE, "", false, true, []string{noGKE}},
		{"scaleway without its builder", goodScaleway, "", false, true, []string{noScaleway}},
		{"monitoring on gke without its alert policies", goodGKE, "", true, false, []string{noAlertPolicies}},
		{"gke without either", goodGKE, "", false, false, []string{noGKE, noAlertPolicies}},
		{"gke with monitoring off needs no alert policies", gkeWithoutMonitoring, "", true, false, nil},
		{"monitoring on scaleway needs no alert policies", goodScaleway, "", true, false, nil},
		{"an existing cluster needs no cloud", goodExisting, "", false, false, nil},
		{"a tenants part builds no cluster", gkeInGroups, TenantsPart(0), false, false, nil},
		{"the platform part builds the cluster", gkeInGroups, PlatformPart, false, true, []string{noGKE}},
		{"every cloud included", goodGKE, "", true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := Load(tc.config().source("platformAdminPassword"), ConfigKeys)
			require.NoError(t, err, "a config is valid whichever program reads it")
			args.part = tc.part
			leaveOut(t, tc.clusters, tc.alertPolicies)
			var got []string
			for _, e := range validateIncluded(args, args.Keys.Path) {
				got = append(got, e.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNewPlatformRefusesACloudNotIncludedBeforeRegistering(t *testing.T) {
	args, err := Load(goodGKE().source("platformAdminPassword"), ConfigKeys)
	require.NoError(t, err)
	leaveOut(t, false, true)
	rec := &mocktest.Recorder{}
	err = mocktest.Run("dev", func(ctx *pulumi.Context) error {
		_, err := NewPlatform(ctx, "gpus", args)
		return err
	}, rec)
	var argsErr *ArgsError
	require.ErrorAs(t, err, &argsErr)
	assert.ErrorContains(t, err, `gpu-tenancy:cloud: Unsupported value: "gke": this program does not include the gke flavour`)
	assert.Empty(t, rec.All())
}
