// Command capacity benchmarks `gpu-tenancy capacity` on a large simulated inventory: it fills an API server (the
// local control plane of scripts/local-cluster.sh) with GPU nodes' ResourceSlices, tenants, classes, quotas and
// claims, some allocated, then runs the built CLI with `-o json` and prints its wall time and peak RSS, and removes
// everything it created. It prints figures and asserts nothing about them.
//
//	go run ./scripts/bench/capacity --kubeconfig .tools/local-cluster/kubeconfig
//
// Every object it creates carries the label gpu-tenancy.io/bench=capacity; a run first removes what an interrupted
// run left behind.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

const (
	benchLabel = "gpu-tenancy.io/bench"
	benchValue = "capacity"
	selector   = benchLabel + "=" + benchValue
	wholeClass = "bench-gpu-whole"
	sliceClass = "bench-gpu-slice"
	// Every fourth node is a MIG node; the others carry whole GPUs.
	migEvery = 4
)

// The catalog's selectors as components/tenancy writes them.
const (
	wholeCEL = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && ` +
		`device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('(^|[^a-z0-9])a100([^a-z0-9]|$)')`
	sliceCEL = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && ` +
		`device.attributes['gpu.nvidia.com'].profile == '1g.5gb' && ` +
		`device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('(^|[^a-z0-9])a100([^a-z0-9]|$)')`
)

type config struct {
	kubeconfig, cli                   string
	nodes, devices, claims, allocated int
	tenants, runs, workers            int
	keep                              bool
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the API server to fill (required)")
	flag.StringVar(&c.cli, "cli", "", "gpu-tenancy binary to measure (default: build ./cmd/gpu-tenancy)")
	flag.IntVar(&c.nodes, "nodes", 1000, "GPU nodes, one ResourceSlice each")
	flag.IntVar(&c.devices, "devices", 8, "devices per node")
	flag.IntVar(&c.claims, "claims", 10000, "ResourceClaims, spread over the tenants")
	flag.IntVar(&c.allocated, "allocated", 4000, "claims given an allocation through their status")
	flag.IntVar(&c.tenants, "tenants", 10, "tenant namespaces")
	flag.IntVar(&c.runs, "runs", 3, "measured runs of the CLI")
	flag.IntVar(&c.workers, "workers", 32, "concurrent API requests while filling")
	flag.BoolVar(&c.keep, "keep", false, "leave the inventory in place")
	flag.Parse()
	if c.kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "capacity: --kubeconfig is required")
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", c.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	bin := c.cli
	if bin == "" {
		dir, err := os.MkdirTemp("", "bench-capacity-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "gpu-tenancy")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/gpu-tenancy/gpu-tenancy/cmd/gpu-tenancy")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building the CLI: %w\n%s", err, out)
		}
	}

	if err := cleanup(context.Background(), cs); err != nil {
		return fmt.Errorf("removing an earlier run's objects: %w", err)
	}
	if !c.keep {
		defer func() {
			if err := cleanup(context.Background(), cs); err != nil {
				fmt.Fprintln(os.Stderr, "capacity: cleanup:", err)
			}
		}()
	}
	start := time.Now()
	if err := populate(ctx, cs, c); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "populated in %s\n", time.Since(start).Round(time.Second))

	fmt.Printf("%-6s %-8s %-7s %-10s %-4s %-9s %-9s %-12s %s\n", "NODES", "DEVICES", "CLAIMS", "ALLOCATED", "RUN", "WALL", "PEAK RSS", "CLASS EXIST", "CLASS ALLOCATED")
	for i := 1; i <= c.runs; i++ {
		m, err := measure(ctx, bin, c.kubeconfig)
		if err != nil {
			return err
		}
		fmt.Printf("%-6d %-8d %-7d %-10d %-4d %-9s %-9s %-12d %d\n", c.nodes, c.nodes*c.devices, c.claims, c.allocated, i,
			m.wall.Round(time.Millisecond), fmt.Sprintf("%d MB", m.maxRSSKiB/1024), m.exist, m.allocated)
	}
	return nil
}

