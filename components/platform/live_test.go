package platform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scwPlatformOwner = "gpu-tenancy.scw-dev"

// platformGuards puts on the fake cluster what the scw-dev platform stack's up leaves there for tenants: every guard
// policy and binding, in force and owned by the platform stack, and the classes, each granted to its tenants.
func (f *fakeCluster) platformGuards(edit func(name string, policy, binding map[string]any)) {
	for _, g := range tenancy.Guards(tenancy.AdmissionArgs{}) {
		var selector map[string]any
		if g.NamespaceSelector != nil {
			raw, err := json.Marshal(g.NamespaceSelector)
			require.NoError(f.t, err)
			require.NoError(f.t, json.Unmarshal(raw, &selector))
		}
		meta := map[string]any{"name": g.Name, "labels": map[string]any{naming.StackLabel: scwPlatformOwner}}
		policy := map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta,
			"spec": map[string]any{"failurePolicy": "Fail"}}
		binding := map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": meta,
			"spec": map[string]any{"policyName": g.Name, "validationActions": []any{"Deny"}, "matchResources": map[string]any{"namespaceSelector": selector}}}
		if edit != nil {
			edit(g.Name, policy, binding)
		}
		f.put("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"+g.Name, policy)
		f.put("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"+g.Name, binding)
	}
	for class, tenant := range map[string]string{"gpu-whole": "legal-ai", "gpu-slice": "research-ai"} {
		f.put("/apis/resource.k8s.io/v1/deviceclasses/"+class, map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
			"metadata": map[string]any{"name": class, "labels": map[string]any{naming.StackLabel: scwPlatformOwner,
				naming.ClassTenantLabel(tenant): "true"}}})
	}
}

// runGroup runs a group stack of scw-dev in groups groups against the fake cluster, through a stack reference to the
// platform stack's kubeconfig.
func (f *fakeCluster) runGroup(t *testing.T, group, groups int, override map[string]string, opts ...pulumi.RunOption) (*mocktest.Recorder, error) {
	rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
	kubeconfig := f.kubeconfig()
	rec.Outputs["pulumi:pulumi:StackReference"] = func(in resource.PropertyMap) resource.PropertyMap {
		return resource.PropertyMap{"name": in["name"], "outputs": resource.NewObjectProperty(resource.PropertyMap{
			"kubeconfig": resource.MakeSecret(resource.NewStringProperty(kubeconfig))})}
	}
	cfg := map[string]string{"gpu-tenancy:tenantGroups": fmt.Sprint(groups)}
	for k, v := range override {
		cfg[k] = v
	}
	return runStackWithOpts(t, rec, fmt.Sprintf("scw-dev.tenants-%d", group), "scw-dev", cfg, opts...)
}

func tenantsBuilt(rec *mocktest.Recorder) []string {
	var out []string
	for _, r := range rec.ByType("gpu-tenancy:tenancy:Tenant") {
		out = append(out, r.Name)
	}
	return out
}

// A tenant whose group the config does not record stays in the group whose stack holds its namespace, whatever the
// number of groups says: its hash places new tenants only.
func TestATenantStaysWhereItsNamespaceLives(t *testing.T) {
	f := newFakeCluster(t)
	f.platformGuards(nil)
	// Two groups hash both tenants into group 1; legal-ai's namespace is group 0's.
	require.Equal(t, 1, TenantGroup("legal-ai", 2))
	require.Equal(t, 1, TenantGroup("research-ai", 2))
	f.namespace("vcluster-legal-ai", "legal-ai", "gpu-tenancy.scw-dev.tenants-0")
	rec, err := f.runGroup(t, 1, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"research-ai"}, tenantsBuilt(rec), "group 1 builds the new tenant only")
	rec, err = f.runGroup(t, 0, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"legal-ai"}, tenantsBuilt(rec), "group 0 keeps the tenant it holds")
}

// A recorded group wins over where the namespace lives, and then the stack that does not own the namespace is refused
// before it creates anything: only a move (which relabels it) takes a tenant from one group to another.
func TestARecordedGroupElsewhereIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	f := newFakeCluster(t)
	f.platformGuards(nil)
	f.namespace("vcluster-legal-ai", "legal-ai", "gpu-tenancy.scw-dev.tenants-0")
	tenants := `[{"name":"legal-ai","classes":["gpu-whole"],"gpuQuota":{"gpu-whole":2},"group":1},
		{"name":"research-ai","classes":["gpu-slice"],"gpuQuota":{"gpu-slice":4}}]`
	rec, err := f.runGroup(t, 1, 2, map[string]string{"gpu-tenancy:tenants": tenants})
	require.ErrorContains(t, err, "Namespace vcluster-legal-ai exists and belongs to stack gpu-tenancy.scw-dev.tenants-0")
	for _, r := range rec.All() {
		assert.False(t, strings.HasPrefix(r.Type, "kubernetes:"), "%s %s registered before the check passed", r.Type, r.Name)
	}
}

