package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localdemo"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoRecoversAfterPurgeCrashAndInterruption runs `make demo` and `make demo-down` (internal/localdemo) on this
// suite's control plane, which it purges twice and crashes once: down after a purge drops the state of the cluster
// that is gone, an up killed by SIGKILL while it creates the tenants is recovered by the next demo up, the demo runs
// again after a crash of the control plane, up after a purge drops the old cluster's state and comes up, and down
// then leaves the cluster as it found it. The suite's cluster is left up, with a new CA, for the tests that follow.
func TestDemoRecoversAfterPurgeCrashAndInterruption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// killDuring's engine runs under the suite's passphrase; the demo takes its passphrase from the environment.
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "e2e-passphrase")
	var progress syncbuf.Buffer
	opts := localdemo.Options{
		RepoRoot: repoRoot, ClusterDir: clusterDir, StateDir: t.TempDir(), WorkDir: t.TempDir(),
		Progress: io.MultiWriter(&progress, progressTo(t)),
	}
	demo := func(t *testing.T, run func(context.Context, localdemo.Options) error) string {
		t.Helper()
		var out syncbuf.Buffer
		o := opts
		o.Out = io.MultiWriter(&out, progressTo(t))
		require.NoError(t, run(ctx, o))
		return out.String()
	}
	// Cleanups run last first: the control plane is up again before a failed test's demo is taken down.
	t.Cleanup(func() {
		if t.Failed() {
			// The test's context is cancelled by now.
			cleanupCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := localdemo.Down(cleanupCtx, opts); err != nil {
				t.Logf("taking the demo down after the failure: %v", err)
			}
		}
	})
	t.Cleanup(func() { restartCluster(t) })

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // each step starts where the one before left off
		}
	}
	step("down after a purge drops the state of the cluster that is gone", func(t *testing.T) {
		demo(t, localdemo.Up)
		require.NoError(t, localCluster("purge"))
		out := demo(t, localdemo.Down)
		assert.Contains(t, out, "==> stack local: its cluster cannot be reached: there is no kubeconfig at "+kubeconfig)
		assert.Contains(t, out, "dropping the state, since the local stack is disposable")
		assert.NoFileExists(t, localStateFile(opts.StateDir), "the local stack's state is gone")
	})
	step("a demo up killed by SIGKILL while it creates the tenants is recovered by the next one", func(t *testing.T) {
		restartCluster(t)
		killDuring(t, &stackEnv{t: t, stateDir: opts.StateDir, workDir: opts.WorkDir}, environment.OpUp, "kubernetes:core/v1:Namespace", "creating")
		out := demo(t, localdemo.Up)
		assert.Contains(t, out, "an interrupted up left stack local unfinished: recovering it, then up")
		assert.Contains(t, progress.String(), "released the lock of pulumi process", "the killed engine's lock is released")
		requireTenantTable(t, out)
	})
	step("after a crash of the control plane the demo runs again on the same cluster", func(t *testing.T) {
		crashCluster(t)
		restartCluster(t)
		out := demo(t, localdemo.Up)
		assert.NotContains(t, out, "dropping the state", "a restarted control plane keeps its data: the state is still its own")
		assert.Contains(t, out, "    map[same:", "nothing to change: the objects survived the crash")
		requireTenantTable(t, out)
	})
	var before []string
	step("up after a purge drops the old cluster's state and comes up", func(t *testing.T) {
		require.NoError(t, localCluster("purge"))
		restartCluster(t)
		before = snapshot(t, ctx)
		out := demo(t, localdemo.Up)
		assert.Contains(t, out, "==> stack local: its state was built against another cluster (another certificate authority; kube-system namespace ")
		assert.Contains(t, out, "dropping the state, since the local stack is disposable")
		requireTenantTable(t, out)
	})
	step("down leaves the cluster as it was before the demo", func(t *testing.T) {
		out := demo(t, localdemo.Down)
		assert.Contains(t, out, "==> pulumi destroy of stack local")
		assert.NotContains(t, out, "dropping the state", "the cluster is the state's own: destroyed, not dropped")
		assert.Zero(t, localStateResources(t, opts.StateDir), "the destroy left nothing in the state")
		requireAsBefore(t, ctx, before)
	})
}

// restartCluster starts whatever of the suite's control plane is not running and connects to it again: after a
// purge its CA is a new one.
func restartCluster(t *testing.T) {
	t.Helper()
	require.NoError(t, localCluster("up"))
	var err error
	client, err = probe.Connect(kubeconfig)
	require.NoError(t, err)
}

// crashCluster kills the suite's etcd and kube-apiserver by their recorded pids, as a crash would.
func crashCluster(t *testing.T) {
	t.Helper()
	for _, component := range []string{"kube-apiserver", "etcd"} {
		raw, err := os.ReadFile(filepath.Join(clusterDir, "run", component+".pid"))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL), "killing %s", component)
	}
}

// requireTenantTable asserts that the demo printed each tenant's row, with a device allocated to legal-ai.
func requireTenantTable(t *testing.T, out string) {
	t.Helper()
	require.Contains(t, out, "TENANT")
	for _, want := range []string{legal, research, "gpu-a100-whole-", "gpu-a100-mig-0/gpu-0-mig-1g5gb-"} {
		assert.Contains(t, out, want)
	}
	// Each tenant's control-plane pod, created by its StatefulSet with no create refused in the namespace.
	for _, tenant := range []string{legal, research} {
		assert.Regexp(t, `(?m)^`+tenant+` +`+tenant+`-0 +none$`, out, "the control plane of %s", tenant)
	}
}

// localStateFile is the local stack's state in the file backend (pulumi/pulumi pkg/backend/diy, v3.274.1).
func localStateFile(stateDir string) string {
	return filepath.Join(stateDir, ".pulumi", "stacks", platform.ConfigNamespace, "local.json")
}

// localStateResources counts the resources of the local stack's latest state.
func localStateResources(t *testing.T, stateDir string) int {
	t.Helper()
	raw, err := os.ReadFile(localStateFile(stateDir))
	require.NoError(t, err)
	var state struct {
		Checkpoint struct {
			Latest struct {
				Resources []json.RawMessage `json:"resources"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	require.NoError(t, json.Unmarshal(raw, &state))
	return len(state.Checkpoint.Latest.Resources)
}
