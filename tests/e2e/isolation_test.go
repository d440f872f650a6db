package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// tenantLevels are the Pod Security levels of the local stack's tenants.
var tenantLevels = map[string]string{legal: "restricted", research: "baseline"}

// checkPoliciesTypeCheck asks the API server itself: every validation and message expression of every policy
// type-checks against the resources' schemas (an expression that does not would deny everything under failurePolicy
// Fail). The API server reports no variable and checks no subresource's rules (k8s.io/apiserver v0.34.4
// pkg/admission/plugin/policy/validating/typechecking.go), so those are left to the unit tests, which evaluate them.
func checkPoliciesTypeCheck(t *testing.T, ctx context.Context) {
	var last string
	eventually(t, ctx, func() error {
		list, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx,
			metav1.ListOptions{LabelSelector: naming.ManagedByLabel + "=" + naming.ManagedBy})
		if err != nil {
			return err
		}
		want := 0
		for _, ref := range tenancy.ClusterObjects(nil, []string{legal, research}) {
			if ref.Kind == naming.KindPolicy {
				want++
			}
		}
		if len(list.Items) < want {
			return errorf("%d policies, want the catalog's and one per tenant (%d)", len(list.Items), want)
		}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return errorf("policy %s not type-checked yet", p.Name)
			}
			if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
				last = fmt.Sprintf("%s: %v", p.Name, w)
				return nil
			}
		}
		return nil
	})
	assert.Empty(t, last, "type-check warnings")
}

// checkPodSecurity: each tenant namespace enforces its level (with warn and audit at restricted), refuses pods that
// would see the node or its GPUs outside a claim, and refuses NVIDIA runtime variables by name, by envFrom prefix
// and as ConfigMap keys.
func checkPodSecurity(t *testing.T, ctx context.Context) {
	for tenant, level := range tenantLevels {
		ns := naming.Namespace(tenant)
		t.Run(tenant, func(t *testing.T) {
			n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, level, n.Labels[naming.PodSecurityEnforceLabel])
			assert.Equal(t, tenancy.PodSecurityVersion, n.Labels[naming.PodSecurityEnforceVersionLabel])
			assert.Equal(t, "restricted", n.Labels[naming.PodSecurityWarnLabel])
			assert.Equal(t, "restricted", n.Labels[naming.PodSecurityAuditLabel])
			require.NoError(t, probe.WaitServiceAccount(ctx, client, ns, time.Minute))

			pods := client.CoreV1().Pods(ns)
			_, err = pods.Create(ctx, plainPod(ns, "plain"), dryRun)
			assert.NoError(t, err, "a plain pod is admitted")

			refused := []struct {
				name, message string
				edit          func(p *corev1.Pod)
			}{
				{"privileged", "privileged", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Privileged = ptrTo(true)
					// The API server refuses privileged with allowPrivilegeEscalation false before admission decides.
					p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
				}},
				{"hostpath", "hostPath", func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
				}},
				{"hostnetwork", "hostNetwork=true", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
				{"hostpid", "hostPID=true", func(p *corev1.Pod) { p.Spec.HostPID = true }},
				{"nvidia-env", "set NVIDIA runtime variables", func(p *corev1.Pod) {
					p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}
				}},
				{"nvidia-envfrom", "take envFrom with a prefix that can spell an NVIDIA runtime variable", func(p *corev1.Pod) {
					p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "NVIDIA_", ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
				}},
			}
			for _, r := range refused {
				t.Run(r.name, func(t *testing.T) {
					p := plainPod(ns, r.name)
					r.edit(p)
					_, err := pods.Create(ctx, p, dryRun)
					requireDenied(t, err, r.message)
				})
			}
			t.Run("a ConfigMap key named like a runtime variable", func(t *testing.T) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
					Data: map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}}
				_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, dryRun)
				requireDenied(t, err, "NVIDIA_VISIBLE_DEVICES", "envFrom")
			})
		})
	}
}

// plainPod passes the restricted Pod Security Standard.
func plainPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			SecurityContext: probe.RestrictedPod(),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "1"},
				SecurityContext: probe.RestrictedContainer()}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// checkVClusterAdmitted: the real StatefulSet controller creates each tenant's vCluster control plane pod under the
// namespace's enforced level, without a FailedCreate event.
func checkVClusterAdmitted(t *testing.T, ctx context.Context) {
	for tenant := range tenantLevels {
		ns := naming.Namespace(tenant)
		t.Run(tenant, func(t *testing.T) {
			eventually(t, ctx, func() error {
				_, err := client.CoreV1().Pods(ns).Get(ctx, tenant+"-0", metav1.GetOptions{})
				return err
			})
			// The chart's objects are applied side by side, so the StatefulSet controller may try once before the
			// service account exists, and retries; what must never happen is a refusal by Pod Security.
			events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=StatefulSet"})
			require.NoError(t, err)
			for _, e := range events.Items {
				assert.False(t, e.Reason == "FailedCreate" && strings.Contains(e.Message, "PodSecurity"),
					"StatefulSet %s: %s", e.InvolvedObject.Name, e.Message)
			}
		})
	}
}

