// Package plan runs a Pulumi program offline under mocks and writes what it would register as a stable document:
// a plan that changes exactly when the program's resources or their inputs change, so a diff of it reviews an
// infrastructure change without cloud credentials.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

// Resource is one registration as the plan document shows it.
type Resource struct {
	// Type is the type token, e.g. "kubernetes:core/v1:Namespace" or "pulumi:providers:kubernetes".
	Type string `json:"type"`
	Name string `json:"name"`
	// Parent is the parent's name, empty for top-level resources.
	Parent string `json:"parent"`
	// Provider is the explicit provider's name, empty for the default provider and for the program's own components.
	Provider string `json:"provider"`
	// Inputs are the resolved input properties: secrets read "[secret]", unknowns "[unknown]".
	Inputs map[string]any `json:"inputs"`
	// Read marks a resource the program reads (a Get function) instead of managing it; omitted when false.
	Read bool `json:"read,omitempty"`

	// leaf is set for what the tree counts as a resource rather than opening as a component.
	leaf      bool
	urn       string
	parentURN string
}

// Plan is everything a program registers for one stack, sorted by type, name and URN.
type Plan struct {
	Stack     string     `json:"stack"`
	Resources []Resource `json:"resources"`
}

// Config is the stack config handed to the program: full keys ("gpu-tenancy:tenants") to raw values, and the keys
// whose values are secret.
type Config struct {
	Values  map[string]string
	Secrets []string
}

// Make runs program under mocks for stack with cfg and returns its plan. rec receives the registrations; a caller
// sets rec.Outputs when the program reads outputs that a provider would compute.
func Make(stack string, cfg Config, program pulumi.RunFunc, rec *mocktest.Recorder) (*Plan, error) {
	if program == nil {
		return nil, errors.New("planning stack " + stack + ": no program")
	}
	if rec == nil {
		rec = &mocktest.Recorder{}
	}
	if err := mocktest.Run(stack, program, rec, mocktest.WithConfig(cfg.Values, cfg.Secrets)); err != nil {
		return nil, fmt.Errorf("planning stack %s: %w", stack, err)
	}
	return FromRegistrations(stack, rec.All()), nil
}

// FromRegistrations builds the plan of recorded registrations.
func FromRegistrations(stack string, regs []mocktest.Registration) *Plan {
	p := &Plan{Stack: stack, Resources: make([]Resource, 0, len(regs))}
	for _, reg := range regs {
		p.Resources = append(p.Resources, Resource{
			Type: reg.Type, Name: reg.Name, Parent: reg.ParentName(), Provider: reg.ProviderName(),
			Inputs: inputs(reg.Inputs), Read: reg.Read, urn: reg.URN,
			// A read resource and a component a provider builds count as resources: neither has children here.
			leaf:      reg.Custom || reg.Read || reg.Remote,
			parentURN: reg.Parent,
		})
	}
	sort.SliceStable(p.Resources, func(i, j int) bool {
		a, b := p.Resources[i], p.Resources[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.urn < b.urn
	})
	return p
}

// JSON is the plan document: indented, map keys sorted, HTML characters left as they are (Helm values and CEL
// expressions hold "<", ">" and "&"), ending in a newline.
func (p *Plan) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding the plan of stack %s: %w", p.Stack, err)
	}
	return buf.Bytes(), nil
}
