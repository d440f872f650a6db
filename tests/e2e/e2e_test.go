package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const (
	legal    = "legal-ai"
	research = "research-ai"
	whole    = "gpu-whole"
	slice    = "gpu-slice"
)

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// stackEnv is one engine stack of the local stack file, pointed at this test's control plane.
type stackEnv struct {
	t        *testing.T
	stateDir string
	workDir  string
	base     platform.StackConfig
	// name is the stack's name when it is not the local stack's own: a second stack with the local stack's config.
	name string
	// project is the Pulumi project when it is not this repository's: a team's own program with the same platform.
	project string
	// config sets further keys of the stack's config (full keys, raw values).
	config map[string]string
	// apiClients says whether the stack admits clients outside the cluster at each vCluster's API
	// (vcluster.apiClientCIDRs): the local stack does, for its machine.
	apiClients bool
	// platformConnected gives each tenant its platform access key (connectPlatform).
	platformConnected bool
}

// platformKeys are the tenants' platform access keys of a stack connected to a platform (connectPlatform).
var platformKeys = map[string]string{legal: "e2e-platform-key-of-legal-ai-7f3c", research: "e2e-platform-key-of-research-ai-91ab"}

// connectPlatform connects the tenants' vClusters to a vCluster Platform that runs elsewhere, each with its own access
// key, as a production stack does; nothing of the platform runs here, so only what the program writes is checked.
func (s *stackEnv) connectPlatform() {
	s.config = map[string]string{platform.ConfigNamespace + ":platform": `{"enabled": true, "install": false, "host": "platform.gpu-tenancy.test"}`}
	s.platformConnected = true
}

// podCIDRs are the pod ranges the stack file gives (existing.podCIDRs), which every tenant's egress excludes.
func (s *stackEnv) podCIDRs() []string {
	var existing struct {
		PodCIDRs []string `json:"podCIDRs"`
	}
	require.NoError(s.t, json.Unmarshal([]byte(s.base.Values[platform.ConfigNamespace+":existing"]), &existing))
	require.NotEmpty(s.t, existing.PodCIDRs, "the local stack gives its pod range")
	return existing.PodCIDRs
}