// checkClaimStatusGuard attacks legal-ai's claims the way its syncer's token could: raw PATCHes of the status
// subresource, without reading the claims first, through each served API version. The API server already refuses to
// change an allocation in place ("field is immutable"), so the attacks give the pending claim whole-c a device:
// the GPU already allocated to whole-a (a double booking) or a MIG device of research-ai's pool, or take whole-a's
// allocation away so the device looks free. RBAC allows the status writes (the vCluster chart grants the syncer
// resourceclaims/status). From Kubernetes 1.36 the API server also asks for resourceclaims/binding before it lets a
// status write change an allocation or reservations (DRAResourceClaimGranularStatusAuthorization, beta and on:
// kubernetes v1.36.3 pkg/registry/resource/resourceclaim/strategy.go, AuthorizedForBinding), which the chart does not
// grant, so it refuses first; on 1.35, the platform's floor, the admission policy is what holds. The attacks run twice:
// with the chart's rights, refused by whichever layer the cluster has first, and with resourceclaims/binding granted
// to the syncer (as a broader operator grant would), so that the policy itself is shown to refuse on any version.
func checkClaimStatusGuard(t *testing.T, ctx context.Context) {
	ns := naming.Namespace(legal)
	syncer, user := syncerOf(t, ctx, legal)
	require.True(t, allowed(t, ctx, user, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "patch", Group: "resource.k8s.io", Resource: "resourceclaims", Subresource: "status",
	}), "RBAC lets the syncer patch claim status")
	binding := authorizationv1.ResourceAttributes{Verb: "patch", Group: "resource.k8s.io", Resource: "resourceclaims", Subresource: "binding"}
	require.False(t, allowed(t, ctx, user, binding), "the chart does not grant the syncer resourceclaims/binding")

	taken, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "whole-a", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, taken.Status.Allocation)
	held := taken.Status.Allocation.Devices.Results[0]
	allocate := func(pool, device string) string {
		return fmt.Sprintf(`{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com",`+
			`"pool":%q,"device":%q}]}}}}`, pool, device)
	}
	attacks := []struct{ name, version, claim, patch string }{
		{"whole-a's GPU for whole-c through v1", "v1", "whole-c", allocate(held.Pool, held.Device)},
		{"whole-a's GPU for whole-c through v1beta2", "v1beta2", "whole-c", allocate(held.Pool, held.Device)},
		{"whole-a's GPU for whole-c through v1beta1", "v1beta1", "whole-c", allocate(held.Pool, held.Device)},
		{"another tenant's MIG device for whole-c", "v1", "whole-c", allocate("gpu-a100-mig-0", "gpu-0-mig-1g5gb-19-6")},
		{"whole-a's reservations and allocation taken away", "v1", "whole-a", `{"status":{"reservedFor":null,"allocation":null}}`},
		{"whole-a reserved for another pod", "v1", "whole-a",
			`{"status":{"reservedFor":[{"resource":"pods","name":"thief","uid":"00000000-0000-0000-0000-000000000001"}]}}`},
	}
	send := func(c struct{ name, version, claim, patch string }) error {
		return syncer.CoreV1().RESTClient().Patch(types.MergePatchType).
			AbsPath("/apis/resource.k8s.io", c.version, "namespaces", ns, "resourceclaims", c.claim, "status").
			Body([]byte(c.patch)).Do(ctx).Error()
	}
	policyRefusal := func(claim string) []string {
		return []string{"may change the allocation or reservations of ResourceClaim " + ns + "/" + claim, user + " may not"}
	}
	granular := serverMinor(t) >= 36
	t.Run("with the chart's rights", func(t *testing.T) {
		for _, c := range attacks {
			t.Run(c.name, func(t *testing.T) {
				if granular {
					requireDenied(t, send(c), `requires resource="resourceclaims/binding"`, user)
				} else {
					requireDenied(t, send(c), policyRefusal(c.claim)...)
				}
			})
		}
	})
	// status.devices is the driver's report of its devices. From 1.36 writing it asks for resourceclaims/driver of
	// each driver named (AuthorizedForDeviceStatus, same file), which the chart does not grant; on 1.35 RBAC's
	// resourceclaims/status is enough and nothing allocates by it (docs/threat-model.md).
	t.Run("a device status written for whole-a", func(t *testing.T) {
		err := rawPatch(ctx, syncer, types.MergePatchType, "/apis/resource.k8s.io/v1/namespaces/"+ns+"/resourceclaims/whole-a/status",
			fmt.Sprintf(`{"status":{"devices":[{"driver":%q,"pool":%q,"device":%q,"conditions":[{"type":"Ready","status":"True",`+
				`"reason":"Forged","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}}`, held.Driver, held.Pool, held.Device))
		if granular {
			requireDenied(t, err, `requires resource="resourceclaims/driver"`, user)
		} else {
			assert.NoError(t, err, "admitted without the granular authorization")
		}
	})
	t.Run("with resourceclaims/binding granted", func(t *testing.T) {
		grant(t, ctx, user, rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/binding"},
			Verbs: []string{"patch", "update"}})
		for _, c := range attacks {
			t.Run(c.name, func(t *testing.T) { requireDenied(t, send(c), policyRefusal(c.claim)...) })
		}
	})
	pending, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "whole-c", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pending.Status.Allocation, "whole-c is still waiting for a device")
	after, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "whole-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, taken.Status, after.Status, "whole-a's allocation and reservations are untouched")
}

