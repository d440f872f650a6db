package plan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

func TestWriteTreeGroupsByComponentWithCountsPerType(t *testing.T) {
	var out strings.Builder
	require.NoError(t, makeBox(t).WriteTree(&out))
	assert.Equal(t, `stack dev: 9 resources
    1  pulumi:providers:kubernetes
    1  random:index/randomPet:RandomPet
  gpu-tenancy:test:Box box (6 resources)
      1  kubernetes:core/v1:Secret
      1  kubernetes:core/v1:Secret (read)
      1  kubernetes:yaml/v2:ConfigFile
    gpu-tenancy:test:Inner box-inner (2 resources)
        2  kubernetes:core/v1:Namespace
by type:
    1  gpu-tenancy:test:Box
    1  gpu-tenancy:test:Inner
    2  kubernetes:core/v1:Namespace
    1  kubernetes:core/v1:Secret
    1  kubernetes:core/v1:Secret (read)
    1  kubernetes:yaml/v2:ConfigFile
    1  pulumi:providers:kubernetes
    1  random:index/randomPet:RandomPet
`, out.String())
}

func TestWriteTreeCountsAResourceUnderAResourceWithItsComponent(t *testing.T) {
	const (
		stack   = "urn:pulumi:dev::gpu-tenancy::pulumi:pulumi:Stack::gpu-tenancy-dev"
		comp    = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:gke:Cluster::gke"
		cluster = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:gke:Cluster$gcp:container/cluster:Cluster::gke"
		k8s     = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:gke:Cluster$gcp:container/cluster:Cluster$pulumi:providers:kubernetes::gke-k8s"
	)
	p := FromRegistrations("dev", []mocktest.Registration{
		{Type: "gpu-tenancy:gke:Cluster", Name: "gke", Parent: stack, URN: comp},
		{Type: "gcp:container/cluster:Cluster", Name: "gke", Custom: true, Parent: comp, URN: cluster},
		{Type: "pulumi:providers:kubernetes", Name: "gke-k8s", Custom: true, Parent: cluster, URN: k8s},
	})
	var out strings.Builder
	require.NoError(t, p.WriteTree(&out))
	assert.Contains(t, out.String(), `  gpu-tenancy:gke:Cluster gke (2 resources)
      1  gcp:container/cluster:Cluster
      1  pulumi:providers:kubernetes
`)
	assert.Equal(t, "gke", p.Resources[2].Parent, "the provider's parent is the cluster resource")
}
