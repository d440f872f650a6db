package environment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The working copy keeps the salt its state was encrypted with; on a first run, the stack file's when the file holds
// secure values (they decrypt with it), else none (the stack's passphrase may not be the one the file's salt was made
// for).
func TestWorkingCopyKeepsOneSalt(t *testing.T) {
	cases := map[string]struct {
		stackFile, previous, want string
	}{
		"a first run leaves the salt to the CLI": {"encryptionsalt: v1:file\nconfig:\n  a: b\n", "", ""},
		"secure values keep the file's salt":     {"encryptionsalt: v1:file\nconfig:\n  a: b\n  p:\n    secure: v1:x\n", "", "v1:file"},
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
			_, err := writeWorkspace(Options{Stack: "local", WorkDir: work, Backend: "file://" + dir}, stackFile)
			require.NoError(t, err)
			raw, err := os.ReadFile(filepath.Join(work, "Pulumi.local.yaml"))
			require.NoError(t, err)
			wantSalts := 1
			if c.want == "" {
				wantSalts = 0
			}
			assert.Equal(t, wantSalts, strings.Count(string(raw), "encryptionsalt:"), string(raw))
			var doc struct {
				Salt   string         `json:"encryptionsalt"`
				Config map[string]any `json:"config"`
			}
			require.NoError(t, yaml.UnmarshalStrict(raw, &doc))
			assert.Equal(t, c.want, doc.Salt)
			assert.Equal(t, "b", doc.Config["a"])
		})
	}
}

// The progress of stacks that run at once is told apart line by line, a line split over writes kept whole.
func TestProgressOfEachStackIsPrefixedByLine(t *testing.T) {
	var out strings.Builder
	w := prefixed(&out, "local", "tenants-1")
	for _, chunk := range []string{"Updating (local.ten", "ants-1):\n +  pulumi:pulumi:Stack", " creating\n", "unfinished"} {
		_, err := w.Write([]byte(chunk))
		require.NoError(t, err)
	}
	assert.Equal(t, "[local tenants-1] Updating (local.tenants-1):\n[local tenants-1]  +  pulumi:pulumi:Stack creating\n", out.String())
	assert.Nil(t, prefixed(nil, "local", "platform"), "no progress stays none")
}

// The engines get a larger heap goal unless the caller chose one, and a group's stack runs without checkpoints.
func TestEngineEnvironment(t *testing.T) {
	t.Run("a larger heap goal by default", func(t *testing.T) {
		t.Setenv("GOGC", "")
		require.NoError(t, os.Unsetenv("GOGC"))
		assert.Equal(t, map[string]string{"GOGC": "400"}, engineEnv(Options{}))
	})
	t.Run("the caller's GOGC wins", func(t *testing.T) {
		t.Setenv("GOGC", "100")
		assert.NotContains(t, engineEnv(Options{}), "GOGC", "the processes inherit the caller's")
	})
	t.Run("a group without checkpoints, with the passphrase", func(t *testing.T) {
		t.Setenv("GOGC", "100")
		assert.Equal(t, map[string]string{"PULUMI_SKIP_CHECKPOINTS": "true", "PULUMI_CONFIG_PASSPHRASE": "p"},
			engineEnv(Options{skipCheckpoints: true, Passphrase: "p"}))
	})
}