func tenantName(i int) string { return fmt.Sprintf("bench-%02d", i) }

// tenantClass gives even tenants whole GPUs and odd tenants MIG devices.
func tenantClass(i int) string {
	if i%2 == 0 {
		return wholeClass
	}
	return sliceClass
}

func meta(name string, labels map[string]string) metav1.ObjectMeta {
	all := map[string]string{benchLabel: benchValue}
	for k, v := range labels {
		all[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: all}
}

func populate(ctx context.Context, cs kubernetes.Interface, c config) error {
	grants := map[string]map[string]string{wholeClass: {naming.ManagedByLabel: naming.ManagedBy}, sliceClass: {naming.ManagedByLabel: naming.ManagedBy}}
	for i := range c.tenants {
		t := tenantName(i)
		grants[tenantClass(i)][naming.ClassTenantLabel(t)] = "true"
		ns := &corev1.Namespace{ObjectMeta: meta(naming.Namespace(t), map[string]string{naming.TenantNamespaceLabel: t})}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	for name, cel := range map[string]string{wholeClass: wholeCEL, sliceClass: sliceCEL} {
		dc := &resourcev1.DeviceClass{
			ObjectMeta: meta(name, grants[name]),
			Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: cel}}}},
		}
		if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("DeviceClass %s: %w", name, err)
		}
	}

	err := parallel(ctx, c.workers, c.nodes, "ResourceSlices", func(ctx context.Context, i int) error {
		_, err := cs.ResourceV1().ResourceSlices().Create(ctx, nodeSlice(i, c.devices), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}

	// Devices to allocate, per class, in node order.
	free := map[string][]resourcev1.DeviceRequestAllocationResult{}
	for n := range c.nodes {
		for d := range c.devices {
			class, dev := wholeClass, fmt.Sprintf("gpu-%d", d)
			if n%migEvery == 0 {
				class, dev = sliceClass, migName(d)
			}
			free[class] = append(free[class], resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: naming.Driver, Pool: nodeName(n), Device: dev})
		}
	}
	var allocated atomic.Int64
	var mu sync.Mutex
	err = parallel(ctx, c.workers, c.claims, "ResourceClaims", func(ctx context.Context, i int) error {
		tenant := i % c.tenants
		class := tenantClass(tenant)
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: meta(fmt.Sprintf("claim-%05d", i), nil),
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
			}}}},
		}
		claim.Namespace = naming.Namespace(tenantName(tenant))
		created, err := cs.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if allocated.Add(1) > int64(c.allocated) {
			return nil
		}
		mu.Lock()
		if len(free[class]) == 0 {
			mu.Unlock()
			return nil
		}
		result := free[class][0]
		free[class] = free[class][1:]
		mu.Unlock()
		created.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{result},
		}}
		_, err = cs.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}

	// Quotas last: the quota controller then counts the claims once instead of admission updating them per claim.
	for i := range c.tenants {
		ns := naming.Namespace(tenantName(i))
		q := &corev1.ResourceQuota{
			ObjectMeta: meta(naming.TenantQuota, nil),
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				corev1.ResourceName(naming.DeviceQuotaKey(tenantClass(i))): *resource.NewQuantity(int64(c.claims), resource.DecimalSI),
			}},
		}
		if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("quota in %s: %w", ns, err)
		}
	}
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("bench-gpu-%04d", i) }

func migName(d int) string { return fmt.Sprintf("gpu-%d-mig-1g5gb-19-%d", d/4, d%4) }

