package pipeline

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// Run is the whole program: load and validate the stack config, then build the platform.
func Run(ctx *pulumi.Context) error {
	cfg, err := Load(contextSource{ctx})
	if err != nil {
		return err
	}
	_ = cfg
	return nil
}
