package platform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runStack runs the whole program under mocks with a stack file's config, secrets given placeholder values.
func runStack(t *testing.T, stack string, override map[string]string) (*mocktest.Recorder, error) {
	t.Helper()
	return runStackAs(t, stack, stack, override)
}

// runStackAs is runStack as a stack of another name, with the config of stacks/Pulumi.<file>.yaml.
func runStackAs(t *testing.T, stack, file string, override map[string]string) (*mocktest.Recorder, error) {
	t.Helper()
	return runStackWith(t, &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}, stack, file, override)
}

// runStackWith is runStackAs recording into rec.
func runStackWith(t *testing.T, rec *mocktest.Recorder, stack, file string, override map[string]string) (*mocktest.Recorder, error) {
	t.Helper()
	return runStackWithOpts(t, rec, stack, file, override)
}

// runStackWithOpts is runStackWith with further run options (a preview: info.DryRun).
func runStackWithOpts(t *testing.T, rec *mocktest.Recorder, stack, file string, override map[string]string,
	opts ...pulumi.RunOption) (*mocktest.Recorder, error) {
	t.Helper()
	sc, err := ReadStackFile(filepath.Join("..", "..", "stacks", "Pulumi."+file+".yaml"))
	require.NoError(t, err)
	for k, v := range override {
		sc.Values[k] = v
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	err = mocktest.Run(stack, Program(root), rec, append([]pulumi.RunOption{mocktest.WithConfig(sc.Values, sc.Secrets)}, opts...)...)
	return rec, err
}

// localOverride points the local stack at a kubeconfig file that exists on every machine.
func localOverride(t *testing.T) map[string]string {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	return map[string]string{"gpu-tenancy:existing": `{"kubeconfigPath":"` + kc + `"}`}
}

func count(rec *mocktest.Recorder, token string) int { return len(rec.ByType(token)) }

func TestProgramBuildsEveryLayer(t *testing.T) {
	cases := []struct {
		stack      string
		cluster    string
		driver     int
		platform   int
		monitoring int
	}{
		{"gke-dev", "gpu-tenancy:gke:Cluster", 1, 1, 1},
		{"scw-dev", "gpu-tenancy:scaleway:Cluster", 1, 1, 1},
		{"local", "gpu-tenancy:cluster:Existing", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.stack, func(t *testing.T) {
			var override map[string]string
			if c.stack == "local" {
				override = localOverride(t)
			}
			rec, err := runStack(t, c.stack, override)
			require.NoError(t, err)
			assert.Equal(t, 1, count(rec, c.cluster))
			assert.Equal(t, c.driver, count(rec, "gpu-tenancy:dra:Driver"))
			assert.Equal(t, c.platform, count(rec, "gpu-tenancy:vcluster:Platform"))
			assert.Equal(t, c.monitoring, count(rec, "gpu-tenancy:monitoring:Monitoring"), "alerts on by default for cloud stacks, off on an existing cluster")
			assert.Equal(t, 1, count(rec, "gpu-tenancy:tenancy:Catalog"))
			assert.Equal(t, 2, count(rec, "gpu-tenancy:tenancy:Tenant"), "legal-ai and research-ai")
			assert.Equal(t, 2, count(rec, "gpu-tenancy:vcluster:VirtualCluster"))
			assert.Equal(t, 2, count(rec, "kubernetes:resource.k8s.io/v1:DeviceClass"), "gpu-whole and gpu-slice")
		})
	}
}

func TestInClusterObjectsUseTheClusterProviderAndGoWithTheCloudCluster(t *testing.T) {
	rec, err := runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	gkeCluster, err := rec.Get("gcp:container/cluster:Cluster", "gke")
	require.NoError(t, err)
	n := 0
	for _, reg := range rec.All() {
		if !reg.Custom || !strings.HasPrefix(reg.Type, "kubernetes:") {
			continue
		}
		n++
		assert.Equal(t, "gke", reg.ProviderName(), "%s %s must use the cluster's provider", reg.Type, reg.Name)
		assert.Equal(t, gkeCluster.URN, reg.DeletedWith, "%s %s must be deleted with the cluster", reg.Type, reg.Name)
	}
	assert.Greater(t, n, 20)
}

func TestTenantsDoNotDependOnEachOther(t *testing.T) {
	rec, err := runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	tenantURNs := map[string]string{}
	for _, reg := range rec.All() {
		if reg.Type == "gpu-tenancy:tenancy:Tenant" || reg.Type == "gpu-tenancy:vcluster:VirtualCluster" {
			tenantURNs[reg.URN] = reg.Name
		}
	}
	for _, reg := range rec.All() {
		owner := tenantOf(reg, tenantURNs)
		for _, dep := range reg.Dependencies {
			if other, ok := tenantURNs[dep]; ok && owner != "" && other != owner {
				t.Errorf("%s %s of tenant %s depends on tenant %s", reg.Type, reg.Name, owner, other)
			}
		}
	}
}

// tenantOf names the tenant whose component a registration sits under, by URN prefix of the component type chain.
func tenantOf(reg mocktest.Registration, tenantURNs map[string]string) string {
	if name, ok := tenantURNs[reg.URN]; ok {
		return name
	}
	if name, ok := tenantURNs[reg.Parent]; ok {
		return name
	}
	return ""
}

func TestBadConfigRegistersNothing(t *testing.T) {
	cases := map[string]struct {
		override map[string]string
		paths    []string
	}{
		"bad zone and project": {map[string]string{"gpu-tenancy:gke": `{"project":"x","zone":"mars-1"}`},
			[]string{"gpu-tenancy:gke.zone", "gpu-tenancy:gke.project"}},
		"a selector that does not compile": {map[string]string{"gpu-tenancy:gpuClasses": `[{"name":"gpu-whole","device":"gpu","extraCEL":"device.driver =="},` +
			`{"name":"gpu-slice","device":"mig","migProfile":"1g.5gb"}]`}, []string{"gpu-tenancy:gpuClasses[0].extraCEL"}},
		"a CIDR the tenant component refuses": {map[string]string{"gpu-tenancy:tenants": `[{"name":"legal-ai","classes":["gpu-whole"],` +
			`"gpuQuota":{"gpu-whole":1},"blockedEgressCIDRs":["10.1.2.3/8"]}]`}, []string{"gpu-tenancy:tenants[0].blockedEgressCIDRs[0]"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec, err := runStack(t, "gke-dev", c.override)
			require.Error(t, err)
			for _, p := range c.paths {
				assert.Contains(t, err.Error(), p)
			}
			assert.Empty(t, rec.All(), "no resource may be registered on bad input")
		})
	}
}

// Every bad config of the project's table, run as the program (the key list handed over as the Go language host
// hands it), fails at the case's path with nothing registered: not the cluster, not the component itself.
func TestBadConfigsRegisterNothing(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, c := range badConfigs() {
		t.Run(c.name, func(t *testing.T) {
			values, secrets := c.config().stackConfig(c.secretKeys()...)
			raw, err := json.Marshal(values)
			require.NoError(t, err)
			t.Setenv(pulumi.EnvConfig, string(raw))
			rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
			err = mocktest.Run("dev", Program(root), rec, mocktest.WithConfig(values, secrets))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantPath)
			assert.Empty(t, rec.All(), "no resource may be registered on bad input")
		})
	}
}

