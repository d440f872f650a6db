package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// checkSecondStackRefused: a second stack pointed at the cluster of a running one refuses, before it creates
// anything, to take over the first one's objects, and its destroy deletes nothing.
func checkSecondStackRefused(t *testing.T, ctx context.Context, first *stackEnv) {
	before := snapshot(t, ctx)
	second := &stackEnv{t: t, stateDir: first.stateDir, workDir: t.TempDir(), base: first.base, name: "local-staging"}
	_, err := second.open(ctx, nil).Up(ctx)
	require.Error(t, err, "a second stack must not take over the first one's objects")
	msg := err.Error()
	for _, want := range []string{
		"this stack (gpu-tenancy.local-staging) would take over objects it does not own",
		"DeviceClass gpu-whole exists and belongs to stack gpu-tenancy.local",
		"ValidatingAdmissionPolicy " + tenancy.ClaimNamespacePolicy + " exists and belongs to stack gpu-tenancy.local",
		"Namespace " + naming.Namespace(legal) + " exists and belongs to stack gpu-tenancy.local",
		"A cluster holds one platform stack",
		"gpu-tenancy:ownership.adopt",
	} {
		assert.Contains(t, msg, want)
	}
	assert.Equal(t, before, snapshot(t, ctx), "the refused up changed nothing")

	_, err = second.open(ctx, nil).Destroy(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, snapshot(t, ctx), "the second stack's destroy deleted nothing")
	requireNoChanges(t, ctx, first.open(ctx, nil))
}

// checkDrift: an object deleted by hand and a policy edited by hand show in the next preview, and up puts both back.
func checkDrift(t *testing.T, ctx context.Context, env *stackEnv) {
	require.NoError(t, client.ResourceV1().DeviceClasses().Delete(ctx, slice, metav1.DeleteOptions{}))
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	edited, err := policies.Get(ctx, tenancy.ClaimNamespacePolicy, metav1.GetOptions{})
	require.NoError(t, err)
	ignore := admissionv1.Ignore
	edited.Spec.FailurePolicy = &ignore
	_, err = policies.Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)

	steps := previewSteps(t, ctx, env.open(ctx, nil))
	assert.Contains(t, steps, "create kubernetes:resource.k8s.io/v1:DeviceClass", "the deleted DeviceClass is to be created again")
	assert.Contains(t, steps, "update kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", "the edited policy is to be updated")

	_, err = env.open(ctx, nil).Up(ctx)
	require.NoError(t, err)
	restored, err := client.ResourceV1().DeviceClasses().Get(ctx, slice, metav1.GetOptions{})
	require.NoError(t, err, "up re-creates the deleted DeviceClass")
	assert.Equal(t, env.owner(), restored.Labels[naming.StackLabel])
	policy, err := policies.Get(ctx, tenancy.ClaimNamespacePolicy, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, policy.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *policy.Spec.FailurePolicy, "up puts the edited field back")
	requireNoChanges(t, ctx, env.open(ctx, nil))
}

// checkHostRewritesFound: on the real API server, a cluster default PriorityClass, which the Priority admission
// plugin puts on every pod before the guards see it, is found by the next preview, which names the keys that admit
// it; admitted by one of them, the preview runs; the class gone, nothing is left to change.
func checkHostRewritesFound(t *testing.T, ctx context.Context, env *stackEnv) {
	classes := client.SchedulingV1().PriorityClasses()
	const everyone = "everyone-high"
	_, err := classes.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: everyone}, Value: 1000,
		GlobalDefault: true}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = classes.Delete(context.Background(), everyone, metav1.DeleteOptions{}) })

	_, err = env.open(ctx, nil).Preview(ctx)
	require.Error(t, err, "a cluster that gives every pod priority 1000 would refuse every tenant pod")
	for _, want := range []string{`priority 1000 (PriorityClass "everyone-high"`, platform.ConfigNamespace + ":admission.priorityClasses",
		platform.ConfigNamespace + ":admission.maxTenantPriority"} {
		assert.ErrorContains(t, err, want)
	}

	saved := env.config
	env.config = maps.Clone(saved)
	env.config[platform.ConfigNamespace+":admission"] = `{"priorityClasses": ["` + everyone + `"]}`
	_, err = env.open(ctx, nil).Preview(ctx)
	env.config = saved
	assert.NoError(t, err, "admitted by admission.priorityClasses")

	require.NoError(t, classes.Delete(ctx, everyone, metav1.DeleteOptions{}))
	requireNoChanges(t, ctx, env.open(ctx, nil))
}

