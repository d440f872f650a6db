package gpureport

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// AuditAPIVersion versions the AuditReport on its own (docs/cli.md): v1alpha2 replaced v1alpha1's Helm release check
// HelmReleaseUnreadable by VClusterConfigUnreadable and its scope's vclusterReleases by vclusters, when vClusters
// stopped being Helm releases; v1alpha3 checks the one entitlement policy of every tenant and each namespace's grant
// labels (EntitlementGrantsDiffer, EntitlementGrantsUnlabelled) where v1alpha2 checked a policy per tenant. Checks
// added since within v1alpha3: VClusterConfigTampered.
const AuditAPIVersion = "gpu-tenancy.io/v1alpha3"

// AuditReport is `gpu-tenancy audit`: the platform's invariants checked on the live cluster.
type AuditReport struct {
	APIVersion  string     `json:"apiVersion"`
	Kind        string     `json:"kind"`
	GeneratedAt time.Time  `json:"generatedAt"`
	Scope       AuditScope `json:"scope"`
	Findings    []Finding  `json:"findings"`
}

// AuditScope is what the audit looked at, so a clean report is seen to have checked something.
type AuditScope struct {
	Tenants       []string `json:"tenants"`
	DeviceClasses int      `json:"deviceClasses"`
	TenantClaims  int      `json:"tenantClaims"`
	// VClusters counts the vCluster configs found in tenant namespaces.
	VClusters int `json:"vclusters"`
}

// Finding is one broken invariant: which object, what is wrong and how to fix it. Check is one of the Check*
// constants.
type Finding struct {
	Check   string    `json:"check"`
	Tenant  string    `json:"tenant,omitempty"`
	Object  ObjectRef `json:"object"`
	Message string    `json:"message"`
	Fix     string    `json:"fix"`
}

// ObjectRef names a Kubernetes object.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (o ObjectRef) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Audit checks.
const (
	CheckClaimClassNotGranted        = "ClaimClassNotGranted"
	CheckClassGrantedToUnknownTenant = "ClassGrantedToUnknownTenant"
	CheckQuotaMissing                = "QuotaMissing"
	CheckQuotaDeviceKeyMissing       = "QuotaDeviceKeyMissing"
	CheckLimitRangeMissing           = "LimitRangeMissing"
	CheckEntitlementBindingMissing   = "EntitlementBindingMissing"
	CheckEntitlementPolicyMissing    = "EntitlementPolicyMissing"
	CheckEntitlementNotDenying       = "EntitlementBindingNotDenying"
	CheckEntitlementGrantsDiffer     = "EntitlementGrantsDiffer"
	CheckEntitlementGrantsUnlabelled = "EntitlementGrantsUnlabelled"
	CheckPodSecurityMissing          = "PodSecurityEnforceMissing"
	CheckPodSecurityTooWeak          = "PodSecurityEnforceTooWeak"
	CheckVClusterSyncsAllClasses     = "VClusterSyncsAllDeviceClasses"
	CheckVClusterSyncsForeignClasses = "VClusterSyncsForeignDeviceClasses"
	CheckVClusterConfigUnreadable    = "VClusterConfigUnreadable"
	CheckVClusterConfigTampered      = "VClusterConfigTampered"
)

// fixPulumi is the fix for a platform object changed or deleted outside Pulumi: without a refresh Pulumi's state
// still holds the object as it was, and `up` would change nothing.
const fixPulumi = "run `pulumi up --refresh` on the platform's stack to put it back"

// Audit checks the snapshot against the platform's invariants.
func Audit(s *Snapshot, now time.Time) *AuditReport {
	a := &auditor{snap: s, classes: s.classes(), tenants: s.tenants()}
	rep := &AuditReport{APIVersion: AuditAPIVersion, Kind: "AuditReport", GeneratedAt: now.UTC().Truncate(time.Second),
		Scope: AuditScope{Tenants: []string{}, DeviceClasses: len(s.DeviceClasses)}}
	known := map[string]bool{}
	for i := range s.Namespaces {
		ns := &s.Namespaces[i]
		t, ok := a.tenants[ns.Name]
		if !ok {
			continue
		}
		known[t] = true
		rep.Scope.Tenants = append(rep.Scope.Tenants, t)
		a.namespace(ns, t)
	}
	sort.Strings(rep.Scope.Tenants)
	rep.Scope.TenantClaims = a.claims()
	a.grants(known)
	rep.Scope.VClusters = a.vclusters()
	rep.Findings = a.findings
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		x, y := &rep.Findings[i], &rep.Findings[j]
		if x.Tenant != y.Tenant {
			return x.Tenant < y.Tenant
		}
		if x.Check != y.Check {
			return x.Check < y.Check
		}
		return x.Object.String() < y.Object.String()
	})
	return rep
}

