package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
)

// pages serves n namespaces in pages of the limit asked for, with continue tokens "c<offset>", and records the
// options asked for.
type pages struct {
	n       int
	asked   []metav1.ListOptions
	expired bool // answer the first continued request with 410 Expired
}

func (p *pages) page(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	p.asked = append(p.asked, o)
	start := 0
	if o.Continue != "" {
		if p.expired {
			p.expired = false
			return nil, apierrors.NewResourceExpired("continue token expired")
		}
		fmt.Sscanf(o.Continue, "c%d", &start)
	}
	end := p.n
	if o.Limit > 0 {
		end = min(start+int(o.Limit), p.n)
	}
	list := &corev1.NamespaceList{Items: namespaces(end)[start:]}
	if end < p.n {
		list.Continue = fmt.Sprintf("c%d", end)
	}
	return list, nil
}

func namespaces(n int) []corev1.Namespace {
	out := make([]corev1.Namespace, n)
	for i := range out {
		out[i].Name = fmt.Sprint("ns-", i)
	}
	return out
}

func TestCollect(t *testing.T) {
	t.Run("lists page by page with the limit and the server's continue tokens", func(t *testing.T) {
		p := &pages{n: 1200}
		got, err := collect[corev1.Namespace](context.Background(), nil, "things", metav1.ListOptions{LabelSelector: "a=b"}, p.page)
		require.NoError(t, err)
		assert.Equal(t, namespaces(1200), got)
		assert.Equal(t, []metav1.ListOptions{
			{LabelSelector: "a=b", Limit: PageSize},
			{LabelSelector: "a=b", Limit: PageSize, Continue: "c500"},
			{LabelSelector: "a=b", Limit: PageSize, Continue: "c1000"},
		}, p.asked)
	})
	t.Run("an expired continue token restarts with one unpaged list", func(t *testing.T) {
		p := &pages{n: 1200, expired: true}
		got, err := collect[corev1.Namespace](context.Background(), nil, "things", metav1.ListOptions{}, p.page)
		require.NoError(t, err)
		assert.Equal(t, namespaces(1200), got)
		require.Len(t, p.asked, 3)
		assert.Equal(t, metav1.ListOptions{}, p.asked[2])
	})
	t.Run("an error names what was being listed", func(t *testing.T) {
		_, err := collect[corev1.Namespace](context.Background(), nil, "resourceclaims", metav1.ListOptions{},
			func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "", fmt.Errorf("RBAC"))
			})
		assert.ErrorContains(t, err, "listing resourceclaims: resourceclaims.resource.k8s.io is forbidden")
	})
	t.Run("the progress line counts the objects read", func(t *testing.T) {
		var out bytes.Buffer
		_, err := collect[corev1.Namespace](context.Background(), &Progress{w: &out}, "things", metav1.ListOptions{}, (&pages{n: 1200}).page)
		require.NoError(t, err)
		// Throttled to ten a second: the first page is shown; the next two, in memory, most likely come too soon.
		assert.True(t, strings.HasPrefix(out.String(), "\r\033[Klisting things: 500"), "%q", out.String())
	})
}

func TestLoadListsWhatTheReportNeeds(t *testing.T) {
	cases := []struct {
		need gpureport.Need
		want []string
	}{
		{gpureport.CapacityNeeds, []string{"namespaces", "deviceclasses", "resourceslices", "resourceclaims", "resourcequotas",
			"servicecidrs", "ipaddresses"}},
		{gpureport.PendingNeeds, []string{"namespaces", "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates", "pods", "events"}},
		{gpureport.AuditNeeds, []string{"namespaces", "deviceclasses", "resourceclaims", "resourcequotas", "limitranges",
			"validatingadmissionpolicybindings", "validatingadmissionpolicies"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			cs := fake.NewClientset()
			_, err := (&Loader{Client: cs}).Load(context.Background(), tc.need)
			require.NoError(t, err)
			var listed []string
			for _, a := range cs.Actions() {
				if l, ok := a.(k8stesting.ListAction); ok {
					listed = append(listed, l.GetResource().Resource)
				}
			}
			assert.Equal(t, tc.want, listed)
		})
	}
}

