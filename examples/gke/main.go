// Command gke is a team's own Pulumi program that builds the GPU platform on a new GKE cluster: one pool of whole
// A100s, one class of them and one tenant.
package main

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	// The GKE cluster builder and GKE's alert policies (Cloud Monitoring): without them the Platform refuses cloud
	// gke, naming the import.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/gke/gkecluster"
	_ "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

func main() { pulumi.Run(program) }

func program(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	gpus, err := platform.NewPlatform(ctx, "gpus", &platform.PlatformArgs{
		Cloud: cluster.GKE,
		GKE: gke.ClusterArgs{Project: "my-project", Zone: "us-central1-a", GPUPools: []gke.GPUPoolSpec{
			{PoolSpec: cluster.PoolSpec{Name: "a100-whole"}, MachineType: "a2-highgpu-1g", Accelerator: "nvidia-tesla-a100"}}},
		GPUClasses: []tenancy.GPUClass{{Name: "gpu-whole", Device: tenancy.WholeGPU, Product: "A100"}},
		Tenants: []platform.TenantArgs{{TenantArgs: tenancy.TenantArgs{
			Name: "vision", Classes: []string{"gpu-whole"}, GPUQuota: map[string]int{"gpu-whole": 2}}}},
		Platform: platform.VClusterPlatformArgs{PlatformArgs: vcluster.PlatformArgs{Host: "platform.example.com"}},
		Secrets:  platform.Secrets{PlatformAdminPassword: platform.Secret(cfg.Require("platformAdminPassword"))},
	})
	if err != nil {
		return err
	}
	ctx.Export("tenants", gpus.Tenants)
	return nil
}
