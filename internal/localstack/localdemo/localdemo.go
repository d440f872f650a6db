// Package localdemo is `make demo`: the local stack on a local control plane (scripts/local-cluster.sh) with
// simulated GPU nodes, and, per tenant, what it can see and claim. The local stack is disposable: when its state was
// built against a cluster that is gone (purged, or replaced by another), the state goes too, with a message, and an
// operation a killed demo left unfinished is recovered before the next one runs.
package localdemo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optremove"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// stackName is the only stack this package drives, and so the only one whose state it ever drops: the local stack
// is disposable, every other stack's state is the record of real infrastructure.
const stackName = "local"

// Options say where the control plane, the state and the output are.
type Options struct {
	// RepoRoot holds stacks/Pulumi.local.yaml and .tools/.
	RepoRoot string
	// ClusterDir is the control plane's data directory (GT_CLUSTER_DIR of scripts/local-cluster.sh), which holds its
	// admin kubeconfig; default <RepoRoot>/.tools/local-cluster.
	ClusterDir string
	// StateDir is the file backend's directory; default <RepoRoot>/.tools/state.
	StateDir string
	// WorkDir is the local stack's workspace, the demo's own: dropping the state empties it; default
	// <RepoRoot>/.tools/engine/local.
	WorkDir string
	// Progress receives the engine's progress; nil discards it.
	Progress io.Writer
	// ProgressName says where Progress goes (a log file), for the messages that point there; "" names nothing.
	ProgressName string
	// Out receives the steps, the messages and the tables; default standard output.
	Out io.Writer
	// Nodes says the control plane has real nodes (scripts/local-cluster.sh with GT_NODES): nothing is simulated,
	// and the up waits for each tenant's vCluster to run and exports its kubeconfig (vcluster.await).
	Nodes bool
	// Tenants replace the stack file's tenants when set, as an operator's edit of the file would.
	Tenants []platform.TenantArgs
}

// demo is one run: the options with their defaults, and the local stack file.
type demo struct {
	Options
	kubeconfig string
	stackFile  platform.StackConfig
	// args are the stack file's settings as the platform reads them, read once.
	args *platform.PlatformArgs
}

func newDemo(o Options) (*demo, error) {
	if o.RepoRoot == "" {
		return nil, errors.New("localdemo: RepoRoot is required")
	}
	tools := filepath.Join(o.RepoRoot, ".tools")
	defaults := []struct {
		field *string
		value string
	}{
		{&o.ClusterDir, filepath.Join(tools, "local-cluster")},
		{&o.StateDir, filepath.Join(tools, "state")},
		{&o.WorkDir, filepath.Join(tools, "engine", stackName)},
	}
	for _, d := range defaults {
		if *d.field == "" {
			*d.field = d.value
		}
		abs, err := filepath.Abs(*d.field)
		if err != nil {
			return nil, err
		}
		*d.field = abs
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	sc, err := platform.ReadStackFile(filepath.Join(o.RepoRoot, "stacks", "Pulumi."+stackName+".yaml"))
	if err != nil {
		return nil, err
	}
	args, err := platform.Load(sc.Source(), platform.ConfigKeys)
	if err != nil {
		return nil, err
	}
	return &demo{Options: o, kubeconfig: filepath.Join(o.ClusterDir, "kubeconfig"), stackFile: sc, args: args}, nil
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.Out, format+"\n", args...)
}

// seeProgress is " (see <log>)" when the progress goes to a named place.
func (d *demo) seeProgress() string {
	if d.ProgressName == "" {
		return ""
	}
	return " (see " + d.ProgressName + ")"
}

// progressIn is " (progress in <log>)" when the progress goes to a named place.
func (d *demo) progressIn() string {
	if d.ProgressName == "" {
		return ""
	}
	return " (progress in " + d.ProgressName + ")"
}

// Up simulates the GPU nodes, brings the local stack up on the control plane (dropping a state built against another
// cluster, recovering an interrupted operation), then prints what each tenant sees and claims.
func Up(ctx context.Context, o Options) error {
	d, err := newDemo(o)
	if err != nil {
		return err
	}
	cs, err := d.apply(ctx)
	if err != nil {
		return err
	}
	return d.show(ctx, cs)
}

// Apply brings the local stack up as Up does, and starts none of the demo's jobs.
func Apply(ctx context.Context, o Options) error {
	d, err := newDemo(o)
	if err != nil {
		return err
	}
	_, err = d.apply(ctx)
	return err
}

