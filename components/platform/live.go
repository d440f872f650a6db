package platform

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

// liveCluster is the cluster a stack's program reads before it registers anything: who owns the objects it would
// create, which stacks hold the tenants, the cluster's identity, whether the platform's guards are in force, and what
// the cluster does to a tenant pod.
type liveCluster struct {
	meta metadata.Interface
	dyn  dynamic.Interface
}

// connect reaches the cluster of a kubeconfig; nil, with the reason, when the kubeconfig reaches none (as in the
// offline plans, whose kubeconfigs are placeholders).
func connect(kubeconfig string) (*liveCluster, error) {
	rest, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, err
	}
	rest.Timeout = 15 * time.Second
	// A handful of LISTs: client-go's default rate limit would only add waits (k8s.io/client-go v0.34 rest/config.go).
	rest.QPS, rest.Burst = 50, 100
	l := &liveCluster{}
	if l.meta, err = metadata.NewForConfig(rest); err != nil {
		return nil, err
	}
	if l.dyn, err = dynamic.NewForConfig(rest); err != nil {
		return nil, err
	}
	return l, nil
}

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// identity is the cluster's identity: the UID of its kube-system namespace, which exists from a cluster's creation to
// its end and is the same whatever address or credentials reach it. It is the kubernetes provider's
// clusterIdentifier, so a changed server address or CA updates the provider instead of replacing every object
// (pulumi-kubernetes provider/pkg/provider/provider.go DiffConfig, clusterIdentifier).
func (l *liveCluster) identity(ctx context.Context) (string, error) {
	ns, err := l.meta.Resource(namespacesResource).Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the cluster's identity (namespace kube-system): %w", err)
	}
	return string(ns.UID), nil
}

// TenantOwners maps each tenant whose host namespace exists on the cluster of meta to the stack that owns it
// (naming.StackLabel): what LiveGroups places tenants by.
func TenantOwners(ctx context.Context, meta metadata.Interface) (map[string]string, error) {
	list, err := meta.Resource(namespacesResource).List(ctx, metav1.ListOptions{LabelSelector: naming.TenantNamespaceLabel})
	if err != nil {
		return nil, fmt.Errorf("listing tenant namespaces: %w", err)
	}
	owners := map[string]string{}
	for _, ns := range list.Items {
		tenant := ns.Labels[naming.TenantNamespaceLabel]
		if ns.Name == naming.Namespace(tenant) {
			owners[tenant] = ns.Labels[naming.StackLabel]
		}
	}
	return owners, nil
}

var (
	policiesResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	bindingsResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	classesResource  = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
)

