package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/kube"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// kubeconfigFor writes a kubeconfig for server; the fake clientset stands in for the server unless a test dials it.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(kubeconfigYAML(server)), 0o600))
	return path
}

func kubeconfigYAML(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
}

type result struct {
	code           int
	stdout, stderr string
	target         *kube.Target
	client         *fake.Clientset
}

// run runs the CLI against a fake clientset holding objs.
func run(t *testing.T, objs []runtime.Object, args ...string) result {
	t.Helper()
	return runAs(t, "gpu-tenancy", objs, args...)
}

// runAs runs the CLI as the binary name (the base of os.Args[0]).
func runAs(t *testing.T, name string, objs []runtime.Object, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var res result
	app := &App{
		Stdout: &stdout, Stderr: &stderr, Name: name, Now: func() time.Time { return now },
		Connect: func(tg *kube.Target) (kubernetes.Interface, error) {
			res.target = tg
			res.client = fake.NewClientset(objs...)
			return res.client, nil
		},
	}
	res.code = app.Run(context.Background(), args)
	res.stdout, res.stderr = stdout.String(), stderr.String()
	return res
}

func tenantNS(tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: naming.Namespace(tenant), Labels: map[string]string{
		naming.TenantNamespaceLabel: tenant, naming.PodSecurityEnforceLabel: "baseline",
	}}}
}

func pendingClaim(age time.Duration) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.Namespace("legal-ai"), Name: "whole-c", CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu-whole"},
		}}}},
	}
}

