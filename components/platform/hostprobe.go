package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// ProbePodName names the pod the program sends, as a server-side dry run, to find out what the cluster does to a
// tenant pod.
const ProbePodName = "gpu-tenancy-host-probe"

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// probePod is a pod as vCluster writes a tenant's plain pod to the host (loft-sh/vcluster v0.36.1
// pkg/controllers/resources/pods/translate/translator.go): no class, no scheduler, no node, the GPU pools'
// tolerations, compliant with the restricted Pod Security Standard.
func probePod(namespace string, tolerations []string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ProbePodName, Namespace: namespace},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	for _, key := range tolerations {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule})
	}
	return p
}

// hostRewrites finds out, before any tenant object is created, what the cluster does to a tenant pod that the guards
// would then refuse: a cluster's own mutating admission (a PriorityClass with globalDefault, a webhook that sets the
// scheduler, as GKE's optimize-utilization autoscaling profile does, one that adds tolerations, a runtime class or
// variables) runs before the validating policies (kubernetes v1.34.4 pkg/kubeapiserver/options/plugins.go), so every
// tenant pod, the vCluster's own control plane included, would be refused. It dry-runs a probe pod in namespace (one
// of the stack's tenant namespaces when one exists, where the cluster treats it as a tenant's, else default) and
// compares what comes back with the platform's admission settings, naming the key that admits each rewrite. A default
// priority below the tenants' band is no refusal but an unfairness, which it warns of.
func (l *liveCluster) hostRewrites(ctx context.Context, c *PlatformArgs, namespace string, warn func(string)) error {
	var taints []string
	for _, t := range c.GPUPools() {
		if t.Taint.Key != "" && !slices.Contains(taints, t.Taint.Key) {
			taints = append(taints, t.Taint.Key)
		}
	}
	path := c.Keys.Path(keyAdmission)
	got, err := l.probe(ctx, namespace, taints)
	if err != nil && namespace != "default" && (strings.Contains(err.Error(), "exceeded quota") || refusedByTheGuards(err)) {
		// A tenant that holds its whole pod quota says nothing about the cluster's rewrites, and the platform's own
		// guards judge the probe by the config in force, not by the one this run applies: read what the cluster does
		// outside the tenants' namespaces. If it changes nothing there, a guard refused what the cluster does in tenant
		// namespaces only (a webhook that selects them), which no key here admits.
		inDefault, errDefault := l.probe(ctx, "default", taints)
		if errDefault == nil && refusedByTheGuards(err) && len(rewrites(inDefault, taints, tenancy.AdmissionArgs{}.WithDefaults(), path)) == 0 {
			return fmt.Errorf("a tenant pod is refused on this cluster (a server-side dry run of a plain pod in namespace %s, "+
				"while the same pod in default is left as sent): %w; something changes pods in tenant namespaces only", namespace, err)
		}
		namespace, got, err = "default", inDefault, errDefault
	}
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return fmt.Errorf("a tenant pod is refused on this cluster (a server-side dry run of a plain pod in namespace %s): %w; "+
				"if the cluster itself changes every pod, admit what it sets in %s", namespace, err, path)
		}
		return fmt.Errorf("finding out what the cluster does to a tenant pod (a server-side dry run in namespace %s): %w", namespace, err)
	}
	admission := c.Admission.WithDefaults()
	if w := lowDefaultPriority(got, admission, path); w != "" {
		warn(w)
	}
	problems := rewrites(got, taints, admission, path)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the cluster rewrites tenant pods so that the guards would refuse every one, the vCluster control planes "+
		"included (found by a server-side dry run of a plain pod in namespace %s):\n  - %s", namespace, strings.Join(problems, "\n  - "))
}