// guardProblems says what keeps the platform's guards from holding for tenants (each granted its classes) on the
// cluster: a guard policy or binding that is missing, belongs to another stack than the environment's platform stack
// (platformOwner), or is not in force as the catalog makes it (failure policy Fail, action Deny, the namespaces it
// selects); a class a tenant is granted that does not exist, belongs to another stack, or does not carry the tenant's
// grant label (which the tenant's vCluster syncs by). No problem: nil.
func (l *liveCluster) guardProblems(ctx context.Context, platformOwner string, admission tenancy.AdmissionArgs,
	grants map[string][]string) ([]string, error) {
	var problems []string
	owned := func(kind string, obj *unstructured.Unstructured) bool {
		if owner := obj.GetLabels()[naming.StackLabel]; owner != platformOwner {
			problems = append(problems, fmt.Sprintf("%s %s belongs to stack %q, not the platform stack %s", kind, obj.GetName(), owner, platformOwner))
			return false
		}
		return true
	}
	get := func(gvr schema.GroupVersionResource, kind, name string) (*unstructured.Unstructured, error) {
		obj, err := l.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("%s %s does not exist", kind, name))
			return nil, nil
		}
		return obj, err
	}
	for _, g := range tenancy.Guards(admission) {
		policy, err := get(policiesResource, naming.KindPolicy, g.Name)
		if err != nil {
			return nil, err
		}
		if policy != nil && owned(naming.KindPolicy, policy) {
			if fp, _, _ := unstructured.NestedString(policy.Object, "spec", "failurePolicy"); fp != "Fail" {
				problems = append(problems, fmt.Sprintf("%s %s has failurePolicy %q: a guard that cannot be evaluated must deny (Fail)", naming.KindPolicy, g.Name, fp))
			}
		}
		binding, err := get(bindingsResource, naming.KindPolicyBinding, g.Name)
		if err != nil {
			return nil, err
		}
		if binding == nil || !owned(naming.KindPolicyBinding, binding) {
			continue
		}
		if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != g.Name {
			problems = append(problems, fmt.Sprintf("%s %s binds policy %q, not %s", naming.KindPolicyBinding, g.Name, name, g.Name))
		}
		if actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions"); !slices.Equal(actions, []string{"Deny"}) {
			problems = append(problems, fmt.Sprintf("%s %s has validationActions %v: a guard denies (Deny)", naming.KindPolicyBinding, g.Name, actions))
		}
		got, _, _ := unstructured.NestedMap(binding.Object, "spec", "matchResources", "namespaceSelector")
		if !selectorEqual(got, g.NamespaceSelector) {
			problems = append(problems, fmt.Sprintf("%s %s selects namespaces %v, not %v as the platform binds it", naming.KindPolicyBinding, g.Name, got, g.NamespaceSelector))
		}
	}
	checked := map[string]bool{}
	for _, tenant := range sortedKeys(grants) {
		for _, class := range grants[tenant] {
			dc, err := get(classesResource, naming.KindDeviceClass, class)
			if err != nil {
				return nil, err
			}
			if dc == nil {
				continue
			}
			if !checked[class] && !owned(naming.KindDeviceClass, dc) {
				checked[class] = true
				continue
			}
			checked[class] = true
			if dc.GetLabels()[naming.ClassTenantLabel(tenant)] != "true" {
				problems = append(problems, fmt.Sprintf("%s %s is not granted to tenant %s (no label %s=true)", naming.KindDeviceClass, class, tenant, naming.ClassTenantLabel(tenant)))
			}
		}
	}
	return problems, nil
}

// selectorEqual compares a namespace selector read from the cluster with the one the catalog binds (nil: every
// namespace). The API server drops empty fields, so an absent selector and an empty one are the same.
func selectorEqual(got map[string]any, want *metav1.LabelSelector) bool {
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got, &sel); err != nil {
		return false
	}
	if want == nil {
		want = &metav1.LabelSelector{}
	}
	return metav1.FormatLabelSelector(&sel) == metav1.FormatLabelSelector(want)
}

var leasesResource = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

var resourceClaimsResource = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}

// checkClaimsLeftUnsynced refuses a tenant that gets GPUs as extended resources only while its host namespace holds
// claims its vCluster's Pro sync made: the open-source syncer it runs then neither syncs nor deletes them, so their
// devices stay held for pods the tenant can no longer manage, and a pod of its that uses one is never synced again.
// The claims the scheduler makes for pods that ask by name carry its mark and stay.
func (l *liveCluster) checkClaimsLeftUnsynced(ctx context.Context, c *PlatformArgs, tenants []TenantArgs) error {
	var errs field.ErrorList
	for i, t := range c.Tenants {
		if c.GPUAccessOf(t).SyncsClaims() || !slices.ContainsFunc(tenants, func(b TenantArgs) bool { return b.Name == t.Name }) {
			continue
		}
		ns := naming.Namespace(t.Name)
		list, err := l.meta.Resource(resourceClaimsResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the claims of tenant %s (namespace %s): %w", t.Name, ns, err)
		}
		var synced []string
		for _, claim := range list.Items {
			if claim.Annotations[tenancy.ExtendedResourceClaimAnnotation] != "true" {
				synced = append(synced, claim.Name)
			}
		}
		if len(synced) > 0 {
			slices.Sort(synced)
			errs = append(errs, field.Invalid(c.gpuAccessKey(i), string(c.GPUAccessOf(t)), fmt.Sprintf(
				"tenant %s's namespace %s holds claims its vCluster synced (%s): with gpuAccess %s its vCluster runs the open-source "+
					"syncer, which neither syncs nor deletes them, so their devices stay held; delete them inside the tenant's vCluster "+
					"first, or set %s to %s", t.Name, ns, firstFew(synced), vcluster.ExtendedResources,
				c.Keys.Path(keyTenants).Index(i).Child("gpuAccess"), vcluster.BothAccess)))
		}
	}
	if len(errs) > 0 {
		return &ArgsError{Keys: c.Keys, Errs: errs}
	}
	return nil
}