// A cluster that serves no ServiceCIDRs (before Kubernetes 1.33) still gets its capacity report, without the range;
// any other failure of those lists still ends the load.
func TestAServiceRangeNotServedLeavesItOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"not served", apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, ""), ""},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, "", errors.New("no")),
			"listing servicecidrs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.PrependReactor("list", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			s, err := (&Loader{Client: cs}).Load(context.Background(), gpureport.CapacityNeeds)
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Empty(t, s.ServiceCIDRs)
		})
	}
}

func TestLoadNarrowsNamespacedKindsToNamespace(t *testing.T) {
	cs := fake.NewClientset()
	_, err := (&Loader{Client: cs, Namespace: "vcluster-legal-ai"}).Load(context.Background(), gpureport.PendingNeeds|gpureport.AuditNeeds)
	require.NoError(t, err)
	var listed []string
	for _, a := range cs.Actions() {
		l, ok := a.(k8stesting.ListAction)
		require.True(t, ok, "a list, got %v", a)
		listed = append(listed, l.GetResource().Resource+" in "+l.GetNamespace())
	}
	assert.Equal(t, []string{
		"namespaces in ", "deviceclasses in ", "resourceslices in ",
		"resourceclaims in vcluster-legal-ai", "resourceclaimtemplates in vcluster-legal-ai", "resourcequotas in vcluster-legal-ai",
		"limitranges in vcluster-legal-ai", "pods in vcluster-legal-ai", "events in vcluster-legal-ai",
		"validatingadmissionpolicybindings in ", "validatingadmissionpolicies in ",
	}, listed)
}

// The vCluster configs are read by name, never listed by the chart's label, which a tenant may put on a hundred
// Secrets of a megabyte each.
func TestLoadReadsVClustersByNameOnly(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vcluster-legal-ai", Labels: map[string]string{naming.TenantNamespaceLabel: "legal-ai"}}}
	decoy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "decoy", Namespace: ns.Name, Labels: map[string]string{"app": "vcluster"}}}
	cs := fake.NewClientset(ns, decoy)
	s, err := (&Loader{Client: cs}).Load(context.Background(), gpureport.NeedVClusterConfigs)
	require.NoError(t, err)
	var did []string
	for _, a := range cs.Actions() {
		did = append(did, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
	}
	assert.ElementsMatch(t, []string{"list namespaces ", "get statefulsets vcluster-legal-ai", "get secrets vcluster-legal-ai"}, did)
	assert.Empty(t, s.VClusterConfigs, "a labelled Secret that is not the tenant's config is not read")
}

func TestProgressIsSilentWithoutATerminal(t *testing.T) {
	// stderr redirected to a file, as under cron or CI.
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer f.Close()
	p := NewProgress(f)
	p.Update("resourceclaims", 500)
	p.Done()
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size())
}

// A tenant's own vCluster config and StatefulSet are read by name too: the tenant's syncer may take the chart's label
// off them, not rename them.
func TestLoadReadsATenantsOwnVClusterByName(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vcluster-legal-ai", Labels: map[string]string{naming.TenantNamespaceLabel: "legal-ai"}}}
	config := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gpureport.ConfigSecretPrefix + "legal-ai", Namespace: ns.Name}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gpureport.ConfigSecretPrefix + "copy", Namespace: ns.Name}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "legal-ai", Namespace: ns.Name}}
	cs := fake.NewClientset(ns, config, other, sts)
	s, err := (&Loader{Client: cs}).Load(context.Background(), gpureport.AuditNeeds)
	require.NoError(t, err)
	require.Len(t, s.VClusterConfigs, 1, "the tenant's own, not another Secret without the label")
	assert.Equal(t, config.Name, s.VClusterConfigs[0].Name)
	require.Len(t, s.VClusterStatefulSets, 1)
	assert.Equal(t, sts.Name, s.VClusterStatefulSets[0].Name)
}