// A library caller who builds the args in Go, without Load, gets the same validation before anything registers,
// with the defaults applied first and errors named as the component's properties.
func TestLibraryCallerWithBadArgsRegistersNothing(t *testing.T) {
	good, err := Load(goodScaleway().source("platformAdminPassword"), PropertyKeys)
	require.NoError(t, err)
	cases := map[string]struct {
		mutate func(a *PlatformArgs)
		path   string
	}{
		"a tenant granted a class the catalog lacks": {func(a *PlatformArgs) { a.Tenants[0].Classes = []string{"gpu-h200"} }, "tenants[0].classes[0]"},
		"a pool name that is no DNS label":           {func(a *PlatformArgs) { a.Scaleway.GPUPools[0].Name = "L4_Pool" }, "gpuPools[0].name"},
		"no admin password while installing":         {func(a *PlatformArgs) { a.Secrets.PlatformAdminPassword = "" }, "platformAdminPassword"},
		"a field the Platform sets":                  {func(a *PlatformArgs) { a.DRADriver.Namespace = "nvidia-dra" }, "draDriver.Namespace"},
		"a chart path that expands to nothing":       {func(a *PlatformArgs) { a.VCluster.Chart = helmchart.Chart{Path: "${GT_TEST_UNSET_CHART}"} }, "vcluster.chart.path"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			args := *good
			args.Tenants = slices.Clone(good.Tenants)
			args.Scaleway.GPUPools = slices.Clone(good.Scaleway.GPUPools)
			c.mutate(&args)
			rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
			err := mocktest.Run("dev", func(ctx *pulumi.Context) error {
				_, err := NewPlatform(ctx, "gpus", &args)
				return err
			}, rec)
			var argsErr *ArgsError
			require.ErrorAs(t, err, &argsErr)
			assert.Contains(t, err.Error(), "invalid Platform arguments")
			assert.Contains(t, err.Error(), "  - "+c.path+":")
			assert.NotContains(t, err.Error(), ConfigNamespace+":")
			assert.Empty(t, rec.All(), "no resource may be registered on bad input")
		})
	}
}