func newStackEnv(t *testing.T) *stackEnv {
	base, err := platform.ReadStackFile(filepath.Join(repoRoot, "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	var vc struct {
		APIClientCIDRs []string `json:"apiClientCIDRs"`
	}
	require.NoError(t, json.Unmarshal([]byte(base.Values[platform.ConfigNamespace+":vcluster"]), &vc))
	return &stackEnv{t: t, stateDir: t.TempDir(), workDir: t.TempDir(), base: base, apiClients: len(vc.APIClientCIDRs) > 0}
}

// open prepares the local stack with tenants replaced when given. The kubeconfig of this test's control plane is
// handed over as the secret `gpu-tenancy:kubeconfig`, so the state check can look for a secret config value.
func (s *stackEnv) open(ctx context.Context, tenants []platform.TenantArgs) *environment.Stack {
	s.t.Helper()
	return s.openWith(ctx, tenants, nil)
}

// openWith is open with the GPU classes replaced too, when given.
func (s *stackEnv) openWith(ctx context.Context, tenants []platform.TenantArgs, classes []tenancy.GPUClass) *environment.Stack {
	s.t.Helper()
	st, err := environment.Open(ctx, s.options(tenants, classes))
	require.NoError(s.t, err)
	return st
}

// options are the engine options of the local stack of this test, tenants and classes replaced when given.
func (s *stackEnv) options(tenants []platform.TenantArgs, classes []tenancy.GPUClass) environment.Options {
	s.t.Helper()
	raw, err := os.ReadFile(kubeconfig)
	require.NoError(s.t, err)
	// The stack file's existing block, when this environment read one, but its kubeconfig, which comes as a secret.
	existing := map[string]any{}
	if raw := s.base.Values[platform.ConfigNamespace+":existing"]; raw != "" {
		require.NoError(s.t, json.Unmarshal([]byte(raw), &existing))
	}
	delete(existing, "kubeconfigPath")
	rawExisting, err := json.Marshal(existing)
	require.NoError(s.t, err)
	cfg := map[string]string{platform.ConfigNamespace + ":existing": string(rawExisting)}
	maps.Copy(cfg, s.config)
	for key, value := range map[string]any{"tenants": tenants, "gpuClasses": classes} {
		if reflect.ValueOf(value).IsNil() {
			continue
		}
		raw, err := json.Marshal(value)
		require.NoError(s.t, err)
		cfg[platform.ConfigNamespace+":"+key] = string(raw)
	}
	secrets := map[string]string{platform.ConfigNamespace + ":kubeconfig": string(raw)}
	if s.platformConnected {
		keyed := tenants
		if keyed == nil {
			keyed = s.tenants()
		}
		keys := map[string]string{}
		for _, t := range keyed {
			if key, ok := platformKeys[t.Name]; ok {
				keys[t.Name] = key
			}
		}
		raw, err := json.Marshal(keys)
		require.NoError(s.t, err)
		secrets[platform.ConfigNamespace+":platformAccessKeys"] = string(raw)
	}
	return environment.Options{
		RepoRoot: repoRoot, Stack: s.stack(), ConfigFrom: "local", WorkDir: s.workDir, Backend: "file://" + s.stateDir,
		Passphrase: "e2e-passphrase", Config: cfg, Progress: progressTo(s.t), SecretConfig: secrets,
	}
}

// retire names the tenants the stack file retires (retiredTenants) from the next open on; no name clears it.
func (s *stackEnv) retire(tenants ...string) {
	key := platform.ConfigNamespace + ":retiredTenants"
	if s.config == nil {
		s.config = map[string]string{}
	}
	if len(tenants) == 0 {
		delete(s.config, key)
		return
	}
	raw, err := json.Marshal(tenants)
	require.NoError(s.t, err)
	s.config[key] = string(raw)
}

// stack is the name of this test's stack: the local stack, or another stack with its config.
func (s *stackEnv) stack() string {
	if s.name == "" {
		return "local"
	}
	return s.name
}

// owner is the value of the owner label on this stack's objects.
func (s *stackEnv) owner() string {
	project := s.project
	if project == "" {
		project = platform.ConfigNamespace
	}
	return naming.StackOwner(project, s.stack())
}

// classes are the local stack's GPU classes, those named marked platform-only.
func (s *stackEnv) classes(platformOnly ...string) []tenancy.GPUClass {
	var out []tenancy.GPUClass
	require.NoError(s.t, json.Unmarshal([]byte(s.base.Values[platform.ConfigNamespace+":gpuClasses"]), &out))
	for i := range out {
		out[i].PlatformOnly = slices.Contains(platformOnly, out[i].Name)
	}
	return out
}

func (s *stackEnv) tenants() []platform.TenantArgs {
	var out []platform.TenantArgs
	require.NoError(s.t, json.Unmarshal([]byte(s.base.Values[platform.ConfigNamespace+":tenants"]), &out))
	return out
}

// clusterScopedKinds are the kinds of the cluster-wide objects a stack creates, and so could leave behind.
var clusterScopedKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "namespaces"},
	{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas"},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"},
}

// snapshot names the cluster-wide objects a stack could leave behind.
func snapshot(t *testing.T, ctx context.Context) []string {
	return listObjects(t, ctx, clusterScopedKinds, "")
}

// listObjects names the objects of kinds that match the label selector ("" for every one), sorted, as
// "<resource>/<namespace>/<name>" (no namespace for a cluster-scoped object).
func listObjects(t *testing.T, ctx context.Context, kinds []schema.GroupVersionResource, selector string) []string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	var names []string
	for _, gvr := range kinds {
		list, err := meta.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		require.NoError(t, err)
		for _, item := range list.Items {
			names = append(names, gvr.Resource+"/"+item.Namespace+"/"+item.Name)
		}
	}
	sort.Strings(names)
	return names
}

// requireNamespaceGone waits until the namespace is deleted, not just terminating.
func requireNamespaceGone(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	eventually(t, ctx, func() error {
		if _, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errorf("namespace %s still there (%v)", name, err)
		}
		return nil
	})
}

// requireAsBefore waits until the cluster-wide objects are those of snapshot before (namespaces terminate for a while).
func requireAsBefore(t *testing.T, ctx context.Context, before []string) {
	t.Helper()
	eventually(t, ctx, func() error {
		if after := snapshot(t, ctx); !assert.ObjectsAreEqual(before, after) {
			return errorf("cluster differs from before:\nbefore %v\nafter  %v", before, after)
		}
		return nil
	})
}

