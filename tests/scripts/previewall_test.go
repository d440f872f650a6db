// Package scripts_test runs the repository's shell scripts. Where a script calls the pulumi CLI, a stand-in records
// its arguments and does nothing else, to check what the script would run: what pulumi does with them is tested
// elsewhere (tests/e2e drives the real CLI).
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// previewAll runs scripts/preview-all.sh in a copy of the project holding the given stack files, with a pulumi that
// records each command line, and returns those lines and the script's output.
func previewAll(t *testing.T, stackFiles map[string]string) (calls []string, out string) {
	return previewAllListing(t, stackFiles, "")
}

// previewAllListing is previewAll with a backend whose `pulumi stack ls --json` prints listing.
func previewAllListing(t *testing.T, stackFiles map[string]string, listing string) (calls []string, out string) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "scripts"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "stacks"), 0o755))
	script, err := os.ReadFile("../../scripts/preview-all.sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "scripts", "preview-all.sh"), script, 0o755))
	for name, body := range stackFiles {
		require.NoError(t, os.WriteFile(filepath.Join(root, "stacks", "Pulumi."+name+".yaml"), []byte(body), 0o644))
	}
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "calls")
	listed := filepath.Join(t.TempDir(), "listing")
	require.NoError(t, os.WriteFile(listed, []byte(listing), 0o644))
	stub := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \"$*\" in \"stack ls\"*) cat " + listed + ";; esac\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(stub), 0o755))
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "preview-all.sh"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "GT_POLICY_PACK=")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, string(output))
	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(raw)), "\n"), string(output)
}

// An environment in tenant groups is previewed stack by stack, each group stack with the environment's stack file,
// and a stack file `pulumi stack init` wrote for a group stack is not previewed as a stack of its own.
func TestPreviewAllPreviewsEveryStackOfAnEnvironment(t *testing.T) {
	calls, out := previewAll(t, map[string]string{
		"dev":            "config:\n  gpu-tenancy:cloud: gke\n",
		"prod":           "config:\n  gpu-tenancy:cloud: gke\n  gpu-tenancy:tenantGroups: 2\n",
		"prod.tenants-0": "encryptionsalt: v1:abc\n",
	})
	assert.Equal(t, []string{
		"stack ls --json --project gpu-tenancy",
		"preview --refresh --diff --stack dev",
		"preview --refresh --diff --stack prod",
		"preview --refresh --diff --stack prod.tenants-0 --config-file stacks/Pulumi.prod.yaml",
		"preview --refresh --diff --stack prod.tenants-1 --config-file stacks/Pulumi.prod.yaml",
	}, calls)
	assert.Contains(t, out, "all 4 previews ok")
}

// The number of groups is read however the stack file spells it: quoted, or followed by a comment.
func TestPreviewAllReadsTheGroupsHoweverSpelt(t *testing.T) {
	for name, line := range map[string]string{
		"a comment": "  gpu-tenancy:tenantGroups: 2  # two groups, room to grow\n",
		"quoted":    "  gpu-tenancy:tenantGroups: \"2\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			calls, _ := previewAll(t, map[string]string{"prod": "config:\n  gpu-tenancy:cloud: gke\n" + line})
			assert.Equal(t, []string{
				"stack ls --json --project gpu-tenancy",
				"preview --refresh --diff --stack prod",
				"preview --refresh --diff --stack prod.tenants-0 --config-file stacks/Pulumi.prod.yaml",
				"preview --refresh --diff --stack prod.tenants-1 --config-file stacks/Pulumi.prod.yaml",
			}, calls)
		})
	}
}

// A group stack the backend still holds beyond the groups, with resources, is previewed too; an empty one is not.
func TestPreviewAllPreviewsAGroupLeftBeyondTheGroups(t *testing.T) {
	listing := `[
    {
        "name": "prod",
        "current": false,
        "resourceCount": 40
    },
    {
        "name": "organization/gpu-tenancy/prod.tenants-2",
        "current": false,
        "resourceCount": 31
    },
    {
        "name": "prod.tenants-3",
        "current": false,
        "resourceCount": 0
    },
    {
        "name": "prodx.tenants-5",
        "current": false,
        "resourceCount": 9
    }
]`
	calls, _ := previewAllListing(t, map[string]string{"prod": "config:\n  gpu-tenancy:tenantGroups: 2\n"}, listing)
	assert.Equal(t, []string{
		"stack ls --json --project gpu-tenancy",
		"preview --refresh --diff --stack prod",
		"preview --refresh --diff --stack prod.tenants-0 --config-file stacks/Pulumi.prod.yaml",
		"preview --refresh --diff --stack prod.tenants-1 --config-file stacks/Pulumi.prod.yaml",
		"preview --refresh --diff --stack prod.tenants-2 --config-file stacks/Pulumi.prod.yaml",
	}, calls)
}
