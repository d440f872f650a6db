package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/plan"
)

// repoRoot is the project directory as seen from this package's directory, where go test runs.
const repoRoot = "../.."

func TestCommittedPlansAreFresh(t *testing.T) {
	t.Chdir(repoRoot)
	files, err := stackNames()
	require.NoError(t, err)
	var stacks []string
	for _, file := range files {
		env, err := environmentStacks(file)
		require.NoError(t, err)
		for _, stack := range env {
			stacks = append(stacks, stack)
			t.Run(stack, func(t *testing.T) {
				assert.NoError(t, checkPlan(stack, file))
			})
		}
	}
	assert.NoError(t, orphans(stacks, true, nil), "plans without a stack")
}

// A stack file with tenant groups plans every stack of its environment, each group's plan holding its tenants only,
// and the plan of a group the environment no longer has is removed.
func TestAnEnvironmentInTenantGroupsHasAPlanPerStack(t *testing.T) {
	root := project(t, "scw-dev")
	file := filepath.Join(root, "stacks/Pulumi.scw-dev.yaml")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	grouped := strings.Replace(string(raw), "config:\n", "config:\n  gpu-tenancy:tenantGroups: 2\n", 1)
	require.NoError(t, os.WriteFile(file, []byte(grouped), 0o644))
	code, stdout, stderr := runPlan(t, "-root", root)
	require.Equal(t, 0, code, stderr)
	tenantsOf := map[string][]string{}
	for _, stack := range []string{"scw-dev", "scw-dev.tenants-0", "scw-dev.tenants-1"} {
		assert.Contains(t, stdout, "wrote stacks/plans/"+stack+".json")
		doc, err := os.ReadFile(filepath.Join(root, "stacks/plans", stack+".json"))
		require.NoError(t, err)
		for _, tenant := range []string{"legal-ai", "research-ai"} {
			if strings.Contains(string(doc), `"type": "gpu-tenancy:tenancy:Tenant",
      "name": "`+tenant+`"`) {
				tenantsOf[stack] = append(tenantsOf[stack], tenant)
			}
		}
	}
	assert.Empty(t, tenantsOf["scw-dev"], "the platform stack builds no tenant")
	assert.ElementsMatch(t, []string{"legal-ai", "research-ai"}, append(tenantsOf["scw-dev.tenants-0"], tenantsOf["scw-dev.tenants-1"]...),
		"every tenant in one group's plan")

	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(grouped, "tenantGroups: 2", "tenantGroups: 1", 1)), 0o644))
	code, stdout, stderr = runPlan(t, "-root", root)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "removed stacks/plans/scw-dev.tenants-1.json")
	assert.NoFileExists(t, filepath.Join(root, "stacks/plans/scw-dev.tenants-1.json"))
}

// project makes a project directory holding the given example stacks of this repository.
func project(t *testing.T, stacks ...string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "stacks"), 0o755))
	for _, s := range stacks {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "stacks", "Pulumi."+s+".yaml"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "stacks", "Pulumi."+s+".yaml"), raw, 0o644))
	}
	return root
}

