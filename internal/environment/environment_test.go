package environment

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// project writes a project like the repository's into a new directory, with the backend line given (none when
// empty), and the stack file of environment prod.
func projectDir(t *testing.T, backend, stackFile string) string {
	t.Helper()
	root := t.TempDir()
	p := "name: gpu-tenancy\nruntime: go\nmain: infra\nstackConfigDir: stacks\n" + backend
	require.NoError(t, os.WriteFile(filepath.Join(root, "Pulumi.yaml"), []byte(p), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "stacks"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "stacks", "Pulumi.prod.yaml"), []byte(stackFile), 0o600))
	return root
}

// localStackAsLocal is a project holding the repository's local stack file as stack local's.
func localStackAsLocal(t *testing.T) string {
	t.Helper()
	stackFile, err := os.ReadFile(filepath.Join("..", "..", "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	root := projectDir(t, "", "")
	require.NoError(t, os.WriteFile(filepath.Join(root, "stacks", "Pulumi.local.yaml"), stackFile, 0o600))
	return root
}

// localStackProject is a project like the repository's holding the local stack's file as environment prod's, with
// tenantGroups set in it, and the backend line given (none when empty).
func localStackProject(t *testing.T, backend, tenantGroups string) string {
	t.Helper()
	stackFile, err := os.ReadFile(filepath.Join("..", "..", "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	split := strings.Replace(string(stackFile), "\nconfig:\n", "\nconfig:\n  gpu-tenancy:tenantGroups: "+tenantGroups+"\n", 1)
	require.NotEqual(t, string(stackFile), split)
	return projectDir(t, backend, split)
}

// inlineOptions open environment prod of root with the CLI `make tools` built and program instead of the platform's,
// which reads no cluster: the existing cluster's kubeconfig path only satisfies the stack file's rules.
func inlineOptions(t *testing.T, root string, program pulumi.RunFunc) Options {
	t.Helper()
	return Options{RepoRoot: root, Stack: "prod", Tools: filepath.Dir(filepath.Dir(builtPulumi(t))), WorkDir: t.TempDir(),
		Config: map[string]string{
			platform.ConfigNamespace + ":existing": fmt.Sprintf(`{"kubeconfigPath": %q}`, filepath.Join(t.TempDir(), "kubeconfig")),
		},
		Program: program}
}

// builtPulumi is the pulumi CLI `make tools` built; -short skips the test without it, a full run fails.
func builtPulumi(t *testing.T) string {
	t.Helper()
	path, err := toolbin.Path("pulumi")
	if err != nil && testing.Short() {
		t.Skip(err)
	}
	require.NoError(t, err)
	return path
}

func TestTheBackendIsTheOneGivenThenTheEnvironmentsThenTheProjects(t *testing.T) {
	for _, tc := range []struct {
		name, given, env, projectLine, want, wantErr string
	}{
		{name: "given wins over both", given: "gs://given", env: "gs://env", projectLine: "backend:\n  url: gs://project\n", want: "gs://given"},
		{name: "PULUMI_BACKEND_URL wins over the project", env: "s3://env", projectLine: "backend:\n  url: gs://project\n", want: "s3://env"},
		{name: "the project's backend.url", projectLine: "backend:\n  url: https://api.pulumi.com\n", want: "https://api.pulumi.com"},
		{name: "a relative file URL is taken from the project's directory, without metadata files",
			projectLine: "backend:\n  url: file://./state\n", want: "file://<root>/state?metadata=skip"},
		{name: "a file URL keeps its own metadata setting", given: "file:///srv/state?metadata=keep", want: "file:///srv/state?metadata=keep"},
		{name: "none at all names both places to set it", wantErr: "set PULUMI_BACKEND_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BackendEnv, tc.env)
			root := projectDir(t, tc.projectLine, "config: {}\n")
			p, err := readProject(root)
			require.NoError(t, err)
			got, err := resolveBackend(tc.given, p, root)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, filepath.Join(root, "Pulumi.yaml"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tc.want, "<root>", root), got)
		})
	}
}

// An environment of ten groups lists its platform stack, its ten groups in order, and a group stack the backend
// still holds with resources beyond them (tenantGroups lowered from 13), but not an empty one; the CI matrix has the
// platform first, every group, and all of them for jobs without order. The backend is a directory named by the
// project's backend.url, not .tools/state.
func TestListNamesEveryStackOfAnEnvironmentAndTheGroupStacksLeftBeyondIt(t *testing.T) {
	pulumiCLI := builtPulumi(t)
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "test")
	root := projectDir(t, "backend:\n  url: file://./state\n",
		"config:\n  gpu-tenancy:cloud: gke\n  gpu-tenancy:tenantGroups: 10  # room to grow\n")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "state"), 0o700))
	o := Options{RepoRoot: root, Stack: "prod", Tools: filepath.Dir(filepath.Dir(pulumiCLI))}
	resolved, err := o.resolve()
	require.NoError(t, err)
	pulumi := func(args ...string) {
		cmd := exec.Command(pulumiCLI, append(args, "--non-interactive")...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL="+resolved.Backend, "PULUMI_HOME="+filepath.Join(o.Tools, "pulumi-home"),
			"PULUMI_SKIP_UPDATE_CHECK=true")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	// A group stack with a resource, as a lowered tenantGroups leaves one, and an empty one.
	pulumi("stack", "init", "prod.tenants-12", "--secrets-provider", "passphrase")
	deployment := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(deployment, []byte(`{"version": 3, "deployment": {"manifest": {"time": "2026-12-02T00:00:00Z",
		"magic": "", "version": ""}, "resources": [{"urn": "urn:pulumi:prod.tenants-12::gpu-tenancy::pulumi:pulumi:Stack::gpu-tenancy-prod.tenants-12",
		"custom": false, "type": "pulumi:pulumi:Stack"}]}}`), 0o600))
	pulumi("stack", "import", "--stack", "prod.tenants-12", "--file", deployment)
	pulumi("stack", "init", "prod.tenants-11", "--secrets-provider", "passphrase")

	stacks, err := List(context.Background(), o)
	require.NoError(t, err)
	var names []string
	for _, s := range stacks {
		names = append(names, s.String())
	}
	assert.Equal(t, []string{"prod", "prod.tenants-0", "prod.tenants-1", "prod.tenants-2", "prod.tenants-3", "prod.tenants-4",
		"prod.tenants-5", "prod.tenants-6", "prod.tenants-7", "prod.tenants-8", "prod.tenants-9",
		"prod.tenants-12 (left beyond the environment's groups)"}, names)

	m := Matrix(stacks)
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	var back CIMatrix
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Len(t, back.Platforms, 1)
	assert.Equal(t, MatrixEntry{Environment: "prod", Stack: "prod", Part: "platform", Cloud: "gke"}, back.Platforms[0])
	require.Len(t, back.Groups, 11)
	assert.Equal(t, MatrixEntry{Environment: "prod", Stack: "prod.tenants-12", Part: "tenants-12", Cloud: "gke"}, back.Groups[10])
	assert.Len(t, back.All, 12)
	assert.True(t, back.HasGroups)
}

