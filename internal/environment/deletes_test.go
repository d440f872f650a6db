package environment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldTenant is an inline program whose group stack prod.tenants-0 holds tenant legal-ai, as the platform's program
// registers a tenant (protected), and nothing else; no cluster is read.
func heldTenant(ctx *pulumi.Context) error {
	if ctx.Stack() != "prod.tenants-0" {
		return nil
	}
	var tenant pulumi.ResourceState
	return ctx.RegisterComponentResource(tenantType, "legal-ai", &tenant, pulumi.Protect(true))
}

// groupedWithTenant is environment prod of the local stack file in two groups, brought up with legal-ai (which the
// file lists) held by group 0; it returns the environment's options and the state directory.
func groupedWithTenant(t *testing.T) (Options, string) {
	t.Helper()
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "test")
	root := localStackProject(t, "backend:\n  url: file://./state\n", "2")
	o := inlineOptions(t, root, heldTenant)
	env, err := OpenEnvironment(context.Background(), o)
	require.NoError(t, err)
	for _, s := range env.Stacks {
		_, err := s.Up(context.Background())
		require.NoError(t, err)
	}
	return o, filepath.Join(root, "state")
}

func heldBy(t *testing.T, o Options, stack string) []string {
	t.Helper()
	env, err := OpenEnvironment(context.Background(), o)
	require.NoError(t, err)
	for _, s := range env.all {
		if s.opts.Stack == stack {
			held, err := s.Tenants(context.Background())
			require.NoError(t, err)
			return held
		}
	}
	t.Fatalf("no stack %s", stack)
	return nil
}

// A destroy deletes a tenant the stack file lists only when its command names it: not the whole environment's, not
// one group's (--only), and the platform stack alone not at all while a group holds tenants.
func TestADestroyDeletesOnlyTheListedTenantsItNames(t *testing.T) {
	o, _ := groupedWithTenant(t)
	ctx := context.Background()
	open := func(only string, named ...string) *Environment {
		env, err := OpenEnvironment(ctx, o)
		require.NoError(t, err)
		if only != "" {
			require.NoError(t, env.Only(only))
		}
		env.DeleteTenants = named
		return env
	}
	for _, tc := range []struct {
		name string
		env  *Environment
		want string
	}{
		{"the whole environment, naming nobody", open(""), "this destroy deletes tenants legal-ai, which the stack file lists, " +
			"with their namespaces, volumes and vClusters: name each of them (--delete-tenants legal-ai)"},
		{"the whole environment, naming another tenant", open("", "research-ai"), "this destroy deletes tenants legal-ai,"},
		{"its group alone", open("prod.tenants-0"), "this destroy deletes tenants legal-ai,"},
		{"the platform alone under its groups", open("prod", "legal-ai"),
			"destroy of the platform stack prod alone: group stack prod.tenants-0 still holds tenants legal-ai"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.env.Destroy(ctx)
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-0"), "nothing is deleted")
			assert.Empty(t, tc.env.interrupted(), "and nothing recorded as under way")
		})
	}
	t.Run("named, it goes", func(t *testing.T) {
		env := open("", "legal-ai")
		_, err := env.Destroy(ctx)
		require.NoError(t, err)
		assert.Empty(t, heldBy(t, o, "prod.tenants-0"))
		assert.Empty(t, env.interrupted(), "a finished destroy leaves no record")
	})
}

