package e2e

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/procstat"
)

// proc is a process: its pid and its start time, so that a pid the kernel has since given to another process is not
// taken for it.
type proc struct {
	pid   int
	start string
}

// descendants are every process below root now.
func descendants(root int) []proc {
	entries, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		if st, ok := procstat.Read(pid); ok {
			children[st.PPid] = append(children[st.PPid], proc{pid, st.Start})
		}
	}
	var out []proc
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0].pid]...)
	}
	return out
}

// killLeftoversAtCleanup stops, once the test is over, the processes of a killed engine that outlive it: the plugins
// the pulumi CLI starts in their own process groups keep running when their engine is killed, as they would for an
// operator. The test leaves them running while it recovers the stack, and no test after it finds them.
func killLeftoversAtCleanup(t *testing.T, procs []proc) {
	t.Cleanup(func() {
		for _, p := range procs {
			if st, ok := procstat.Read(p.pid); ok && st.Start == p.start {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
}
