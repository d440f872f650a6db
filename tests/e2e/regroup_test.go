package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// envFile is an environment's stack file of the test's own, made from the local stack's: the file the environment
// reads, and where a move records a tenant's group.
type envFile struct {
	t    *testing.T
	path string
	doc  map[string]any
}

// newEnvFile writes stacks/Pulumi.<env>.yaml under dir from the local stack file, pointed at this test's cluster
// through kubeconfig, with config keys replaced.
func newEnvFile(t *testing.T, dir, env, kubeconfigPath string, config map[string]any) *envFile {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	cfg := doc["config"].(map[string]any)
	cfg[platform.ConfigNamespace+":existing"] = map[string]any{"kubeconfigPath": kubeconfigPath}
	// The vCluster chart of `make tools`, wherever the test's project is.
	cfg[platform.ConfigNamespace+":vcluster"] = map[string]any{"chart": map[string]any{"path": filepath.Join(repoRoot, ".tools", "charts", "vcluster")}, "await": false}
	for k, v := range config {
		cfg[platform.ConfigNamespace+":"+k] = v
	}
	f := &envFile{t: t, path: filepath.Join(dir, "stacks", "Pulumi."+env+".yaml"), doc: doc}
	require.NoError(t, os.MkdirAll(filepath.Dir(f.path), 0o700))
	f.write()
	return f
}

func (f *envFile) write() {
	raw, err := yaml.Marshal(f.doc)
	require.NoError(f.t, err)
	require.NoError(f.t, os.WriteFile(f.path, raw, 0o600))
}

// read takes the file as written on disk (a move records groups in it).
func (f *envFile) read() {
	raw, err := os.ReadFile(f.path)
	require.NoError(f.t, err)
	require.NoError(f.t, yaml.Unmarshal(raw, &f.doc))
}

func (f *envFile) set(key string, value any) {
	f.read()
	f.doc["config"].(map[string]any)[platform.ConfigNamespace+":"+key] = value
	f.write()
}

// groups are the tenants' recorded groups.
func (f *envFile) groups() map[string]any {
	f.read()
	out := map[string]any{}
	for _, t := range f.doc["config"].(map[string]any)[platform.ConfigNamespace+":tenants"].([]any) {
		m := t.(map[string]any)
		out[m["name"].(string)] = m["group"]
	}
	return out
}

func (f *envFile) addTenant(entry map[string]any) {
	f.read()
	cfg := f.doc["config"].(map[string]any)
	cfg[platform.ConfigNamespace+":tenants"] = append(cfg[platform.ConfigNamespace+":tenants"].([]any), entry)
	f.write()
}

// listedTenants are the names of the tenants a stack file lists.
func listedTenants(t *testing.T, stackFile string) []string {
	t.Helper()
	sc, err := platform.ReadStackFile(stackFile)
	require.NoError(t, err)
	var tenants []platform.TenantArgs
	require.NoError(t, json.Unmarshal([]byte(sc.Values[platform.ConfigNamespace+":tenants"]), &tenants))
	var names []string
	for _, tenant := range tenants {
		names = append(names, tenant.Name)
	}
	return names
}

// sixTenants are tenants of both classes, small enough for the local cluster.
func sixTenants() []any {
	var out []any
	for i := range 6 {
		class := whole
		if i%2 == 1 {
			class = slice
		}
		out = append(out, map[string]any{"name": fmt.Sprintf("team-%c", 'a'+i), "classes": []any{class},
			"gpuQuota": map[string]any{class: 1}, "cpuQuota": "4", "memoryQuota": "8Gi"})
	}
	return out
}

// marker is a tenant's data, as the test leaves it in its namespace: a ConfigMap and a volume claim.
type marker struct {
	namespaceUID, configMapUID, claimUID string
}

func putMarker(t *testing.T, ctx context.Context, tenant string) marker {
	ns := naming.Namespace(tenant)
	n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Data: map[string]string{"tenant": tenant}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	return marker{string(n.UID), string(cm.UID), string(pvc.UID)}
}

