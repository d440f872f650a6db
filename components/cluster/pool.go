package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeBounds are an autoscaled pool's node count bounds as config spells them; unset bounds take the pool kind's
// defaults (see Or).
type NodeBounds struct {
	MinNodes *int `json:"minNodes"`
	MaxNodes *int `json:"maxNodes"`
}

// Or returns the bounds, with minNodes and maxNodes where they are unset.
func (b NodeBounds) Or(minNodes, maxNodes int) (int, int) {
	if b.MinNodes != nil {
		minNodes = *b.MinNodes
	}
	if b.MaxNodes != nil {
		maxNodes = *b.MaxNodes
	}
	return minNodes, maxNodes
}

// PoolSpec is what every flavour's GPU pool has in common, as a stack's `gpuPools[]` entry spells it; each flavour
// embeds it in its own pool spec.
type PoolSpec struct {
	// Name names the pool and its nodes' gpu-tenancy.io/pool label.
	Name string `json:"name"`
	// Partition is the MIG profile the pool's GPUs are split into, or "" for whole GPUs.
	Partition string `json:"partition"`
	// Tenant dedicates the pool to one tenant: its nodes carry DedicatedTaint(Tenant), which only that tenant's pods
	// may tolerate, and that tenant's pods run on its dedicated pools only. "" shares the pool among every tenant.
	Tenant string `json:"tenant"`
	// MinNodes defaults to 0 (GPU pools scale to zero), MaxNodes to max(1, MinNodes).
	NodeBounds
}

// Dedicate gives pool, a flavour's contract for this spec, the spec's tenant: the label its nodes carry for it.
func (p PoolSpec) Dedicate(pool GPUPool) GPUPool {
	if p.Tenant != "" {
		pool.Tenant = p.Tenant
		pool.Labels[naming.DedicatedNodeKey] = p.Tenant
	}
	return pool
}

// DedicatedTaint is the taint of the nodes of the pools dedicated to tenant.
func DedicatedTaint(tenant string) Taint {
	return Taint{Key: naming.DedicatedNodeKey, Value: tenant, Effect: "NoSchedule"}
}

// Min and Max are the node bounds after defaults.
func (p PoolSpec) Min() int { n, _ := p.Or(0, 0); return n }
func (p PoolSpec) Max() int { _, n := p.Or(0, max(1, p.Min())); return n }

// Validate checks the name and the node bounds; the partition is checked by the flavour, which knows the GPU model.
func (p PoolSpec) Validate(path *field.Path) field.ErrorList {
	errs := fieldcheck.DNSLabel(path.Child("name"), p.Name, validation.DNS1123LabelMaxLength)
	if slices.Contains(naming.ReservedPoolNames, p.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), p.Name, fmt.Sprintf("names a pool without GPUs (%s): give the GPU pool another name",
			strings.Join(naming.ReservedPoolNames, ", "))))
	}
	return append(errs, ValidateNodeBounds(path, p.Min(), p.Max())...)
}

// ValidateNodeBounds checks an autoscaled pool's bounds: minNodes may be 0, maxNodes at least max(1, minNodes).
func ValidateNodeBounds(path *field.Path, minNodes, maxNodes int) field.ErrorList {
	var errs field.ErrorList
	if minNodes < 0 {
		errs = append(errs, field.Invalid(path.Child("minNodes"), minNodes, "must be 0 or more"))
	}
	if want := max(1, minNodes); maxNodes < want {
		errs = append(errs, field.Invalid(path.Child("maxNodes"), maxNodes, fmt.Sprintf("must be at least %d (max(1, minNodes))", want)))
	}
	return errs
}

// ValidatePartition checks that model can be partitioned into the MIG profile partition ("" means whole GPUs).
func ValidatePartition(path *field.Path, partition string, model GPUModel) field.ErrorList {
	if partition == "" || model.HasMIGProfile(partition) {
		return nil
	}
	if len(model.MIGProfiles) == 0 {
		return field.ErrorList{field.Invalid(path, partition, fmt.Sprintf("%s has no MIG partitions", model.ProductName))}
	}
	return field.ErrorList{field.NotSupported(path, partition, model.MIGProfiles)}
}

// ValidateZoneOffers refuses a pool whose machine (value, at path) is not known to be offered in the cluster's zone;
// clusterPath is the cluster's config block, whose zone and allowUnlistedZone keys the message names.
func ValidateZoneOffers(path *field.Path, value string, zones []string, zone string, clusterPath *field.Path) field.ErrorList {
	if slices.Contains(zones, zone) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, value, fmt.Sprintf(
		"is not offered in zone %s (%s); zones known to offer it: %s; if it is offered there now, set %s: true",
		zone, clusterPath.Child("zone"), strings.Join(zones, ", "), clusterPath.Child("allowUnlistedZone")))}
}
