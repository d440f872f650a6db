package gke

import "github.com/gpu-tenancy/gpu-tenancy/components/cluster"

// releaseSchedule is GKE's table of minors and their ends of standard support.
const releaseSchedule = "https://cloud.google.com/kubernetes-engine/docs/release-schedule"

// SupportedVersions are the minors GKE supports at or above the platform's floor, each until its end of standard
// support. The dates are those of GKE's release schedule as endoflife.date copies it
// (https://endoflife.date/google-kubernetes-engine); the schedule's own table could not be read here, so the rows are
// unverified and only warn once past. Clusters on the EXTENDED release channel are supported about 10 months longer
// (https://cloud.google.com/kubernetes-engine/versioning). 1.37 is in the Rapid channel only, with no published end of
// support yet (https://cloud.google.com/kubernetes-engine/docs/release-notes), so it is left to the newer-than-known
// warning.
//
// No row vouches for extended-resource names (SupportedMinor.ExtendedResources): no page of GKE read here says whether
// its clusters turn on the DRAExtendedResource feature gate that upstream Kubernetes turns on from 1.36, so a preview
// of a tenant asking for GPUs by name warns, and the up asks the built cluster itself.
var SupportedVersions = cluster.SupportTable{Cloud: "GKE", Rows: []cluster.SupportedMinor{
	{Minor: 35, EndOfSupport: cluster.Date(2027, 4, 11), Source: releaseSchedule},
	{Minor: 36, EndOfSupport: cluster.Date(2027, 8, 9), Source: releaseSchedule},
}}