func readMarker(t *testing.T, ctx context.Context, tenant string) marker {
	ns := naming.Namespace(tenant)
	n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "namespace of %s", tenant)
	assert.Nil(t, n.DeletionTimestamp, "namespace of %s is not being deleted", tenant)
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "marker", metav1.GetOptions{})
	require.NoError(t, err, "marker ConfigMap of %s", tenant)
	pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "marker", metav1.GetOptions{})
	require.NoError(t, err, "marker volume claim of %s", tenant)
	return marker{string(n.UID), string(cm.UID), string(pvc.UID)}
}

// stateOf names the tenants each stack of the environment holds.
func stateOf(t *testing.T, ctx context.Context, env *environment.Environment) map[string][]string {
	out := map[string][]string{}
	for _, s := range env.Stacks {
		tenants, err := s.Tenants(ctx)
		require.NoError(t, err)
		out[s.Name()] = tenants
	}
	return out
}

// TestRegroupKeepsEveryTenant: six tenants in two groups, each with data in its namespace; then three groups and a
// seventh tenant, then two groups again with the tenants of the third moved back. Every tenant keeps its namespace,
// vCluster and data throughout (the same UIDs), no operation deletes one, and the next preview of every stack is empty.
// The state is on a backend named by URL, not the local stack's.
func TestRegroupKeepsEveryTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	dir := t.TempDir()
	file := newEnvFile(t, dir, "regroup", kubeconfig, map[string]any{"tenants": sixTenants(), "tenantGroups": 2})
	opts := environment.Options{RepoRoot: repoRoot, Stack: "regroup", StackFile: file.path, Backend: "file://" + filepath.Join(dir, "state"),
		WorkDir: filepath.Join(dir, "work"), Passphrase: "e2e-passphrase", Progress: progressTo(t)}
	open := func() *environment.Environment {
		env, err := environment.OpenEnvironment(ctx, opts)
		require.NoError(t, err)
		return env
	}
	up := func(t *testing.T) environment.Changes {
		changes, err := open().Up(ctx)
		require.NoError(t, err)
		assert.Zero(t, changes["delete"]+changes["replace"], "an up deletes or replaces nothing: %v", changes)
		return changes
	}
	markers := map[string]marker{}
	keeps := func(t *testing.T) {
		for tenant, want := range markers {
			assert.Equal(t, want, readMarker(t, ctx, tenant), "tenant %s keeps its namespace and data", tenant)
		}
	}
	previewEmpty := func(t *testing.T) {
		changes, err := open().Preview(ctx)
		require.NoError(t, err)
		assert.Equal(t, total(changes), changes["same"], "the next preview of every stack is empty: %v", changes)
	}

	t.Run("six tenants in two groups, each with data", func(t *testing.T) {
		up(t)
		for _, tn := range sixTenants() {
			name := tn.(map[string]any)["name"].(string)
			markers[name] = putMarker(t, ctx, name)
		}
		held := stateOf(t, ctx, open())
		assert.Empty(t, held["regroup"], "the platform stack holds no tenant")
		assert.Len(t, append(held["regroup.tenants-0"], held["regroup.tenants-1"]...), 6)
	})
	t.Run("three groups: no tenant moves, and a move fills the new group", func(t *testing.T) {
		heldBefore := stateOf(t, ctx, open())
		file.set("tenantGroups", 3)
		up(t)
		held := stateOf(t, ctx, open())
		for _, s := range []string{"regroup.tenants-0", "regroup.tenants-1"} {
			assert.Equal(t, heldBefore[s], held[s], "stack %s keeps its tenants", s)
		}
		assert.Empty(t, held["regroup.tenants-2"], "the new group holds no tenant")
		// The rebalance the README gives: team-e (group 0, and the hash of three groups says 0 too) to the new group.
		require.Contains(t, held["regroup.tenants-0"], "team-e")
		_, err := open().Move(ctx, []string{"team-e"}, 2, false)
		require.NoError(t, err, "a move into a group that held no tenant yet")
		assert.Contains(t, stateOf(t, ctx, open())["regroup.tenants-2"], "team-e")
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace("team-e"), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, naming.StackOwner(platform.ConfigNamespace, "regroup.tenants-2"), ns.Labels[naming.StackLabel])
		keeps(t)
		previewEmpty(t)
	})
	t.Run("a seventh tenant: the hash places it", func(t *testing.T) {
		heldBefore := stateOf(t, ctx, open())
		file.addTenant(map[string]any{"name": "team-g", "classes": []any{whole}, "gpuQuota": map[string]any{whole: 1},
			"cpuQuota": "4", "memoryQuota": "8Gi"})
		changes := up(t)
		assert.Positive(t, changes["create"], "the seventh tenant")
		held := stateOf(t, ctx, open())
		for _, s := range []string{"regroup.tenants-0", "regroup.tenants-1", "regroup.tenants-2"} {
			assert.Subset(t, held[s], heldBefore[s], "stack %s keeps its tenants", s)
		}
		assert.Contains(t, held[fmt.Sprintf("regroup.tenants-%d", platform.TenantGroup("team-g", 3))], "team-g", "the hash places the new tenant")
		markers["team-g"] = putMarker(t, ctx, "team-g")
		keeps(t)
		previewEmpty(t)
	})
	t.Run("a tenant whose namespace was deleted by hand is recreated by the group that holds it", func(t *testing.T) {
		// Held by group 0 since two groups; with three, the hash of its name says group 1, and no group is recorded.
		const tenant = "team-a"
		require.Contains(t, stateOf(t, ctx, open())["regroup.tenants-0"], tenant)
		require.Equal(t, 1, platform.TenantGroup(tenant, 3))
		require.NoError(t, client.CoreV1().Namespaces().Delete(ctx, naming.Namespace(tenant), metav1.DeleteOptions{}))
		requireNamespaceGone(t, ctx, naming.Namespace(tenant))
		var progress syncbuf.Buffer
		o := opts
		o.Progress = io.MultiWriter(&progress, progressTo(t))
		env, err := environment.OpenEnvironment(ctx, o)
		require.NoError(t, err)
		_, err = env.Up(ctx)
		require.NoError(t, err, "group 1 does not create it, so group 0 is not refused its protected namespace")
		assert.Contains(t, progress.String(), "tenant team-a: its namespace vcluster-team-a is not on the cluster")
		assert.Contains(t, progress.String(), "is gone")
		held := stateOf(t, ctx, open())
		assert.Contains(t, held["regroup.tenants-0"], tenant)
		assert.NotContains(t, held["regroup.tenants-1"], tenant)
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, naming.StackOwner(platform.ConfigNamespace, "regroup.tenants-0"), ns.Labels[naming.StackLabel])
		// Its data went with the namespace: a new marker.
		markers[tenant] = putMarker(t, ctx, tenant)
		keeps(t)
		previewEmpty(t)
	})
	t.Run("a move hands a tenant to another group without touching the cluster", func(t *testing.T) {
		env := open()
		held := stateOf(t, ctx, env)
		var tenant string
		for _, s := range []string{"regroup.tenants-0", "regroup.tenants-1"} {
			if len(held[s]) > 0 {
				tenant = held[s][0]
			}
		}
		require.NotEmpty(t, tenant)
		plan, err := env.Move(ctx, []string{tenant}, 2, true)
		require.NoError(t, err)
		assert.Equal(t, "regroup.tenants-2", plan.To)
		assert.Positive(t, plan.Resources())
		assert.Contains(t, plan.String(), "in the state only", "the preview says what moves")
		assert.Equal(t, held, stateOf(t, ctx, open()), "a preview of the move changes nothing")
		_, err = open().Move(ctx, []string{tenant}, 2, false)
		require.NoError(t, err)
		assert.Contains(t, stateOf(t, ctx, open())["regroup.tenants-2"], tenant)
		assert.EqualValues(t, 2, file.groups()[tenant], "the move records the group in the stack file")
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, naming.StackOwner(platform.ConfigNamespace, "regroup.tenants-2"), ns.Labels[naming.StackLabel], "the new group owns it")
		keeps(t)
		previewEmpty(t)
	})
	// stoppedMove leaves a move of a tenant of group 0 or 1 to group 2 as a killed one leaves it, sees up refuse it and
	// the same move finish it. Killed right after its `pulumi state move`: the state in the destination, the group not
	// recorded, the namespace still labelled as the source's. Killed inside it (inside): the destination written, the
	// source not yet (it writes them in that order), so both states hold the tenant.
	stoppedMove := func(t *testing.T, inside bool) {
		held := stateOf(t, ctx, open())
		var tenant, from string
		for _, s := range []string{"regroup.tenants-0", "regroup.tenants-1"} {
			if len(held[s]) > 0 {
				tenant, from = held[s][0], s
			}
		}
		require.NotEmpty(t, tenant)
		destWork := filepath.Join(dir, "work") + ".tenants-2"
		sourceState := filepath.Join(t.TempDir(), "source.json")
		if inside {
			out, err := pulumiCLI(ctx, destWork, opts.Passphrase, "stack", "export", "--stack", from, "--file", sourceState, "--non-interactive")
			require.NoError(t, err, out)
		}
		out, err := pulumiCLI(ctx, destWork, opts.Passphrase, append([]string{"state", "move", "--source", from, "--dest",
			"regroup.tenants-2", "--yes", "--non-interactive"}, tenantTops(t, ctx, destWork, opts.Passphrase, from, tenant)...)...)
		require.NoError(t, err, out)
		if inside {
			out, err := pulumiCLI(ctx, destWork, opts.Passphrase, "stack", "import", "--stack", from, "--file", sourceState, "--non-interactive")
			require.NoError(t, err, out)
			both := stateOf(t, ctx, open())
			require.Contains(t, both[from], tenant)
			require.Contains(t, both["regroup.tenants-2"], tenant)
		}

		_, err = open().Up(ctx)
		require.Error(t, err, "an up refuses while the move is unfinished")
		assert.Contains(t, err.Error(), fmt.Sprintf("gpu-tenancy move regroup %s --to 2", tenant))
		keeps(t)

		plan, err := open().Move(ctx, []string{tenant}, 2, false)
		require.NoError(t, err)
		assert.Contains(t, plan.String(), fmt.Sprintf("tenant %s: already in regroup.tenants-2's state", tenant))
		if inside {
			assert.Contains(t, plan.String(), fmt.Sprintf("its copy in %s's state", from))
		}
		after := stateOf(t, ctx, open())
		assert.NotContains(t, after[from], tenant, "no copy is left in the source's state")
		assert.Contains(t, after["regroup.tenants-2"], tenant)
		assert.EqualValues(t, 2, file.groups()[tenant], "the finished move records the group")
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, naming.StackOwner(platform.ConfigNamespace, "regroup.tenants-2"), ns.Labels[naming.StackLabel], "the new group owns it")
		keeps(t)
		previewEmpty(t)
	}
	t.Run("a move stopped after handing the state over is refused by up and finished by the same command", func(t *testing.T) {
		stoppedMove(t, false)
	})
	t.Run("a move stopped between the state move's two writes is finished by the same command", func(t *testing.T) {
		stoppedMove(t, true)
	})
	t.Run("two groups again, the third group's tenants moved back first", func(t *testing.T) {
		file.set("tenantGroups", 2)
		env, err := environment.OpenEnvironment(ctx, opts)
		if err == nil {
			_, err = env.Up(ctx)
		}
		require.Error(t, err, "lowering the groups below a live tenant's is refused")
		assert.Contains(t, err.Error(), "gpu-tenancy move")
		keeps(t)
		file.set("tenantGroups", 3)
		// Every tenant of the third group, in one move.
		_, err = open().Move(ctx, stateOf(t, ctx, open())["regroup.tenants-2"], 0, false)
		require.NoError(t, err)
		file.set("tenantGroups", 2)
		changes, err := open().Up(ctx)
		require.NoError(t, err)
		// The emptied third group's stack is destroyed: its stack, Platform and cluster components and provider,
		// nothing of a tenant (the markers below).
		assert.Equal(t, map[string]int{"delete": 4, "same": total(changes) - 4}, map[string]int(changes))
		env = open()
		held := stateOf(t, ctx, env)
		assert.Len(t, append(held["regroup.tenants-0"], held["regroup.tenants-1"]...), 7)
		_, left := held["regroup.tenants-2"]
		assert.False(t, left, "the emptied third group's stack is gone from the environment")
		keeps(t)
		previewEmpty(t)
	})
	t.Run("a new address and CA for the cluster replace no provider", func(t *testing.T) {
		moved := filepath.Join(dir, "kubeconfig-moved")
		writeMovedKubeconfig(t, moved)
		file.set("existing", map[string]any{"kubeconfigPath": moved})
		changes, err := open().Preview(ctx)
		require.NoError(t, err)
		assert.Zero(t, changes["replace"]+changes["create"]+changes["delete"], "%v", changes)
		file.set("existing", map[string]any{"kubeconfigPath": kubeconfig})
	})
	t.Run("the platform's guards cannot be destroyed under the tenants", func(t *testing.T) {
		out, err := pulumiCLI(ctx, filepath.Join(dir, "work"), opts.Passphrase, "destroy", "--stack", "regroup", "--yes", "--non-interactive")
		require.Error(t, err, "the pulumi CLI's destroy of the platform stack fails: %s", out)
		assert.Contains(t, out, "protected")
		_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, naming.EntitlementPolicy, metav1.GetOptions{})
		require.NoError(t, err, "the entitlement guard is still there")
		keeps(t)
	})
	t.Run("a group's tenants cannot be destroyed through the pulumi CLI", func(t *testing.T) {
		out, err := pulumiCLI(ctx, filepath.Join(dir, "work.tenants-0"), opts.Passphrase, "destroy", "--stack", "regroup.tenants-0",
			"--yes", "--non-interactive")
		require.Error(t, err, "the pulumi CLI's destroy of a group stack fails: %s", out)
		assert.Contains(t, out, "protected")
		keeps(t)
	})
	t.Run("destroy takes the groups, then the platform", func(t *testing.T) {
		env := open()
		env.DeleteTenants = listedTenants(t, file.path)
		_, err := env.Destroy(ctx)
		require.NoError(t, err)
		requireAsBefore(t, ctx, before)
	})
}

