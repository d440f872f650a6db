package gpureport

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PendingReport is `gpu-tenancy pending`: every device claim that is not allocated, and why.
type PendingReport struct {
	APIVersion  string    `json:"apiVersion"`
	Kind        string    `json:"kind"`
	GeneratedAt time.Time `json:"generatedAt"`
	// OlderThanSeconds is the --older-than threshold, 0 when none was given.
	OlderThanSeconds int64          `json:"olderThanSeconds"`
	Claims           []PendingClaim `json:"claims"`
}

// PendingClaim is one unallocated claim, or one claim a pod needs that could not be created.
type PendingClaim struct {
	Namespace string `json:"namespace"`
	// Tenant is empty outside tenant namespaces.
	Tenant string `json:"tenant"`
	// Claim is the ResourceClaim's name; empty when the claim was never created from its template.
	Claim string `json:"claim"`
	// Template is the ResourceClaimTemplate a pod's claim comes from, when it does.
	Template string `json:"template,omitempty"`
	// ExtendedResources are the names of DeviceClasses the pod asks for in its containers' resources (KEP-5004): the
	// scheduler makes such a pod's claim only when it binds the pod, so until then there is no claim to name.
	ExtendedResources []string `json:"extendedResources,omitempty"`
	// Pods are the unscheduled pods waiting for the claim.
	Pods []string `json:"pods"`
	// Classes are the DeviceClasses the claim may be allocated from (exactly and firstAvailable).
	Classes []string `json:"classes"`
	// Since is the claim's creation time (the pod's, when there is no claim).
	Since      time.Time `json:"since"`
	AgeSeconds int64     `json:"ageSeconds"`
	// Overdue: waited longer than the report's threshold.
	Overdue bool     `json:"overdue"`
	Reasons []Reason `json:"reasons"`
}

// Reason says why a claim is not allocated. Kind is one of the Reason* constants. A reason the report concludes itself
// has no From; one read from an object that says why (a pod's PodScheduled condition, a FailedResourceClaimCreation
// event) names that object in From: its message, and the kind read from it, are that object's word.
type Reason struct {
	Kind    string       `json:"kind"`
	Message string       `json:"message"`
	From    ReasonSource `json:"from,omitzero"`
}

// ReasonSource is the object a reason is read from. Neither kind of object proves who wrote it: the syncer of a tenant
// may write events and pod status conditions in its namespace (docs/threat-model.md, What the platform reads), so a
// reason read there may be the tenant's, posing as the scheduler or the resource claim controller.
type ReasonSource struct {
	Object ObjectRef `json:"object"`
	// ReportedBy is whom an event names as its author (reportingController, else source.component). Whoever creates
	// an event sets both, so this is what the event says. Empty for a pod's condition, which names no author.
	ReportedBy string `json:"reportedBy,omitempty"`
	// TenantWritable: the object is in a tenant namespace, where the tenant's syncer may have written it.
	TenantWritable bool `json:"tenantWritable"`
}

// label says in a table where a reason comes from.
func (s ReasonSource) label() string {
	text := s.Object.Kind + " " + s.Object.Name
	if s.ReportedBy != "" {
		text += ", reported by \"" + s.ReportedBy + "\""
	}
	if s.TenantWritable {
		text = "tenant-writable " + text
	}
	return text
}