// probe dry-runs the probe pod in namespace and returns the pod as the cluster would store it.
func (l *liveCluster) probe(ctx context.Context, namespace string, tolerations []string) (*corev1.Pod, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(probePod(namespace, tolerations))
	if err != nil {
		return nil, err
	}
	var created *unstructured.Unstructured
	// A namespace's default service account appears a moment after the namespace (the controller-manager's
	// serviceaccount controller), and until then the ServiceAccount admission plugin refuses every pod in it
	// (kubernetes v1.34.4 plugin/pkg/admission/serviceaccount/admission.go): wait for it, on a cluster just started.
	deadline := time.Now().Add(serviceAccountWait)
	for {
		created, err = l.dyn.Resource(podsResource).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: raw},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "error looking up service account") || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return nil, err
	}
	var got corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &got); err != nil {
		return nil, err
	}
	return &got, nil
}

// lowDefaultPriority warns when the cluster's default PriorityClass gives the probe pod a priority below the highest a
// tenant's own class may have: every tenant pod without a class then runs at that default, and a tenant whose vCluster
// writes a class at the top of the band (gpu-tenancy-tenant-priority-classes admits it) preempts the other tenants'
// pods and is evicted after them.
func lowDefaultPriority(got *corev1.Pod, admission tenancy.AdmissionArgs, path *field.Path) string {
	prio := ptr.Deref(got.Spec.Priority, 0)
	if got.Spec.PriorityClassName == "" || int(prio) >= *admission.MaxTenantPriority {
		return ""
	}
	return fmt.Sprintf("the cluster's default PriorityClass %q gives every pod priority %d, below the %d a tenant's own class may "+
		"have: a tenant whose vCluster writes a class of %d preempts the other tenants' pods of the default; set %s to %d",
		got.Spec.PriorityClassName, prio, *admission.MaxTenantPriority, *admission.MaxTenantPriority, path.Child("maxTenantPriority"), prio)
}

// rewrites are what the cluster did to the probe pod (sent with tolerations of taints) that the guards would refuse
// under admission, each naming the key below path that admits it.
func rewrites(got *corev1.Pod, taints []string, admission tenancy.AdmissionArgs, path *field.Path) []string {
	var problems []string
	if s := got.Spec.SchedulerName; s != "" && s != tenancy.DefaultScheduler && !slices.Contains(admission.Schedulers, s) {
		problems = append(problems, fmt.Sprintf("it sets every pod's scheduler to %s (a mutating webhook, such as the one of GKE's "+
			"optimize-utilization autoscaling profile); tenant pods may use it once %s lists it", s, path.Child("schedulers")))
	}
	if prio := int(ptr.Deref(got.Spec.Priority, 0)); prio > *admission.MaxTenantPriority && !slices.Contains(admission.PriorityClasses, got.Spec.PriorityClassName) {
		problems = append(problems, fmt.Sprintf("it gives every pod priority %d (PriorityClass %q, the cluster's default class), above "+
			"the tenants' %d; admit it in %s, or raise %s to %d", prio, got.Spec.PriorityClassName, *admission.MaxTenantPriority,
			path.Child("priorityClasses"), path.Child("maxTenantPriority"), prio))
	}
	tolerable := append(append(slices.Clone(taints), admission.TolerableTaints...), tenancy.DefaultTolerableTaints...)
	var added []string
	for _, t := range got.Spec.Tolerations {
		if !slices.Contains(tolerable, t.Key) && !slices.Contains(added, t.Key) {
			added = append(added, t.Key)
		}
	}
	if len(added) > 0 {
		problems = append(problems, fmt.Sprintf("it adds tolerations of %s to every pod; admit them in %s if no tenant "+
			"must be kept off those nodes", strings.Join(added, ", "), path.Child("tolerableTaints")))
	}
	if rc := ptr.Deref(got.Spec.RuntimeClassName, ""); rc != "" && !slices.Contains(admission.RuntimeClasses, rc) {
		problems = append(problems, fmt.Sprintf("it sets RuntimeClass %s on every pod; admit it in %s (never an NVIDIA runtime class)",
			rc, path.Child("runtimeClasses")))
	}
	if got.Spec.NodeName != "" {
		problems = append(problems, fmt.Sprintf("it binds every pod to node %s at creation, past the scheduler and the taints that "+
			"keep tenants off nodes under maintenance: no setting admits that", got.Spec.NodeName))
	}
	for _, ctr := range got.Spec.Containers {
		for _, e := range ctr.Env {
			if slices.Contains(tenancy.RuntimeEnvVars, e.Name) {
				problems = append(problems, fmt.Sprintf("it sets %s in every container, which exposes GPUs outside DRA: no setting admits that", e.Name))
			}
		}
	}
	return problems
}