// Fewer groups than the group a tenant lives in is refused at the key, naming the move that fixes it.
func TestFewerGroupsThanALiveTenantsGroupIsRefused(t *testing.T) {
	f := newFakeCluster(t)
	f.platformGuards(nil)
	f.namespace("vcluster-legal-ai", "legal-ai", "gpu-tenancy.scw-dev.tenants-2")
	_, err := f.runGroup(t, 0, 2, nil)
	require.ErrorContains(t, err, "gpu-tenancy:tenantGroups")
	require.ErrorContains(t, err, "tenant legal-ai lives in group 2")
	require.ErrorContains(t, err, "gpu-tenancy move <environment> legal-ai --to <group>")
}

func TestATenantsGroupMustBeOneOfTheGroups(t *testing.T) {
	for name, c := range map[string]struct {
		groups, group int
		want          string
	}{
		"past the groups": {2, 2, "gpu-tenancy:tenants[0].group: Invalid value: 2: must be a group of the 2 groups (0 to 1)"},
		"below zero":      {2, -1, "gpu-tenancy:tenants[0].group: Invalid value: -1"},
		"without groups":  {0, 0, "gpu-tenancy:tenants[0].group: Forbidden: places a tenant in a tenant group: set gpu-tenancy:tenantGroups too"},
	} {
		t.Run(name, func(t *testing.T) {
			tenants := fmt.Sprintf(`[{"name":"legal-ai","classes":["gpu-whole"],"gpuQuota":{"gpu-whole":2},"group":%d},
				{"name":"research-ai","classes":["gpu-slice"],"gpuQuota":{"gpu-slice":4}}]`, c.group)
			_, err := runStackAs(t, "scw-dev", "scw-dev", map[string]string{"gpu-tenancy:tenants": tenants,
				"gpu-tenancy:tenantGroups": fmt.Sprint(c.groups)})
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A group stack's up refuses, before it registers anything on the cluster, tenants the platform's guards would not
// cover; its preview (a pull request that adds a tenant) warns and goes on.
func TestAGroupRefusesTenantsTheGuardsDoNotCover(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(f *fakeCluster)
		want string
	}{
		"a guard missing": {func(f *fakeCluster) {
			delete(f.objects, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"+naming.EntitlementPolicy)
		}, "ValidatingAdmissionPolicyBinding gpu-tenancy-device-entitlements does not exist"},
		"a guard of another stack": {func(f *fakeCluster) {
			f.platformGuards(func(name string, policy, _ map[string]any) {
				if name == tenancy.PodPlacementPolicy {
					policy["metadata"] = map[string]any{"name": name, "labels": map[string]any{naming.StackLabel: "someone.else"}}
				}
			})
		}, `ValidatingAdmissionPolicy gpu-tenancy-pod-placement belongs to stack "someone.else"`},
		"a guard that only warns": {func(f *fakeCluster) {
			f.platformGuards(func(name string, _, binding map[string]any) {
				if name == tenancy.ClaimShapePolicy {
					binding["spec"].(map[string]any)["validationActions"] = []any{"Warn"}
				}
			})
		}, "has validationActions [Warn]: a guard denies (Deny)"},
		"a guard that fails open": {func(f *fakeCluster) {
			f.platformGuards(func(name string, policy, _ map[string]any) {
				if name == naming.EntitlementPolicy {
					policy["spec"] = map[string]any{"failurePolicy": "Ignore"}
				}
			})
		}, `has failurePolicy "Ignore"`},
		"a guard bound to no namespace": {func(f *fakeCluster) {
			f.platformGuards(func(name string, _, binding map[string]any) {
				if name == tenancy.RuntimeEnvPolicy {
					binding["spec"].(map[string]any)["matchResources"] = map[string]any{"namespaceSelector": map[string]any{
						"matchLabels": map[string]any{"nothing": "here"}}}
				}
			})
		}, "ValidatingAdmissionPolicyBinding gpu-tenancy-no-nvidia-runtime-env selects namespaces"},
		"a class not granted yet": {func(f *fakeCluster) {
			f.put("/apis/resource.k8s.io/v1/deviceclasses/gpu-slice", map[string]any{"apiVersion": "resource.k8s.io/v1",
				"kind": "DeviceClass", "metadata": map[string]any{"name": "gpu-slice", "labels": map[string]any{naming.StackLabel: scwPlatformOwner}}})
		}, "DeviceClass gpu-slice is not granted to tenant research-ai"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.platformGuards(nil)
			c.edit(f)
			rec, err := f.runGroup(t, 1, 2, nil)
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "Bring the platform stack scw-dev up first")
			for _, r := range rec.All() {
				assert.False(t, strings.HasPrefix(r.Type, "kubernetes:"), "%s %s registered before the check passed", r.Type, r.Name)
			}
			_, err = f.runGroup(t, 1, 2, nil, func(info *pulumi.RunInfo) { info.DryRun = true })
			assert.NoError(t, err, "a preview warns")
		})
	}
}

// The cluster's own admission rewrites every pod before the guards look at it; what it does is found by a dry run
// before anything is created, and refused with the key that admits it.
func TestHostRewritesOfTenantPodsAreFoundFirst(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(pod map[string]any)
		want   []string
		admit  string
	}{
		"a scheduler set by a webhook": {func(pod map[string]any) {
			pod["spec"].(map[string]any)["schedulerName"] = "gke.io/optimize-utilization-scheduler"
		}, []string{"scheduler to gke.io/optimize-utilization-scheduler", "gpu-tenancy:admission.schedulers"},
			`{"schedulers": ["gke.io/optimize-utilization-scheduler"]}`},
		"a default priority class": {func(pod map[string]any) {
			pod["spec"].(map[string]any)["priorityClassName"] = "everyone-high"
			pod["spec"].(map[string]any)["priority"] = 1000
		}, []string{`priority 1000 (PriorityClass "everyone-high"`, "gpu-tenancy:admission.priorityClasses", "gpu-tenancy:admission.maxTenantPriority"},
			`{"priorityClasses": ["everyone-high"]}`},
		"a toleration added": {func(pod map[string]any) {
			spec := pod["spec"].(map[string]any)
			spec["tolerations"] = append(spec["tolerations"].([]any), map[string]any{"key": "example.com/spot", "operator": "Exists"})
		}, []string{"tolerations of example.com/spot", "gpu-tenancy:admission.tolerableTaints"}, `{"tolerableTaints": ["example.com/spot"]}`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.platformGuards(nil)
			f.mutate = c.mutate
			rec, err := f.runGroup(t, 1, 2, nil)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			for _, r := range rec.All() {
				assert.False(t, strings.HasPrefix(r.Type, "kubernetes:"), "%s %s registered before the check passed", r.Type, r.Name)
			}
			_, err = f.runGroup(t, 1, 2, map[string]string{"gpu-tenancy:admission": c.admit})
			assert.NoError(t, err, "admitted by %s", c.admit)
		})
	}
	t.Run("a cluster that refuses a plain tenant pod", func(t *testing.T) {
		f := newFakeCluster(t)
		f.platformGuards(nil)
		f.refuse = "pods is forbidden: some policy"
		_, err := f.runGroup(t, 1, 2, nil)
		require.ErrorContains(t, err, "a tenant pod is refused on this cluster")
		require.ErrorContains(t, err, "some policy")
	})
	t.Run("a namespace whose default service account is not made yet is waited for", func(t *testing.T) {
		f := newFakeCluster(t)
		f.platformGuards(nil)
		f.refuse = `pods "gpu-tenancy-host-probe" is forbidden: error looking up service account default/default: serviceaccount "default" not found`
		f.refuseFirst = 2
		_, err := f.runGroup(t, 1, 2, nil)
		require.NoError(t, err)
		assert.Equal(t, 2, f.refused)
	})
}

