package cluster

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

const testKubeconfig = "apiVersion: v1\nkind: Config\n# token: local-admin\n"

func TestExistingProvider(t *testing.T) {
	tests := []struct {
		name       string
		kubeconfig pulumi.StringInput
	}{
		{"plain kubeconfig is made secret", pulumi.String(testKubeconfig)},
		{"secret kubeconfig stays secret", pulumi.ToSecret(pulumi.String(testKubeconfig)).(pulumi.StringOutput)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &mocktest.Recorder{}
			err := mocktest.Run("test", func(ctx *pulumi.Context) error {
				_, err := NewExisting(ctx, "local", &ExistingArgs{Kubeconfig: tc.kubeconfig})
				return err
			}, rec)
			require.NoError(t, err)
			reg, err := rec.Get("pulumi:providers:kubernetes", "local")
			require.NoError(t, err)
			kc := reg.Inputs["kubeconfig"]
			require.True(t, kc.IsSecret())
			assert.Equal(t, testKubeconfig, kc.SecretValue().Element.StringValue())
			assert.Equal(t, "local", reg.ParentName())
			assert.True(t, reg.Inputs["enableServerSideApply"].BoolValue())
			_, identified := reg.Inputs["clusterIdentifier"]
			assert.False(t, identified, "a changed kubeconfig may point at another cluster: the provider must be replaced")
		})
	}
}

func TestExistingContract(t *testing.T) {
	specs := []ExistingPoolSpec{
		{PoolSpec: PoolSpec{Name: "a100"}, Model: "a100-40gb"},
		{PoolSpec: PoolSpec{Name: "a100-mig", Partition: "1g.5gb", NodeBounds: NodeBounds{MaxNodes: ptr(3)}}, Model: "a100-40gb", GPUsPerNode: 2},
	}
	pools := []GPUPool{{
		Name: "a100", Model: A100x40GB, GPUsPerNode: 1, MaxNodes: 1, Labels: GPUNodeLabels("a100"), Taint: GPUTaint,
	}, {
		Name: "a100-mig", Model: A100x40GB, GPUsPerNode: 2, MIGProfile: "1g.5gb", MaxNodes: 3, Labels: GPUNodeLabels("a100-mig"),
		Taint: GPUTaint,
	}}
	var got *Cluster
	var kubeconfig internals.UnsafeAwaitOutputResult
	rec := &mocktest.Recorder{}
	err := mocktest.Run("test", func(ctx *pulumi.Context) error {
		e, err := NewExisting(ctx, "local", &ExistingArgs{Kubeconfig: pulumi.String(testKubeconfig), GPUPools: specs, DriverRoot: "/opt/nvidia"})
		if err != nil {
			return err
		}
		got = e.Contract()
		assert.Same(t, e.Provider, got.Provider)
		kubeconfig, err = internals.UnsafeAwaitOutput(ctx.Context(), got.Kubeconfig)
		return err
	}, rec)
	require.NoError(t, err)
	assert.Equal(t, Existing, got.Flavour)
	assert.Nil(t, got.Anchor)
	assert.Equal(t, pools, got.GPUPools)
	assert.Equal(t, "/opt/nvidia", got.DriverRoot)
	assert.True(t, kubeconfig.Secret)
	assert.Len(t, rec.ByType("gpu-tenancy:cluster:Existing"), 1)
}

func TestExistingRejectsMissingKubeconfig(t *testing.T) {
	tests := []struct {
		name string
		args *ExistingArgs
	}{
		{"nil args", nil},
		{"no kubeconfig", &ExistingArgs{}},
		{"unknown pool model", &ExistingArgs{Kubeconfig: pulumi.String(testKubeconfig),
			GPUPools: []ExistingPoolSpec{{PoolSpec: PoolSpec{Name: "v100"}, Model: "v100"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := mocktest.Run("test", func(ctx *pulumi.Context) error {
				_, err := NewExisting(ctx, "local", tc.args)
				return err
			}, &mocktest.Recorder{})
			assert.ErrorContains(t, err, "existing cluster")
		})
	}
}

func TestExistingDriverRootDefaultsToTheHostRoot(t *testing.T) {
	var got *Cluster
	require.NoError(t, mocktest.Run("test", func(ctx *pulumi.Context) error {
		e, err := NewExisting(ctx, "local", &ExistingArgs{Kubeconfig: pulumi.String(testKubeconfig)})
		if err == nil {
			got = e.Contract()
		}
		return err
	}, &mocktest.Recorder{}))
	assert.Equal(t, HostDriverRoot, got.DriverRoot)
}
