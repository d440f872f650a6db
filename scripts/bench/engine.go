package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
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

// engineReference are the engine's figures on one stack, measured on a 2-core machine before tenant groups (issue
// "Cost that grows linearly with tenants"), and the limits of 100 and 1,000 tenants (issue "A thousand tenants on one
// cluster").
var engineReference = map[int]map[string]*reference{
	10: {
		"up": {wall: 17100 * time.Millisecond, resources: 238}, "preview": {wall: 8600 * time.Millisecond},
		"preview, no refresh": {wall: 2700 * time.Millisecond}, "destroy": {wall: 42300 * time.Millisecond},
	},
	40: {
		"up": {wall: 172800 * time.Millisecond, resources: 898}, "preview": {wall: 38500 * time.Millisecond},
		"preview, no refresh": {wall: 9600 * time.Millisecond}, "destroy": {wall: 210900 * time.Millisecond},
	},
	100: {
		// Pull requests preview without the refresh (drift.yml refreshes every stack daily): that preview has the limit.
		"up": {limit: 3 * time.Minute}, "preview, no refresh": {limit: 30 * time.Second},
		"up adding one tenant, changed stacks only": {limit: 15 * time.Second}, "up adding one tenant": {limit: 15 * time.Second},
		"destroy": {limit: 3 * time.Minute},
	},
	1000: {"up": {limit: 10 * time.Minute}},
}

// upRatioLimit is how much more than 10 tenants' up 100 tenants' may cost: linear, with a constant.
const upRatioLimit = 12

