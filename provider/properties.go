package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// propertySource is the component's input properties as the args decoder reads them (platform.Source): each
// top-level property a key, a structured value as its JSON, secretness kept per key.
type propertySource struct {
	values  map[string]string
	secrets map[string]bool
}

func (s propertySource) Get(key string) (string, bool) { v, ok := s.values[key]; return v, ok }
func (s propertySource) IsSecret(key string) bool      { return s.secrets[key] }

// Keys are every property set, so a property the component does not have is refused, as an unknown stack config
// key is.
func (s propertySource) Keys() []string { return slices.Sorted(maps.Keys(s.values)) }

// newPropertySource converts the inputs. The Platform validates and reads its args before it registers anything,
// so every value must be known when it is constructed: a value still unknown (in a preview, an output of a resource
// not created yet) is reported at its path. A null property counts as unset.
func newPropertySource(inputs property.Map) (propertySource, field.ErrorList) {
	src := propertySource{values: map[string]string{}, secrets: map[string]bool{}}
	var errs field.ErrorList
	for key, v := range inputs.AllStable {
		if v.IsNull() {
			continue
		}
		plain, err := plainValue(v, field.NewPath(key))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		src.secrets[key] = v.HasSecrets()
		if s, ok := plain.(string); ok {
			src.values[key] = s
			continue
		}
		raw, jerr := json.Marshal(plain)
		if jerr != nil {
			errs = append(errs, field.InternalError(field.NewPath(key), jerr))
			continue
		}
		src.values[key] = string(raw)
	}
	return src, errs
}

// plainValue is a property value as plain Go values that encoding/json writes as the config's JSON.
func plainValue(v property.Value, p *field.Path) (any, *field.Error) {
	switch {
	case v.IsComputed():
		return nil, field.Invalid(p, "(unknown)", "must be known when the Platform is constructed: it validates and reads "+
			"every argument before it registers anything, so a value computed by another resource of the same update "+
			"cannot be used (create that resource in an earlier stack, or an earlier update)")
	case v.IsNull():
		return nil, nil
	case v.IsString():
		return v.AsString(), nil
	case v.IsBool():
		return v.AsBool(), nil
	case v.IsNumber():
		return v.AsNumber(), nil
	case v.IsArray():
		items := []any{}
		for i, item := range v.AsArray().All {
			plain, err := plainValue(item, p.Index(i))
			if err != nil {
				return nil, err
			}
			items = append(items, plain)
		}
		return items, nil
	case v.IsMap():
		m := map[string]any{}
		for k, item := range v.AsMap().AllStable {
			plain, err := plainValue(item, p.Child(k))
			if err != nil {
				return nil, err
			}
			m[k] = plain
		}
		return m, nil
	}
	return nil, field.TypeInvalid(p, fmt.Sprintf("%v", v), "must be a string, number, boolean, list or object")
}
