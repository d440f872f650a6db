package environment

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock is taken over before it expires only from a process of this host that is gone.
func TestALockIsGoneOnlyWhenItsProcessOnThisHostIsGone(t *testing.T) {
	ended := exec.Command("true")
	require.NoError(t, ended.Run())
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, identity string
		gone           bool
	}{
		{"this process", holder("up"), false},
		{"a process of this host that ended", fmt.Sprintf("destroy by root@%s (pid %d)", host, ended.Process.Pid), true},
		{"a running process of this host", fmt.Sprintf("up by root@%s (pid %d)", host, os.Getppid()), false},
		{"a process of another host", fmt.Sprintf("up by root@%s-elsewhere (pid %d)", host, ended.Process.Pid), false},
		{"an identity another tool wrote", "controller-7f9c", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.gone, holderGone(tc.identity))
		})
	}
}
