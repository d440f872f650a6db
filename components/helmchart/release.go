package helmchart

import (
	"errors"
	"reflect"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The kubernetes provider's Helm release (kubernetes:helm.sh/v3:Release) and YAML file (kubernetes:yaml/v2:ConfigFile),
// declared here with the fields this project sets. The SDK's own packages for them (helm/v3, yaml/v2) import every API
// group of the SDK to register its types (through its yaml package, pulumi-kubernetes sdk v4.32.0 go/kubernetes/yaml
// and yaml/v2/kinds.go), about 65 packages and, on 2 cores, some six minutes of a cold build that no program here uses.
// The type tokens, input names and the provider's version are the SDK's (helm/v3/release.go NewRelease,
// yaml/v2/configFile.go NewConfigFile), so the engine sees the same resources.

// Release is a Helm release. Name is the release's name.
type Release struct {
	pulumi.CustomResourceState

	Name pulumi.StringPtrOutput `pulumi:"name"`
}

// ReleaseArgs are the inputs of a release, as the provider's schema names them.
type ReleaseArgs struct {
	Name       pulumi.StringPtrInput `pulumi:"name"`
	Namespace  pulumi.StringPtrInput `pulumi:"namespace"`
	Chart      pulumi.StringInput    `pulumi:"chart"`
	Version    pulumi.StringPtrInput `pulumi:"version"`
	MaxHistory pulumi.IntPtrInput    `pulumi:"maxHistory"`
	// RepositoryOpts says where a chart's repository is: {repo: <URL>}.
	RepositoryOpts pulumi.MapInput `pulumi:"repositoryOpts"`
	Values         pulumi.MapInput `pulumi:"values"`
	// Compat marks a release declared as the SDK declares it (NewRelease sets it).
	Compat pulumi.StringPtrInput `pulumi:"compat"`
}

type releaseArgs struct {
	Name           *string                `pulumi:"name"`
	Namespace      *string                `pulumi:"namespace"`
	Chart          string                 `pulumi:"chart"`
	Version        *string                `pulumi:"version"`
	MaxHistory     *int                   `pulumi:"maxHistory"`
	RepositoryOpts map[string]interface{} `pulumi:"repositoryOpts"`
	Values         map[string]interface{} `pulumi:"values"`
	Compat         *string                `pulumi:"compat"`
}

// ElementType is what the engine serialises the args as.
func (ReleaseArgs) ElementType() reflect.Type { return reflect.TypeOf((*releaseArgs)(nil)).Elem() }

// NewRelease declares a Helm release.
func NewRelease(ctx *pulumi.Context, name string, args *ReleaseArgs, opts ...pulumi.ResourceOption) (*Release, error) {
	if args == nil || args.Chart == nil {
		return nil, errors.New("helm release " + name + ": a chart is required")
	}
	args.Compat = pulumi.StringPtr("true")
	var r Release
	if err := ctx.RegisterResource("kubernetes:helm.sh/v3:Release", name, args, &r, utilities.PkgResourceDefaultOpts(opts)...); err != nil {
		return nil, err
	}
	return &r, nil
}

// ConfigFile is the objects of a YAML file, applied one by one (kubernetes:yaml/v2:ConfigFile).
type ConfigFile struct {
	pulumi.ResourceState

	Resources pulumi.ArrayOutput `pulumi:"resources"`
}

// ConfigFileArgs name the file: a path or a URL.
type ConfigFileArgs struct {
	File pulumi.StringInput `pulumi:"file"`
}

type configFileArgs struct {
	File string `pulumi:"file"`
}

// ElementType is what the engine serialises the args as.
func (ConfigFileArgs) ElementType() reflect.Type {
	return reflect.TypeOf((*configFileArgs)(nil)).Elem()
}

// NewConfigFile declares the objects of a YAML file, which the provider reads and registers.
func NewConfigFile(ctx *pulumi.Context, name string, args *ConfigFileArgs, opts ...pulumi.ResourceOption) (*ConfigFile, error) {
	if args == nil || args.File == nil {
		return nil, errors.New("config file " + name + ": a file is required")
	}
	var f ConfigFile
	if err := ctx.RegisterRemoteComponentResource("kubernetes:yaml/v2:ConfigFile", name, args, &f,
		utilities.PkgResourceDefaultOpts(opts)...); err != nil {
		return nil, err
	}
	return &f, nil
}