// The defaults are one idiom in one place: applying them to args that have them changes nothing, so Load (which
// defaults to validate) and NewPlatform (which defaults for a library caller) agree.
func TestDefaultsApplyOnce(t *testing.T) {
	for name, tc := range map[string]testConfig{"gke": goodGKE(), "scaleway": goodScaleway(), "existing": goodExisting()} {
		t.Run(name, func(t *testing.T) {
			args, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
			require.NoError(t, err)
			assert.Equal(t, *args, args.WithDefaults())
		})
	}
}

func TestKubeconfigServerIsPerTenant(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:vcluster": `{"kubeconfigServer":"https://{tenant}.vc.example.com"}`})
	require.NoError(t, err)
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		release, err := rec.Get("kubernetes:helm.sh/v4:Chart", tenant)
		require.NoError(t, err)
		values := release.Inputs["values"].ObjectValue()
		server := values["exportKubeConfig"].ObjectValue()["server"].StringValue()
		assert.Equal(t, "https://"+tenant+".vc.example.com", server)
	}
}

// The vCluster API's clients outside the cluster are admitted in every tenant's namespace, on the API's port alone.
func TestAPIClientCIDRsReachEveryTenantsVClusterAPIOnly(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:vcluster": `{"apiClientCIDRs":["203.0.113.0/24"]}`})
	require.NoError(t, err)
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		np, err := rec.Get("kubernetes:networking.k8s.io/v1:NetworkPolicy", tenant+"-allow-ingress-api-clients")
		require.NoError(t, err, tenant)
		assert.Equal(t, map[string]any{
			"podSelector": map[string]any{},
			"policyTypes": []any{"Ingress"},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"ipBlock": map[string]any{"cidr": "203.0.113.0/24"}}},
				"ports": []any{map[string]any{"port": float64(vcluster.APIPort), "protocol": "TCP"}},
			}},
		}, np.Inputs.Mappable()["spec"], tenant)
	}
	rec, err = runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	_, err = rec.Get("kubernetes:networking.k8s.io/v1:NetworkPolicy", "legal-ai-allow-ingress-api-clients")
	assert.Error(t, err, "no client outside the cluster is admitted unless listed")
}

// An existing cluster's pod ranges (existing.podCIDRs) leave every tenant's internet egress, so that no tenant pod
// reaches another namespace's pods through it where the network plugin's ipBlock matches pods, as the local stack's
// does (tests/nodes sends the packets).
func TestThePodRangesLeaveEveryTenantsEgress(t *testing.T) {
	override := localOverride(t)
	override["gpu-tenancy:existing"] = strings.TrimSuffix(override["gpu-tenancy:existing"], "}") + `,"podCIDRs":["10.244.0.0/16"]}`
	rec, err := runStack(t, "local", override)
	require.NoError(t, err)
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		np, err := rec.Get("kubernetes:networking.k8s.io/v1:NetworkPolicy", tenant+"-allow-egress-internet")
		require.NoError(t, err, tenant)
		to := np.Inputs.Mappable()["spec"].(map[string]any)["egress"].([]any)[0].(map[string]any)["to"].([]any)
		except := to[0].(map[string]any)["ipBlock"].(map[string]any)["except"]
		assert.Contains(t, except, "10.244.0.0/16", tenant)
		assert.Contains(t, except, "169.254.169.254/32", tenant)
	}
}

