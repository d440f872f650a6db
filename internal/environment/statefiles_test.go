package environment

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRepairStateRemovesOnlyWhatAKilledEngineLeftIncomplete(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name    string
		file    string
		content string
		age     time.Duration
		removed string // the reason said, "" when the file is kept
	}{
		{"an empty sidecar", "stacks/gpu-tenancy/local.json.attrs", "", 0, "a metadata sidecar left incomplete"},
		{"a truncated sidecar", "stacks/gpu-tenancy/local.json.bak.attrs", `{"user.content_type":"appl`, 0, "a metadata sidecar left incomplete"},
		{"a whole sidecar", "stacks/gpu-tenancy/local.json.attrs", `{"user.content_type":"application/json"}`, 0, ""},
		{"an old temporary lock file", "locks/organization/gpu-tenancy/local/a1b2.json.18c9e2f1.tmp", "", 2 * tempAge, "a temporary file left by an engine that was killed"},
		{"a temporary file a running engine is about to rename", "stacks/gpu-tenancy/local.json.18c9e2f1.tmp", "{}", tempAge / 2, ""},
		{"a checkpoint", "stacks/gpu-tenancy/local.json", "", time.Hour, ""},
		{"a lock", "locks/organization/gpu-tenancy/local/a1b2.json", "", time.Hour, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			path := filepath.Join(state, ".pulumi", filepath.FromSlash(c.file))
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			require.NoError(t, os.WriteFile(path, []byte(c.content), 0o600))
			require.NoError(t, os.Chtimes(path, now.Add(-c.age), now.Add(-c.age)))

			said, err := repairState(state, now)
			require.NoError(t, err)
			_, statErr := os.Stat(path)
			if c.removed == "" {
				assert.NoError(t, statErr, "the file is kept")
				assert.Empty(t, said)
				return
			}
			assert.True(t, os.IsNotExist(statErr), "the file is removed")
			require.Len(t, said, 1)
			assert.Contains(t, said[0], "removed "+path+": "+c.removed)
		})
	}
}

func TestRepairStateOfADirectoryWithoutStateDoesNothing(t *testing.T) {
	said, err := repairState(filepath.Join(t.TempDir(), "none"), time.Now())
	require.NoError(t, err)
	assert.Empty(t, said)
}
