package gomod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDirFindsModuleFiles(t *testing.T) {
	dir, err := Dir("github.com/loft-sh/vcluster", "v0.36.1")
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(dir, "chart", "values.schema.json"))
	assert.Equal(t, "vcluster@v0.36.1", filepath.Base(dir))
}

func TestDirReportsUnknownVersion(t *testing.T) {
	// With the proxy off an uncached version cannot be found, so the failure is deterministic and offline.
	t.Setenv("GOPROXY", "off")
	_, err := Dir("github.com/loft-sh/vcluster", "v0.0.0-no-such-version")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "github.com/loft-sh/vcluster@v0.0.0-no-such-version")
}

func TestDirRejectsMissingArguments(t *testing.T) {
	for name, args := range map[string][2]string{
		"no module":  {"", "v1.0.0"},
		"no version": {"example.com/m", ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Dir(args[0], args[1])
			assert.Error(t, err)
		})
	}
}

func TestDirLeavesWorkingModuleUntouched(t *testing.T) {
	// Run from inside a throwaway module: its go.mod must come out byte-identical.
	mod := t.TempDir()
	gomod := filepath.Join(mod, "go.mod")
	const content = "module example.com/probe\n\ngo 1.22\n"
	require.NoError(t, os.WriteFile(gomod, []byte(content), 0o644))
	t.Chdir(mod)

	_, err := Dir("github.com/loft-sh/vcluster", "v0.36.1")
	require.NoError(t, err)
	got, err := os.ReadFile(gomod)
	require.NoError(t, err)
	assert.Equal(t, content, string(got))
	assert.NoFileExists(t, filepath.Join(mod, "go.sum"))
}