// An environment whose backend only the project's backend.url names keeps every stack's state there: each stack of
// the environment, opened with no backend given and none in the environment, updates its state in the project's
// state directory, and the environment lists them from it.
func TestTheProjectsBackendSettingHoldsEveryStacksState(t *testing.T) {
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "test")
	// Split in the stack file, where the listing reads it.
	root := localStackProject(t, "backend:\n  url: file://./state\n", "2")
	ctx := context.Background()
	o := inlineOptions(t, root, func(ctx *pulumi.Context) error {
		ctx.Export("stack", pulumi.String(ctx.Stack()))
		return nil
	})
	env, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	want := []string{"prod", "prod.tenants-0", "prod.tenants-1"}
	for _, s := range env.Stacks {
		_, err := s.Up(ctx)
		require.NoError(t, err)
	}
	for _, name := range want {
		matches, err := filepath.Glob(filepath.Join(root, "state", ".pulumi", "stacks", "gpu-tenancy", name+".json*"))
		require.NoError(t, err)
		assert.NotEmpty(t, matches, "stack %s's state is in the project's state directory", name)
	}
	stacks, err := List(ctx, o)
	require.NoError(t, err)
	var names []string
	for _, s := range stacks {
		names = append(names, s.String())
	}
	assert.Equal(t, want, names)
}