type auditor struct {
	snap     *Snapshot
	classes  map[string]*resourcev1.DeviceClass
	tenants  map[string]string
	findings []Finding
}

func (a *auditor) add(f Finding) { a.findings = append(a.findings, f) }

// namespace checks a tenant namespace's guard rails.
func (a *auditor) namespace(ns *corev1.Namespace, tenant string) {
	nsRef := ObjectRef{Kind: "Namespace", Name: ns.Name}
	switch level, ok := ns.Labels[naming.PodSecurityEnforceLabel]; {
	case !ok:
		a.add(Finding{CheckPodSecurityMissing, tenant, nsRef,
			fmt.Sprintf("namespace has no %s label: Pod Security admits privileged pods", naming.PodSecurityEnforceLabel),
			fixPulumi + fmt.Sprintf("; by hand: kubectl label namespace %s %s=baseline", ns.Name, naming.PodSecurityEnforceLabel)})
	case level != "baseline" && level != "restricted":
		a.add(Finding{CheckPodSecurityTooWeak, tenant, nsRef,
			fmt.Sprintf("%s is %q; a tenant namespace needs baseline or restricted", naming.PodSecurityEnforceLabel, level),
			fixPulumi + fmt.Sprintf("; by hand: kubectl label --overwrite namespace %s %s=baseline", ns.Name, naming.PodSecurityEnforceLabel)})
	}

	quotaRef := ObjectRef{Kind: "ResourceQuota", Namespace: ns.Name, Name: naming.TenantQuota}
	if q := a.quota(ns.Name); q == nil {
		a.add(Finding{CheckQuotaMissing, tenant, quotaRef,
			"the tenant namespace has no quota: its GPU devices, CPU and memory are unbounded", fixPulumi})
	} else {
		for _, class := range a.grantedClasses(tenant) {
			key := naming.DeviceQuotaKey(class)
			if _, ok := q.Spec.Hard[corev1.ResourceName(key)]; !ok {
				a.add(Finding{CheckQuotaDeviceKeyMissing, tenant, quotaRef,
					fmt.Sprintf("class %s is granted to the tenant but the quota has no %s: its devices are unbounded", class, key),
					fixPulumi + "; the stack's gpuQuota for the tenant must name the class"})
			}
		}
	}

	if !a.hasLimitRange(ns.Name) {
		a.add(Finding{CheckLimitRangeMissing, tenant, ObjectRef{Kind: "LimitRange", Namespace: ns.Name, Name: naming.ContainerDefaults},
			"containers without resources get no defaults, so the quota refuses their pods", fixPulumi})
	}

	a.entitlement(tenant)
	a.namespaceGrants(ns, tenant)
}

// namespaceGrants checks that the grants the entitlement policy reads on the namespace (naming.ClassGrantLabel) are
// the ones the DeviceClasses carry for the tenant, which its vCluster syncs.
func (a *auditor) namespaceGrants(ns *corev1.Namespace, tenant string) {
	ref := ObjectRef{Kind: "Namespace", Name: ns.Name}
	if ns.Labels[naming.GrantsLabel] != "true" {
		a.add(Finding{CheckEntitlementGrantsUnlabelled, tenant, ref, fmt.Sprintf(
			"namespace has no %s=true label: the entitlement policy does not select it, so no grant check runs on its claims "+
				"(a namespace of an earlier version keeps its own policy only until the up that labels it)", naming.GrantsLabel), fixPulumi})
		return
	}
	var labelled []string
	for k, v := range ns.Labels {
		if class, ok := strings.CutPrefix(k, naming.ClassGrantLabelPrefix); ok && v == "true" {
			labelled = append(labelled, class)
		}
	}
	sort.Strings(labelled)
	if classes := a.grantedClasses(tenant); !slices.Equal(labelled, classes) {
		a.add(Finding{CheckEntitlementGrantsDiffer, tenant, ref, fmt.Sprintf(
			"namespace grants classes [%s] (labels %s<class>) but the DeviceClasses are granted for [%s] (labels %s%s): "+
				"claims are checked against the namespace's", strings.Join(labelled, ", "), naming.ClassGrantLabelPrefix,
			strings.Join(classes, ", "), naming.ClassTenantLabelPrefix, tenant), fixPulumi})
	}
}

