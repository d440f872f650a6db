package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Scopes of docs/threat-model.md's rights table.
const (
	ownNamespace   = "own namespace"
	everyNamespace = "every namespace"
)

// inventoried reads the syncer's rights from docs/threat-model.md, between its markers, as "scope|group|resource|verb".
func inventoried(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "threat-model.md"))
	require.NoError(t, err)
	doc := string(raw)
	begin, end := strings.Index(doc, "<!-- syncer-rights:begin -->"), strings.Index(doc, "<!-- syncer-rights:end -->")
	require.True(t, begin >= 0 && end > begin, "docs/threat-model.md has the syncer-rights markers")
	var rights []string
	for _, line := range strings.Split(doc[begin:end], "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 5 || !slices.Contains([]string{ownNamespace, everyNamespace}, strings.TrimSpace(cells[0])) {
			continue
		}
		scope, group, resource := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		require.NotEmpty(t, strings.TrimSpace(cells[4]), "the right %s %s has its guard or reason", group, resource)
		if group == "core" {
			group = ""
		}
		for _, verb := range strings.Split(cells[3], ",") {
			rights = append(rights, scope+"|"+group+"|"+resource+"|"+strings.TrimSpace(verb))
		}
	}
	require.NotEmpty(t, rights, "the rights table has rows")
	sort.Strings(rights)
	return rights
}

// rulesIn is what a client may do in namespace, by its own SelfSubjectRulesReview, as "group|resource|verb" (with
// "|name" when the rule names objects), and its non-resource rules as "nonResource|url|verb".
func rulesIn(t *testing.T, ctx context.Context, as kubernetes.Interface, namespace string) map[string]bool {
	t.Helper()
	review, err := as.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, review.Status.Incomplete, "the rules review is complete: %s", review.Status.EvaluationError)
	rules := map[string]bool{}
	for _, r := range review.Status.ResourceRules {
		for _, group := range r.APIGroups {
			for _, resource := range r.Resources {
				for _, verb := range r.Verbs {
					key := group + "|" + resource + "|" + verb
					if len(r.ResourceNames) == 0 {
						rules[key] = true
					}
					for _, name := range r.ResourceNames {
						rules[key+"|"+name] = true
					}
				}
			}
		}
	}
	for _, r := range review.Status.NonResourceRules {
		for _, url := range r.NonResourceURLs {
			for _, verb := range r.Verbs {
				rules["nonResource|"+url+"|"+verb] = true
			}
		}
	}
	return rules
}

// minus lists the rules of a that b does not have, sorted.
func minus(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// checkSyncerRights reads the syncer's real rights from the API server with its own token and compares them with the
// threat model's inventory, both ways: a right the chart grants that the inventory does not list fails, and so does a
// listed right the syncer no longer has (the inventory went stale). Every other service account of the tenant's
// namespace, whose tokens the syncer can mint, must hold nothing more than a service account without any binding.
func checkSyncerRights(t *testing.T, ctx context.Context) {
	const baselineNS = "rights-baseline"
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baselineNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), baselineNS, metav1.DeleteOptions{})
	})
	_, err = client.CoreV1().ServiceAccounts(baselineNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	nobody, _ := serviceAccountClient(t, ctx, baselineNS, "nobody")
	want := inventoried(t)

	for tenant, other := range map[string]string{legal: research, research: legal} {
		t.Run(tenant, func(t *testing.T) {
			own := naming.Namespace(tenant)
			syncer, _ := syncerOf(t, ctx, tenant)
			elsewhere := rulesIn(t, ctx, syncer, "default")
			for _, ns := range []string{naming.Namespace(other), "kube-system", naming.PlatformNamespace, naming.DriverNamespace, baselineNS} {
				assert.Equal(t, elsewhere, rulesIn(t, ctx, syncer, ns), "the syncer holds nothing in %s that it does not hold everywhere", ns)
			}
			var got []string
			for _, r := range minus(rulesIn(t, ctx, syncer, own), elsewhere) {
				got = append(got, ownNamespace+"|"+r)
			}
			for _, r := range minus(elsewhere, rulesIn(t, ctx, nobody, "default")) {
				got = append(got, everyNamespace+"|"+r)
			}
			sort.Strings(got)
			var unlisted, stale []string
			for _, r := range got {
				if !slices.Contains(want, r) {
					unlisted = append(unlisted, r)
				}
			}
			for _, r := range want {
				if !slices.Contains(got, r) {
					stale = append(stale, r)
				}
			}
			assert.Empty(t, unlisted, "rights the syncer holds that docs/threat-model.md does not list: guard or explain each")
			assert.Empty(t, stale, "rights docs/threat-model.md lists that the syncer no longer holds: read the chart again")

			accounts, err := client.CoreV1().ServiceAccounts(own).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, accounts.Items)
			for _, sa := range accounts.Items {
				if sa.Name == "vc-"+tenant {
					continue
				}
				as, user := serviceAccountClient(t, ctx, own, sa.Name)
				for _, ns := range []string{own, "default"} {
					assert.Empty(t, minus(rulesIn(t, ctx, as, ns), rulesIn(t, ctx, nobody, ns)), "%s holds something in %s", user, ns)
				}
			}
		})
	}
}

