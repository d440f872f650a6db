package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// admissionSizes are the tenant counts whose guards are installed when a claim's admission is timed, and
// admissionClaims how many claim creates each size times.
var (
	admissionSizes  = []int{10, 100, 1000}
	admissionClaims = 400
)

// oneEntitlementPolicy is the platform's design, which the target is for; the other is measured for comparison.
const oneEntitlementPolicy = "one policy, grants in namespace labels"

// admissionRatioTarget is how much more a claim create may cost with 1,000 tenants' guards than with 10.
const admissionRatioTarget = 1.5

// benchAdmission times what one tenant's claim create costs the API server as the number of tenants grows: the local
// stack is brought up for real (its two tenants, the platform's guards), then what each further tenant adds to the
// cluster is added until 10, 100 and 1,000 tenants are there (its host namespace labelled with its grants, its API
// FlowSchema, its vCluster's ClusterRole and binding, copied from legal-ai's), and at each size admissionClaims
// server-side dry-run creates of a claim of legal-ai's class are sent as legal-ai's syncer, one at a time, and their
// latencies taken (p50, p99). For comparison, the same is measured with one entitlement policy and binding per tenant
// (the design before one policy served every tenant), copied from the platform's policy and bound to each tenant's
// namespace. It returns lines to print; it asserts nothing.
func benchAdmission(ctx context.Context, root string) ([]string, error) {
	cl, done, err := localStackUp(ctx, root, "admission")
	defer done()
	if err != nil {
		return nil, err
	}
	// Thousands of objects to add: client-go's default rate limit (5 a second) would take most of the run.
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 500
	fast, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	const tenant, class = "legal-ai", "gpu-whole"
	syncer, err := newLoadClient(ctx, cl, naming.Namespace(tenant), "vc-"+tenant)
	if err != nil {
		return nil, err
	}
	as, err := syncer.clientset()
	if err != nil {
		return nil, err
	}
	lines := []string{"", fmt.Sprintf("ADMISSION COST: %d server-side dry-run creates of a %s claim as %s's syncer, one at a time, "+
		"with the guards of this many tenants on the cluster (target: 1,000 / 10 <= %.1f)", admissionClaims, class, tenant, admissionRatioTarget)}
	table := [][]string{{"DESIGN", "TENANTS", "P50", "P99"}}
	p50 := map[string]map[int]time.Duration{}
	for _, design := range []string{oneEntitlementPolicy, "a policy and binding per tenant"} {
		p50[design] = map[int]time.Duration{}
		added := 2
		for _, n := range admissionSizes {
			fmt.Fprintf(os.Stderr, "bench: admission: %s, %d tenants\n", design, n)
			for ; added < n; added++ {
				if err := addTenantGuards(ctx, fast, tenant, added, design != oneEntitlementPolicy); err != nil {
					return lines, err
				}
			}
			time.Sleep(settleFor) // the API server's policy and flow-control informers catch up
			l, err := timeClaims(ctx, as, naming.Namespace(tenant), class)
			if err != nil {
				return lines, err
			}
			p50[design][n] = l.percentile(50)
			table = append(table, []string{design, fmt.Sprint(n), ms(l.percentile(50)), ms(l.percentile(99))})
		}
		if err := removeTenantGuards(ctx, fast); err != nil {
			return lines, err
		}
	}
	lines = append(lines, formatTable(table)...)
	for design, byN := range p50 {
		lo, hi := admissionSizes[0], admissionSizes[len(admissionSizes)-1]
		if byN[lo] > 0 {
			ratio := float64(byN[hi]) / float64(byN[lo])
			verdict := "met"
			if ratio > admissionRatioTarget {
				verdict = "MISSED"
			}
			if design != oneEntitlementPolicy {
				verdict = "for comparison"
			}
			lines = append(lines, fmt.Sprintf("%s: p50 at %d / at %d tenants: x%.2f (target x%.1f): %s", design, hi, lo, ratio,
				admissionRatioTarget, verdict))
		}
	}
	return lines, nil
}

// benchLabel marks what the admission benchmark adds, so it can be removed again.
const benchLabel = "gpu-tenancy.bench/admission"