// A pool dedicated to a tenant reaches every part that must know: its node pool's taint (the cloud's tests), the
// tenant's vCluster (its pods tolerate that taint and select those nodes), and no other tenant's vCluster.
func TestADedicatedPoolIsItsTenantsOnly(t *testing.T) {
	pools := `[{"name":"a100-whole","machineType":"a2-highgpu-1g","accelerator":"nvidia-tesla-a100","tenant":"legal-ai"},
		{"name":"a100-mig","machineType":"a2-highgpu-1g","accelerator":"nvidia-tesla-a100","partition":"1g.5gb"}]`
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:gpuPools": pools})
	require.NoError(t, err)
	dedication := func(tenant string) (tolerations, selector any) {
		release, err := rec.Get("kubernetes:helm.sh/v4:Chart", tenant)
		require.NoError(t, err)
		values := release.Inputs["values"].Mappable().(map[string]any)
		sync := values["sync"].(map[string]any)
		tolerations = sync["toHost"].(map[string]any)["pods"].(map[string]any)["enforceTolerations"]
		selector = sync["fromHost"].(map[string]any)["nodes"]
		return tolerations, selector
	}
	tolerations, selector := dedication("legal-ai")
	assert.Equal(t, []any{"nvidia.com/gpu=present:NoSchedule", naming.DedicatedNodeKey + "=legal-ai:NoSchedule"}, tolerations)
	assert.Equal(t, map[string]any{"selector": map[string]any{"labels": map[string]any{naming.DedicatedNodeKey: "legal-ai"}}}, selector)
	tolerations, selector = dedication("research-ai")
	assert.Equal(t, []any{"nvidia.com/gpu=present:NoSchedule"}, tolerations, "another tenant never tolerates legal-ai's pool")
	assert.Nil(t, selector)
}

// With a tenant pool (gke-dev sets one), the platform's controllers go to the platform's own pool: vCluster Platform,
// kube-state-metrics and the DRA driver's controller select it and tolerate its taint. The vCluster control planes,
// which their tenants hold, do not.
func TestThePlatformsControllersRunOnItsOwnPool(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:draDriver": `{"computeDomains":true}`})
	require.NoError(t, err)
	values := func(typ, name string) map[string]any {
		release, err := rec.Get(typ, name)
		require.NoError(t, err)
		return release.Inputs["values"].Mappable().(map[string]any)
	}
	selector := map[string]any{naming.PlatformPoolKey: "true"}
	toleration := map[string]any{"key": naming.PlatformPoolKey, "operator": "Equal", "value": "true"}
	platform := values("kubernetes:helm.sh/v3:Release", "platform")
	assert.Equal(t, selector, platform["nodeSelector"], "vCluster Platform")
	assert.Equal(t, []any{toleration}, platform["tolerations"], "vCluster Platform")
	ksm := values("kubernetes:helm.sh/v3:Release", "monitoring-kube-state-metrics")
	assert.Equal(t, selector, ksm["nodeSelector"], "kube-state-metrics")
	assert.Equal(t, []any{toleration}, ksm["tolerations"], "kube-state-metrics")
	controller := values("kubernetes:helm.sh/v4:Chart", "dra")["controller"].(map[string]any)
	assert.Equal(t, selector, controller["nodeSelector"], "the DRA driver's controller")
	assert.Contains(t, controller["tolerations"], toleration, "the DRA driver's controller")
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		assert.NotContains(t, fmt.Sprint(values("kubernetes:helm.sh/v4:Chart", tenant)), naming.PlatformPoolKey,
			"the vCluster of %s, which its tenant holds, stays off the platform's pool", tenant)
	}
}

func TestVirtualClusterWaitsForItsTenantGuardRails(t *testing.T) {
	rec, err := runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		vc, err := rec.Get("gpu-tenancy:vcluster:VirtualCluster", tenant)
		require.NoError(t, err)
		// The SDK expands a dependency on a component into its children.
		quota, err := rec.Get("kubernetes:core/v1:ResourceQuota", tenant+"-quota")
		require.NoError(t, err)
		limits, err := rec.Get("kubernetes:core/v1:LimitRange", tenant+"-limits")
		require.NoError(t, err)
		assert.Contains(t, vc.Dependencies, quota.URN)
		assert.Contains(t, vc.Dependencies, limits.URN)
	}
}

func TestVClusterCanBeTurnedOff(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:vcluster": `{"enabled":false}`})
	require.NoError(t, err)
	assert.Zero(t, count(rec, "gpu-tenancy:vcluster:VirtualCluster"))
	assert.Equal(t, 2, count(rec, "gpu-tenancy:tenancy:Tenant"), "tenants keep their guard rails")
}

func TestProvidersKeepKubeconfigSecret(t *testing.T) {
	rec, err := runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	for _, reg := range rec.ByType("pulumi:providers:kubernetes") {
		assert.True(t, reg.Inputs["kubeconfig"].ContainsSecrets(), "provider %s kubeconfig must be secret", reg.Name)
	}
}