// checkFlowSchemas: API Priority and Fairness classifies each tenant's service accounts, whichever token it mints, as
// one flow of a level of the tenant's own, and the DRA driver's ahead of them; read from the API server's own response
// headers (k8s.io/api flowcontrol/v1 ResponseHeaderMatchedFlowSchemaUID,
// ResponseHeaderMatchedPriorityLevelConfigurationUID).
func checkFlowSchemas(t *testing.T, ctx context.Context) {
	fs := client.FlowcontrolV1().FlowSchemas()
	levels := client.FlowcontrolV1().PriorityLevelConfigurations()
	uidOf := func(get func() (metav1.Object, error)) string {
		o, err := get()
		require.NoError(t, err)
		return string(o.GetUID())
	}
	controllers := uidOf(func() (metav1.Object, error) { return fs.Get(ctx, tenancy.ControllersFlowSchema, metav1.GetOptions{}) })
	workloadHigh := uidOf(func() (metav1.Object, error) {
		return levels.Get(ctx, tenancy.ControllersPriorityLevel, metav1.GetOptions{})
	})

	for _, tenant := range []string{legal, research} {
		ns := naming.Namespace(tenant)
		schema := uidOf(func() (metav1.Object, error) {
			return fs.Get(ctx, naming.TenantFlowSchema(tenant), metav1.GetOptions{})
		})
		level := uidOf(func() (metav1.Object, error) {
			return levels.Get(ctx, naming.TenantPriorityLevel(tenant), metav1.GetOptions{})
		})
		for _, sa := range []string{"vc-" + tenant, "default", "vc-workload-" + tenant} {
			t.Run(tenant+"/"+sa, func(t *testing.T) {
				token := tokenOf(t, ctx, ns, sa)
				// The health checks too, which the bootstrap probes schema would otherwise serve at the exempt level.
				for _, path := range []string{"/api/v1/namespaces/" + ns + "/pods", "/api/v1/namespaces/kube-system/secrets",
					"/healthz", "/livez", "/readyz", "/readyz/etcd"} {
					gotSchema, gotLevel := classified(t, ctx, token, path)
					assert.Equal(t, schema, gotSchema, "%s: the tenant's own flow schema, even for a request RBAC refuses", path)
					assert.Equal(t, level, gotLevel, "%s: the tenant's own level", path)
				}
			})
		}
	}

	t.Run("the DRA driver", func(t *testing.T) {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: naming.DriverNamespace}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = client.CoreV1().Namespaces().Delete(context.Background(), naming.DriverNamespace, metav1.DeleteOptions{})
		})
		_, err = client.CoreV1().ServiceAccounts(naming.DriverNamespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-plugin"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		gotSchema, gotLevel := classified(t, ctx, tokenOf(t, ctx, naming.DriverNamespace, "kubelet-plugin"),
			"/apis/resource.k8s.io/v1/resourceslices")
		assert.Equal(t, controllers, gotSchema)
		assert.Equal(t, workloadHigh, gotLevel)
	})

	t.Run("each tenant's level holds one seat", func(t *testing.T) {
		// What the API server computed from every level's shares, as its metrics report it.
		eventually(t, ctx, func() error {
			raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			if err != nil {
				return err
			}
			for _, tenant := range []string{legal, research} {
				line := `apiserver_flowcontrol_nominal_limit_seats{priority_level="` + naming.TenantPriorityLevel(tenant) + `"} `
				i := strings.Index(string(raw), line)
				if i < 0 {
					return errorf("no %s in the API server's metrics", strings.TrimSpace(line))
				}
				if got, _, _ := strings.Cut(string(raw[i+len(line):]), "\n"); got != "1" {
					return errorf("%s%s, want 1", line, got)
				}
			}
			return nil
		})
	})
}

