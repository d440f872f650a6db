package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// twoContexts is a kubeconfig with contexts blue (current) and green, on two servers; green's context sets a namespace.
const twoContexts = `apiVersion: v1
kind: Config
clusters:
- {name: blue, cluster: {server: "https://blue.example:6443"}}
- {name: green, cluster: {server: "https://green.example:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: blue, context: {cluster: blue, user: u}}
- {name: green, context: {cluster: green, user: u, namespace: vcluster-legal-ai}}
current-context: blue
`

func TestKubeconfigPrecedence(t *testing.T) {
	colours := writeFile(t, "colours", twoContexts)
	env := kubeconfigFor(t, "https://env.example:6443")
	cases := []struct {
		name       string
		kubeconfig string   // $KUBECONFIG
		global     []string // before the command
		args       []string // after it
		server     string
		from       string
		timeout    time.Duration
	}{
		{name: "--kubeconfig: its current context", args: []string{"--kubeconfig", colours},
			server: "https://blue.example:6443", from: "kubeconfig " + colours + " (--kubeconfig)"},
		{name: "--context picks the named context", args: []string{"--kubeconfig", colours, "--context", "green"},
			server: "https://green.example:6443", from: "kubeconfig " + colours + " (--kubeconfig), context green (--context)"},
		{name: "--kubeconfig beats $KUBECONFIG", kubeconfig: env, args: []string{"--kubeconfig", colours},
			server: "https://blue.example:6443", from: "kubeconfig " + colours + " (--kubeconfig)"},
		{name: "$KUBECONFIG when no flag names a file", kubeconfig: env,
			server: "https://env.example:6443", from: "kubeconfig " + env + " ($KUBECONFIG)"},
		{name: "--context picks from $KUBECONFIG", kubeconfig: colours, args: []string{"--context", "green"},
			server: "https://green.example:6443", from: "kubeconfig " + colours + " ($KUBECONFIG), context green (--context)"},
		// kubectl merges the files of $KUBECONFIG; the first to set current-context wins, and --context reaches into any.
		{name: "$KUBECONFIG's files merged: the first file's current context", kubeconfig: env + string(os.PathListSeparator) + colours,
			server: "https://env.example:6443"},
		{name: "$KUBECONFIG's files merged: --context from the second file", kubeconfig: env + string(os.PathListSeparator) + colours,
			args: []string{"--context", "green"}, server: "https://green.example:6443"},
		{name: "--request-timeout as a duration", args: []string{"--kubeconfig", env, "--request-timeout", "2m"},
			server: "https://env.example:6443", timeout: 2 * time.Minute},
		{name: "--request-timeout in whole seconds, as kubectl takes it", args: []string{"--kubeconfig", env, "--request-timeout", "45"},
			server: "https://env.example:6443", timeout: 45 * time.Second},
		{name: "flags before the command, as kubectl takes them", global: []string{"--request-timeout=5s", "--kubeconfig", env},
			server: "https://env.example:6443", timeout: 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			args := append(append(append([]string{}, tc.global...), "capacity", "-o", "json"), tc.args...)
			r := run(t, nil, args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Equal(t, tc.server, r.target.Server())
			if tc.from != "" {
				assert.Equal(t, tc.from, r.target.From)
			}
			if tc.timeout == 0 {
				tc.timeout = 30 * time.Second
			}
			assert.Equal(t, tc.timeout, r.target.Config.Timeout)
		})
	}
}

func TestStackExcludesTheKubeconfigFlags(t *testing.T) {
	colours := writeFile(t, "colours", twoContexts)
	for _, args := range [][]string{
		{"capacity", "--stack", "dev", "--kubeconfig", colours},
		{"audit", "--kubeconfig", colours, "--stack", "dev"},
		{"pending", "--stack", "dev", "--context", "green"},
	} {
		r := run(t, nil, args...)
		assert.Equal(t, ExitUsage, r.code, args)
		assert.Regexp(t, `^gpu-tenancy: --(kubeconfig|context) and --stack exclude each other\n$`, r.stderr, args)
		assert.Nil(t, r.target, "no cluster is read: %v", args)
	}
}