// A tenant that asks for GPUs by name gets the open-source syncer with nothing of the Pro sync or the platform, its
// class's DeviceClass carries the name and its quota caps it; a tenant on claims beside it keeps all it had.
func TestATenantAskingForGPUsByNameNeedsNoLicence(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{
		"gpu-tenancy:gke": `{"project":"gpu-tenancy-dev","zone":"us-central1-a","kubernetesVersion":"1.36","releaseChannel":"REGULAR",` +
			`"deletionProtection":false,"systemPool":{"machineType":"e2-standard-4","minNodes":1,"maxNodes":3}}`,
		"gpu-tenancy:tenants": `[{"name":"legal-ai","classes":["gpu-whole"],"gpuQuota":{"gpu-whole":3},"gpuAccess":"extendedResources"},` +
			`{"name":"research-ai","classes":["gpu-slice"],"gpuQuota":{"gpu-slice":2}}]`,
	})
	require.NoError(t, err)
	classes := map[string]string{}
	for _, reg := range rec.ByType("kubernetes:resource.k8s.io/v1:DeviceClass") {
		spec := reg.Inputs["spec"].ObjectValue()
		name := ""
		if v, ok := spec["extendedResourceName"]; ok {
			name = v.StringValue()
		}
		classes[reg.Inputs["metadata"].ObjectValue()["name"].StringValue()] = name
	}
	assert.Equal(t, map[string]string{"gpu-whole": "gpu-tenancy.io/gpu-whole", "gpu-slice": ""}, classes, "only the class asked for by name carries one")

	values := func(tenant string) map[string]any {
		chart, err := rec.Get("kubernetes:helm.sh/v4:Chart", tenant)
		require.NoError(t, err)
		return chart.Inputs["values"].Mappable().(map[string]any)
	}
	legal, research := values("legal-ai"), values("research-ai")
	assert.NotContains(t, legal, "platform", "no platform connection")
	assert.NotContains(t, legal["sync"].(map[string]any)["toHost"], "resourceClaims", "no claim sync")
	assert.NotContains(t, legal["sync"].(map[string]any)["toHost"], "resourceClaimTemplates", "no claim template sync")
	assert.NotContains(t, legal["sync"].(map[string]any)["fromHost"], "deviceClasses", "no DeviceClass sync")
	assert.Equal(t, map[string]any{"registry": "ghcr.io", "repository": "loft-sh/vcluster-oss", "tag": vcluster.VClusterVersion},
		legal["controlPlane"].(map[string]any)["statefulSet"].(map[string]any)["image"], "the open-source syncer")
	manifests := legal["experimental"].(map[string]any)["deploy"].(map[string]any)["vcluster"].(map[string]any)["manifests"].(string)
	assert.Contains(t, manifests, "gpu-whole: |\n    class: gpu-whole\n    gives: a whole NVIDIA A100-SXM4-40GB\n    name: gpu-tenancy.io/gpu-whole\n    quota: 3\n",
		"the tenant reads its class's name, what it gives and its quota inside its vCluster")
	assert.NotContains(t, manifests, "gpu-slice", "and nothing of another tenant's")
	assert.NotContains(t, research, "experimental", "a tenant that asks for no class by name is offered none")
	assert.Contains(t, research, "platform", "the tenant on claims keeps its platform connection")
	assert.Contains(t, research["sync"].(map[string]any)["toHost"], "resourceClaims")

	_, err = rec.Get("kubernetes:networking.k8s.io/v1:NetworkPolicy", "legal-ai-allow-ingress-platform")
	assert.Error(t, err, "nothing of the platform reaches a tenant it does not serve")
	_, err = rec.Get("kubernetes:networking.k8s.io/v1:NetworkPolicy", "research-ai-allow-ingress-platform")
	assert.NoError(t, err)

	var pendingAlert []string
	for _, reg := range rec.ByType("gcp:monitoring/alertPolicy:AlertPolicy") {
		if text := fmt.Sprint(reg.Inputs.Mappable()); strings.Contains(text, "gpu_tenancy_io_gpu_whole") {
			pendingAlert = append(pendingAlert, reg.Name)
		}
	}
	assert.Len(t, pendingAlert, 1, "the pending alert reads the pods that ask for the class by name")

	quota, err := rec.Get("kubernetes:core/v1:ResourceQuota", "legal-ai-quota")
	require.NoError(t, err)
	hard := quota.Inputs["spec"].ObjectValue()["hard"].Mappable().(map[string]any)
	assert.Equal(t, "3", hard["requests.gpu-tenancy.io/gpu-whole"], "the name is capped as the class's devices are")
	assert.Equal(t, "3", hard["gpu-whole.deviceclass.resource.k8s.io/devices"])
	quota, err = rec.Get("kubernetes:core/v1:ResourceQuota", "research-ai-quota")
	require.NoError(t, err)
	assert.NotContains(t, quota.Inputs["spec"].ObjectValue()["hard"].Mappable(), "requests.gpu-tenancy.io/gpu-slice")
}

