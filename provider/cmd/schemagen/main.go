// Command schemagen writes the provider's schema (provider.Schema) from the config reference in docs/installation-configuration.md:
//
//	go run ./cmd/schemagen [-reference ../docs/installation-configuration.md] [-out schema.json]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpu-tenancy/gpu-tenancy/provider"
)

func main() {
	reference := flag.String("reference", "../docs/installation-configuration.md", "the document whose config reference describes the properties")
	out := flag.String("out", "schema.json", "where to write the schema")
	flag.Parse()
	if err := run(*reference, *out); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(reference, out string) error {
	raw, err := os.ReadFile(reference)
	if err != nil {
		return err
	}
	spec, err := provider.Schema(raw)
	if err != nil {
		return err
	}
	return os.WriteFile(out, spec, 0o644)
}
