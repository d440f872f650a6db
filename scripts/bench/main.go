// Command bench measures, side by side in one run, the figures that matter when a platform grows, and
// prints one table:
//
//   - plan: the offline plan (the whole program under mocks, as `make plan` runs it) of the local stack with 10, 100
//     and 1,000 generated tenants: wall time, peak RSS of the process that makes it, resources;
//   - engine: the real Pulumi engine and kubernetes provider on a local control plane of its own with 10, 40 and 100
//     tenants in tenant groups of 10 (engine.Environment): `up`, a no-change `preview` (with its refresh, and without
//     it), one tenant added at the largest size (as `-changed-only` runs it, then as a plain up), and `destroy`, each
//     timed, with the resources they touch, the peak memory of the engine's processes and the size of the state;
//   - admission: one tenant's claim create as its syncer (p50, p99) with 10, 100 and 1,000 tenants' guards on the
//     cluster, with one entitlement policy for all and, for comparison, one per tenant;
//   - fairness: one tenant's syncer token floods the API server of a control plane of its own while the other
//     tenant's syncer and the DRA driver are timed (p50, p99), with and without the platform's FlowSchemas;
//   - nodes: two real nodes (scripts/local-nodes.sh) from start to Ready, with their processes' memory, and a GPU pod
//     from create to Running on one of them (needs root);
//   - build: `go build ./infra` cold (empty build cache) and warm (one project file changed) against the floor, a
//     program that only imports the SDK packages the project imports.
//
// Beside each figure that has one stands its reference, measured on a 2-core machine before this benchmark existed
// (docs/benchmarks.md); below the table, one line per ratio.
// It prints figures and asserts nothing about them: these machines are shared and noisy.
//
//	go run ./scripts/bench                          everything (`make bench`; needs `make tools`)
//	go run ./scripts/bench -only plan,engine        a subset of plan, engine, layouts, admission, fairness, nodes, build (cold builds take minutes)
//	go run ./scripts/bench -plan-tenants 10,100     other sizes
//
// Run it from the project directory. The control plane listens on ports of its own (clusterEnv: 13790, 13800,
// 16443, 13257, 13259), and it, the engine's state and the build caches live in temporary directories removed at the
// end.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
)

// parts in the order they run and print.
var parts = []string{"plan", "engine", "layouts", "admission", "fairness", "nodes", "build"}

// row is one line of the table; a zero rssKiB or an empty resources prints as "-".
type row struct {
	what, size string
	wall       time.Duration
	rssKiB     int64
	resources  string
	ref        *reference
}

// reference is a figure measured on a 2-core machine before this benchmark existed, or a limit the figure must stay
// within; zero fields were not given.
type reference struct {
	wall      time.Duration
	rssMB     int64
	resources int
	// target is what the measured figure should stay within, printed with its ratio.
	target string
	// limit is a wall time the figure must stay within, with no earlier measurement to compare it with.
	limit time.Duration
}

func (r reference) String() string {
	if r.wall == 0 {
		return fmt.Sprintf("limit %.0f s", r.limit.Seconds())
	}
	s := fmt.Sprintf("%.1f s", r.wall.Seconds())
	if r.rssMB > 0 {
		s += fmt.Sprintf(", %d MB", r.rssMB)
	}
	if r.resources > 0 {
		s += fmt.Sprintf(", %d resources", r.resources)
	}
	return s
}