// apply simulates the GPU nodes unless they are real, and brings the local stack up on the control plane.
func (d *demo) apply(ctx context.Context) (kubernetes.Interface, error) {
	cs, cluster, err := connect(ctx, d.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%w (start the control plane: scripts/local-cluster.sh up)", err)
	}
	if !d.Nodes {
		d.say("==> simulating GPU nodes: 2 x whole A100 (a100-whole), 1 x A100 in MIG 1g.5gb (a100-mig)")
		if err := simhw.Apply(ctx, cs); err != nil {
			return nil, err
		}
	}
	st, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	if dropped, err := d.dropIfElsewhere(ctx, st, cluster); err != nil {
		return nil, err
	} else if dropped {
		if st, err = d.open(ctx); err != nil {
			return nil, err
		}
	}
	if err := writeRecord(d.WorkDir, cluster); err != nil {
		return nil, fmt.Errorf("recording the cluster of stack local: %w", err)
	}
	d.say("==> pulumi up of stack local%s", d.progressIn())
	if why, err := d.interrupted(st); err != nil {
		return nil, err
	} else if why != "" {
		d.say("    %s: recovering it, then up", why)
		if err := st.Recover(ctx, environment.OpUp); err != nil {
			return nil, fmt.Errorf("recovering stack local failed%s: %w", d.seeProgress(), err)
		}
		d.say("    recovered\n")
	} else {
		res, err := st.Up(ctx)
		if err != nil {
			return nil, fmt.Errorf("pulumi up failed%s: %w", d.seeProgress(), err)
		}
		d.say("    %v\n", *res.Summary.ResourceChanges)
	}
	return cs, nil
}

// Down destroys the local stack when its cluster is the one the state was built against, recovering an interrupted
// operation first; when the cluster is gone or another one, it drops the state instead. Either way the local stack
// ends empty.
func Down(ctx context.Context, o Options) error {
	d, err := newDemo(o)
	if err != nil {
		return err
	}
	cs, cluster, connectErr := connect(ctx, d.kubeconfig)
	st, err := d.open(ctx)
	if err != nil {
		return err
	}
	if connectErr != nil {
		return d.dropIfHeld(ctx, st, connectErr)
	}
	if dropped, err := d.dropIfElsewhere(ctx, st, cluster); err != nil || dropped {
		return err
	}
	if err := d.deleteDemoPods(ctx, cs); err != nil {
		return err
	}
	d.say("==> pulumi destroy of stack local%s", d.progressIn())
	if why, err := d.interrupted(st); err != nil {
		return err
	} else if why != "" {
		d.say("    %s: recovering it, then destroy", why)
		if err := st.Recover(ctx, environment.OpDestroy); err != nil {
			return fmt.Errorf("recovering stack local failed%s: %w", d.seeProgress(), err)
		}
	} else if _, err := st.Destroy(ctx); err != nil {
		return fmt.Errorf("pulumi destroy failed%s: %w", d.seeProgress(), err)
	}
	if !d.Nodes {
		if err := simhw.Remove(ctx, cs); err != nil {
			return err
		}
	}
	return removeRecord(d.WorkDir)
}

// open opens the local stack, its kubeconfig the control plane's in ClusterDir.
func (d *demo) open(ctx context.Context) (*environment.Stack, error) {
	existing := map[string]any{}
	if raw := d.stackFile.Values[platform.ConfigNamespace+":existing"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &existing); err != nil {
			return nil, fmt.Errorf("%s:existing of the local stack: %w", platform.ConfigNamespace, err)
		}
	}
	existing["kubeconfigPath"] = d.kubeconfig
	config := map[string]string{}
	if err := setConfig(config, platform.ConfigNamespace+":existing", existing); err != nil {
		return nil, err
	}
	if d.Nodes {
		vc := map[string]any{}
		if raw := d.stackFile.Values[platform.ConfigNamespace+":vcluster"]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &vc); err != nil {
				return nil, fmt.Errorf("%s:vcluster of the local stack: %w", platform.ConfigNamespace, err)
			}
		}
		vc["await"] = true
		if err := setConfig(config, platform.ConfigNamespace+":vcluster", vc); err != nil {
			return nil, err
		}
	}
	if d.Tenants != nil {
		if err := setConfig(config, platform.ConfigNamespace+":tenants", d.Tenants); err != nil {
			return nil, err
		}
	}
	return environment.Open(ctx, environment.Options{
		RepoRoot: d.RepoRoot, Stack: stackName, WorkDir: d.WorkDir, Backend: "file://" + d.StateDir, Progress: d.Progress,
		Config: config,
	})
}

// setConfig writes value, as JSON, as config key of the stack.
func setConfig(config map[string]string, key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	config[key] = string(raw)
	return nil
}

// dropIfElsewhere drops the state when it was built against another cluster than now.
func (d *demo) dropIfElsewhere(ctx context.Context, st *environment.Stack, now clusterID) (bool, error) {
	rec, err := d.recorded(ctx, st)
	if err != nil || rec == nil {
		return false, err
	}
	diff := rec.differs(now)
	if diff == "" {
		return false, nil
	}
	return true, d.drop(ctx, st, "its state was built against another cluster ("+diff+")")
}

