package pipeline

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// maxTenantName keeps every name derived from a tenant within Kubernetes limits: the host namespace
	// `vcluster-<tenant>`, the vCluster's own objects (`vc-<release>`, `<release>-headless`, ...) and the class label
	// `tenant.gpu-tenancy.io/<tenant>`, with room for vCluster's translated names.
	maxTenantName = 32
	minMinor      = 34
)

var (
	clouds          = []string{"gke", "scaleway", "existing"}
	releaseChannels = []string{"UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED"}
	cnis            = []string{"cilium", "calico"}
	weekdays        = []string{"any", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
	deviceKinds     = []string{"gpu", "mig"}

	gcpProjectRE = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	gkeZoneRE    = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]+)-([a-z])$`)
	versionRE    = regexp.MustCompile(`^1\.([0-9]+)(\.[0-9]+)?(-gke\.[0-9]+)?$`)
	minorOnlyRE  = regexp.MustCompile(`^1\.[0-9]+$`)
	machineRE    = regexp.MustCompile(`^([a-z0-9]+-[a-z]+)-([0-9]+)g$`)
	migRE        = regexp.MustCompile(`^[0-9]g\.[0-9]+gb$`)
	productRE    = regexp.MustCompile(`^[A-Za-z0-9 ._-]+$`)
)

func validate(c *Config) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(clouds, c.Cloud) {
		if c.Cloud == "" {
			errs = append(errs, field.Required(path(keyCloud), "one of "+strings.Join(clouds, ", ")))
		} else {
			errs = append(errs, field.NotSupported(path(keyCloud), c.Cloud, clouds))
		}
	}
	var pools []cluster.GPUPool
	switch c.Cloud {
	case "gke":
		errs = append(errs, validateGKE(c)...)
		pools = gkePools(c)
	case "scaleway":
		errs = append(errs, validateScaleway(c)...)
		pools = scalewayPools(c)
	case "existing":
		errs = append(errs, validateExisting(c)...)
		pools = existingPools(c)
	}
	errs = append(errs, validatePoolCommon(c.GPUPools)...)
	errs = append(errs, validateClasses(c.GPUClasses, pools)...)
	errs = append(errs, validateTenants(c)...)
	errs = append(errs, validateCharts(c)...)
	return errs
}

func validateVersion(p *field.Path, v string, requireMinor bool) field.ErrorList {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return field.ErrorList{field.Invalid(p, v, "must be a Kubernetes version such as 1.35 or 1.35.2")}
	}
	if minor, _ := strconv.Atoi(m[1]); minor < minMinor {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be 1.%d or later: DRA on resource.k8s.io/v1 needs it", minMinor))}
	}
	if requireMinor && !minorOnlyRE.MatchString(v) {
		return field.ErrorList{field.Invalid(p, v, "must be a minor version such as 1.35 while autoUpgrade.enabled is true")}
	}
	return nil
}

func validateNodeBounds(p *field.Path, minNodes, maxNodes *int) field.ErrorList {
	var errs field.ErrorList
	if *minNodes < 0 {
		errs = append(errs, field.Invalid(p.Child("minNodes"), *minNodes, "must be 0 or more"))
	}
	if want := max(1, *minNodes); *maxNodes < want {
		errs = append(errs, field.Invalid(p.Child("maxNodes"), *maxNodes, fmt.Sprintf("must be at least %d (max(1, minNodes))", want)))
	}
	return errs
}

// oneOf reports a value outside allowed: missing, or not supported.
func oneOf(p *field.Path, value string, allowed []string) *field.Error {
	if value == "" {
		return field.Required(p, "one of "+strings.Join(allowed, ", "))
	}
	return field.NotSupported(p, value, allowed)
}

// unusedPoolFields reports a GPU pool's fields that belong to another cloud, which are likely a mix-up of stacks.
func unusedPoolFields(pp *field.Path, pool GPUPoolConfig, cloud string) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name, owner string
		set         bool
		value       any
	}{
		{"machineType", "gke", pool.MachineType != "", pool.MachineType},
		{"accelerator", "gke", pool.Accelerator != "", pool.Accelerator},
		{"gpuCount", "gke", pool.GPUCount != 0, pool.GPUCount},
		{"nodeType", "scaleway", pool.NodeType != "", pool.NodeType},
		{"model", "existing", pool.Model != "", pool.Model},
		{"gpusPerNode", "existing", pool.GPUsPerNode != 0, pool.GPUsPerNode},
	} {
		if f.set && f.owner != cloud {
			errs = append(errs, notUsed(pp.Child(f.name), f.value, cloud+" (it is a "+f.owner+" field)"))
		}
	}
	return errs
}

func notUsed(p *field.Path, value any, cloud string) *field.Error {
	return field.Forbidden(p, fmt.Sprintf("is not used on cloud %s (given %v)", cloud, value))
}

func validateGKE(c *Config) field.ErrorList {
	var errs field.ErrorList
	g, p := c.GKE, path(keyGKE)
	switch {
	case g.Project == "":
		errs = append(errs, field.Required(p.Child("project"), "the GCP project id"))
	case !gcpProjectRE.MatchString(g.Project):
		errs = append(errs, field.Invalid(p.Child("project"), g.Project, "must be a GCP project id: 6-30 lowercase letters, digits or hyphens, starting with a letter"))
	}
	zoneOK := false
	switch {
	case g.Zone == "":
		errs = append(errs, field.Required(p.Child("zone"), "a zone such as us-central1-a"))
	case !gkeZoneRE.MatchString(g.Zone):
		errs = append(errs, field.Invalid(p.Child("zone"), g.Zone, "must be a zone such as us-central1-a (region, dash, zone letter)"))
	default:
		zoneOK = true
	}
	errs = append(errs, validateVersion(p.Child("kubernetesVersion"), g.KubernetesVersion, false)...)
	if !slices.Contains(releaseChannels, g.ReleaseChannel) {
		errs = append(errs, field.NotSupported(p.Child("releaseChannel"), g.ReleaseChannel, releaseChannels))
	}
	errs = append(errs, validateNodeBounds(p.Child("systemPool"), g.SystemPool.MinNodes, g.SystemPool.MaxNodes)...)

	for i, pool := range c.GPUPools {
		pp := path(keyGPUPools).Index(i)
		errs = append(errs, unusedPoolFields(pp, pool, "gke")...)
		acc, ok := gkeAccelerators[pool.Accelerator]
		if !ok {
			errs = append(errs, oneOf(pp.Child("accelerator"), pool.Accelerator, sortedKeys(gkeAccelerators)))
			continue
		}
		errs = append(errs, validateGKEMachine(pp, pool, acc)...)
		if zoneOK && !g.AllowUnlistedZone && !slices.Contains(acc.zones, g.Zone) {
			errs = append(errs, field.Invalid(pp.Child("accelerator"), pool.Accelerator, fmt.Sprintf(
				"is not offered in zone %s (%s:gke.zone); zones known to offer it: %s; if it is offered there now, set %s:gke.allowUnlistedZone: true",
				g.Zone, Namespace, strings.Join(acc.zones, ", "), Namespace)))
		}
		errs = append(errs, validatePartition(pp.Child("partition"), pool.Partition, acc.model)...)
	}
	return errs
}

func validateGKEMachine(pp *field.Path, pool GPUPoolConfig, acc gkeAccelerator) field.ErrorList {
	var want []string
	for _, n := range acc.gpuCounts {
		want = append(want, fmt.Sprintf("%s-%dg", acc.machineFamily, n))
	}
	m := machineRE.FindStringSubmatch(pool.MachineType)
	if pool.MachineType == "" {
		return field.ErrorList{field.Required(pp.Child("machineType"), "one of "+strings.Join(want, ", "))}
	}
	if m == nil || !slices.Contains(want, pool.MachineType) {
		return field.ErrorList{field.NotSupported(pp.Child("machineType"), pool.MachineType, want)}
	}
	if n, _ := strconv.Atoi(m[2]); pool.GPUCount != 0 && pool.GPUCount != n {
		return field.ErrorList{field.Invalid(pp.Child("gpuCount"), pool.GPUCount,
			fmt.Sprintf("must be %d: machine type %s carries %d %s", n, pool.MachineType, n, pool.Accelerator))}
	}
	return nil
}

// gkeGPUCount is the GPU count a validated GKE pool's machine type carries.
func gkeGPUCount(machineType string) int {
	m := machineRE.FindStringSubmatch(machineType)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

func validatePartition(p *field.Path, partition string, model cluster.GPUModel) field.ErrorList {
	if partition == "" || model.HasMIGProfile(partition) {
		return nil
	}
	if len(model.MIGProfiles) == 0 {
		return field.ErrorList{field.Invalid(p, partition, fmt.Sprintf("%s has no MIG partitions", model.ProductName))}
	}
	return field.ErrorList{field.NotSupported(p, partition, model.MIGProfiles)}
}

// ScalewayRegion is the region of a Scaleway zone (fr-par-2 -> fr-par).
func ScalewayRegion(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

// GKERegion is the region of a GKE zone (us-central1-a -> us-central1).
func GKERegion(zone string) string {
	if m := gkeZoneRE.FindStringSubmatch(zone); m != nil {
		return m[1]
	}
	return zone
}

func validateScaleway(c *Config) field.ErrorList {
	var errs field.ErrorList
	s, p := c.Scaleway, path(keyScaleway)
	zoneOK := false
	switch {
	case s.Zone == "":
		errs = append(errs, field.Required(p.Child("zone"), "a zone such as fr-par-2 (GPU types: fr-par-2, pl-waw-2)"))
	case !slices.Contains(scalewayZones, s.Zone):
		errs = append(errs, field.NotSupported(p.Child("zone"), s.Zone, scalewayZones))
	default:
		zoneOK = true
	}
	errs = append(errs, validateVersion(p.Child("kubernetesVersion"), s.KubernetesVersion, *s.AutoUpgrade.Enabled)...)
	if !slices.Contains(cnis, s.CNI) {
		errs = append(errs, field.NotSupported(p.Child("cni"), s.CNI, cnis))
	}
	if !slices.Contains(weekdays, s.AutoUpgrade.MaintenanceWindowDay) {
		errs = append(errs, field.NotSupported(p.Child("autoUpgrade", "maintenanceWindowDay"), s.AutoUpgrade.MaintenanceWindowDay, weekdays))
	}
	if h := *s.AutoUpgrade.MaintenanceWindowStartHour; h < 0 || h > 23 {
		errs = append(errs, field.Invalid(p.Child("autoUpgrade", "maintenanceWindowStartHour"), h, "must be an hour from 0 to 23"))
	}
	errs = append(errs, validateNodeBounds(p.Child("systemPool"), s.SystemPool.MinNodes, s.SystemPool.MaxNodes)...)

	for i, pool := range c.GPUPools {
		pp := path(keyGPUPools).Index(i)
		errs = append(errs, unusedPoolFields(pp, pool, "scaleway")...)
		nt, ok := scalewayNodeTypes[pool.NodeType]
		if !ok {
			errs = append(errs, oneOf(pp.Child("nodeType"), pool.NodeType, sortedKeys(scalewayNodeTypes)))
			continue
		}
		if zoneOK && !s.AllowUnlistedZone && !slices.Contains(nt.zones, s.Zone) {
			errs = append(errs, field.Invalid(pp.Child("nodeType"), pool.NodeType, fmt.Sprintf(
				"is not offered in zone %s (%s:scaleway.zone); zones offering it: %s; if it is offered there now, set %s:scaleway.allowUnlistedZone: true",
				s.Zone, Namespace, strings.Join(nt.zones, ", "), Namespace)))
		}
		errs = append(errs, validatePartition(pp.Child("partition"), pool.Partition, nt.model)...)
	}
	return errs
}

func validateExisting(c *Config) field.ErrorList {
	var errs field.ErrorList
	p := path(keyExisting)
	hasSecret, hasPath := c.Secrets.Kubeconfig != "", c.Existing.KubeconfigPath != ""
	switch {
	case !hasSecret && !hasPath:
		errs = append(errs, field.Required(p.Child("kubeconfigPath"), fmt.Sprintf(
			"a kubeconfig: a file path here, or the secret %s:%s", Namespace, keyKubeconfig)))
	case hasSecret && hasPath:
		errs = append(errs, field.Forbidden(p.Child("kubeconfigPath"), fmt.Sprintf(
			"give the kubeconfig once: either this path or the secret %s:%s", Namespace, keyKubeconfig)))
	}
	for i, pool := range c.GPUPools {
		pp := path(keyGPUPools).Index(i)
		errs = append(errs, unusedPoolFields(pp, pool, "existing")...)
		var keys []string
		for _, m := range cluster.GPUModels {
			keys = append(keys, m.Key)
		}
		model, ok := cluster.ModelByKey(pool.Model)
		if !ok {
			errs = append(errs, oneOf(pp.Child("model"), pool.Model, keys))
			continue
		}
		if pool.GPUsPerNode < 0 {
			errs = append(errs, field.Invalid(pp.Child("gpusPerNode"), pool.GPUsPerNode, "must be 1 or more (default 1)"))
		}
		errs = append(errs, validatePartition(pp.Child("partition"), pool.Partition, model)...)
	}
	return errs
}

func validatePoolCommon(pools []GPUPoolConfig) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, pool := range pools {
		pp := path(keyGPUPools).Index(i)
		errs = append(errs, dnsLabel(pp.Child("name"), pool.Name, validation.DNS1123LabelMaxLength)...)
		if seen[pool.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), pool.Name))
		}
		seen[pool.Name] = true
		errs = append(errs, validateNodeBounds(pp, pool.MinNodes, pool.MaxNodes)...)
	}
	return errs
}

func dnsLabel(p *field.Path, name string, maxLen int) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "a DNS-1123 label: lowercase letters, digits and '-'")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) == 0 && len(name) > maxLen {
		errs = append(errs, field.TooLong(p, name, maxLen))
	}
	return errs
}

func validateClasses(classes []GPUClassConfig, pools []cluster.GPUPool) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range classes {
		cp := path(keyGPUClasses).Index(i)
		before := len(errs)
		if slices.Contains(driverClasses, c.Name) {
			errs = append(errs, field.Invalid(cp.Child("name"), c.Name, fmt.Sprintf(
				"is a class the NVIDIA DRA driver creates itself (%s); choose a name of your own", strings.Join(driverClasses, ", "))))
		} else {
			errs = append(errs, dnsLabel(cp.Child("name"), c.Name, validation.DNS1123LabelMaxLength)...)
		}
		if seen[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		seen[c.Name] = true
		if c.Product != "" && !productRE.MatchString(c.Product) {
			errs = append(errs, field.Invalid(cp.Child("product"), c.Product, "must be letters, digits, spaces, '.', '_' or '-', matched case-insensitively against the GPU's productName"))
		}
		switch c.Device {
		case "gpu":
			if c.MIGProfile != "" {
				errs = append(errs, field.Forbidden(cp.Child("migProfile"), "only applies with device: mig"))
			}
		case "mig":
			if c.MIGProfile == "" {
				errs = append(errs, field.Required(cp.Child("migProfile"), "a MIG profile such as 1g.5gb"))
			} else if !migRE.MatchString(c.MIGProfile) {
				errs = append(errs, field.Invalid(cp.Child("migProfile"), c.MIGProfile, "must be a MIG profile such as 1g.5gb"))
			}
		default:
			errs = append(errs, field.NotSupported(cp.Child("device"), c.Device, deviceKinds))
			continue
		}
		if !satisfiable(c, pools) {
			errs = append(errs, field.Invalid(cp, c.Name, fmt.Sprintf("no GPU pool in %s:%s can satisfy it: %s",
				Namespace, keyGPUPools, describeClass(c))))
		}
		// The selector itself is compiled as the API server will compile it, so a bad extraCEL fails here and
		// not halfway through an update.
		if len(errs) == before {
			class := tenancy.GPUClass{Name: c.Name, Device: tenancy.DeviceKind(c.Device), MIGProfile: c.MIGProfile,
				Product: c.Product, ExtraCEL: c.ExtraCEL}
			if err := class.Validate(); err != nil {
				errs = append(errs, field.Invalid(cp.Child("extraCEL"), c.ExtraCEL, err.Error()))
			}
		}
	}
	return errs
}

func describeClass(c GPUClassConfig) string {
	what := "whole GPUs"
	if c.Device == "mig" {
		what = fmt.Sprintf("MIG %s devices (a pool with partition: %s)", c.MIGProfile, c.MIGProfile)
	}
	if c.Product != "" {
		what += fmt.Sprintf(" of a product matching %q", c.Product)
	}
	if c.Device == "gpu" {
		what += " (a pool without partition)"
	}
	return "it selects " + what
}

// satisfiable reports whether some pool offers the devices a class selects. A partitioned pool offers only its MIG
// devices: the driver does not announce a GPU whose MIG devices exist (gpu-facts 1.8).
func satisfiable(c GPUClassConfig, pools []cluster.GPUPool) bool {
	for _, p := range pools {
		if c.Product != "" && !p.Model.MatchesProduct(c.Product) {
			continue
		}
		if c.Device == "gpu" && p.MIGProfile == "" || c.Device == "mig" && p.MIGProfile == c.MIGProfile {
			return true
		}
	}
	return false
}

func validateTenants(c *Config) field.ErrorList {
	var errs field.ErrorList
	var classNames []string
	for _, class := range c.GPUClasses {
		classNames = append(classNames, class.Name)
	}
	seen := map[string]bool{}
	for i, t := range c.Tenants {
		tp := path(keyTenants).Index(i)
		before := len(errs)
		errs = append(errs, dnsLabel(tp.Child("name"), t.Name, maxTenantName)...)
		if seen[t.Name] {
			errs = append(errs, field.Duplicate(tp.Child("name"), t.Name))
		}
		seen[t.Name] = true
		granted := map[string]bool{}
		for j, c := range t.Classes {
			cp := tp.Child("classes").Index(j)
			switch {
			case !slices.Contains(classNames, c):
				errs = append(errs, field.NotSupported(cp, c, classNames))
			case granted[c]:
				errs = append(errs, field.Duplicate(cp, c))
			}
			granted[c] = true
			if _, ok := t.GPUQuota[c]; !ok && slices.Contains(classNames, c) {
				errs = append(errs, field.Required(tp.Child("gpuQuota").Child(c), "a device quota (how many devices of this class the tenant may hold) for every granted class"))
			}
		}
		for _, c := range sortedKeys(t.GPUQuota) {
			qp := tp.Child("gpuQuota").Child(c)
			if !granted[c] {
				errs = append(errs, field.Invalid(qp, t.GPUQuota[c], fmt.Sprintf("class %q is not granted to this tenant (%s)", c, tp.Child("classes"))))
			}
			if t.GPUQuota[c] < 0 {
				errs = append(errs, field.Invalid(qp, t.GPUQuota[c], "must be 0 or more"))
			}
		}
		for _, q := range []struct {
			p     *field.Path
			value string
		}{
			{tp.Child("cpuQuota"), t.CPUQuota}, {tp.Child("memoryQuota"), t.MemoryQuota},
			{tp.Child("vcluster", "cpu"), t.VCluster.CPU}, {tp.Child("vcluster", "memory"), t.VCluster.Memory},
			{tp.Child("vcluster", "storageSize"), t.VCluster.StorageSize},
		} {
			if qty, err := resource.ParseQuantity(q.value); err != nil || qty.Sign() <= 0 {
				errs = append(errs, field.Invalid(q.p, q.value, "must be a positive Kubernetes quantity such as 4, 500m or 16Gi"))
			}
		}
		if t.VCluster.StorageClass != "" {
			errs = append(errs, dnsSubdomain(tp.Child("vcluster", "storageClass"), t.VCluster.StorageClass)...)
		}
		for j, cidr := range t.BlockedEgressCIDRs {
			if _, _, err := net.ParseCIDR(cidr); err != nil {
				errs = append(errs, field.Invalid(tp.Child("blockedEgressCIDRs").Index(j), cidr, "must be a CIDR such as 10.0.0.0/8"))
			}
		}
		// What the tenant component itself checks (host bits in a CIDR, ...) is checked here too, before any resource.
		if len(errs) == before {
			if err := tenantArgs(t).Validate(gpuClasses(c)); err != nil {
				errs = append(errs, field.Invalid(tp, t.Name, err.Error()))
			}
		}
	}
	return errs
}

func dnsSubdomain(p *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateCharts(c *Config) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, ch helmchart.Chart) {
		if ch.Path != "" && (ch.Repo != "" || ch.Name != "") {
			errs = append(errs, field.Forbidden(p.Child("path"), "give either a local chart path or repo+name, not both"))
		}
		if ch.Path == "" && ch.Repo != "" && ch.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the chart name in repo "+ch.Repo))
		}
	}
	check(path(keyDRADriver).Child("chart"), c.DRADriver.Chart)
	check(path(keyPlatform).Child("chart"), c.Platform.Chart)
	check(path(keyVCluster).Child("chart"), c.VCluster.Chart)
	if c.PlatformEnabled() && c.Platform.Host == "" {
		errs = append(errs, field.Required(path(keyPlatform).Child("host"), fmt.Sprintf(
			"the platform's public host name while %s:platform.enabled is true", Namespace)))
	}
	if s := c.VCluster.KubeconfigServer; s != "" {
		u, err := url.Parse(strings.ReplaceAll(s, "{tenant}", "tenant"))
		if err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, field.Invalid(path(keyVCluster).Child("kubeconfigServer"), s,
				"must be an https URL such as https://{tenant}.vcluster.example.com ({tenant} is replaced per tenant)"))
		}
	}
	if c.PlatformEnabled() && c.Secrets.PlatformAdminPassword == "" {
		errs = append(errs, field.Required(path(keyAdminPassword), fmt.Sprintf(
			"the vCluster Platform admin password while %s:platform.enabled is true: pulumi config set --secret %s:%s <password>",
			Namespace, Namespace, keyAdminPassword)))
	}
	if c.Cloud != "existing" && c.Existing.DriverRoot != "" {
		errs = append(errs, notUsed(path(keyExisting).Child("driverRoot"), c.Existing.DriverRoot, c.Cloud))
	}
	return errs
}