// tenantsCluster is legal-ai and research-ai, each with one pending claim, and one node of two whole GPUs, one of
// which research-ai holds.
func tenantsCluster() []runtime.Object {
	node := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: naming.Driver, NodeName: ptr.To("node-0"),
			Pool:    resourcev1.ResourcePool{Name: "node-0", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	legal := pendingClaim(20 * time.Minute)
	research := pendingClaim(10 * time.Minute)
	research.Namespace = naming.Namespace("research-ai")
	held := pendingClaim(time.Hour)
	held.Namespace, held.Name = naming.Namespace("research-ai"), "held"
	held.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: naming.Driver, Pool: "node-0", Device: "gpu-0"}},
	}}
	whole := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-whole", Labels: map[string]string{
		naming.ManagedByLabel: naming.ManagedBy, naming.ClassTenantLabel("legal-ai"): "true", naming.ClassTenantLabel("research-ai"): "true",
	}}}
	return []runtime.Object{tenantNS("legal-ai"), tenantNS("research-ai"), node, whole, legal, research, held}
}

// namespacesListed maps each kind the run listed to the namespaces it asked for ("" for all).
func namespacesListed(r result) map[string][]string {
	out := map[string][]string{}
	for _, a := range r.client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok {
			out[l.GetResource().Resource] = append(out[l.GetResource().Resource], l.GetNamespace())
		}
	}
	return out
}

