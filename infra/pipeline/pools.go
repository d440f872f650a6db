package pipeline

import "github.com/gpu-tenancy/gpu-tenancy/components/cluster"

// gkePools describes what each configured GKE pool offers; unknown accelerators are skipped (validation reports them).
func gkePools(c *Config) []cluster.GPUPool {
	var out []cluster.GPUPool
	for _, p := range c.GPUPools {
		if acc, ok := gkeAccelerators[p.Accelerator]; ok {
			out = append(out, describePool(p, acc.model, gkeGPUCount(p.MachineType)))
		}
	}
	return out
}

func scalewayPools(c *Config) []cluster.GPUPool {
	var out []cluster.GPUPool
	for _, p := range c.GPUPools {
		if nt, ok := scalewayNodeTypes[p.NodeType]; ok {
			out = append(out, describePool(p, nt.model, nt.gpus))
		}
	}
	return out
}

func existingPools(c *Config) []cluster.GPUPool {
	var out []cluster.GPUPool
	for _, p := range c.GPUPools {
		if m, ok := cluster.ModelByKey(p.Model); ok {
			out = append(out, describePool(p, m, max(1, p.GPUsPerNode)))
		}
	}
	return out
}

func describePool(p GPUPoolConfig, model cluster.GPUModel, gpus int) cluster.GPUPool {
	return cluster.GPUPool{
		Name: p.Name, Model: model, GPUsPerNode: gpus, MIGProfile: p.Partition,
		Labels: cluster.GPUNodeLabels(p.Name), Taint: cluster.GPUTaint,
	}
}