// Reason kinds.
const (
	// ReasonUnschedulable carries the scheduler's PodScheduled=False message for a waiting pod.
	ReasonUnschedulable = "Unschedulable"
	// ReasonNotScheduledYet: the scheduler has not reported on the waiting pod yet.
	ReasonNotScheduledYet = "NotScheduledYet"
	// ReasonQuotaExceeded: the ResourceQuota refused the claim the pod's template asked for.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonClaimCreationFailed: creating the pod's claim from its template failed for another reason.
	ReasonClaimCreationFailed = "ClaimCreationFailed"
	// ReasonClaimNotCreated: the pod's claim has not been created from its template, and no event says why.
	ReasonClaimNotCreated = "ClaimNotCreated"
	// ReasonClaimNotFound: the pod names a ResourceClaim that does not exist.
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonTemplateNotFound: the pod names a ResourceClaimTemplate that does not exist.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonUnreferenced: no unscheduled pod uses the claim, so the scheduler will never allocate it.
	ReasonUnreferenced = "Unreferenced"
	// ReasonClassNotFound: the claim names a DeviceClass that does not exist.
	ReasonClassNotFound = "ClassNotFound"
	// ReasonClassNotGranted: the class lacks the tenant's grant label (granted once, since revoked).
	ReasonClassNotGranted = "ClassNotGranted"
	// ReasonNoMatchingDevice: the class selects no device of the cluster.
	ReasonNoMatchingDevice = "NoMatchingDevice"
)

// quotaRefusal is how the API server's quota admission words a refusal (k8s.io/apiserver admission/plugin/resourcequota).
const quotaRefusal = "exceeded quota"

// eventFailedClaimCreation is the resource claim controller's event reason when it cannot create a pod's claim
// (kubernetes pkg/controller/resourceclaim/controller.go).
const eventFailedClaimCreation = "FailedResourceClaimCreation"

// Pending computes the pending report.
func Pending(ctx context.Context, s *Snapshot, now time.Time) *PendingReport {
	p := &pendingBuilder{
		snap: s, now: now, tenants: s.tenants(), classes: s.classes(),
		matcher: newMatcher(newInventory(s.ResourceSlices)),
		claims:  map[nsName]*resourcev1.ResourceClaim{},
		items:   map[nsName]*PendingClaim{},
		named:   extendedResourceClasses(s.DeviceClasses),
	}
	for i := range s.ResourceClaims {
		c := &s.ResourceClaims[i]
		p.claims[nsName{c.Namespace, c.Name}] = c
	}
	var waiting []*corev1.Pod
	for i := range s.Pods {
		if pod := &s.Pods[i]; p.waits(pod) {
			waiting = append(waiting, pod)
		}
	}
	sort.Slice(waiting, func(i, j int) bool {
		return nsName{waiting[i].Namespace, waiting[i].Name}.less(nsName{waiting[j].Namespace, waiting[j].Name})
	})
	for _, pod := range waiting {
		p.addPod(pod)
	}
	for i := range s.ResourceClaims {
		c := &s.ResourceClaims[i]
		if c.Status.Allocation != nil || c.DeletionTimestamp != nil {
			continue
		}
		if _, ok := p.items[nsName{c.Namespace, c.Name}]; !ok {
			it := p.claimItem(c)
			it.Reasons = append(it.Reasons, Reason{Kind: ReasonUnreferenced, Message: "no unscheduled pod uses this claim, so the scheduler does not try to allocate it"})
		}
	}

	rep := &PendingReport{APIVersion: APIVersion, Kind: "PendingReport", GeneratedAt: now.UTC().Truncate(time.Second), Claims: []PendingClaim{}}
	for _, it := range p.items {
		p.checkClasses(ctx, it)
		rep.Claims = append(rep.Claims, *it)
	}
	sort.Slice(rep.Claims, func(i, j int) bool {
		a, b := &rep.Claims[i], &rep.Claims[j]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		return a.key().less(b.key())
	})
	return rep
}

// MarkOverdue flags the claims that have waited longer than d and returns how many did.
func (r *PendingReport) MarkOverdue(d time.Duration) int {
	r.OlderThanSeconds = int64(d / time.Second)
	n := 0
	for i := range r.Claims {
		c := &r.Claims[i]
		c.Overdue = time.Duration(c.AgeSeconds)*time.Second > d
		if c.Overdue {
			n++
		}
	}
	return n
}

type nsName struct{ namespace, name string }

func (a nsName) less(b nsName) bool {
	if a.namespace != b.namespace {
		return a.namespace < b.namespace
	}
	return a.name < b.name
}

