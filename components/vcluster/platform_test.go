package vcluster

import (
	"encoding/json"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testPassword = "hunter2-admin"
	testLicense  = "license-token-123"
	testKey      = "access-key-456"
)

func platformArgs(edit func(*PlatformArgs)) *PlatformArgs {
	a := &PlatformArgs{Host: "platform.example.com", AdminPassword: pulumi.ToSecret(pulumi.String(testPassword)).(pulumi.StringOutput)}
	if edit != nil {
		edit(a)
	}
	return a
}

func runPlatform(t *testing.T, r *mocktest.Recorder, args *PlatformArgs) *Platform {
	t.Helper()
	var p *Platform
	run(t, r, func(ctx *pulumi.Context) error {
		var err error
		p, err = NewPlatform(ctx, "platform", args)
		return err
	})
	return p
}

func TestPlatformValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args *PlatformArgs
		want map[string]any
	}{
		{"password from the credentials Secret", platformArgs(nil), map[string]any{
			"admin":   map[string]any{"create": true, "passwordSecretRef": map[string]any{"name": "vcluster-platform-credentials", "key": "adminPassword"}},
			"ingress": map[string]any{"enabled": true, "host": "platform.example.com"},
			"config":  map[string]any{"loftHost": "platform.example.com"},
			"env":     map[string]any{"DISABLE_LOFT_ROUTER": "true"},
		}},
		{"license token from the credentials Secret", platformArgs(func(a *PlatformArgs) { a.LicenseToken = pulumi.String(testLicense) }), map[string]any{
			"admin":   map[string]any{"create": true, "passwordSecretRef": map[string]any{"name": "vcluster-platform-credentials", "key": "adminPassword"}},
			"ingress": map[string]any{"enabled": true, "host": "platform.example.com"},
			"config":  map[string]any{"loftHost": "platform.example.com"},
			"env":     map[string]any{"DISABLE_LOFT_ROUTER": "true"},
			"envValueFrom": map[string]any{"LICENSE_TOKEN": map[string]any{
				"secretKeyRef": map[string]any{"name": "vcluster-platform-credentials", "key": "licenseToken"}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			runPlatform(t, r, tc.args)
			assert.Equal(t, tc.want, valuesOf(t, r, "platform"))
		})
	}
}

func TestPlatformRunsOnThePlatformPool(t *testing.T) {
	r := newRecorder()
	runPlatform(t, r, platformArgs(func(a *PlatformArgs) {
		a.Placement = cluster.Placement{NodeSelector: map[string]string{naming.PlatformPoolKey: "true"}, Tolerations: []cluster.Taint{cluster.PlatformPoolTaint}}
	}))
	vals := valuesOf(t, r, "platform")
	assert.Equal(t, map[string]any{naming.PlatformPoolKey: "true"}, vals["nodeSelector"])
	assert.Equal(t, []any{map[string]any{"key": naming.PlatformPoolKey, "operator": "Equal", "value": "true"}},
		vals["tolerations"])
}

func TestPlatformReleaseUsesPinnedChart(t *testing.T) {
	r := newRecorder()
	runPlatform(t, r, platformArgs(nil))
	rel, err := r.Get(releaseType, "platform")
	require.NoError(t, err)
	assert.Equal(t, "vcluster-platform", rel.Inputs["chart"].StringValue())
	assert.Equal(t, "4.11.2", rel.Inputs["version"].StringValue())
	assert.Equal(t, "https://charts.loft.sh", rel.Inputs["repositoryOpts"].ObjectValue()["repo"].StringValue())
	assert.Equal(t, "vcluster-platform", rel.Inputs["namespace"].StringValue())
	assert.Subset(t, rel.DependencyNames(), []string{"platform-namespace", "platform-credentials"})
	assert.Equal(t, "platform", rel.ParentName())
}

func TestPlatformCredentialsStaySecret(t *testing.T) {
	r := newRecorder()
	runPlatform(t, r, platformArgs(func(a *PlatformArgs) {
		a.LicenseToken = pulumi.ToSecret(pulumi.String(testLicense)).(pulumi.StringOutput)
	}))
	creds, err := r.Get(secretType, "platform-credentials")
	require.NoError(t, err)
	assert.Equal(t, "vcluster-platform-credentials", creds.Inputs["metadata"].ObjectValue()["name"].StringValue())
	assert.Equal(t, "vcluster-platform", creds.Inputs["metadata"].ObjectValue()["namespace"].StringValue())
	data := creds.Inputs["stringData"]
	assert.True(t, data.IsSecret(), "stringData is secret")
	assert.Equal(t, map[string]any{"adminPassword": testPassword, "licenseToken": testLicense}, data.SecretValue().Element.Mappable())

	raw, err := json.Marshal(valuesOf(t, r, "platform"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), testPassword)
	assert.NotContains(t, string(raw), testLicense)
}

func TestPlatformConnection(t *testing.T) {
	r := newRecorder()
	p := runPlatform(t, r, platformArgs(nil))
	assert.Equal(t, &PlatformConnection{Host: "platform.example.com", Project: "default"}, p.Connection)
	assert.Equal(t, "https://platform.example.com", awaitOutput(t, p.URL))
	for _, reg := range r.ByType(secretType) {
		assert.NotEqual(t, APIKeySecretName, reg.Inputs["metadata"].ObjectValue()["name"].StringValue(),
			"the platform holds no access key a tenant could share")
	}
}

func TestNewPlatformRejectsInvalidArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args *PlatformArgs
		want string
	}{
		{"nil args", nil, "args are required"},
		{"no host", platformArgs(func(a *PlatformArgs) { a.Host = "" }), "platform.host: Required value"},
		{"host with scheme", platformArgs(func(a *PlatformArgs) { a.Host = "https://platform.example.com" }), "platform.host: Invalid value"},
		{"no admin password", platformArgs(func(a *PlatformArgs) { a.AdminPassword = nil }), "adminPassword: Required value"},
		{"bad namespace", platformArgs(func(a *PlatformArgs) { a.Namespace = "Platform" }), `platform.namespace: Invalid value: "Platform"`},
		{"chart given twice", platformArgs(func(a *PlatformArgs) { a.Chart = helmchart.Chart{Path: "./c", Repo: "https://r"} }), "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &mocktest.Recorder{}
			err := mocktest.Run("test", func(ctx *pulumi.Context) error {
				_, err := NewPlatform(ctx, "platform", tc.args)
				return err
			}, rec)
			require.ErrorContains(t, err, tc.want)
			assert.Empty(t, rec.All())
		})
	}
}

func TestPlatformConnectionFeedsVirtualCluster(t *testing.T) {
	r := newRecorder()
	run(t, r, func(ctx *pulumi.Context) error {
		p, err := NewPlatform(ctx, "platform", platformArgs(nil))
		if err != nil {
			return err
		}
		_, err = NewVirtualCluster(ctx, "team-a", tenantArgs(func(a *VirtualClusterArgs) { a.Platform = p.Connection }))
		return err
	})
	got := decode[vclusterValues](t, valuesOf(t, r, "team-a"))
	assert.Equal(t, &platformConnValues{Project: "default", APIKey: platformAPIKeyValues{SecretName: "vcluster-platform-api-key"}},
		got.Platform, "the key Secret is in the vCluster's own namespace, so the chart grants nothing in another")
}
