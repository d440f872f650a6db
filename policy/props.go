package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// resource is what a check reads of one resource: its type token, URN, logical name and properties (inputs for a
// resource policy, outputs for the stack policy). Checks are plain functions over it, so tests build it by hand.
type resource struct {
	Type  string
	URN   string
	Name  string
	Props property.Map
}

// violation is one finding: the resource it is about and a message that names it and says the fix.
type violation struct {
	URN     string
	Message string
}

// Unknown values. The analyzer receives properties with unknowns kept (sdk v3.274.1 go/pulumi/policyx/server.go
// unmarshals with KeepUnknowns), so a preview hands a policy computed outputs it cannot read yet. A check treats a
// value it cannot see as "not applicable": it reports only what it can prove from known values. Secrets arrive with
// their payload (pkg v3.274.1 resource/plugin/analyzer_plugin.go filters with KeepSecrets), so a known secret is read
// like any value and only an unknown one is not applicable; messages never echo a secret (show).

// lookup follows keys through nested maps. known is false when the walk meets an unknown value; a missing key, or a
// value on the way that is not a map, gives a known null.
func lookup(m property.Map, keys ...string) (v property.Value, known bool) {
	v = property.New(m)
	for _, k := range keys {
		switch {
		case v.IsComputed():
			return property.Value{}, false
		case !v.IsMap():
			return property.Value{}, true
		}
		v = v.AsMap().Get(k)
	}
	return v, !v.IsComputed()
}

// str is v's string, when v is a known string.
func str(v property.Value) (string, bool) {
	if v.IsString() {
		return v.AsString(), true
	}
	return "", false
}

// isString reports whether v is the known string want.
func isString(v property.Value, want string) bool {
	s, ok := str(v)
	return ok && s == want
}

// elements are v's items when v is a known array; nil for null or anything else.
func elements(v property.Value) []property.Value {
	if v.IsArray() {
		return v.AsArray().AsSlice()
	}
	return nil
}

// entries are v's entries when v is a known map; nil for null or anything else.
func entries(v property.Value) map[string]property.Value {
	if v.IsMap() {
		return v.AsMap().AsMap()
	}
	return nil
}

// presence is what a check can tell about something it looks for: there, not there, or not knowable yet.
type presence int

const (
	absent presence = iota
	present
	unknowable
)

// findTaint looks in a list of taint objects ({key, value, effect}, as both pulumi-gcp's NodePoolNodeConfigTaint and
// pulumi-scaleway's PoolTaint spell them) for one with this key and effect, and this value unless value is "".
func findTaint(taints property.Value, key, value, effect string) presence {
	if taints.IsComputed() {
		return unknowable
	}
	result := absent
	for _, t := range elements(taints) {
		if t.IsComputed() {
			result = unknowable
			continue
		}
		if !t.IsMap() {
			continue
		}
		k, v, e := t.AsMap().Get("key"), t.AsMap().Get("value"), t.AsMap().Get("effect")
		keyMatches := k.IsComputed() || isString(k, key)
		valueMatches := value == "" || v.IsComputed() || isString(v, value)
		effectMatches := e.IsComputed() || isString(e, effect)
		switch {
		case isString(k, key) && (value == "" || isString(v, value)) && isString(e, effect):
			return present
		case keyMatches && valueMatches && effectMatches:
			result = unknowable
		}
	}
	return result
}

// show writes a value for a message: strings quoted, maps and lists in JSON-like form, secrets and unknowns masked.
func show(v property.Value) string {
	switch {
	case v.Secret():
		return "[secret]"
	case v.IsComputed():
		return "[unknown]"
	case v.IsNull():
		return "null"
	case v.IsString():
		return fmt.Sprintf("%q", v.AsString())
	case v.IsBool():
		return fmt.Sprint(v.AsBool())
	case v.IsNumber():
		return fmt.Sprint(v.AsNumber())
	case v.IsArray():
		parts := make([]string, 0, v.AsArray().Len())
		for _, e := range elements(v) {
			parts = append(parts, show(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.IsMap():
		m := entries(v)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%q: %s", k, show(m[k])))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "[value]"
}
