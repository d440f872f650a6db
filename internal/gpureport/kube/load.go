package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
)

// PageSize is how many objects one list request asks for.
const PageSize = 500

// Loader lists objects into a Snapshot.
type Loader struct {
	Client   kubernetes.Interface
	Progress *Progress
	// Namespace, when set, narrows the lists of namespaced kinds to that namespace; cluster-scoped kinds are listed
	// whole. Empty lists every namespace.
	Namespace string
}

// listing is one list request of Load and the Snapshot field it fills.
type listing struct {
	need gpureport.Need
	fill func(context.Context, *Progress) error
}

// Load lists what need names. Field and label selectors narrow what the server sends (unscheduled pods only); the
// reports filter again themselves. vCluster configs and StatefulSets are read by name, each tenant's own.
func (l *Loader) Load(ctx context.Context, need gpureport.Need) (*gpureport.Snapshot, error) {
	s := &gpureport.Snapshot{}
	cs, ns := l.Client, l.Namespace
	all := metav1.ListOptions{}
	unscheduled := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "").String()}
	failedClaims := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedResourceClaimCreation").String()}
	// Listed in this order, one at a time; the first list that fails ends the load and names itself in the error.
	listings := []listing{
		list(gpureport.NeedNamespaces|gpureport.NeedVClusterConfigs, "namespaces", metav1.ListOptions{LabelSelector: naming.TenantNamespaceLabel},
			&s.Namespaces, cs.CoreV1().Namespaces().List),
		list(gpureport.NeedDeviceClasses, "deviceclasses", all, &s.DeviceClasses, cs.ResourceV1().DeviceClasses().List),
		list(gpureport.NeedResourceSlices, "resourceslices", all, &s.ResourceSlices, cs.ResourceV1().ResourceSlices().List),
		list(gpureport.NeedResourceClaims, "resourceclaims", all, &s.ResourceClaims, cs.ResourceV1().ResourceClaims(ns).List),
		list(gpureport.NeedClaimTemplates, "resourceclaimtemplates", all, &s.ClaimTemplates,
			cs.ResourceV1().ResourceClaimTemplates(ns).List),
		list(gpureport.NeedResourceQuotas, "resourcequotas", all, &s.ResourceQuotas, cs.CoreV1().ResourceQuotas(ns).List),
		list(gpureport.NeedLimitRanges, "limitranges", all, &s.LimitRanges, cs.CoreV1().LimitRanges(ns).List),
		list(gpureport.NeedPods, "unscheduled pods", unscheduled, &s.Pods, cs.CoreV1().Pods(ns).List),
		list(gpureport.NeedEvents, "events", failedClaims, &s.Events, cs.CoreV1().Events(ns).List),
		list(gpureport.NeedPolicies, "validatingadmissionpolicybindings", all, &s.PolicyBindings,
			cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List),
		list(gpureport.NeedPolicies, "validatingadmissionpolicies", all, &s.Policies,
			cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List),
		optional(list(gpureport.NeedServiceRange, "servicecidrs", all, &s.ServiceCIDRs, cs.NetworkingV1().ServiceCIDRs().List)),
		optional(list(gpureport.NeedServiceRange, "ipaddresses", all, &s.IPAddresses, cs.NetworkingV1().IPAddresses().List)),
	}
	defer l.Progress.Done()
	for _, li := range listings {
		if need&li.need == 0 {
			continue
		}
		if err := li.fill(ctx, l.Progress); err != nil {
			return nil, err
		}
	}
	if need.Has(gpureport.NeedVClusterConfigs) {
		if err := l.tenantVClusters(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// tenantVClusters reads each tenant's own vCluster config Secret and StatefulSet by name. Not a list by the chart's
// label (app=vcluster): the tenant's syncer may take the label off both (docs/threat-model.md, "What the platform
// reads"), but not rename them or its namespace's tenant label; and it may put the label on any Secret of its own, a
// hundred Secrets of a megabyte each, which a list in every namespace would load for each tenant. A few reads run at
// once: a thousand tenants cost two thousand reads.
func (l *Loader) tenantVClusters(ctx context.Context, s *gpureport.Snapshot) error {
	type read struct {
		st     *appsv1.StatefulSet
		secret *corev1.Secret
		err    error
	}
	var todo []corev1.Namespace
	for _, ns := range s.Namespaces {
		if tenant := ns.Labels[naming.TenantNamespaceLabel]; tenant != "" && (l.Namespace == "" || ns.Name == l.Namespace) {
			todo = append(todo, ns)
		}
	}
	reads := make([]read, len(todo))
	sem := make(chan struct{}, concurrentReads)
	var wg sync.WaitGroup
	for i, ns := range todo {
		tenant := ns.Labels[naming.TenantNamespaceLabel]
		name := gpureport.ConfigSecretPrefix + tenant
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &reads[i]
			if r.st, r.err = getByName(ctx, "StatefulSet", ns.Name, tenant, l.Client.AppsV1().StatefulSets(ns.Name).Get); r.err != nil {
				return
			}
			r.secret, r.err = getByName(ctx, "Secret", ns.Name, name, l.Client.CoreV1().Secrets(ns.Name).Get)
		}()
	}
	wg.Wait()
	for _, r := range reads {
		if r.err != nil {
			return r.err
		}
		if r.st != nil {
			s.VClusterStatefulSets = append(s.VClusterStatefulSets, *r.st)
		}
		if r.secret != nil {
			s.VClusterConfigs = append(s.VClusterConfigs, *r.secret)
		}
	}
	return nil
}

// getByName reads one object by name; one that is not there is nil, not an error.
func getByName[T any](ctx context.Context, kind, namespace, name string, get func(context.Context, string, metav1.GetOptions) (*T, error)) (*T, error) {
	obj, err := get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	return obj, nil
}

// concurrentReads is how many reads by name run at once.
const concurrentReads = 8

// list is the listing that fills into with every object of a typed List call (a clientset's List method).
func list[T any, L runtime.Object](need gpureport.Need, what string, opts metav1.ListOptions, into *[]T,
	page func(context.Context, metav1.ListOptions) (L, error)) listing {
	return listing{need: need, fill: func(ctx context.Context, p *Progress) (err error) {
		*into, err = collect[T](ctx, p, what, opts, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return page(ctx, o)
		})
		return err
	}}
}