// The platform's own guards judge a probe in a tenant namespace by the config in force, so a refusal by one of them is
// read again in default: a rewrite seen there is judged by the config this run applies, and none seen there means
// something rewrites pods in tenant namespaces only, which stays refused.
func TestAProbeRefusedByTheGuardsInATenantNamespaceIsReadInDefault(t *testing.T) {
	const ns = "vcluster-legal-ai"
	refusal := `pods "gpu-tenancy-host-probe" is forbidden: ValidatingAdmissionPolicy '` + tenancy.PodPlacementPolicy +
		`' with binding '` + tenancy.PodPlacementPolicy + `' denied request: tenant legal-ai: pod gpu-tenancy-host-probe names scheduler x`
	for name, c := range map[string]struct {
		rewritesDefault bool
		admission       tenancy.AdmissionArgs
		want            string
	}{
		"a rewrite everywhere, admitted by the config this run applies": {true, tenancy.AdmissionArgs{Schedulers: []string{"x"}}, ""},
		"a rewrite everywhere, not admitted":                            {true, tenancy.AdmissionArgs{}, "scheduler to x"},
		"a rewrite in tenant namespaces only": {false, tenancy.AdmissionArgs{Schedulers: []string{"x"}},
			"something changes pods in tenant namespaces only"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.refuse, f.refuseIn = refusal, ns
			if c.rewritesDefault {
				f.mutate = func(pod map[string]any) { pod["spec"].(map[string]any)["schedulerName"] = "x" }
			}
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			err = l.hostRewrites(t.Context(), &PlatformArgs{Admission: c.admission}, ns, func(string) {})
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.want)
		})
	}
}

