// Package flavours includes every cloud in a program: import it to build every cloud. Each cloud's SDK code lives in a
// package that registers itself (its cluster builder with package cluster, GKE's alert policies with package
// monitoring), so a program links only the clouds it imports; one that builds only existing clusters imports none.
package flavours

import (
	_ "github.com/gpu-tenancy/gpu-tenancy/components/gke/gkecluster"
	_ "github.com/gpu-tenancy/gpu-tenancy/components/monitoring/cloudmonitoring"
	_ "github.com/gpu-tenancy/gpu-tenancy/components/scaleway/kapsule"
)