func (a *auditor) quota(namespace string) *corev1.ResourceQuota {
	for i := range a.snap.ResourceQuotas {
		if q := &a.snap.ResourceQuotas[i]; q.Namespace == namespace && q.Name == naming.TenantQuota {
			return q
		}
	}
	return nil
}

func (a *auditor) hasLimitRange(namespace string) bool {
	for i := range a.snap.LimitRanges {
		if l := &a.snap.LimitRanges[i]; l.Namespace == namespace && l.Name == naming.ContainerDefaults {
			return true
		}
	}
	return false
}

// grantedClasses are the classes carrying the tenant's grant label, sorted.
func (a *auditor) grantedClasses(tenant string) []string {
	var out []string
	for name, c := range a.classes {
		if granted(c, tenant) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// entitlement checks the entitlement binding every tenant's claims go through: present, bound to a policy that
// exists, and denying.
func (a *auditor) entitlement(tenant string) {
	name := naming.EntitlementPolicy
	ref := ObjectRef{Kind: "ValidatingAdmissionPolicyBinding", Name: name}
	var b *admissionv1.ValidatingAdmissionPolicyBinding
	for i := range a.snap.PolicyBindings {
		if a.snap.PolicyBindings[i].Name == name {
			b = &a.snap.PolicyBindings[i]
		}
	}
	if b == nil {
		a.add(Finding{CheckEntitlementBindingMissing, tenant, ref,
			"no entitlement binding: the tenant can claim any DeviceClass, including other tenants' and the driver's", fixPulumi})
		return
	}
	if !slices.ContainsFunc(a.snap.Policies, func(p admissionv1.ValidatingAdmissionPolicy) bool { return p.Name == b.Spec.PolicyName }) {
		a.add(Finding{CheckEntitlementPolicyMissing, tenant, ObjectRef{Kind: "ValidatingAdmissionPolicy", Name: b.Spec.PolicyName},
			fmt.Sprintf("binding %s names policy %s, which does not exist: nothing checks the tenant's claims", name, b.Spec.PolicyName), fixPulumi})
	}
	if !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) {
		a.add(Finding{CheckEntitlementNotDenying, tenant, ref,
			fmt.Sprintf("validationActions are %v, without Deny: claims outside the grant are admitted", b.Spec.ValidationActions), fixPulumi})
	}
}

// claims checks every claim in a tenant namespace against the tenant's grants and returns how many it checked.
func (a *auditor) claims() int {
	n := 0
	for i := range a.snap.ResourceClaims {
		c := &a.snap.ResourceClaims[i]
		tenant, ok := a.tenants[c.Namespace]
		if !ok {
			continue
		}
		n++
		state := "unallocated"
		if c.Status.Allocation != nil {
			state = "allocated"
		}
		for _, class := range claimClasses(&c.Spec) {
			dc := a.classes[class]
			if granted(dc, tenant) {
				continue
			}
			why := "is not granted to the tenant"
			if dc == nil {
				why = "does not exist"
			}
			a.add(Finding{CheckClaimClassNotGranted, tenant, ObjectRef{Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name},
				fmt.Sprintf("%s claim names DeviceClass %s, which %s (granted before, since revoked?)", state, class, why),
				fmt.Sprintf("delete the claim and its pods (kubectl delete resourceclaim -n %s %s), or grant %s to %s in the stack's tenants and run `pulumi up`",
					c.Namespace, c.Name, class, tenant)})
		}
	}
	return n
}

// grants checks that every tenant a DeviceClass is granted to exists.
func (a *auditor) grants(known map[string]bool) {
	for i := range a.snap.DeviceClasses {
		c := &a.snap.DeviceClasses[i]
		for _, t := range grantees(c) {
			if known[t] {
				continue
			}
			a.add(Finding{CheckClassGrantedToUnknownTenant, t, ObjectRef{Kind: "DeviceClass", Name: c.Name},
				fmt.Sprintf("class is granted to tenant %s, but no namespace is labelled %s=%s: a namespace given that label later gets the grant",
					t, naming.TenantNamespaceLabel, t),
				fmt.Sprintf("run `pulumi up --refresh`, or remove the grant: kubectl label deviceclass %s %s-", c.Name, naming.ClassTenantLabel(t))})
		}
	}
}

// vclusters checks the vCluster of each tenant namespace: one that syncs DeviceClasses must sync only those carrying
// its tenant's grant label. It reads the config the vCluster chart stores for each vCluster, the Secret its control
// plane mounts as its config (loft-sh/vcluster v0.36.1 chart/templates/statefulset.yaml, volume vcluster-config). The
// tenant's syncer may rewrite that Secret, so the config is first checked against the hash its StatefulSet pins
// (pinned); what the sync checks then read is what the Secret says. It returns how many vCluster configs it found.
func (a *auditor) vclusters() int {
	n := 0
	audited := map[string]bool{}
	for i := range a.snap.VClusterConfigs {
		s := &a.snap.VClusterConfigs[i]
		tenant, ok := a.tenants[s.Namespace]
		release, isConfig := strings.CutPrefix(s.Name, ConfigSecretPrefix)
		if !ok || !isConfig || !a.ownRelease(tenant, release) {
			continue
		}
		n++
		audited[s.Namespace+"/"+release] = true
		ref := ObjectRef{Kind: "Secret", Namespace: s.Namespace, Name: s.Name}
		values, err := decodeConfig(s)
		if err != nil {
			a.add(Finding{CheckVClusterConfigUnreadable, tenant, ref,
				fmt.Sprintf("vCluster %s's config cannot be read (%v), so its DeviceClass sync is unchecked", release, err),
				fixPulumi + fmt.Sprintf("; to see what it holds: kubectl get secret -n %s %s -o jsonpath='{.data.%s}' | base64 -d",
					s.Namespace, s.Name, strings.ReplaceAll(ConfigSecretKey, ".", `\.`))})
			continue
		}
		a.pinned(s, tenant, release, values)
		sync := lookup(values, "sync", "fromHost", "deviceClasses")
		if enabled, _ := lookup(sync, "enabled").(bool); !enabled {
			continue
		}
		key := naming.ClassTenantLabel(tenant)
		fix := fmt.Sprintf("set sync.fromHost.deviceClasses.selector.matchLabels to {%q: \"true\"} (run `pulumi up --refresh` on the platform's stack)", key)
		selector, _ := lookup(sync, "selector").(map[string]any)
		switch {
		case emptySelector(selector):
			a.add(Finding{CheckVClusterSyncsAllClasses, tenant, ref,
				fmt.Sprintf("vCluster %s syncs DeviceClasses without a label selector: the tenant sees every class of the cluster", release), fix})
		case !requiresLabel(selector, key):
			a.add(Finding{CheckVClusterSyncsForeignClasses, tenant, ref,
				fmt.Sprintf("vCluster %s syncs DeviceClasses with selector %s, which does not require %s=true: the tenant may see other tenants' classes",
					release, describeSelector(selector), key), fix})
		}
	}
	// A tenant's own vCluster whose config is not there: its control plane runs a config no one can check.
	for _, st := range a.snap.VClusterStatefulSets {
		if tenant, ok := a.tenants[st.Namespace]; ok && st.Name == tenant && !audited[st.Namespace+"/"+tenant] {
			a.add(Finding{CheckVClusterConfigUnreadable, tenant, ObjectRef{Kind: "Secret", Namespace: st.Namespace, Name: ConfigSecretPrefix + tenant},
				fmt.Sprintf("vCluster %s runs, but its config Secret is not there, so its DeviceClass sync is unchecked", tenant), fixPulumi})
		}
	}
	return n
}

// ownRelease says whether release is the tenant's own vCluster release, the one the platform deploys in its
// namespace; its labels are the tenant's syncer's to change, so they say nothing.
func (a *auditor) ownRelease(tenant, release string) bool { return release == tenant }

// pinned checks that a vCluster's config is the one its control plane was rendered with: the chart renders the
// config Secret and the StatefulSet of the same release together, the StatefulSet's pod template pinning the config's
// hash (ConfigHashAnnotation). A mismatch shows a config written outside the chart, by hand or by the tenant, whose
// syncer may rewrite the Secret. A match proves less: the syncer may patch the StatefulSet too, pin included
// (docs/threat-model.md, What the platform reads), but a config rewritten alone no longer passes for the platform's.
func (a *auditor) pinned(s *corev1.Secret, tenant, release string, values map[string]any) {
	ref := ObjectRef{Kind: "Secret", Namespace: s.Namespace, Name: s.Name}
	fix := fixPulumi + ", which writes back the config and its StatefulSet; the API server's audit log says who changed " +
		"them (the tenant's syncer may write the Secret and patch the StatefulSet)"
	var problem string
	sts := a.statefulSet(s.Namespace, release)
	switch got, err := configHash(s.Data[ConfigSecretKey], values); {
	case sts == nil:
		problem = fmt.Sprintf("no StatefulSet %s runs it, though the chart renders one with each config and a tenant cannot create one", release)
		fix = fmt.Sprintf("delete the Secret if no vCluster %s belongs in the namespace (kubectl delete secret -n %s %s); if its StatefulSet was deleted, %s",
			release, s.Namespace, s.Name, fixPulumi)
	case sts.Spec.Template.Annotations[ConfigHashAnnotation] == "":
		problem = fmt.Sprintf("StatefulSet %s pins no config: its pod template lacks the %s annotation the chart writes", release, ConfigHashAnnotation)
	case err != nil:
		problem = err.Error()
	case got != sts.Spec.Template.Annotations[ConfigHashAnnotation]:
		problem = fmt.Sprintf("it hashes to %s, but StatefulSet %s pins %s", got, release, sts.Spec.Template.Annotations[ConfigHashAnnotation])
	default:
		return
	}
	a.add(Finding{CheckVClusterConfigTampered, tenant, ref, fmt.Sprintf(
		"vCluster %s's config is not the one the vCluster chart rendered with its control plane (%s): the DeviceClass sync checked here is what the Secret says",
		release, problem), fix})
}

// statefulSet is the vCluster chart's StatefulSet of release in namespace, or nil.
func (a *auditor) statefulSet(namespace, release string) *appsv1.StatefulSet {
	for i := range a.snap.VClusterStatefulSets {
		if st := &a.snap.VClusterStatefulSets[i]; st.Namespace == namespace && st.Name == release && a.ownRelease(a.tenants[namespace], release) {
			return st
		}
	}
	return nil
}

func emptySelector(sel map[string]any) bool {
	labels, _ := sel["matchLabels"].(map[string]any)
	exprs, _ := sel["matchExpressions"].([]any)
	return len(labels) == 0 && len(exprs) == 0
}

// requiresLabel reports whether a label selector admits only objects with key=true; further terms only narrow it.
func requiresLabel(sel map[string]any, key string) bool {
	if labels, _ := sel["matchLabels"].(map[string]any); labels[key] == "true" {
		return true
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for _, e := range exprs {
		m, _ := e.(map[string]any)
		values, _ := m["values"].([]any)
		if m["key"] == key && m["operator"] == "In" && len(values) == 1 && values[0] == "true" {
			return true
		}
	}
	return false
}

func describeSelector(sel map[string]any) string {
	var parts []string
	if labels, _ := sel["matchLabels"].(map[string]any); len(labels) > 0 {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, labels[k]))
		}
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for _, e := range exprs {
		m, _ := e.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v %v %v", m["key"], m["operator"], m["values"]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
