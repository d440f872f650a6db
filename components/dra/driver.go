// Package dra installs the NVIDIA DRA driver for GPUs on a cluster, with the prerequisites each cloud needs first:
// on GKE the COS driver installer and a quota for critical pods, on Scaleway the pre-installed GPU Operator's
// device plugin switched off.
package dra

import (
	"errors"
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv4 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v4"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Chart defaults: the chart moved to kubernetes-sigs and restarted at SemVer 0.x
// (kubernetes-sigs/dra-driver-nvidia-gpu README.md, docs/install.md; chart v0.4.0 Chart.yaml).
const (
	ChartName        = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
	ChartVersion     = "0.4.0"
	ReleaseName      = "dra-driver-nvidia-gpu"
	DefaultNamespace = naming.DriverNamespace
	// ResourceAPIVersion is the DRA API the driver publishes with; GKE serves it for GPUs from 1.34
	// (https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
	ResourceAPIVersion = "resource.k8s.io/v1"
)

// DefaultChart is the driver chart installed when DriverArgs.Chart is left empty.
var DefaultChart = helmchart.Chart{Name: ChartName, Version: ChartVersion}

// DriverArgs configure the driver. A stack's `draDriver` block decodes into the tagged fields; the rest comes from
// the cluster contract.
type DriverArgs struct {
	// Chart defaults to DefaultChart.
	Chart helmchart.Chart `json:"chart"`
	// ComputeDomains turns on the multi-node NVLink ComputeDomain controller; plain GPU allocation does not need it.
	ComputeDomains bool `json:"computeDomains"`
	// Namespace defaults to DefaultNamespace. The chart refuses "default".
	Namespace string `json:"-"`
	// Flavour selects the per-cloud prerequisites.
	Flavour cluster.Flavour `json:"-"`
	// GPUPools' taints become kubelet-plugin tolerations; their node counts size the GKE critical-pod quota.
	GPUPools []cluster.GPUPool `json:"-"`
	// DriverRoot is where the NVIDIA driver lives on the nodes (the cluster contract's DriverRoot); empty means "/".
	DriverRoot string `json:"-"`
	// Controller is where the ComputeDomain controller runs: the platform pool when the cluster has one
	// (cluster.Cluster.PlatformPlacement).
	Controller cluster.Placement `json:"-"`
}

// WithDefaults fills in the chart, the namespace and the driver root.
func (a DriverArgs) WithDefaults() DriverArgs {
	if a.Chart == (helmchart.Chart{}) {
		a.Chart = DefaultChart
	}
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	if a.DriverRoot == "" {
		a.DriverRoot = cluster.HostDriverRoot
	}
	return a
}

// Validate checks the args at path (the `draDriver` block): the chart and the namespace a stack sets, and what the
// wiring hands over from the cluster, the flavour and the pools, whose errors are reported at poolsPath (the
// `gpuPools` key): on GKE the critical-pod quota is sized from the pools, so there must be some.
func (a *DriverArgs) Validate(path, poolsPath *field.Path) field.ErrorList {
	errs := a.Chart.Validate(path.Child("chart"))
	if a.Namespace != "" {
		errs = append(errs, fieldcheck.DNSLabel(path.Child("namespace"), a.Namespace, validation.DNS1123LabelMaxLength)...)
		if a.Namespace == "default" {
			// dra-driver-nvidia-gpu v0.4.0 templates/validation.yaml (allowDefaultNamespace: false)
			errs = append(errs, field.Invalid(path.Child("namespace"), a.Namespace, "is refused by the driver chart"))
		}
	}
	if e := fieldcheck.OneOf(path.Child("flavour"), string(a.Flavour), cluster.Flavours); e != nil {
		errs = append(errs, e)
	}
	for i, p := range a.GPUPools {
		if p.Taint.Key != "" {
			errs = append(errs, p.Taint.Validate(poolsPath.Index(i).Child("taint"))...)
		}
	}
	if a.Flavour == cluster.GKE && a.gpuNodes() == 0 {
		errs = append(errs, field.Required(poolsPath, "a GPU pool: the NVIDIA DRA driver runs on GPU nodes, and GKE sizes its critical-pod quota from them"))
	}
	return errs
}

// gpuNodes counts the nodes the pools may have, at least one each.
func (a *DriverArgs) gpuNodes() int {
	nodes := 0
	for _, p := range a.GPUPools {
		nodes += max(1, p.MaxNodes)
	}
	return nodes
}

// gkeQuotaPods leaves room for one kubelet plugin per GPU node twice over (rolling updates) plus the controller
// (https://docs.cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x).
func (a *DriverArgs) gkeQuotaPods() int { return 2*a.gpuNodes() + 1 }

// Driver is the installed NVIDIA DRA driver.
type Driver struct {
	pulumi.ResourceState

	// Namespace the driver runs in.
	Namespace pulumi.StringOutput
	// Chart is the driver chart's objects, applied one by one; depend on the Driver to wait for them.
	Chart *helmv4.Chart
}

// NewDriver installs the NVIDIA DRA driver and, before it, the flavour's prerequisites.
func NewDriver(ctx *pulumi.Context, name string, args *DriverArgs, opts ...pulumi.ResourceOption) (*Driver, error) {
	if args == nil {
		return nil, errors.New("creating DRA driver: args are required")
	}
	cfg := args.WithDefaults()
	if errs := cfg.Validate(field.NewPath("draDriver"), field.NewPath("gpuPools")); len(errs) > 0 {
		return nil, fmt.Errorf("creating DRA driver %q: %w", name, errs.ToAggregate())
	}
	d := &Driver{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:dra:Driver", name, d, opts...); err != nil {
		return nil, fmt.Errorf("registering DRA driver %q: %w", name, err)
	}

	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(cfg.Namespace)},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver namespace %q: %w", cfg.Namespace, err)
	}
	before := []pulumi.Resource{ns}
	switch cfg.Flavour {
	case cluster.GKE:
		prereqs, err := gkePrerequisites(ctx, name, &cfg, d, ns)
		if err != nil {
			return nil, err
		}
		before = append(before, prereqs...)
	case cluster.Scaleway:
		patch, err := configureGPUOperator(ctx, name, d, cfg.GPUPools)
		if err != nil {
			return nil, err
		}
		before = append(before, patch)
	}

	vals, err := helmchart.Values(driverValues(&cfg))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver release: %w", err)
	}
	// Applied object by object (helm/v4 Chart) rather than installed as a Helm release, for the reasons given in
	// vcluster.NewVirtualCluster: an interrupted `up` converges and drift in the driver's objects is visible. The
	// driver chart (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0, deployments/helm/dra-driver-nvidia-gpu/templates)
	// has no hooks and no `lookup`; its `.Capabilities.APIVersions` checks (templates/_helpers.tpl, the DRA API
	// version) see the cluster's APIs, as the provider renders against the cluster (pulumi-kubernetes
	// provider/pkg/provider/helm/v4/chart.go, setKubeVersionAndAPIVersions).
	chartArgs := cfg.Chart.ChartArgs(ReleaseName, ns.Metadata.Name().Elem())
	chartArgs.Values = vals
	chart, err := helmv4.NewChart(ctx, name, chartArgs, pulumi.Parent(d), pulumi.DependsOn(before))
	if err != nil {
		return nil, fmt.Errorf("creating DRA driver chart %q: %w", ReleaseName, err)
	}

	d.Namespace = ns.Metadata.Name().Elem()
	d.Chart = chart
	if err := ctx.RegisterResourceOutputs(d, pulumi.Map{
		"namespace": d.Namespace,
		"release":   pulumi.String(ReleaseName),
	}); err != nil {
		return nil, fmt.Errorf("registering DRA driver %q outputs: %w", name, err)
	}
	return d, nil
}