// previewSteps runs a preview and returns its steps other than "same", as "<op> <type>".
func previewSteps(t *testing.T, ctx context.Context, st *environment.Stack) []string {
	t.Helper()
	ch := make(chan events.EngineEvent)
	var steps []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			if ev.ResourcePreEvent == nil {
				continue
			}
			m := ev.ResourcePreEvent.Metadata
			if op := string(m.Op); op != "same" && op != "refresh" && op != "read" {
				steps = append(steps, op+" "+m.Type)
			}
		}
	}()
	_, err := st.Preview(ctx, optpreview.EventStreams(ch))
	<-done
	require.NoError(t, err)
	return steps
}

// requireNoChanges asserts that a preview (with its refresh) finds nothing to do.
func requireNoChanges(t *testing.T, ctx context.Context, st *environment.Stack) {
	t.Helper()
	assert.Empty(t, previewSteps(t, ctx, st), "a preview after convergence must report no changes")
}

// engineChildEnv carries, to a copy of this test binary, the operation it runs on the real engine; the test kills
// that process to interrupt the engine.
const engineChildEnv = "GT_E2E_ENGINE_CHILD"

type engineChild struct {
	Op      environment.Op
	Options environment.Options
	// Environment runs the operation on every stack of the environment (environment.Environment).
	Environment bool
	// DeleteTenants are the listed tenants the environment's destroy may delete.
	DeleteTenants []string
}

