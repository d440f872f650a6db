package environment

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/procstat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReleaseStaleLocksRemovesOnlyLocksOfProcessesThatAreGone(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	exited := exec.Command("true")
	require.NoError(t, exited.Run())
	deadPid := exited.Process.Pid
	// A process that has exited and that nobody has collected yet: a zombie, as a killed pulumi CLI is until its new
	// parent collects it.
	uncollected := exec.Command("true")
	require.NoError(t, uncollected.Start())
	t.Cleanup(func() { _ = uncollected.Wait() })
	require.Eventually(t, func() bool {
		st, _ := procstat.Read(uncollected.Process.Pid)
		return st.State == "Z"
	}, 10*time.Second, 10*time.Millisecond)

	for _, c := range []struct {
		name     string
		lock     string
		released bool
		wantErr  string
		pid      int // whose lock is released
	}{
		{"a process of this host that no longer runs", fmt.Sprintf(`{"pid":%d,"hostname":%q}`, deadPid, host), true, "", deadPid},
		{"a process that has exited but is not collected yet", fmt.Sprintf(`{"pid":%d,"hostname":%q}`, uncollected.Process.Pid, host), true, "", uncollected.Process.Pid},
		{"a process that still runs", fmt.Sprintf(`{"pid":%d,"hostname":%q}`, os.Getpid(), host), false, "which still runs: wait for it", 0},
		{"another host", fmt.Sprintf(`{"pid":%d,"hostname":"elsewhere"}`, deadPid), false, "another host", 0},
		{"an unreadable lock", `{`, false, "delete it once no operation runs", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			dir := filepath.Join(state, ".pulumi", "locks", "organization", projectName, "local")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			lock := filepath.Join(dir, "a1b2.json")
			require.NoError(t, os.WriteFile(lock, []byte(c.lock), 0o600))
			// Another stack's lock is never this stack's to release.
			otherDir := filepath.Join(state, ".pulumi", "locks", "organization", projectName, "prod")
			require.NoError(t, os.MkdirAll(otherDir, 0o700))
			other := filepath.Join(otherDir, "c3d4.json")
			require.NoError(t, os.WriteFile(other, fmt.Appendf(nil, `{"pid":%d,"hostname":%q}`, deadPid, host), 0o600))

			var out strings.Builder
			st := &Stack{opts: Options{Backend: "file://" + state, Stack: "local", Progress: &out}}
			locks, err := st.Locks()
			require.NoError(t, err)
			assert.Equal(t, []string{lock}, locks, "only this stack's lock is listed")

			err = st.ReleaseStaleLocks()
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
			}
			_, statErr := os.Stat(lock)
			assert.Equal(t, c.released, os.IsNotExist(statErr), "lock released")
			if c.released {
				assert.Contains(t, out.String(), fmt.Sprintf("released the lock of pulumi process %d", c.pid))
			}
			assert.FileExists(t, other, "another stack's lock stays")
		})
	}
}
