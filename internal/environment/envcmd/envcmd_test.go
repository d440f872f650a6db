package envcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/environment/envcmd"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run runs the gpu-tenancy command line with the environment's commands, as cmd/gpu-tenancy builds it.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := cli.New(&out, &errOut)
	app.Commands = envcmd.Commands(&out, &errOut)
	code = app.Run(context.Background(), args)
	return code, out.String(), errOut.String()
}

func TestTheEnvironmentsCommandsAreTheCommandLines(t *testing.T) {
	t.Chdir(filepath.Join("..", "..", ".."))
	// No backend named, so that an environment other than the local one has none.
	t.Setenv("PULUMI_BACKEND_URL", "")
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderr     string
		notInOut   string
		jsonStacks []string
	}{
		{name: "the help groups them apart from the reports", args: []string{"--help"},
			stdout: "Environments (drive an environment's stacks with the Pulumi engine):\n  destroy"},
		{name: "a command's help has its own flags and examples, not the reports'", args: []string{"up", "--help"},
			stdout: "--changed-only", notInOut: "--kubeconfig"},
		{name: "a report's flag is refused by name", args: []string{"up", "prod", "--kubeconfig", "kc"}, code: cli.ExitUsage,
			stderr: "gpu-tenancy: gpu-tenancy up: --kubeconfig is a flag of the cluster reports (capacity, pending, audit), not of up\n"},
		{name: "a flag of another environment command is refused", args: []string{"up", "prod", "--delete-tenants", "a"},
			code: cli.ExitUsage, stderr: "unknown flag: --delete-tenants"},
		{name: "a move names its group", args: []string{"move", "prod", "team-a"}, code: cli.ExitUsage,
			stderr: `required flag(s) "to" not set`},
		{name: "an environment is named", args: []string{"up"}, code: cli.ExitUsage, stderr: "accepts 1 arg(s), received 0"},
		{name: "an operation that fails exits 1 with its error", args: []string{"preview", "prod"},
			code: envcmd.ExitFailed, stderr: "gpu-tenancy: environment: no state backend: set PULUMI_BACKEND_URL"},
		{name: "the CI matrix of an environment's stacks", args: []string{"stacks", "--json", "local"}, jsonStacks: []string{"local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			assert.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", stdout, stderr)
			assert.Contains(t, stdout, tc.stdout)
			assert.Contains(t, stderr, tc.stderr)
			if tc.notInOut != "" {
				assert.NotContains(t, stdout, tc.notInOut)
			}
			if tc.jsonStacks != nil {
				var matrix struct {
					All []struct{ Environment, Stack string }
				}
				require.NoError(t, json.Unmarshal([]byte(stdout), &matrix), stdout)
				var stacks []string
				for _, row := range matrix.All {
					stacks = append(stacks, row.Stack)
				}
				assert.Equal(t, tc.jsonStacks, stacks)
			}
		})
	}
}
