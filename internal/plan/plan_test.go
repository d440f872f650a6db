package plan

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
)

const (
	keySize     = "gpu-tenancy:size"
	keyPassword = "gpu-tenancy:password"
	// The placeholder a caller substitutes for a secure value it cannot decrypt.
	passwordPlaintext = "placeholder-password"
	kubeconfig        = "apiVersion: v1\nkind: Config\n"
)

var boxConfig = Config{
	Values:  map[string]string{keySize: "3", keyPassword: passwordPlaintext},
	Secrets: []string{keyPassword},
}

// boxProgram is the shape of the real program in small: an explicit kubernetes provider with a secret kubeconfig,
// a component carrying it, a nested component, and children whose inputs come from plain and secret config.
func boxProgram(ctx *pulumi.Context) error {
	var k8s pulumi.ProviderResourceState
	err := ctx.RegisterResource("pulumi:providers:kubernetes", "cluster-k8s",
		pulumi.Map{"kubeconfig": pulumi.ToSecret(pulumi.String(kubeconfig))}, &k8s)
	if err != nil {
		return err
	}
	var pet pulumi.CustomResourceState
	if err := ctx.RegisterResource("random:index/randomPet:RandomPet", "pet", pulumi.Map{}, &pet); err != nil {
		return err
	}

	var box pulumi.ResourceState
	if err := ctx.RegisterComponentResource("gpu-tenancy:test:Box", "box", &box, pulumi.Providers(&k8s)); err != nil {
		return err
	}
	size, _ := ctx.GetConfig(keySize)
	raw, _ := ctx.GetConfig(keyPassword)
	var password pulumi.StringInput = pulumi.String(raw)
	if ctx.IsConfigSecret(keyPassword) {
		password = pulumi.ToSecret(password).(pulumi.StringOutput)
	}
	var secret pulumi.CustomResourceState
	err = ctx.RegisterResource("kubernetes:core/v1:Secret", "box-secret", pulumi.Map{
		"metadata":   pulumi.Map{"labels": pulumi.StringMap{"z": pulumi.String("1"), "a": pulumi.String("2")}},
		"stringData": pulumi.Map{"password": password, "size": pulumi.String(size)},
	}, &secret, pulumi.Parent(&box))
	if err != nil {
		return err
	}

	var kubeconfigSecret pulumi.CustomResourceState
	err = ctx.ReadResource("kubernetes:core/v1:Secret", "box-kubeconfig", pulumi.ID("box/vc-box"), nil,
		&kubeconfigSecret, pulumi.Parent(&box))
	if err != nil {
		return err
	}

	var manifests pulumi.ResourceState
	err = ctx.RegisterRemoteComponentResource("kubernetes:yaml/v2:ConfigFile", "box-manifests",
		pulumi.Map{"file": pulumi.String("https://example.com/installer.yaml")}, &manifests, pulumi.Parent(&box))
	if err != nil {
		return err
	}

	var inner pulumi.ResourceState
	if err := ctx.RegisterComponentResource("gpu-tenancy:test:Inner", "box-inner", &inner, pulumi.Parent(&box)); err != nil {
		return err
	}
	for _, ns := range []string{"box-b", "box-a"} {
		var res pulumi.CustomResourceState
		err := ctx.RegisterResource("kubernetes:core/v1:Namespace", ns,
			pulumi.Map{"metadata": pulumi.Map{"name": pulumi.String(ns)}}, &res, pulumi.Parent(&inner))
		if err != nil {
			return err
		}
	}
	if err := ctx.RegisterResourceOutputs(&inner, pulumi.Map{}); err != nil {
		return err
	}
	return ctx.RegisterResourceOutputs(&box, pulumi.Map{})
}

func makeBox(t *testing.T) *Plan {
	t.Helper()
	p, err := Make("dev", boxConfig, boxProgram, nil)
	require.NoError(t, err)
	return p
}

func find(t *testing.T, p *Plan, typ, name string) Resource {
	t.Helper()
	for _, r := range p.Resources {
		if r.Type == typ && r.Name == name {
			return r
		}
	}
	require.Failf(t, "resource missing from plan", "%s %s", typ, name)
	return Resource{}
}

func TestMakeListsEveryRegistrationSortedWithParentAndProvider(t *testing.T) {
	p := makeBox(t)
	type row struct {
		Type, Name, Parent, Provider string
		Read                         bool
	}
	var got []row
	for _, r := range p.Resources {
		got = append(got, row{r.Type, r.Name, r.Parent, r.Provider, r.Read})
	}
	assert.Equal(t, "dev", p.Stack)
	assert.Equal(t, []row{
		{"gpu-tenancy:test:Box", "box", "", "", false},
		{"gpu-tenancy:test:Inner", "box-inner", "box", "", false},
		{"kubernetes:core/v1:Namespace", "box-a", "box-inner", "cluster-k8s", false},
		{"kubernetes:core/v1:Namespace", "box-b", "box-inner", "cluster-k8s", false},
		{"kubernetes:core/v1:Secret", "box-kubeconfig", "box", "cluster-k8s", true},
		{"kubernetes:core/v1:Secret", "box-secret", "box", "cluster-k8s", false},
		{"kubernetes:yaml/v2:ConfigFile", "box-manifests", "box", "cluster-k8s", false},
		{"pulumi:providers:kubernetes", "cluster-k8s", "", "", false},
		{"random:index/randomPet:RandomPet", "pet", "", "", false},
	}, got)
}