// A default PriorityClass below the tenants' band refuses nothing, and is said: a tenant whose vCluster writes a class
// at the top of the band would preempt the other tenants' pods of the default.
func TestADefaultPriorityBelowTheTenantsBandIsSaid(t *testing.T) {
	for name, c := range map[string]struct {
		class    string
		priority int
		want     string
	}{
		"below the band":         {"batch-default", -10, `default PriorityClass "batch-default" gives every pod priority -10`},
		"at the top of the band": {"zero-default", 0, ""},
		"no default class":       {"", 0, ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.mutate = func(pod map[string]any) {
				spec := pod["spec"].(map[string]any)
				if c.class != "" {
					spec["priorityClassName"] = c.class
				}
				spec["priority"] = c.priority
			}
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			var warned []string
			require.NoError(t, l.hostRewrites(t.Context(), &PlatformArgs{}, "default", func(w string) { warned = append(warned, w) }))
			if c.want == "" {
				assert.Empty(t, warned)
				return
			}
			require.Len(t, warned, 1)
			assert.Contains(t, warned[0], c.want)
			assert.Contains(t, warned[0], "maxTenantPriority to -10")
		})
	}
}

// A stack that builds its cloud cluster and its tenants in one probes the cluster once the kubeconfig is known, and
// no tenant object is registered until the probe passes.
func TestACloudClusterThisStackBuildsIsProbedBeforeAnyTenant(t *testing.T) {
	run := func(f *fakeCluster, override map[string]string) (*mocktest.Recorder, error) {
		rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
		rec.Outputs["scaleway:kubernetes/cluster:Cluster"] = func(resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{"kubeconfigs": resource.NewArrayProperty([]resource.PropertyValue{
				resource.NewObjectProperty(resource.PropertyMap{"configFile": resource.NewStringProperty(f.kubeconfig())})})}
		}
		return runStackWithOpts(t, rec, "scw-dev", "scw-dev", override)
	}
	tenantNamespaces := func(rec *mocktest.Recorder) []string {
		var out []string
		for _, r := range rec.ByType("kubernetes:core/v1:Namespace") {
			if r.Name == "legal-ai-namespace" || r.Name == "research-ai-namespace" {
				out = append(out, r.Name)
			}
		}
		return out
	}
	f := newFakeCluster(t)
	f.mutate = func(pod map[string]any) {
		pod["spec"].(map[string]any)["schedulerName"] = "gke.io/optimize-utilization-scheduler"
	}
	rec, err := run(f, nil)
	require.ErrorContains(t, err, "scheduler to gke.io/optimize-utilization-scheduler")
	require.ErrorContains(t, err, "gpu-tenancy:admission.schedulers")
	assert.Empty(t, tenantNamespaces(rec), "registered before the probe passed")
	assert.NotEmpty(t, rec.ByType("gpu-tenancy:scaleway:Cluster"), "the cluster itself is built first")

	rec, err = run(f, map[string]string{"gpu-tenancy:admission": `{"schedulers": ["gke.io/optimize-utilization-scheduler"]}`})
	require.NoError(t, err)
	assert.NotEmpty(t, tenantNamespaces(rec), "admitted by admission.schedulers")

	// A cloud may run a minor with DRAExtendedResource off: the built cluster is asked before a tenant asking by name.
	f = newFakeCluster(t)
	f.dropsExtendedResourceName = true
	byName := map[string]string{"gpu-tenancy:vcluster": `{"gpuAccess": "both"}`,
		"gpu-tenancy:scaleway": `{"zone": "fr-par-2", "kubernetesVersion": "1.36"}`}
	rec, err = run(f, byName)
	require.ErrorContains(t, err, "gpu-tenancy:vcluster.gpuAccess")
	require.ErrorContains(t, err, "dropped a DeviceClass's spec.extendedResourceName")
	assert.Empty(t, tenantNamespaces(rec), "registered before the probe passed")
	f.dropsExtendedResourceName = false
	rec, err = run(f, byName)
	require.NoError(t, err)
	assert.NotEmpty(t, tenantNamespaces(rec), "a cluster that keeps the names")
}

// Every group stack's provider carries the cluster's identity (kube-system's UID), so a new address or CA in the
// kubeconfig updates it instead of replacing every tenant object.
func TestAGroupsProviderCarriesTheClusterIdentity(t *testing.T) {
	f := newFakeCluster(t)
	f.platformGuards(nil)
	rec, err := f.runGroup(t, 1, 2, nil)
	require.NoError(t, err)
	providers := rec.ByType("pulumi:providers:kubernetes")
	require.Len(t, providers, 1)
	assert.Equal(t, "cluster-uid-1", providers[0].Inputs["clusterIdentifier"].StringValue())
}