var deviceClassesResource = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}

// extendedResourceProbe is the DeviceClass a server-side dry run creates to learn whether the API server keeps a
// class's extendedResourceName; a dry run stores nothing.
const extendedResourceProbe = "gpu-tenancy-extended-resource-probe"

// servesExtendedResources asks the API server, by a server-side dry run, whether it keeps a DeviceClass's
// extendedResourceName: one whose DRAExtendedResource gate is off (an existing cluster older than 1.36, or one that
// turned it off) drops the field before admission, without a word (kubernetes v1.36.3
// pkg/registry/resource/deviceclass/strategy.go dropDisabledFields). The catalog's own guard refuses the probe's name
// once it is in force, which it can only do for a field it was handed: that refusal says the field is kept.
func (l *liveCluster) servesExtendedResources(ctx context.Context) (bool, error) {
	probeName := tenancy.DefaultExtendedResourceName("probe")
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
		"metadata": map[string]any{"name": extendedResourceProbe, "labels": map[string]any{naming.ManagedByLabel: naming.ManagedBy}},
		"spec":     map[string]any{"extendedResourceName": probeName},
	}}
	created, err := l.dyn.Resource(deviceClassesResource).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err != nil && strings.Contains(err.Error(), tenancy.ExtendedResourceClassPolicy) && strings.Contains(err.Error(), probeName):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("a server-side dry run of DeviceClass %s: %w", extendedResourceProbe, err)
	}
	kept, _, _ := unstructured.NestedString(created.Object, "spec", "extendedResourceName")
	return kept == probeName, nil
}

// lostKubeconfigs are the tenants whose vCluster runs (its StatefulSet is on the cluster) while the Secret it exports
// its kubeconfig in is not there. The deployment reads that Secret, and a read of a Secret that is not there fails it,
// every other tenant's changes with it. The tenant's own identities may not delete it (gpu-tenancy-kubeconfig-secret),
// but the garbage collector deletes it under its own name once an owner reference that the tenant's syncer may write
// names an owner that is not there (a dangling or mismatched UID): so the read of such a tenant's kubeconfig is left
// out, with a warning that says how to have vCluster write it again. A vCluster not yet created writes its Secret
// before the read, which waits for it.
func (l *liveCluster) lostKubeconfigs(ctx context.Context, tenants []TenantArgs, warn func(string)) (map[string]bool, error) {
	lost := map[string]bool{}
	statefulSets := l.meta.Resource(appsv1.SchemeGroupVersion.WithResource("statefulsets"))
	secrets := l.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets"))
	for _, t := range tenants {
		ns := naming.Namespace(t.Name)
		_, err := statefulSets.Namespace(ns).Get(ctx, t.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading tenant %s's vCluster StatefulSet: %w", t.Name, err)
		}
		secret := naming.KubeconfigSecretPrefix + t.Name
		_, err = secrets.Namespace(ns).Get(ctx, secret, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			lost[t.Name] = true
			warn(fmt.Sprintf("tenant %s: its vCluster runs but its kubeconfig Secret %s/%s is gone (deleted by the garbage "+
				"collector after an owner reference the tenant's syncer wrote, or by hand): its kubeconfig is not exported "+
				"this time; restart its vCluster (kubectl -n %s delete pod %s-0), which writes the Secret again", t.Name, ns,
				secret, ns, t.Name))
		case err != nil:
			return nil, fmt.Errorf("reading tenant %s's kubeconfig Secret: %w", t.Name, err)
		}
	}
	return lost, nil
}

