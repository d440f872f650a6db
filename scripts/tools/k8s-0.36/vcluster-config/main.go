// Command vcluster-config loads vCluster values as vCluster itself does, so a key it ignores, defaults differently or
// rejects fails a test rather than a tenant's first start: the chart's defaults merged under the given values
// (loft-sh/vcluster v0.36.1 pkg/config/defaults.go mergeConfigBytesWithDefaults), strictly decoded, validated and
// defaulted (pkg/config/parse.go ParseConfigBytes). It reads the values as YAML or JSON on stdin and prints the
// effective config as JSON, with whether it needs vCluster's Pro build; a rejected config exits 1 with vCluster's error.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loft-sh/vcluster/config"
	vclusterconfig "github.com/loft-sh/vcluster/pkg/config"
	"github.com/loft-sh/vcluster/pkg/strvals"
	"sigs.k8s.io/yaml"
)

func main() {
	name := flag.String("name", "", "the vCluster's name (its Helm release)")
	flag.Parse()
	if err := run(*name, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vcluster-config:", err)
		os.Exit(1)
	}
}

func run(name string, in io.Reader, out io.Writer) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	defaults, err := config.NewDefaultConfig()
	if err != nil {
		return fmt.Errorf("loading the chart defaults: %w", err)
	}
	defaultMap, err := toMap(defaults)
	if err != nil {
		return err
	}
	overrides := map[string]any{}
	if err := yaml.Unmarshal(raw, &overrides); err != nil {
		return fmt.Errorf("parsing the values: %w", err)
	}
	merged, err := yaml.Marshal(strvals.MergeMaps(defaultMap, overrides))
	if err != nil {
		return err
	}
	cfg, err := vclusterconfig.ParseConfigBytes(merged, name, nil)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(struct {
		Config     *vclusterconfig.VirtualClusterConfig `json:"config"`
		ProFeature bool                                 `json:"proFeature"`
	}{cfg, cfg.IsProFeatureEnabled()})
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, json.Unmarshal(raw, &out)
}