// recorded is the cluster the state was built against: the record written before each up, else (a state from before
// the record, or a work directory deleted by hand) the cluster of the stack's kubeconfig output; nil when neither
// names one.
func (d *demo) recorded(ctx context.Context, st *environment.Stack) (*clusterID, error) {
	rec, err := readRecord(d.WorkDir)
	if rec != nil || err != nil {
		return rec, err
	}
	outputs, err := st.Outputs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the outputs of stack local: %w", err)
	}
	kubeconfig, _ := outputs["kubeconfig"].Value.(string)
	if kubeconfig == "" {
		return nil, nil
	}
	id, err := identify([]byte(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig output of stack local: %w", err)
	}
	return &id, nil
}

// interrupted says what a killed demo left on the stack (an unfinished operation, a lock), or "" when nothing.
func (d *demo) interrupted(st *environment.Stack) (string, error) {
	if op := st.Interrupted(); op != "" {
		return fmt.Sprintf("an interrupted %s left stack local unfinished", op), nil
	}
	locks, err := st.Locks()
	if err != nil {
		return "", err
	}
	if len(locks) > 0 {
		return "an operation that did not finish left stack local locked", nil
	}
	return "", nil
}

// dropIfHeld drops the state when the cluster cannot be reached (why) and the state holds anything: resources, a
// pending operation, a lock or an unfinished operation.
func (d *demo) dropIfHeld(ctx context.Context, st *environment.Stack, why error) error {
	state, err := st.Export(ctx)
	if err != nil {
		return fmt.Errorf("reading the state of stack local: %w", err)
	}
	var deployment struct {
		Resources         []json.RawMessage `json:"resources"`
		PendingOperations []json.RawMessage `json:"pending_operations"`
	}
	if len(state.Deployment) > 0 {
		if err := json.Unmarshal(state.Deployment, &deployment); err != nil {
			return fmt.Errorf("decoding the state of stack local: %w", err)
		}
	}
	unfinished, err := d.interrupted(st)
	if err != nil {
		return err
	}
	if len(deployment.Resources) == 0 && len(deployment.PendingOperations) == 0 && unfinished == "" {
		return removeRecord(d.WorkDir)
	}
	return d.drop(ctx, st, "its cluster cannot be reached: "+why.Error())
}

// drop removes the local stack's state and its work directory, after saying why.
func (d *demo) drop(ctx context.Context, st *environment.Stack, why string) error {
	d.say("==> stack local: %s: dropping the state, since the local stack is disposable", why)
	if err := st.ReleaseStaleLocks(); err != nil {
		return fmt.Errorf("stack local: %w", err)
	}
	// Force: the state still lists resources, of a cluster that no longer has them.
	if err := st.Workspace().RemoveStack(ctx, stackName, optremove.Force()); err != nil {
		return fmt.Errorf("removing stack local: %w", err)
	}
	// The working copy of the config (its encryption salt), the record and the engine's operation marker belong to
	// the state that went.
	return os.RemoveAll(d.WorkDir)
}

// deleteDemoPods deletes the pods the demo started; no kubelet confirms a graceful delete, so they go at once.
func (d *demo) deleteDemoPods(ctx context.Context, cs kubernetes.Interface) error {
	tenants, err := d.tenants()
	if err != nil {
		return err
	}
	zero := int64(0)
	for _, t := range tenants {
		err := cs.CoreV1().Pods(naming.Namespace(t.Name)).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting demo pods of %s: %w", t.Name, err)
		}
	}
	return nil
}

// tenants are the local stack's tenants: Options.Tenants, else the stack file's.
func (d *demo) tenants() ([]platform.TenantArgs, error) {
	if d.Tenants != nil {
		return d.Tenants, nil
	}
	var tenants []platform.TenantArgs
	if err := json.Unmarshal([]byte(d.stackFile.Values[platform.ConfigNamespace+":tenants"]), &tenants); err != nil {
		return nil, fmt.Errorf("tenants of the local stack: %w", err)
	}
	return tenants, nil
}

// controlPlanePodWait bounds the wait for a tenant's control-plane pod before the demo says there is none.
const controlPlanePodWait = 30 * time.Second

