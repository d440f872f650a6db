package nodes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// checkHostileThroughVCluster sends pods that reach past a tenant's entitlement through its own vCluster, as its
// cluster-admin: the syncer writes each one to the host, and the host refuses it, by the guard that names it. A plain
// pod of the same namespace runs beside them, so the namespace itself syncs. What Pod Security forbids never reaches
// the host this way: vCluster sets the tenant's level on every virtual namespace, whatever its admin labels, and checks
// each pod against it before it syncs it (loft-sh/vcluster v0.36.1 pkg/controllers/podsecurity/podsecurity.go,
// pkg/controllers/resources/pods/syncer.go isPodSecurityStandardsValid), so such a pod is refused in the virtual
// cluster or left unsynced, and the host's own level holds against the syncer's token (tests/e2e, hostile suite).
func (c *cluster) checkHostileThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config) {
	vc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const ns = "hostile"
	_, err = vc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	// The syncer retries a refused pod for as long as it exists: the namespace goes with the test.
	t.Cleanup(func() { _ = vc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	const podSecurity = "violates PodSecurity"
	cases := []struct {
		name, guard string
		edit        func(*corev1.PodSpec, *metav1.ObjectMeta)
	}{
		{"privileged", podSecurity, func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}},
		{"host-network", podSecurity, func(s *corev1.PodSpec, _ *metav1.ObjectMeta) { s.HostNetwork = true }},
		{"nvidia-env", tenancy.RuntimeEnvPolicy, func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}
		}},
		{"gpu-extended-resource", tenancy.ExtendedResourcePolicy, func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
			one := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			s.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
		}},
		// legal-ai is granted gpu-whole (quota 3) and not gpu-slice.
		{"other-tenants-class", tenancy.ExtendedResourcePolicy, limits(tenancy.DefaultExtendedResourceName("gpu-slice"), "1")},
		{"implicit-class-name", tenancy.ExtendedResourcePolicy, limits("deviceclass.resource.kubernetes.io/gpu-whole", "1")},
		{"over-quota-by-name", "exceeded quota: " + naming.TenantQuota + ", requested: requests.gpu-tenancy.io/gpu-whole=4",
			limits(tenancy.DefaultExtendedResourceName("gpu-whole"), "4")},
		{"cdi-annotation", tenancy.NodeDevicePolicy, func(_ *corev1.PodSpec, m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"cdi.k8s.io/gpu": "k8s.gpu.nvidia.com/gpu=all"}
		}},
		{"plain", "", func(*corev1.PodSpec, *metav1.ObjectMeta) {}},
	}
	refusedVirtually := map[string]bool{}
	for _, tc := range cases {
		spec, meta := tenantPod("exec sleep 3600"), metav1.ObjectMeta{Name: tc.name}
		tc.edit(&spec, &meta)
		// The new namespace's service account appears a moment after it.
		var last error
		poll := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := vc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
			if err != nil && tc.guard == podSecurity && strings.Contains(err.Error(), podSecurity) {
				refusedVirtually[tc.name] = true
				return true, nil
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				last = err
				return false, nil
			}
			return true, nil
		})
		require.NoError(t, poll, "the virtual cluster takes %s as its admin writes it: %v", tc.name, last)
	}
	hostNS := naming.Namespace(tenant)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hostName := syncedName(tc.name, ns, tenant)
			if tc.guard == "" {
				err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
					p, err := c.client.CoreV1().Pods(hostNS).Get(ctx, hostName, metav1.GetOptions{})
					return err == nil && p.Status.Phase == corev1.PodRunning, nil
				})
				assert.NoError(t, err, "the plain pod of the namespace runs on the host as %s", hostName)
				return
			}
			if tc.guard == podSecurity {
				// Checked after the plain pod ran and the host refused the others: the syncer has had its turn.
				return
			}
			assertSyncRefused(t, ctx, vc, ns, tc.name, tc.guard)
			_, err := c.client.CoreV1().Pods(hostNS).Get(ctx, hostName, metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "no host pod %s: %v", hostName, err)
		})
	}
	for _, tc := range cases {
		if tc.guard != podSecurity {
			continue
		}
		_, err := c.client.CoreV1().Pods(hostNS).Get(ctx, syncedName(tc.name, ns, tenant), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s never reaches the host (refused in the virtual cluster: %v): %v",
			tc.name, refusedVirtually[tc.name], err)
	}

	// Services vCluster copies to the host with their type and external IPs (loft-sh/vcluster v0.36.1
	// pkg/controllers/resources/services/syncer.go): the host's guard and the tenant's quota refuse what would take
	// traffic or addresses beyond the tenant's own. vCluster creates a Service on the host as the tenant creates it in
	// the virtual cluster, so the host's refusal is the answer to the tenant's create itself; a later sync would report
	// it as a SyncError event instead.
	services := []struct {
		name, guard string
		spec        corev1.ServiceSpec
	}{
		{"external-ips", tenancy.ServicePolicy, corev1.ServiceSpec{ExternalIPs: []string{"203.0.113.7"}}},
		{"load-balancer", "services.loadbalancers", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		{"node-port", "services.nodeports", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}},
	}
	refusedAtCreate := map[string]bool{}
	for _, svc := range services {
		svc.spec.Ports = []corev1.ServicePort{{Port: 80}}
		_, err := vc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.name}, Spec: svc.spec},
			metav1.CreateOptions{})
		if err != nil && strings.Contains(err.Error(), svc.guard) {
			refusedAtCreate[svc.name] = true
		} else if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "the virtual cluster takes Service %s as its admin writes it", svc.name)
		}
	}
	for _, svc := range services {
		t.Run("Service "+svc.name, func(t *testing.T) {
			if !refusedAtCreate[svc.name] {
				assertSyncRefused(t, ctx, vc, ns, svc.name, svc.guard)
			}
			_, err := c.client.CoreV1().Services(hostNS).Get(ctx, syncedName(svc.name, ns, tenant), metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "no host Service %s: %v", svc.name, err)
		})
	}
}

// limits is a case's edit that sets the pod's container's limit of one resource.
func limits(name, count string) func(*corev1.PodSpec, *metav1.ObjectMeta) {
	return func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
		s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(count)}
	}
}

// assertSyncRefused waits for vCluster to report that the host refused to take one of its objects, by the guard
// named: a SyncError event on the virtual object (loft-sh/vcluster v0.36.1 pkg/patcher/apply.go CreateHostObject), with
// the host's message, which names the refusing guard.
func assertSyncRefused(t *testing.T, ctx context.Context, vc kubernetes.Interface, ns, name, guard string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := vc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == "SyncError" && strings.Contains(e.Message, guard) {
				return true, nil
			}
		}
		return false, nil
	})
	assert.NoError(t, err, "the host refuses %s by %s; the virtual object's events: %v", name, guard, seen)
}
