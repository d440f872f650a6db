// Command demo runs the local stack on the local control plane (scripts/local-cluster.sh) and shows, per tenant,
// what it can see and claim. `demo up` applies the stack and prints the table; `demo down` destroys the stack.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/infra/pipeline"
	"github.com/gpu-tenancy/gpu-tenancy/internal/engine"
	"github.com/gpu-tenancy/gpu-tenancy/tests/probe"
	"github.com/gpu-tenancy/gpu-tenancy/tests/simhw"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func main() {
	verb := "up"
	if len(os.Args) > 1 {
		verb = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var err error
	switch verb {
	case "up":
		err = up(ctx)
	case "down":
		err = down(ctx)
	default:
		err = fmt.Errorf("usage: demo up|down")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func paths() (root, kubeconfig string, err error) {
	root, err = os.Getwd()
	if err != nil {
		return "", "", err
	}
	return root, filepath.Join(root, ".tools", "local-cluster", "kubeconfig"), nil
}

func up(ctx context.Context) error {
	root, kubeconfig, err := paths()
	if err != nil {
		return err
	}
	cs, err := probe.Connect(kubeconfig)
	if err != nil {
		return fmt.Errorf("%w (start the control plane: scripts/local-cluster.sh up)", err)
	}
	fmt.Println("==> simulating GPU nodes: 2 x whole A100 (a100-whole), 1 x A100 in MIG 1g.5gb (a100-mig)")
	if err := simhw.Apply(ctx, cs); err != nil {
		return err
	}
	fmt.Println("==> pulumi up of stack local (progress in .tools/demo-up.log)")
	logFile, err := os.Create(filepath.Join(root, ".tools", "demo-up.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	st, err := engine.Open(ctx, engine.Options{RepoRoot: root, Stack: "local", Progress: logFile})
	if err != nil {
		return err
	}
	res, err := st.Up(ctx)
	if err != nil {
		return fmt.Errorf("pulumi up failed (see .tools/demo-up.log): %w", err)
	}
	fmt.Printf("    %v\n\n", *res.Summary.ResourceChanges)

	tenants, err := stackTenants(root)
	if err != nil {
		return err
	}
	rows, err := tenantRows(ctx, cs, tenants)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tGRANTED CLASSES (synced into its vCluster)\tADMITTED CLAIM\tALLOCATED DEVICE\tDENIED CLAIM\tWHY")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.tenant, r.sees, r.admitted, r.device, r.denied, r.why)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := oversubscribe(ctx, cs, tenants[0]); err != nil {
		return err
	}
	fmt.Printf(`
Look around:
  export KUBECONFIG=%s
  kubectl get deviceclasses --show-labels
  kubectl get resourceclaims,pods -A -o wide
  kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings
Stop: make demo-down
`, kubeconfig)
	return nil
}

// stackTenants are the tenants of the local stack file.
func stackTenants(root string) ([]pipeline.TenantConfig, error) {
	sc, err := pipeline.ReadStackFile(filepath.Join(root, "stacks", "Pulumi.local.yaml"))
	if err != nil {
		return nil, err
	}
	var tenants []pipeline.TenantConfig
	if err := json.Unmarshal([]byte(sc.Values[pipeline.Namespace+":tenants"]), &tenants); err != nil {
		return nil, fmt.Errorf("tenants of the local stack: %w", err)
	}
	return tenants, nil
}

type row struct{ tenant, sees, admitted, device, denied, why string }

func tenantRows(ctx context.Context, cs kubernetes.Interface, tenants []pipeline.TenantConfig) ([]row, error) {
	var rows []row
	for _, t := range tenants {
		ns := naming.Namespace(t.Name)
		r := row{tenant: t.Name}
		classes, err := cs.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{LabelSelector: naming.ClassTenantLabel(t.Name) + "=true"})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, c := range classes.Items {
			names = append(names, c.Name)
		}
		r.sees = strings.Join(names, ", ")
		if len(t.Classes) > 0 {
			class := t.Classes[0]
			r.admitted = "demo-" + class + " (" + class + ")"
			alloc, err := claimAndRun(ctx, cs, ns, "demo-"+class, class)
			if err != nil {
				return nil, err
			}
			r.device = alloc.Node + "/" + alloc.Device
		}
		if foreign := foreignClass(t, tenants); foreign != "" {
			r.denied = foreign
			_, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, probe.Claim(ns, "demo-denied", probe.Request{Classes: []string{foreign}}),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			r.why = denial(err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// claimAndRun starts a claim and a pod for class (an earlier demo's are reused) and waits for the allocation.
func claimAndRun(ctx context.Context, cs kubernetes.Interface, ns, name, class string) (probe.Allocation, error) {
	if err := probe.WaitServiceAccount(ctx, cs, ns, time.Minute); err != nil {
		return probe.Allocation{}, err
	}
	if err := probe.Run(ctx, cs, ns, name, class); err != nil && !apierrors.IsAlreadyExists(err) {
		return probe.Allocation{}, err
	}
	return probe.WaitAllocated(ctx, cs, ns, name, time.Minute)
}

// oversubscribe has the first tenant ask for one device of its first class more than the simulated pool holds
// (within its quota), so `gpu-tenancy pending` has a waiting claim to show, with the scheduler's reason.
func oversubscribe(ctx context.Context, cs kubernetes.Interface, t pipeline.TenantConfig) error {
	if len(t.Classes) == 0 {
		return nil
	}
	class, ns := t.Classes[0], naming.Namespace(t.Name)
	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	devices := 0
	for _, s := range slices.Items {
		if strings.HasPrefix(s.Spec.Pool.Name, "gpu-a100-whole-") {
			devices += len(s.Spec.Devices)
		}
	}
	for i := 1; i <= devices; i++ {
		name := fmt.Sprintf("demo-%s-%d", class, i)
		if err := probe.Run(ctx, cs, ns, name, class); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	fmt.Printf("\n==> %s asks for %d more %s devices; the pool has %d in all, so one claim waits\n", t.Name, devices, class, devices)
	return nil
}

// foreignClass is a class granted to another tenant but not to t.
func foreignClass(t pipeline.TenantConfig, tenants []pipeline.TenantConfig) string {
	for _, other := range tenants {
		for _, c := range other.Classes {
			if !slices.Contains(t.Classes, c) {
				return c
			}
		}
	}
	return ""
}

// denial is the admission policy's message, or why there was none.
func denial(err error) string {
	if err == nil {
		return "ADMITTED (entitlement not enforced!)"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		msg := status.Status().Message
		if i := strings.Index(msg, "denied request: "); i >= 0 {
			return msg[i+len("denied request: "):]
		}
		return msg
	}
	return err.Error()
}

func down(ctx context.Context) error {
	root, kubeconfig, err := paths()
	if err != nil {
		return err
	}
	cs, err := probe.Connect(kubeconfig)
	if err != nil {
		return err
	}
	tenants, err := stackTenants(root)
	if err != nil {
		return err
	}
	zero := int64(0)
	for _, t := range tenants {
		// No kubelet confirms a graceful delete, so demo pods go at once.
		err := cs.CoreV1().Pods(naming.Namespace(t.Name)).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting demo pods of %s: %w", t.Name, err)
		}
	}
	st, err := engine.Open(ctx, engine.Options{RepoRoot: root, Stack: "local"})
	if err != nil {
		return err
	}
	fmt.Println("==> pulumi destroy of stack local")
	if _, err := st.Destroy(ctx); err != nil {
		return err
	}
	return simhw.Remove(ctx, cs)
}