func requireDenied(t *testing.T, err error, fragments ...string) {
	t.Helper()
	require.Error(t, err, "must be denied")
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "denied by admission, got %v", err)
	for _, f := range fragments {
		assert.Contains(t, err.Error(), f)
	}
}

// eventually retries a check while admission policy and quota caches catch up with a change.
func eventually(t *testing.T, ctx context.Context, check func() error) {
	t.Helper()
	within(t, ctx, 30*time.Second, check)
}

// within retries a check for at most d.
func within(t *testing.T, ctx context.Context, d time.Duration, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, d, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	require.NoError(t, err, "last attempt: %v", last)
}

func TestLocalStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	require.NoError(t, simhw.Apply(ctx, client))
	before := snapshot(t, ctx)
	env := newStackEnv(t)
	env.connectPlatform()

	t.Run("up succeeds and a second preview reports no changes", func(t *testing.T) {
		st := env.open(ctx, nil)
		_, err := st.Up(ctx)
		require.NoError(t, err)
		prev, err := st.Preview(ctx)
		require.NoError(t, err)
		for op, n := range prev.ChangeSummary {
			assert.Equal(t, "same", string(op), "second preview must not %s %d resources", op, n)
		}
	})

	t.Run("the API server holds the platform's objects", func(t *testing.T) { checkObjects(t, ctx, env) })
	t.Run("what vCluster and GPU jobs legitimately create is admitted", func(t *testing.T) { checkLegitimateWorkloads(t, ctx) })
	t.Run("the policy pack passes the program and stops a broken one", func(t *testing.T) { checkPolicyPack(t, ctx, env) })
	t.Run("every policy type-checks on the API server", func(t *testing.T) { checkPoliciesTypeCheck(t, ctx) })
	t.Run("entitlements hold", func(t *testing.T) { checkEntitlements(t, ctx) })
	t.Run("pod security holds in tenant namespaces", func(t *testing.T) { checkPodSecurity(t, ctx) })
	t.Run("the vCluster control plane is admitted under its tenant's level", func(t *testing.T) { checkVClusterAdmitted(t, ctx) })
	t.Run("no controller is refused a pod in a tenant namespace", func(t *testing.T) { checkNoFailedCreate(t, ctx) })
	t.Run("no GPU claim outside a tenant's own namespace", func(t *testing.T) { checkClaimsOutsideTenants(t, ctx) })
	t.Run("every cloud metadata endpoint and the pods' range are blocked", func(t *testing.T) {
		checkMetadataBlocked(t, ctx, env.podCIDRs()...)
	})
	t.Run("device quotas hold and allocation is real", func(t *testing.T) { checkQuotaAndAllocation(t, ctx) })
	t.Run("claim status cannot be forged", func(t *testing.T) { checkClaimStatusGuard(t, ctx) })
	t.Run("the syncer holds exactly the rights the threat model lists", func(t *testing.T) { checkSyncerRights(t, ctx) })
	t.Run("who writes what the platform reads is what the threat model says", func(t *testing.T) { checkPlatformSources(t, ctx) })
	t.Run("a hostile tenant is refused by the guard that names it", func(t *testing.T) { checkHostileTenant(t, ctx) })
	t.Run("a device in use cannot be released", func(t *testing.T) { checkClaimRelease(t, ctx) })
	t.Run("object counts are capped", func(t *testing.T) { checkObjectCountQuota(t, ctx) })
	t.Run("each guard is what refuses its attack", func(t *testing.T) { checkEachGuardIsWhatRefuses(t, ctx) })
	t.Run("each tenant's platform key is its own", func(t *testing.T) { checkPlatformKeys(t, ctx, platformKeys) })
	t.Run("API fairness puts each tenant in one flow, the driver ahead", func(t *testing.T) { checkFlowSchemas(t, ctx) })
	t.Run("the operators' CLI reports capacity, waiting claims and findings", func(t *testing.T) { checkOperatorCLI(t, ctx) })
	t.Run("the operators' CLI takes what tenants write for their word", func(t *testing.T) { checkPlatformReadsTenantWords(t, ctx) })
	t.Run("the pending-claim alert fires for the waiting tenant only", func(t *testing.T) { checkPendingClaimAlert(t, ctx) })
	t.Run("the state holds no secret in plain text", func(t *testing.T) { checkState(t, env) })
	t.Run("stack changes apply just that change", func(t *testing.T) { checkChanges(t, ctx, env) })
	t.Run("a second stack on the cluster is refused and its destroy deletes nothing", func(t *testing.T) { checkSecondStackRefused(t, ctx, env) })
	t.Run("drift shows in the preview and up puts it back", func(t *testing.T) { checkDrift(t, ctx, env) })
	t.Run("a cluster's own rewrite of tenant pods is found before tenants", func(t *testing.T) { checkHostRewritesFound(t, ctx, env) })

	destroy := func(t *testing.T) {
		deleteProbes(t, ctx)
		_, err := env.open(ctx, nil).Destroy(ctx)
		require.NoError(t, err)
		requireAsBefore(t, ctx, before)
	}
	t.Run("destroy leaves the cluster as before", destroy)
	t.Run("grants hold after destroy and up, revocation and re-creation", func(t *testing.T) { checkGrantLifecycle(t, ctx, env) })
	t.Run("destroy again leaves the cluster as before", destroy)
}

