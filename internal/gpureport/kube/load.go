package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
)

// PageSize is how many objects one list request asks for.
const PageSize = 500

// Loader lists objects into a Snapshot.
type Loader struct {
	Client   kubernetes.Interface
	Progress *Progress
}

// Load lists what need names. Field and label selectors narrow what the server sends (unscheduled pods only, the
// vCluster chart's Secrets only); the reports filter again themselves.
func (l *Loader) Load(ctx context.Context, need gpureport.Need) (*gpureport.Snapshot, error) {
	s := &gpureport.Snapshot{}
	cs := l.Client
	var err error
	step := func(n gpureport.Need, f func() error) {
		if err == nil && need.Has(n) {
			err = f()
		}
	}
	step(gpureport.NeedNamespaces, func() (e error) {
		s.Namespaces, e = collect(ctx, l, "namespaces", metav1.ListOptions{LabelSelector: naming.TenantNamespaceLabel},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.Namespace, string, error) {
				r, err := cs.CoreV1().Namespaces().List(ctx, o)
				return items(r, err, func(r *corev1.NamespaceList) ([]corev1.Namespace, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedDeviceClasses, func() (e error) {
		s.DeviceClasses, e = collect(ctx, l, "deviceclasses", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]resourcev1.DeviceClass, string, error) {
				r, err := cs.ResourceV1().DeviceClasses().List(ctx, o)
				return items(r, err, func(r *resourcev1.DeviceClassList) ([]resourcev1.DeviceClass, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedResourceSlices, func() (e error) {
		s.ResourceSlices, e = collect(ctx, l, "resourceslices", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]resourcev1.ResourceSlice, string, error) {
				r, err := cs.ResourceV1().ResourceSlices().List(ctx, o)
				return items(r, err, func(r *resourcev1.ResourceSliceList) ([]resourcev1.ResourceSlice, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedResourceClaims, func() (e error) {
		s.ResourceClaims, e = collect(ctx, l, "resourceclaims", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]resourcev1.ResourceClaim, string, error) {
				r, err := cs.ResourceV1().ResourceClaims("").List(ctx, o)
				return items(r, err, func(r *resourcev1.ResourceClaimList) ([]resourcev1.ResourceClaim, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedClaimTemplates, func() (e error) {
		s.ClaimTemplates, e = collect(ctx, l, "resourceclaimtemplates", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]resourcev1.ResourceClaimTemplate, string, error) {
				r, err := cs.ResourceV1().ResourceClaimTemplates("").List(ctx, o)
				return items(r, err, func(r *resourcev1.ResourceClaimTemplateList) ([]resourcev1.ResourceClaimTemplate, string) {
					return r.Items, r.Continue
				})
			})
		return e
	})
	step(gpureport.NeedResourceQuotas, func() (e error) {
		s.ResourceQuotas, e = collect(ctx, l, "resourcequotas", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.ResourceQuota, string, error) {
				r, err := cs.CoreV1().ResourceQuotas("").List(ctx, o)
				return items(r, err, func(r *corev1.ResourceQuotaList) ([]corev1.ResourceQuota, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedLimitRanges, func() (e error) {
		s.LimitRanges, e = collect(ctx, l, "limitranges", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.LimitRange, string, error) {
				r, err := cs.CoreV1().LimitRanges("").List(ctx, o)
				return items(r, err, func(r *corev1.LimitRangeList) ([]corev1.LimitRange, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedPods, func() (e error) {
		unscheduled := fields.OneTermEqualSelector("spec.nodeName", "").String()
		s.Pods, e = collect(ctx, l, "unscheduled pods", metav1.ListOptions{FieldSelector: unscheduled},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.Pod, string, error) {
				r, err := cs.CoreV1().Pods("").List(ctx, o)
				return items(r, err, func(r *corev1.PodList) ([]corev1.Pod, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedEvents, func() (e error) {
		failed := fields.OneTermEqualSelector("reason", "FailedResourceClaimCreation").String()
		s.Events, e = collect(ctx, l, "events", metav1.ListOptions{FieldSelector: failed},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.Event, string, error) {
				r, err := cs.CoreV1().Events("").List(ctx, o)
				return items(r, err, func(r *corev1.EventList) ([]corev1.Event, string) { return r.Items, r.Continue })
			})
		return e
	})
	step(gpureport.NeedPolicies, func() (e error) {
		s.PolicyBindings, e = collect(ctx, l, "validatingadmissionpolicybindings", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]admissionv1.ValidatingAdmissionPolicyBinding, string, error) {
				r, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, o)
				return items(r, err, func(r *admissionv1.ValidatingAdmissionPolicyBindingList) ([]admissionv1.ValidatingAdmissionPolicyBinding, string) {
					return r.Items, r.Continue
				})
			})
		if e != nil {
			return e
		}
		s.Policies, e = collect(ctx, l, "validatingadmissionpolicies", metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) ([]admissionv1.ValidatingAdmissionPolicy, string, error) {
				r, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, o)
				return items(r, err, func(r *admissionv1.ValidatingAdmissionPolicyList) ([]admissionv1.ValidatingAdmissionPolicy, string) {
					return r.Items, r.Continue
				})
			})
		return e
	})
	step(gpureport.NeedVClusterConfigs, func() (e error) {
		s.VClusterConfigs, e = collect(ctx, l, "vcluster configs", metav1.ListOptions{LabelSelector: gpureport.VClusterSecretSelector},
			func(ctx context.Context, o metav1.ListOptions) ([]corev1.Secret, string, error) {
				r, err := cs.CoreV1().Secrets("").List(ctx, o)
				return items(r, err, func(r *corev1.SecretList) ([]corev1.Secret, string) { return r.Items, r.Continue })
			})
		return e
	})
	l.Progress.Done()
	return s, err
}

func items[L, T any](list *L, err error, get func(*L) ([]T, string)) ([]T, string, error) {
	if err != nil {
		return nil, "", err
	}
	out, cont := get(list)
	return out, cont, nil
}

// collect lists every page. When a continue token expires (the list took longer than the API server's compaction
// window), it lists once more without paging, as client-go's pager does.
func collect[T any](ctx context.Context, l *Loader, what string, opts metav1.ListOptions,
	page func(context.Context, metav1.ListOptions) ([]T, string, error)) ([]T, error) {
	var all []T
	opts.Limit = PageSize
	for {
		got, cont, err := page(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			opts.Limit, opts.Continue, all = 0, "", nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		all = append(all, got...)
		l.Progress.Update(what, len(all))
		if cont == "" {
			return all, nil
		}
		opts.Continue = cont
	}
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
