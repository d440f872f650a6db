package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// The JSON documents of `gpu-tenancy` as docs/cli.md describes them, decoded independently of the CLI's own types
// so that a change to the documented shape fails here.
type (
	cliCapacity struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Classes    []struct {
			Name      string   `json:"name"`
			Tenants   []string `json:"tenants"`
			Exist     int      `json:"exist"`
			Allocated int      `json:"allocated"`
			Free      int      `json:"free"`
		} `json:"classes"`
		Tenants []struct {
			Tenant    string `json:"tenant"`
			Class     string `json:"class"`
			Granted   bool   `json:"granted"`
			Allocated int    `json:"allocated"`
			Requested *int64 `json:"requested"`
			Quota     *int64 `json:"quota"`
			Pending   int    `json:"pending"`
		} `json:"tenants"`
		Pools []struct {
			Pool         string `json:"pool"`
			PhysicalGPUs int    `json:"physicalGPUs"`
			Devices      int    `json:"devices"`
		} `json:"pools"`
		ServiceAddresses *struct {
			Ranges  []string `json:"ranges"`
			Size    int64    `json:"size"`
			Used    int64    `json:"used"`
			Free    int64    `json:"free"`
			Tenants []struct {
				Tenant string `json:"tenant"`
				Used   int64  `json:"used"`
				Quota  *int64 `json:"quota"`
			} `json:"tenants"`
		} `json:"serviceAddresses"`
	}
	cliPending struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Claims     []struct {
			Namespace  string   `json:"namespace"`
			Tenant     string   `json:"tenant"`
			Claim      string   `json:"claim"`
			Pods       []string `json:"pods"`
			Classes    []string `json:"classes"`
			AgeSeconds int64    `json:"ageSeconds"`
			Overdue    bool     `json:"overdue"`
			Reasons    []struct {
				Kind    string `json:"kind"`
				Message string `json:"message"`
				From    *struct {
					Object struct {
						Kind      string `json:"kind"`
						Namespace string `json:"namespace"`
						Name      string `json:"name"`
					} `json:"object"`
					ReportedBy     string `json:"reportedBy"`
					TenantWritable bool   `json:"tenantWritable"`
				} `json:"from"`
			} `json:"reasons"`
		} `json:"claims"`
	}
	cliAudit struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Scope      struct {
			Tenants   []string `json:"tenants"`
			VClusters int      `json:"vclusters"`
		} `json:"scope"`
		Findings []struct {
			Check  string `json:"check"`
			Tenant string `json:"tenant"`
			Object struct {
				Kind      string `json:"kind"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"object"`
			Fix string `json:"fix"`
		} `json:"findings"`
	}
)

