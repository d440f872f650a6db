// Package mocktest runs Pulumi programs under the SDK's mocks and records every registration, so tests can assert
// on the inputs a component gives its children.
package mocktest

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Registration is one resource the program registered.
type Registration struct {
	Type   string
	Name   string
	Custom bool
	// Provider is the explicit provider reference ("<urn>::<id>"), empty for the default provider.
	Provider string
	// Parent is the parent's URN (the root stack's for top-level resources).
	Parent string
	Inputs resource.PropertyMap
	URN    string
}

// ParentName is the parent's logical name, empty when the parent is the root stack.
func (r Registration) ParentName() string {
	parent := resource.URN(r.Parent)
	if !parent.IsValid() || parent.QualifiedType() == resource.RootStackType {
		return ""
	}
	return parent.Name()
}

// ProviderName is the explicit provider's logical name, empty for the default provider.
func (r Registration) ProviderName() string {
	// A provider reference is "<urn>::<id>".
	i := strings.LastIndex(r.Provider, "::")
	if i < 0 {
		return ""
	}
	if urn := resource.URN(r.Provider[:i]); urn.IsValid() {
		return urn.Name()
	}
	return ""
}

// urnOf builds a registration's URN the way the mock monitor does: stack and project come from the parent, whose
// qualified type prefixes the resource's own unless the parent is the root stack.
func urnOf(parent, typ, name string) string {
	p := resource.URN(parent)
	if !p.IsValid() {
		return ""
	}
	parentType := tokens.Type("")
	if p.QualifiedType() != resource.RootStackType {
		parentType = p.QualifiedType()
	}
	return string(resource.NewURN(p.Stack(), p.Project(), parentType, tokens.Type(typ), name))
}

// Recorder is a pulumi.MockResourceMonitor that keeps every registration.
type Recorder struct {
	mu   sync.Mutex
	regs []Registration
	// Outputs lets a test fill computed outputs a program reads, keyed by type token.
	Outputs map[string]func(inputs resource.PropertyMap) resource.PropertyMap
}

// NewResource records the registration and echoes the inputs back as outputs.
func (r *Recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent := args.RegisterRPC.GetParent()
	if args.ReadRPC != nil {
		parent = args.ReadRPC.GetParent()
	}
	r.regs = append(r.regs, Registration{
		Type: args.TypeToken, Name: args.Name, Custom: args.Custom, Provider: args.Provider, Parent: parent,
		Inputs: args.Inputs, URN: urnOf(parent, args.TypeToken, args.Name),
	})
	outs := args.Inputs.Copy()
	if fill, ok := r.Outputs[args.TypeToken]; ok {
		for k, v := range fill(args.Inputs) {
			outs[k] = v
		}
	}
	return args.Name + "-id", outs, nil
}

// Call answers invokes with no result.
func (r *Recorder) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// All returns the registrations in a stable order (type, then name).
func (r *Recorder) All() []Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Registration(nil), r.regs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ByType returns the registrations of one type token.
func (r *Recorder) ByType(token string) []Registration {
	var out []Registration
	for _, reg := range r.All() {
		if reg.Type == token {
			out = append(out, reg)
		}
	}
	return out
}

// Get returns the registration of a type and name, or an error naming what was registered instead.
func (r *Recorder) Get(token, name string) (Registration, error) {
	var names []string
	for _, reg := range r.ByType(token) {
		if reg.Name == name {
			return reg, nil
		}
		names = append(names, reg.Name)
	}
	return Registration{}, fmt.Errorf("no %s named %q; registered: %v", token, name, names)
}

// Run runs program under mocks for project "gpu-tenancy" and the given stack, and returns what it registered.
func Run(stack string, program pulumi.RunFunc, rec *Recorder, opts ...pulumi.RunOption) error {
	return pulumi.RunErr(program, append([]pulumi.RunOption{pulumi.WithMocks("gpu-tenancy", stack, rec)}, opts...)...)
}

// WithConfig hands the program its stack config in-process (full keys such as "gpu-tenancy:tenants"), in place of
// the PULUMI_CONFIG environment variable; secrets lists the keys the program must treat as secret.
func WithConfig(values map[string]string, secrets []string) pulumi.RunOption {
	return func(info *pulumi.RunInfo) {
		info.Config, info.ConfigSecretKeys = values, secrets
	}
}
