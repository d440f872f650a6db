package cluster

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Builder creates a cluster of one flavour from its args (the flavour's own *ClusterArgs type).
type Builder func(ctx *pulumi.Context, name string, args any, opts ...pulumi.ResourceOption) (*Cluster, error)

// builders are the cloud flavours this program can build. A flavour's package registers its builder from init, so a
// program links a cloud's SDK only when it imports that package: one that builds only existing clusters needs none.
var builders = map[Flavour]Builder{}

// flavourPackages are the packages that register each cloud flavour's builder, for errors to name.
var flavourPackages = map[Flavour]string{
	GKE:      "github.com/gpu-tenancy/gpu-tenancy/components/gke/gkecluster",
	Scaleway: "github.com/gpu-tenancy/gpu-tenancy/components/scaleway/kapsule",
}

// RegisterBuilder makes flavour buildable in this program; a flavour's package calls it from init. A second builder
// for one flavour is a wiring mistake no program could resolve, so it panics.
func RegisterBuilder(flavour Flavour, b Builder) {
	if _, dup := builders[flavour]; dup {
		panic(fmt.Sprintf("cluster: a builder for flavour %s is already registered", flavour))
	}
	builders[flavour] = b
}

// Contractor is a flavour's own cluster component, which hands the rest of the platform its contract.
type Contractor interface{ Contract() *Cluster }

// Typed is the Builder of a flavour's constructor, which takes its own args type A: the args the platform resolved
// must be an *A.
func Typed[A any, C Contractor](flavour Flavour,
	newCluster func(*pulumi.Context, string, *A, ...pulumi.ResourceOption) (C, error)) Builder {
	return func(ctx *pulumi.Context, name string, args any, opts ...pulumi.ResourceOption) (*Cluster, error) {
		typed, ok := args.(*A)
		if !ok {
			return nil, fmt.Errorf("%s cluster %q: args are %T, not %T", flavour, name, args, typed)
		}
		c, err := newCluster(ctx, name, typed, opts...)
		if err != nil {
			return nil, err
		}
		return c.Contract(), nil
	}
}

// BuilderOf is the builder of flavour, false when no imported package registered one.
func BuilderOf(flavour Flavour) (Builder, bool) {
	b, ok := builders[flavour]
	return b, ok
}

// FlavourPackage is the import path of the package that registers flavour's builder, "" for existing, which needs
// none.
func FlavourPackage(flavour Flavour) string { return flavourPackages[flavour] }

// NotIncluded is the error, at path, for a cloud flavour whose builder this program does not include.
func NotIncluded(path *field.Path, flavour Flavour) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: path.String(), BadValue: string(flavour),
		Detail: fmt.Sprintf("this program does not include the %s flavour: import _ %q", flavour, FlavourPackage(flavour))}
}
