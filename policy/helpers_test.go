package main

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// unknown stands for a value a preview does not know yet (a computed output).
var unknown = property.New(property.Computed)

// secretOf marks a value secret, as the engine hands a policy a secret whose value it knows.
type secretOf struct{ v any }

// val builds a property value from Go literals: maps, slices, strings, bools, numbers, property values, secretOf.
func val(v any) property.Value {
	switch v := v.(type) {
	case nil:
		return property.Value{}
	case property.Value:
		return v
	case secretOf:
		return val(v.v).WithSecret(true)
	case string:
		return property.New(v)
	case bool:
		return property.New(v)
	case int:
		return property.New(float64(v))
	case float64:
		return property.New(v)
	case map[string]any:
		m := make(map[string]property.Value, len(v))
		for k, e := range v {
			m[k] = val(e)
		}
		return property.New(m)
	case []any:
		a := make([]property.Value, len(v))
		for i, e := range v {
			a[i] = val(e)
		}
		return property.New(a)
	}
	panic(fmt.Sprintf("val: unsupported %T", v))
}

// props builds a property map from a Go map literal.
func props(m map[string]any) property.Map {
	if m == nil {
		return property.Map{}
	}
	return val(m).AsMap()
}

// urnOf is the URN of a top-level resource of the test stack.
func urnOf(typ, name string) string { return "urn:pulumi:test::gpu-tenancy::" + typ + "::" + name }

// res builds a resource of type typ named name with the given properties.
func res(typ, name string, m map[string]any) resource {
	return resource{Type: typ, Name: name, URN: urnOf(typ, name), Props: props(m)}
}

// messages are the violations' messages.
func messages(vs []violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Message
	}
	return out
}
