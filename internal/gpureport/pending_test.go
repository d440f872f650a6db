package gpureport

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const schedulerMessage = "0/5 nodes are available: 2 cannot allocate all claims, 3 node(s) had untolerated taint {node-role: control-plane}."

// quotaMessage is the resource claim controller's event when the quota refuses a pod's claim, as a 1.34 control
// plane words it.
const quotaMessage = `PodResourceClaim gpu: create ResourceClaim : resourceclaims.resource.k8s.io "slice-c-gpu-4z2gz" is forbidden: ` +
	`exceeded quota: tenant-quota, requested: gpu-slice.deviceclass.resource.k8s.io/devices=1, ` +
	`used: gpu-slice.deviceclass.resource.k8s.io/devices=2, limited: gpu-slice.deviceclass.resource.k8s.io/devices=2`

// pendingBase is the simulated hardware, the two tenants and their catalog classes.
func pendingBase() Snapshot {
	return Snapshot{
		Namespaces:     []corev1.Namespace{tenantNamespace(legal), tenantNamespace(research)},
		DeviceClasses:  []resourcev1.DeviceClass{deviceClass("gpu-whole", wholeCEL, legal), deviceClass("gpu-slice", sliceCEL, research)},
		ResourceSlices: simulatedSlices(),
	}
}

// fromPod is a reason's source: the status of a pod in a tenant namespace, where the tenant's syncer may write it.
func fromPod(namespace, name string) ReasonSource {
	return ReasonSource{Object: ObjectRef{"Pod", namespace, name}, TenantWritable: true}
}

// fromEvent is a reason's source: an event in a tenant namespace naming the resource claim controller as its author.
func fromEvent(namespace, name string) ReasonSource {
	return ReasonSource{Object: ObjectRef{"Event", namespace, name}, ReportedBy: "resource_claim", TenantWritable: true}
}

func kinds(c PendingClaim) []string {
	var out []string
	for _, r := range c.Reasons {
		out = append(out, r.Kind)
	}
	return out
}

