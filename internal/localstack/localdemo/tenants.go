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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// row is what one tenant sees, gets and is refused, and the host pod of its GPU job.
type row struct{ tenant, sees, admitted, device, denied, why, gpuPod string }

// tenantRows starts each tenant's GPU job: on real nodes, a tenant that asks for its classes by name creates a
// Deployment in its own vCluster, with its own kubeconfig (vClusters); any other gets a claim and a pod written on the
// host, as vCluster's Pro sync would write them.
func (d *demo) tenantRows(ctx context.Context, cs kubernetes.Interface, tenants []platform.TenantArgs, vClusters map[string]kubernetes.Interface) ([]row, error) {
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
			var alloc probe.Allocation
			if vc, ok := vClusters[t.Name]; ok {
				name, err := d.resourceName(class)
				if err != nil {
					return nil, err
				}
				r.admitted = fmt.Sprintf("Deployment demo-%s in its vCluster (%s: 1)", class, name)
				r.gpuPod, alloc, err = d.startByName(ctx, cs, vc, t.Name, "demo-"+class, name, 1)
				if err != nil {
					return nil, err
				}
			} else {
				r.admitted, r.gpuPod = "demo-"+class+" ("+class+")", "demo-"+class
				if alloc, err = d.claimAndRun(ctx, cs, ns, "demo-"+class, class); err != nil {
					return nil, err
				}
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

// startByName creates, through the tenant's vCluster, a Deployment of one pod that asks for count devices by the
// class's extended-resource name, reusing one of an earlier demo, and waits for the host scheduler's claim of its host
// pod to be allocated. It returns the host pod's name.
func (d *demo) startByName(ctx context.Context, cs, vc kubernetes.Interface, tenant, name, resourceName string, count int64) (string, probe.Allocation, error) {
	host, err := d.deployByName(ctx, vc, tenant, name, resourceName, count)
	if err != nil {
		return "", probe.Allocation{}, err
	}
	alloc, err := probe.WaitAllocated(ctx, cs, naming.Namespace(tenant), host, time.Minute)
	return host, alloc, err
}

// deployByName creates the Deployment of startByName and waits for vCluster to have written its pod to the host,
// returning the host pod's name (loft-sh/vcluster v0.36.1 pkg/util/translate: <name>-x-<namespace>-x-<vCluster>).
func (d *demo) deployByName(ctx context.Context, vc kubernetes.Interface, tenant, name, resourceName string, count int64) (string, error) {
	pod, container := probe.RestrictedPod(), probe.RestrictedContainer()
	pod.RunAsUser = ptr.To(int64(65532))
	limits := corev1.ResourceList{corev1.ResourceName(resourceName): *resource.NewQuantity(count, resource.DecimalSI)}
	labels := map[string]string{"app": name}
	_, err := vc.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				SecurityContext: pod, Containers: []corev1.Container{{Name: "main", Image: draplugin.ProbeImage,
					ImagePullPolicy: corev1.PullNever, SecurityContext: container,
					// The one line the tenant writes: the request follows the limit.
					Resources: corev1.ResourceRequirements{Limits: limits}}}}}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("Deployment %s in %s's vCluster: %w", name, tenant, err)
	}
	var virtual string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := vc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		virtual = pods.Items[0].Name
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("the pod of Deployment %s in %s's vCluster: %w", name, tenant, err)
	}
	return virtual + "-x-default-x-" + tenant, nil
}

// overQuotaByName has the first tenant that asks by name ask, in its vCluster, for one device more than its quota of
// its class, and prints what the tenant sees of it there: vCluster's SyncError event with the host quota's refusal.
// Nothing of it reaches the host scheduler. The Deployment goes afterwards, or vCluster retries it for ever.
func (d *demo) overQuotaByName(ctx context.Context, vc kubernetes.Interface, t platform.TenantArgs) error {
	class := t.Classes[0]
	name, err := d.resourceName(class)
	if err != nil {
		return err
	}
	const deployment = "demo-over-quota"
	over := int64(t.GPUQuota[class] + 1)
	d.say("\n==> %s asks in its vCluster for %s: %d, one more than its quota; what it sees there:", t.Name, name, over)
	if _, err := d.deployByName(ctx, vc, t.Name, deployment, name, over); err != nil {
		return err
	}
	defer func() {
		_ = vc.AppsV1().Deployments("default").Delete(context.WithoutCancel(ctx), deployment, metav1.DeleteOptions{})
	}()
	pods, err := vc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
	if err != nil || len(pods.Items) != 1 {
		return fmt.Errorf("the pod of Deployment %s in %s's vCluster: %v", deployment, t.Name, err)
	}
	pod := pods.Items[0].Name
	var refusal string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := vc.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == "SyncError" {
				refusal = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		d.say("    no refusal seen within a minute (kubectl get events -n default in %s's vCluster)", t.Name)
		return nil
	}
	d.say("    pod %s, event SyncError: %s", pod, refusal)
	return nil
}

// resourceName is the extended-resource name of a class of the local stack file.
func (d *demo) resourceName(class string) (string, error) {
	for _, c := range d.args.GPUClasses {
		if c.Name == class {
			return c.ResourceName(), nil
		}
	}
	return "", fmt.Errorf("class %s is not in the local stack's gpuClasses", class)
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