func TestTenantPodSecurityReachesNamespaceAndVCluster(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:tenants": `[{"name":"legal-ai","classes":["gpu-whole"],` +
		`"gpuQuota":{"gpu-whole":1},"podSecurity":"restricted"},{"name":"research-ai","classes":["gpu-slice"],"gpuQuota":{"gpu-slice":1}}]`})
	require.NoError(t, err)
	for tenant, level := range map[string]string{"legal-ai": "restricted", "research-ai": "baseline"} {
		ns, err := rec.Get("kubernetes:core/v1:Namespace", tenant+"-namespace")
		require.NoError(t, err)
		assert.Equal(t, level, ns.Inputs["metadata"].ObjectValue()["labels"].ObjectValue()["pod-security.kubernetes.io/enforce"].StringValue())
		release, err := rec.Get("kubernetes:helm.sh/v4:Chart", tenant)
		require.NoError(t, err)
		assert.Equal(t, level, release.Inputs["values"].ObjectValue()["policies"].ObjectValue()["podSecurityStandard"].StringValue())
	}
}

func TestClaimStatusWritersAreTheClustersPlusTheStacks(t *testing.T) {
	rec, err := runStack(t, "gke-dev", map[string]string{"gpu-tenancy:admission": `{"claimStatusWriters":["system:kube-scheduler","ops:claim-repair"]}`})
	require.NoError(t, err)
	policy, err := rec.Get("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "gpu-catalog-claim-status")
	require.NoError(t, err)
	validations := policy.Inputs["spec"].ObjectValue()["validations"].ArrayValue()
	require.Len(t, validations, 1)
	assert.Contains(t, validations[0].ObjectValue()["expression"].StringValue(),
		"['system:kube-scheduler', 'system:serviceaccount:kube-system:resource-claim-controller', 'system:kube-controller-manager', 'ops:claim-repair']",
		"the cluster's writers once each, then the stack's")
}

func TestNamespaceDeletionIsBounded(t *testing.T) {
	for _, c := range []struct {
		name     string
		override map[string]string
		want     string
	}{
		{"by default", nil, "10m"},
		{"as configured", map[string]string{"gpu-tenancy:timeouts": `{"namespaceDeletion":"90s"}`}, "90s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, err := runStack(t, "gke-dev", c.override)
			require.NoError(t, err)
			namespaces := rec.ByType("kubernetes:core/v1:Namespace")
			require.NotEmpty(t, namespaces)
			for _, ns := range namespaces {
				assert.Equal(t, c.want, ns.Request.GetCustomTimeouts().GetDelete(), "namespace %s", ns.Name)
			}
		})
	}
}

func TestPathsExpandTheEnvironmentAsAShellDoes(t *testing.T) {
	t.Setenv("GT_TEST_DIR", "/srv/cluster")
	t.Setenv("GT_TEST_EMPTY", "")
	cases := map[string]struct{ in, want string }{
		"a set variable":                   {"${GT_TEST_DIR}/kubeconfig", "/srv/cluster/kubeconfig"},
		"a set variable over its fallback": {"${GT_TEST_DIR:-.tools/local-cluster}/kubeconfig", "/srv/cluster/kubeconfig"},
		"the fallback of an unset one":     {"${GT_TEST_UNSET:-.tools/local-cluster}/kubeconfig", "/repo/.tools/local-cluster/kubeconfig"},
		"the fallback of an empty one":     {"${GT_TEST_EMPTY:-/etc/k}/kubeconfig", "/etc/k/kubeconfig"},
		"an unset one without fallback":    {"$GT_TEST_UNSET/kubeconfig", "/kubeconfig"},
		"a relative path":                  {"charts/vcluster", "/repo/charts/vcluster"},
		"nothing":                          {"", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { assert.Equal(t, c.want, resolve("/repo", c.in)) })
	}
}