func TestNamespaceNarrowsPending(t *testing.T) {
	colours := writeFile(t, "colours", twoContexts)
	legalNS, researchNS := naming.Namespace("legal-ai"), naming.Namespace("research-ai")
	cases := []struct {
		name  string
		args  []string
		claim []string // namespace/claim of the report's claims
		lists string   // namespace the namespaced kinds were listed in
	}{
		{"every namespace by default", []string{"--kubeconfig", colours},
			[]string{legalNS + "/whole-c", researchNS + "/whole-c"}, ""},
		{"--namespace lists that namespace only", []string{"--kubeconfig", colours, "--namespace", researchNS},
			[]string{researchNS + "/whole-c"}, researchNS},
		{"-n as kubectl spells it", []string{"--kubeconfig", colours, "-n", legalNS},
			[]string{legalNS + "/whole-c"}, legalNS},
		{"the context's namespace does not narrow", []string{"--kubeconfig", colours, "--context", "green"},
			[]string{legalNS + "/whole-c", researchNS + "/whole-c"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tenantsCluster(), append([]string{"pending", "-o", "json"}, tc.args...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var doc struct {
				Claims []struct{ Namespace, Claim string } `json:"claims"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
			var got []string
			for _, c := range doc.Claims {
				got = append(got, c.Namespace+"/"+c.Claim)
			}
			assert.Equal(t, tc.claim, got)
			listed := namespacesListed(r)
			for _, kind := range []string{"resourceclaims", "resourceclaimtemplates", "pods", "events"} {
				assert.Equal(t, []string{tc.lists}, listed[kind], kind)
			}
			assert.Equal(t, []string{""}, listed["deviceclasses"], "cluster-scoped kinds are listed whole")
		})
	}
}

func TestNamespaceNarrowsCapacityTenantsOnly(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	prices := writeFile(t, "prices.json", `{"currency": "EUR", "perDeviceHour": {"gpu-whole": 2}}`)
	type doc struct {
		Classes []struct {
			Name      string `json:"name"`
			Exist     int    `json:"exist"`
			Allocated int    `json:"allocated"`
			Free      int    `json:"free"`
		} `json:"classes"`
		Tenants []struct {
			Namespace string `json:"namespace"`
			Allocated int    `json:"allocated"`
			Pending   int    `json:"pending"`
		} `json:"tenants"`
		TenantCosts []struct {
			Tenant string `json:"tenant"`
		} `json:"tenantCosts"`
	}
	decode := func(r result) doc {
		t.Helper()
		require.Equal(t, ExitOK, r.code, r.stderr)
		var d doc
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
		return d
	}

	all := decode(run(t, tenantsCluster(), "capacity", "--kubeconfig", kc, "-o", "json", "--prices", prices))
	require.Len(t, all.Tenants, 2)
	require.Len(t, all.TenantCosts, 2)

	r := run(t, tenantsCluster(), "capacity", "--kubeconfig", kc, "-o", "json", "--prices", prices, "-n", naming.Namespace("legal-ai"))
	legal := decode(r)
	require.Len(t, legal.Tenants, 1)
	assert.Equal(t, naming.Namespace("legal-ai"), legal.Tenants[0].Namespace)
	assert.Equal(t, 1, legal.Tenants[0].Pending)
	require.Len(t, legal.TenantCosts, 1, "the costs are those of the rows kept")
	assert.Equal(t, "legal-ai", legal.TenantCosts[0].Tenant)
	// research-ai's GPU is not free to legal-ai: the class counts every namespace's claims.
	require.Len(t, legal.Classes, 1)
	assert.Equal(t, all.Classes, legal.Classes)
	assert.Equal(t, [3]int{2, 1, 1}, [3]int{legal.Classes[0].Exist, legal.Classes[0].Allocated, legal.Classes[0].Free})
	assert.Equal(t, []string{""}, namespacesListed(r)["resourceclaims"], "claims are listed in every namespace")
}

func TestPluginName(t *testing.T) {
	cases := []struct {
		binary string
		cmd    string
	}{
		{"gpu-tenancy", "gpu-tenancy"},
		{PluginName, "kubectl gpu-tenancy"},
	}
	for _, tc := range cases {
		t.Run(tc.binary, func(t *testing.T) {
			r := runAs(t, tc.binary, nil, "help")
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "Usage:\n  "+tc.cmd+" [command]\n")
			assert.Contains(t, r.stdout, "\n  "+tc.cmd+" capacity --stack gke-dev\n")
			assert.Contains(t, r.stdout, `Use "`+tc.cmd+` [command] --help"`)

			r = runAs(t, tc.binary, nil, "pending", "--help")
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "Usage:\n  "+tc.cmd+" pending [flags]\n")

			r = runAs(t, tc.binary, nil, "audit", "--older-than", "1m")
			assert.Equal(t, ExitUsage, r.code)
			assert.Equal(t, "gpu-tenancy: unknown flag: --older-than; see `"+tc.cmd+" audit --help`\n", r.stderr)
		})
	}
	r := runAs(t, PluginName, nil, "help")
	assert.NotContains(t, r.stdout, "\n  gpu-tenancy ", "every usage and example line says kubectl gpu-tenancy")
}

func TestHelpComesFromTheFlags(t *testing.T) {
	cases := []struct {
		cmd    string
		has    []string
		hasNot []string
	}{
		{"capacity", []string{"--prices string", "-n, --namespace string", "--kubeconfig string", "--context string",
			"--request-timeout string", `(default "30s")`, "--stack string", "-o, --output string", "Exit codes: 0 fine, 1 findings"},
			[]string{"--older-than"}},
		{"pending", []string{"--older-than duration", "-n, --namespace string"}, []string{"--prices"}},
		{"audit", []string{"takes no --namespace", "--kubeconfig string"}, []string{"-n, --namespace", "--older-than", "--prices"}},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			r := run(t, nil, tc.cmd, "--help")
			require.Equal(t, ExitOK, r.code, r.stderr)
			for _, s := range tc.has {
				assert.Contains(t, r.stdout, s)
			}
			for _, s := range tc.hasNot {
				assert.NotContains(t, r.stdout, s)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	colours := writeFile(t, "colours", twoContexts)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"output formats", []string{"capacity", "-o", ""}, []string{"table", "json", "yaml"}},
		{"the kubeconfig's contexts", []string{"pending", "--kubeconfig", colours, "--context", ""}, []string{"blue", "green"}},
		{"commands", []string{"p"}, []string{"pending\tUnallocated device claims with tenant, classes, age and reason"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, append([]string{"__complete"}, tc.args...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			require.NotEmpty(t, lines)
			assert.Equal(t, tc.want, lines[:len(lines)-1], "the last line is cobra's directive")
		})
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := run(t, nil, "completion", shell)
		assert.Equal(t, ExitOK, r.code, shell)
		assert.Contains(t, r.stdout, "gpu-tenancy", shell)
	}
}