func main() {
	// The bench runs the environments as gpu-tenancy does.
	environment.UseEngineGC()
	only := flag.String("only", strings.Join(parts, ","), "comma-separated parts to run: "+strings.Join(parts, ", "))
	planSizes := flag.String("plan-tenants", "10,100,1000", "tenant counts of the offline plan")
	engineSizes := flag.String("engine-tenants", "10,40,100", "tenant counts of the engine runs")
	groupSize := flag.Int("engine-group-size", 10, "tenants per tenant group of the engine runs (0: one stack)")
	flood := flag.Bool("flood", false, "be the fairness part's flooding process (it reads what to flood on stdin)")
	flag.Parse()
	if *flood {
		if err := floodChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: flood:", err)
			os.Exit(1)
		}
		return
	}
	selected := strings.Split(*only, ",")
	for _, p := range selected {
		if !slices.Contains(parts, p) {
			fmt.Fprintf(os.Stderr, "bench: unknown part %q in -only: %s\n", p, strings.Join(parts, ", "))
			os.Exit(2)
		}
	}
	plans, err1 := sizes(*planSizes)
	engines, err2 := sizes(*engineSizes)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "bench: tenant counts are positive integers separated by commas")
		os.Exit(2)
	}
	if err := run(selected, plans, engines, *groupSize); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func sizes(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad tenant count %q", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(selected []string, planSizes, engineSizes []int, groupSize int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	var rows []row
	var ratios, sections, extra []string
	for _, part := range parts {
		if !slices.Contains(selected, part) {
			continue
		}
		var r []row
		var l []string
		switch part {
		case "plan":
			r, l, err = benchPlan(ctx, root, planSizes)
		case "engine":
			r, l, err = benchEngine(ctx, root, engineSizes, layout{groupSize: groupSize, grow: true})
		case "layouts":
			r, err = benchLayouts(ctx, root, engineSizes[len(engineSizes)-1], groupSize)
		case "admission":
			extra, err = benchAdmission(ctx, root)
			sections = append(sections, extra...)
		case "fairness":
			extra, err = benchFairness(ctx, root)
			sections = append(sections, extra...)
		case "nodes":
			r, err = benchNodes(ctx, root)
		case "build":
			r, l, err = benchBuild(ctx, root)
		}
		rows, ratios = append(rows, r...), append(ratios, l...)
		if err != nil {
			// What was measured before still prints: a full run takes many minutes.
			err = fmt.Errorf("%s: %w", part, err)
			break
		}
	}
	if len(rows) > 0 {
		if perr := printTable(rows, ratios); perr != nil {
			return perr
		}
	}
	for _, l := range sections {
		fmt.Println(l)
	}
	return err
}

// printTable writes the table, then one line per ratio.
func printTable(rows []row, ratios []string) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "WHAT\tSIZE\tWALL\tPEAK RSS\tRESOURCES\tREFERENCE (2 cores)")
	for _, r := range rows {
		rss, res, ref := "-", "-", ""
		if r.rssKiB > 0 {
			rss = fmt.Sprintf("%d MB", r.rssKiB/1024)
		}
		if r.resources != "" {
			res = r.resources
		}
		if r.ref != nil {
			ref = r.ref.String()
			ratios = append(ratios, vsReference(r))
		}
		fmt.Fprintf(w, "%s\t%s\t%.2f s\t%s\t%s\t%s\n", r.what, r.size, r.wall.Seconds(), rss, res, ref)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println()
	for _, l := range ratios {
		fmt.Println(l)
	}
	return nil
}

func vsReference(r row) string {
	if r.ref.wall == 0 {
		verdict := "met"
		if r.wall > r.ref.limit {
			verdict = fmt.Sprintf("MISSED by %.0f s (x%.2f)", (r.wall - r.ref.limit).Seconds(), r.wall.Seconds()/r.ref.limit.Seconds())
		}
		return fmt.Sprintf("%s, %s: %.1f s against a limit of %.0f s: %s", r.what, r.size, r.wall.Seconds(), r.ref.limit.Seconds(), verdict)
	}
	s := fmt.Sprintf("%s, %s, vs reference: wall x%.2f", r.what, r.size, r.wall.Seconds()/r.ref.wall.Seconds())
	if r.ref.rssMB > 0 && r.rssKiB > 0 {
		s += fmt.Sprintf(", peak RSS x%.2f", float64(r.rssKiB)/1024/float64(r.ref.rssMB))
	}
	if r.ref.target != "" {
		s += " (target: " + r.ref.target + ")"
	}
	return s
}

func tenants(n int) string {
	if n == 1 {
		return "1 tenant"
	}
	return fmt.Sprintf("%d tenants", n)
}

// measure runs cmd to its end and returns its wall time and peak resident set. The kernel's rusage of a waited-for
// child also covers the descendants that child waited for, so for `go build` it is the largest compile or link.
func measure(cmd *exec.Cmd) (time.Duration, int64, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return wall, 0, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return wall, 0, fmt.Errorf("%s: no rusage on this system", cmd.Args[0])
	}
	return wall, ru.Maxrss, nil
}