// checkNoExclusiveRun refuses to run while another process moves tenants between the stacks of environment env,
// destroys them or recovers them (naming.ExclusiveLockOps): the up of one stack of a CI fan-out takes no lock of its
// own, so this is what keeps it from running beside them. The holder's own runs (this process, when it runs the
// program inline) go ahead, and so does a run after a holder that stopped renewing.
func (l *liveCluster) checkNoExclusiveRun(ctx context.Context, env string) error {
	lease, err := l.dyn.Resource(leasesResource).Namespace(naming.EnvironmentLockNamespace).Get(ctx, naming.EnvironmentLock(env), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the lock of environment %s: %w", env, err)
	}
	holder, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity")
	renewed, _, _ := unstructured.NestedString(lease.Object, "spec", "renewTime")
	seconds, _, _ := unstructured.NestedInt64(lease.Object, "spec", "leaseDurationSeconds")
	at, err := time.Parse(time.RFC3339Nano, renewed)
	exclusive := slices.ContainsFunc(naming.ExclusiveLockOps, func(op string) bool { return strings.HasPrefix(holder, op) })
	if !exclusive || strings.HasSuffix(holder, fmt.Sprintf("(pid %d)", os.Getpid())) ||
		(err == nil && time.Since(at) > time.Duration(seconds)*time.Second) {
		return nil
	}
	return fmt.Errorf("environment %s is held by another run (%s, Lease %s/%s), which moves, destroys or recovers its "+
		"stacks: run this stack when it has ended", env, holder, naming.EnvironmentLockNamespace, naming.EnvironmentLock(env))
}

// guardsError is the refusal of a group stack's up when the platform's guards do not hold for its tenants.
type guardsError struct{ msg string }

func (e *guardsError) Error() string { return e.msg }

// checkGuards refuses, before a group stack creates anything, tenants the platform's guards would not cover; on a
// preview it warns instead, so a pull request that adds a tenant (whose grants the platform stack gives only when it
// is up) still previews.
func (l *liveCluster) checkGuards(ctx context.Context, c *PlatformArgs, platformStack, platformOwner string, tenants []TenantArgs,
	dryRun bool, warn func(string)) error {
	grants := map[string][]string{}
	for _, t := range tenants {
		grants[t.Name] = t.Classes
	}
	problems, err := l.guardProblems(ctx, platformOwner, c.Admission, grants)
	if err != nil {
		return fmt.Errorf("checking the platform's guards: %w", err)
	}
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the platform's guards do not hold for this stack's tenants:\n  - %s\nBring the platform stack %s up first "+
		"(gpu-tenancy up <environment> does, before the groups), then this stack; a tenant never exists without them",
		strings.Join(problems, "\n  - "), platformStack)
	if dryRun {
		warn(msg + " (a preview carries on: the platform stack's own preview shows the guards it would create)")
		return nil
	}
	return &guardsError{msg}
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// nodeExposures are the warnings the nodes give (docs/threat-model.md, "Shared nodes"): kubelets that run a cached
// private image for a pod without the credentials that pulled it, since image-pull credential verification (KEP-2535,
// KubeletEnsureSecretPulledImages) is on by default from Kubernetes 1.35 only; and nodes labelled as a tenant's
// dedicated pool without that pool's taint, where every tenant's pods can be scheduled next to that tenant's images
// (the program taints the pools it builds; an existing cluster's nodes are the operator's to taint). Nodes the stack
// cannot list are said too: the exposure is then not known.
//
// podRange, where its key is set, is the pod ranges the stack gives (existing.podCIDRs): nodes whose pods get
// addresses outside them are said, since every tenant's egress reaches those pods wherever the network plugin's ipBlock
// matches pods (tenancy.NetworkArgs.PodCIDRs).
func (l *liveCluster) nodeExposures(ctx context.Context, platformPool bool, podRange podRange) []string {
	nodes, err := l.dyn.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("not checking the nodes' kubelet versions and the taints of dedicated and platform pools "+
			"(docs/threat-model.md, \"Shared nodes\"): %v", err)}
	}
	var old, untainted, platform, outside []string
	platformNodes := 0
	for _, n := range nodes.Items {
		if podRange.key != "" {
			outside = append(outside, podRange.outside(n)...)
		}
		version, _, _ := unstructured.NestedString(n.Object, "status", "nodeInfo", "kubeletVersion")
		if v, err := utilversion.ParseGeneric(version); err == nil && v.LessThan(utilversion.MajorMinor(1, 35)) {
			old = append(old, n.GetName()+" ("+version+")")
		}
		if tenant := n.GetLabels()[naming.DedicatedNodeKey]; tenant != "" && !keepsOthersOff(n, naming.DedicatedNodeKey, tenant) {
			untainted = append(untainted, n.GetName()+" ("+tenant+")")
		}
		if n.GetLabels()[naming.PlatformPoolKey] == cluster.PlatformPoolTaint.Value {
			platformNodes++
			if !keepsOthersOff(n, naming.PlatformPoolKey, cluster.PlatformPoolTaint.Value) {
				platform = append(platform, n.GetName())
			}
		}
	}
	var out []string
	if len(old) > 0 {
		out = append(out, fmt.Sprintf("kubelets older than 1.35 do not check the image-pull credentials of cached images "+
			"(KubeletEnsureSecretPulledImages), so a tenant can run another tenant's private image cached on a node they share: "+
			"%s; upgrade those nodes, or give tenants with private images pools of their own (gpuPools[].tenant; "+
			"docs/threat-model.md, \"Shared nodes\")", firstFew(old)))
	}
	if len(untainted) > 0 {
		out = append(out, fmt.Sprintf("nodes labelled %s as a tenant's own lack its NoSchedule taint %s=<tenant>, so every "+
			"tenant's pods can be scheduled there, next to that tenant's images: %s; taint them (docs/threat-model.md, "+
			"\"Shared nodes\")", naming.DedicatedNodeKey, naming.DedicatedNodeKey, firstFew(untainted)))
	}
	if len(platform) > 0 {
		out = append(out, fmt.Sprintf("nodes labelled %s=true as the platform's own lack its NoSchedule taint, so tenants' "+
			"pods can be scheduled there, beside the platform's controllers: %s; taint them %s=true:NoSchedule "+
			"(docs/threat-model.md, \"Cloud identity and node services\")", naming.PlatformPoolKey, firstFew(platform), naming.PlatformPoolKey))
	}
	if len(outside) > 0 {
		given := strings.Join(podRange.cidrs, ", ")
		if given == "" {
			given = "none given"
		}
		out = append(out, fmt.Sprintf("nodes give their pods addresses outside %s (%s): %s; tenants' egress reaches those pods "+
			"wherever the network plugin's ipBlock matches pods (kube-router, Calico; not Cilium), the pods of platform "+
			"namespaces without an ingress policy of their own among them: list the ranges there (docs/threat-model.md, "+
			"\"Cloud identity and node services\")", podRange.key, given, firstFew(outside)))
	}
	if platformPool && platformNodes == 0 && len(nodes.Items) > 0 {
		out = append(out, fmt.Sprintf("the platform has a pool of its own, but no node is labelled %s=true: vCluster Platform, "+
			"kube-state-metrics and the DRA driver's controller select such nodes and stay Pending until one is; label and taint "+
			"the platform's nodes (docs/threat-model.md, \"Cloud identity and node services\")", naming.PlatformPoolKey))
	}
	return out
}

