package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// e2eServiceCIDR is the suite's control planes' Service range (scripts/local-cluster.sh GT_SERVICE_CIDR): 254
// addresses, where the local stack's default is a /16 that holds the largest bench.
const e2eServiceCIDR = "10.0.0.0/24"

// TestServiceQuotasBeyondTheRangeAreRefusedBeforeAnythingIsCreated: on the local control plane, whose Service range is
// a /24 (e2eServiceCIDR, the API server's default ServiceCIDR), the local stack's tenants
// with Service quotas that add up to more than the range are refused before anything is created, naming the key and
// the numbers; an overcommit the operator states lets the same stack through, and the preview says the ratio.
func TestServiceQuotasBeyondTheRangeAreRefusedBeforeAnythingIsCreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cidr, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err, "the API server makes its default ServiceCIDR")
	require.Equal(t, []string{e2eServiceCIDR}, cidr.Spec.CIDRs)

	before := snapshot(t, ctx)
	env := newStackEnv(t)
	tenants := env.tenants()
	for i := range tenants {
		tenants[i].ObjectQuota = map[string]int{"services": 120, "count/endpoints": 120, "count/endpointslices.discovery.k8s.io": 120}
	}
	_, err = env.open(ctx, tenants).Up(ctx)
	require.Error(t, err)
	for _, want := range []string{
		"gpu-tenancy:tenants: the tenants' Service quotas (gpu-tenancy:tenants[*].objectQuota[services]) add up to 240 for 2 tenants",
		"the Service range 10.0.0.0/24 holds 254 addresses, of which 228 may be promised",
		"set gpu-tenancy:serviceRange.overcommit above 1",
	} {
		assert.Contains(t, err.Error(), want)
	}
	requireAsBefore(t, ctx, before)

	env.config = map[string]string{platform.ConfigNamespace + ":serviceRange": `{"overcommit": 1.25}`}
	result, err := env.open(ctx, tenants).Preview(ctx)
	require.NoError(t, err, "an overcommit the operator states")
	assert.Contains(t, result.StdOut+result.StdErr, "gpu-tenancy:serviceRange.overcommit is 1.25", "the preview says the ratio")
	requireAsBefore(t, ctx, before)
}
