package scaleway

import "github.com/gpu-tenancy/gpu-tenancy/components/cluster"

// supportPolicy is Kapsule's version support policy: each minor's deprecation (no new clusters) and end of support
// (clusters are upgraded to the next minor within 30 days).
const supportPolicy = "https://github.com/scaleway/docs-content/blob/main/pages/kubernetes/reference-content/version-support-policy.mdx"

// SupportedVersions are the minors Kapsule supports at or above the platform's floor, each until its "End of Support"
// in the support policy (read at scaleway/docs-content commit 0705e2c0fe196f03cf474472f1b845ec3b18784c). 1.34 ended
// on 2026-11-29. 1.37 was released on Kapsule on 2026-09-01
// (https://github.com/scaleway/docs-content/blob/main/changelog/september2026/2026-09-01-kubernetes-added-new-kubernetes-release.mdx),
// but its row of the policy could not be read here, so it is left to the newer-than-known warning.
//
// No row vouches for extended-resource names (SupportedMinor.ExtendedResources): no page of Kapsule read here says whether
// its clusters turn on the DRAExtendedResource feature gate that upstream Kubernetes turns on from 1.36, so a preview
// of a tenant asking for GPUs by name warns, and the up asks the built cluster itself.
var SupportedVersions = cluster.SupportTable{Cloud: "Kapsule", Rows: []cluster.SupportedMinor{
	{Minor: 35, EndOfSupport: cluster.Date(2027, 3, 19), Source: supportPolicy, Verified: true},
	{Minor: 36, EndOfSupport: cluster.Date(2027, 9, 7), Source: supportPolicy, Verified: true},
}}
