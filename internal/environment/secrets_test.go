package environment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// A secret config value (a kubeconfig with its credentials) reaches the stack whole, encrypted, and never on a pulumi
// command line, where every user of the machine reads it (/proc/<pid>/cmdline).
func TestASecretConfigValueNeverStandsOnTheCommandLine(t *testing.T) {
	pulumiCLI := builtPulumi(t)
	t.Setenv(BackendEnv, "")
	// The tools directory: a pulumi that records its arguments, then runs the real one.
	tools := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tools, "bin"), 0o700))
	argsLog := filepath.Join(tools, "args.log")
	wrapper := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %q\nexec %q \"$@\"\n", argsLog, pulumiCLI)
	require.NoError(t, os.WriteFile(filepath.Join(tools, "bin", "pulumi"), []byte(wrapper), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(tools, "pulumi-home"), 0o700))

	root := localStackAsLocal(t)
	const secret = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: do-not-print-me\n"
	key := platform.ConfigNamespace + ":kubeconfig"
	s, err := Open(context.Background(), Options{RepoRoot: root, Stack: "local", Tools: tools, Passphrase: "test",
		Backend: "file://" + t.TempDir(), WorkDir: t.TempDir(), SecretConfig: map[string]string{key: secret},
		// The secret replaces the stack file's kubeconfig path, as the bench and the end-to-end tests do.
		Config: map[string]string{platform.ConfigNamespace + ":existing": "{}"}})
	require.NoError(t, err)

	got, err := s.GetConfig(context.Background(), key)
	require.NoError(t, err)
	assert.True(t, got.Secret, "kept as a secret")
	assert.Equal(t, secret, got.Value, "whole, its last newline included")
	args, err := os.ReadFile(argsLog)
	require.NoError(t, err)
	assert.Contains(t, string(args), "config set --stack local --secret --raw "+key, "set through the CLI")
	assert.NotContains(t, string(args), "do-not-print-me")
}

// The platform stack's secrets must decrypt with the run's credentials before any stack of its environment runs: a
// group whose run holds another passphrase would read the platform's kubeconfig as empty instead of failing. Reading
// the platform's state to compare the providers decrypts it, and refuses, naming the variable to set.
func TestAnEnvironmentWhosePlatformSecretsDoNotDecryptIsRefused(t *testing.T) {
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "")
	o := inlineOptions(t, localStackProject(t, "", "2"), func(ctx *pulumi.Context) error {
		// The platform stack's one output, a secret as its kubeconfig is.
		ctx.Export("kubeconfig", pulumi.ToSecret(pulumi.String("apiVersion: v1\nkind: Config\n")))
		return nil
	})
	o.Backend = "file://" + t.TempDir()
	ctx := context.Background()
	open := func(passphrase string) (*Environment, error) {
		o.Passphrase = passphrase
		return OpenEnvironment(ctx, o)
	}
	env, err := open("the-platforms-passphrase")
	require.NoError(t, err, "no state yet: nothing to decrypt")
	require.Len(t, env.Stacks, 3)
	_, err = env.Stacks[0].Up(ctx)
	require.NoError(t, err)

	_, err = open("another-passphrase")
	require.ErrorContains(t, err, "stack prod: reading its state")
	require.ErrorContains(t, err, "incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE")

	_, err = open("the-platforms-passphrase")
	require.NoError(t, err, "the passphrase the platform stack was created with")
}
