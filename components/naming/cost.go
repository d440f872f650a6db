package naming

import (
	"regexp"
	"strings"
)

// Keys of the cost labels a cloud cluster and its pools carry, as GKE resource labels and as Scaleway `key=value`
// tags, so that the cloud bill breaks GPU spend down by stack, pool and GPU model (components/gke labels.go,
// components/scaleway tags.go; the policy pack's cost-label advisory checks them).
const (
	// CostStackKey's value is the Pulumi project and stack (CostStackValue).
	CostStackKey = "gpu-tenancy-stack"
	// CostPoolKey's value is the node pool's name; the system pool's is CostSystemPool, the tenant pool's CostTenantPool.
	CostPoolKey = "gpu-tenancy-pool"
	// CostGPUModelKey's value is the pool's GPU model key (such as a100-40gb or l4); GPU pools only.
	CostGPUModelKey = "gpu-tenancy-gpu-model"
	// CostSystemPool is the system pool's CostPoolKey value.
	CostSystemPool = "system"
	// CostTenantPool is the tenant pool's CostPoolKey value.
	CostTenantPool = "tenants"
)

// ReservedPoolNames are the names of the pools without GPUs, which no GPU pool may take: each pool's name is its
// cost label's value and a part of its resource's name.
var ReservedPoolNames = []string{CostSystemPool, CostTenantPool}

// maxCostValue is the longest value both clouds take: GCP label values and Kubernetes label values (which Scaleway's
// tags become on the nodes) are at most 63 characters.
const maxCostValue = 63

var notCostValue = regexp.MustCompile(`[^a-z0-9_-]+`)

// CostStackValue is CostStackKey's value for a Pulumi project and stack, the same on every cloud: lower-cased, every
// run of characters other than letters, digits, `_` and `-` (Pulumi allows `.` and upper case in names) replaced by
// `_`, cut to 63 characters and trimmed of `_` and `-` at either end, so it is both a GCP label value
// (https://cloud.google.com/compute/docs/labeling-resources#requirements) and a Kubernetes label value. The stack is
// no config key, so it is made valid rather than refused.
func CostStackValue(project, stack string) string {
	v := notCostValue.ReplaceAllString(strings.ToLower(project+"_"+stack), "_")
	if len(v) > maxCostValue {
		v = v[:maxCostValue]
	}
	return strings.Trim(v, "_-")
}

// CostLabels are the cost labels of a cluster (pool empty) or of a pool (gpuModel empty for the system pool).
func CostLabels(stack, pool, gpuModel string) map[string]string {
	l := map[string]string{CostStackKey: stack}
	if pool != "" {
		l[CostPoolKey] = pool
	}
	if gpuModel != "" {
		l[CostGPUModelKey] = gpuModel
	}
	return l
}
