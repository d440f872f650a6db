// Package gpus adds a GPU tenancy platform to a Pulumi program: one Platform component on an existing cluster whose
// GPU nodes carry the pool labels, a class of whole A100s and one of 1g.5gb slices, and two tenants. The DRA driver
// and vCluster Platform are left out (false), for a cluster that runs them already.
//
// Config of the program: kubeconfig (secret, required); vclusterChart, a local copy of the vCluster chart (default
// the chart from charts.loft.sh); awaitVClusters (default true).
package gpus

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

// Program is the whole program.
func Program(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	await, err := cfg.TryBool("awaitVClusters")
	if err != nil {
		await = true
	}
	gpus, err := platform.NewPlatform(ctx, "gpus", &platform.PlatformArgs{
		Cloud: cluster.Existing,
		Existing: cluster.ExistingArgs{GPUPools: []cluster.ExistingPoolSpec{
			{PoolSpec: cluster.PoolSpec{Name: "a100-whole"}, Model: "a100-40gb"},
			{PoolSpec: cluster.PoolSpec{Name: "a100-mig", Partition: "1g.5gb"}, Model: "a100-40gb"},
		}},
		GPUClasses: []tenancy.GPUClass{
			{Name: "gpu-whole", Device: tenancy.WholeGPU, Product: "A100"},
			{Name: "gpu-slice", Device: tenancy.MIG, MIGProfile: "1g.5gb", Product: "A100"},
		},
		Tenants: []platform.TenantArgs{
			{TenantArgs: tenancy.TenantArgs{Name: "vision", Classes: []string{"gpu-whole"}, GPUQuota: map[string]int{"gpu-whole": 2}}},
			{TenantArgs: tenancy.TenantArgs{Name: "speech", Classes: []string{"gpu-slice"}, GPUQuota: map[string]int{"gpu-slice": 4}}},
		},
		DRADriver: platform.DRADriverArgs{Enabled: pulumi.BoolRef(false)},
		Platform:  platform.VClusterPlatformArgs{Enabled: pulumi.BoolRef(false)},
		VCluster:  vcluster.Settings{Chart: helmchart.Chart{Path: cfg.Get("vclusterChart")}, Await: &await},
		Secrets:   platform.Secrets{Kubeconfig: platform.Secret(cfg.Require("kubeconfig"))},
	})
	if err != nil {
		return err
	}
	ctx.Export("tenants", gpus.Tenants)
	return nil
}
