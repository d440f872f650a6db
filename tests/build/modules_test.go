// Package build_test checks how the repository's Go modules build together.
package build_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compiled lists the modules whose packages building the packages (with their tests) of the module in dir compiles,
// with the version each is selected at (a replacement's, where go.mod replaces it). -e: a package whose generated
// files are not in place yet still lists its imports.
func compiled(t *testing.T, dir string, packages ...string) map[string]string {
	t.Helper()
	const format = "{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}"
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-test", "-f", format}, packages...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list in %s: %s", dir, stderr.String())
	mods := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			mods[path] = version
		}
	}
	return mods
}

// The product's module and the component provider's (provider/, which requires it) select one version of every module
// both compile: a module at two versions compiles twice, and with it every package above it, the Pulumi and
// Kubernetes SDKs among them. A library's users get go.mod's versions, so the fix is in go.mod (`go get` in the
// product's module, then `go mod tidy` in both), not a go.work.
func TestTheProductAndTheProviderCompileOneVersionOfEachModule(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of two modules")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	product, provider := compiled(t, root, "./..."), compiled(t, filepath.Join(root, "provider"), "./...")
	assert.Empty(t, disagreements(product, provider, "provider/go.mod"), "modules at two versions: run `go get "+
		"<module>@<the higher version>` in the product's module, then `go mod tidy` there and in provider/")
	assert.Contains(t, provider, "github.com/pulumi/pulumi-kubernetes/sdk/v4", "the provider compiles the SDKs the product does")
}

// The local stack's tools (scripts/tools/localstack: etcd and the pulumi CLI; and
// scripts/tools/pulumi-resource-kubernetes, the kubernetes provider) select the product's version of every module
// they and the product compile, so a cold `make test` compiles the Kubernetes libraries, gRPC, OpenTelemetry and the
// Pulumi SDK once for the tools and the product's tests. The one exception: the provider's commit builds only against
// the pulumi/pkg of its time (v3.215.0: v3.274's codegen schema types changed), which needs the Pulumi SDK and
// the kubernetes Go SDK of its time too.
func TestTheLocalStackToolsCompileTheProductsVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of three modules")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	product := compiled(t, root, "./...")
	for _, tc := range []struct {
		module string
		shared []string
		own    []string
	}{
		{module: "localstack", shared: []string{"github.com/pulumi/pulumi/sdk/v3", "google.golang.org/grpc"}},
		{
			module: "pulumi-resource-kubernetes",
			shared: []string{"k8s.io/api", "k8s.io/client-go", "google.golang.org/grpc"},
			own:    []string{"github.com/pulumi/pulumi-kubernetes/sdk/v4", "github.com/pulumi/pulumi/sdk/v3"},
		},
	} {
		t.Run(tc.module, func(t *testing.T) {
			tools := compiled(t, filepath.Join(root, "scripts", "tools", tc.module), "tool", "./...")
			for _, path := range tc.own {
				assert.Contains(t, tools, path)
				delete(tools, path)
			}
			assert.Empty(t, disagreements(product, tools, "scripts/tools/"+tc.module+"/go.mod"), "modules at two "+
				"versions: `go get <module>@<the higher version>` in the module that selects the lower one, then `go mod "+
				"tidy` there (and in provider/ after the product's)")
			for _, path := range tc.shared {
				assert.Contains(t, tools, path, "the tools compile %s, as the product does", path)
			}
		})
	}
}

// disagreements names each module that both compile at different versions.
func disagreements(product, other map[string]string, otherGoMod string) []string {
	var disagree []string
	for path, version := range other {
		if want, ok := product[path]; ok && want != version && path != "github.com/gpu-tenancy/gpu-tenancy" {
			disagree = append(disagree, path+": "+want+" in go.mod, "+version+" in "+otherGoMod)
		}
	}
	sort.Strings(disagree)
	return disagree
}