// benchEngine starts a control plane of its own with the simulated GPU hardware, then for each size runs the local
// stack's environment through internal/engine: up, a second (no-change) preview with and without its refresh, and
// destroy, with the tenants generated as for the plan, split into tenant groups of groupSize tenants (0: one stack),
// the project's policy pack when `make tools` has built it (as `make up` runs it), and a state of its own. At 100
// tenants and at the largest size it also adds one tenant to the environment that is up, and at the largest it moves
// some. Beside each operation stand the peak memory of the engine's processes (the CLIs, providers and policy packs,
// summed) and, after an up, the size of the state.
// Everything lives in a temporary directory, purged at the end. On an error it returns the rows of the sizes
// already measured.
func benchEngine(ctx context.Context, root string, sizes []int, l layout) ([]row, []string, error) {
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	cl, err := startCluster(ctx, root, filepath.Join(dir, "cluster"))
	defer cl.purge()
	if err != nil {
		return nil, nil, err
	}
	base, err := platform.ReadStackFile(filepath.Join(root, localStackFile))
	if err != nil {
		return nil, nil, err
	}
	var packs []string
	if pack := environment.PolicyPack(root); exists(pack) {
		packs = []string{pack}
	} else {
		fmt.Fprintf(os.Stderr, "bench: no policy pack at %s: the engine runs without it\n", pack)
	}
	groupSize := l.groupSize

	var rows []row
	for _, n := range sizes {
		sizeDir := filepath.Join(dir, strconv.Itoa(n))
		// The environment's own stack file, as an operator's: a move records its groups there. It is written when the
		// number of tenants changes, and otherwise kept with what a move recorded.
		stackFile, written := filepath.Join(sizeDir, "Pulumi.local.yaml"), -1
		open := func(tenants int, skipRefresh bool) (*environment.Environment, error) {
			if tenants != written {
				overrides, err := tenantOverrides(base, tenants)
				if err != nil {
					return nil, err
				}
				// As tests/e2e does: the control plane's kubeconfig is the secret key, not a file named in `existing`.
				overrides[platform.ConfigNamespace+":existing"] = "{}"
				if groupSize > 0 {
					overrides[platform.ConfigNamespace+":tenantGroups"] = strconv.Itoa((n + groupSize - 1) / groupSize)
				}
				if err := os.MkdirAll(sizeDir, 0o700); err != nil {
					return nil, err
				}
				if err := writeStackFile(filepath.Join(root, localStackFile), stackFile, overrides); err != nil {
					return nil, err
				}
				written = tenants
			}
			return environment.OpenEnvironment(ctx, environment.Options{
				RepoRoot: root, Stack: "local", StackFile: stackFile, WorkDir: filepath.Join(sizeDir, "work"),
				Backend: "file://" + filepath.Join(sizeDir, "state"), Passphrase: "bench", PolicyPacks: packs,
				SkipRefresh: skipRefresh, GroupCheckpoints: l.checkpoints,
				SecretConfig: map[string]string{platform.ConfigNamespace + ":kubeconfig": string(cl.rawKubeconfig)},
			})
		}
		size := fmt.Sprintf("%s, %s", tenants(n), l)
		op := func(verb string, changes environment.Changes, wall time.Duration, rssKiB int64) {
			what := "engine " + verb
			if len(packs) > 0 && verb != "destroy" {
				what += " + policy pack"
			}
			rows = append(rows, row{what: what, size: size, wall: wall, rssKiB: rssKiB, resources: describe(verb, changes),
				ref: engineReference[n][verb]})
		}
		timed := func(verb string, f func() (environment.Changes, error)) error {
			fmt.Fprintf(os.Stderr, "bench: engine %s of %s\n", verb, size)
			sampler := sampleRSS(engineProcesses)
			start := time.Now()
			changes, err := f()
			wall := time.Since(start)
			rss := sampler()
			if err != nil {
				return fmt.Errorf("%s of %s: %w", verb, size, err)
			}
			op(verb, changes, wall, rss)
			// Said at once as well, so that a run stopped later keeps what it measured.
			r := rows[len(rows)-1]
			fmt.Fprintf(os.Stderr, "bench: %s, %s: %.2f s, peak %d MB, %s\n", r.what, r.size, r.wall.Seconds(), r.rssKiB/1024, r.resources)
			return nil
		}

		env, err := open(n, false)
		if err != nil {
			return rows, nil, err
		}
		if err := timed("up", func() (environment.Changes, error) { return env.Up(ctx) }); err != nil {
			return rows, nil, err
		}
		bytes, err := stateBytes(filepath.Join(sizeDir, "state"))
		if err != nil {
			return rows, nil, err
		}
		rows = append(rows, row{what: "engine state after up", size: size,
			resources: fmt.Sprintf("%.1f MB, %.0f KB per tenant", float64(bytes)/1e6, float64(bytes)/1e3/float64(n))})
		// The reference figures were taken before previews refreshed first; the same environment without the
		// refresh measures what the refresh adds.
		unrefreshed, err := open(n, true)
		if err != nil {
			return rows, nil, err
		}
		for _, p := range []struct {
			verb string
			env  *environment.Environment
		}{{"preview", env}, {"preview, no refresh", unrefreshed}} {
			if err := timed(p.verb, func() (environment.Changes, error) { return p.env.Preview(ctx) }); err != nil {
				return rows, nil, err
			}
		}
		largest := n == sizes[len(sizes)-1]
		if (largest || n >= 100) && l.grow {
			// One tenant more, as `make up FLAGS=--changed-only` runs it (the platform stack and the new
			// tenant's group, each refreshed), then one more as a plain up runs it (every stack, refreshed): at 100
			// tenants, where the limits stand, and at the largest size.
			for i, onlyChanged := range []bool{true, false} {
				grown, err := open(n+1+i, false)
				if err != nil {
					return rows, nil, err
				}
				grown.OnlyChanged = onlyChanged
				verb := "up adding one tenant"
				if onlyChanged {
					verb += ", changed stacks only"
				}
				if err := timed(verb, func() (environment.Changes, error) { return grown.Up(ctx) }); err != nil {
					return rows, nil, err
				}
				if onlyChanged {
					rows[len(rows)-1].resources += fmt.Sprintf(", %d of %d stacks skipped", len(grown.Skipped), len(grown.Stacks))
				}
				env = grown
			}
			if largest && groupSize > 0 {
				if err := benchMove(ctx, env, open, n+2, size, &rows); err != nil {
					return rows, nil, err
				}
			}
		}
		// The bench's own tenants, all of them: a teardown of its cluster.
		env.DeleteTenants = env.ListedTenants()
		if err := timed("destroy", func() (environment.Changes, error) { return env.Destroy(ctx) }); err != nil {
			return rows, nil, err
		}
	}
	return rows, upRatio(rows, sizes), nil
}

