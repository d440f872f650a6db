// Command pulumi-resource-gpu-tenancy is the gpu-tenancy component provider: the Platform component for Pulumi
// programs in any language (package provider).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gpu-tenancy/gpu-tenancy/provider"
)

func main() {
	if err := provider.New().Run(context.Background(), provider.Name, provider.Version); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