// refusedByTheGuards reports whether one of the platform's own admission policies refused the probe.
func refusedByTheGuards(err error) bool {
	for _, g := range tenancy.Guards(tenancy.AdmissionArgs{}) {
		if strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+g.Name+"'") {
			return true
		}
	}
	return false
}

// serviceAccountWait bounds the wait for a namespace's default service account before the probe.
const serviceAccountWait = time.Minute

// probeNamespace is where to send the probe: the first of tenants' host namespaces that exists, else default.
func (l *liveCluster) probeNamespace(ctx context.Context, tenants []TenantArgs) string {
	for _, t := range tenants {
		if _, err := l.meta.Resource(namespacesResource).Get(ctx, naming.Namespace(t.Name), metav1.GetOptions{}); err == nil {
			return naming.Namespace(t.Name)
		}
	}
	return "default"
}

// probeBuiltCluster checks that a cloud cluster this stack builds keeps extended-resource names where a tenant asks
// for GPUs by name (checkServesExtendedResources: a cloud may run a minor with the gate off) and runs hostRewrites on it, once its kubeconfig is known (on the up
// that creates it, or at the preview of one that exists), and resolves only when the probe passes: every tenant object
// depends on it, so on a cluster that rewrites tenant pods the run fails after the cluster and the platform's own
// objects and before any tenant's. A cluster just created may not answer yet (its address not yet resolvable, its API
// not up): an up waits for it rather than create tenants unprobed, and fails if it never answers. A kubeconfig that
// reaches no cluster for another reason (the offline plans' placeholders, a machine without the cloud's credentials
// plugin, on which the kubernetes provider cannot create anything either) and any failure to reach it at preview are
// warnings.
func (c *PlatformArgs) probeBuiltCluster(ctx *pulumi.Context, kubeconfig pulumi.StringOutput, tenants []TenantArgs,
	warn func(string)) pulumi.ResourceArrayOutput {
	dryRun := ctx.DryRun()
	return kubeconfig.ApplyTWithContext(ctx.Context(), func(goctx context.Context, kc string) ([]pulumi.Resource, error) {
		l, err := connect(kc)
		if err == nil {
			deadline := time.Now().Add(reachWait)
			for {
				if _, err = l.identity(goctx); err == nil || dryRun || !isNetworkError(err) || time.Now().After(deadline) {
					break
				}
				select {
				case <-goctx.Done():
					return nil, goctx.Err()
				case <-time.After(5 * time.Second):
				}
			}
		}
		switch {
		case err != nil && !isUnreachable(err):
			return nil, err
		case err != nil && !dryRun && isNetworkError(err):
			return nil, fmt.Errorf("the new cluster did not answer within %s, so what it does to tenant pods is not known: "+
				"no tenant is created; run the up again once it answers: %w", reachWait, err)
		case err != nil:
			warn(fmt.Sprintf("not checking what the cluster does to tenant pods: %v", err))
			return nil, nil
		}
		for _, w := range l.nodeExposures(goctx, c.platformPool(), podRange{}) {
			warn(w)
		}
		if err := c.checkServesExtendedResources(goctx, l, warn); err != nil {
			return nil, err
		}
		return nil, l.hostRewrites(goctx, c, l.probeNamespace(goctx, tenants), warn)
	}).(pulumi.ResourceArrayOutput)
}

// reachWait bounds how long an up waits for a new cluster's API to answer before it probes it.
const reachWait = 5 * time.Minute

// isNetworkError reports an error of the network between here and the cluster (no route, a refused connection, a
// name that does not resolve yet, a timeout), which time may mend, unlike a kubeconfig or credentials that are wrong.
func isNetworkError(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	var u *url.Error
	return errors.As(err, &op) || errors.As(err, &dns) || (errors.As(err, &u) && u.Timeout())
}