// checkOperatorCLI runs the built `gpu-tenancy` binary against the local stack. It expects the state the quota and
// allocation checks leave: tenants legal-ai (gpu-whole, quota 3) and research-ai (gpu-slice, quota 2) on the
// simulated hardware; legal-ai holding whole-a and whole-b with pod whole-c waiting for a third whole GPU, and
// research-ai holding one MIG device through a claim template. It changes nothing it does not restore.
func checkOperatorCLI(t *testing.T, ctx context.Context) {
	const (
		legalTenant    = "legal-ai"
		researchTenant = "research-ai"
		wholeClass     = "gpu-whole"
		sliceClass     = "gpu-slice"
	)
	cli := cliJSON(ctx, buildCLI(t, ctx))

	t.Run("capacity counts the simulated hardware and the tenants' holdings", func(t *testing.T) {
		var rep cliCapacity
		code, stderr := cli(t, &rep, "capacity")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "gpu-tenancy.io/v1alpha1", rep.APIVersion)
		assert.Equal(t, "CapacityReport", rep.Kind)
		classes := map[string][3]int{}
		for _, c := range rep.Classes {
			classes[c.Name] = [3]int{c.Exist, c.Allocated, c.Free}
		}
		assert.Equal(t, [3]int{2, 2, 0}, classes[wholeClass], "gpu-whole: exist, allocated, free")
		assert.Equal(t, [3]int{7, 1, 6}, classes[sliceClass], "gpu-slice: exist, allocated, free")
		for _, u := range rep.Tenants {
			switch {
			case u.Tenant == legalTenant && u.Class == wholeClass:
				assert.True(t, u.Granted)
				assert.Equal(t, 2, u.Allocated)
				assert.Equal(t, 1, u.Pending, "whole-c")
				if assert.NotNil(t, u.Quota) && assert.NotNil(t, u.Requested) {
					assert.Equal(t, int64(3), *u.Quota)
					assert.Equal(t, int64(3), *u.Requested, "whole-a, whole-b and whole-c are requested")
				}
			case u.Tenant == researchTenant && u.Class == sliceClass:
				assert.True(t, u.Granted)
				assert.Equal(t, 1, u.Allocated)
				if assert.NotNil(t, u.Quota) {
					assert.Equal(t, int64(2), *u.Quota)
				}
			}
		}
		gpus, devices := 0, 0
		for _, p := range rep.Pools {
			gpus += p.PhysicalGPUs
			devices += p.Devices
		}
		assert.Equal(t, 3, gpus, "three physical A100s: two whole, one in seven MIG devices")
		assert.Equal(t, 9, devices)
		// The Service range every tenant shares, read from the API server's own ServiceCIDR and IPAddresses: each
		// tenant's vCluster Service holds one address, against the tenant's Service quota.
		sa := rep.ServiceAddresses
		require.NotNil(t, sa, "the control plane serves ServiceCIDRs")
		assert.Equal(t, []string{e2eServiceCIDR}, sa.Ranges)
		assert.Equal(t, int64(254), sa.Size)
		assert.Equal(t, sa.Size-sa.Used, sa.Free)
		held := map[string]int64{}
		for _, ts := range sa.Tenants {
			held[ts.Tenant] = ts.Used
			if assert.NotNil(t, ts.Quota, ts.Tenant) {
				assert.Equal(t, int64(20), *ts.Quota, ts.Tenant)
			}
		}
		assert.GreaterOrEqual(t, held[legalTenant], int64(1), "legal-ai's vCluster Service")
		assert.GreaterOrEqual(t, held[researchTenant], int64(1), "research-ai's vCluster Service")
		assert.Greater(t, sa.Used, held[legalTenant]+held[researchTenant], "the kubernetes Service is held outside them")
	})

	t.Run("pending shows whole-c with the scheduler's reason", func(t *testing.T) {
		ns := naming.Namespace(legalTenant)
		var message string
		var rep cliPending
		// Poll: the scheduler may retry the pod and rewrite its condition in between.
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pod, err := client.CoreV1().Pods(ns).Get(ctx, "whole-c", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			message = ""
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					message = c.Message
				}
			}
			rep = cliPending{}
			code, stderr := cli(t, &rep, "pending")
			require.Equal(t, 0, code, stderr)
			for _, c := range rep.Claims {
				if c.Namespace == ns && c.Claim == "whole-c" {
					for _, r := range c.Reasons {
						if message != "" && r.Kind == "Unschedulable" && strings.Contains(r.Message, message) {
							return c.AgeSeconds > 1, nil
						}
					}
				}
			}
			return false, nil
		})
		require.NoError(t, err, "whole-c with the scheduler's message %q in %+v", message, rep)
		assert.Equal(t, "PendingReport", rep.Kind)
		for _, c := range rep.Claims {
			if c.Claim == "whole-c" {
				assert.Equal(t, legalTenant, c.Tenant)
				assert.Equal(t, []string{wholeClass}, c.Classes)
				assert.Equal(t, []string{"whole-c"}, c.Pods)
			}
		}

		code, stderr := cli(t, &rep, "pending", "--older-than", "1s")
		assert.Equal(t, 1, code, "a claim older than --older-than fails the run")
		assert.Contains(t, stderr, "waited longer than 1s")
		code, _ = cli(t, &rep, "pending", "--older-than", "24h")
		assert.Equal(t, 0, code)
	})

	t.Run("audit reports a deleted limit range until it is restored", func(t *testing.T) {
		ns := naming.Namespace(researchTenant)
		limitRanges := client.CoreV1().LimitRanges(ns)
		missing := func(rep cliAudit) bool {
			for _, f := range rep.Findings {
				if f.Check == "LimitRangeMissing" && f.Object.Namespace == ns && f.Object.Name == naming.ContainerDefaults {
					return f.Tenant == researchTenant && f.Fix != ""
				}
			}
			return false
		}
		var rep cliAudit
		cli(t, &rep, "audit")
		assert.Equal(t, "gpu-tenancy.io/v1alpha3", rep.APIVersion, "docs/cli.md")
		assert.Equal(t, "AuditReport", rep.Kind)
		require.False(t, missing(rep), "the stack's limit range is in place: %+v", rep.Findings)
		// Each tenant's vCluster config Secret is read, hashes to its StatefulSet's pin as the chart rendered them (the
		// provider's Helm), and syncs only its tenant's DeviceClasses.
		assert.Equal(t, []string{legalTenant, researchTenant}, rep.Scope.Tenants)
		assert.Equal(t, 2, rep.Scope.VClusters, "the vCluster config of each tenant")
		for _, f := range rep.Findings {
			assert.False(t, strings.HasPrefix(f.Check, "VCluster"), "vCluster finding on the stack as deployed: %+v", f)
		}

		saved, err := limitRanges.Get(ctx, naming.ContainerDefaults, metav1.GetOptions{})
		require.NoError(t, err)
		restore := &corev1.LimitRange{
			ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Namespace: saved.Namespace, Labels: saved.Labels, Annotations: saved.Annotations},
			Spec:       saved.Spec,
		}
		require.NoError(t, limitRanges.Delete(ctx, naming.ContainerDefaults, metav1.DeleteOptions{}))
		restored := false
		t.Cleanup(func() {
			if !restored {
				_, err := limitRanges.Create(context.Background(), restore, metav1.CreateOptions{})
				assert.NoError(t, err, "restoring the limit range")
			}
		})

		rep = cliAudit{}
		code, stderr := cli(t, &rep, "audit")
		assert.Equal(t, 1, code, "a finding fails the run")
		assert.Contains(t, stderr, "audit:")
		assert.True(t, missing(rep), "LimitRangeMissing for %s in %+v", ns, rep.Findings)

		_, err = limitRanges.Create(ctx, restore, metav1.CreateOptions{})
		require.NoError(t, err)
		restored = true
		rep = cliAudit{}
		cli(t, &rep, "audit")
		assert.False(t, missing(rep), "restored: %+v", rep.Findings)
	})

	t.Run("audit reads a vCluster config that syncs every DeviceClass, and no decoy", func(t *testing.T) {
		// legal-ai's own config rewritten without its DeviceClass selector, as its syncer may; and a decoy beside it,
		// labelled as the chart labels its configs, which the audit must not read (it reads each tenant's own by name).
		ns := naming.Namespace(legalTenant)
		secrets := client.CoreV1().Secrets(ns)
		own, err := secrets.Get(ctx, vcluster.ConfigSecretPrefix+legalTenant, metav1.GetOptions{})
		require.NoError(t, err)
		var config map[string]any
		require.NoError(t, yaml.Unmarshal(own.Data[vcluster.ConfigSecretKey], &config))
		classes, ok := lookupMap(config, "sync", "fromHost", "deviceClasses")
		require.True(t, ok, "the config of %s syncs DeviceClasses: %v", legalTenant, config)
		require.Contains(t, classes, "selector")
		delete(classes, "selector")
		raw, err := yaml.Marshal(config)
		require.NoError(t, err)
		rewritten := own.DeepCopy()
		rewritten.Data[vcluster.ConfigSecretKey] = raw
		_, err = secrets.Update(ctx, rewritten, metav1.UpdateOptions{})
		require.NoError(t, err)
		restored := false
		restore := func() {
			now, err := secrets.Get(context.Background(), own.Name, metav1.GetOptions{})
			require.NoError(t, err)
			now.Data = own.Data
			_, err = secrets.Update(context.Background(), now, metav1.UpdateOptions{})
			require.NoError(t, err)
			restored = true
		}
		t.Cleanup(func() {
			if !restored {
				restore()
			}
		})
		decoy := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: vcluster.ConfigSecretPrefix + legalTenant + "-copy", Namespace: ns,
				Labels: map[string]string{"app": own.Labels["app"], "release": legalTenant + "-copy"}},
			Data: map[string][]byte{vcluster.ConfigSecretKey: raw},
		}
		_, err = secrets.Create(ctx, decoy, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, secrets.Delete(context.Background(), decoy.Name, metav1.DeleteOptions{})) })

		var rep cliAudit
		code, _ := cli(t, &rep, "audit")
		assert.Equal(t, 1, code, "a finding fails the run")
		assert.Equal(t, 2, rep.Scope.VClusters, "each tenant's own config, not the decoy")
		var found []string
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Check, "VCluster") {
				found = append(found, f.Check+" "+f.Tenant+" "+f.Object.Kind+"/"+f.Object.Namespace+"/"+f.Object.Name)
			}
		}
		// It no longer hashes to the pin its StatefulSet carries.
		assert.Equal(t, []string{
			"VClusterConfigTampered " + legalTenant + " Secret/" + ns + "/" + own.Name,
			"VClusterSyncsAllDeviceClasses " + legalTenant + " Secret/" + ns + "/" + own.Name,
		}, found)

		restore()
		rep = cliAudit{}
		cli(t, &rep, "audit")
		for _, f := range rep.Findings {
			assert.False(t, strings.HasPrefix(f.Check, "VCluster"), "restored: %+v", f)
		}
	})
}

// buildCLI builds `gpu-tenancy` from this tree and returns the binary's path.
func buildCLI(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpu-tenancy")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gpu-tenancy")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the CLI: %s", out)
	return bin
}

// runCLI runs the built CLI against the local cluster and returns what it printed and its exit code.
func runCLI(t *testing.T, ctx context.Context, bin string, args ...string) (stdout []byte, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "running gpu-tenancy %v", args)
	}
	return out.Bytes(), errOut.String(), cmd.ProcessState.ExitCode()
}

// cliJSON runs the built CLI with -o json and decodes its document into into.
func cliJSON(ctx context.Context, bin string) func(t *testing.T, into any, args ...string) (code int, stderr string) {
	return func(t *testing.T, into any, args ...string) (int, string) {
		t.Helper()
		stdout, stderr, code := runCLI(t, ctx, bin, append(args, "-o", "json")...)
		require.NoError(t, json.Unmarshal(stdout, into), "gpu-tenancy %v printed %q (stderr %q)", args, stdout, stderr)
		return code, stderr
	}
}

// lookupMap follows a path of keys through nested maps to a map.
func lookupMap(m map[string]any, path ...string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}
