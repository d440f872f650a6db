// Command gpu-platform is a team's own Pulumi program with a GPU tenancy platform in it (package gpus).
package main

import (
	"github.com/gpu-tenancy/gpu-tenancy/examples/go/gpus"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() { pulumi.Run(gpus.Program) }
