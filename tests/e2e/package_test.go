package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/examples/go/gpus"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

// cliStack is a stack of the pulumi CLI that `make tools` built, in workDir, with its state in a file backend of its
// own and program run inline: no Go language host can be built here (the module proxy does not serve
// pulumi/pulumi's sdk/go/pulumi-language-go), so the CLI reads the project and stack files and the program runs in
// this process.
func cliStack(t *testing.T, ctx context.Context, workDir, stack string, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	cli, err := environment.CLI(repoRoot, map[string]string{
		"PULUMI_BACKEND_URL":       "file://" + t.TempDir(),
		"PULUMI_CONFIG_PASSPHRASE": environment.LocalPassphrase,
	})
	require.NoError(t, err)
	ws, err := auto.NewLocalWorkspace(ctx, append(cli, auto.WorkDir(workDir), auto.SecretsProvider("passphrase"), auto.Program(program))...)
	require.NoError(t, err)
	st, err := auto.UpsertStack(ctx, stack, ws)
	require.NoError(t, err)
	return st
}

// The repository's own project file, stack directory and local stack file, as the CLI reads them from the
// repository root: a project file the CLI cannot parse, or a stack file the program refuses, fails here.
func TestRepositoryProjectOnTheCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The stack file's kubeconfigPath, ${GT_CLUSTER_DIR:-.tools/local-cluster}/kubeconfig, reaches this suite's
	// control plane, as scripts/local-cluster.sh places it.
	t.Setenv("GT_CLUSTER_DIR", clusterDir)
	stackFile := filepath.Join(repoRoot, "stacks", "Pulumi.local.yaml")
	committed, err := os.ReadFile(stackFile)
	require.NoError(t, err)
	before := snapshot(t, ctx)

	st := cliStack(t, ctx, repoRoot, "local", platform.InlineProgram(repoRoot, repoRoot))
	destroyOnFailure(t, st)
	cfg, err := st.GetAllConfig(ctx)
	require.NoError(t, err)
	assert.Equal(t, "existing", cfg[platform.ConfigNamespace+":cloud"].Value, "the CLI reads stacks/Pulumi.local.yaml (stackConfigDir)")

	res, err := st.Up(ctx, optup.ProgressStreams(progressTo(t)), optup.ErrorProgressStreams(progressTo(t)))
	require.NoError(t, err)
	assert.Equal(t, "existing", res.Outputs["flavour"].Value)
	assert.ElementsMatch(t, []string{legal, research}, tenantsOf(t, res))
	for _, tenant := range []string{legal, research} {
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, naming.StackOwner(platform.ConfigNamespace, "local"), ns.Labels[naming.StackLabel])
	}

	destroyAsBefore(t, ctx, st, before)
	// No `pulumi stack rm`: it deletes the stack's config file, here the committed one. The state is the test's own.
	after, err := os.ReadFile(stackFile)
	require.NoError(t, err)
	assert.Equal(t, string(committed), string(after), "the CLI must not write the committed stack file (its encryption salt is committed)")
}

// A team's own Go program (examples/go) with a Platform and two tenants, through the real engine.
func TestGoProgramWithAPlatform(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	st, res := upExample(t, ctx, "go", "gpu-platform", gpus.Program, nil)
	assert.ElementsMatch(t, []string{"speech", "vision"}, tenantsOf(t, res))
	owner := naming.StackOwner("gpu-platform", "e2e")
	for class, tenant := range map[string]string{whole: "vision", slice: "speech"} {
		dc, err := client.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", dc.Labels[naming.ClassTenantLabel(tenant)])
		assert.Equal(t, owner, dc.Labels[naming.StackLabel], "objects carry the owner label of the team's project and stack")
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", ns.Labels[naming.ClassGrantLabel(class)], "the namespace of %s grants %s", tenant, class)
	}
	_, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, naming.EntitlementPolicy, metav1.GetOptions{})
	assert.NoError(t, err, "the entitlement binding")
	destroyAsBefore(t, ctx, st, before)
}

