package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/engine"
	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
)

// clusterEnv puts this benchmark's control plane on ports apart from the demo's (2xxxx) and the end-to-end
// test's (3xxxx), so all three can run at once.
var clusterEnv = []string{
	"GT_ETCD_PORT=13790", "GT_ETCD_PEER_PORT=13800", "GT_APISERVER_PORT=16443",
	"GT_KCM_PORT=13257", "GT_SCHEDULER_PORT=13259",
}

// engineReference is the engine path at 20 tenants as measured before this benchmark; the target is to stay within 1.5 times it.
var engineReference = map[int]map[string]*reference{
	20: {
		"up":                  {wall: 35 * time.Second, resources: 250, target: "within x1.5"},
		"preview, no refresh": {wall: 3700 * time.Millisecond, target: "within x1.5"},
	},
}

// benchEngine starts a control plane of its own with the simulated GPU hardware, then for each size runs the local
// stack's up, a second (no-change) preview with and without its refresh, and destroy through internal/engine, with
// the tenants generated as for the plan, the project's policy pack when `make tools` has built it (as `make stack` runs it), and a state of its
// own. Everything lives in a temporary directory, purged at the end. On an error it returns the rows of the sizes
// already measured.
func benchEngine(ctx context.Context, root string, sizes []int) ([]row, error) {
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cl, err := startCluster(ctx, root, filepath.Join(dir, "cluster"))
	defer cl.purge()
	if err != nil {
		return nil, err
	}
	base, err := platform.ReadStackFile(filepath.Join(root, localStackFile))
	if err != nil {
		return nil, err
	}
	var packs []string
	if pack := engine.PolicyPack(root); exists(pack) {
		packs = []string{pack}
	} else {
		fmt.Fprintf(os.Stderr, "bench: no policy pack at %s: the engine runs without it\n", pack)
	}

	var rows []row
	for _, n := range sizes {
		overrides, err := tenantOverrides(base, n)
		if err != nil {
			return rows, err
		}
		// As tests/e2e does: the control plane's kubeconfig is the secret key, not a file named in `existing`.
		overrides[platform.ConfigNamespace+":existing"] = "{}"
		sizeDir := filepath.Join(dir, strconv.Itoa(n))
		opts := engine.Options{
			RepoRoot: root, Stack: "local", WorkDir: filepath.Join(sizeDir, "work"), StateDir: filepath.Join(sizeDir, "state"),
			Passphrase: "bench", Config: overrides, PolicyPacks: packs,
			SecretConfig: map[string]string{platform.ConfigNamespace + ":kubeconfig": string(cl.rawKubeconfig)},
		}
		st, err := engine.Open(ctx, opts)
		if err != nil {
			return rows, err
		}
		// The reference figures were taken before previews refreshed first; the same stack without the refresh
		// measures what the refresh adds.
		opts.SkipRefresh = true
		unrefreshed, err := engine.Open(ctx, opts)
		if err != nil {
			return rows, err
		}
		op := func(verb, resources string, wall time.Duration) {
			what := "engine " + verb
			if len(packs) > 0 && verb != "destroy" {
				what += " + policy pack"
			}
			rows = append(rows, row{what: what, size: tenants(n), wall: wall, resources: resources,
				ref: engineReference[n][verb]})
		}

		fmt.Fprintf(os.Stderr, "bench: engine up of %s\n", tenants(n))
		start := time.Now()
		up, err := st.Up(ctx)
		if err != nil {
			return rows, fmt.Errorf("up of %s: %w", tenants(n), err)
		}
		op("up", strconv.Itoa(summed(up.Summary.ResourceChanges)), time.Since(start))

		for _, p := range []struct {
			verb string
			st   *engine.Stack
		}{{"preview", st}, {"preview, no refresh", unrefreshed}} {
			fmt.Fprintf(os.Stderr, "bench: engine %s of %s\n", p.verb, tenants(n))
			start = time.Now()
			prev, err := p.st.Preview(ctx)
			if err != nil {
				return rows, fmt.Errorf("%s of %s: %w", p.verb, tenants(n), err)
			}
			wall := time.Since(start)
			// A preview that wants changes is not the no-change preview this row stands for: say so in the row.
			same := prev.ChangeSummary[apitype.OpSame]
			resources := strconv.Itoa(same) + " same"
			if changed := total(prev.ChangeSummary) - same; changed > 0 {
				resources += fmt.Sprintf(", %d CHANGED", changed)
			}
			op(p.verb, resources, wall)
		}

		fmt.Fprintf(os.Stderr, "bench: engine destroy of %s\n", tenants(n))
		start = time.Now()
		down, err := st.Destroy(ctx)
		if err != nil {
			return rows, fmt.Errorf("destroy of %s: %w", tenants(n), err)
		}
		op("destroy", strconv.Itoa(summed(down.Summary.ResourceChanges)), time.Since(start))
	}
	return rows, nil
}

// benchCluster is a local control plane of the benchmark's own, with the simulated GPU hardware.
type benchCluster struct {
	root, dir     string
	env           []string
	kubeconfig    string
	rawKubeconfig []byte
	client        kubernetes.Interface
}

// startCluster starts a control plane in dir on the benchmark's ports, with extraEnv for scripts/local-cluster.sh.
// purge stops and removes it, also after an error or an interruption: its processes run in sessions of their own.
func startCluster(ctx context.Context, root, dir string, extraEnv ...string) (*benchCluster, error) {
	cl := &benchCluster{root: root, dir: dir, env: append(append(os.Environ(), clusterEnv...), extraEnv...)}
	if tool := localcluster.MissingTool(root); tool != "" {
		return cl, fmt.Errorf("%s is not built: run `make tools`", tool)
	}
	if err := localcluster.Run(ctx, root, dir, "up", cl.env, os.Stderr); err != nil {
		return cl, err
	}
	cl.kubeconfig = filepath.Join(dir, "kubeconfig")
	var err error
	if cl.rawKubeconfig, err = os.ReadFile(cl.kubeconfig); err != nil {
		return cl, err
	}
	if cl.client, err = probe.Connect(cl.kubeconfig); err != nil {
		return cl, err
	}
	return cl, simhw.Apply(ctx, cl.client)
}

func (cl *benchCluster) purge() {
	if err := localcluster.Run(context.Background(), cl.root, cl.dir, "purge", cl.env, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// total sums an engine summary's counts per operation.
func total[K comparable](counts map[K]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// summed is total of an update's summary, which may be absent.
func summed(counts *map[string]int) int {
	if counts == nil {
		return 0
	}
	return total(*counts)
}