// While another process moves tenants between the environment's stacks, destroys or recovers them, a stack's program
// refuses to run; an expired lock, and an up's, do not stop it.
func TestAMoveDestroyOrRecoveryUnderWayStopsTheStacks(t *testing.T) {
	lease := func(holder string, renewed time.Time) map[string]any {
		return map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": naming.EnvironmentLock("scw-dev"), "namespace": "kube-system"},
			"spec": map[string]any{"holderIdentity": holder, "leaseDurationSeconds": 120,
				"renewTime": renewed.UTC().Format("2006-01-02T15:04:05.000000Z07:00")}}
	}
	path := "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/" + naming.EnvironmentLock("scw-dev")
	for name, c := range map[string]struct {
		lease  map[string]any
		refuse bool
	}{
		"a move of another process":       {lease("move by ops@laptop (pid 1)", time.Now()), true},
		"a destroy of another process":    {lease("destroy by ops@laptop (pid 1)", time.Now()), true},
		"a recovery of another process":   {lease("recover by ops@laptop (pid 1)", time.Now()), true},
		"a move that stopped renewing":    {lease("move by ops@laptop (pid 1)", time.Now().Add(-time.Hour)), false},
		"a destroy that stopped renewing": {lease("destroy by ops@laptop (pid 1)", time.Now().Add(-time.Hour)), false},
		"an up":                           {lease("up by ops@laptop (pid 1)", time.Now()), false},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.platformGuards(nil)
			f.put(path, c.lease)
			_, err := f.runGroup(t, 1, 2, nil)
			if c.refuse {
				require.ErrorContains(t, err, "which moves, destroys or recovers its stacks: run this stack when it has ended")
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// A node labelled as a tenant's dedicated pool without that tenant's taint is said: every tenant can be scheduled
// there; so is one labelled as the platform's own without its taint, where tenants' pods can land beside the
// platform's controllers.
func TestNodesLabelledWithoutTheirTaintAreSaid(t *testing.T) {
	node := func(key, value string, taints ...map[string]any) map[string]any {
		n := map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": "node-a", "labels": map[string]any{key: value}},
			"status":   map[string]any{"nodeInfo": map[string]any{"kubeletVersion": "v1.35.0"}}}
		if len(taints) > 0 {
			list := make([]any, len(taints))
			for i, t := range taints {
				list[i] = t
			}
			n["spec"] = map[string]any{"taints": list}
		}
		return n
	}
	taint := func(key, value, effect string) map[string]any {
		return map[string]any{"key": key, "value": value, "effect": effect}
	}
	dedicated, platform := naming.DedicatedNodeKey, naming.PlatformPoolKey
	const tenantsOwn, platformsOwn = "node-a (team-a)", "as the platform's own lack its NoSchedule taint"
	for name, c := range map[string]struct {
		node map[string]any
		want []string
	}{
		"labelled and tainted for the tenant":        {node(dedicated, "team-a", taint(dedicated, "team-a", "NoSchedule")), nil},
		"tainted NoExecute":                          {node(dedicated, "team-a", taint(dedicated, "team-a", "NoExecute")), nil},
		"labelled, no taint":                         {node(dedicated, "team-a"), []string{tenantsOwn, "lack its NoSchedule taint"}},
		"tainted for another tenant":                 {node(dedicated, "team-a", taint(dedicated, "team-b", "NoSchedule")), []string{tenantsOwn}},
		"tainted PreferNoSchedule, which keeps none": {node(dedicated, "team-a", taint(dedicated, "team-a", "PreferNoSchedule")), []string{tenantsOwn}},
		"the platform's, labelled and tainted":       {node(platform, "true", taint(platform, "true", "NoSchedule")), nil},
		"the platform's, labelled, no taint":         {node(platform, "true"), []string{"node-a", platform + "=true", platformsOwn}},
		"the platform's, tainted PreferNoSchedule":   {node(platform, "true", taint(platform, "true", "PreferNoSchedule")), []string{platformsOwn}},
		"the platform's, tainted with another value": {node(platform, "true", taint(platform, "yes", "NoSchedule")), []string{platformsOwn}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.lists["/api/v1/nodes"] = []map[string]any{c.node}
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			got := strings.Join(l.nodeExposures(t.Context(), false, podRange{}), "\n")
			if c.want == nil {
				assert.Empty(t, got)
				return
			}
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

// A cluster whose platform has a pool of its own but no node labelled for it is said: the platform's controllers
// would stay Pending.
func TestAPlatformPoolWithoutNodesIsSaid(t *testing.T) {
	node := func(labels map[string]any, taints ...any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "node-a", "labels": labels},
			"spec": map[string]any{"taints": taints}, "status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": "v1.35.0"}}}
	}
	platformNode := node(map[string]any{naming.PlatformPoolKey: "true"},
		map[string]any{"key": naming.PlatformPoolKey, "value": "true", "effect": "NoSchedule"})
	for name, c := range map[string]struct {
		nodes        []map[string]any
		platformPool bool
		said         bool
	}{
		"a platform pool and a node labelled for it":  {[]map[string]any{platformNode, node(nil)}, true, false},
		"a platform pool and no node labelled for it": {[]map[string]any{node(nil)}, true, true},
		"no platform pool":                            {[]map[string]any{node(nil)}, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.lists["/api/v1/nodes"] = c.nodes
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			got := strings.Join(l.nodeExposures(t.Context(), c.platformPool, podRange{}), "\n")
			if !c.said {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, "no node is labelled "+naming.PlatformPoolKey+"=true")
			assert.Contains(t, got, "stay Pending")
		})
	}
}