func checkObjects(t *testing.T, ctx context.Context, env *stackEnv) {
	for _, c := range []struct{ class, tenant, selects string }{
		{whole, legal, "device.attributes['gpu.nvidia.com'].type == 'gpu'"},
		{slice, research, "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"},
	} {
		dc, err := client.ResourceV1().DeviceClasses().Get(ctx, c.class, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", dc.Labels[naming.ClassTenantLabel(c.tenant)])
		require.Len(t, dc.Spec.Selectors, 1)
		assert.Contains(t, dc.Spec.Selectors[0].CEL.Expression, c.selects)
		assert.Contains(t, dc.Spec.Selectors[0].CEL.Expression, "device.driver == 'gpu.nvidia.com'")
	}
	for _, tenant := range []string{legal, research} {
		ns := naming.Namespace(tenant)
		n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, tenant, n.Labels[naming.TenantNamespaceLabel])
		quotas, err := client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		found := false
		for _, q := range quotas.Items {
			for k := range q.Spec.Hard {
				found = found || strings.HasSuffix(string(k), ".deviceclass.resource.k8s.io/devices")
			}
		}
		assert.True(t, found, "tenant %s needs a device quota", tenant)
		lrs, err := client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, lrs.Items, "limit range of %s", tenant)
		nps, err := client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var policies []string
		for _, np := range nps.Items {
			policies = append(policies, np.Name)
		}
		want := []string{"deny-all", "allow-same-namespace", "allow-dns", "allow-egress-internet"}
		if env.apiClients {
			want = append(want, "allow-ingress-api-clients")
		}
		if env.platformConnected {
			want = append(want, "allow-ingress-platform")
		}
		assert.ElementsMatch(t, want, policies, "network policies of %s", tenant)
		assert.Equal(t, "true", n.Labels[naming.GrantsLabel], "namespace of %s is under the entitlement policy", tenant)
		for _, class := range tenantClasses(env, tenant) {
			assert.Equal(t, "true", n.Labels[naming.ClassGrantLabel(class)], "namespace of %s grants %s", tenant, class)
		}
		// The vCluster chart's objects, applied one by one and labelled with their stack like every other object, and
		// no Helm release record (a release left pending by an interrupted run would block the next install).
		sts, err := client.AppsV1().StatefulSets(ns).Get(ctx, tenant, metav1.GetOptions{})
		if assert.NoError(t, err, "vCluster StatefulSet of %s", tenant) {
			assert.Equal(t, env.owner(), sts.Labels[naming.StackLabel], "vCluster StatefulSet of %s carries its stack", tenant)
		}
		config, err := client.CoreV1().Secrets(ns).Get(ctx, vcluster.ConfigSecretPrefix+tenant, metav1.GetOptions{})
		if assert.NoError(t, err, "vCluster config of %s", tenant) {
			assert.Equal(t, env.owner(), config.Labels[naming.StackLabel], "vCluster config of %s carries its stack", tenant)
		}
		secrets, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		require.NoError(t, err)
		assert.Empty(t, secrets.Items, "no Helm release record in %s", ns)
	}
	var cluster []string
	for _, ref := range tenancy.ClusterObjects(env.classes(), []string{legal, research}) {
		cluster = append(cluster, ref.String())
	}
	owned := listObjects(t, ctx, clusterScopedKinds, naming.StackLabel+"="+env.owner())
	for _, ref := range cluster {
		kind, name, _ := strings.Cut(ref, "/")
		assert.Contains(t, owned, kindResource(kind)+"//"+name, "%s on the API server, owned by the stack", ref)
	}
}