// writeStackFile writes the stack file base with the config keys of overrides (raw JSON values) set, to path.
func writeStackFile(base, path string, overrides map[string]string) error {
	raw, err := os.ReadFile(base)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	config, _ := doc["config"].(map[string]any)
	if config == nil {
		config = map[string]any{}
	}
	for k, v := range overrides {
		var value any
		if err := json.Unmarshal([]byte(v), &value); err != nil {
			value = v
		}
		config[k] = value
	}
	doc["config"] = config
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// layout is how the engine runs an environment: tenant groups of groupSize tenants (0: one stack), with each group
// stack's state written after every step (checkpoints) instead of once at the end; grow adds tenants and moves some
// at the largest size.
type layout struct {
	groupSize   int
	checkpoints bool
	grow        bool
}

func (l layout) String() string {
	s := "one stack"
	if l.groupSize > 0 {
		s = fmt.Sprintf("groups of %d", l.groupSize)
	}
	if l.checkpoints {
		s += ", groups with checkpoints"
	}
	return s
}

// benchLayouts runs the largest size in the layouts the chosen one was weighed against (docs/architecture.md,
// "Scale"): the same groups with each group's state written after every step, and groups two and a half times as
// large.
func benchLayouts(ctx context.Context, root string, n, groupSize int) ([]row, error) {
	var rows []row
	for _, l := range []layout{{groupSize: groupSize, checkpoints: true}, {groupSize: groupSize * 5 / 2}} {
		r, _, err := benchEngine(ctx, root, []int{n}, l)
		rows = append(rows, r...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// movedTenants is how many tenants the move row hands to another group at once.
const movedTenants = 10

// benchMove moves movedTenants tenants of other groups to group 0 in one move, as `gpu-tenancy move` does, and
// checks with a preview of every stack that nothing is left to change (so nothing was deleted or recreated).
func benchMove(ctx context.Context, env *environment.Environment, open func(int, bool) (*environment.Environment, error),
	n int, size string, rows *[]row) error {
	var movers []string
	for _, s := range env.Stacks[2:] {
		held, err := s.Tenants(ctx)
		if err != nil {
			return err
		}
		for _, t := range held {
			if len(movers) < movedTenants {
				movers = append(movers, t)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: engine move of %d tenants of %s\n", len(movers), size)
	sampler := sampleRSS(engineProcesses)
	start := time.Now()
	plan, err := env.Move(ctx, movers, 0, false)
	wall := time.Since(start)
	rss := sampler()
	if err != nil {
		return fmt.Errorf("move of %s: %w", size, err)
	}
	after, err := open(n, true)
	if err != nil {
		return err
	}
	changes, err := after.Preview(ctx)
	if err != nil {
		return err
	}
	*rows = append(*rows, row{what: fmt.Sprintf("engine move of %d tenants to one group", len(movers)), size: size, wall: wall, rssKiB: rss,
		resources: fmt.Sprintf("%d resources moved; next preview: %s", plan.Resources(), describe("preview", changes))})
	return nil
}

// upRatio is the line that compares the up of the largest size with the up of the smallest, per tenant count.
func upRatio(rows []row, sizes []int) []string {
	if len(sizes) < 2 {
		return nil
	}
	ups := map[string]time.Duration{}
	for _, r := range rows {
		if strings.HasPrefix(r.what, "engine up") && !strings.Contains(r.what, "adding") {
			ups[r.size] = r.wall
		}
	}
	small, large := sizes[0], sizes[len(sizes)-1]
	var ts, tl time.Duration
	for size, wall := range ups {
		if strings.HasPrefix(size, tenants(small)+",") {
			ts = wall
		}
		if strings.HasPrefix(size, tenants(large)+",") {
			tl = wall
		}
	}
	if ts == 0 || tl == 0 {
		return nil
	}
	ratio := tl.Seconds() / ts.Seconds()
	verdict := "met"
	if ratio > upRatioLimit*float64(large)/float64(small)/10 {
		verdict = "MISSED"
	}
	return []string{fmt.Sprintf("engine up, %d tenants against %d: x%.1f for x%d the tenants (limit x%d at 100 against 10): %s",
		large, small, ratio, large/small, upRatioLimit, verdict)}
}

// describe is what an operation touched: the resources of an up or destroy, the unchanged ones of a preview (a
// preview that wants changes is not the no-change preview its row stands for: the row says so).
func describe(verb string, changes environment.Changes) string {
	if !strings.HasPrefix(verb, "preview") {
		return strconv.Itoa(total(changes))
	}
	same := changes[string(apitype.OpSame)]
	s := strconv.Itoa(same) + " same"
	if changed := total(changes) - same; changed > 0 {
		s += fmt.Sprintf(", %d CHANGED", changed)
	}
	return s
}

// stateBytes is the size of every stack's state in a file backend.
func stateBytes(stateDir string) (int64, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, ".pulumi", "stacks", platform.ConfigNamespace, "*.json"))
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			return 0, err
		}
		sum += info.Size()
	}
	return sum, nil
}

// engineProcesses are the processes an engine run starts: the CLI, the kubernetes provider and the policy pack.
var engineProcesses = []string{"pulumi", "pulumi-resource-", "gpu-tenancy-pol"}

// sampleRSS samples, every 200 ms until the returned function is called, the summed resident memory of the running
// processes whose name (/proc/<pid>/comm, at most 15 characters) starts with one of names, and returns the peak.
func sampleRSS(names []string) func() int64 {
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if sum := procRSS(names); sum > max {
				max = sum
			}
			select {
			case <-done:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-peak
	}
}

// procRSS is the summed VmRSS (KiB) of the processes whose name starts with one of names.
func procRSS(names []string) int64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var sum int64
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(strings.TrimSpace(string(comm)), n) }) {
			continue
		}
		status, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				sum += kib
			}
		}
	}
	return sum
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

// localStackUp starts a control plane of its own for a part of the bench and brings the local stack up on it; done
// purges the control plane and removes its directory, whatever err is.
func localStackUp(ctx context.Context, root, part string) (cl *benchCluster, done func(), err error) {
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-"+part+"-")
	if err != nil {
		return nil, func() {}, err
	}
	cl, err = startCluster(ctx, root, filepath.Join(dir, "cluster"))
	done = func() { cl.purge(); os.RemoveAll(dir) }
	if err != nil {
		return cl, done, err
	}
	st, err := environment.Open(ctx, environment.Options{
		RepoRoot: root, Stack: "local", WorkDir: filepath.Join(dir, "work"), Backend: "file://" + filepath.Join(dir, "state"),
		Passphrase: "bench", Config: map[string]string{platform.ConfigNamespace + ":existing": "{}"},
		SecretConfig: map[string]string{platform.ConfigNamespace + ":kubeconfig": string(cl.rawKubeconfig)},
	})
	if err != nil {
		return cl, done, err
	}
	fmt.Fprintf(os.Stderr, "bench: %s: up of the local stack\n", part)
	if _, err := st.Up(ctx); err != nil {
		return cl, done, fmt.Errorf("up: %w", err)
	}
	return cl, done, nil
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
