package platform

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An inline program has no PULUMI_CONFIG to list its keys: they come from the project's files, so a misspelt key
// fails it as it fails a program the Go language host runs.
func TestProjectKeysComeFromTheProjectAndStackFiles(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "Pulumi.yaml"), []byte(
		"name: gpu-tenancy\nruntime: go\nstackConfigDir: stacks\nconfig:\n  gpu-tenancy:prices:\n    value: {currency: EUR}\n  aws:region: eu-west-1\n"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "stacks"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "stacks", "Pulumi.dev.yaml"), []byte(
		"config:\n  gpu-tenancy:cloud: existing\n  gpu-tenancy:tenantz: []\n  gpu-tenancy:prices: {currency: USD}\n  kubernetes:context: x\n"), 0o600))

	assert.Equal(t, []string{"cloud", "prices", "tenantz"}, projectKeys(root, "dev"))
	assert.Equal(t, []string{"prices"}, projectKeys(root, "prod"), "a stack without a file has the project's keys")
	assert.Nil(t, projectKeys(t.TempDir(), "dev"), "no project file: the keys cannot be listed")
	assert.Nil(t, projectKeys("", "dev"))
}