// addTenantGuards adds to the cluster what tenant number i adds to a platform with one entitlement policy: its host
// namespace labelled with its tenant and its grant of the same class as model, its FlowSchema and its vCluster's
// ClusterRole and binding, copied from model's; with perTenantPolicy also an entitlement policy and binding of its own.
func addTenantGuards(ctx context.Context, cs kubernetes.Interface, model string, i int, perTenantPolicy bool) error {
	// Each design's tenants have names of their own: the first design's namespaces may still be terminating.
	name := fmt.Sprintf("bench-%04d", i)
	if perTenantPolicy {
		name = fmt.Sprintf("bench-p-%04d", i)
	}
	ns := naming.Namespace(name)
	modelNS, err := cs.CoreV1().Namespaces().Get(ctx, naming.Namespace(model), metav1.GetOptions{})
	if err != nil {
		return err
	}
	labels := map[string]string{benchLabel: "true"}
	for k, v := range modelNS.Labels {
		labels[k] = v
	}
	labels[naming.TenantNamespaceLabel] = name
	delete(labels, naming.StackLabel)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	level, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, naming.TenantPriorityLevel(model), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: naming.TenantPriorityLevel(name), Labels: map[string]string{benchLabel: "true"}},
		Spec:       *level.Spec.DeepCopy()}, metav1.CreateOptions{}); err != nil {
		return err
	}
	fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, naming.TenantFlowSchema(model), metav1.GetOptions{})
	if err != nil {
		return err
	}
	copyFS := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: naming.TenantFlowSchema(name), Labels: map[string]string{benchLabel: "true"}},
		Spec: *fs.Spec.DeepCopy()}
	copyFS.Spec.PriorityLevelConfiguration.Name = naming.TenantPriorityLevel(name)
	copyFS.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup,
		Group: &flowcontrolv1.GroupSubject{Name: "system:serviceaccounts:" + ns}}}
	if _, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, copyFS, metav1.CreateOptions{}); err != nil {
		return err
	}
	roles, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "release=" + model})
	if err != nil {
		return err
	}
	for _, r := range roles.Items {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-" + name, Labels: map[string]string{benchLabel: "true"}}, Rules: r.Rules}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return err
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: role.ObjectMeta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "vc-" + name, Namespace: ns}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if !perTenantPolicy {
		return nil
	}
	policy, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, naming.EntitlementPolicy, metav1.GetOptions{})
	if err != nil {
		return err
	}
	own := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: naming.EntitlementPolicy + "-" + name,
		Labels: map[string]string{benchLabel: "true"}}, Spec: *policy.Spec.DeepCopy()}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: own.ObjectMeta,
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: own.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{naming.TenantNamespaceLabel: name}}}},
	}, metav1.CreateOptions{})
	return err
}

// removeTenantGuards removes what addTenantGuards added.
func removeTenantGuards(ctx context.Context, cs kubernetes.Interface) error {
	sel := metav1.ListOptions{LabelSelector: benchLabel}
	del := metav1.DeleteOptions{}
	for _, f := range []func() error{
		func() error {
			return cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().DeleteCollection(ctx, del, sel)
		},
		func() error {
			return cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().DeleteCollection(ctx, del, sel)
		},
		func() error { return cs.RbacV1().ClusterRoleBindings().DeleteCollection(ctx, del, sel) },
		func() error { return cs.RbacV1().ClusterRoles().DeleteCollection(ctx, del, sel) },
		func() error { return cs.FlowcontrolV1().FlowSchemas().DeleteCollection(ctx, del, sel) },
		func() error { return cs.FlowcontrolV1().PriorityLevelConfigurations().DeleteCollection(ctx, del, sel) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	list, err := cs.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return err
	}
	for _, ns := range list.Items {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, del); err != nil {
			return err
		}
	}
	return nil
}

// timeClaims times admissionClaims dry-run creates of a claim of class in namespace, one after another.
func timeClaims(ctx context.Context, as kubernetes.Interface, namespace, class string) (latencies, error) {
	var l latencies
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for i := range admissionClaims {
		c := probe.Claim(namespace, fmt.Sprintf("bench-%d", i), probe.Request{Classes: []string{class}})
		start := time.Now()
		if _, err := as.ResourceV1().ResourceClaims(namespace).Create(ctx, c, dryRun); err != nil {
			return l, fmt.Errorf("claim create as the syncer: %w", err)
		}
		l.latencies = append(l.latencies, time.Since(start))
		l.served++
	}
	return l, nil
}
