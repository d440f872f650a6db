package localdemo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/draplugin"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// row is what one tenant sees, gets and is refused.
type row struct{ tenant, sees, admitted, device, denied, why string }

func (d *demo) tenantRows(ctx context.Context, cs kubernetes.Interface, tenants []platform.TenantArgs) ([]row, error) {
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
			alloc, err := d.claimAndRun(ctx, cs, ns, "demo-"+class, class)
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

// claimAndRun starts a claim and a pod for class and waits for the allocation.
func (d *demo) claimAndRun(ctx context.Context, cs kubernetes.Interface, ns, name, class string) (probe.Allocation, error) {
	if err := probe.WaitServiceAccount(ctx, cs, ns, time.Minute); err != nil {
		return probe.Allocation{}, err
	}
	if err := d.start(ctx, cs, ns, name, class); err != nil {
		return probe.Allocation{}, err
	}
	return probe.WaitAllocated(ctx, cs, ns, name, time.Minute)
}

// start creates a claim for one device of class and a pod using it, both named name, reusing those of an earlier
// demo. The claim is looked up first: creating it again would be refused by the tenant's device quota, which
// admission checks before it finds the name taken.
func (d *demo) start(ctx context.Context, cs kubernetes.Interface, ns, name, class string) error {
	claims := cs.ResourceV1().ResourceClaims(ns)
	_, err := claims.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = claims.Create(ctx, probe.Claim(ns, name, probe.Request{Classes: []string{class}}), metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("claim %s/%s: %w", ns, name, err)
	}
	pod := probe.Pod(ns, name, name, "")
	if d.Nodes {
		// On real nodes the pod runs: the GPU probe built here prints the device nodes and UUID its claim gave it.
		c := &pod.Spec.Containers[0]
		c.Image, c.ImagePullPolicy, c.Command = draplugin.ProbeImage, corev1.PullNever, nil
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// oversubscribe has the tenant ask for one device of its first class more than the simulated pool holds (within its
// quota), so `gpu-tenancy pending` has a waiting claim to show, with the scheduler's reason.
func (d *demo) oversubscribe(ctx context.Context, cs kubernetes.Interface, t platform.TenantArgs) error {
	if len(t.Classes) == 0 {
		return nil
	}
	class, ns := t.Classes[0], naming.Namespace(t.Name)
	published, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	devices := 0
	for _, s := range published.Items {
		// The simulated slices' pools and the real nodes' (named after the node, as the driver names them).
		if strings.HasPrefix(s.Spec.Pool.Name, "gpu-a100-whole-") || strings.HasPrefix(s.Spec.Pool.Name, "a100-whole-") {
			devices += len(s.Spec.Devices)
		}
	}
	for i := 1; i <= devices; i++ {
		name := fmt.Sprintf("demo-%s-%d", class, i)
		if err := d.start(ctx, cs, ns, name, class); err != nil {
			return err
		}
	}
	d.say("\n==> %s asks for %d more %s devices; the pool has %d in all, so one claim waits", t.Name, devices, class, devices)
	return nil
}

// foreignClass is a class granted to another tenant but not to t.
func foreignClass(t platform.TenantArgs, tenants []platform.TenantArgs) string {
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
