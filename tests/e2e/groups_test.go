package e2e

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// groups splits the local stack's tenants as platform.TenantGroup does: research-ai in group 0, none in group 1 (an
// empty group's stack), legal-ai in group 2.
const groups = 3

var groupOf = map[string]platform.Part{research: platform.TenantsPart(0), legal: platform.TenantsPart(2)}

// groupedEnv is the local stack split into tenant groups.
func groupedEnv(t *testing.T) *stackEnv {
	env := newStackEnv(t)
	env.config = map[string]string{platform.ConfigNamespace + ":tenantGroups": fmt.Sprint(groups)}
	return env
}

// part is the stack of one part of a grouped environment, for what is asked of one stack (its state, its owner).
func (s *stackEnv) part(p platform.Part) *stackEnv {
	part := *s
	if _, isGroup := p.Group(); isGroup {
		// As environment.OpenEnvironment names a group's stack and its work directory.
		part.name = s.stack() + "." + string(p)
		part.workDir = s.workDir + "." + string(p)
	}
	return &part
}

func (s *stackEnv) environment(ctx context.Context) *environment.Environment {
	s.t.Helper()
	env, err := environment.OpenEnvironment(ctx, s.options(nil, nil))
	require.NoError(s.t, err)
	return env
}

// deleting is the environment with every tenant of the stack file named as one its destroy may delete
// (--delete-tenants).
func (s *stackEnv) deleting(ctx context.Context) *environment.Environment {
	env := s.environment(ctx)
	env.DeleteTenants = s.tenantNames()
	return env
}

// tenantNames are the names of the stack file's tenants.
func (s *stackEnv) tenantNames() []string {
	var names []string
	for _, t := range s.tenants() {
		names = append(names, t.Name)
	}
	return names
}

// parts are the stacks of a grouped environment, the platform first.
func (s *stackEnv) parts() []*stackEnv {
	out := []*stackEnv{s.part(platform.PlatformPart)}
	for i := range groups {
		out = append(out, s.part(platform.TenantsPart(i)))
	}
	return out
}

