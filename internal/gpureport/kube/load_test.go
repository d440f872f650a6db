package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
)

// pages serves items in pages of up to size, with continue tokens "c<offset>", and records the options asked for.
type pages struct {
	items   []int
	size    int
	asked   []metav1.ListOptions
	expired bool // answer the first continued request with 410 Expired
}

func (p *pages) page(_ context.Context, o metav1.ListOptions) ([]int, string, error) {
	p.asked = append(p.asked, o)
	start := 0
	if o.Continue != "" {
		if p.expired {
			p.expired = false
			return nil, "", apierrors.NewResourceExpired("continue token expired")
		}
		fmt.Sscanf(o.Continue, "c%d", &start)
	}
	if o.Limit == 0 {
		return p.items[start:], "", nil
	}
	end := min(start+int(o.Limit), len(p.items))
	if end == len(p.items) {
		return p.items[start:end], "", nil
	}
	return p.items[start:end], fmt.Sprintf("c%d", end), nil
}

func numbers(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestCollect(t *testing.T) {
	l := &Loader{}
	t.Run("lists page by page with the limit and the server's continue tokens", func(t *testing.T) {
		p := &pages{items: numbers(1200)}
		got, err := collect(context.Background(), l, "things", metav1.ListOptions{LabelSelector: "a=b"}, p.page)
		require.NoError(t, err)
		assert.Equal(t, numbers(1200), got)
		assert.Equal(t, []metav1.ListOptions{
			{LabelSelector: "a=b", Limit: PageSize},
			{LabelSelector: "a=b", Limit: PageSize, Continue: "c500"},
			{LabelSelector: "a=b", Limit: PageSize, Continue: "c1000"},
		}, p.asked)
	})
	t.Run("an expired continue token restarts with one unpaged list", func(t *testing.T) {
		p := &pages{items: numbers(1200), expired: true}
		got, err := collect(context.Background(), l, "things", metav1.ListOptions{}, p.page)
		require.NoError(t, err)
		assert.Equal(t, numbers(1200), got)
		require.Len(t, p.asked, 3)
		assert.Equal(t, metav1.ListOptions{}, p.asked[2])
	})
	t.Run("an error names what was being listed", func(t *testing.T) {
		_, err := collect(context.Background(), l, "resourceclaims", metav1.ListOptions{}, func(context.Context, metav1.ListOptions) ([]int, string, error) {
			return nil, "", apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "", fmt.Errorf("RBAC"))
		})
		assert.ErrorContains(t, err, "listing resourceclaims: resourceclaims.resource.k8s.io is forbidden")
	})
}

func TestLoadListsWhatTheReportNeeds(t *testing.T) {
	cases := []struct {
		need gpureport.Need
		want []string
	}{
		{gpureport.CapacityNeeds, []string{"namespaces", "deviceclasses", "resourceslices", "resourceclaims", "resourcequotas"}},
		{gpureport.PendingNeeds, []string{"namespaces", "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates", "pods", "events"}},
		{gpureport.AuditNeeds, []string{"namespaces", "deviceclasses", "resourceclaims", "resourcequotas", "limitranges",
			"validatingadmissionpolicybindings", "validatingadmissionpolicies", "secrets"}},
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

func TestLoadReadsOnlyTheVClusterChartsSecrets(t *testing.T) {
	cs := fake.NewClientset()
	_, err := (&Loader{Client: cs}).Load(context.Background(), gpureport.NeedVClusterConfigs)
	require.NoError(t, err)
	require.Len(t, cs.Actions(), 1)
	list, ok := cs.Actions()[0].(k8stesting.ListAction)
	require.True(t, ok, "a list, got %v", cs.Actions()[0])
	assert.Equal(t, "secrets", list.GetResource().Resource)
	assert.Empty(t, list.GetNamespace(), "in every namespace")
	assert.Equal(t, "app=vcluster", list.GetListRestrictions().Labels.String())
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