// optional is a listing of a kind an API server may not serve (before the Kubernetes version that added it): not
// served, it leaves its field empty.
func optional(li listing) listing {
	fill := li.fill
	li.fill = func(ctx context.Context, p *Progress) error {
		if err := fill(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	return li
}

// collect lists every page with client-go's pager, which lists once more without paging when a continue token
// expires (the listing took longer than the API server's compaction window), and shows how many objects it has read.
func collect[T any](ctx context.Context, p *Progress, what string, opts metav1.ListOptions,
	page func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]T, error) {
	read := 0
	pg := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := page(ctx, o)
		if err != nil {
			return nil, err
		}
		// A request without a continue token is the first page, or the unpaged list after an expiry: count afresh.
		if o.Continue == "" {
			read = 0
		}
		read += meta.LenList(obj)
		p.Update(what, read)
		return obj, nil
	})
	pg.PageSize = PageSize
	obj, _, err := pg.List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	out := make([]T, 0, meta.LenList(obj))
	err = meta.EachListItem(obj, func(o runtime.Object) error {
		item, ok := any(o).(*T)
		if !ok {
			return fmt.Errorf("listing %s: got a %T", what, o)
		}
		out = append(out, *item)
		return nil
	})
	return out, err
}

// Progress shows on a terminal which list is running and how many objects it has read; elsewhere it writes nothing.
type Progress struct {
	w     io.Writer
	shown bool
	last  time.Time
}

// NewProgress writes progress to w when w is a terminal.
func NewProgress(w io.Writer) *Progress {
	if f, ok := w.(interface{ Stat() (os.FileInfo, error) }); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &Progress{w: w}
		}
	}
	return &Progress{}
}

// Update reports n objects read of what, at most ten times a second.
func (p *Progress) Update(what string, n int) {
	if p == nil || p.w == nil {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.shown = true
		fmt.Fprintf(p.w, "\r\033[Klisting %s: %d", what, n)
	}
}

// Done clears the progress line.
func (p *Progress) Done() {
	if p == nil || p.w == nil {
		return
	}
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
