// Command schemagen writes the provider's schema (provider.Schema) from the README's config reference:
//
//	go run ./cmd/schemagen [-readme ../README.md] [-out schema.json]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpu-tenancy/gpu-tenancy/provider"
)

func main() {
	readme := flag.String("readme", "../README.md", "the README whose config reference describes the properties")
	out := flag.String("out", "schema.json", "where to write the schema")
	flag.Parse()
	if err := run(*readme, *out); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(readme, out string) error {
	raw, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	spec, err := provider.Schema(raw)
	if err != nil {
		return err
	}
	return os.WriteFile(out, spec, 0o644)
}
