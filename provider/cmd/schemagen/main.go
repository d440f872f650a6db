// Command schemagen writes the provider's schema (provider.Schema) from the config reference in
// docs/installation-configuration.md, and the config keys page (provider.Reference) beside it:
//
//	go run ./cmd/schemagen [-reference ../docs/installation-configuration.md] [-out schema.json] [-keys ../docs/config-reference.md]
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
	keys := flag.String("keys", "../docs/config-reference.md", "where to write the config keys page")
	flag.Parse()
	if err := run(*reference, *out, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(reference, out, keys string) error {
	raw, err := os.ReadFile(reference)
	if err != nil {
		return err
	}
	spec, err := provider.Schema(raw)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, spec, 0o644); err != nil {
		return err
	}
	stacks, err := provider.StackFiles("..")
	if err != nil {
		return err
	}
	page, err := provider.Reference(raw, stacks)
	if err != nil {
		return err
	}
	return os.WriteFile(keys, page, 0o644)
}
