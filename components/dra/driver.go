// Package dra installs the NVIDIA DRA driver for GPUs on a cluster, with the prerequisites each cloud needs first:
// on GKE the COS driver installer and a quota for critical pods, on Scaleway the pre-installed GPU Operator's
// device plugin switched off.
package dra

import (
	"errors"
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Chart defaults: the chart moved to kubernetes-sigs and restarted at SemVer 0.x (gpu-facts 1.1, gotcha 1).
const (
	ChartName        = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
	ChartVersion     = "0.4.0"
	ReleaseName      = "dra-driver-nvidia-gpu"
	DefaultNamespace = "dra-driver-nvidia-gpu"
	// ResourceAPIVersion is the DRA API the driver publishes with; GKE 1.34+ serves it for GPUs (gpu-facts 2.1).
	ResourceAPIVersion = "resource.k8s.io/v1"
)

// DefaultChart is the driver chart installed when DriverArgs.Chart is left empty.
var DefaultChart = helmchart.Chart{Name: ChartName, Version: ChartVersion}

// Where each flavour's NVIDIA driver lives on the node (gpu-facts 1.2; dra-driver-nvidia-gpu 0.4.0 values.yaml).
const (
	// GKEDriverRoot is where the COS driver installer puts the driver.
	GKEDriverRoot = "/home/kubernetes/bin/nvidia"
	// ScalewayDriverRoot is where the GPU Operator's driver container exposes the driver.
	ScalewayDriverRoot = "/run/nvidia/driver"
	// HostDriverRoot is the chart default: a driver installed on the host itself.
	HostDriverRoot = "/"
)

// DriverArgs configure the driver.
type DriverArgs struct {
	// Flavour selects the per-cloud driver root and prerequisites.
	Flavour cluster.Flavour
	// Chart defaults to DefaultChart.
	Chart helmchart.Chart
	// Namespace defaults to DefaultNamespace. The chart refuses "default".
	Namespace string
	// GPUPools' taints become kubelet-plugin tolerations.
	GPUPools []cluster.GPUPool
	// ComputeDomains turns on the multi-node NVLink ComputeDomain controller; plain GPU allocation does not need it.
	ComputeDomains bool
	// MaxGPUNodes sizes the GKE critical-pod quota; at least one node per GPU pool is assumed.
	MaxGPUNodes int
	// DriverRoot overrides the flavour's driver root, for existing clusters whose driver is not on the host root.
	DriverRoot string
}

// Driver is the installed NVIDIA DRA driver.
type Driver struct {
	pulumi.ResourceState

	// Namespace the driver runs in.
	Namespace pulumi.StringOutput
	// Release is the driver's Helm release; depend on it to wait for the driver's DeviceClasses.
	Release *helmv3.Release
}

// resolved is DriverArgs with defaults applied and checked.
type resolved struct {
	flavour        cluster.Flavour
	chart          helmchart.Chart
	namespace      string
	pools          []cluster.GPUPool
	computeDomains bool
	driverRoot     string
	gkeQuotaPods   int
}

var taintEffects = map[string]bool{"NoSchedule": true, "PreferNoSchedule": true, "NoExecute": true}

func (a *DriverArgs) resolve() (*resolved, error) {
	cfg := &resolved{
		flavour: a.Flavour, chart: a.Chart, namespace: a.Namespace, pools: a.GPUPools,
		computeDomains: a.ComputeDomains, driverRoot: a.DriverRoot,
	}
	if cfg.chart == (helmchart.Chart{}) {
		cfg.chart = DefaultChart
	}
	if cfg.namespace == "" {
		cfg.namespace = DefaultNamespace
	}
	var errs []error
	for _, msg := range validation.IsDNS1123Label(cfg.namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: %s", cfg.namespace, msg))
	}
	if cfg.namespace == "default" {
		// dra-driver-nvidia-gpu 0.4.0 templates/validation.yaml (allowDefaultNamespace: false)
		errs = append(errs, errors.New(`namespace "default" is refused by the driver chart`))
	}
	flavourRoots := map[cluster.Flavour]string{
		cluster.GKE: GKEDriverRoot, cluster.Scaleway: ScalewayDriverRoot, cluster.Existing: HostDriverRoot,
	}
	root, ok := flavourRoots[a.Flavour]
	if !ok {
		errs = append(errs, fmt.Errorf("flavour %q is not one of %q, %q, %q", a.Flavour, cluster.GKE, cluster.Scaleway, cluster.Existing))
	}
	if cfg.driverRoot == "" {
		cfg.driverRoot = root
	}
	for _, p := range a.GPUPools {
		if p.Taint.Key != "" && !taintEffects[p.Taint.Effect] {
			errs = append(errs, fmt.Errorf("GPU pool %q: taint effect %q is not NoSchedule, PreferNoSchedule or NoExecute", p.Name, p.Taint.Effect))
		}
	}
	if a.MaxGPUNodes < 0 {
		errs = append(errs, fmt.Errorf("MaxGPUNodes is %d, must not be negative", a.MaxGPUNodes))
	}
	if a.Flavour == cluster.GKE {
		nodes := max(a.MaxGPUNodes, len(a.GPUPools))
		if nodes == 0 {
			errs = append(errs, errors.New("GKE needs MaxGPUNodes or GPU pools to size the critical-pod quota"))
		}
		// Room for one kubelet plugin per GPU node twice over (rolling updates) plus the controller (gpu-facts 1.5).
		cfg.gkeQuotaPods = 2*nodes + 1
	}
	return cfg, errors.Join(errs...)
}

// NewDriver installs the NVIDIA DRA driver and, before it, the flavour's prerequisites.
func NewDriver(ctx *pulumi.Context, name string, args *DriverArgs, opts ...pulumi.ResourceOption) (*Driver, error) {
	if args == nil {
		return nil, errors.New("creating DRA driver: args are required")
	}
	cfg, err := args.resolve()
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver %q: %w", name, err)
	}
	d := &Driver{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:dra:Driver", name, d, opts...); err != nil {
		return nil, fmt.Errorf("registering DRA driver %q: %w", name, err)
	}

	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(cfg.namespace)},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver namespace %q: %w", cfg.namespace, err)
	}
	before := []pulumi.Resource{ns}
	switch cfg.flavour {
	case cluster.GKE:
		prereqs, err := gkePrerequisites(ctx, name, cfg, d, ns)
		if err != nil {
			return nil, err
		}
		before = append(before, prereqs...)
	case cluster.Scaleway:
		patch, err := disableGPUOperatorDevicePlugin(ctx, name, d)
		if err != nil {
			return nil, err
		}
		before = append(before, patch)
	}

	vals, err := helmchart.Values(driverValues(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver release: %w", err)
	}
	releaseArgs := cfg.chart.ReleaseArgs(ReleaseName, cfg.namespace)
	releaseArgs.Values = vals
	release, err := helmv3.NewRelease(ctx, name, releaseArgs, pulumi.Parent(d), pulumi.DependsOn(before))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver release %q: %w", ReleaseName, err)
	}

	d.Namespace = ns.Metadata.Name().Elem()
	d.Release = release
	if err := ctx.RegisterResourceOutputs(d, pulumi.Map{
		"namespace": d.Namespace,
		"release":   release.Name,
	}); err != nil {
		return nil, fmt.Errorf("registering DRA driver %q outputs: %w", name, err)
	}
	return d, nil
}