// classified sends one GET with token and returns the flow schema and priority level the API server put it in.
func classified(t *testing.T, ctx context.Context, token, path string) (schema, level string) {
	t.Helper()
	cfg := restConfigAs(t, token)
	transport, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path+"?limit=1", nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: transport}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
}

// platformSources are what the operators' CLI and the alerts read (docs/threat-model.md, "What the platform reads"),
// each with whether the threat model says a tenant can write it in its own namespace, and the row that says so.
var platformSources = []struct {
	group, resource, row string
	tenantWrites         bool
}{
	{"", "namespaces", "Namespaces", false},
	{"resource.k8s.io", "deviceclasses", "DeviceClasses", false},
	{"resource.k8s.io", "resourceslices", "ResourceSlices", false},
	{"resource.k8s.io", "resourceclaims", "ResourceClaims: `spec`", true},
	{"resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplates", true},
	{"", "resourcequotas", "ResourceQuotas", false},
	{"", "limitranges", "LimitRanges", false},
	{"admissionregistration.k8s.io", "validatingadmissionpolicies", "ValidatingAdmissionPolicies", false},
	{"admissionregistration.k8s.io", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicies and their bindings", false},
	{"", "pods", "Pods: labels", true},
	{"", "pods/status", "the `PodScheduled` condition", true},
	{"", "events", "Events (`FailedResourceClaimCreation`)", true},
	{"", "secrets", "the vCluster config Secret", true},
	{"", "secrets", "the vCluster's exported kubeconfig Secret", true},
	{"resource.k8s.io", "resourceclaims/status", "ResourceClaims: `status.allocation`", true},
	{"apps", "statefulsets", "the StatefulSet `<t>`", true},
}

// checkPlatformSources: every source the platform reads is listed in the threat model, and who can write it is what the
// API server says of each tenant's syncer in its own namespace (a SelfSubjectAccessReview with the syncer's token):
// a source listed as the platform's that the tenant can write, or the other way round, fails.
func checkPlatformSources(t *testing.T, ctx context.Context) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "threat-model.md"))
	require.NoError(t, err)
	doc := string(raw)
	section := doc[strings.Index(doc, "## What the platform reads"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	for _, tenant := range []string{legal, research} {
		syncer, _ := syncerOf(t, ctx, tenant)
		for _, src := range platformSources {
			t.Run(tenant+"/"+src.resource, func(t *testing.T) {
				assert.Contains(t, section, src.row, "docs/threat-model.md lists %s among what the platform reads", src.resource)
				resource, sub, _ := strings.Cut(src.resource, "/")
				writes := false
				for _, verb := range []string{"create", "update", "patch"} {
					review, err := syncer.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
						Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: naming.Namespace(tenant), Verb: verb, Group: src.group, Resource: resource, Subresource: sub}},
					}, metav1.CreateOptions{})
					require.NoError(t, err)
					writes = writes || review.Status.Allowed
				}
				assert.Equal(t, src.tenantWrites, writes, "whether tenant %s's syncer can write %s", tenant, src.resource)
			})
		}
	}
}
