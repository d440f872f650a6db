// Package probe acts as a tenant would on the host cluster: it creates ResourceClaims, templates and pods in a
// tenant's host namespace and reads what the scheduler allocated. The end-to-end tests and `make demo` use it.
package probe

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// Connect builds a client from a kubeconfig file.
func Connect(kubeconfigPath string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfigPath, err)
	}
	return kubernetes.NewForConfig(cfg)
}

// Request is one device request: one class, or several tried in order (firstAvailable).
type Request struct {
	Classes     []string
	AdminAccess bool
}

func (r Request) deviceRequest(name string) resourcev1.DeviceRequest {
	if len(r.Classes) == 1 {
		exact := &resourcev1.ExactDeviceRequest{DeviceClassName: r.Classes[0]}
		if r.AdminAccess {
			exact.AdminAccess = &r.AdminAccess
		}
		return resourcev1.DeviceRequest{Name: name, Exactly: exact}
	}
	req := resourcev1.DeviceRequest{Name: name}
	for i, c := range r.Classes {
		req.FirstAvailable = append(req.FirstAvailable, resourcev1.DeviceSubRequest{
			Name: fmt.Sprintf("option-%d", i), DeviceClassName: c, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
		})
	}
	return req
}

// Claim is a ResourceClaim for one device.
func Claim(namespace, name string, r Request) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{r.deviceRequest("gpu")},
		}},
	}
}

// ClaimTemplate is a ResourceClaimTemplate for one device.
func ClaimTemplate(namespace, name string, r Request) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{r.deviceRequest("gpu")},
		}}},
	}
}

// Pod is a GPU workload using a claim (claimName) or a claim template (templateName); it tolerates the GPU taint, as
// a tenant's synced pods do, and passes the restricted Pod Security Standard, as a tenant's pods must.
func Pod(namespace, name, claimName, templateName string) *corev1.Pod {
	rc := corev1.PodResourceClaim{Name: "gpu"}
	if claimName != "" {
		rc.ResourceClaimName = &claimName
	} else {
		rc.ResourceClaimTemplateName = &templateName
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "cuda", Image: "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04", Command: []string{"nvidia-smi", "-L"},
				Resources:       corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				SecurityContext: RestrictedContainer(),
			}},
			SecurityContext: RestrictedPod(),
			ResourceClaims:  []corev1.PodResourceClaim{rc},
			Tolerations: []corev1.Toleration{{
				Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			}},
		},
	}
}

// RestrictedPod and RestrictedContainer are the security contexts the restricted Pod Security Standard asks for
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted).
func RestrictedPod() *corev1.PodSecurityContext {
	uid := int64(1000)
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

func RestrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// Run creates a claim for one device of class and a pod using it, both named name.
func Run(ctx context.Context, cs kubernetes.Interface, namespace, name, class string) error {
	claim := Claim(namespace, name, Request{Classes: []string{class}})
	if _, err := cs.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("claim %s/%s: %w", namespace, name, err)
	}
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, Pod(namespace, name, name, ""), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Allocation is where a pod landed and which device its claim got.
type Allocation struct {
	Node   string
	Pool   string
	Device string
}

// WaitAllocated waits until the pod is bound and its claim allocated, and returns the allocation. The pod may appear
// while it waits, as one a vCluster writes to the host a moment after the tenant creates it.
func WaitAllocated(ctx context.Context, cs kubernetes.Interface, namespace, pod string, timeout time.Duration) (Allocation, error) {
	var got Allocation
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName == "" {
			return false, nil
		}
		claimName := ClaimOf(p)
		if claimName == "" {
			return false, nil
		}
		c, err := cs.ResourceV1().ResourceClaims(namespace).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) == 0 {
			return false, nil
		}
		r := c.Status.Allocation.Devices.Results[0]
		got = Allocation{Node: p.Spec.NodeName, Pool: r.Pool, Device: r.Device}
		return true, nil
	})
	if err != nil {
		return Allocation{}, fmt.Errorf("pod %s/%s: no allocation: %w", namespace, pod, err)
	}
	return got, nil
}

// ClaimOf is the name of the claim a pod's first resource claim refers to: the named claim, or the one generated from
// its template; for a pod that asks for a class by its extended-resource name, the claim the scheduler made for it;
// "" until that claim is made.
func ClaimOf(p *corev1.Pod) string {
	if len(p.Spec.ResourceClaims) == 0 {
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			return s.ResourceClaimName
		}
		return ""
	}
	if n := p.Spec.ResourceClaims[0].ResourceClaimName; n != nil {
		return *n
	}
	if s := p.Status.ResourceClaimStatuses; len(s) > 0 && s[0].ResourceClaimName != nil {
		return *s[0].ResourceClaimName
	}
	return ""
}

// PendingReason reports why a pod is not scheduled (the scheduler's condition message), or "" when it is.
func PendingReason(ctx context.Context, cs kubernetes.Interface, namespace, pod string) (string, error) {
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Spec.NodeName != "" {
		return "", nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message, nil
		}
	}
	return "not yet considered by the scheduler", nil
}

// WaitServiceAccount waits for the namespace's default ServiceAccount, without which pods are refused.
func WaitServiceAccount(ctx context.Context, cs kubernetes.Interface, namespace string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