// tenantClasses are the classes the stack grants tenant.
func tenantClasses(env *stackEnv, tenant string) []string {
	for _, t := range env.tenants() {
		if t.Name == tenant {
			return t.Classes
		}
	}
	return nil
}

func checkEntitlements(t *testing.T, ctx context.Context) {
	ns := naming.Namespace(legal)
	claims := client.ResourceV1().ResourceClaims(ns)
	eventually(t, ctx, func() error {
		_, err := claims.Create(ctx, probe.Claim(ns, "granted", probe.Request{Classes: []string{whole}}), dryRun)
		return err
	})
	denied := []struct {
		name      string
		create    func() error
		fragments []string
	}{
		{"another tenant's class", func() error {
			_, err := claims.Create(ctx, probe.Claim(ns, "foreign", probe.Request{Classes: []string{slice}}), dryRun)
			return err
		}, []string{legal, slice}},
		{"firstAvailable mixing in a foreign class", func() error {
			_, err := claims.Create(ctx, probe.Claim(ns, "mixed", probe.Request{Classes: []string{whole, slice}}), dryRun)
			return err
		}, []string{legal, slice}},
		{"a template naming a foreign class", func() error {
			_, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx,
				probe.ClaimTemplate(ns, "foreign", probe.Request{Classes: []string{slice}}), dryRun)
			return err
		}, []string{legal, slice}},
		{"adminAccess", func() error {
			_, err := claims.Create(ctx, probe.Claim(ns, "admin", probe.Request{Classes: []string{whole}, AdminAccess: true}), dryRun)
			return err
		}, []string{"adminAccess"}},
		{"the driver's own class", func() error {
			_, err := claims.Create(ctx, probe.Claim(ns, "driver", probe.Request{Classes: []string{"gpu.nvidia.com"}}), dryRun)
			return err
		}, []string{legal, "gpu.nvidia.com"}},
		{"another tenant's class through v1beta1", func() error {
			c := &resourcev1beta1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "beta1", Namespace: ns},
				Spec: resourcev1beta1.ResourceClaimSpec{Devices: resourcev1beta1.DeviceClaim{Requests: []resourcev1beta1.DeviceRequest{{
					Name: "gpu", DeviceClassName: slice, AllocationMode: resourcev1beta1.DeviceAllocationModeExactCount, Count: 1,
				}}}},
			}
			_, err := client.ResourceV1beta1().ResourceClaims(ns).Create(ctx, c, dryRun)
			return err
		}, []string{legal, slice}},
		{"another tenant's class through v1beta2", func() error {
			c := &resourcev1beta2.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "beta2", Namespace: ns},
				Spec: resourcev1beta2.ResourceClaimSpec{Devices: resourcev1beta2.DeviceClaim{Requests: []resourcev1beta2.DeviceRequest{{
					Name: "gpu", Exactly: &resourcev1beta2.ExactDeviceRequest{DeviceClassName: slice},
				}}}},
			}
			_, err := client.ResourceV1beta2().ResourceClaims(ns).Create(ctx, c, dryRun)
			return err
		}, []string{legal, slice}},
	}
	for _, d := range denied {
		t.Run(d.name, func(t *testing.T) { requireDenied(t, d.create(), d.fragments...) })
	}
}

