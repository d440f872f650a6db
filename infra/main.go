// Command infra is the gpu-tenancy Pulumi program; everything it does lives in package pipeline.
package main

import (
	"github.com/gpu-tenancy/gpu-tenancy/infra/pipeline"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() {
	pulumi.Run(pipeline.Run)
}
