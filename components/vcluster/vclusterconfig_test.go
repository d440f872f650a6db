package vcluster

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vclusterConfigTool loads values with vCluster's own config code (scripts/tools/k8s-0.36).
const vclusterConfigTool = "vcluster-config"

// effectiveConfig is what vCluster computes from values: the chart's defaults under them, decoded strictly,
// validated and defaulted. It fails the test with vCluster's own error when vCluster would refuse them.
func effectiveConfig(t *testing.T, name string, values map[string]any) map[string]any {
	t.Helper()
	bin, err := toolbin.Path(vclusterConfigTool)
	if err != nil && testing.Short() {
		t.Skip(err)
	}
	require.NoError(t, err)
	raw, err := json.Marshal(values)
	require.NoError(t, err)
	cmd := exec.Command(bin, "-name", name)
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "vCluster refuses the values: %s", stderr.String())
	var got struct {
		Config     map[string]any `json:"config"`
		ProFeature bool           `json:"proFeature"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	got.Config["proFeature"] = got.ProFeature
	return got.Config
}

// lookup follows a dotted path through decoded JSON; ok is false when a key is missing.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// widening are the values switches that would widen the syncer's host rights or change what reaches the host
// (docs/threat-model.md, "Values switches pinned off"), with the value each must keep.
var widening = map[string]any{
	"sync.toHost.namespaces.enabled":                 false,
	"sync.toHost.networkPolicies.enabled":            false,
	"sync.toHost.serviceAccounts.enabled":            false,
	"sync.fromHost.priorityClasses.enabled":          false,
	"sync.toHost.persistentVolumes.enabled":          false,
	"sync.toHost.storageClasses.enabled":             false,
	"sync.toHost.ingresses.enabled":                  false,
	"sync.toHost.podDisruptionBudgets.enabled":       false,
	"sync.fromHost.nodes.enabled":                    false,
	"controlPlane.distro.k8s.scheduler.enabled":      false,
	"controlPlane.advanced.virtualScheduler.enabled": false,
	"sync.toHost.pods.runtimeClassName":              "",
	"sync.toHost.pods.priorityClassName":             "",
	"integrations.kubeVirt.enabled":                  false,
	"integrations.externalSecrets.enabled":           false,
	"integrations.certManager.enabled":               false,
	"integrations.istio.enabled":                     false,
	"integrations.metricsServer.enabled":             false,
	"privateNodes.enabled":                           false,
	"experimental.deploy.host.manifests":             "",
	"experimental.deploy.host.manifestsTemplate":     "",
}

// emptyOrAbsent are lists and maps that must stay empty: each entry would add RBAC rules or host objects.
var emptyOrAbsent = []string{
	"rbac.role.extraRules", "rbac.role.overwriteRules", "rbac.clusterRole.extraRules", "rbac.clusterRole.overwriteRules",
	"networking.replicateServices.fromHost", "sync.toHost.customResources", "sync.fromHost.customResources", "plugins",
}

func TestVClusterAcceptsTheValuesAndKeepsEveryWideningSwitchOff(t *testing.T) {
	for _, tc := range valueCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := effectiveConfig(t, tc.args.Tenant, releasedValues(t, tc.args))
			for path, want := range widening {
				got, ok := lookup(cfg, path)
				if !ok {
					got = want // an absent switch keeps its zero value, which is the off it must be
				}
				assert.Equal(t, want, got, "%s widens the syncer's host rights", path)
			}
			for _, path := range emptyOrAbsent {
				if got, ok := lookup(cfg, path); ok && got != nil {
					assert.Empty(t, got, "%s adds rules or host objects", path)
				}
			}
			claims := tc.args.GPUAccess.SyncsClaims()
			for _, path := range []string{"sync.toHost.resourceClaims.enabled", "sync.toHost.resourceClaimTemplates.enabled",
				"sync.fromHost.deviceClasses.enabled"} {
				got, _ := lookup(cfg, path)
				assert.Equal(t, claims, got == true, "%s: DRA sync is on exactly when the tenant's claims are synced (gpuAccess %q)",
					path, tc.args.GPUAccess)
			}
			// Widening, and bounded on the host by the priority-class guard (docs/threat-model.md): a non-preempting
			// pod keeps its class on the host only through it.
			got, _ := lookup(cfg, "sync.toHost.priorityClasses.enabled")
			assert.Equal(t, true, got, "sync.toHost.priorityClasses.enabled")
			assert.Equal(t, claims, cfg["proFeature"], "DRA sync is vCluster Pro, and nothing else the values set is")
			if claims {
				selector, _ := lookup(cfg, "sync.fromHost.deviceClasses.selector.matchLabels")
				assert.Equal(t, map[string]any{tc.args.ClassSelectorLabel: "true"}, selector, "only the tenant's own classes")
				return
			}
			_, platform := lookup(cfg, "platform.apiKey.secretName")
			assert.False(t, platform, "no platform connection without claim sync")
			repo, _ := lookup(cfg, "controlPlane.statefulSet.image.repository")
			assert.Contains(t, repo, "vcluster-oss", "the open-source syncer")
			if len(tc.args.OfferedClasses) > 0 {
				manifests, _ := lookup(cfg, "experimental.deploy.vcluster.manifests")
				assert.Contains(t, manifests, "name: "+OfferedConfigMap, "the tenant's view of its classes, deployed inside")
				assert.Contains(t, manifests, "name: gpu-tenancy.io/a100")
				assert.Contains(t, manifests, "quota: 2", "the tenant's quota of the class")
			}
		})
	}
}

func TestVClusterReadsTheSettingsAsTheProgramMeansThem(t *testing.T) {
	args := tenantArgs(func(a *VirtualClusterArgs) {
		a.PodSecurity = "restricted"
		a.GPUTolerations = []cluster.Taint{cluster.GPUTaint}
		a.Dedicated = true
		a.Platform = &PlatformConnection{Host: "platform.example.com", Project: DefaultProject}
		a.KubeconfigServer = "https://team-a.vc.example.com"
	})
	values := releasedValues(t, args)
	cfg := effectiveConfig(t, args.Tenant, values)
	for path, want := range map[string]any{
		"policies.podSecurityStandard": "restricted",
		"platform.apiKey.secretName":   APIKeySecretName,
		"exportKubeConfig.server":      "https://team-a.vc.example.com",
		"sync.toHost.pods.enforceTolerations": []any{enforcedToleration(cluster.GPUTaint),
			enforcedToleration(cluster.DedicatedTaint(args.Tenant))},
		// The pod syncer sets these labels as every host pod's node selector (pkg/controllers/resources/pods/syncer.go).
		"sync.fromHost.nodes.selector.labels": map[string]any{naming.DedicatedNodeKey: args.Tenant},
	} {
		got, ok := lookup(cfg, path)
		assert.True(t, ok, "%s is not in vCluster's config", path)
		assert.Equal(t, want, got, path)
	}
	// vCluster's default is true (a host Service per node the tenant's pods use, against the Service quota): the values
	// say false, vCluster reads it so (it leaves false out of the config it prints), and without the value it reads true.
	const byIP = "networking.advanced.proxyKubelets.byIP"
	sent, ok := lookup(values, byIP)
	assert.True(t, ok && sent == false, "%s is false in the values: %v", byIP, sent)
	read, _ := lookup(cfg, byIP)
	assert.NotEqual(t, true, read, byIP)
	delete(values["networking"].(map[string]any)["advanced"].(map[string]any)["proxyKubelets"].(map[string]any), "byIP")
	unset, _ := lookup(effectiveConfig(t, args.Tenant, values), byIP)
	assert.Equal(t, true, unset, "%s without the value: vCluster's default", byIP)
	namespace, _ := lookup(cfg, "platform.apiKey.namespace")
	assert.Empty(t, namespace, "the key is read from the vCluster's own namespace")
}

func TestVClusterRefusesWhatItWouldMisread(t *testing.T) {
	bin, err := toolbin.Path(vclusterConfigTool)
	if err != nil && testing.Short() {
		t.Skip(err)
	}
	require.NoError(t, err)
	for name, values := range map[string]string{
		"a misspelt key":              `{"sync": {"toHost": {"resourceClaim": {"enabled": true}}}}`,
		"an unknown security level":   `{"policies": {"podSecurityStandard": "strict"}}`,
		"a toleration it cannot read": `{"sync": {"toHost": {"pods": {"enforceTolerations": ["nvidia.com/gpu:NoSchedule:x"]}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, "-name", "team-a")
			cmd.Stdin = strings.NewReader(values)
			assert.Error(t, cmd.Run(), "vCluster must refuse %s", values)
		})
	}
}

