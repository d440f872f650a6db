package main

import (
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The program as docs/installation-configuration.md shows it runs: under mocks it builds the GKE cluster, its GPU
// pool and the tenant, where a copy without the builder's import is refused.
func TestTheDocumentedGKEProgramBuildsItsCluster(t *testing.T) {
	rec := &mocktest.Recorder{}
	err := mocktest.Run("dev", program, rec, mocktest.WithConfig(
		map[string]string{"gpu-tenancy:platformAdminPassword": "example"}, []string{"gpu-tenancy:platformAdminPassword"}))
	require.NoError(t, err)
	_, err = rec.Get("gcp:container/cluster:Cluster", "gke")
	assert.NoError(t, err)
	_, err = rec.Get("gpu-tenancy:tenancy:Tenant", "vision")
	assert.NoError(t, err)
}
