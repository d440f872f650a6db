package scripts_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heartbeat runs scripts/heartbeat.sh with a beat every second.
func heartbeat(t *testing.T, args ...string) (out string, code int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../../scripts/heartbeat.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "GT_HEARTBEAT_SECONDS=1")
	raw, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(raw), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(raw), 0
}

// A long step says what it is before it starts and that it is alive while it runs; its output and exit status pass
// through.
func TestHeartbeatSaysWhatRunsAndThatItIsAlive(t *testing.T) {
	out, code := heartbeat(t, "compiling the demo", "bash", "-c", "sleep 2.5; echo built; exit 3")
	assert.Equal(t, 3, code, "the command's exit status")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	assert.Equal(t, "==> compiling the demo", lines[0], "said before it starts")
	assert.Contains(t, out, "    ... compiling the demo: still running, 1 s")
	assert.Contains(t, out, "    ... compiling the demo: still running, 2 s")
	assert.Contains(t, out, "built")
}

// A quick step, as on the warm path, prints its label and nothing more, and -q leaves the label to the caller.
func TestHeartbeatOfAQuickStepIsOneLine(t *testing.T) {
	out, code := heartbeat(t, "vet", "true")
	assert.Zero(t, code)
	assert.Equal(t, "==> vet\n", out)
	out, _ = heartbeat(t, "-q", "vet", "true")
	assert.Empty(t, out)
}
