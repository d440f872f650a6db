package cluster

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRegisterBuilder(t *testing.T) {
	const flavour Flavour = "test-registry"
	t.Cleanup(func() { delete(builders, flavour) })
	_, ok := BuilderOf(flavour)
	require.False(t, ok, "nothing registered yet")
	RegisterBuilder(flavour, func(*pulumi.Context, string, any, ...pulumi.ResourceOption) (*Cluster, error) {
		return &Cluster{Flavour: flavour}, nil
	})
	b, ok := BuilderOf(flavour)
	require.True(t, ok)
	got, err := b(nil, "c", nil)
	require.NoError(t, err)
	assert.Equal(t, flavour, got.Flavour)
	assert.Panics(t, func() { RegisterBuilder(flavour, b) }, "a second builder for a flavour")
}

func TestEveryCloudFlavourNamesItsPackage(t *testing.T) {
	for _, f := range Flavours {
		if Flavour(f) == Existing {
			assert.Empty(t, FlavourPackage(Existing), "an existing cluster needs no package")
			continue
		}
		assert.NotEmptyf(t, FlavourPackage(Flavour(f)), "%s", f)
	}
}

func TestNotIncluded(t *testing.T) {
	assert.EqualError(t, NotIncluded(field.NewPath("gpu-tenancy:cloud"), GKE),
		`gpu-tenancy:cloud: Unsupported value: "gke": this program does not include the gke flavour: `+
			`import _ "github.com/gpu-tenancy/gpu-tenancy/components/gke/gkecluster"`)
}

type typedArgs struct{ Zone string }

type typedCluster struct{ zone string }

func (c typedCluster) Contract() *Cluster { return &Cluster{Flavour: Flavour(c.zone)} }

func TestTypedBuilderPassesItsOwnArgs(t *testing.T) {
	b := Typed(GKE, func(_ *pulumi.Context, _ string, args *typedArgs, _ ...pulumi.ResourceOption) (typedCluster, error) {
		return typedCluster{zone: args.Zone}, nil
	})
	got, err := b(nil, "c", &typedArgs{Zone: "europe-west4-a"})
	require.NoError(t, err)
	assert.Equal(t, Flavour("europe-west4-a"), got.Flavour, "the constructor's cluster, through its contract")
}

func TestTypedBuilderRefusesAnotherFlavoursArgs(t *testing.T) {
	b := Typed(GKE, func(*pulumi.Context, string, *typedArgs, ...pulumi.ResourceOption) (typedCluster, error) {
		t.Fatal("the constructor must not run on args of another type")
		return typedCluster{}, nil
	})
	_, err := b(nil, "c", &struct{ Region string }{})
	assert.EqualError(t, err, `gke cluster "c": args are *struct { Region string }, not *cluster.typedArgs`)
}