// runEngineChild runs one operation and exits: the body of the process a test kills.
func runEngineChild(spec string) int {
	var c engineChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c.Options.Progress = os.Stdout
	ctx := context.Background()
	var err error
	if c.Environment {
		var env *environment.Environment
		if env, err = environment.OpenEnvironment(ctx, c.Options); err == nil {
			env.DeleteTenants = c.DeleteTenants
			switch c.Op {
			case environment.OpDestroy:
				_, err = env.Destroy(ctx)
			default:
				_, err = env.Up(ctx)
			}
		}
	} else {
		var st *environment.Stack
		if st, err = environment.Open(ctx, c.Options); err == nil {
			switch c.Op {
			case environment.OpDestroy:
				_, err = st.Destroy(ctx)
			default:
				_, err = st.Up(ctx)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killDuring runs op in a child process and kills it with SIGKILL, the pulumi CLI with it, at the first progress line
// that contains every fragment of when, as an operator's kill or a lost CI runner would. It fails the test when the
// operation ends before that line. The plugins outlive it until the test is over, as they would outlive the engine.
func killDuring(t *testing.T, env *stackEnv, op environment.Op, when ...string) {
	t.Helper()
	killChild(t, engineChild{Op: op, Options: env.options(nil, nil)}, when...)
}

// killChild is killDuring of any operation the child runs.
func killChild(t *testing.T, child engineChild, when ...string) {
	t.Helper()
	op := child.Op
	child.Options.Progress = nil
	spec, err := json.Marshal(child)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), engineChildEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	killed := false
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		fmt.Fprintln(progressTo(t), "child: "+line)
		if containsAll(line, when) {
			killLeftoversAtCleanup(t, descendants(cmd.Process.Pid))
			// The whole process group: the test binary, the pulumi CLI, and the plugins it started in the group.
			require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
			killed = true
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	require.True(t, killed, "%s ended before %q (stderr: %s)", op, when, stderr.String())
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

// recoverStack runs the documented recovery and returns its progress output.
func recoverStack(t *testing.T, ctx context.Context, env *stackEnv) string {
	return recoverWith(t, ctx, env, func(opts environment.Options) (recoverer, error) { return environment.Open(ctx, opts) })
}

// recoverer is a stack or an environment of stacks, whichever the test recovers.
type recoverer interface {
	Recover(ctx context.Context, op environment.Op) error
}

// recoverWith opens what open gives with the test's options, runs its recovery and returns the progress output.
func recoverWith(t *testing.T, ctx context.Context, env *stackEnv, open func(environment.Options) (recoverer, error)) string {
	t.Helper()
	var progress syncbuf.Buffer
	opts := env.options(nil, nil)
	opts.Progress = io.MultiWriter(&progress, progressTo(t))
	r, err := open(opts)
	require.NoError(t, err)
	require.NoError(t, r.Recover(ctx, ""), "recovery must converge")
	return progress.String()
}

// ownedKinds are the kinds of every object the program and the vCluster chart create.
var ownedKinds = append(slices.Clone(clusterScopedKinds), []schema.GroupVersionResource{
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "resourcequotas"},
	{Version: "v1", Resource: "limitranges"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
}...)

// ownedObjects lists the cluster's objects that carry the stack's owner label, as "<resource>/<namespace>/<name>".
func ownedObjects(t *testing.T, ctx context.Context, env *stackEnv) []string {
	t.Helper()
	return listObjects(t, ctx, ownedKinds, naming.StackLabel+"="+env.owner())
}

// managedObjects lists the Kubernetes objects the stack's state holds, as ownedObjects spells them.
func managedObjects(t *testing.T, ctx context.Context, env *stackEnv) []string {
	t.Helper()
	state, err := env.open(ctx, nil).Export(ctx)
	require.NoError(t, err)
	var deployment struct {
		Resources []struct {
			Type    string         `json:"type"`
			Custom  bool           `json:"custom"`
			Outputs map[string]any `json:"outputs"`
		} `json:"resources"`
		PendingOperations []any `json:"pending_operations"`
	}
	require.NoError(t, json.Unmarshal(state.Deployment, &deployment))
	assert.Empty(t, deployment.PendingOperations, "no pending operation is left in the state")
	var out []string
	for _, r := range deployment.Resources {
		if !r.Custom || !strings.HasPrefix(r.Type, "kubernetes:") || strings.HasPrefix(r.Type, "kubernetes:helm.sh/") ||
			strings.HasPrefix(r.Type, "pulumi:providers:") {
			continue
		}
		meta, _ := r.Outputs["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		kind := r.Type[strings.LastIndex(r.Type, ":")+1:]
		out = append(out, kindResource(kind)+"/"+ns+"/"+name)
	}
	slices.Sort(out)
	return out
}

// kindResource is the resource (plural) of a kind of ownedKinds.
func kindResource(kind string) string {
	switch kind {
	case "ValidatingAdmissionPolicy":
		return "validatingadmissionpolicies"
	case "ValidatingAdmissionPolicyBinding":
		return "validatingadmissionpolicybindings"
	case "NetworkPolicy":
		return "networkpolicies"
	case "DeviceClass":
		return "deviceclasses"
	}
	return strings.ToLower(kind) + "s"
}

// requireNothingOrphaned asserts that every object on the cluster with the stack's label is in its state, and that no
// Helm release record is left in the stack's namespaces.
func requireNothingOrphaned(t *testing.T, ctx context.Context, env *stackEnv) {
	t.Helper()
	owned, managed := ownedObjects(t, ctx, env), managedObjects(t, ctx, env)
	var orphans []string
	for _, o := range owned {
		if !slices.Contains(managed, o) {
			orphans = append(orphans, o)
		}
	}
	assert.Empty(t, orphans, "objects of the stack that its state does not hold")
	releases, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	assert.Empty(t, releases.Items, "Helm release records")
}

// TestRecoveryAfterKill kills the engine early in an up, while it applies the vCluster charts, and during a destroy;
// after each, the documented recovery converges the stack: a second preview reports nothing, and nothing is left that
// the state does not hold.
func TestRecoveryAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	require.NoError(t, simhw.Apply(ctx, client))
	before := snapshot(t, ctx)
	env := newStackEnv(t)
	converged := func(t *testing.T, progress string) {
		assert.Contains(t, progress, "released the lock of pulumi process", "the killed engine's lock is released with a message")
		requireNoChanges(t, ctx, env.open(ctx, nil))
		requireNothingOrphaned(t, ctx, env)
	}

	t.Run("killed early in an up", func(t *testing.T) {
		killDuring(t, env, environment.OpUp, "creating")
		progress := recoverStack(t, ctx, env)
		assert.Contains(t, progress, "recover: stack local, then up")
		converged(t, progress)
	})
	t.Run("killed while the vCluster charts are applied", func(t *testing.T) {
		_, err := env.open(ctx, nil).Destroy(ctx)
		require.NoError(t, err)
		killDuring(t, env, environment.OpUp, "kubernetes:apps/v1:StatefulSet", "creating")
		converged(t, recoverStack(t, ctx, env))
	})
	t.Run("killed during a destroy", func(t *testing.T) {
		killDuring(t, env, environment.OpDestroy, "deleting")
		progress := recoverStack(t, ctx, env)
		assert.Contains(t, progress, "recover: stack local, then destroy", "the interrupted operation runs again")
		assert.Contains(t, progress, "released the lock of pulumi process", "the killed engine's lock is released with a message")
		assert.Empty(t, managedObjects(t, ctx, env), "the destroy, run again, emptied the state")
		assert.Empty(t, ownedObjects(t, ctx, env), "the destroy, run again, removed every object of the stack")
		requireAsBefore(t, ctx, before)
	})
}

// TestStateLeftIncompleteByAKilledEngineIsRepaired: the state backend writes no metadata sidecars, and the files a
// killed engine can leave incomplete (a sidecar it truncated but never wrote, as earlier versions wrote them; a
// temporary lock file never renamed) are removed when the stack is next opened, with a message, so the stack can be
// selected, read and locked again.
func TestStateLeftIncompleteByAKilledEngineIsRepaired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := newStackEnv(t)
	_, err := env.open(ctx, nil).Refresh(ctx)
	require.NoError(t, err)
	assert.Empty(t, filesUnder(t, env.stateDir, ".attrs"), "the backend writes no sidecar that a kill could leave empty")

	sidecar := localStateFile(env.stateDir) + ".attrs"
	require.NoError(t, os.WriteFile(sidecar, nil, 0o600))
	lockDir := filepath.Join(env.stateDir, ".pulumi", "locks", "organization", platform.ConfigNamespace, "local")
	require.NoError(t, os.MkdirAll(lockDir, 0o700))
	tempLock := filepath.Join(lockDir, "a1b2.json.18c9e2f1.tmp")
	require.NoError(t, os.WriteFile(tempLock, nil, 0o600))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(tempLock, old, old))

	var progress syncbuf.Buffer
	opts := env.options(nil, nil)
	opts.Progress = io.MultiWriter(&progress, progressTo(t))
	st, err := environment.Open(ctx, opts)
	require.NoError(t, err, "the stack can be selected again")
	assert.Contains(t, progress.String(), "removed "+sidecar+": a metadata sidecar left incomplete")
	assert.Contains(t, progress.String(), "removed "+tempLock+": a temporary file left by an engine that was killed")
	_, err = st.Refresh(ctx)
	require.NoError(t, err, "the stack can be read and locked again")
}

// filesUnder are the files under dir whose names end in suffix.
func filesUnder(t *testing.T, dir, suffix string) []string {
	t.Helper()
	var found []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, suffix) {
			found = append(found, path)
		}
		return err
	}))
	return found
}