// nodeSlice is the NVIDIA driver's slice for one node, with the attributes the driver publishes (internal/sim/simhw/hardware).
func nodeSlice(n, devices int) *resourcev1.ResourceSlice {
	s := func(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(v)} }
	ver := func(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: ptr.To(v)} }
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: meta(nodeName(n)+"-gpu.nvidia.com", nil),
		Spec: resourcev1.ResourceSliceSpec{
			Driver: naming.Driver, NodeName: ptr.To(nodeName(n)),
			Pool: resourcev1.ResourcePool{Name: nodeName(n), Generation: 1, ResourceSliceCount: 1},
		},
	}
	for d := range devices {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"productName": s("NVIDIA A100-SXM4-40GB"), "brand": s("Nvidia"), "architecture": s("Ampere"),
			"cudaComputeCapability": ver("8.0.0"), "driverVersion": ver("580.126.20"), "cudaDriverVersion": ver("13.0.0"),
			"resource.kubernetes.io/pcieRoot": s("pci0000:00"),
		}
		device := resourcev1.Device{Attributes: attrs, Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}}
		if n%migEvery == 0 {
			device.Name = migName(d)
			attrs["type"], attrs["profile"] = s("mig"), s("1g.5gb")
			attrs["uuid"] = s(fmt.Sprintf("MIG-%08d-%04d", n, d))
			attrs["parentUUID"] = s(fmt.Sprintf("GPU-%08d-%04d", n, d/4))
			device.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("4864Mi")}
			device.Capacity["multiprocessors"] = resourcev1.DeviceCapacity{Value: resource.MustParse("14")}
		} else {
			device.Name = fmt.Sprintf("gpu-%d", d)
			attrs["type"] = s("gpu")
			attrs["uuid"] = s(fmt.Sprintf("GPU-%08d-%04d", n, d))
			device.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("40Gi")}
		}
		attrs["resource.kubernetes.io/pciBusID"] = s(fmt.Sprintf("0000:%02x:00.0", d+1))
		slice.Spec.Devices = append(slice.Spec.Devices, device)
	}
	return slice
}

// parallel runs f for 0..n-1 on workers goroutines, showing progress, and returns the first error.
func parallel(ctx context.Context, workers, n int, what string, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(fmt.Errorf("%s #%d: %w", what, i, err))
					return
				}
				if d := done.Add(1); d%1000 == 0 {
					fmt.Fprintf(os.Stderr, "created %d/%d %s\n", d, n, what)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

type measurement struct {
	wall             time.Duration
	maxRSSKiB        int64
	exist, allocated int
}

// measure runs the CLI once; the kernel's rusage of the child gives its peak resident set.
func measure(ctx context.Context, bin, kubeconfig string) (measurement, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "capacity", "-o", "json", "--kubeconfig", kubeconfig)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	m := measurement{wall: time.Since(start)}
	if err != nil {
		return m, fmt.Errorf("gpu-tenancy capacity: %w: %s", err, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.maxRSSKiB = ru.Maxrss
	}
	var rep struct {
		Classes []struct {
			Name      string `json:"name"`
			Exist     int    `json:"exist"`
			Allocated int    `json:"allocated"`
		} `json:"classes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return m, fmt.Errorf("decoding the report: %w", err)
	}
	for _, c := range rep.Classes {
		if c.Name == wholeClass || c.Name == sliceClass {
			m.exist += c.Exist
			m.allocated += c.Allocated
		}
	}
	return m, nil
}

// cleanup deletes everything labelled as this benchmark's and waits for the namespaces to go.
func cleanup(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ListOptions{LabelSelector: selector}
	nss, err := cs.CoreV1().Namespaces().List(ctx, opts)
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		// Claims first, in bulk: the namespace controller would delete them one by one.
		if err := cs.ResourceV1().ResourceClaims(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting claims in %s: %w", ns.Name, err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
	}
	if err := cs.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, opts); err != nil {
		return fmt.Errorf("deleting ResourceSlices: %w", err)
	}
	if err := cs.ResourceV1().DeviceClasses().DeleteCollection(ctx, metav1.DeleteOptions{}, opts); err != nil {
		return fmt.Errorf("deleting DeviceClasses: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		left, err := cs.CoreV1().Namespaces().List(ctx, opts)
		return err == nil && len(left.Items) == 0, err
	})
}