// An existing cluster's nodes are read for kubelets that run cached private images without checking credentials.
func TestKubeletsOlderThan135AreSaid(t *testing.T) {
	node := func(name, version string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name},
			"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": version}}}
	}
	for name, c := range map[string]struct {
		nodes []map[string]any
		want  string
	}{
		"a 1.34 node among 1.35 ones": {[]map[string]any{node("gpu-a", "v1.35.0"), node("gpu-b", "v1.34.2-gke.1100")},
			"gpu-b (v1.34.2-gke.1100)"},
		"every node on 1.35":        {[]map[string]any{node("gpu-a", "v1.35.0"), node("gpu-b", "v1.36.1")}, ""},
		"no nodes":                  {nil, ""},
		"nodes that cannot be read": {nil, "not checking the nodes' kubelet versions"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			if c.nodes != nil {
				f.lists["/api/v1/nodes"] = c.nodes
			}
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			if strings.Contains(c.want, "not checking") {
				f.server.Close()
			}
			got := strings.Join(l.nodeExposures(t.Context(), false, podRange{}), "\n")
			if c.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, c.want)
			assert.NotContains(t, got, "gpu-a", "a 1.35 node is not named")
		})
	}
}

// An existing cluster's API server is asked, by a server-side dry run, whether it keeps a DeviceClass's
// extended-resource name before a stack that asks for GPUs by name registers anything: one that drops it (older than
// 1.36, or with DRAExtendedResource off) is refused, naming the key.
func TestAClusterThatDropsExtendedResourceNamesIsRefused(t *testing.T) {
	for name, drops := range map[string]bool{"kept": false, "dropped": true} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.dropsExtendedResourceName = drops
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(kc, []byte(f.kubeconfig()), 0o600))
			rec, err := runStack(t, "local", map[string]string{"gpu-tenancy:existing": `{"kubeconfigPath":"` + kc + `"}`})
			if !drops {
				assert.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "gpu-tenancy:vcluster.gpuAccess")
			require.ErrorContains(t, err, "dropped a DeviceClass's spec.extendedResourceName in a server-side dry run")
			for _, r := range rec.All() {
				assert.False(t, strings.HasPrefix(r.Type, "kubernetes:"), "%s %s registered before the check passed", r.Type, r.Name)
			}
		})
	}
}

// A tenant moved to extended resources only while its namespace holds claims its vCluster synced is refused, naming
// them: its open-source syncer would neither sync nor delete them. The scheduler's own claims are no obstacle.
func TestATenantLeavingClaimSyncWithSyncedClaimsIsRefused(t *testing.T) {
	const path = "/apis/resource.k8s.io/v1/namespaces/vcluster-legal-ai/resourceclaims"
	claim := func(name string, annotations map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": name, "namespace": "vcluster-legal-ai", "annotations": annotations}}
	}
	tenants := `[{"name":"legal-ai","classes":["gpu-whole"],"gpuQuota":{"gpu-whole":3},"gpuAccess":"extendedResources"},` +
		`{"name":"research-ai","classes":["gpu-slice"],"gpuQuota":{"gpu-slice":2}}]`
	for name, c := range map[string]struct {
		claims []map[string]any
		want   string
	}{
		"a claim its vCluster synced": {[]map[string]any{claim("whole-a", nil),
			claim("trainer-extended-resources-x7k2p", map[string]any{tenancy.ExtendedResourceClaimAnnotation: "true"})}, "holds claims its vCluster synced (whole-a)"},
		"only the scheduler's claims": {[]map[string]any{
			claim("trainer-extended-resources-x7k2p", map[string]any{tenancy.ExtendedResourceClaimAnnotation: "true"})}, ""},
		"no claim": {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.lists[path] = c.claims
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(kc, []byte(f.kubeconfig()), 0o600))
			rec, err := runStack(t, "local", map[string]string{"gpu-tenancy:existing": `{"kubeconfigPath":"` + kc + `"}`, "gpu-tenancy:tenants": tenants})
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "gpu-tenancy:tenants[0].gpuAccess")
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "set gpu-tenancy:tenants[0].gpuAccess to both")
			for _, r := range rec.All() {
				assert.False(t, strings.HasPrefix(r.Type, "kubernetes:"), "%s %s registered before the check passed", r.Type, r.Name)
			}
		})
	}
}

