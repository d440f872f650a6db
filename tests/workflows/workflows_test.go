// Package workflows_test checks the GitHub workflows against the code they call: the matrices they read from
// gpu-tenancy and the environments they fan out.
package workflows_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var (
	matrixKey = regexp.MustCompile(`fromJSON\(needs\.stacks\.outputs\.matrix\)\.([A-Za-z]+)`)
	stacksRun = regexp.MustCompile(`gpu-tenancy stacks --json ([^)"]+)`)
)

func workflow(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", name))
	require.NoError(t, err)
	return string(raw)
}

// Every key a workflow reads from the matrix exists in what `gpu-tenancy stacks --json` prints, so a renamed field
// cannot leave a fan-out with no job.
func TestTheWorkflowsReadOnlyMatrixKeysTheEnvironmentCommandPrints(t *testing.T) {
	printed := map[string]bool{}
	typ := reflect.TypeFor[environment.CIMatrix]()
	for i := range typ.NumField() {
		printed[strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	for _, name := range []string{"preview.yml", "up.yml", "drift.yml"} {
		keys := matrixKey.FindAllStringSubmatch(workflow(t, name), -1)
		require.NotEmpty(t, keys, "%s reads no matrix of gpu-tenancy stacks", name)
		for _, k := range keys {
			assert.True(t, printed[k[1]], "%s reads .%s, which gpu-tenancy stacks --json does not print", name, k[1])
		}
	}
}

// The workflows fan out over the same environments, each with a stack file.
func TestTheWorkflowsFanOutOverTheSameEnvironmentsEachWithAStackFile(t *testing.T) {
	var want []string
	for _, name := range []string{"preview.yml", "up.yml", "drift.yml"} {
		runs := stacksRun.FindAllStringSubmatch(workflow(t, name), -1)
		require.Len(t, runs, 1, "%s lists its environments once", name)
		envs := strings.Fields(runs[0][1])
		if want == nil {
			want = envs
		}
		assert.Equal(t, want, envs, "%s fans out over other environments than preview.yml", name)
		for _, env := range envs {
			assert.FileExists(t, filepath.Join("..", "..", "stacks", "Pulumi."+env+".yaml"))
		}
	}
}

// job is what these tests read of a workflow's job: where credentials may appear (its env and its steps), behind which
// GitHub environment, and when it runs.
type job struct {
	Environment any              `json:"environment"`
	If          string           `json:"if"`
	Env         map[string]any   `json:"env"`
	Steps       []map[string]any `json:"steps"`
}

func jobs(t *testing.T, name string) map[string]job {
	t.Helper()
	var w struct {
		Jobs map[string]job `json:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(workflow(t, name)), &w), name)
	require.NotEmpty(t, w.Jobs, name)
	return w.Jobs
}

var (
	deployCredential   = regexp.MustCompile(`(secrets\.DEPLOY_[A-Z_]+|vars\.GCP_DEPLOY_SERVICE_ACCOUNT)`)
	anyCloudCredential = regexp.MustCompile(`(secrets\.[A-Z_]*SCW_[A-Z_]*(ACCESS|SECRET)_KEY|vars\.GCP_[A-Z_]*SERVICE_ACCOUNT)`)
)

// Deploy credentials reach only the jobs behind a GitHub environment, whose reviewers approve them, and those jobs
// run only on pushes to main; every other job (pull-request previews, drift, the stack lists) reads with the
// read-only ones.
func TestDeployCredentialsReachOnlyTheProtectedJobs(t *testing.T) {
	protected := 0
	for _, name := range []string{"preview.yml", "up.yml", "drift.yml"} {
		for id, j := range jobs(t, name) {
			raw, err := yaml.Marshal(j)
			require.NoError(t, err)
			text := string(raw)
			deploys := deployCredential.FindAllString(text, -1)
			if j.Environment != nil {
				protected++
				assert.Equal(t, "up.yml", name, "%s: job %s runs behind an environment outside the deploy workflow", name, id)
				assert.NotEmpty(t, deploys, "%s: job %s deploys without the environment's credentials", name, id)
				assert.NotContains(t, text, "READONLY", "%s: job %s mixes read-only and deploy credentials", name, id)
				continue
			}
			assert.Empty(t, deploys, "%s: job %s, behind no environment, holds deploy credentials", name, id)
			for _, c := range anyCloudCredential.FindAllString(text, -1) {
				assert.Contains(t, c, "READONLY", "%s: job %s holds %s, not a read-only credential", name, id, c)
			}
		}
	}
	assert.Equal(t, 2, protected, "the platform and group up jobs")
}

// Every preview, the scheduled drift check's included, runs the policy pack.
func TestEveryPreviewRunsThePolicyPack(t *testing.T) {
	for _, name := range []string{"preview.yml", "drift.yml"} {
		runs := 0
		for id, j := range jobs(t, name) {
			for _, step := range j.Steps {
				run, _ := step["run"].(string)
				if strings.Contains(run, "gpu-tenancy") && strings.Contains(run, " preview ") {
					runs++
					assert.Contains(t, run, "--policy-pack", "%s: job %s previews without the policy pack", name, id)
				}
			}
		}
		assert.Positive(t, runs, "%s runs no preview", name)
	}
}

// One environment's failed platform job skips no other environment's groups: the groups job runs unless the run was
// cancelled, and its first step stops a group whose own environment's platform job did not succeed.
func TestOneEnvironmentsFailureSkipsNoOthersGroups(t *testing.T) {
	groups := jobs(t, "up.yml")["groups"]
	assert.Contains(t, groups.If, "!cancelled()", "without it, any failed platform job skips every group")
	require.NotEmpty(t, groups.Steps)
	gate := groups.Steps[0]
	assert.Equal(t, "matrix.part != 'platform'", gate["if"])
	script, _ := gate["with"].(map[string]any)["script"].(string)
	assert.Contains(t, script, "conclusion !== 'success'", "the gate fails the group when its platform job did not succeed")
	env, _ := gate["env"].(map[string]any)
	assert.Equal(t, "up ${{ matrix.environment }}", env["PLATFORM_JOB"], "the platform job's name, as the platform jobs are named")
	assert.Contains(t, workflow(t, "up.yml"), "name: up ${{ matrix.stack }}")
}