// checkQuotaAndAllocation: legal-ai may hold 3 whole GPUs and the simulated pool has 2; research-ai gets MIG slices
// through a claim template.
func checkQuotaAndAllocation(t *testing.T, ctx context.Context) {
	ns := naming.Namespace(legal)
	require.NoError(t, probe.WaitServiceAccount(ctx, client, ns, time.Minute))
	var allocated []probe.Allocation
	for _, name := range []string{"whole-a", "whole-b", "whole-c"} {
		require.NoError(t, probe.Run(ctx, client, ns, name, whole), "claim %s is within quota", name)
		if name == "whole-c" {
			break
		}
		a, err := probe.WaitAllocated(ctx, client, ns, name, time.Minute)
		require.NoError(t, err)
		allocated = append(allocated, a)
	}
	for _, a := range allocated {
		assert.Equal(t, "gpu-0", a.Device, "a whole GPU, never a MIG device")
		assert.True(t, strings.HasPrefix(a.Node, "gpu-a100-whole-"), "on the whole-A100 pool, got %s", a.Node)
		assert.Equal(t, a.Node, a.Pool, "the driver names one pool per node")
	}
	require.Len(t, allocated, 2)
	assert.NotEqual(t, allocated[0].Node, allocated[1].Node)

	t.Run("capacity exhausted: the claim stays unallocated and the pod Pending", func(t *testing.T) {
		var reason string
		eventually(t, ctx, func() error {
			var err error
			reason, err = probe.PendingReason(ctx, client, ns, "whole-c")
			if err == nil && (reason == "" || reason == "not yet considered by the scheduler") {
				return errorf("pod whole-c: scheduler has not reported yet (%q)", reason)
			}
			return err
		})
		t.Logf("whole-c pending: %s", reason)
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "whole-c", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, c.Status.Allocation)
	})

	t.Run("a claim beyond the class quota is rejected", func(t *testing.T) {
		_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "whole-d", probe.Request{Classes: []string{whole}}), metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exceeded quota")
		assert.Contains(t, err.Error(), whole+".deviceclass.resource.k8s.io/devices")
	})

	t.Run("research-ai gets a 1g.5gb MIG device through a claim template", func(t *testing.T) {
		rns := naming.Namespace(research)
		require.NoError(t, probe.WaitServiceAccount(ctx, client, rns, time.Minute))
		_, err := client.ResourceV1().ResourceClaimTemplates(rns).Create(ctx,
			probe.ClaimTemplate(rns, "slice", probe.Request{Classes: []string{slice}}), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = client.CoreV1().Pods(rns).Create(ctx, probe.Pod(rns, "slice-a", "", "slice"), metav1.CreateOptions{})
		require.NoError(t, err)
		a, err := probe.WaitAllocated(ctx, client, rns, "slice-a", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, "gpu-a100-mig-0", a.Node)
		assert.True(t, strings.HasPrefix(a.Device, "gpu-0-mig-1g5gb-"), "a 1g.5gb MIG device, got %s", a.Device)
	})
}

