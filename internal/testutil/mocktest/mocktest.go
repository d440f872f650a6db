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
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// Registration is one resource the program registered.
type Registration struct {
	Type string
	Name string
	// Custom is false for components; the mock monitor also reports reads (Get functions) as not custom.
	Custom bool
	// Read is set for a resource the program reads (a Get function) rather than manages.
	Read bool
	// Remote is set for a component a provider builds (such as kubernetes:yaml/v2:ConfigFile); under mocks it has no
	// children.
	Remote bool
	// Provider is the explicit provider reference ("<urn>::<id>"), empty for the default provider.
	Provider string
	// Parent is the parent's URN (the root stack's for top-level resources).
	Parent string
	Inputs resource.PropertyMap
	URN    string
	// DeletedWith is the URN of the resource whose deletion removes this one, empty when unset.
	DeletedWith string
	// Dependencies are the URNs this registration (or read) explicitly depends on.
	Dependencies []string
	// ID is the physical id a read asks for (or an import adopts), empty otherwise.
	ID string
	// Request is the full register request, for resource options Registration does not lift out (such as
	// deleteBeforeReplace and ignoreChanges); nil for a read.
	Request *pulumirpc.RegisterResourceRequest
}

// ParentName is the parent's logical name, empty when the parent is the root stack.
func (r Registration) ParentName() string {
	parent := resource.URN(r.Parent)
	if !parent.IsValid() || parent.QualifiedType() == resource.RootStackType {
		return ""
	}
	return parent.Name()
}

// DependencyNames are the logical names of the resources this registration explicitly depends on.
func (r Registration) DependencyNames() []string {
	names := make([]string, len(r.Dependencies))
	for i, urn := range r.Dependencies {
		names[i] = resource.URN(urn).Name()
	}
	return names
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
	parent, deps := args.RegisterRPC.GetParent(), args.RegisterRPC.GetDependencies()
	if args.ReadRPC != nil {
		parent, deps = args.ReadRPC.GetParent(), args.ReadRPC.GetDependencies()
	}
	r.regs = append(r.regs, Registration{
		Type: args.TypeToken, Name: args.Name, Custom: args.Custom, Read: args.ReadRPC != nil,
		Remote: args.RegisterRPC.GetRemote(), Provider: args.Provider, Parent: parent, Inputs: args.Inputs,
		URN: urnOf(parent, args.TypeToken, args.Name), DeletedWith: args.RegisterRPC.GetDeletedWith(),
		Dependencies: deps, ID: args.ID, Request: args.RegisterRPC,
	})
	outs := args.Inputs.Copy()
	if fill, ok := r.Outputs[args.TypeToken]; ok {
		for k, v := range fill(args.Inputs) {
			outs[k] = v
		}
	}
	return args.Name + "-id", outs, nil
}

// ComputedOutputs fills the outputs the program reads that only a real provider would compute: endpoint and CA of a
// GKE cluster, the kubeconfig of a Kapsule cluster, the outputs of a referenced stack, and the kubeconfig a vCluster
// writes into its host Secret; with
// documentation addresses and fake credentials.
func ComputedOutputs() map[string]func(resource.PropertyMap) resource.PropertyMap {
	return map[string]func(resource.PropertyMap) resource.PropertyMap{
		"gcp:container/cluster:Cluster": func(resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{
				"endpoint": resource.NewStringProperty("203.0.113.10"),
				"masterAuth": resource.NewObjectProperty(resource.PropertyMap{
					"clusterCaCertificate": resource.NewStringProperty("bW9jay1jYQ=="),
				}),
			}
		},
		"scaleway:kubernetes/cluster:Cluster": func(resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{
				"apiserverUrl": resource.NewStringProperty("https://203.0.113.20:6443"),
				"kubeconfigs": resource.NewArrayProperty([]resource.PropertyValue{resource.NewObjectProperty(resource.PropertyMap{
					"configFile": resource.NewStringProperty("apiVersion: v1\nkind: Config\n# mock kubeconfig\n"),
					"host":       resource.NewStringProperty("https://203.0.113.20:6443"),
					"token":      resource.NewStringProperty("mock-token"),
				})}),
			}
		},
		// The platform stack's outputs, as a tenant group's stack reads them.
		"pulumi:pulumi:StackReference": func(in resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{"name": in["name"], "outputs": resource.NewObjectProperty(resource.PropertyMap{
				"kubeconfig": resource.MakeSecret(resource.NewStringProperty("apiVersion: v1\nkind: Config\n# mock kubeconfig\n")),
			})}
		},
		"kubernetes:core/v1:Secret": func(in resource.PropertyMap) resource.PropertyMap {
			if _, ok := in["data"]; ok {
				return nil
			}
			// A vCluster's exported kubeconfig: fake CA and client certificate, inline as vCluster writes them.
			return resource.PropertyMap{"data": resource.NewObjectProperty(resource.PropertyMap{
				"config": resource.NewStringProperty(vclusterKubeconfig),
			})}
		},
	}
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

// URNs returns the URNs of the registrations of a type with the given names, in that order, or an error naming the
// first that is missing.
func (r *Recorder) URNs(token string, names ...string) ([]string, error) {
	urns := make([]string, 0, len(names))
	for _, name := range names {
		reg, err := r.Get(token, name)
		if err != nil {
			return nil, err
		}
		urns = append(urns, reg.URN)
	}
	return urns, nil
}

// Strays lists, as "type name", the custom resources whose parent is not the component of the given name.
func (r *Recorder) Strays(component string) []string {
	var out []string
	for _, reg := range r.All() {
		if reg.Custom && reg.ParentName() != component {
			out = append(out, reg.Type+" "+reg.Name)
		}
	}
	return out
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

// vclusterKubeconfig is base64 of a kubeconfig as a vCluster exports it, with fake credentials.
const vclusterKubeconfig = "YXBpVmVyc2lvbjogdjEKa2luZDogQ29uZmlnCmNsdXN0ZXJzOgotIG5hbWU6IHZjCiAgY2x1c3Rlcjoge3NlcnZlcjogImh0dHBzOi8vbG9jYWxob3N0Ojg0NDMiLCBjZXJ0aWZpY2F0ZS1hdXRob3JpdHktZGF0YTogYlc5amF5MWpZUT09fQpjb250ZXh0czoKLSBuYW1lOiB2YwogIGNvbnRleHQ6IHtjbHVzdGVyOiB2YywgdXNlcjogdmN9CmN1cnJlbnQtY29udGV4dDogdmMKdXNlcnM6Ci0gbmFtZTogdmMKICB1c2VyOiB7Y2xpZW50LWNlcnRpZmljYXRlLWRhdGE6IGJXOWpheTFqWlhKMCwgY2xpZW50LWtleS1kYXRhOiBiVzlqYXkxclpYaz19Cg=="
