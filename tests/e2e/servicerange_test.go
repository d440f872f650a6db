package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/servicerange"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/ruletest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// e2eServiceCIDR is the suite's control planes' Service range (scripts/local-cluster.sh GT_SERVICE_CIDR): 254
// addresses, where the local stack's default is a /16 that holds the largest bench.
const e2eServiceCIDR = "10.0.0.0/24"

// TestServiceQuotasBeyondTheRangeAreRefusedBeforeAnythingIsCreated: on the local control plane, whose Service range is
// a /24 (e2eServiceCIDR, the API server's default ServiceCIDR), the local stack's tenants
// with Service quotas that add up to more than the range are refused before anything is created, naming the key and
// the numbers; an overcommit the operator states lets the same stack through, and the preview says the ratio. Quotas
// that fit are taken, and a tenant that fills its own quota leaves the other tenant's next Service its address.
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

	// Quotas that fit: 220 of the 228 addresses the range may promise. Each tenant, as its syncer, takes Services until
	// its own quota refuses the next one; the first one's full quota leaves the other its next Service, and once both
	// are full the Service-range alert, over the real kube-state-metrics, holds.
	env.config = nil
	for i := range tenants {
		tenants[i].ObjectQuota = map[string]int{"services": 110, "count/endpoints": 110, "count/endpointslices.discovery.k8s.io": 110}
	}
	_, err = env.open(ctx, tenants).Up(ctx)
	require.NoError(t, err, "Service quotas of 220 in all fit the 228 addresses the range may promise")
	t.Cleanup(func() {
		_, err := env.open(context.Background(), tenants).Destroy(context.Background())
		assert.NoError(t, err)
		requireAsBefore(t, context.Background(), before)
	})
	assert.Empty(t, serviceRangeAlerts(t, ctx, "pending"), "the tenants' vClusters alone hold a few addresses")
	first, second := tenants[0].Name, tenants[1].Name
	created := fillServiceQuota(t, ctx, first)
	other, _ := syncerOf(t, ctx, second)
	svc, err := other.CoreV1().Services(naming.Namespace(second)).Create(ctx, serviceNamed("after-the-neighbour-filled"), metav1.CreateOptions{})
	require.NoError(t, err, "%s's Service once %s filled its quota with %d", second, first, created)
	assert.NotEmpty(t, svc.Spec.ClusterIP, "it has an address of the range")
	fillServiceQuota(t, ctx, second)
	assert.Len(t, serviceRangeAlerts(t, ctx, "pending"), 1, "every quota full: more than 80%% of the range is held")
}

func serviceNamed(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
}

// fillServiceQuota creates Services in the tenant's namespace as its syncer until its quota refuses one, and returns
// how many it created.
func fillServiceQuota(t *testing.T, ctx context.Context, tenant string) int {
	t.Helper()
	syncer, _ := syncerOf(t, ctx, tenant)
	for created := 0; ; created++ {
		_, err := syncer.CoreV1().Services(naming.Namespace(tenant)).Create(ctx, serviceNamed(fmt.Sprintf("fill-%d", created)), metav1.CreateOptions{})
		if err != nil {
			require.True(t, apierrors.IsForbidden(err), "%s's Service past its quota: %v", tenant, err)
			require.Contains(t, err.Error(), "exceeded quota", "refused by the tenant's own quota, not by the range")
			return created
		}
		require.Less(t, created, 110, "%s's quota of 110 Services holds", tenant)
	}
}

// serviceRangeAlerts runs the real kube-state-metrics against this suite's control plane, with the flags the platform
// gives it, and evaluates the Service-range alert, rendered for the range the API server serves, over one scrape: the
// alerts in state (it holds for 15m before it fires, so one scrape shows a pending alert).
func serviceRangeAlerts(t *testing.T, ctx context.Context, state string) []ruletest.Alert {
	t.Helper()
	jobs := rules.JobsFor("e2e")
	var rs []rules.Rule
	for _, r := range rules.Rules(rules.Params{Jobs: jobs, ServiceAddresses: servicerange.Addresses(netip.MustParsePrefix(e2eServiceCIDR))}) {
		if r.Name == rules.ServiceRangeNearlyFull {
			rs = append(rs, r)
		}
	}
	require.Len(t, rs, 1)
	ksm := startKubeStateMetrics(t, ctx, rs)
	held, err := client.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	// kube-state-metrics lists Services a moment after it starts: scrape until it shows as many with a cluster IP as
	// the range holds addresses.
	var exposition string
	eventually(t, ctx, func() error {
		if exposition, err = ksm.Scrape(ctx); err != nil {
			return err
		}
		shown := 0
		for _, line := range ruletest.Series(exposition, "kube_service_info", nil) {
			if !strings.Contains(line, `cluster_ip="None"`) && !strings.Contains(line, `cluster_ip=""`) {
				shown++
			}
		}
		if shown != len(held.Items) {
			return fmt.Errorf("kube-state-metrics shows %d Services with a cluster IP, the range holds %d addresses", shown, len(held.Items))
		}
		return nil
	})
	resp, err := ruletest.Eval(ctx, ruletest.Request{
		Rules:        rules.File{Groups: rules.Groups(rs)},
		Exposition:   exposition,
		TargetLabels: map[string]string{"job": jobs.KubeStateMetrics, "instance": "127.0.0.1"},
		Start:        time.Now().Unix(),
		EvalTimes:    []string{"0s"},
	})
	require.NoError(t, err)
	return resp.At("0s", rules.ServiceRangeNearlyFull, state)
}