// podRange is the pod ranges a stack gives under key; an empty key checks none.
type podRange struct {
	key   string
	cidrs []string
}

// outside lists the node's pod ranges (spec.podCIDRs, which a node without allocated ranges leaves empty) that lie
// outside every range of r, as "<node> (<range>)".
func (r podRange) outside(node unstructured.Unstructured) []string {
	ranges, _, _ := unstructured.NestedStringSlice(node.Object, "spec", "podCIDRs")
	var out []string
	for _, raw := range ranges {
		given, err := netip.ParsePrefix(raw)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(r.cidrs, func(c string) bool {
			within, err := netip.ParsePrefix(c)
			return err == nil && within.Bits() <= given.Bits() && within.Contains(given.Addr())
		}) {
			out = append(out, node.GetName()+" ("+raw+")")
		}
	}
	return out
}

// keepsOthersOff reports whether node carries the taint key=value with an effect that keeps other pods off.
func keepsOthersOff(node unstructured.Unstructured, key, value string) bool {
	taints, _, _ := unstructured.NestedSlice(node.Object, "spec", "taints")
	for _, t := range taints {
		taint, _ := t.(map[string]any)
		if taint["key"] == key && taint["value"] == value &&
			(taint["effect"] == "NoSchedule" || taint["effect"] == "NoExecute") {
			return true
		}
	}
	return false
}

// firstFew joins the first five items and counts the rest.
func firstFew(items []string) string {
	if len(items) > 5 {
		items = append(items[:5:5], fmt.Sprintf("and %d more", len(items)-5))
	}
	return strings.Join(items, ", ")
}