func (c *PendingClaim) key() nsName {
	if c.Claim != "" {
		return nsName{c.Namespace, c.Claim}
	}
	return nsName{c.Namespace, "pod/" + strings.Join(c.Pods, ",")}
}

type pendingBuilder struct {
	snap    *Snapshot
	now     time.Time
	tenants map[string]string
	classes map[string]*resourcev1.DeviceClass
	matcher *matcher
	claims  map[nsName]*resourcev1.ResourceClaim
	// items by claim, or by "pod/<name>" for claims that do not exist.
	items map[nsName]*PendingClaim
	// named maps each extended-resource name a DeviceClass answers to to the class.
	named map[string]string
}

// extendedResourcePrefix prefixes every class's implicit extended-resource name (k8s.io/api v0.36.3 core/v1
// ResourceDeviceClassPrefix).
const extendedResourcePrefix = "deviceclass.resource.kubernetes.io/"

// extendedResourceClasses maps the extended-resource names the classes answer to, their own and the implicit ones, to
// the classes. Where two classes take one name the scheduler picks the newer, and of two created at once the lower
// name (k8s.io/dynamic-resource-allocation v0.36.3 deviceclass/extendedresourcecache/extendedresourcecache.go); the
// report names the class that choice does.
func extendedResourceClasses(classes []resourcev1.DeviceClass) map[string]string {
	out := map[string]string{}
	created := map[string]metav1.Time{}
	for _, c := range classes {
		out[extendedResourcePrefix+c.Name] = c.Name
		name := ptr.Deref(c.Spec.ExtendedResourceName, "")
		if name == "" {
			continue
		}
		if prev, ok := created[name]; ok && (c.CreationTimestamp.Before(&prev) || c.CreationTimestamp.Equal(&prev) && c.Name >= out[name]) {
			continue
		}
		out[name], created[name] = c.Name, c.CreationTimestamp
	}
	return out
}