// A Pulumi YAML program (examples/yaml) with the local stack's platform, through the component provider and the YAML
// language host on the real CLI: up, the guard rails checked as for the local stack, destroy.
func TestYAMLProgramThroughTheProvider(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	const pluginPath = "path: ../../.tools/bin"
	st, res := upExample(t, ctx, "yaml", "gpu-platform-yaml", nil, func(project string) string {
		require.Contains(t, project, pluginPath)
		return strings.Replace(project, pluginPath, "path: "+filepath.Join(repoRoot, ".tools", "bin"), 1)
	})
	assert.Equal(t, "existing", res.Outputs["flavour"].Value)
	assert.ElementsMatch(t, []string{legal, research}, tenantsOf(t, res))

	env := newStackEnv(t)
	// The example's own config lists no vCluster API clients.
	env.project, env.name, env.apiClients = "gpu-platform-yaml", "e2e", false
	t.Run("the API server holds the platform's objects", func(t *testing.T) { checkObjects(t, ctx, env) })
	t.Run("entitlements hold", func(t *testing.T) { checkEntitlements(t, ctx) })
	t.Run("pod security holds in tenant namespaces", func(t *testing.T) { checkPodSecurity(t, ctx) })
	t.Run("no GPU claim outside a tenant's own namespace", func(t *testing.T) { checkClaimsOutsideTenants(t, ctx) })
	t.Run("every cloud metadata endpoint is blocked", func(t *testing.T) { checkMetadataBlocked(t, ctx) })
	destroyAsBefore(t, ctx, st, before)
}

// upExample brings up the example in examples/<dir> (its project file copied, rewritten by rewrite when given) as stack
// e2e on this suite's control plane: program runs inline, or nil for the project's own runtime. Its config: the
// kubeconfig, the local copy of the vCluster chart, and no waiting for vClusters that never run here.
func upExample(t *testing.T, ctx context.Context, dir, project string, program pulumi.RunFunc, rewrite func(string) string) (auto.Stack, auto.UpResult) {
	t.Helper()
	work := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", dir, "Pulumi.yaml"))
	require.NoError(t, err)
	file := string(raw)
	if rewrite != nil {
		file = rewrite(file)
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(file), 0o600))
	kc, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	st := cliStack(t, ctx, work, "e2e", program)
	destroyOnFailure(t, st)
	require.NoError(t, st.SetAllConfig(ctx, auto.ConfigMap{
		project + ":kubeconfig":     {Value: string(kc), Secret: true},
		project + ":vclusterChart":  {Value: filepath.Join(repoRoot, ".tools", "charts", "vcluster")},
		project + ":awaitVClusters": {Value: "false"},
	}))
	res, err := st.Up(ctx, optup.ProgressStreams(progressTo(t)), optup.ErrorProgressStreams(progressTo(t)))
	require.NoError(t, err)
	return st, res
}

// tenantsOf names the tenants of a stack's tenants output.
func tenantsOf(t *testing.T, res auto.UpResult) []string {
	t.Helper()
	tenants, ok := res.Outputs["tenants"].Value.(map[string]any)
	require.True(t, ok, "tenants output: %v", res.Outputs["tenants"].Value)
	return slices.Sorted(maps.Keys(tenants))
}

// destroyAsBefore destroys the stack and waits for the cluster to be as it was before. The tenants are protected, so
// a destroy through the CLI needs them unprotected first, as the README says (`pulumi state unprotect --all`): a
// plain destroy fails on the first.
func destroyAsBefore(t *testing.T, ctx context.Context, st auto.Stack, before []string) {
	t.Helper()
	_, err := st.Destroy(ctx, optdestroy.ProgressStreams(progressTo(t)))
	require.ErrorContains(t, err, "cannot be deleted", "a destroy of protected tenants fails")
	require.NoError(t, unprotectAll(ctx, st))
	_, err = st.Destroy(ctx, optdestroy.ProgressStreams(progressTo(t)))
	require.NoError(t, err)
	requireAsBefore(t, ctx, before)
}

// unprotectAll lifts every resource's protection, as `pulumi state unprotect --all` does.
func unprotectAll(ctx context.Context, st auto.Stack) error {
	state, err := st.Export(ctx)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(state.Deployment, &doc); err != nil {
		return err
	}
	resources, _ := doc["resources"].([]any)
	for _, r := range resources {
		if m, ok := r.(map[string]any); ok {
			delete(m, "protect")
		}
	}
	if state.Deployment, err = json.Marshal(doc); err != nil {
		return err
	}
	return st.Import(ctx, state)
}

