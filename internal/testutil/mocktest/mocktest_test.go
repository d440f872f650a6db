package mocktest

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const thingType = "test:index:Thing"

type thing struct {
	pulumi.CustomResourceState
}

// recordThings registers "base", then "managed" with resource options and a read "observed", both depending on base.
func recordThings(t *testing.T) *Recorder {
	t.Helper()
	rec := &Recorder{}
	require.NoError(t, Run("test", func(ctx *pulumi.Context) error {
		var base, managed, observed thing
		if err := ctx.RegisterResource(thingType, "base", nil, &base); err != nil {
			return err
		}
		if err := ctx.RegisterResource(thingType, "managed", nil, &managed, pulumi.DependsOn([]pulumi.Resource{&base}),
			pulumi.DeleteBeforeReplace(true), pulumi.IgnoreChanges([]string{"size"})); err != nil {
			return err
		}
		return ctx.ReadResource(thingType, "observed", pulumi.ID("ns/observed"), nil, &observed,
			pulumi.DependsOn([]pulumi.Resource{&base}))
	}, rec))
	return rec
}

func TestRegistrationCarriesRequestAndRead(t *testing.T) {
	rec := recordThings(t)
	get := func(t *testing.T, name string) Registration {
		t.Helper()
		reg, err := rec.Get(thingType, name)
		require.NoError(t, err)
		return reg
	}
	baseURN := get(t, "base").URN
	require.NotEmpty(t, baseURN)
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"register request keeps the resource options", func(t *testing.T) {
			req := get(t, "managed").Request
			require.NotNil(t, req)
			assert.True(t, req.GetDeleteBeforeReplace())
			assert.Equal(t, []string{"size"}, req.GetIgnoreChanges())
		}},
		{"register dependencies", func(t *testing.T) {
			assert.Equal(t, []string{baseURN}, get(t, "managed").Dependencies)
		}},
		{"managed resource has no read id", func(t *testing.T) {
			reg := get(t, "managed")
			assert.False(t, reg.Read)
			assert.Empty(t, reg.ID)
		}},
		{"read keeps its id", func(t *testing.T) {
			reg := get(t, "observed")
			assert.True(t, reg.Read)
			assert.Equal(t, "ns/observed", reg.ID)
		}},
		{"read keeps its dependencies", func(t *testing.T) {
			assert.Equal(t, []string{baseURN}, get(t, "observed").Dependencies)
		}},
		{"read has no register request", func(t *testing.T) { assert.Nil(t, get(t, "observed").Request) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestURNs(t *testing.T) {
	rec := recordThings(t)
	tests := []struct {
		name    string
		names   []string
		wantErr string
	}{
		{"in the order asked", []string{"managed", "base"}, ""},
		{"missing name is an error", []string{"base", "absent"}, `no test:index:Thing named "absent"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rec.URNs(thingType, tc.names...)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, len(tc.names))
			for i, name := range tc.names {
				reg, err := rec.Get(thingType, name)
				require.NoError(t, err)
				assert.Equal(t, reg.URN, got[i])
			}
		})
	}
}

type comp struct {
	pulumi.ResourceState
}

func TestStraysNamesCustomResourcesOutsideTheComponent(t *testing.T) {
	rec := &Recorder{}
	require.NoError(t, Run("test", func(ctx *pulumi.Context) error {
		var c, other comp
		var inside, loose, nested thing
		if err := ctx.RegisterComponentResource("test:index:Comp", "c", &c); err != nil {
			return err
		}
		if err := ctx.RegisterComponentResource("test:index:Comp", "other", &other, pulumi.Parent(&c)); err != nil {
			return err
		}
		if err := ctx.RegisterResource(thingType, "inside", nil, &inside, pulumi.Parent(&c)); err != nil {
			return err
		}
		if err := ctx.RegisterResource(thingType, "nested", nil, &nested, pulumi.Parent(&other)); err != nil {
			return err
		}
		return ctx.RegisterResource(thingType, "loose", nil, &loose)
	}, rec))
	assert.Equal(t, []string{thingType + " loose", thingType + " nested"}, rec.Strays("c"))
}
