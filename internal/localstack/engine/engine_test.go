package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The working copy keeps the salt its state was encrypted with, never the stack file's: the stack's passphrase may
// not be the one the stack file's salt was made for.
func TestWorkingCopyKeepsOneSalt(t *testing.T) {
	cases := map[string]struct {
		stackFile, previous, want string
	}{
		"a first run leaves the salt to the CLI": {"encryptionsalt: v1:file\nconfig:\n  a: b\n", "", ""},
		"a later run keeps its own salt":         {"encryptionsalt: v1:file\nconfig:\n  a: b\n", "encryptionsalt: v1:state\n", "v1:state"},
		"a stack file without salt":              {"config:\n  a: b\n", "encryptionsalt: v1:state\n", "v1:state"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stackFile := filepath.Join(dir, "Pulumi.local.yaml")
			require.NoError(t, os.WriteFile(stackFile, []byte(c.stackFile), 0o600))
			work := filepath.Join(dir, "work")
			require.NoError(t, os.Mkdir(work, 0o700))
			if c.previous != "" {
				require.NoError(t, os.WriteFile(filepath.Join(work, "Pulumi.local.yaml"), []byte(c.previous), 0o600))
			}
			require.NoError(t, writeWorkspace(Options{Stack: "local", WorkDir: work, StateDir: dir}, stackFile))
			raw, err := os.ReadFile(filepath.Join(work, "Pulumi.local.yaml"))
			require.NoError(t, err)
			wantSalts := 1
			if c.want == "" {
				wantSalts = 0
			}
			assert.Equal(t, wantSalts, strings.Count(string(raw), "encryptionsalt:"), string(raw))
			var doc struct {
				Salt   string            `json:"encryptionsalt"`
				Config map[string]string `json:"config"`
			}
			require.NoError(t, yaml.UnmarshalStrict(raw, &doc))
			assert.Equal(t, c.want, doc.Salt)
			assert.Equal(t, map[string]string{"a": "b"}, doc.Config)
		})
	}
}