// A destroy that fails part-way stays recorded, for the environment and for the stack that failed: an up is refused
// (it would recreate part of what went), a recovery without the destroy's confirmation is refused, and one with it
// finishes the destroy and clears the records.
func TestAFailedDestroyIsResumedNotUndone(t *testing.T) {
	o, state := groupedWithTenant(t)
	ctx := context.Background()
	host, err := os.Hostname()
	require.NoError(t, err)
	// A lock of a process that runs (this one) makes the group's engine refuse to start.
	lockDir := filepath.Join(state, ".pulumi", "locks", "organization", projectName, "prod.tenants-0")
	require.NoError(t, os.MkdirAll(lockDir, 0o700))
	lock := filepath.Join(lockDir, "held.json")
	require.NoError(t, os.WriteFile(lock, fmt.Appendf(nil, `{"pid":%d,"hostname":%q}`, os.Getpid(), host), 0o600))

	env, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	env.DeleteTenants = []string{"legal-ai"}
	_, err = env.Destroy(ctx)
	require.Error(t, err, "the group's destroy fails on the lock")
	assert.Equal(t, OpDestroy, env.interrupted(), "the environment's destroy stays recorded")
	group := env.Stacks[1]
	require.Equal(t, "prod.tenants-0", group.opts.Stack)
	assert.Equal(t, OpDestroy, group.Interrupted(), "so does the group's own")
	assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-0"))

	_, err = env.Up(ctx)
	require.ErrorContains(t, err, "a destroy of environment prod did not finish")
	assert.ErrorContains(t, err, "gpu-tenancy recover --op up prod")

	unconfirmed, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	require.ErrorContains(t, unconfirmed.Recover(ctx, ""), "--delete-tenants legal-ai")
	assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-0"), "a recovery asked for nothing deletes nothing")

	require.NoError(t, os.Remove(lock))
	confirmed, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	confirmed.DeleteTenants = []string{"legal-ai"}
	require.NoError(t, confirmed.Recover(ctx, ""))
	assert.Empty(t, heldBy(t, o, "prod.tenants-0"))
	assert.Empty(t, confirmed.interrupted(), "the finished destroy leaves no record")
	assert.Empty(t, confirmed.Stacks[1].Interrupted())
}

// A preview opens the stacks without creating any: a group stack the backend does not hold yet is left out and
// named, and a preview of it alone (a CI job) is a MissingStackError, with no stack created.
func TestAPreviewCreatesNoStack(t *testing.T) {
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "test")
	root := localStackProject(t, "backend:\n  url: file://./state\n", "2")
	ctx := context.Background()
	o := inlineOptions(t, root, func(ctx *pulumi.Context) error { return nil })
	platformOnly := o
	platformOnly.Stack = "prod"
	st, err := Open(ctx, platformOnly)
	require.NoError(t, err)
	_, err = st.Up(ctx)
	require.NoError(t, err)

	o.NoCreate = true
	env, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, []string{"prod.tenants-0", "prod.tenants-1"}, env.Missing)
	_, err = env.Preview(ctx)
	require.NoError(t, err)
	var missing *MissingStackError
	require.ErrorAs(t, env.Only("prod.tenants-1"), &missing)
	assert.Equal(t, "prod.tenants-1", missing.Stack)
	matches, err := filepath.Glob(filepath.Join(root, "state", ".pulumi", "stacks", "gpu-tenancy", "prod.tenants-*"))
	require.NoError(t, err)
	assert.Empty(t, matches, "no group stack was created on the backend")
}

