// Package provider serves the Platform component (gpu-tenancy:index:Platform) to Pulumi programs in any language: a
// component provider whose Construct decodes the input properties with the stack config's own decoder
// (platform.Load, errors named as properties), then builds the same component a Go program builds.
package provider

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"

	// A program in any language may build any cloud.
	_ "github.com/gpu-tenancy/gpu-tenancy/components/flavours"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil/rpcerror"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	perrors "github.com/pulumi/pulumi/sdk/v3/go/pulumi/errors"
	comProvider "github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Name is the package name: the plugin is pulumi-resource-gpu-tenancy.
const Name = "gpu-tenancy"

// Version is the provider's version, as the schema states it.
const Version = "0.1.0"

// schemaJSON is the committed schema (make schema writes it; TestSchemaIsCurrent fails when it drifts).
//
//go:embed schema.json
var schemaJSON string

// New is the provider.
func New() p.Provider {
	return p.Provider{
		GetSchema: func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error) {
			return p.GetSchemaResponse{Schema: schemaJSON}, nil
		},
		Construct: construct,
	}
}

func construct(ctx context.Context, req p.ConstructRequest) (p.ConstructResponse, error) {
	if typ := string(req.Urn.Type()); typ != platform.Type {
		return p.ConstructResponse{}, fmt.Errorf("unknown component type %s: this provider serves %s", typ, platform.Type)
	}
	src, errs := newPropertySource(req.Inputs)
	if len(errs) > 0 {
		// A value not known yet cannot be checked, nor can what refers to it.
		return p.ConstructResponse{}, inputError(errs)
	}
	args, err := platform.Load(src, platform.PropertyKeys)
	var argsErr *platform.ArgsError
	if errors.As(err, &argsErr) {
		return p.ConstructResponse{}, inputError(argsErr.Errs)
	}
	if err != nil {
		return p.ConstructResponse{}, err
	}
	return p.ProgramConstruct(ctx, req, func(ctx *pulumi.Context, _, name string, _ comProvider.ConstructInputs,
		opts pulumi.ResourceOption) (*comProvider.ConstructResult, error) {
		component, err := platform.NewPlatform(ctx, name, args, opts)
		if errors.As(err, &argsErr) {
			return nil, inputError(argsErr.Errs)
		}
		if err != nil {
			return nil, err
		}
		return comProvider.NewConstructResult(component)
	})
}

// inputError reports each problem at its property path, which the engine prints with the value it was given: a
// gRPC status with the problems as details, as the Go SDK sends an error of a component's constructor
// (rpcerror.WrapDetailedError, pulumi sdk v3.274.1 go/pulumi/provider.go construct).
func inputError(errs field.ErrorList) error {
	details := make([]perrors.InputPropertyErrorDetails, len(errs))
	for i, e := range errs {
		details[i] = perrors.InputPropertyErrorDetails{PropertyPath: propertyPath(e.Field), Reason: e.ErrorBody()}
	}
	return rpcerror.WrapDetailedError(perrors.NewInputPropertiesError(fmt.Sprintf("invalid Platform arguments (%d problems)", len(errs)), details...))
}

var mapKey = regexp.MustCompile(`\[([^\]"]*[^\]0-9"][^\]"]*)\]`)

// propertyPath writes a field path (tenants[0].gpuQuota[gpu-slice]) as the engine's property paths spell it, map
// keys quoted (tenants[0].gpuQuota["gpu-slice"]), so the engine finds the value to show.
func propertyPath(fieldPath string) string { return mapKey.ReplaceAllString(fieldPath, `["$1"]`) }