// A program holds one Platform: the second is refused before it registers anything, the first is untouched.
func TestASecondPlatformInOneProgramIsRefused(t *testing.T) {
	args, err := Load(goodScaleway().source("platformAdminPassword"), PropertyKeys)
	require.NoError(t, err)
	rec := &mocktest.Recorder{Outputs: mocktest.ComputedOutputs()}
	err = mocktest.Run("dev", func(ctx *pulumi.Context) error {
		if _, err := NewPlatform(ctx, "first", args); err != nil {
			return err
		}
		_, err := NewPlatform(ctx, "second", args)
		return err
	}, rec)
	require.ErrorContains(t, err, `this program already has one, "first"`)
	platforms := rec.ByType(Type)
	require.Len(t, platforms, 1, "the second Platform registers nothing")
	assert.Equal(t, "first", platforms[0].Name)
}

// A relative path where there is no directory to take it from (a component provider's construct) is refused, as
// the provider has no project directory.
func TestARelativePathWithoutABaseIsRefused(t *testing.T) {
	args, err := Load(goodExisting().source("platformAdminPassword"), PropertyKeys)
	require.NoError(t, err)
	args.Existing.KubeconfigPath = "kubeconfig"
	rec := &mocktest.Recorder{}
	err = mocktest.Run("dev", func(ctx *pulumi.Context) error {
		_, err := NewPlatform(ctx, "gpus", args)
		return err
	}, rec)
	require.ErrorContains(t, err, "existing.kubeconfigPath: Invalid value: \"kubeconfig\": must be absolute")
	assert.Empty(t, rec.All())
}

// What the config leaves open beyond any guard is said on every preview: tenants' pods beside the platform's
// controllers on the system pool, a Kubernetes version the cloud's table does not know, and Calico on Kapsule lets
// tenants without blocked ranges reach the nodes' kubelets.
func TestTheExposuresOfTheConfigAreSaid(t *testing.T) {
	tenant := func(name string, blocked ...string) TenantArgs {
		return TenantArgs{TenantArgs: tenancy.TenantArgs{Name: name, BlockedEgressCIDRs: blocked}}
	}
	byName := func(t TenantArgs) TenantArgs { t.GPUAccess = vcluster.ExtendedResources; return t }
	kapsule := func(cni string, tenants ...TenantArgs) PlatformArgs {
		return PlatformArgs{Cloud: cluster.Scaleway, Scaleway: scaleway.ClusterArgs{CNI: cni}, Tenants: tenants}
	}
	// platformPool gives the platform a pool of its own, so each case shows only the exposure it is about.
	platformPool := func(a PlatformArgs) PlatformArgs {
		a.GKE.TenantPool, a.Scaleway.TenantPool, a.Existing.PlatformPool = &gke.SystemPoolArgs{}, &scaleway.SystemPoolArgs{}, true
		return a
	}
	for _, c := range []struct {
		name string
		args PlatformArgs
		want []string
	}{
		{"GKE on a minor newer than its table", PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{KubernetesVersion: "1.99"}},
			[]string{"gke.kubernetesVersion is 1.99, newer than the GKE versions"}},
		{"Kapsule on a minor newer than its table", PlatformArgs{Cloud: cluster.Scaleway, Scaleway: scaleway.ClusterArgs{KubernetesVersion: "1.99"}},
			[]string{"scaleway.kubernetesVersion is 1.99, newer than the Kapsule versions"}},
		{"GKE's default version", PlatformArgs{Cloud: cluster.GKE}, nil},
		{"GKE on 1.35", PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{KubernetesVersion: "1.35"}}, nil},
		{"an existing cluster, whose kubelets the program does not configure", PlatformArgs{Cloud: cluster.Existing}, nil},
		{"Kapsule on calico names the tenants that block no range",
			kapsule("calico", tenant("team-a"), tenant("team-b", "172.16.0.0/22"), tenant("team-c")),
			[]string{"scaleway.cni is calico", "tenants team-a, team-c reach", "10255", "blockedEgressCIDRs"}},
		{"Kapsule on calico with every tenant blocking a range", kapsule("calico", tenant("team-a", "172.16.0.0/22")), nil},
		{"Kapsule on cilium, whose ipBlock matches no node", kapsule("cilium", tenant("team-a")), nil},
		{"Kapsule's default CNI, cilium", kapsule("", tenant("team-a")), nil},
		{"a tenant asking by name on a GKE minor no page vouches for", PlatformArgs{Cloud: cluster.GKE,
			GKE: gke.ClusterArgs{KubernetesVersion: "1.36"}, Tenants: []TenantArgs{tenant("team-a"), byName(tenant("team-b"))}},
			[]string{"tenant team-b asks for GPUs by extended-resource name (tenants[1].gpuAccess)", "GKE",
				"its 1.36 clusters", "server-side dry run"}},
		{"a tenant asking by name on Kapsule", PlatformArgs{Cloud: cluster.Scaleway,
			Scaleway: scaleway.ClusterArgs{KubernetesVersion: "1.36"}, Tenants: []TenantArgs{byName(tenant("team-a"))}},
			[]string{"tenant team-a asks for GPUs by extended-resource name", "Kapsule"}},
		{"tenants on claims only", PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{KubernetesVersion: "1.36"},
			Tenants: []TenantArgs{tenant("team-a")}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := platformPool(c.args)
			got := args.exposures()
			if c.want == nil {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			for _, w := range c.want {
				assert.Contains(t, got[0], w)
			}
		})
	}
}