// TestTenantGroups brings the local stack up split into tenant groups (a platform stack, then three group stacks in
// parallel): the guard rails hold across the stacks, each object belongs to its part's stack, a second preview is
// empty, a group's stack cannot take over another's tenant, and a kill during the parallel tenant run is recovered
// with nothing orphaned, as is one early in the platform stack's up and one during the groups' destroy; destroy
// leaves the cluster as before.
func TestTenantGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	before := snapshot(t, ctx)
	env := groupedEnv(t)

	t.Run("up brings the platform, then the groups", func(t *testing.T) {
		changes, err := env.environment(ctx).Up(ctx)
		require.NoError(t, err)
		assert.Positive(t, changes["create"])
		dc, err := client.ResourceV1().DeviceClasses().Get(ctx, whole, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, env.part(platform.PlatformPart).owner(), dc.Labels[naming.StackLabel], "the catalog is the platform stack's")
		for tenant, part := range groupOf {
			ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, env.part(part).owner(), ns.Labels[naming.StackLabel], "tenant %s is its group's", tenant)
		}
	})
	t.Run("a second preview is empty", func(t *testing.T) {
		changes, err := env.environment(ctx).Preview(ctx)
		require.NoError(t, err)
		assert.Equal(t, total(changes), changes["same"], "every step of every stack is the same: %v", changes)
	})
	t.Run("what an interrupted group run left unrecorded is removed; what predates the last record is named and kept", func(t *testing.T) {
		group := env.part(groupOf[research])
		labelled := metav1.ObjectMeta{Labels: map[string]string{naming.StackLabel: group.owner()}}
		// Older than the group's last record: not the work of an interrupted run, whatever it is.
		stray := labelled
		stray.Name = "vcluster-unrecorded"
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: stray}, metav1.CreateOptions{})
		require.NoError(t, err)
		defer func() {
			require.NoError(t, client.CoreV1().Namespaces().Delete(ctx, stray.Name, metav1.DeleteOptions{}))
			requireNamespaceGone(t, ctx, stray.Name)
		}()
		time.Sleep(1100 * time.Millisecond) // a creation time has whole seconds
		_, err = env.environment(ctx).Refresh(ctx)
		require.NoError(t, err)
		time.Sleep(1100 * time.Millisecond)
		// As a group run killed after creating a tenant's namespace and a cluster-scoped object of its vCluster leaves
		// them, when the tenant is then taken out of the config: the group's label, in no state.
		dropped := labelled
		dropped.Name = "vcluster-dropped"
		_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: dropped}, metav1.CreateOptions{})
		require.NoError(t, err)
		role := labelled
		role.Name = "vc-dropped"
		_, err = client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: role}, metav1.CreateOptions{})
		require.NoError(t, err)

		var progress syncbuf.Buffer
		opts := env.options(nil, nil)
		opts.Progress = io.MultiWriter(&progress, progressTo(t))
		grouped, err := environment.OpenEnvironment(ctx, opts)
		require.NoError(t, err)
		changes, err := grouped.Up(ctx)
		require.NoError(t, err)
		assert.Equal(t, total(changes), changes["same"], "nothing of the config changed: %v", changes)

		requireNamespaceGone(t, ctx, dropped.Name)
		_, err = client.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the interrupted run's ClusterRole is removed: %v", err)
		assert.Contains(t, progress.String(), "removed Namespace vcluster-dropped: created at")
		assert.Contains(t, progress.String(), "removed ClusterRole vc-dropped")

		ns, err := client.CoreV1().Namespaces().Get(ctx, stray.Name, metav1.GetOptions{})
		require.NoError(t, err, "what predates the group's last record stays")
		assert.Nil(t, ns.DeletionTimestamp)
		assert.Contains(t, progress.String(), "Namespace vcluster-unrecorded carries the stack's owner label")
		// Every tenant's namespace, recorded by its group, is untouched.
		for tenant := range groupOf {
			ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Nil(t, ns.DeletionTimestamp, "tenant %s's namespace stays", tenant)
		}
	})
	t.Run("entitlements hold across the stacks", func(t *testing.T) { checkEntitlements(t, ctx) })
	t.Run("no GPU claim outside a tenant's own namespace", func(t *testing.T) { checkClaimsOutsideTenants(t, ctx) })
	t.Run("a group's stack cannot take over another group's tenant", func(t *testing.T) {
		owned := snapshot(t, ctx)
		// Two groups would leave legal-ai, which lives in group 2, out: refused, naming the move that fixes it.
		moved := env.part(platform.TenantsPart(1))
		moved.config = map[string]string{platform.ConfigNamespace + ":tenantGroups": "2"}
		_, err := moved.open(ctx, nil).Up(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tenant legal-ai lives in group 2")
		assert.Contains(t, err.Error(), "gpu-tenancy move")
		// A group recorded for research-ai that its namespace's stack is not: the stack that would take it refuses.
		recorded := env.part(platform.TenantsPart(1))
		tenants := env.tenants()
		for i := range tenants {
			if tenants[i].Name == research {
				tenants[i].Group = ptrTo(1)
			}
		}
		_, err = recorded.open(ctx, tenants).Up(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("Namespace %s exists and belongs to stack %s", naming.Namespace(research),
			env.part(groupOf[research]).owner()))
		assert.Equal(t, owned, snapshot(t, ctx), "the refused ups changed nothing")
	})
	t.Run("an up of what changed runs only the stacks it changes", func(t *testing.T) {
		stacks := func(parts ...platform.Part) []string {
			var out []string
			for _, p := range parts {
				out = append(out, env.part(p).stack())
			}
			return out
		}
		again := env.environment(ctx)
		again.OnlyChanged = true
		_, err := again.Up(ctx)
		require.NoError(t, err)
		// The refused take-over above was an up of group 1's stack: its record went with it.
		assert.ElementsMatch(t, stacks(platform.PlatformPart, platform.TenantsPart(0), platform.TenantsPart(2)), again.Skipped,
			"only the stack whose last up did not succeed runs")

		tenants := env.tenants()
		for i := range tenants {
			if tenants[i].Name == legal {
				tenants[i].CPUQuota = "9"
			}
		}
		changed, err := environment.OpenEnvironment(ctx, env.options(tenants, nil))
		require.NoError(t, err)
		changed.OnlyChanged = true
		changes, err := changed.Up(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, stacks(platform.TenantsPart(0), platform.TenantsPart(1)), changed.Skipped,
			"a change of legal-ai runs the platform stack and legal-ai's group only")
		assert.Positive(t, changes["update"], "%v", changes)
		assert.Zero(t, changes["create"]+changes["delete"]+changes["replace"], "%v", changes)
		quota, err := client.CoreV1().ResourceQuotas(naming.Namespace(legal)).Get(ctx, naming.TenantQuota, metav1.GetOptions{})
		require.NoError(t, err)
		cpu := quota.Spec.Hard[corev1.ResourceRequestsCPU]
		assert.Equal(t, "9", cpu.String())
	})
	t.Run("a destroy that does not name the listed tenants it deletes deletes nothing", func(t *testing.T) {
		uids := namespaceUIDs(t, ctx, legal, research)
		_, err := env.environment(ctx).Destroy(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "this destroy deletes tenants legal-ai, research-ai, which the stack file lists")
		assert.Contains(t, err.Error(), "--delete-tenants legal-ai,research-ai")
		named := env.environment(ctx)
		named.DeleteTenants = []string{research}
		_, err = named.Destroy(ctx)
		require.ErrorContains(t, err, "this destroy deletes tenants legal-ai,", "naming some is not naming all")
		group := env.environment(ctx)
		require.NoError(t, group.Only(env.part(groupOf[legal]).stack()))
		_, err = group.Destroy(ctx)
		require.ErrorContains(t, err, "this destroy deletes tenants legal-ai,", "destroy --only of legal-ai's group")
		platformOnly := env.deleting(ctx)
		require.NoError(t, platformOnly.Only(env.stack()))
		_, err = platformOnly.Destroy(ctx)
		require.ErrorContains(t, err, "still holds tenants", "the platform alone, under the groups")
		assert.Contains(t, err.Error(), "destroy the groups first")
		assert.Equal(t, uids, namespaceUIDs(t, ctx, legal, research), "every tenant's namespace is the same one")
	})
	// The kill points of TestRecoveryAfterKill, in the layout's own places: the platform stack's up, the groups'
	// parallel up, and a destroy at three points: before the engine deleted anything, among the groups' deletes, and
	// in the platform stack's, the groups gone.
	for _, kill := range []struct {
		name string
		op   environment.Op
		when []string
	}{
		{"killed early in the platform stack's up", environment.OpUp, []string{"[local platform]", "creating"}},
		// In group 0's progress, which holds a tenant: the empty group 1's stack is done within a second, and a kill on
		// its line could land when no group holds its stack's lock.
		{"killed during the parallel tenant run", environment.OpUp, []string{"[local tenants-0]", "creating"}},
		{"killed as the groups' destroy starts", environment.OpDestroy, []string{"[local tenants-0]", "Destroying ("}},
		{"killed during the groups' destroy", environment.OpDestroy, []string{"[local tenants-0]", "deleting"}},
		{"killed during the platform stack's destroy, the groups gone", environment.OpDestroy, []string{"[local platform]", "deleting"}},
	} {
		t.Run(kill.name, func(t *testing.T) {
			if kill.op == environment.OpUp {
				_, err := env.deleting(ctx).Destroy(ctx)
				require.NoError(t, err)
			} else {
				// Each destroy starts from an environment that is up.
				_, err := env.environment(ctx).Up(ctx)
				require.NoError(t, err)
			}
			killChild(t, engineChild{Op: kill.op, Options: env.options(nil, nil), Environment: true,
				DeleteTenants: env.tenantNames()}, kill.when...)
			if kill.op == environment.OpDestroy {
				_, err := env.environment(ctx).Up(ctx)
				require.ErrorContains(t, err, "a destroy of environment local did not finish", "an up after a killed destroy")
				if kill.when[0] == "[local tenants-0]" {
					// Tenants are left to delete: the recovery asks for the destroy's confirmation.
					unnamed, err := environment.OpenEnvironment(ctx, env.options(nil, nil))
					require.NoError(t, err)
					require.ErrorContains(t, unnamed.Recover(ctx, ""), "--delete-tenants")
				}
			}
			progress := recoverWith(t, ctx, env, func(opts environment.Options) (recoverer, error) {
				e, err := environment.OpenEnvironment(ctx, opts)
				if err == nil {
					e.DeleteTenants = env.tenantNames()
				}
				return e, err
			})
			assert.Contains(t, progress, "recover: environment local, in this order:", "the recovery says what it runs first")
			assert.Contains(t, progress, "released the lock of pulumi process", "the killed stack's lock is released with a message")
			if kill.op == environment.OpDestroy {
				for _, part := range env.parts() {
					assert.Empty(t, managedObjects(t, ctx, part), "the destroy, run again, emptied the state of %s", part.stack())
					assert.Empty(t, ownedObjects(t, ctx, part), "the destroy, run again, removed every object of %s", part.stack())
				}
				requireAsBefore(t, ctx, before)
				return
			}
			changes, err := env.environment(ctx).Preview(ctx)
			require.NoError(t, err)
			assert.Equal(t, total(changes), changes["same"], "a preview after recovery is empty: %v", changes)
			for _, part := range env.parts() {
				requireNothingOrphaned(t, ctx, part)
			}
		})
	}

	_, err := env.deleting(ctx).Destroy(ctx)
	require.NoError(t, err)
	requireAsBefore(t, ctx, before)
}

// namespaceUIDs are the UIDs of the tenants' namespaces.
func namespaceUIDs(t *testing.T, ctx context.Context, tenants ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tenant := range tenants {
		ns, err := client.CoreV1().Namespaces().Get(ctx, naming.Namespace(tenant), metav1.GetOptions{})
		require.NoError(t, err)
		out[tenant] = string(ns.UID)
	}
	return out
}

func total(changes environment.Changes) int {
	n := 0
	for _, c := range changes {
		n += c
	}
	return n
}