// syncerOf is a client with the tenant's syncer's own service-account token, as a tenant that holds it would use it,
// and the syncer's user name.
func syncerOf(t *testing.T, ctx context.Context, tenant string) (kubernetes.Interface, string) {
	t.Helper()
	return serviceAccountClient(t, ctx, naming.Namespace(tenant), "vc-"+tenant)
}

// serviceAccountClient is a client with a fresh token of the service account, and the account's user name.
func serviceAccountClient(t *testing.T, ctx context.Context, namespace, name string) (kubernetes.Interface, string) {
	t.Helper()
	return clientAs(t, tokenOf(t, ctx, namespace, name)), "system:serviceaccount:" + namespace + ":" + name
}

func tokenOf(t *testing.T, ctx context.Context, namespace, name string) string {
	t.Helper()
	var token *authenticationv1.TokenRequest
	eventually(t, ctx, func() error {
		var err error
		token, err = client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(1800))}}, metav1.CreateOptions{})
		return err
	})
	return token.Status.Token
}

// restConfigAs is the local cluster's client configuration with a bearer token instead of the admin's certificate.
func restConfigAs(t *testing.T, token string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	anon := rest.AnonymousClientConfig(cfg)
	anon.BearerToken = token
	return anon
}

// clientAs is a client that authenticates with a bearer token, trusting the local cluster's CA.
func clientAs(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfigAs(t, token))
	require.NoError(t, err)
	return cs
}

// allowed asks RBAC, through a SubjectAccessReview, whether a service account may do what attrs say.
func allowed(t *testing.T, ctx context.Context, user string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	namespace := strings.Split(user, ":")[2]
	review, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.Allowed
}

// checkClaimsOutsideTenants: a claim naming a tenant's class or the driver's is refused in every namespace that is
// not exactly a tenant's, and the tenant label stays on tenant namespaces.
func checkClaimsOutsideTenants(t *testing.T, ctx context.Context) {
	for name, labels := range map[string]map[string]string{
		"vcluster-stray": nil,
		"vcluster-ghost": {naming.TenantNamespaceLabel: "ghost"},
	} {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		require.NoError(t, err)
		// Gone, not just terminating, when the next check takes its snapshot of the cluster's namespaces.
		t.Cleanup(func() {
			_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
			requireNamespaceGone(t, context.Background(), name)
		})
	}
	for _, ns := range []string{"default", "vcluster-stray", "vcluster-ghost"} {
		for _, class := range []string{whole, "gpu.nvidia.com", "mig.nvidia.com"} {
			t.Run(ns+"/"+class, func(t *testing.T) {
				_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "outside", probe.Request{Classes: []string{class}}), dryRun)
				requireDenied(t, err, "namespace "+ns+" is not a tenant host namespace", class)
			})
		}
	}
	t.Run("a template in default", func(t *testing.T) {
		_, err := client.ResourceV1().ResourceClaimTemplates("default").Create(ctx,
			probe.ClaimTemplate("default", "outside", probe.Request{Classes: []string{"other.example.com", slice}}), dryRun)
		requireDenied(t, err, "is not a tenant host namespace", slice)
	})
	t.Run("the tenant label on another namespace", func(t *testing.T) {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch",
			Labels: map[string]string{naming.TenantNamespaceLabel: legal}}}, dryRun)
		requireDenied(t, err, "namespace scratch may not carry "+naming.TenantNamespaceLabel+"="+legal)
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, naming.TenantNamespaceLabel, legal)
		_, err = client.CoreV1().Namespaces().Patch(ctx, "default", types.MergePatchType, []byte(patch),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		requireDenied(t, err, "namespace default may not carry")
	})
}

