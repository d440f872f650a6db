package nodes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
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

// checkCopiesThroughVCluster sends, through the tenant's vCluster as its admin, the other objects vCluster copies to
// the host as the tenant writes them: a ConfigMap and a Secret whose keys are NVIDIA runtime variables, which a pod's
// envFrom would set (vCluster copies those a pod uses: loft-sh/vcluster v0.36.1 pkg/controllers/resources/configmaps,
// secrets), the Endpoints of a selector-less Service, and PriorityClasses (sync.toHost.priorityClasses). The host
// refuses what reaches past the entitlement by the guard that names it, with the refusal in the tenant's SyncError
// event, and admits a neighbour of the same kind.
func (c *cluster) checkCopiesThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config) {
	vc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const ns = "copies"
	_, err = vc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = vc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	hostNS := naming.Namespace(tenant)
	nvidia := map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}
	plain := map[string]string{"GREETING": "hello"}
	for _, source := range []struct{ name, kind string }{{"nvidia-env", "ConfigMap"}, {"plain-env", "ConfigMap"},
		{"nvidia-secret", "Secret"}, {"plain-secret", "Secret"}} {
		data := plain
		if strings.HasPrefix(source.name, "nvidia") {
			data = nvidia
		}
		env := corev1.EnvFromSource{}
		if source.kind == "ConfigMap" {
			_, err = vc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: source.name}, Data: data},
				metav1.CreateOptions{})
			env.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: source.name}}
		} else {
			_, err = vc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: source.name}, StringData: data},
				metav1.CreateOptions{})
			env.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: source.name}}
		}
		require.NoError(t, err, "the virtual cluster takes %s %s", source.kind, source.name)
		// vCluster copies a ConfigMap or Secret to the host once a pod uses it.
		spec := tenantPod("exec sleep 3600")
		spec.Containers[0].EnvFrom = []corev1.EnvFromSource{env}
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := vc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "uses-" + source.name}, Spec: spec},
				metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
		require.NoError(t, err)
	}
	for _, source := range []struct{ name, kind string }{{"nvidia-env", "ConfigMap"}, {"nvidia-secret", "Secret"}} {
		t.Run(source.kind+" with an NVIDIA runtime variable's key", func(t *testing.T) {
			assertSyncRefused(t, ctx, vc, ns, source.name, tenancy.RuntimeEnvKeysPolicy)
			var err error
			if source.kind == "ConfigMap" {
				_, err = c.client.CoreV1().ConfigMaps(hostNS).Get(ctx, syncedName(source.name, ns, tenant), metav1.GetOptions{})
			} else {
				_, err = c.client.CoreV1().Secrets(hostNS).Get(ctx, syncedName(source.name, ns, tenant), metav1.GetOptions{})
			}
			assert.True(t, apierrors.IsNotFound(err), "no host %s %s: %v", source.kind, source.name, err)
		})
	}
	t.Run("a ConfigMap and a Secret of ordinary keys reach the host", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, cmErr := c.client.CoreV1().ConfigMaps(hostNS).Get(ctx, syncedName("plain-env", ns, tenant), metav1.GetOptions{})
			_, secretErr := c.client.CoreV1().Secrets(hostNS).Get(ctx, syncedName("plain-secret", ns, tenant), metav1.GetOptions{})
			return cmErr == nil && secretErr == nil, nil
		})
		assert.NoError(t, err)
	})

	// The endpoints of a selector-less Service, which vCluster copies (pkg/controllers/resources/endpoints): more than
	// one EndpointSlice holds would cost every node's dataplane beyond what the count quotas see.
	for name, n := range map[string]int{"too-many-backends": 101, "own-backends": 2} {
		_, err := vc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		addresses := make([]corev1.EndpointAddress, n)
		for i := range addresses {
			addresses[i].IP = fmt.Sprintf("10.244.%d.%d", 200+i/250, 1+i%250)
		}
		_, err = vc.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name},
			Subsets: []corev1.EndpointSubset{{Addresses: addresses, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "the virtual cluster takes Endpoints %s", name)
		}
	}
	t.Run("Endpoints of more backends than one slice holds", func(t *testing.T) {
		assertSyncRefused(t, ctx, vc, ns, "too-many-backends", tenancy.EndpointsPolicy)
		_, err := c.client.CoreV1().Endpoints(hostNS).Get(ctx, syncedName("too-many-backends", ns, tenant), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no host Endpoints: %v", err)
	})
	t.Run("Endpoints of a few backends reach the host", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.client.CoreV1().Endpoints(hostNS).Get(ctx, syncedName("own-backends", ns, tenant), metav1.GetOptions{})
			return err == nil, nil
		})
		assert.NoError(t, err)
	})

	classes := vc.SchedulingV1().PriorityClasses()
	never := corev1.PreemptNever
	for _, pc := range []schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: "everyones-default"}, Value: 0, GlobalDefault: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "batch-low"}, Value: -10, PreemptionPolicy: &never},
	} {
		_, err := classes.Create(ctx, &pc, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "the virtual cluster takes PriorityClass %s", pc.Name)
		}
		t.Cleanup(func() { _ = classes.Delete(context.Background(), pc.Name, metav1.DeleteOptions{}) })
	}
	hostClass := func(virtual string) (*schedulingv1.PriorityClass, error) {
		all, err := c.client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i, pc := range all.Items {
			if pc.Annotations["vcluster.loft.sh/object-name"] == virtual && strings.Contains(pc.Name, tenant) {
				return &all.Items[i], nil
			}
		}
		return nil, nil
	}
	t.Run("a PriorityClass below the band, and a virtual default, reach the host as no default", func(t *testing.T) {
		for _, name := range []string{"batch-low", "everyones-default"} {
			var host *schedulingv1.PriorityClass
			err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				host, err = hostClass(name)
				return err == nil && host != nil, nil
			})
			require.NoError(t, err, "the host copy of %s", name)
			// vCluster copies no class as the host's default (loft-sh/vcluster v0.36.1
			// pkg/controllers/resources/priorityclasses/translate.go), and the guard refuses one that is.
			assert.False(t, host.GlobalDefault, "%s on the host is no default", host.Name)
		}
	})
	// After its neighbours: the syncer has had its turn. vCluster reports this refusal in its own log, not as an event
	// of the cluster-scoped virtual class (none was seen): the host's message, which names the guard, is looked for
	// there.
	t.Run("a PriorityClass above the tenants' band never reaches the host", func(t *testing.T) {
		var log string
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			out, err := c.client.CoreV1().Pods(hostNS).GetLogs(tenant+"-0", &corev1.PodLogOptions{Container: "syncer"}).DoRaw(ctx)
			log = string(out)
			return err == nil && strings.Contains(log, tenancy.PriorityClassPolicy) && strings.Contains(log, "urgent"), nil
		})
		assert.NoError(t, err, "the syncer's log holds the host's refusal of class urgent by %s:\n%s", tenancy.PriorityClassPolicy,
			lastLines(log, 20))
		host, err := hostClass("urgent")
		require.NoError(t, err)
		assert.Nil(t, host, "no host copy of PriorityClass urgent")
	})
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