func deleteProbes(t *testing.T, ctx context.Context) {
	for _, tenant := range []string{legal, research} {
		ns := naming.Namespace(tenant)
		zero := int64(0)
		require.NoError(t, client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
		require.NoError(t, client.ResourceV1().ResourceClaimTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	}
}

// checkState searches the state file for the secrets the stack holds: the kubeconfig given as secret config, and
// the client key inside it.
func checkState(t *testing.T, env *stackEnv) {
	files, err := filepath.Glob(filepath.Join(env.stateDir, ".pulumi", "stacks", "*", "local.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one state file for the local stack")
	state, err := os.ReadFile(files[0])
	require.NoError(t, err)
	raw, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	var kc struct {
		Users []struct {
			User struct {
				ClientKeyData string `json:"client-key-data"`
				Token         string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &kc))
	require.NotEmpty(t, kc.Users)
	var secrets []string
	for _, u := range kc.Users {
		if k := u.User.ClientKeyData; k != "" {
			secrets = append(secrets, k)
			pem, err := base64.StdEncoding.DecodeString(k)
			require.NoError(t, err)
			lines := strings.Split(string(pem), "\n")
			require.Greater(t, len(lines), 2)
			secrets = append(secrets, lines[1]) // the key's first base64 line
		}
		if u.User.Token != "" {
			secrets = append(secrets, u.User.Token)
		}
	}
	require.NotEmpty(t, secrets, "the kubeconfig holds a credential to look for")
	for _, key := range platformKeys {
		secrets = append(secrets, key)
	}
	for _, s := range secrets {
		assert.NotContains(t, string(state), s, "state file holds a credential in plain text")
	}
	assert.Contains(t, string(state), "ciphertext", "secrets are stored encrypted")
}

// lastWords are the last lines an engine's failed run printed, where it says why: the whole output is longer than a
// test's failure message holds.
func lastWords(err error) string {
	if err == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

func checkChanges(t *testing.T, ctx context.Context, env *stackEnv) {
	tenants := env.tenants()
	audit := platform.TenantArgs{TenantArgs: tenancy.TenantArgs{Name: "audit-ai", Classes: []string{slice}, GPUQuota: map[string]int{slice: 1}}}

	t.Run("adding a tenant creates it and touches no other tenant", func(t *testing.T) {
		res, err := env.open(ctx, append(tenants, audit)).Up(ctx)
		require.NoError(t, err)
		changes := *res.Summary.ResourceChanges
		assert.Zero(t, changes["delete"]+changes["replace"], "%v", changes)
		assert.Positive(t, changes["create"])
		// The gpu-slice DeviceClass gains a grant label, and nothing else shared changes: the guards read each tenant
		// namespace's own labels, so no policy lists the tenants.
		assert.Equal(t, 1, changes["update"], "%v", changes)
		dc, err := client.ResourceV1().DeviceClasses().Get(ctx, slice, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", dc.Labels[naming.ClassTenantLabel("audit-ai")])
		_, err = client.CoreV1().Namespaces().Get(ctx, naming.Namespace("audit-ai"), metav1.GetOptions{})
		assert.NoError(t, err)
	})

	t.Run("a switch of GPU access that would strand synced claims is refused, and one that would not keeps the tenant's data", func(t *testing.T) {
		ns := naming.Namespace("audit-ai")
		nsBefore, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		stsBefore, err := client.AppsV1().StatefulSets(ns).Get(ctx, "audit-ai", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-data"},
			StringData: map[string]string{"weights": "kept"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		switched := audit
		switched.GPUAccess = vcluster.ExtendedResources
		// A claim its vCluster synced (as the Pro sync writes it): the open-source syncer would leave it, and its
		// device, behind, so the switch is refused until it is gone.
		_, err = client.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "synced-by-pro", probe.Request{Classes: []string{slice}}),
			metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = env.open(ctx, append(tenants, switched)).Up(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tenant audit-ai's namespace vcluster-audit-ai holds claims its vCluster synced (synced-by-pro)")
		require.NoError(t, client.ResourceV1().ResourceClaims(ns).Delete(ctx, "synced-by-pro", metav1.DeleteOptions{}))

		res, err := env.open(ctx, append(tenants, switched)).Up(ctx)
		require.NoError(t, err, "the engine's last words:\n%s", lastWords(err))
		changes := *res.Summary.ResourceChanges
		// The vCluster's config Secret, rendered from its values, is replaced (the runner lifts its protection); the
		// platform's ingress policy goes; what holds the tenant's data stays, as read below.
		assert.Equal(t, 1, changes["replace"], "only the vCluster's rendered config is replaced: %v", changes)
		nsAfter, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, nsBefore.UID, nsAfter.UID, "the tenant's namespace is the same")
		stsAfter, err := client.AppsV1().StatefulSets(ns).Get(ctx, "audit-ai", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, stsBefore.UID, stsAfter.UID, "the vCluster's StatefulSet, and with it its volume, is the same")
		_, err = client.CoreV1().Secrets(ns).Get(ctx, "tenant-data", metav1.GetOptions{})
		assert.NoError(t, err, "the tenant's Secret is kept")
		role, err := client.RbacV1().Roles(ns).Get(ctx, "vc-audit-ai", metav1.GetOptions{})
		require.NoError(t, err)
		for _, rule := range role.Rules {
			assert.NotContains(t, rule.Resources, "resourceclaims", "the open-source syncer is granted no claims")
		}

		_, err = env.open(ctx, append(tenants, audit)).Up(ctx)
		require.NoError(t, err, "and back; the engine's last words:\n%s", lastWords(err))
		require.NoError(t, client.CoreV1().Secrets(ns).Delete(ctx, "tenant-data", metav1.DeleteOptions{}))
	})

	t.Run("changing a quota updates just that quota, and the view of it inside the tenant's vCluster", func(t *testing.T) {
		changed := append([]platform.TenantArgs(nil), tenants...)
		changed[1].GPUQuota = map[string]int{slice: 5}
		res, err := env.open(ctx, append(changed, audit)).Up(ctx)
		require.NoError(t, err)
		changes := *res.Summary.ResourceChanges
		// research-ai asks for its class by name (vcluster.gpuAccess both): the quota it reads inside its vCluster
		// (kube-public/gpu-tenancy-gpus) is in its vCluster's values, so the chart's config Secret is replaced and its
		// StatefulSet restarted once (docs/tenants.md, "Limits and quotas"); nothing else changes.
		assert.Equal(t, map[string]int{"update": 2, "replace": 1}, map[string]int{"update": changes["update"], "replace": changes["replace"]},
			"the quota, the vCluster's StatefulSet and its config Secret: %v", changes)
		assert.Zero(t, changes["create"]+changes["delete"], "%v", changes)
		quotas, err := client.CoreV1().ResourceQuotas(naming.Namespace(research)).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		got := ""
		for _, q := range quotas.Items {
			if v, ok := q.Spec.Hard[resourceName(slice)]; ok {
				got = v.String()
			}
		}
		assert.Equal(t, "5", got)
	})

	// The tenants as the grant below leaves them, without audit-ai.
	granted := append([]platform.TenantArgs(nil), tenants...)
	granted[1].Classes = []string{slice, whole}
	granted[1].GPUQuota = map[string]int{slice: 5, whole: 1}
	t.Run("granting a class lets the tenant claim it", func(t *testing.T) {
		_, err := env.open(ctx, append(slices.Clone(granted), audit)).Up(ctx)
		require.NoError(t, err)
		ns := naming.Namespace(research)
		eventually(t, ctx, func() error {
			_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "granted", probe.Request{Classes: []string{whole}}), dryRun)
			return err
		})
	})

	t.Run("a tenant whose entry is lost is kept, and the up refused", func(t *testing.T) {
		before, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace("audit-ai"), metav1.GetOptions{})
		require.NoError(t, err)
		for name, run := range map[string]func(*environment.Stack) error{
			"preview": func(st *environment.Stack) error { _, err := st.Preview(ctx); return err },
			"up":      func(st *environment.Stack) error { _, err := st.Up(ctx); return err },
		} {
			err := run(env.open(ctx, nil))
			require.Error(t, err, name)
			assert.Contains(t, lastWords(err), "holds tenant audit-ai, which the stack file lists neither in tenants nor in retiredTenants", name)
		}
		after, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace("audit-ai"), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, before.UID, after.UID, "audit-ai's namespace is the same one")
	})

	t.Run("retiring a tenant is previewed, then deletes it and leaves nothing behind", func(t *testing.T) {
		env.retire("audit-ai")
		defer env.retire()
		// Previewed beside the other tenants as the last up left them: a preview of a change of a kept tenant's vCluster
		// values fails on its protected config Secret, which only the up replaces (docs/operating.md, "Known limits and risks").
		_, err := env.open(ctx, granted).Preview(ctx)
		require.NoError(t, err, "the preview of a retirement runs without the tenant's deletes, which it lists")
		_, err = client.CoreV1().Namespaces().Get(ctx, naming.Namespace("audit-ai"), metav1.GetOptions{})
		require.NoError(t, err, "a preview deletes nothing")
		_, err = env.open(ctx, nil).Up(ctx)
		require.NoError(t, err)
		requireNamespaceGone(t, ctx, naming.Namespace("audit-ai"))
		_, err = client.FlowcontrolV1().FlowSchemas().Get(ctx, naming.TenantFlowSchema("audit-ai"), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "flow schema of audit-ai: %v", err)
		for _, class := range []string{whole, slice} {
			dc, err := client.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{})
			require.NoError(t, err)
			assert.NotContains(t, dc.Labels, naming.ClassTenantLabel("audit-ai"))
		}
		dc, err := client.ResourceV1().DeviceClasses().Get(ctx, whole, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, dc.Labels, naming.ClassTenantLabel(research), "the grant of gpu-whole to research-ai is gone again")
	})
}

// resourceName is the quota key for a class's devices.
func resourceName(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