func TestPending(t *testing.T) {
	created := now.Add(-10 * time.Minute)
	cases := []struct {
		name   string
		modify func(s *Snapshot)
		// want is the one pending entry expected, compared without Since.
		want PendingClaim
	}{
		{
			name: "a pod waiting for its claim shows the scheduler's message",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "whole-c", created, "gpu-whole"))
				s.Pods = append(s.Pods, unschedulable(pod(legalNS, "whole-c", created, "whole-c", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "whole-c", Pods: []string{"whole-c"}, Classes: []string{"gpu-whole"},
				AgeSeconds: 600, Reasons: []Reason{{ReasonUnschedulable, "pod whole-c: " + schedulerMessage, fromPod(legalNS, "whole-c")}}},
		},
		{
			name: "a pod the scheduler has not looked at yet says so",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "c", created, "gpu-whole"))
				s.Pods = append(s.Pods, pod(legalNS, "p", created, "c", ""))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "c", Pods: []string{"p"}, Classes: []string{"gpu-whole"},
				AgeSeconds: 600, Reasons: []Reason{{ReasonNotScheduledYet, "pod p: the scheduler has not reported on it yet", fromPod(legalNS, "p")}}},
		},
		{
			name: "a template pod whose claim the quota refused shows the controller's event",
			modify: func(s *Snapshot) {
				p := pod(researchNS, "slice-c", created, "", "slice")
				s.Pods = append(s.Pods, p)
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
				s.Events = append(s.Events, failedCreation(p, quotaMessage))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{ReasonQuotaExceeded, quotaMessage, fromEvent(researchNS, "slice-c.1")},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "a template pod whose claim could not be created for another reason shows that reason",
			modify: func(s *Snapshot) {
				p := pod(researchNS, "slice-c", created, "", "slice")
				s.Pods = append(s.Pods, p)
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
				s.Events = append(s.Events, failedCreation(p, "PodResourceClaim gpu: create ResourceClaim x: admission webhook denied"))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{ReasonClaimCreationFailed, "PodResourceClaim gpu: create ResourceClaim x: admission webhook denied", fromEvent(researchNS, "slice-c.1")},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "a template pod without a generated claim and without an event is reported as not created",
			modify: func(s *Snapshot) {
				s.Pods = append(s.Pods, pod(researchNS, "slice-c", created, "", "slice"))
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{Kind: ReasonClaimNotCreated, Message: "no ResourceClaim has been created from template slice for pod slice-c yet"},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "an event about an earlier pod of the same name is not taken for this pod's",
			modify: func(s *Snapshot) {
				p := pod(researchNS, "slice-c", created, "", "slice")
				earlier := p
				earlier.UID = "uid-earlier"
				s.Pods = append(s.Pods, p)
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
				s.Events = append(s.Events, failedCreation(earlier, quotaMessage))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{Kind: ReasonClaimNotCreated, Message: "no ResourceClaim has been created from template slice for pod slice-c yet"},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "an event in another tenant's namespace about the pod is not taken for the controller's",
			modify: func(s *Snapshot) {
				p := pod(researchNS, "slice-c", created, "", "slice")
				s.Pods = append(s.Pods, p)
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
				// An event with eventTime set may name an object of another namespace than its own.
				forged := failedCreation(p, quotaMessage)
				forged.Namespace, forged.EventTime = legalNS, metav1.NewMicroTime(now)
				s.Events = append(s.Events, forged)
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{Kind: ReasonClaimNotCreated, Message: "no ResourceClaim has been created from template slice for pod slice-c yet"},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "an event names its reporting controller, before its source component, as its author",
			modify: func(s *Snapshot) {
				p := pod(researchNS, "slice-c", created, "", "slice")
				s.Pods = append(s.Pods, p)
				s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
				ev := failedCreation(p, quotaMessage)
				ev.ReportingController = "resourceclaim-controller"
				s.Events = append(s.Events, ev)
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Template: "slice", Pods: []string{"slice-c"}, Classes: []string{"gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{
					{ReasonQuotaExceeded, quotaMessage, ReasonSource{Object: ObjectRef{"Event", researchNS, "slice-c.1"},
						ReportedBy: "resourceclaim-controller", TenantWritable: true}},
					{ReasonNotScheduledYet, "pod slice-c: the scheduler has not reported on it yet", fromPod(researchNS, "slice-c")},
				}},
		},
		{
			name: "a reason read outside the tenant namespaces is not the tenant's",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim("ml-platform", "c", created, "gpu-whole"))
				s.Pods = append(s.Pods, unschedulable(pod("ml-platform", "p", created, "c", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: "ml-platform", Claim: "c", Pods: []string{"p"}, Classes: []string{"gpu-whole"}, AgeSeconds: 600,
				Reasons: []Reason{{ReasonUnschedulable, "pod p: " + schedulerMessage, ReasonSource{Object: ObjectRef{"Pod", "ml-platform", "p"}}}}},
		},
		{
			name: "a template pod's generated claim is found through the pod's status",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(researchNS, "slice-b-gpu-abcde", created, "gpu-slice"))
				s.Pods = append(s.Pods, unschedulable(generated(pod(researchNS, "slice-b", created, "", "slice"), "slice-b-gpu-abcde"), schedulerMessage))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Claim: "slice-b-gpu-abcde", Template: "slice", Pods: []string{"slice-b"},
				Classes: []string{"gpu-slice"}, AgeSeconds: 600, Reasons: []Reason{{ReasonUnschedulable, "pod slice-b: " + schedulerMessage, fromPod(researchNS, "slice-b")}}},
		},
		{
			name: "a pod naming a claim that does not exist",
			modify: func(s *Snapshot) {
				s.Pods = append(s.Pods, pod(legalNS, "p", created, "gone", ""))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "gone", Pods: []string{"p"}, Classes: []string{}, AgeSeconds: 600,
				Reasons: []Reason{{Kind: ReasonClaimNotFound, Message: "pod p uses ResourceClaim gone, which does not exist"}}},
		},
		{
			name: "an unallocated claim no pod uses is unreferenced",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "orphan", created, "gpu-whole"))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "orphan", Pods: []string{}, Classes: []string{"gpu-whole"}, AgeSeconds: 600,
				Reasons: []Reason{{Kind: ReasonUnreferenced, Message: "no unscheduled pod uses this claim, so the scheduler does not try to allocate it"}}},
		},
		{
			name: "a class that selects no device",
			modify: func(s *Snapshot) {
				s.DeviceClasses = append(s.DeviceClasses, deviceClass("gpu-h100", `device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'`, legal))
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "h", created, "gpu-h100"))
				s.Pods = append(s.Pods, unschedulable(pod(legalNS, "h", created, "h", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "h", Pods: []string{"h"}, Classes: []string{"gpu-h100"}, AgeSeconds: 600,
				Reasons: []Reason{
					{ReasonUnschedulable, "pod h: " + schedulerMessage, fromPod(legalNS, "h")},
					{Kind: ReasonNoMatchingDevice, Message: "DeviceClass gpu-h100 selects no device of the cluster"},
				}},
		},
		{
			name: "a class no longer granted to the tenant",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "c", created, "gpu-slice"))
				s.Pods = append(s.Pods, unschedulable(pod(legalNS, "p", created, "c", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "c", Pods: []string{"p"}, Classes: []string{"gpu-slice"}, AgeSeconds: 600,
				Reasons: []Reason{
					{ReasonUnschedulable, "pod p: " + schedulerMessage, fromPod(legalNS, "p")},
					{Kind: ReasonClassNotGranted, Message: "DeviceClass gpu-slice is not granted to tenant legal-ai"},
				}},
		},
		{
			name: "a class that does not exist",
			modify: func(s *Snapshot) {
				s.ResourceClaims = append(s.ResourceClaims, claim(legalNS, "c", created, "gpu-deleted"))
				s.Pods = append(s.Pods, unschedulable(pod(legalNS, "p", created, "c", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Claim: "c", Pods: []string{"p"}, Classes: []string{"gpu-deleted"}, AgeSeconds: 600,
				Reasons: []Reason{
					{ReasonUnschedulable, "pod p: " + schedulerMessage, fromPod(legalNS, "p")},
					{Kind: ReasonClassNotFound, Message: "DeviceClass gpu-deleted does not exist"},
				}},
		},
		{
			name: "a pod asking for a class by name waits with no claim yet",
			modify: func(s *Snapshot) {
				s.DeviceClasses[0].Spec.ExtendedResourceName = ptr.To("gpu-tenancy.io/gpu-whole")
				s.Pods = append(s.Pods, unschedulable(podAsking(legalNS, "trainer", created, "gpu-tenancy.io/gpu-whole", "1"), schedulerMessage))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Pods: []string{"trainer"}, Classes: []string{"gpu-whole"},
				ExtendedResources: []string{"gpu-tenancy.io/gpu-whole"}, AgeSeconds: 600,
				Reasons: []Reason{{ReasonUnschedulable, "pod trainer: " + schedulerMessage, fromPod(legalNS, "trainer")}}},
		},
		{
			name: "a pod asking for a class by its implicit name waits too",
			modify: func(s *Snapshot) {
				s.Pods = append(s.Pods, podAsking(researchNS, "p", created, "deviceclass.resource.kubernetes.io/gpu-slice", "2"))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Pods: []string{"p"}, Classes: []string{"gpu-slice"},
				ExtendedResources: []string{"deviceclass.resource.kubernetes.io/gpu-slice"}, AgeSeconds: 600,
				Reasons: []Reason{{ReasonNotScheduledYet, "pod p: the scheduler has not reported on it yet", fromPod(researchNS, "p")}}},
		},
		{
			name: "of two classes with one name, the newer is the one the pod waits for",
			modify: func(s *Snapshot) {
				s.DeviceClasses[0].Spec.ExtendedResourceName = ptr.To("example.com/gpu")
				s.DeviceClasses[1].Spec.ExtendedResourceName = ptr.To("example.com/gpu")
				s.DeviceClasses[1].CreationTimestamp = metav1.NewTime(created)
				s.Pods = append(s.Pods, podAsking(legalNS, "p", created, "example.com/gpu", "1"))
			},
			want: PendingClaim{Namespace: legalNS, Tenant: legal, Pods: []string{"p"}, Classes: []string{"gpu-slice"},
				ExtendedResources: []string{"example.com/gpu"}, AgeSeconds: 600,
				Reasons: []Reason{
					{ReasonNotScheduledYet, "pod p: the scheduler has not reported on it yet", fromPod(legalNS, "p")},
					{Kind: ReasonClassNotGranted, Message: "DeviceClass gpu-slice is not granted to tenant legal-ai"},
				}},
		},
		{
			name: "a firstAvailable claim lists every class it may get",
			modify: func(s *Snapshot) {
				s.DeviceClasses[0].Labels["tenant.gpu-tenancy.io/"+research] = "true"
				s.ResourceClaims = append(s.ResourceClaims, claim(researchNS, "either", created, "gpu-whole", "gpu-slice"))
				s.Pods = append(s.Pods, unschedulable(pod(researchNS, "p", created, "either", ""), schedulerMessage))
			},
			want: PendingClaim{Namespace: researchNS, Tenant: research, Claim: "either", Pods: []string{"p"}, Classes: []string{"gpu-whole", "gpu-slice"},
				AgeSeconds: 600, Reasons: []Reason{{ReasonUnschedulable, "pod p: " + schedulerMessage, fromPod(researchNS, "p")}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pendingBase()
			tc.modify(&s)
			r := Pending(context.Background(), &s, now)
			require.Len(t, r.Claims, 1, "%+v", r.Claims)
			got := r.Claims[0]
			got.Since = time.Time{}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPendingLeavesOut(t *testing.T) {
	cases := []struct {
		name   string
		modify func(s *Snapshot)
	}{
		{"allocated claims", func(s *Snapshot) {
			s.ResourceClaims = append(s.ResourceClaims, allocate(claim(legalNS, "a", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0"))
			s.Pods = append(s.Pods, pod(legalNS, "a", now, "a", ""))
		}},
		{"claims being deleted", func(s *Snapshot) {
			c := claim(legalNS, "a", now, "gpu-whole")
			c.DeletionTimestamp = &metav1.Time{Time: now}
			s.ResourceClaims = append(s.ResourceClaims, c)
		}},
		{"finished pods whose claim was never created", func(s *Snapshot) {
			p := pod(researchNS, "done", now, "", "slice")
			p.Status.Phase = corev1.PodFailed
			s.Pods = append(s.Pods, p)
		}},
		{"pods asking for a name no class carries", func(s *Snapshot) {
			s.Pods = append(s.Pods, podAsking(legalNS, "p", now, "example.com/dongle", "1"))
		}},
		{"pods asking by name whose claim the scheduler made", func(s *Snapshot) {
			s.DeviceClasses[0].Spec.ExtendedResourceName = ptr.To("gpu-tenancy.io/gpu-whole")
			p := podAsking(legalNS, "p", now, "gpu-tenancy.io/gpu-whole", "1")
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-x"}
			s.Pods = append(s.Pods, p)
		}},
		{"scheduled pods whose claim was never created", func(s *Snapshot) {
			p := pod(researchNS, "bound", now, "", "slice")
			p.Spec.NodeName = "gpu-a100-mig-0"
			s.Pods = append(s.Pods, p)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := pendingBase()
			tc.modify(&s)
			assert.Empty(t, Pending(context.Background(), &s, now).Claims)
		})
	}
}

func TestPendingOrdersOldestFirst(t *testing.T) {
	s := pendingBase()
	s.ResourceClaims = append(s.ResourceClaims,
		claim(legalNS, "young", now.Add(-time.Minute), "gpu-whole"),
		claim(legalNS, "old", now.Add(-time.Hour), "gpu-whole"))
	r := Pending(context.Background(), &s, now)
	require.Len(t, r.Claims, 2)
	assert.Equal(t, []string{"old", "young"}, []string{r.Claims[0].Claim, r.Claims[1].Claim})
}

func TestMarkOverdue(t *testing.T) {
	s := pendingBase()
	s.ResourceClaims = append(s.ResourceClaims,
		claim(legalNS, "young", now.Add(-5*time.Minute), "gpu-whole"),
		claim(legalNS, "old", now.Add(-20*time.Minute), "gpu-whole"))
	cases := []struct {
		name      string
		threshold time.Duration
		overdue   int
		flags     []bool
	}{
		{"a threshold below both ages makes both overdue", time.Minute, 2, []bool{true, true}},
		{"a threshold between the ages makes the older overdue", 15 * time.Minute, 1, []bool{true, false}},
		{"a threshold equal to an age is not exceeded", 20 * time.Minute, 0, []bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Pending(context.Background(), &s, now)
			assert.Equal(t, tc.overdue, r.MarkOverdue(tc.threshold))
			assert.Equal(t, tc.flags, []bool{r.Claims[0].Overdue, r.Claims[1].Overdue})
			assert.Equal(t, int64(tc.threshold/time.Second), r.OlderThanSeconds)
		})
	}
}
