// Command dashboard writes the operators' Grafana dashboard for import by hand (dashboard.ShippedFile), as
// components/monitoring/dashboard builds it; `make schema` runs it, and that package's tests fail when the file is
// stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/dashboard"
)

func main() {
	raw, err := dashboard.Shipped()
	if err == nil {
		err = os.WriteFile(filepath.FromSlash(dashboard.ShippedFile), raw, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