// A cloud cluster's Kubernetes version is checked against the cloud's support table on the day the program runs: a
// Kapsule minor past its verified end of support is refused naming the key and what is supported that day; a GKE minor
// past a date that could not be verified is warned of instead.
func TestKubernetesVersionsPastTheirEndOfSupport(t *testing.T) {
	kapsule := PlatformArgs{Cloud: cluster.Scaleway, Scaleway: scaleway.ClusterArgs{KubernetesVersion: "1.35"}}
	kapsule.now = cluster.Date(2027, 3, 19)
	assert.NotContains(t, kapsule.Validate().ToAggregate().Error(), "kubernetesVersion")
	kapsule.now = cluster.Date(2027, 3, 20)
	assert.ErrorContains(t, kapsule.Validate().ToAggregate(),
		`scaleway.kubernetesVersion: Invalid value: "1.35": left Kapsule's support after 2027-03-19`)
	assert.ErrorContains(t, kapsule.Validate().ToAggregate(), "supported today: 1.36")

	gkeArgs := PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{KubernetesVersion: "1.35"}}
	gkeArgs.GKE.TenantPool = &gke.SystemPoolArgs{}
	gkeArgs.now = cluster.Date(2027, 4, 12)
	assert.NotContains(t, gkeArgs.Validate().ToAggregate().Error(), "kubernetesVersion")
	warnings := gkeArgs.exposures()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "gke.kubernetesVersion is 1.35, whose end of GKE support is given as 2027-04-11, now past")
}

// Tenants' pods beside the platform's controllers on the system pool are said, naming the key that gives the
// platform a pool of its own, on every flavour; with no tenants there is no one to keep off.
func TestASharedSystemPoolIsSaid(t *testing.T) {
	tenants := []TenantArgs{{TenantArgs: tenancy.TenantArgs{Name: "team-a"}}}
	for _, c := range []struct {
		name string
		args PlatformArgs
		want string
	}{
		{"GKE without a tenant pool", PlatformArgs{Cloud: cluster.GKE, Tenants: tenants}, "gke.tenantPool is unset"},
		{"Kapsule without a tenant pool", PlatformArgs{Cloud: cluster.Scaleway, Tenants: tenants}, "scaleway.tenantPool is unset"},
		{"an existing cluster without platform nodes", PlatformArgs{Cloud: cluster.Existing, Tenants: tenants}, "existing.platformPool is unset"},
		{"GKE with a tenant pool", PlatformArgs{Cloud: cluster.GKE, GKE: gke.ClusterArgs{TenantPool: &gke.SystemPoolArgs{}}, Tenants: tenants}, ""},
		{"Kapsule with a tenant pool", PlatformArgs{Cloud: cluster.Scaleway, Scaleway: scaleway.ClusterArgs{TenantPool: &scaleway.SystemPoolArgs{}},
			Tenants: tenants}, ""},
		{"an existing cluster with platform nodes", PlatformArgs{Cloud: cluster.Existing, Existing: cluster.ExistingArgs{PlatformPool: true},
			Tenants: tenants}, ""},
		{"no tenants to keep off the system pool", PlatformArgs{Cloud: cluster.GKE}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(c.args.exposures(), "\n")
			if c.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, c.want)
			assert.Contains(t, got, "share the system pool's nodes with the platform's controllers")
		})
	}
}
