package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadNamesParentStateAndStart(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	// A command name with a space and a parenthesis, which the parser must step over: the name is the executable's.
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	raw, err := os.ReadFile(sleep)
	require.NoError(t, err)
	odd := filepath.Join(t.TempDir(), "odd) 1 2 3")
	require.NoError(t, os.WriteFile(odd, raw, 0o700))
	child := exec.Command(odd, "30")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	var st Stat
	require.Eventually(t, func() bool {
		var ok bool
		st, ok = Read(child.Process.Pid)
		return ok && st.State == "S"
	}, 10*time.Second, 10*time.Millisecond, "the sleeping child")
	assert.Equal(t, os.Getpid(), st.PPid)
	assert.Regexp(t, `^\d+$`, st.Start, "the start time, not a field before or after it")

	require.NoError(t, child.Process.Kill())
	require.Eventually(t, func() bool { st, _ = Read(child.Process.Pid); return st.State == "Z" }, 10*time.Second,
		10*time.Millisecond, "killed and not yet collected, the child is a zombie")
}

func TestReadOfNoProcess(t *testing.T) {
	_, ok := Read(-1)
	assert.False(t, ok)
}