// showControlPlanes prints, for each tenant, its vCluster control plane's pod as the StatefulSet controller created it,
// and every create a controller was refused in the tenant's namespace (FailedCreate events; none is expected but while
// the namespace's service account is not there yet, which the controller retries).
func (d *demo) showControlPlanes(ctx context.Context, cs kubernetes.Interface, tenants []platform.TenantArgs) error {
	d.say("\n==> each tenant's vCluster control plane, as its StatefulSet created it")
	w := tabwriter.NewWriter(d.Out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tCONTROL PLANE POD\tREFUSED CREATES (FailedCreate)")
	for _, t := range tenants {
		ns := naming.Namespace(t.Name)
		pod := t.Name + "-0"
		// The StatefulSet controller creates the pod a moment after the up that made the StatefulSet.
		var err error
		for deadline := time.Now().Add(controlPlanePodWait); ; time.Sleep(time.Second) {
			if _, err = cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			pod = "(none: " + err.Error() + ")"
		}
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		if err != nil {
			return err
		}
		refused := "none"
		var msgs []string
		for _, e := range events.Items {
			if !strings.Contains(e.Message, "error looking up service account") {
				msgs = append(msgs, e.Message)
			}
		}
		if len(msgs) > 0 {
			refused = strings.Join(msgs, "; ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.Name, pod, refused)
	}
	return w.Flush()
}

// gpuPodWait bounds the wait for a tenant's GPU pod to run on a real node and print what it sees.
const gpuPodWait = 2 * time.Minute

// showGPUPods prints, for each tenant, what its GPU pod saw on its real node: the device nodes and UUID its claim's CDI
// spec gave the container, which the GPU probe prints.
func (d *demo) showGPUPods(ctx context.Context, cs kubernetes.Interface, rows []row) {
	d.say("\n==> each tenant's GPU pod, running on a real node, prints the devices its claim gave it")
	for _, r := range rows {
		if r.gpuPod == "" {
			continue
		}
		ns, name := naming.Namespace(r.tenant), r.gpuPod
		var logs []byte
		err := wait.PollUntilContextTimeout(ctx, time.Second, gpuPodWait, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
			logs, err = cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			return err == nil && len(logs) > 0, nil
		})
		if err != nil {
			d.say("%s %s: did not run within %s", r.tenant, name, gpuPodWait)
			continue
		}
		d.say("%s %s:\n    %s", r.tenant, name, strings.ReplaceAll(strings.TrimSpace(string(logs)), "\n", "\n    "))
	}
}

// show prints the tenants' table, starts the claim that waits, and says how to look around.
func (d *demo) show(ctx context.Context, cs kubernetes.Interface) error {
	tenants, err := d.tenants()
	if err != nil {
		return err
	}
	vClusters, err := d.namingVClusters(ctx, tenants)
	if err != nil {
		return err
	}
	rows, err := d.tenantRows(ctx, cs, tenants, vClusters)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(d.Out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tGRANTED CLASSES (synced into its vCluster)\tADMITTED CLAIM\tALLOCATED DEVICE\tDENIED CLAIM\tWHY")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.tenant, r.sees, r.admitted, r.device, r.denied, r.why)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := d.showControlPlanes(ctx, cs, tenants); err != nil {
		return err
	}
	if d.Nodes {
		d.showGPUPods(ctx, cs, rows)
		for _, t := range tenants {
			if vc, ok := vClusters[t.Name]; ok && len(t.Classes) > 0 {
				if err := d.overQuotaByName(ctx, vc, t); err != nil {
					return err
				}
				break
			}
		}
	}
	if len(tenants) > 0 {
		if err := d.oversubscribe(ctx, cs, tenants[0]); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.Out, `
Look around:
  export KUBECONFIG=%s
  kubectl get deviceclasses --show-labels
  kubectl get resourceclaims,pods -A -o wide
  kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings
Stop: make demo-down
`, d.kubeconfig)
	return nil
}

// namingVClusters are clients of the vClusters of the tenants that ask for their classes by name, each with the
// tenant's own kubeconfig; none without real nodes, where no vCluster runs.
func (d *demo) namingVClusters(ctx context.Context, tenants []platform.TenantArgs) (map[string]kubernetes.Interface, error) {
	if !d.Nodes {
		return nil, nil
	}
	configs, err := d.kubeconfigs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]kubernetes.Interface{}
	for _, t := range tenants {
		if !d.args.GPUAccessOf(t).NamesClasses() {
			continue
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(configs[t.Name]))
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig stack local exports for %s: %w", t.Name, err)
		}
		if out[t.Name], err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TenantKubeconfigs are the kubeconfigs the local stack exports, by tenant: each tenant's own credentials for its
// vCluster, exported once its vCluster runs (Options.Nodes), empty before.
func TenantKubeconfigs(ctx context.Context, o Options) (map[string]string, error) {
	d, err := newDemo(o)
	if err != nil {
		return nil, err
	}
	return d.kubeconfigs(ctx)
}

func (d *demo) kubeconfigs(ctx context.Context) (map[string]string, error) {
	st, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	outputs, err := st.Outputs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the outputs of stack local: %w", err)
	}
	tenants, _ := outputs["tenants"].Value.(map[string]any)
	configs := map[string]string{}
	for name, t := range tenants {
		out, _ := t.(map[string]any)
		configs[name], _ = out["kubeconfig"].(string)
	}
	return configs, nil
}
