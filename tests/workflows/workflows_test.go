// Package workflows_test checks the GitHub workflows against the code they call: the matrices they read from
// gpu-tenancy-env and the environments they fan out.
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
)

var (
	matrixKey = regexp.MustCompile(`fromJSON\(needs\.stacks\.outputs\.matrix\)\.([A-Za-z]+)`)
	stacksRun = regexp.MustCompile(`gpu-tenancy-env stacks -json ([^)"]+)`)
)

func workflow(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", name))
	require.NoError(t, err)
	return string(raw)
}

// Every key a workflow reads from the matrix exists in what `gpu-tenancy-env stacks -json` prints, so a renamed field
// cannot leave a fan-out with no job.
func TestTheWorkflowsReadOnlyMatrixKeysTheEnvironmentCommandPrints(t *testing.T) {
	printed := map[string]bool{}
	typ := reflect.TypeFor[environment.CIMatrix]()
	for i := range typ.NumField() {
		printed[strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	for _, name := range []string{"preview.yml", "up.yml", "drift.yml"} {
		keys := matrixKey.FindAllStringSubmatch(workflow(t, name), -1)
		require.NotEmpty(t, keys, "%s reads no matrix of gpu-tenancy-env stacks", name)
		for _, k := range keys {
			assert.True(t, printed[k[1]], "%s reads .%s, which gpu-tenancy-env stacks -json does not print", name, k[1])
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