// TestBlockedDestroyExplainsItself: a namespace that cannot terminate (an object whose finalizer nobody removes) fails
// the destroy once the configured wait is over, and the progress and the error say which namespace waits for what.
func TestBlockedDestroyExplainsItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, simhw.Apply(ctx, client))
	before := snapshot(t, ctx)
	env := newStackEnv(t)
	env.config = map[string]string{"gpu-tenancy:timeouts": `{"namespaceDeletion":"20s"}`}
	_, err := env.open(ctx, nil).Up(ctx)
	require.NoError(t, err)

	const finalizer = "e2e.gpu-tenancy.io/block"
	ns := naming.Namespace(legal)
	blocker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blocker", Namespace: ns, Finalizers: []string{finalizer}}}
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, blocker, metav1.CreateOptions{})
	require.NoError(t, err)

	var progress syncbuf.Buffer
	opts := env.options(nil, nil)
	opts.Progress = io.MultiWriter(&progress, progressTo(t))
	st, err := environment.Open(ctx, opts)
	require.NoError(t, err)
	// Bounded by the configured 20s: the default of ten minutes would outlast this test's context.
	_, err = st.Destroy(ctx)
	require.Error(t, err, "the namespace cannot terminate")
	assert.Contains(t, err.Error(), "namespace "+ns+" is still terminating")
	assert.Contains(t, err.Error(), finalizer, "the error names what the namespace waits for")
	assert.Contains(t, err.Error(), "gpu-tenancy:timeouts.namespaceDeletion")
	assert.Contains(t, progress.String(), "waiting for namespace "+ns+" to terminate")

	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx, "blocker", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = env.open(ctx, nil).Destroy(ctx)
	require.NoError(t, err, "once the finalizer is gone the destroy finishes")
	requireAsBefore(t, ctx, before)
}