// A tenant leaves a stack only when the stack file retires it: its entry lost, preview and up refuse and the state
// keeps it; retired, the preview lists what the up deletes and previews the rest, and the up deletes it.
func TestATenantLeavesAStackOnlyRetired(t *testing.T) {
	t.Setenv(BackendEnv, "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "test")
	root := localStackProject(t, "backend:\n  url: file://./state\n", "0")
	ctx := context.Background()
	withGone := func(ctx *pulumi.Context) error {
		var tenant, child pulumi.ResourceState
		if err := ctx.RegisterComponentResource(tenantType, "gone-ai", &tenant, pulumi.Protect(true)); err != nil {
			return err
		}
		return ctx.RegisterComponentResource("gpu-tenancy:test:Part", "gone-ai-part", &child, pulumi.Parent(&tenant))
	}
	o := inlineOptions(t, root, withGone)
	st, err := Open(ctx, o)
	require.NoError(t, err)
	_, err = st.Up(ctx)
	require.NoError(t, err)

	o.Program = func(*pulumi.Context) error { return nil }
	st, err = Open(ctx, o)
	require.NoError(t, err)
	_, err = st.Preview(ctx)
	require.ErrorContains(t, err, "holds tenant gone-ai, which the stack file lists neither in tenants nor in retiredTenants")
	_, err = st.Up(ctx)
	require.ErrorContains(t, err, "holds tenant gone-ai")
	held, err := st.Tenants(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"gone-ai"}, held, "nothing is deleted for a lost line")

	var progress strings.Builder
	o.Config[platform.ConfigNamespace+":retiredTenants"] = `["gone-ai"]`
	o.Progress = &progress
	st, err = Open(ctx, o)
	require.NoError(t, err)
	_, err = st.Preview(ctx)
	require.NoError(t, err, "the preview runs without the retired tenant's deletes")
	assert.Contains(t, progress.String(), "tenant gone-ai is retired (retiredTenants): the up deletes")
	assert.Contains(t, progress.String(), "- delete gpu-tenancy:test:Part gone-ai-part")
	held, err = st.Tenants(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"gone-ai"}, held, "a preview deletes nothing")
	_, err = st.Up(ctx)
	require.NoError(t, err)
	held, err = st.Tenants(ctx)
	require.NoError(t, err)
	assert.Empty(t, held, "the up deletes the retired tenant")
}

// A move that fails is undone from its backups; when putting one of them back fails too, the move says so instead of
// "as before", names the stack and the command that finishes the restore by hand, and that command does finish it.
func TestAMoveWhoseRestoreFailsSaysHowToFinishByHand(t *testing.T) {
	o, _ := groupedWithTenant(t)
	ctx := context.Background()
	env, err := OpenEnvironment(ctx, o)
	require.NoError(t, err)
	stackFile, err := os.ReadFile(env.opts.StackFile)
	require.NoError(t, err)
	env.restoreState = func(ctx context.Context, s *Stack, state apitype.UntypedDeployment) error {
		if s.opts.Stack == "prod.tenants-1" {
			return errors.New("the backend refused the write")
		}
		return s.Import(ctx, state)
	}
	// heldTenant builds legal-ai in group 0 only, so group 1's preview after the move would delete it, protected: the
	// move is refused and undone.
	_, err = env.Move(ctx, []string{"legal-ai"}, 1, false)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `Tenant::legal-ai" cannot be deleted`, "the move's own failure comes first")
	assert.Contains(t, msg, "the move was undone only in part")
	assert.NotContains(t, msg, "as before")
	command := regexp.MustCompile(`stack prod\.tenants-1 was not restored \(the backend refused the write\): run (pulumi stack import --stack prod\.tenants-1 --file (\S+))`).FindStringSubmatch(msg)
	require.NotNil(t, command, "the failed restore is named with its command: %s", msg)
	assert.Contains(t, msg, BackendEnv+"="+env.opts.Backend, "and the backend it runs against")
	assert.NotContains(t, msg, "prod.tenants-0 was not restored")
	assert.FileExists(t, command[2])

	after, err := os.ReadFile(env.opts.StackFile)
	require.NoError(t, err)
	assert.Equal(t, string(stackFile), string(after), "the stack file is restored")
	assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-0"), "the source is restored")
	assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-1"), "the destination still holds the move's copy, as the message says")

	byHand := exec.CommandContext(ctx, builtPulumi(t), append(strings.Fields(command[1])[1:], "--non-interactive")...)
	byHand.Dir = o.RepoRoot
	byHand.Env = append(os.Environ(), BackendEnv+"="+env.opts.Backend)
	out, err := byHand.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, heldBy(t, o, "prod.tenants-1"), "the command the move printed finishes the restore")
	assert.Equal(t, []string{"legal-ai"}, heldBy(t, o, "prod.tenants-0"))
}
