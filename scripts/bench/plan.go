package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
)

// planReference is the plan of 1,000 tenants as measured before this benchmark.
var planReference = map[int]*reference{
	1000: {wall: 5600 * time.Millisecond, rssMB: 650, resources: 14022, target: "time linear in tenants"},
}

// localStackFile is the stack every generated size starts from, relative to the project directory.
const localStackFile = "stacks/Pulumi.local.yaml"

// tenantOverrides are the config keys that give the local stack n tenants: tenant i is a copy of the local stack's
// tenant i mod k (its class, quota, pod security) named bench-NNNN, and a class granted to no tenant is marked
// platformOnly (validation refuses a class nobody owns). Values are JSON, as a program receives them.
func tenantOverrides(sc platform.StackConfig, n int) (map[string]string, error) {
	var templates []platform.TenantArgs
	var classes []tenancy.GPUClass
	if err := json.Unmarshal([]byte(sc.Values[platform.ConfigNamespace+":tenants"]), &templates); err != nil || len(templates) == 0 {
		return nil, fmt.Errorf("the local stack's tenants: %v", err)
	}
	if err := json.Unmarshal([]byte(sc.Values[platform.ConfigNamespace+":gpuClasses"]), &classes); err != nil {
		return nil, fmt.Errorf("the local stack's gpuClasses: %w", err)
	}
	granted := map[string]bool{}
	generated := make([]platform.TenantArgs, n)
	for i := range generated {
		generated[i] = templates[i%len(templates)]
		generated[i].Name = fmt.Sprintf("bench-%04d", i)
		for _, c := range generated[i].Classes {
			granted[c] = true
		}
	}
	for i := range classes {
		classes[i].PlatformOnly = !granted[classes[i].Name]
	}
	t, err := json.Marshal(generated)
	if err != nil {
		return nil, err
	}
	c, err := json.Marshal(classes)
	if err != nil {
		return nil, err
	}
	return map[string]string{platform.ConfigNamespace + ":tenants": string(t), platform.ConfigNamespace + ":gpuClasses": string(c)}, nil
}

// benchPlan runs the plan command itself (scripts/plan, built once first so no compile is timed) on the local
// stack with generated tenants, in a project directory of its own, as `make plan STACK=local` would: validate,
// run the program under mocks, write the plan document and print its tree.
func benchPlan(ctx context.Context, root string, sizes []int) ([]row, []string, error) {
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-plan-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "plan")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./scripts/plan")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("building scripts/plan: %w\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(root, localStackFile))
	if err != nil {
		return nil, nil, err
	}
	var stackFile struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(raw, &stackFile); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", localStackFile, err)
	}
	base, err := platform.ReadStackFile(filepath.Join(root, localStackFile))
	if err != nil {
		return nil, nil, err
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(filepath.Join(project, "stacks"), 0o755); err != nil {
		return nil, nil, err
	}

	rows := make([]row, 0, len(sizes))
	counts := make([]int, 0, len(sizes))
	for _, n := range sizes {
		overrides, err := tenantOverrides(base, n)
		if err != nil {
			return rows, nil, err
		}
		for k, v := range overrides {
			var value any
			if err := json.Unmarshal([]byte(v), &value); err != nil {
				return rows, nil, err
			}
			stackFile.Config[k] = value
		}
		doc, err := yaml.Marshal(stackFile)
		if err != nil {
			return rows, nil, err
		}
		if err := os.WriteFile(filepath.Join(project, localStackFile), doc, 0o600); err != nil {
			return rows, nil, err
		}

		fmt.Fprintf(os.Stderr, "bench: plan of %s\n", tenants(n))
		cmd := exec.CommandContext(ctx, bin, "-root", project, "local")
		wall, rss, err := measure(cmd)
		if err != nil {
			return rows, nil, err
		}
		count, err := resourceCount(filepath.Join(project, "stacks", "plans", "local.json"))
		if err != nil {
			return rows, nil, err
		}
		rows = append(rows, row{what: "plan (mocks)", size: tenants(n), wall: wall, rssKiB: rss,
			resources: strconv.Itoa(count), ref: planReference[n]})
		counts = append(counts, count)
	}
	// Linear: each figure grows by the tenants' factor; the fixed part (platform resources, the runtime) keeps
	// small sizes below it.
	var ratios []string
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		ratios = append(ratios, fmt.Sprintf("plan (mocks), %s -> %s (x%.1f tenants): wall x%.2f, peak RSS x%.2f, resources x%.2f",
			a.size, b.size, float64(sizes[i])/float64(sizes[i-1]), b.wall.Seconds()/a.wall.Seconds(),
			float64(b.rssKiB)/float64(a.rssKiB), float64(counts[i])/float64(counts[i-1])))
	}
	return rows, ratios, nil
}

// resourceCount is the number of resources in a plan document.
func resourceCount(file string) (int, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return len(doc.Resources), nil
}
