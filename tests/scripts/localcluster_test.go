package scripts_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A control plane asked to listen on a port of the kernel's ephemeral range is refused before anything starts, naming
// the variable: any outgoing connection may hold that port when the component binds it, so it would fail at random.
func TestLocalClusterRefusesAPortInTheEphemeralRange(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range on this machine")
	}
	var low, high int
	_, err = fmt.Sscan(string(raw), &low, &high)
	require.NoError(t, err)
	dir := t.TempDir()
	cmd := exec.Command("bash", "../../scripts/local-cluster.sh", "up")
	cmd.Env = append(os.Environ(), "GT_CLUSTER_DIR="+dir, fmt.Sprintf("GT_SCHEDULER_PORT=%d", low))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "up with a port in the ephemeral range: %s", out)
	assert.Contains(t, string(out), fmt.Sprintf("GT_SCHEDULER_PORT=%d lies in the ephemeral port range %d-%d", low, low, high))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing made in the data directory")
	assert.NotContains(t, string(out), "starting", "nothing started")
}
