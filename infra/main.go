// Command infra is the gpu-tenancy Pulumi program: the stack's config as one Platform component (package platform).
package main

import (
	// The program builds every cloud.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() {
	pulumi.Run(platform.Program(""))
}