// A running vCluster whose kubeconfig Secret is gone (the garbage collector follows owner references the tenant's
// syncer may write) is not read, with a warning that says how to have it written again: the read of a missing Secret
// would fail every tenant's deployment. A vCluster that is not running yet is read, after its chart.
func TestALostKubeconfigSecretIsNotRead(t *testing.T) {
	read := func(rec *mocktest.Recorder, tenant string) bool {
		_, err := rec.Get("kubernetes:core/v1:Secret", tenant+"-kubeconfig")
		return err == nil
	}
	f := newFakeCluster(t)
	f.platformGuards(nil)
	rec, err := f.runGroup(t, 1, 2, nil)
	require.NoError(t, err)
	require.True(t, read(rec, "research-ai"), "a vCluster that does not run yet is read once its chart is up")

	f.put("/apis/apps/v1/namespaces/vcluster-research-ai/statefulsets/research-ai", map[string]any{
		"metadata": map[string]any{"name": "research-ai", "namespace": "vcluster-research-ai"}})
	rec, err = f.runGroup(t, 1, 2, nil)
	require.NoError(t, err)
	assert.False(t, read(rec, "research-ai"), "its Secret is gone: not read")

	f.put("/api/v1/namespaces/vcluster-research-ai/secrets/vc-research-ai", map[string]any{
		"metadata": map[string]any{"name": "vc-research-ai", "namespace": "vcluster-research-ai"}})
	rec, err = f.runGroup(t, 1, 2, nil)
	require.NoError(t, err)
	assert.True(t, read(rec, "research-ai"), "its Secret is there: read")
}

// serviceRoomCluster is a fake cluster whose Service range is cidrs (the default ServiceCIDR's), with addresses
// allocated for Services of the namespaces given, one each.
func serviceRoomCluster(t *testing.T, cidrs []string, serviceNamespaces ...string) *liveCluster {
	t.Helper()
	f := newFakeCluster(t)
	if cidrs != nil {
		f.lists["/apis/networking.k8s.io/v1/servicecidrs"] = []map[string]any{{"apiVersion": "networking.k8s.io/v1",
			"kind": "ServiceCIDR", "metadata": map[string]any{"name": "kubernetes"}, "spec": map[string]any{"cidrs": cidrs}}}
	}
	var ips []map[string]any
	for i, ns := range serviceNamespaces {
		ips = append(ips, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
			"metadata": map[string]any{"name": fmt.Sprintf("10.0.0.%d", i+1)},
			"spec":     map[string]any{"parentRef": map[string]any{"resource": "services", "namespace": ns, "name": fmt.Sprintf("s%d", i)}}})
	}
	f.lists["/apis/networking.k8s.io/v1/ipaddresses"] = ips
	l, err := connect(f.kubeconfig())
	require.NoError(t, err)
	return l
}

// tenantsWithServices are n tenants, each with a Service quota of services.
func tenantsWithServices(n, services int) *PlatformArgs {
	c := &PlatformArgs{Keys: ConfigKeys}
	for i := range n {
		t := TenantArgs{TenantArgs: tenancy.TenantArgs{Name: fmt.Sprintf("team-%d", i), ObjectQuota: map[string]int{"services": services}}}
		c.Tenants = append(c.Tenants, t)
	}
	return c
}