// runPlan runs the command; the working directory it moves to (-root) is restored when the test ends.
func runPlan(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(".")
	var out, errOut strings.Builder
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWriteProducesThePlanAndTheTree(t *testing.T) {
	root := project(t, "gke-dev")
	code, stdout, stderr := runPlan(t, "-root", root)
	require.Equal(t, 0, code, stderr)
	doc, err := os.ReadFile(filepath.Join(root, "stacks/plans/gke-dev.json"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"stack": "gke-dev"`)
	assert.Contains(t, stdout, "stack gke-dev: ")
	assert.Contains(t, stdout, "by type:")
	assert.Contains(t, stdout, "wrote stacks/plans/gke-dev.json")
}

func TestWriteIsByteIdenticalBetweenRuns(t *testing.T) {
	root := project(t, "gke-dev", "scw-dev")
	var docs [2]map[string]string
	for i := range docs {
		code, _, stderr := runPlan(t, "-root", root)
		require.Equal(t, 0, code, stderr)
		docs[i] = map[string]string{}
		for _, s := range []string{"gke-dev", "scw-dev"} {
			raw, err := os.ReadFile(filepath.Join(root, "stacks/plans", s+".json"))
			require.NoError(t, err)
			docs[i][s] = string(raw)
		}
	}
	assert.Equal(t, docs[0], docs[1])
}

// planOf plans one example stack in a project of its own and returns that project and the plan written.
func planOf(t *testing.T, stack string) (root, doc string) {
	t.Helper()
	root = project(t, stack)
	code, _, stderr := runPlan(t, "-root", root, stack)
	require.Equal(t, 0, code, stderr)
	raw, err := os.ReadFile(filepath.Join(root, "stacks/plans", stack+".json"))
	require.NoError(t, err)
	return root, string(raw)
}

func TestPlanNeverHoldsTheSecretPlaceholderAsPlainText(t *testing.T) {
	_, doc := planOf(t, "gke-dev")
	assert.NotContains(t, doc, "placeholder-set-your-own", "the stack file's ciphertext")
	assert.Contains(t, doc, `"[secret]"`)
}

func TestInvalidStackFailsWithTheValidationErrorsAndWritesNothing(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "stacks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "stacks/Pulumi.bad.yaml"), []byte(`config:
  gpu-tenancy:cloud: aws
  gpu-tenancy:tenantz: []
`), 0o644))
	code, stdout, stderr := runPlan(t, "-root", root, "bad")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "invalid stack config")
	assert.Contains(t, stderr, "gpu-tenancy:cloud")
	assert.Contains(t, stderr, "gpu-tenancy:tenantz")
	assert.Empty(t, stdout)
	assert.NoFileExists(t, filepath.Join(root, "stacks/plans/bad.json"))
}

func TestCheckReportsWhatIsWrongWithACommittedPlan(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, plan string)
		want  string
	}{
		{"edited plan is stale", func(t *testing.T, plan string) {
			require.NoError(t, os.WriteFile(plan, []byte("{}\n"), 0o644))
		}, "stacks/plans/scw-dev.json is stale: run `make plan`"},
		{"deleted plan is missing", func(t *testing.T, plan string) {
			require.NoError(t, os.Remove(plan))
		}, "stacks/plans/scw-dev.json is missing: run `make plan`"},
		{"plan without a stack file", func(t *testing.T, plan string) {
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(plan), "gone.json"), []byte("{}\n"), 0o644))
		}, "stacks/plans/gone.json plan no stack of stacks/: run `make plan`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := project(t, "scw-dev")
			code, _, stderr := runPlan(t, "-root", root)
			require.Equal(t, 0, code, stderr)
			code, _, stderr = runPlan(t, "-root", root, "-check")
			require.Equal(t, 0, code, "a fresh plan passes: %s", stderr)

			tt.spoil(t, filepath.Join(root, "stacks/plans/scw-dev.json"))
			code, _, stderr = runPlan(t, "-root", root, "-check")
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

func TestWriteRemovesPlansWithoutAStackFile(t *testing.T) {
	root := project(t, "scw-dev")
	gone := filepath.Join(root, "stacks/plans/gone.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(gone), 0o755))
	require.NoError(t, os.WriteFile(gone, []byte("{}\n"), 0o644))
	code, stdout, stderr := runPlan(t, "-root", root)
	require.Equal(t, 0, code, stderr)
	assert.NoFileExists(t, gone)
	assert.Contains(t, stdout, "removed stacks/plans/gone.json")
}

func TestExistingClusterIsPlannedWithoutItsKubeconfigFile(t *testing.T) {
	sc, err := platform.ReadStackFile(filepath.Join(repoRoot, "stacks/Pulumi.local.yaml"))
	require.NoError(t, err)
	require.Contains(t, sc.Values[platform.ConfigNamespace+":existing"], "kubeconfigPath", "the example reads a file")
	root, doc := planOf(t, "local")
	assert.NoFileExists(t, filepath.Join(root, ".tools/local-cluster/kubeconfig"))
	assert.Contains(t, doc, `"kubeconfig": "[secret]"`)
}

func TestWithoutKubeconfigFile(t *testing.T) {
	const existing, kubeconfig = platform.ConfigNamespace + ":existing", platform.ConfigNamespace + ":kubeconfig"
	tests := []struct {
		name        string
		in          platform.StackConfig
		wantValues  map[string]string
		wantSecrets []string
	}{
		{"kubeconfig path becomes the secret placeholder",
			platform.StackConfig{Values: map[string]string{
				existing: `{"driverRoot":"/run/nvidia/driver","kubeconfigPath":"/home/me/.kube/config"}`,
			}, Secrets: []string{platform.ConfigNamespace + ":platformAdminPassword"}},
			map[string]string{existing: `{"driverRoot":"/run/nvidia/driver"}`, kubeconfig: platform.SecretPlaceholder},
			[]string{platform.ConfigNamespace + ":platformAdminPassword", kubeconfig}},
		{"secret kubeconfig is left alone",
			platform.StackConfig{Values: map[string]string{existing: `{}`, kubeconfig: platform.SecretPlaceholder},
				Secrets: []string{kubeconfig}},
			map[string]string{existing: `{}`, kubeconfig: platform.SecretPlaceholder}, []string{kubeconfig}},
		{"cloud stacks are left alone",
			platform.StackConfig{Values: map[string]string{platform.ConfigNamespace + ":cloud": "gke"}},
			map[string]string{platform.ConfigNamespace + ":cloud": "gke"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withoutKubeconfigFile(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.wantValues, got.Values)
			assert.Equal(t, tt.wantSecrets, got.Secrets)
		})
	}
}

func TestPlanKeepsPathsAsTheStackFileSpellsThem(t *testing.T) {
	root, doc := planOf(t, "local")
	assert.NotContains(t, doc, root)
	assert.Contains(t, doc, `"chart": ".tools/charts/vcluster"`, "the local stack's vcluster.chart.path")
}

// An existing stack's upgrade from Kubernetes 1.35 to 1.36 changes the cloud cluster's version input and nothing
// else: no resource is added or removed (which an up would carry out as a delete and a create) and no tenant object's
// inputs change, so nothing of a tenant can be replaced. Both clouds upgrade the control plane in place on that input
// (GKE: min_master_version, https://registry.terraform.io/providers/hashicorp/google/latest/docs/resources/container_cluster;
// Kapsule: version, https://registry.terraform.io/providers/scaleway/scaleway/latest/docs/resources/k8s_cluster).
func TestAnUpgradeFrom135To136ChangesOnlyTheClusterVersion(t *testing.T) {
	tests := []struct {
		stack       string
		clusterType string
		versionKey  string
	}{
		{"gke-dev", "gcp:container/cluster:Cluster", "minMasterVersion"},
		{"scw-dev", "scaleway:kubernetes/cluster:Cluster", "version"},
	}
	for _, tt := range tests {
		t.Run(tt.stack, func(t *testing.T) {
			root := project(t, tt.stack)
			t.Chdir(root)
			file := stackFile(tt.stack)
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			// The example stack as it was on 1.35, before a tenant asked for GPUs by name (which needs 1.36).
			var lines []string
			for _, l := range strings.Split(string(raw), "\n") {
				if !strings.Contains(l, "gpuAccess: ") {
					lines = append(lines, l)
				}
			}
			at136 := strings.Join(lines, "\n")
			require.Contains(t, at136, `kubernetesVersion: "1.36"`, "the example stack is on 1.36")
			require.NoError(t, os.WriteFile(file, []byte(strings.Replace(at136, `kubernetesVersion: "1.36"`, `kubernetesVersion: "1.35"`, 1)), 0o644))
			before, err := makePlan(tt.stack, tt.stack)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(file, []byte(at136), 0o644))
			after, err := makePlan(tt.stack, tt.stack)
			require.NoError(t, err)

			key := func(r plan.Resource) string { return r.Type + " " + r.Parent + "/" + r.Name }
			was := map[string]plan.Resource{}
			for _, r := range before.Resources {
				was[key(r)] = r
			}
			changed := map[string][]string{}
			for _, r := range after.Resources {
				old, ok := was[key(r)]
				if !assert.True(t, ok, "created by the upgrade: %s", key(r)) {
					continue
				}
				delete(was, key(r))
				for k := range union(old.Inputs, r.Inputs) {
					if !reflect.DeepEqual(old.Inputs[k], r.Inputs[k]) {
						changed[r.Type] = append(changed[r.Type], k)
					}
				}
			}
			assert.Empty(t, was, "deleted by the upgrade")
			assert.Equal(t, map[string][]string{tt.clusterType: {tt.versionKey}}, changed, "the inputs the upgrade changes, by type")
		})
	}
}

func union(a, b map[string]any) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