// A Platform with bad properties, through the provider on the CLI: the engine reports each at its property path, and
// nothing is created.
func TestYAMLProgramWithBadPropertiesRegistersNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	work := t.TempDir()
	program := fmt.Sprintf(`name: bad-platform
runtime: yaml
plugins:
  providers:
    - name: gpu-tenancy
      path: %s
resources:
  gpus:
    type: gpu-tenancy:index:Platform
    properties:
      cloud: existing
      existing: {kubeconfigPath: %s}
      gpuPools: [{name: a100-whole, model: a100-40gb}]
      gpuClasses: [{name: gpu-whole, device: gpu}]
      tenants: [{name: Vision_AI, classes: [gpu-whole], gpuQuota: {gpu-whole: 2, gpu-slice: 1}}]
      platform: {enabled: false}
`, filepath.Join(repoRoot, ".tools", "bin"), kubeconfig)
	require.NoError(t, os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(program), 0o600))
	st := cliStack(t, ctx, work, "e2e", nil)
	_, err := st.Up(ctx, optup.ProgressStreams(progressTo(t)))
	require.Error(t, err)
	for _, want := range []string{
		"gpu-tenancy:index:Platform resource 'gpus' has a problem: invalid Platform arguments",
		`property tenants[0].name with value "Vision_AI" has a problem`,
		`tenants[0].gpuQuota["gpu-slice"]`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	dep, err := st.Export(ctx)
	require.NoError(t, err)
	assert.NotContains(t, string(dep.Deployment), "kubernetes:", "nothing registered")
	assert.Equal(t, before, snapshot(t, ctx))
}

// A misspelt top-level key fails the program itself, as the engine runs it, with nothing registered: the engine's
// own check of the stack file (environment.Open) is bypassed by setting the key on the stack afterwards.
func TestMisspeltKeyFailsTheProgram(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	env := newStackEnv(t)
	env.name = "local-typo"
	st := env.open(ctx, nil)
	require.NoError(t, st.SetConfig(ctx, platform.ConfigNamespace+":tenant", auto.ConfigValue{Value: "[]"}))
	_, err := st.Up(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `gpu-tenancy:tenant: Unsupported value: "tenant"`)
	dep, err := st.Export(ctx)
	require.NoError(t, err)
	assert.NotContains(t, string(dep.Deployment), "gpu-tenancy:index:Platform", "nothing registered")
	assert.NotContains(t, string(dep.Deployment), "pulumi:providers:kubernetes", "nothing registered")
	assert.Equal(t, before, snapshot(t, ctx))
}

// retiredTenantsLevel is the priority level every tenant shared before each had its own.
const retiredTenantsLevel = "gpu-tenancy-tenants"

// prePlatformCommit is the last commit whose program registered the cluster, driver, catalog and tenants at the top
// level, before they became children of the Platform component.
const prePlatformCommit = "8c9b13cb472f482619ce56d06e02700e2047ba10"