// checkMetadataBlocked: each tenant's egress to the internet excepts every cloud metadata endpoint and the pod ranges
// the stack gives (existing.podCIDRs).
func checkMetadataBlocked(t *testing.T, ctx context.Context, podCIDRs ...string) {
	for tenant := range tenantLevels {
		np, err := client.NetworkingV1().NetworkPolicies(naming.Namespace(tenant)).Get(ctx, "allow-egress-internet", metav1.GetOptions{})
		require.NoError(t, err)
		var except []string
		for _, eg := range np.Spec.Egress {
			for _, to := range eg.To {
				if to.IPBlock != nil {
					except = append(except, to.IPBlock.Except...)
				}
			}
		}
		slices.Sort(except)
		want := append(slices.Clone(tenancy.MetadataCIDRs), podCIDRs...)
		slices.Sort(want)
		assert.Equal(t, want, except, "tenant %s", tenant)
	}
}

// checkGrantLifecycle runs after a destroy: grants must be enforced by the API server through every lifecycle, with
// no cache of policy params to go stale. Up again; revoke research-ai's class and the revoked class is refused at
// once, while a claim made before the revocation gets no new pod; remove every tenant, add one back, and its grant
// works.
func checkGrantLifecycle(t *testing.T, ctx context.Context, env *stackEnv) {
	tenants := env.tenants()
	_, err := env.open(ctx, nil).Up(ctx)
	require.NoError(t, err)
	rns := naming.Namespace(research)
	require.NoError(t, probe.WaitServiceAccount(ctx, client, rns, time.Minute))
	eventually(t, ctx, func() error {
		_, err := client.ResourceV1().ResourceClaims(rns).Create(ctx, probe.Claim(rns, "kept", probe.Request{Classes: []string{slice}}), metav1.CreateOptions{})
		return err
	})

	// No tenant holds gpu-slice any more: the config must say it is the platform's.
	revoked := slices.Clone(tenants)
	revoked[1].Classes, revoked[1].GPUQuota = []string{whole}, map[string]int{whole: 1}
	_, err = env.openWith(ctx, revoked, env.classes(slice)).Up(ctx)
	require.NoError(t, err)
	start := time.Now()
	within(t, ctx, 5*time.Second, func() error {
		_, err := client.ResourceV1().ResourceClaims(rns).Create(ctx, probe.Claim(rns, "late", probe.Request{Classes: []string{slice}}), dryRun)
		if err == nil {
			return errorf("the revoked class %s is still admitted", slice)
		}
		if !strings.Contains(err.Error(), "not granted DeviceClass "+slice) {
			return err
		}
		return nil
	})
	t.Logf("revoked class refused %v after up returned", time.Since(start).Round(time.Millisecond))
	eventually(t, ctx, func() error {
		_, err := client.ResourceV1().ResourceClaims(rns).Create(ctx, probe.Claim(rns, "new", probe.Request{Classes: []string{whole}}), dryRun)
		return err
	})

	t.Run("a claim made before the revocation gets no new pod", func(t *testing.T) {
		_, err := client.CoreV1().Pods(rns).Create(ctx, probe.Pod(rns, "late", "kept", ""), metav1.CreateOptions{})
		require.NoError(t, err)
		var reason string
		eventually(t, ctx, func() error {
			var err error
			if reason, err = probe.PendingReason(ctx, client, rns, "late"); err != nil {
				return err
			}
			if !strings.Contains(reason, "no longer granted") {
				return errorf("pod late: %q", reason)
			}
			return nil
		})
		t.Logf("pod late pending: %s", reason)
		c, err := client.ResourceV1().ResourceClaims(rns).Get(ctx, "kept", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, c.Status.Allocation)
	})

	t.Run("every tenant removed, one added back, and its grant works", func(t *testing.T) {
		env.retire(legal, research)
		_, err := env.openWith(ctx, []platform.TenantArgs{}, env.classes(whole, slice)).Up(ctx)
		require.NoError(t, err)
		env.retire()
		_, err = env.openWith(ctx, tenants[:1], env.classes(slice)).Up(ctx)
		require.NoError(t, err)
		lns := naming.Namespace(legal)
		require.NoError(t, probe.WaitServiceAccount(ctx, client, lns, time.Minute))
		eventually(t, ctx, func() error {
			_, err := client.ResourceV1().ResourceClaims(lns).Create(ctx, probe.Claim(lns, "back", probe.Request{Classes: []string{whole}}), dryRun)
			return err
		})
		_, err = client.ResourceV1().ResourceClaims(lns).Create(ctx, probe.Claim(lns, "foreign", probe.Request{Classes: []string{slice}}), dryRun)
		requireDenied(t, err, "not granted DeviceClass "+slice)
	})
}
