package gke

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReleaseChannels are GKE's release channels (https://cloud.google.com/kubernetes-engine/docs/concepts/release-channels).
var ReleaseChannels = []string{"UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED"}

var (
	projectRE = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	zoneRE    = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]+)-([a-z])$`)
)

// Region is the region of a GKE zone (us-central1-a: us-central1).
func Region(zone string) string {
	if m := zoneRE.FindStringSubmatch(zone); m != nil {
		return m[1]
	}
	return zone
}

// Validate checks the cluster (at path) and its GPU pools (at poolsPath) against GKE's rules and the accelerator
// table; it is the single owner of these rules, for the stack config and for gkecluster.NewCluster alike.
func (a *ClusterArgs) Validate(path, poolsPath *field.Path, now time.Time) field.ErrorList {
	var errs field.ErrorList
	switch {
	case a.Project == "":
		errs = append(errs, field.Required(path.Child("project"), "the GCP project id"))
	case !projectRE.MatchString(a.Project):
		errs = append(errs, field.Invalid(path.Child("project"), a.Project, "must be a GCP project id: 6-30 lowercase letters, digits or hyphens, starting with a letter"))
	}
	zoneOK := false
	switch {
	case a.Zone == "":
		errs = append(errs, field.Required(path.Child("zone"), "a zone such as us-central1-a"))
	case !zoneRE.MatchString(a.Zone):
		errs = append(errs, field.Invalid(path.Child("zone"), a.Zone, "must be a zone such as us-central1-a (region, dash, zone letter)"))
	default:
		zoneOK = true
	}
	errs = append(errs, a.VersionCheck(path, now).Errs...)
	if a.ReleaseChannel != "" && !slices.Contains(ReleaseChannels, a.ReleaseChannel) {
		errs = append(errs, field.NotSupported(path.Child("releaseChannel"), a.ReleaseChannel, ReleaseChannels))
	}
	sysMin, sysMax := a.SystemPool.Bounds()
	errs = append(errs, cluster.ValidateNodeBounds(path.Child("systemPool"), sysMin, sysMax)...)
	if a.TenantPool != nil {
		tenMin, tenMax := a.TenantPool.Bounds()
		errs = append(errs, cluster.ValidateNodeBounds(path.Child("tenantPool"), tenMin, tenMax)...)
	}

	names := make([]string, len(a.GPUPools))
	for i, pool := range a.GPUPools {
		pp := poolsPath.Index(i)
		names[i] = pool.Name
		errs = append(errs, pool.PoolSpec.Validate(pp)...)
		errs = append(errs, validateLabelValue(pp.Child("name"), naming.CostPoolKey, pool.Name)...)
		acc, ok := accelerators[pool.Accelerator]
		if !ok {
			errs = append(errs, fieldcheck.OneOf(pp.Child("accelerator"), pool.Accelerator, Accelerators()))
			continue
		}
		errs = append(errs, validateLabelValue(pp.Child("accelerator"), naming.CostGPUModelKey, acc.model.Key)...)
		errs = append(errs, validateMachine(pp, pool, acc)...)
		if zoneOK && !a.AllowUnlistedZone {
			errs = append(errs, cluster.ValidateZoneOffers(pp.Child("accelerator"), pool.Accelerator, acc.zones, a.Zone, path)...)
		}
		errs = append(errs, cluster.ValidatePartition(pp.Child("partition"), pool.Partition, acc.model)...)
	}
	return append(errs, fieldcheck.UniqueNames(poolsPath, names)...)
}

// VersionCheck checks the cluster's Kubernetes version (the cluster's block at path) against GKE's support table on
// day now; "" leaves the version to GKE and is not checked.
func (a *ClusterArgs) VersionCheck(path *field.Path, now time.Time) cluster.VersionCheck {
	if a.KubernetesVersion == "" {
		return cluster.VersionCheck{}
	}
	return SupportedVersions.CheckKubernetesVersion(path.Child("kubernetesVersion"), a.KubernetesVersion, "", now)
}

func validateMachine(pp *field.Path, pool GPUPoolSpec, acc accelerator) field.ErrorList {
	var want []string
	for _, n := range acc.gpuCounts {
		want = append(want, fmt.Sprintf("%s-%dg", acc.machineFamily, n))
	}
	if pool.MachineType == "" {
		return field.ErrorList{field.Required(pp.Child("machineType"), "one of "+strings.Join(want, ", "))}
	}
	if !slices.Contains(want, pool.MachineType) {
		return field.ErrorList{field.NotSupported(pp.Child("machineType"), pool.MachineType, want)}
	}
	if n := gpusOf(pool.MachineType); pool.GPUCount != 0 && pool.GPUCount != n {
		return field.ErrorList{field.Invalid(pp.Child("gpuCount"), pool.GPUCount,
			fmt.Sprintf("must be %d: machine type %s carries %d %s", n, pool.MachineType, n, pool.Accelerator))}
	}
	return nil
}

// Accelerators are the accelerator types a GPU pool may name: the ones the accelerator table knows.
func Accelerators() []string { return slices.Sorted(maps.Keys(accelerators)) }