// An existing stack built by the program before the Platform component (and before the one entitlement policy of every
// tenant), brought up by this one: every resource keeps its identity (aliases), every cluster-wide object on the API
// server is the one the old program created (same UID) but the per-tenant entitlement policies, which go only after
// the one that replaces them is in force, so no claim is unguarded at any moment of the upgrade.
func TestUpgradeFromBeforeThePlatformComponentKeepsEveryObjectAndGuard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	old := t.TempDir()
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", repoRoot, prePlatformCommit, old))
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "the upgrade proof checks out commit %s, so it needs the repository's history: %s", prePlatformCommit, out)
	// The old program builds on this checkout's module versions: what is proven is the program's resource identities,
	// and its dependencies are then the ones this checkout's build already compiled. With its own go.mod the old tree
	// compiled a second set of the SDKs first, longer than the rest of the test on a cold build cache.
	for _, file := range []string{"go.mod", "go.sum"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, file))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(old, file), raw, 0o644))
	}
	// The old tree runs with this checkout's tools, and its own state and control plane directory under its .tools.
	require.NoError(t, os.MkdirAll(filepath.Join(old, ".tools", "local-cluster"), 0o700))
	for _, dir := range []string{"bin", "pulumi-home", "charts"} {
		require.NoError(t, os.Symlink(filepath.Join(repoRoot, ".tools", dir), filepath.Join(old, ".tools", dir)))
	}
	raw, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(old, ".tools", "local-cluster", "kubeconfig"), raw, 0o600))

	up := exec.CommandContext(ctx, "go", "run", "./scripts/stack", "-skip-refresh", "up", "local")
	up.Dir = old
	up.Env = append(os.Environ(), "PULUMI_CONFIG_PASSPHRASE="+environment.LocalPassphrase)
	up.Stdout, up.Stderr = progressTo(t), progressTo(t)
	upErr := up.Run()
	t.Cleanup(func() {
		if t.Failed() {
			down := exec.Command("go", "run", "./scripts/stack", "destroy", "local")
			down.Dir, down.Env, down.Stdout, down.Stderr = old, up.Env, progressTo(t), progressTo(t)
			_ = down.Run()
		}
	})
	require.NoError(t, upErr, "up at commit %s", prePlatformCommit)
	owner := naming.StackOwner(platform.ConfigNamespace, "local")
	created := uids(t, ctx, owner)
	require.NotEmpty(t, created)

	st, err := environment.Open(ctx, environment.Options{
		RepoRoot: repoRoot, Stack: "local", Backend: "file://" + filepath.Join(old, ".tools", "state"),
		WorkDir: filepath.Join(old, ".tools", "engine", "local"), Passphrase: environment.LocalPassphrase, Progress: progressTo(t),
		Config: map[string]string{platform.ConfigNamespace + ":existing": fmt.Sprintf(`{"kubeconfigPath": %q}`, kubeconfig)},
	})
	require.NoError(t, err)
	// Since that commit the entitlement check became one policy for every tenant, reading each namespace's grant
	// labels: the upgrade creates it (and the later guards) and deletes the per-tenant policies, and nothing else.
	for _, step := range previewSteps(t, ctx, st) {
		switch op, typ, _ := strings.Cut(step, " "); op {
		case "create", "update":
		case "delete":
			// And the one priority level every tenant shared, which each tenant's own replaces (docs/benchmarks.md, "API fairness").
			assert.Contains(t, []string{"kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
				"kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
				"kubernetes:flowcontrol.apiserver.k8s.io/v1:PriorityLevelConfiguration"}, typ,
				"the upgrade deletes only the per-tenant entitlement policies and the tenants' shared priority level")
		case "replace", "create-replacement", "delete-replaced":
			// The vCluster's config Secret (vc-config-<tenant>) holds its values, which changed since (priority classes
			// synced, no per-node Services); the kubernetes provider replaces a Secret whose data changes, and the
			// StatefulSet rolls on its config hash. Nothing else is replaced.
			assert.Equal(t, "kubernetes:core/v1:Secret", typ, "the upgrade replaces only the vCluster config Secrets")
		default:
			assert.Fail(t, "the upgrade only creates, updates and deletes the per-tenant policies", step)
		}
	}
	// Throughout the up, legal-ai's syncer keeps trying to claim research-ai's class: the new policy is in force before
	// the old ones go, so no attempt is ever admitted.
	syncer, _ := syncerOf(t, ctx, legal)
	ns := naming.Namespace(legal)
	stop := make(chan struct{})
	probed := make(chan [2]int)
	go func() {
		tries, admitted := 0, 0
		for {
			select {
			case <-stop:
				probed <- [2]int{tries, admitted}
				return
			default:
			}
			_, err := syncer.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "foreign", probe.Request{Classes: []string{slice}}), dryRun)
			tries++
			if err == nil {
				admitted++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res, err := st.Up(ctx)
	close(stop)
	attempts := <-probed
	require.NoError(t, err)
	assert.LessOrEqual(t, (*res.Summary.ResourceChanges)["replace"], 2, "one config Secret per tenant at most: %v", *res.Summary.ResourceChanges)
	assert.Positive(t, attempts[0])
	assert.Zero(t, attempts[1], "claims of another tenant's class admitted during the upgrade, of %d tries", attempts[0])
	after := uids(t, ctx, owner)
	for key, uid := range created {
		if strings.Contains(key, "/"+naming.LegacyEntitlementPolicyPrefix) {
			assert.NotContains(t, after, key, "the per-tenant entitlement policy is gone")
			continue
		}
		if key == "prioritylevelconfigurations/"+retiredTenantsLevel {
			assert.NotContains(t, after, key, "the shared level is gone, each tenant's own in its place")
			continue
		}
		assert.Equal(t, uid, after[key], "%s is still the one the old program created", key)
	}
	requireNoChanges(t, ctx, st)

	_, err = st.Destroy(ctx)
	require.NoError(t, err)
	requireAsBefore(t, ctx, before)
}

// destroyOnFailure destroys the stack when the test fails, so that the next test finds the cluster as it was.
func destroyOnFailure(t *testing.T, st auto.Stack) {
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_ = unprotectAll(ctx, st)
			_, _ = st.Destroy(ctx, optdestroy.ProgressStreams(progressTo(t)))
		}
	})
}

// uids are the UIDs of the cluster-wide objects of owner, by "<resource>/<name>".
func uids(t *testing.T, ctx context.Context, owner string) map[string]string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	out := map[string]string{}
	for _, gvr := range clusterScopedKinds {
		list, err := meta.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: naming.StackLabel + "=" + owner})
		require.NoError(t, err)
		for _, item := range list.Items {
			out[gvr.Resource+"/"+item.Name] = string(item.UID)
		}
	}
	return out
}
