// Command gpu-tenancy-policy is the project's Pulumi policy pack: the guard rails a preview or an update must keep
// (GPU pools tainted, each vCluster syncing only its tenant's DeviceClasses, every DeviceClass owned, every tenant
// namespace with a device quota and Pod Security), plus an advisory on cloud cost labels.
//
// It is built on the experimental Go policy SDK github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx
// (https://github.com/pulumi/pulumi/pull/19670) and runs as an analyzer binary: the engine launches a policy pack given
// as a path to an executable directly, with no language plugin (pkg v3.274.1 resource/plugin/analyzer_plugin.go,
// https://github.com/pulumi/pulumi/pull/24052):
//
//	go build -o .tools/bin/gpu-tenancy-policy ./policy
//	pulumi preview --policy-pack .tools/bin/gpu-tenancy-policy
//
// Each policy sets its own enforcement level: policyx v3.274.1 ignores the pack-level one
// (https://github.com/pulumi/pulumi/issues/24648), and a level left unset is the zero EnforcementLevel, advisory.
// The checks are plain functions over property maps, one file per policy, so each is tested on hand-built resources.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"
)

// packName names the pack in the engine's output and in --policy-pack-config files.
const packName = "gpu-tenancy"

// packVersion is the pack's version as the engine reports it.
var packVersion = semver.MustParse("0.1.0")

// Policy names, as the engine reports violations and as --policy-pack-config keys them.
const (
	gpuPoolTaintPolicy          = "gpu-pool-taint"
	dedicatedPoolTaintPolicy    = "dedicated-pool-taint"
	platformPoolTaintPolicy     = "platform-pool-taint"
	vclusterClassSelectorPolicy = "vcluster-device-class-selector"
	deviceClassOwnerPolicy      = "device-class-owner"
	tenantNamespacePolicy       = "tenant-namespace-guard-rails"
	cloudCostLabelsPolicy       = "cloud-cost-labels"
)

func main() {
	if err := policyx.Main(func(*pulumi.Context) (policyx.PolicyPack, error) { return newPack() }); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-tenancy-policy:", err)
		os.Exit(1)
	}
}

// newPack assembles the pack. The level passed to NewPolicyPack is ignored by policyx (see the package comment).
func newPack() (policyx.PolicyPack, error) {
	return policyx.NewPolicyPack(packName, packVersion, policyx.EnforcementLevelMandatory, policies())
}

func policies() []policyx.Policy {
	return []policyx.Policy{
		resourcePolicy(gpuPoolTaintPolicy, policyx.EnforcementLevelMandatory,
			"GPU node pools carry the GPU taint nvidia.com/gpu with effect NoSchedule.", checkGPUPoolTaint),
		resourcePolicy(dedicatedPoolTaintPolicy, policyx.EnforcementLevelMandatory,
			"A node pool labelled as one tenant's (gpu-tenancy.io/dedicated) carries that tenant's NoSchedule taint.",
			checkDedicatedPoolTaint),
		resourcePolicy(platformPoolTaintPolicy, policyx.EnforcementLevelMandatory,
			"A node pool labelled as the platform's own (gpu-tenancy.io/platform-pool) carries its NoSchedule taint.",
			checkPlatformPoolTaint),
		resourcePolicy(vclusterClassSelectorPolicy, policyx.EnforcementLevelMandatory,
			"A vCluster that syncs DeviceClasses from the host selects exactly its tenant's grant label.",
			checkVClusterClassSelector),
		resourcePolicy(deviceClassOwnerPolicy, policyx.EnforcementLevelMandatory,
			"Every DeviceClass is granted to a tenant or marked platform-only, not both.", checkDeviceClassOwner),
		policyx.NewStackValidationPolicy(tenantNamespacePolicy, policyx.StackValidationPolicyArgs{
			Description: "Every tenant namespace enforces baseline or restricted Pod Security and has a device " +
				"quota for each DeviceClass granted to its tenant.",
			EnforcementLevel: policyx.EnforcementLevelMandatory,
			ValidateStack: func(_ context.Context, args policyx.StackValidationArgs) error {
				resources := make([]resource, len(args.Resources))
				for i, r := range args.Resources {
					resources[i] = fromAnalyzer(r)
				}
				report(args.Manager, checkTenantNamespaces(resources))
				return nil
			},
		}),
		resourcePolicy(cloudCostLabelsPolicy, policyx.EnforcementLevelAdvisory,
			"Cloud clusters and node pools carry the gpu-tenancy cost labels (and GKE cost allocation is on).",
			checkCostLabels),
	}
}

// resourcePolicy wraps a check as a resource validation policy with its own enforcement level.
func resourcePolicy(name string, level policyx.EnforcementLevel, description string,
	check func(resource) []violation) policyx.ResourceValidationPolicy {
	return policyx.NewResourceValidationPolicy(name, policyx.ResourceValidationPolicyArgs{
		Description:      description,
		EnforcementLevel: level,
		ValidateResource: func(_ context.Context, args policyx.ResourceValidationArgs) error {
			report(args.Manager, check(fromAnalyzer(args.Resource)))
			return nil
		},
	})
}

func fromAnalyzer(r policyx.AnalyzerResource) resource {
	return resource{Type: r.Type, URN: r.URN, Name: r.Name, Props: r.Properties}
}

func report(m policyx.PolicyManager, vs []violation) {
	for _, v := range vs {
		m.ReportViolation(v.Message, v.URN)
	}
}