// The tenants' Service quotas must fit the cluster's Service range, less its reserve and what the cluster holds
// outside their namespaces, unless the operator says how far they may overcommit it; the numbers are named.
func TestTheTenantsServiceQuotasMustFitTheServiceRange(t *testing.T) {
	v4 := []string{"10.0.0.0/24"} // 254 addresses, 228 promisable (10% kept free)
	for _, tc := range []struct {
		name       string
		cidrs      []string
		elsewhere  []string
		tenants    *PlatformArgs
		overcommit float64
		refused    []string
		warned     []string
	}{
		{name: "two tenants at the default quota fit", cidrs: v4, elsewhere: []string{"default"}, tenants: tenantsWithServices(2, 20)},
		{name: "quotas that fill the room exactly fit", cidrs: v4, elsewhere: []string{"default", "kube-system"}, tenants: tenantsWithServices(2, 113)},
		{name: "one address more is refused, with the numbers", cidrs: v4, elsewhere: []string{"default", "kube-system"},
			tenants: tenantsWithServices(1, 227), refused: []string{"gpu-tenancy:tenants: the tenants' Service quotas " +
				"(gpu-tenancy:tenants[*].objectQuota[services]) add up to 227 for 1 tenant, and the cluster holds 2 Service " +
				"addresses outside their namespaces, but the Service range 10.0.0.0/24 holds 254 addresses, of which 228 may " +
				"be promised (10% kept free), times gpu-tenancy:serviceRange.overcommit 1: 226", "set gpu-tenancy:serviceRange.overcommit above 1"}},
		{name: "twelve tenants at the default quota are refused", cidrs: v4, tenants: tenantsWithServices(12, 20),
			refused: []string{"add up to 240 for 12 tenants"}},
		{name: "an overcommit the operator states lets them through, and is said", cidrs: v4, tenants: tenantsWithServices(12, 20),
			overcommit: 1.5, warned: []string{"gpu-tenancy:serviceRange.overcommit is 1.5", "add up to 240 for 12 tenants"}},
		{name: "the tenants' own Services are in their quotas, not counted again", cidrs: v4,
			elsewhere: []string{"vcluster-team-0", "vcluster-team-1", "vcluster-team-1"}, tenants: tenantsWithServices(2, 114)},
		{name: "an IPv6 default range is the one single-stack Services take from", cidrs: []string{"fd00:10::/108", "10.0.0.0/28"},
			tenants: tenantsWithServices(12, 20)},
		{name: "a cluster without ServiceCIDRs is warned of", tenants: tenantsWithServices(12, 20),
			warned: []string{"the cluster's Service range could not be checked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := serviceRoomCluster(t, tc.cidrs, tc.elsewhere...)
			tc.tenants.ServiceRange.Overcommit = tc.overcommit
			var warnings []string
			err := l.checkServiceRoom(t.Context(), tc.tenants, func(w string) { warnings = append(warnings, w) })
			if tc.refused != nil {
				require.Error(t, err)
				for _, want := range tc.refused {
					assert.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			got := strings.Join(warnings, "\n")
			if tc.warned == nil {
				assert.Empty(t, got)
			}
			for _, want := range tc.warned {
				assert.Contains(t, got, want)
			}
		})
	}
}

func TestAnOvercommitIsARatioFromOneToAHundred(t *testing.T) {
	for ratio, ok := range map[float64]bool{0: true, 1: true, 2.5: true, 100: true, 0.5: false, 101: false} {
		errs := ServiceRangeArgs{Overcommit: ratio}.Validate(ConfigKeys.Path(keyServiceRange), false)
		if ok {
			assert.Empty(t, errs, "%g", ratio)
		} else {
			require.Len(t, errs, 1, "%g", ratio)
			assert.Contains(t, errs[0].Error(), "gpu-tenancy:serviceRange.overcommit: Invalid value")
		}
	}
}

// An existing cluster's nodes whose pods get addresses outside existing.podCIDRs are said: tenants' egress excludes
// only the ranges given, and reaches the others' pods wherever the network plugin's ipBlock matches pods.
func TestNodePodRangesOutsideTheGivenOnesAreSaid(t *testing.T) {
	node := func(name string, podCIDRs ...any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"podCIDRs": podCIDRs}, "status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": "v1.36.3"}}}
	}
	const key = "gpu-tenancy:existing.podCIDRs"
	for name, c := range map[string]struct {
		given []string
		nodes []map[string]any
		key   string
		want  []string
	}{
		"every node within the given range": {[]string{"10.244.0.0/16"},
			[]map[string]any{node("a", "10.244.0.0/24"), node("b", "10.244.1.0/24")}, key, nil},
		"a node outside it": {[]string{"10.244.0.0/16"},
			[]map[string]any{node("a", "10.244.0.0/24"), node("b", "10.245.0.0/24")}, key, []string{"b (10.245.0.0/24)", key, "10.244.0.0/16"}},
		"a node's range wider than the given one": {[]string{"10.244.0.0/24"},
			[]map[string]any{node("a", "10.244.0.0/16")}, key, []string{"a (10.244.0.0/16)"}},
		"a dual-stack node with its IPv6 range given too": {[]string{"10.244.0.0/16", "fd00:10:244::/56"},
			[]map[string]any{node("a", "10.244.0.0/24", "fd00:10:244::/64")}, key, nil},
		"a dual-stack node without its IPv6 range": {[]string{"10.244.0.0/16"},
			[]map[string]any{node("a", "10.244.0.0/24", "fd00:10:244::/64")}, key, []string{"a (fd00:10:244::/64)"}},
		"no range given":                                  {nil, []map[string]any{node("a", "10.244.0.0/24")}, key, []string{"none given", "a (10.244.0.0/24)"}},
		"nodes with no allocated range":                   {nil, []map[string]any{node("a")}, key, nil},
		"a cloud cluster, whose ranges are the program's": {nil, []map[string]any{node("a", "10.244.0.0/24")}, "", nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t)
			f.lists["/api/v1/nodes"] = c.nodes
			l, err := connect(f.kubeconfig())
			require.NoError(t, err)
			got := strings.Join(l.nodeExposures(t.Context(), false, podRange{key: c.key, cidrs: c.given}), "\n")
			if c.want == nil {
				assert.Empty(t, got)
				return
			}
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
		})
	}
}