func TestPendingOlderThan(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	objs := []runtime.Object{tenantNS("legal-ai"), pendingClaim(20 * time.Minute)}
	cases := []struct {
		name      string
		olderThan string
		code      int
		stderr    string
	}{
		{"a claim older than the threshold exits 1 and says so", "15m", ExitFindings,
			"gpu-tenancy: 1 pending claim(s) waited longer than 15m0s; the oldest, vcluster-legal-ai/whole-c, for 20m0s\n"},
		{"claims younger than the threshold exit 0", "30m", ExitOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, objs, "pending", "--kubeconfig", kc, "-o", "json", "--older-than", tc.olderThan)
			assert.Equal(t, tc.code, r.code)
			assert.Equal(t, tc.stderr, r.stderr)
			var doc struct {
				Claims []struct {
					Claim   string `json:"claim"`
					Overdue bool   `json:"overdue"`
				} `json:"claims"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
			require.Len(t, doc.Claims, 1)
			assert.Equal(t, tc.code == ExitFindings, doc.Claims[0].Overdue)
		})
	}
}

func TestAuditExitCode(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	r := run(t, []runtime.Object{tenantNS("legal-ai")}, "audit", "--kubeconfig", kc)
	assert.Equal(t, ExitFindings, r.code)
	assert.Equal(t, "gpu-tenancy: audit: 4 finding(s)\n", r.stderr)
	for _, check := range []string{"QuotaMissing", "LimitRangeMissing", "EntitlementBindingMissing", "EntitlementGrantsUnlabelled"} {
		assert.Contains(t, r.stdout, check)
	}

	r = run(t, nil, "audit", "--kubeconfig", kc)
	assert.Equal(t, ExitOK, r.code)
	assert.Empty(t, r.stderr)
}

func TestUnreachableCluster(t *testing.T) {
	// Nothing listens on port 1: the connection is refused at once.
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	code := New(&stdout, &stderr).Run(context.Background(), []string{"capacity", "--kubeconfig", kc, "--request-timeout", "5s"})
	assert.Equal(t, ExitCluster, code)
	assert.Empty(t, stdout.String())
	line := stderr.String()
	assert.Equal(t, 1, strings.Count(line, "\n"), "one line: %q", line)
	assert.True(t, strings.HasPrefix(line, "gpu-tenancy: cannot read the cluster at https://127.0.0.1:1 (kubeconfig "+kc+" (--kubeconfig)): listing namespaces:"), line)
	assert.Contains(t, line, "connection refused")
	assert.NotContains(t, line, "goroutine")
}

func TestUsageErrors(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	noCurrent := writeFile(t, "kubeconfig", strings.Replace(kubeconfigYAML("https://127.0.0.1:1"), "current-context: c\n", "", 1))
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no command", nil, "Usage:"},
		{"an unknown command", []string{"quota"}, `gpu-tenancy: unknown command "quota"`},
		{"an unknown output format", []string{"capacity", "--kubeconfig", kc, "-o", "xml"}, `output format "xml" is not one of table, json, yaml`},
		{"--older-than on another command", []string{"audit", "--kubeconfig", kc, "--older-than", "1m"}, "unknown flag: --older-than; see `gpu-tenancy audit --help`"},
		{"a negative --older-than", []string{"pending", "--kubeconfig", kc, "--older-than", "-1m"}, "--older-than -1m0s is negative"},
		{"--kubeconfig and --stack together", []string{"capacity", "--kubeconfig", kc, "--stack", "dev"}, "--kubeconfig and --stack exclude each other"},
		{"a --context the kubeconfig lacks", []string{"capacity", "--kubeconfig", kc, "--context", "nope"},
			"loading kubeconfig " + kc + " (--kubeconfig), context nope (--context): context \"nope\" does not exist"},
		{"a kubeconfig without a current context", []string{"capacity", "--kubeconfig", noCurrent},
			"kubeconfig " + noCurrent + " (--kubeconfig) has no current context: pass --context NAME"},
		{"a bad --request-timeout", []string{"capacity", "--kubeconfig", kc, "--request-timeout", "soon"}, `--request-timeout "soon": want a duration`},
		{"a negative --request-timeout", []string{"capacity", "--kubeconfig", kc, "--request-timeout", "-1s"}, `--request-timeout "-1s": want a duration`},
		{"--namespace on audit, which it cannot narrow", []string{"audit", "--kubeconfig", kc, "--namespace", "x"}, "unknown flag: --namespace"},
		{"-n on audit", []string{"audit", "--kubeconfig", kc, "-n", "x"}, "unknown shorthand flag: 'n' in -n"},
		{"a --namespace that is no namespace name", []string{"pending", "--kubeconfig", kc, "-n", "Legal_AI"}, `--namespace "Legal_AI": a lowercase RFC 1123 label`},
		{"a long flag with one dash", []string{"capacity", "-kubeconfig", kc}, "long flags take two dashes, --kubeconfig"},
		{"a kubeconfig that does not exist", []string{"capacity", "--kubeconfig", "/nonexistent/kubeconfig"}, "loading kubeconfig /nonexistent/kubeconfig (--kubeconfig)"},
		{"a stray argument", []string{"capacity", "--kubeconfig", kc, "extra"}, `capacity takes no arguments, got "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, tc.args...)
			assert.Equal(t, ExitUsage, r.code)
			assert.Contains(t, r.stderr, tc.stderr)
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"pending", "-h"}} {
		r := run(t, nil, args...)
		assert.Equal(t, ExitOK, r.code, args)
		assert.Contains(t, r.stdout, "gpu-tenancy pending", args)
	}
}

// TestStackKubeconfig puts a stand-in pulumi CLI on PATH that prints a kubeconfig for the stack it is asked about.
func TestStackKubeconfig(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\n" +
		`[ "$*" = "stack output kubeconfig --show-secrets --stack dev" ] || { echo "error: no stack named '$6' found" >&2; exit 255; }` + "\n" +
		"cat <<'EOF'\n" + kubeconfigYAML("https://dev.example:6443") + "EOF\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	r := run(t, nil, "capacity", "--stack", "dev", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "https://dev.example:6443", r.target.Server())
	assert.Equal(t, "kubeconfig output of Pulumi stack dev (--stack)", r.target.From)

	r = run(t, nil, "capacity", "--stack", "prod")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "gpu-tenancy: loading kubeconfig output of Pulumi stack prod (--stack): pulumi stack output kubeconfig --stack prod: error: no stack named 'prod' found\n", r.stderr)
}

func TestNoKubeconfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	r := run(t, nil, "capacity")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "gpu-tenancy: no kubeconfig: pass --kubeconfig FILE or --stack NAME, or set KUBECONFIG\n", r.stderr)

	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	r = run(t, nil, "capacity")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "gpu-tenancy: $KUBECONFIG (/nonexistent/kubeconfig) holds no usable kubeconfig: missing files or no current context\n", r.stderr)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// pricedCluster is legal-ai holding one allocated whole GPU.
func pricedCluster() []runtime.Object {
	whole := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-whole", Labels: map[string]string{
		naming.ManagedByLabel: naming.ManagedBy, naming.ClassTenantLabel("legal-ai"): "true",
	}}}
	held := pendingClaim(time.Minute)
	held.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: naming.Driver, Pool: "node-0", Device: "gpu-0"}},
	}}
	return []runtime.Object{tenantNS("legal-ai"), whole, held}
}

func TestCapacityPrices(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	stackFile := writeFile(t, "Pulumi.dev.yaml", "config:\n  gpu-tenancy:cloud: gke\n  gpu-tenancy:prices:\n    currency: USD\n    perDeviceHour:\n      gpu-whole: 2.93\n")
	blockFile := writeFile(t, "prices.json", `{"currency": "EUR", "perDeviceHour": {"gpu-whole": 0.75}}`)
	for _, tc := range []struct {
		name     string
		file     string
		currency string
		cost     float64
	}{
		{"from a stack file's gpu-tenancy:prices", stackFile, "USD", 2.93},
		{"from a file holding the prices block", blockFile, "EUR", 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, pricedCluster(), "capacity", "--kubeconfig", kc, "--prices", tc.file, "-o", "json")
			require.Equal(t, ExitOK, r.code, r.stderr)
			var doc struct {
				Currency    string `json:"currency"`
				TenantCosts []struct {
					Tenant      string  `json:"tenant"`
					CostPerHour float64 `json:"costPerHour"`
				} `json:"tenantCosts"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
			assert.Equal(t, tc.currency, doc.Currency)
			require.Len(t, doc.TenantCosts, 1)
			assert.Equal(t, "legal-ai", doc.TenantCosts[0].Tenant)
			assert.Equal(t, tc.cost, doc.TenantCosts[0].CostPerHour)
		})
	}
}

func TestCapacityPricesErrors(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"a file that does not exist", []string{"capacity", "--kubeconfig", kc, "--prices", "/nonexistent/prices.yaml"},
			"--prices: open /nonexistent/prices.yaml"},
		{"a stack file without prices", []string{"capacity", "--kubeconfig", kc, "--prices", writeFile(t, "Pulumi.dev.yaml", "config:\n  gpu-tenancy:cloud: gke\n")},
			"the stack file sets no gpu-tenancy:prices"},
		{"a price that is not positive, named by its key", []string{"capacity", "--kubeconfig", kc, "--prices",
			writeFile(t, "prices.yaml", "currency: EUR\nperDeviceHour:\n  gpu-whole: 0\n")},
			"prices.perDeviceHour[gpu-whole]: Invalid value: 0: must be a positive price per device-hour"},
		{"prices without a currency", []string{"capacity", "--kubeconfig", kc, "--prices",
			writeFile(t, "prices.yaml", "perDeviceHour:\n  gpu-whole: 2\n")},
			"prices.currency: Required value"},
		{"a misspelt key", []string{"capacity", "--kubeconfig", kc, "--prices", writeFile(t, "prices.yaml", "currency: EUR\nperHour:\n  gpu-whole: 2\n")},
			`unknown field "perHour"`},
		{"an empty file", []string{"capacity", "--kubeconfig", kc, "--prices", writeFile(t, "prices.yaml", "")},
			"prices gives no price"},
		{"--prices on another command", []string{"pending", "--kubeconfig", kc, "--prices", "x"},
			"unknown flag: --prices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, tc.args...)
			assert.Equal(t, ExitUsage, r.code)
			assert.Contains(t, r.stderr, tc.stderr)
		})
	}
}