func TestVClusterRunsTheImagesGiven(t *testing.T) {
	const digest = "@sha256:3743b40baa49a6675f0e25eebc8da6955fc1fcc40ccbf6100a9cedd922a1e398"
	args := tenantArgs(func(a *VirtualClusterArgs) {
		a.PodSecurity = "restricted"
		a.Images = Images{ControlPlane: "registry.example.com:5000/mirror/vcluster-oss:0.36.1" + digest,
			Kubernetes: "registry.example.com:5000/mirror/kubernetes:v1.36.3", CoreDNS: "coredns/coredns:1.14.2" + digest}
	})
	cfg := effectiveConfig(t, args.Tenant, releasedValues(t, args))
	for path, want := range map[string]any{
		"controlPlane.statefulSet.image.registry":   "registry.example.com:5000",
		"controlPlane.statefulSet.image.repository": "mirror/vcluster-oss",
		"controlPlane.statefulSet.image.tag":        "0.36.1" + digest,
		"controlPlane.distro.k8s.image.registry":    "registry.example.com:5000",
		"controlPlane.distro.k8s.image.repository":  "mirror/kubernetes",
		"controlPlane.distro.k8s.image.tag":         "v1.36.3",
		// Docker Hub's short names are written out, so the mirror a node's runtime is set up with never guesses.
		"controlPlane.coredns.deployment.image": "docker.io/coredns/coredns:1.14.2" + digest,
		// The restricted init container context stays beside the image.
		"controlPlane.distro.k8s.securityContext.runAsNonRoot": true,
	} {
		got, ok := lookup(cfg, path)
		assert.True(t, ok, "%s is not in vCluster's config", path)
		assert.Equal(t, want, got, path)
	}
}