// extendedResources are the extended-resource names of DeviceClasses (named, as extendedResourceClasses maps them) a
// pod's containers ask for, sorted, once each.
func extendedResources(pod *corev1.Pod, named map[string]string) []string {
	var out []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range list {
				if _, ok := named[string(name)]; ok && !slices.Contains(out, string(name)) {
					out = append(out, string(name))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// waits reports whether a pod is unscheduled, alive and uses claims, or asks for a class by name and has no claim yet.
func (p *pendingBuilder) waits(pod *corev1.Pod) bool {
	return unscheduled(pod) && (len(pod.Spec.ResourceClaims) > 0 || len(waitingFor(pod, p.named)) > 0)
}

// unscheduled reports whether a pod is alive and not bound to a node.
func unscheduled(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed
}

// waitingFor are the extended-resource names a pod asks for while the scheduler has made no claim for them yet.
func waitingFor(pod *corev1.Pod, named map[string]string) []string {
	if pod.Status.ExtendedResourceClaimStatus != nil {
		return nil
	}
	return extendedResources(pod, named)
}

func (p *pendingBuilder) claimItem(c *resourcev1.ResourceClaim) *PendingClaim {
	k := nsName{c.Namespace, c.Name}
	if it := p.items[k]; it != nil {
		return it
	}
	it := &PendingClaim{
		Namespace: c.Namespace, Tenant: p.tenants[c.Namespace], Claim: c.Name, Pods: []string{},
		Classes: orEmpty(claimClasses(&c.Spec)), Since: c.CreationTimestamp.UTC(),
		AgeSeconds: ageSeconds(p.now, c.CreationTimestamp.Time), Reasons: []Reason{},
	}
	p.items[k] = it
	return it
}

// addPod records each unallocated or missing claim the pod waits for, and the classes it asks for by name.
func (p *pendingBuilder) addPod(pod *corev1.Pod) {
	if names := waitingFor(pod, p.named); len(names) > 0 {
		it := p.podItem(pod, "pod/"+pod.Name+"/extended-resources")
		it.ExtendedResources = names
		for _, name := range names {
			if class := p.named[name]; !slices.Contains(it.Classes, class) {
				it.Classes = append(it.Classes, class)
			}
		}
		addReason(it, p.schedulerReason(pod))
	}
	for _, pc := range pod.Spec.ResourceClaims {
		name, fromTemplate := claimName(pod, &pc)
		if fromTemplate && name == "" {
			p.addUncreated(pod, *pc.ResourceClaimTemplateName)
			continue
		}
		if name == "" {
			// The template produced no claim: nothing to allocate.
			continue
		}
		c := p.claims[nsName{pod.Namespace, name}]
		if c == nil {
			it := p.podItem(pod, "pod/"+pod.Name+"/"+name)
			it.Claim = name
			it.Reasons = append(it.Reasons, Reason{Kind: ReasonClaimNotFound, Message: fmt.Sprintf("pod %s uses ResourceClaim %s, which does not exist", pod.Name, name)})
			continue
		}
		if c.Status.Allocation != nil || c.DeletionTimestamp != nil {
			continue
		}
		it := p.claimItem(c)
		if fromTemplate {
			it.Template = *pc.ResourceClaimTemplateName
		}
		if !slices.Contains(it.Pods, pod.Name) {
			it.Pods = append(it.Pods, pod.Name)
			addReason(it, p.schedulerReason(pod))
		}
	}
}

// claimName finds the claim a pod's entry names: directly, or through the pod's status for a template, where the
// resource claim controller records the claim it generated. A template entry without a status entry has no claim
// yet; one with a status entry but no name needs none.
func claimName(pod *corev1.Pod, pc *corev1.PodResourceClaim) (name string, fromTemplate bool) {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName, false
	}
	if pc.ResourceClaimTemplateName == nil {
		return "", false
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name {
			if st.ResourceClaimName == nil {
				return "", false
			}
			return *st.ResourceClaimName, true
		}
	}
	return "", true
}

// addUncreated records a pod whose claim template has not produced a claim: the quota may have refused it.
func (p *pendingBuilder) addUncreated(pod *corev1.Pod, template string) {
	it := p.podItem(pod, "pod/"+pod.Name+"/template/"+template)
	it.Template = template
	if t := p.template(pod.Namespace, template); t != nil {
		it.Classes = orEmpty(claimClasses(&t.Spec.Spec))
	} else {
		it.Reasons = append(it.Reasons, Reason{Kind: ReasonTemplateNotFound, Message: fmt.Sprintf("pod %s uses ResourceClaimTemplate %s, which does not exist", pod.Name, template)})
	}
	switch ev := p.creationFailure(pod); {
	case ev == nil:
		it.Reasons = append(it.Reasons, Reason{Kind: ReasonClaimNotCreated,
			Message: fmt.Sprintf("no ResourceClaim has been created from template %s for pod %s yet", template, pod.Name)})
	case strings.Contains(ev.Message, quotaRefusal):
		it.Reasons = append(it.Reasons, Reason{ReasonQuotaExceeded, ev.Message, p.eventSource(ev)})
	default:
		it.Reasons = append(it.Reasons, Reason{ReasonClaimCreationFailed, ev.Message, p.eventSource(ev)})
	}
	addReason(it, p.schedulerReason(pod))
}

// eventSource names an event a reason is read from, and whom it names as its author.
func (p *pendingBuilder) eventSource(ev *corev1.Event) ReasonSource {
	by := ev.ReportingController
	if by == "" {
		by = ev.Source.Component
	}
	return ReasonSource{Object: ObjectRef{Kind: "Event", Namespace: ev.Namespace, Name: ev.Name}, ReportedBy: by,
		TenantWritable: p.tenants[ev.Namespace] != ""}
}

func (p *pendingBuilder) podItem(pod *corev1.Pod, key string) *PendingClaim {
	k := nsName{pod.Namespace, key}
	if it := p.items[k]; it != nil {
		return it
	}
	it := &PendingClaim{
		Namespace: pod.Namespace, Tenant: p.tenants[pod.Namespace], Pods: []string{pod.Name}, Classes: []string{},
		Since: pod.CreationTimestamp.UTC(), AgeSeconds: ageSeconds(p.now, pod.CreationTimestamp.Time), Reasons: []Reason{},
	}
	p.items[k] = it
	return it
}

func (p *pendingBuilder) template(namespace, name string) *resourcev1.ResourceClaimTemplate {
	for i := range p.snap.ClaimTemplates {
		if t := &p.snap.ClaimTemplates[i]; t.Namespace == namespace && t.Name == name {
			return t
		}
	}
	return nil
}

// creationFailure is the newest FailedResourceClaimCreation event about the pod, or nil. Only events in the pod's own
// namespace count, where the resource claim controller records them: the API server checks an event's
// involvedObject.namespace against its own namespace only for events without eventTime (kubernetes v1.34.4
// pkg/apis/core/validation/events.go legacyValidateEvent), so an event in one tenant's namespace may name another
// tenant's pod.
func (p *pendingBuilder) creationFailure(pod *corev1.Pod) *corev1.Event {
	var newest *corev1.Event
	for i := range p.snap.Events {
		ev := &p.snap.Events[i]
		o := ev.InvolvedObject
		if ev.Reason != eventFailedClaimCreation || ev.Namespace != pod.Namespace || o.Kind != "Pod" || o.Namespace != pod.Namespace ||
			o.Name != pod.Name || (o.UID != "" && pod.UID != "" && o.UID != pod.UID) {
			continue
		}
		if newest == nil || eventTime(ev).After(eventTime(newest)) {
			newest = ev
		}
	}
	return newest
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

// schedulerReason is the scheduler's verdict on a waiting pod, as the pod's PodScheduled condition says: the scheduler
// writes it, and so may the tenant's syncer in a tenant namespace (pods/status), so the pod is its source either way.
func (p *pendingBuilder) schedulerReason(pod *corev1.Pod) Reason {
	from := ReasonSource{Object: ObjectRef{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}, TenantWritable: p.tenants[pod.Namespace] != ""}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return Reason{ReasonUnschedulable, fmt.Sprintf("pod %s: %s", pod.Name, c.Message), from}
		}
	}
	return Reason{ReasonNotScheduledYet, fmt.Sprintf("pod %s: the scheduler has not reported on it yet", pod.Name), from}
}

// checkClasses adds the reasons a claim's classes give: missing, no longer granted, or selecting no device.
func (p *pendingBuilder) checkClasses(ctx context.Context, it *PendingClaim) {
	for _, name := range it.Classes {
		class := p.classes[name]
		switch {
		case class == nil:
			it.Reasons = append(it.Reasons, Reason{Kind: ReasonClassNotFound, Message: fmt.Sprintf("DeviceClass %s does not exist", name)})
			continue
		case it.Tenant != "" && !granted(class, it.Tenant):
			it.Reasons = append(it.Reasons, Reason{Kind: ReasonClassNotGranted, Message: fmt.Sprintf("DeviceClass %s is not granted to tenant %s", name, it.Tenant)})
		}
		if m := p.matcher.match(ctx, class); len(m.devices) == 0 {
			msg := fmt.Sprintf("DeviceClass %s selects no device of the cluster", name)
			if m.problem != "" {
				msg += " (" + m.problem + ")"
			}
			it.Reasons = append(it.Reasons, Reason{Kind: ReasonNoMatchingDevice, Message: msg})
		}
	}
}

func addReason(it *PendingClaim, r Reason) {
	if !slices.Contains(it.Reasons, r) {
		it.Reasons = append(it.Reasons, r)
	}
}

// orEmpty keeps JSON arrays arrays: a nil slice would encode as null.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