func TestMakeResolvesInputs(t *testing.T) {
	p := makeBox(t)
	tests := []struct {
		name          string
		typ, resource string
		path          []string
		want          any
	}{
		{"plain config value reaches the program", "kubernetes:core/v1:Secret", "box-secret",
			[]string{"stringData", "size"}, "3"},
		{"secret config value is masked", "kubernetes:core/v1:Secret", "box-secret",
			[]string{"stringData", "password"}, Secret},
		{"nested objects stay nested", "kubernetes:core/v1:Secret", "box-secret",
			[]string{"metadata", "labels"}, map[string]any{"a": "2", "z": "1"}},
		{"provider kubeconfig is masked", "pulumi:providers:kubernetes", "cluster-k8s",
			[]string{"kubeconfig"}, Secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got any = find(t, p, tt.typ, tt.resource).Inputs
			for _, key := range tt.path {
				obj, ok := got.(map[string]any)
				require.Truef(t, ok, "%v is not an object at %q", got, key)
				got = obj[key]
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestJSONNeverHoldsSecretPlaintext(t *testing.T) {
	doc, err := makeBox(t).JSON()
	require.NoError(t, err)
	for _, plaintext := range []string{passwordPlaintext, "kind: Config"} {
		assert.NotContains(t, string(doc), plaintext)
	}
	assert.Contains(t, string(doc), `"password": "[secret]"`)
}

func TestJSONShowsInputlessComponentWithEmptyInputs(t *testing.T) {
	doc, err := makeBox(t).JSON()
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"type": "gpu-tenancy:test:Box",
      "name": "box",
      "parent": "",
      "provider": "",
      "inputs": {}`)
}

func TestJSONMarksReadResourcesOnly(t *testing.T) {
	doc, err := makeBox(t).JSON()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(doc), `"read": true`))
	assert.NotContains(t, string(doc), `"read": false`)
}

// manyProgram registers resources from concurrent goroutines, so registrations reach the monitor in a different
// order from run to run.
func manyProgram(ctx *pulumi.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			name := fmt.Sprintf("res-%02d", (i*7)%len(errs))
			var res pulumi.CustomResourceState
			errs[i] = ctx.RegisterResource("test:index:Thing", name,
				pulumi.Map{"labels": pulumi.StringMap{"b": pulumi.String(name), "a": pulumi.String(name)}}, &res)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func TestJSONIsByteIdenticalAcrossRuns(t *testing.T) {
	for _, program := range []pulumi.RunFunc{boxProgram, manyProgram} {
		var docs [][]byte
		for range 3 {
			p, err := Make("dev", boxConfig, program, nil)
			require.NoError(t, err)
			doc, err := p.JSON()
			require.NoError(t, err)
			docs = append(docs, doc)
		}
		assert.Equal(t, string(docs[0]), string(docs[1]))
		assert.Equal(t, string(docs[0]), string(docs[2]))
	}
}

func TestJSONKeepsHTMLCharactersAndEndsInNewline(t *testing.T) {
	p := &Plan{Stack: "dev", Resources: []Resource{{
		Type: "kubernetes:resource.k8s.io/v1:DeviceClass", Name: "gpu",
		Inputs: map[string]any{"expression": `device.capacity["memory"] > 1 && x < 2`},
	}}}
	doc, err := p.JSON()
	require.NoError(t, err)
	assert.Contains(t, string(doc), `device.capacity[\"memory\"] > 1 && x < 2`)
	assert.Equal(t, byte('\n'), doc[len(doc)-1])
}

func TestMakeFailsWithTheProgramError(t *testing.T) {
	invalid := errors.New("invalid stack config (1 problems)")
	p, err := Make("dev", Config{}, func(*pulumi.Context) error { return invalid }, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "planning stack dev")
	assert.ErrorContains(t, err, invalid.Error())
	assert.Nil(t, p)
}

func TestMakeUsesTheCallersRecorder(t *testing.T) {
	rec := &mocktest.Recorder{}
	_, err := Make("dev", boxConfig, boxProgram, rec)
	require.NoError(t, err)
	_, err = rec.Get("kubernetes:core/v1:Secret", "box-secret")
	assert.NoError(t, err)
}
