package environment

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
)

// A config value longer than Linux takes for one argument (128 KiB), as the placement of 1,000 tenants is, reaches the
// stack whole: the bench's run of 1,000 tenants failed with "argument list too long" when it went on the CLI's
// command line.
func TestAConfigValueLongerThanOneArgumentReachesTheStack(t *testing.T) {
	pulumiCLI := builtPulumi(t)
	t.Setenv(BackendEnv, "")
	root := localStackAsLocal(t)
	tools := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tools, "bin"), 0o700))
	require.NoError(t, os.Symlink(pulumiCLI, filepath.Join(tools, "bin", "pulumi")))
	require.NoError(t, os.MkdirAll(filepath.Join(tools, "pulumi-home"), 0o700))

	type placed struct {
		Name     string         `json:"name"`
		Group    int            `json:"group"`
		Classes  []string       `json:"classes"`
		GPUQuota map[string]int `json:"gpuQuota"`
	}
	var tenants []placed
	for i := range 4000 {
		tenants = append(tenants, placed{fmt.Sprintf("tenant-with-a-long-name-%04d", i), i % 100,
			[]string{"gpu-whole", "gpu-slice"}, map[string]int{"gpu-whole": 1, "gpu-slice": 1}})
	}
	raw, err := json.Marshal(tenants)
	require.NoError(t, err)
	require.Greater(t, len(raw), 128<<10, "longer than one argument may be")
	key, secretKey := platform.ConfigNamespace+":tenants", platform.ConfigNamespace+":kubeconfig"
	const secret = "apiVersion: v1\nkind: Config\n"
	s, err := Open(context.Background(), Options{RepoRoot: root, Stack: "local", Tools: tools, Passphrase: "test",
		Backend: "file://" + t.TempDir(), WorkDir: t.TempDir(), SecretConfig: map[string]string{secretKey: secret},
		Config: map[string]string{key: string(raw), platform.ConfigNamespace + ":tenantGroups": "100", platform.ConfigNamespace + ":existing": "{}"}})
	require.NoError(t, err)
	got, err := s.GetConfig(context.Background(), key)
	require.NoError(t, err)
	assert.Equal(t, string(raw), got.Value)

	// Set again on the open stack, as the placement of an environment's tenants is: the secret set before, and the
	// salt it was encrypted with, stay.
	raw[len(raw)-3] = '9'
	require.NoError(t, s.setConfig(context.Background(), map[string]string{key: string(raw)}))
	got, err = s.GetConfig(context.Background(), key)
	require.NoError(t, err)
	assert.Equal(t, string(raw), got.Value)
	kept, err := s.GetConfig(context.Background(), secretKey)
	require.NoError(t, err)
	assert.True(t, kept.Secret)
	assert.Equal(t, secret, kept.Value)
}
