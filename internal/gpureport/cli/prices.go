package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
)

// stackPricesKey is the prices' key in a Pulumi stack file: the `prices` key of the program's config namespace
// (platform.ConfigNamespace), spelled here so the CLI does not build the Pulumi program's packages.
const stackPricesKey = "gpu-tenancy:prices"

// loadPrices reads --prices FILE, YAML or JSON: a Pulumi stack file (stacks/Pulumi.<stack>.yaml), whose
// gpu-tenancy:prices it takes, so the stack's prices are written once; or a file holding that block alone,
// `{currency, perDeviceHour}`. The prices are checked as the stack config's are, except against the catalog: the
// report warns about priced classes the cluster does not have.
func loadPrices(file string) (rules.Prices, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return rules.Prices{}, fmt.Errorf("--prices: %w", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return rules.Prices{}, fmt.Errorf("--prices %s: not YAML or JSON: %w", file, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js, &doc); err != nil {
		return rules.Prices{}, fmt.Errorf("--prices %s: not a map of keys to values: %w", file, err)
	}
	block, path := js, field.NewPath("prices")
	if config, ok := doc["config"]; ok {
		var values map[string]json.RawMessage
		if err := json.Unmarshal(config, &values); err != nil {
			return rules.Prices{}, fmt.Errorf("--prices %s: the stack file's config is not a map: %w", file, err)
		}
		if block, ok = values[stackPricesKey]; !ok {
			return rules.Prices{}, fmt.Errorf("--prices %s: the stack file sets no %s", file, stackPricesKey)
		}
		path = field.NewPath(stackPricesKey)
	}
	var p rules.Prices
	dec := json.NewDecoder(bytes.NewReader(block))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return rules.Prices{}, fmt.Errorf("--prices %s: %s: %w", file, path, err)
	}
	if errs := p.Validate(path, p.Classes()); len(errs) > 0 {
		return rules.Prices{}, fmt.Errorf("--prices %s: %w", file, errs.ToAggregate())
	}
	if !p.IsSet() {
		return rules.Prices{}, fmt.Errorf("--prices %s: %s gives no price", file, path)
	}
	return p, nil
}