// tenantTops are the URNs of a tenant's top components in a stack's state, as Environment.Move hands them to
// `pulumi state move` (everything below them follows).
func tenantTops(t *testing.T, ctx context.Context, workDir, passphrase, stack, tenant string) []string {
	file := filepath.Join(t.TempDir(), "state.json")
	out, err := pulumiCLI(ctx, workDir, passphrase, "stack", "export", "--stack", stack, "--file", file, "--non-interactive")
	require.NoError(t, err, out)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var state struct {
		Deployment struct {
			Resources []struct{ URN, Type, Parent string } `json:"resources"`
		} `json:"deployment"`
	}
	require.NoError(t, json.Unmarshal(raw, &state))
	mine := map[string]bool{}
	for _, r := range state.Deployment.Resources {
		if (r.Type == "gpu-tenancy:tenancy:Tenant" || r.Type == "gpu-tenancy:vcluster:VirtualCluster") && strings.HasSuffix(r.URN, "::"+tenant) {
			mine[r.URN] = true
		}
	}
	var tops []string
	for urn := range mine {
		parent := ""
		for _, r := range state.Deployment.Resources {
			if r.URN == urn {
				parent = r.Parent
			}
		}
		if !mine[parent] {
			tops = append(tops, urn)
		}
	}
	require.NotEmpty(t, tops, "tenant %s in the state of %s", tenant, stack)
	return tops
}

// writeMovedKubeconfig writes the test cluster's kubeconfig reaching it by another address (localhost for 127.0.0.1)
// with another CA bundle (the CA twice), as a rotated or moved endpoint would.
func writeMovedKubeconfig(t *testing.T, path string) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = strings.Replace(c.Server, "127.0.0.1", "localhost", 1)
		c.CertificateAuthorityData = append(append([]byte{}, c.CertificateAuthorityData...), c.CertificateAuthorityData...)
	}
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
}

// pulumiCLI runs the pulumi CLI `make tools` built in a stack's workspace, as a user would outside the runner.
func pulumiCLI(ctx context.Context, workDir, passphrase string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, ".tools", "bin", "pulumi"), args...)
	cmd.Dir = workDir
	cmd.Env = append(os.Environ(), "PULUMI_CONFIG_PASSPHRASE="+passphrase, "PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_HOME="+filepath.Join(repoRoot, ".tools", "pulumi-home"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
