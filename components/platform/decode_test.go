package platform

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testConfig is a stack config under construction: top-level keys (without namespace) to Go values.
type testConfig map[string]any

func (tc testConfig) source(secrets ...string) Source {
	values, full := tc.stackConfig(secrets...)
	return mapSource{values: values, secrets: full}
}

// stackConfig is the config as a program receives it: full keys to raw values, and the full keys of the secrets.
func (tc testConfig) stackConfig(secrets ...string) (map[string]string, []string) {
	values := map[string]string{}
	for k, v := range tc {
		if s, ok := v.(string); ok {
			values[ConfigNamespace+":"+k] = s
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		values[ConfigNamespace+":"+k] = string(raw)
	}
	var full []string
	for _, s := range secrets {
		full = append(full, ConfigNamespace+":"+s)
	}
	return values, full
}

type obj = map[string]any
type list = []any

func seedClassesAndTenants(tc testConfig) testConfig {
	tc["gpuClasses"] = list{
		obj{"name": "gpu-whole", "device": "gpu", "product": "A100"},
		obj{"name": "gpu-slice", "device": "mig", "migProfile": "1g.5gb", "product": "A100"},
	}
	tc["tenants"] = list{
		obj{"name": "legal-ai", "classes": list{"gpu-whole"}, "gpuQuota": obj{"gpu-whole": 2}},
		obj{"name": "research-ai", "classes": list{"gpu-slice"}, "gpuQuota": obj{"gpu-slice": 4}},
	}
	tc["platformAdminPassword"] = "s3cret"
	tc["platform"] = obj{"host": "platform.example.com"}
	return tc
}

func goodGKE() testConfig {
	return seedClassesAndTenants(testConfig{
		"cloud": "gke",
		"gke":   obj{"project": "gpu-tenancy-dev", "zone": "us-central1-a"},
		"gpuPools": list{
			obj{"name": "a100-whole", "machineType": "a2-highgpu-1g", "accelerator": "nvidia-tesla-a100"},
			obj{"name": "a100-mig", "machineType": "a2-highgpu-1g", "accelerator": "nvidia-tesla-a100", "partition": "1g.5gb"},
		},
	})
}

func goodScaleway() testConfig {
	tc := seedClassesAndTenants(testConfig{
		"cloud":    "scaleway",
		"scaleway": obj{"zone": "fr-par-2"},
		"gpuPools": list{
			obj{"name": "l4", "nodeType": "L4-1-24G"},
			obj{"name": "h100-mig", "nodeType": "H100-1-80G", "partition": "1g.10gb"},
		},
	})
	tc["gpuClasses"] = list{
		obj{"name": "gpu-whole", "device": "gpu", "product": "L4"},
		obj{"name": "gpu-slice", "device": "mig", "migProfile": "1g.10gb", "product": "H100"},
	}
	return tc
}

func goodExisting() testConfig {
	return seedClassesAndTenants(testConfig{
		"cloud":    "existing",
		"existing": obj{"kubeconfigPath": "/tmp/kubeconfig"},
		"gpuPools": list{
			obj{"name": "a100-whole", "model": "a100-40gb"},
			obj{"name": "a100-mig", "model": "a100-40gb", "partition": "1g.5gb"},
		},
		"platform": obj{"enabled": false},
	})
}

// at returns the element of a list-valued config entry, for mutation.
func at(tc testConfig, key string, i int) obj { return tc[key].(list)[i].(obj) }

func TestGoodConfigsLoad(t *testing.T) {
	for name, tc := range map[string]testConfig{"gke": goodGKE(), "scaleway": goodScaleway(), "existing": goodExisting()} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
			require.NoError(t, err)
			assert.EqualValues(t, name, cfg.Cloud)
		})
	}
}

func TestDefaultsApply(t *testing.T) {
	cfg, err := Load(goodGKE().source("platformAdminPassword"), ConfigKeys)
	require.NoError(t, err)
	assert.Equal(t, "1.35", cfg.GKE.KubernetesVersion)
	assert.Equal(t, "REGULAR", cfg.GKE.ReleaseChannel)
	assert.True(t, *cfg.GKE.DeletionProtection)
	assert.Equal(t, 0, cfg.GKE.GPUPools[0].Min(), "GPU pools scale to zero by default")
	assert.Equal(t, 1, cfg.GKE.GPUPools[0].Max())
	assert.Equal(t, "16", cfg.Tenants[0].CPUQuota)
	assert.Equal(t, vcluster.DefaultVirtualClusterChart, cfg.VCluster.Chart)
	assert.True(t, cfg.DRAEnabled())
	assert.True(t, cfg.PlatformEnabled())

	scw, err := Load(goodScaleway().source("platformAdminPassword"), ConfigKeys)
	require.NoError(t, err)
	assert.Equal(t, "cilium", scw.Scaleway.CNI)
	assert.Equal(t, "1.35", scw.Scaleway.KubernetesVersion)
}

func TestExampleStacksLoad(t *testing.T) {
	files, err := filepath.Glob("../../stacks/Pulumi.*.yaml")
	require.NoError(t, err)
	require.Len(t, files, 3, "gke-dev, scw-dev and local")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := ReadStackFile(f)
			require.NoError(t, err)
			_, err = Load(sc.Source(), ConfigKeys)
			require.NoError(t, err)
		})
	}
}

func TestPricesDecode(t *testing.T) {
	tc := goodGKE()
	tc["prices"] = obj{"currency": "EUR", "perDeviceHour": obj{"gpu-whole": 2.93, "gpu-slice": 1}}
	cfg, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
	require.NoError(t, err)
	assert.Equal(t, rules.Prices{Currency: "EUR", PerDeviceHour: map[string]float64{"gpu-whole": 2.93, "gpu-slice": 1}}, cfg.Prices)
}

func TestStackPricesReachTheShowbackRules(t *testing.T) {
	rec, err := runStack(t, "scw-dev", nil)
	require.NoError(t, err)
	rule, err := rec.Get("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "monitoring-showback")
	require.NoError(t, err)
	var costs []string
	for _, r := range rule.Inputs["spec"].Mappable().(map[string]any)["groups"].([]any)[0].(map[string]any)["rules"].([]any) {
		r := r.(map[string]any)
		if r["record"] == rules.CostPerHour {
			costs = append(costs, r["labels"].(map[string]any)[rules.CurrencyLabel].(string)+" "+r["expr"].(string)[strings.LastIndex(r["expr"].(string), " ")+1:])
		}
	}
	assert.Equal(t, []string{"EUR 0.39", "EUR 0.75"}, costs, "gpu-slice then gpu-whole, at the stack's prices")
}

func TestReadStackFileKeepsSecretsOut(t *testing.T) {
	sc, err := ReadStackFile("../../stacks/Pulumi.gke-dev.yaml")
	require.NoError(t, err)
	assert.Equal(t, "gke-dev", sc.Stack)
	assert.Equal(t, []string{"gpu-tenancy:platformAdminPassword"}, sc.Secrets)
	assert.Equal(t, SecretPlaceholder, sc.Values["gpu-tenancy:platformAdminPassword"])
	assert.NotContains(t, sc.Values["gpu-tenancy:platformAdminPassword"], "v1:")
}

// badConfig is a stack config with one mistake, and the error that must name it.
type badConfig struct {
	name    string
	base    func() testConfig
	mutate  func(tc testConfig)
	secrets []string
	// wantPath is the key path the error must name; wantMsg a fragment of what it says is allowed.
	wantPath string
	wantMsg  string
}

// config is the stack config of the case.
func (c badConfig) config() testConfig {
	tc := c.base()
	c.mutate(tc)
	return tc
}

// secretKeys are the keys the case sets as secrets: platformAdminPassword when it names none.
func (c badConfig) secretKeys() []string {
	if c.secrets == nil {
		return []string{"platformAdminPassword"}
	}
	return c.secrets
}

// badConfigs is the project's table of bad configs: each is refused by Load with an error at its path, and by the
// program before it registers anything (TestBadConfigsRegisterNothing).
func badConfigs() []badConfig {
	return []badConfig{
		{"cloud missing", goodGKE, func(tc testConfig) { delete(tc, "cloud") }, nil,
			"gpu-tenancy:cloud", "gke, scaleway, existing"},
		{"cloud unknown", goodGKE, func(tc testConfig) { tc["cloud"] = "aws" }, nil,
			"gpu-tenancy:cloud", `"gke", "scaleway", "existing"`},
		{"unknown top-level key", goodGKE, func(tc testConfig) { tc["tenant"] = list{} }, nil,
			"gpu-tenancy:tenant", `"tenants"`},
		{"unknown nested key is a typo", goodGKE, func(tc testConfig) { tc["gke"].(obj)["zones"] = "us-central1-a" }, nil,
			"gpu-tenancy:gke.zones", `"zone"`},
		{"unknown key in a tenant", goodGKE, func(tc testConfig) { at(tc, "tenants", 1)["gpuQuotas"] = obj{} }, nil,
			"gpu-tenancy:tenants[1].gpuQuotas", `"gpuQuota"`},
		{"a block set as a secret", goodGKE, func(tc testConfig) {}, []string{"platformAdminPassword", "tenants"},
			"gpu-tenancy:tenants", "is set as a secret"},
		{"negative tenant groups", goodGKE, func(tc testConfig) { tc["tenantGroups"] = -1 }, nil,
			"gpu-tenancy:tenantGroups", "0 (one stack) or more"},
		{"gke without GPU pools", goodGKE, func(tc testConfig) { tc["gpuPools"] = list{} }, nil,
			"gpu-tenancy:gpuPools", "the NVIDIA DRA driver runs on GPU nodes"},
		{"wrong type", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["minNodes"] = "zero" }, nil,
			"gpu-tenancy:gpuPools[0].minNodes", "must be an integer"},
		{"list where an object belongs", goodGKE, func(tc testConfig) { tc["gke"] = list{"us-central1-a"} }, nil,
			"gpu-tenancy:gke", "must be an object"},
		{"gke project missing", goodGKE, func(tc testConfig) { delete(tc["gke"].(obj), "project") }, nil,
			"gpu-tenancy:gke.project", "GCP project id"},
		{"gke project malformed", goodGKE, func(tc testConfig) { tc["gke"].(obj)["project"] = "My_Project" }, nil,
			"gpu-tenancy:gke.project", "lowercase"},
		{"gke zone missing", goodGKE, func(tc testConfig) { delete(tc["gke"].(obj), "zone") }, nil,
			"gpu-tenancy:gke.zone", "us-central1-a"},
		{"gke zone is a region", goodGKE, func(tc testConfig) { tc["gke"].(obj)["zone"] = "us-central1" }, nil,
			"gpu-tenancy:gke.zone", "zone letter"},
		{"gke zone lacks the accelerator", goodGKE, func(tc testConfig) { tc["gke"].(obj)["zone"] = "europe-west1-b" }, nil,
			"gpu-tenancy:gpuPools[0].accelerator", "allowUnlistedZone: true"},
		{"gke version too old", goodGKE, func(tc testConfig) { tc["gke"].(obj)["kubernetesVersion"] = "1.33" }, nil,
			"gpu-tenancy:gke.kubernetesVersion", "1.35 or later"},
		{"gke 1.34, below the platform's floor", goodGKE, func(tc testConfig) { tc["gke"].(obj)["kubernetesVersion"] = "1.34" }, nil,
			"gpu-tenancy:gke.kubernetesVersion", "must be 1.35 or later; GKE supports"},
		{"gke version malformed", goodGKE, func(tc testConfig) { tc["gke"].(obj)["kubernetesVersion"] = "latest" }, nil,
			"gpu-tenancy:gke.kubernetesVersion", "such as 1.35"},
		{"gke release channel unknown", goodGKE, func(tc testConfig) { tc["gke"].(obj)["releaseChannel"] = "FAST" }, nil,
			"gpu-tenancy:gke.releaseChannel", `"REGULAR"`},
		{"gke system pool max below min", goodGKE, func(tc testConfig) {
			tc["gke"].(obj)["systemPool"] = obj{"minNodes": 3, "maxNodes": 2}
		}, nil, "gpu-tenancy:gke.systemPool.maxNodes", "at least 3"},
		{"gke accelerator unknown", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["accelerator"] = "nvidia-tesla-v100" }, nil,
			"gpu-tenancy:gpuPools[0].accelerator", `"nvidia-tesla-a100"`},
		{"gke machine type of another family", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["machineType"] = "a2-ultragpu-1g" }, nil,
			"gpu-tenancy:gpuPools[0].machineType", `"a2-highgpu-1g"`},
		{"gke gpu count disagrees with machine type", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["gpuCount"] = 2 }, nil,
			"gpu-tenancy:gpuPools[0].gpuCount", "must be 1"},
		{"gke partition not a profile of the GPU", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 1)["partition"] = "1g.10gb" }, nil,
			"gpu-tenancy:gpuPools[1].partition", `"1g.5gb"`},
		{"gke pool with a scaleway field", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["nodeType"] = "L4-1-24G" }, nil,
			"gpu-tenancy:gpuPools[0].nodeType", "not used on cloud gke"},
		{"pool name not a DNS label", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["name"] = "A100_Whole" }, nil,
			"gpu-tenancy:gpuPools[0].name", "RFC 1123"},
		{"pool names repeat", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 1)["name"] = "a100-whole" }, nil,
			"gpu-tenancy:gpuPools[1].name", "Duplicate"},
		{"pool dedicated to a tenant the config lacks", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["tenant"] = "legal" }, nil,
			"gpu-tenancy:gpuPools[0].tenant", `"legal-ai", "research-ai"`},
		{"a tenant with a pool of its own granted a class that pool cannot satisfy", goodExisting,
			func(tc testConfig) { at(tc, "gpuPools", 1)["tenant"] = "legal-ai" }, nil,
			"gpu-tenancy:tenants[0].classes[0]", "tenant legal-ai runs on its own pools only (a100-mig)"},
		{"pool min nodes negative", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["minNodes"] = -1 }, nil,
			"gpu-tenancy:gpuPools[0].minNodes", "0 or more"},
		{"pool max nodes zero", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["maxNodes"] = 0 }, nil,
			"gpu-tenancy:gpuPools[0].maxNodes", "at least 1"},
		{"scaleway zone unknown", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["zone"] = "de-fra-1" }, nil,
			"gpu-tenancy:scaleway.zone", `"fr-par-2"`},
		{"scaleway zone without GPUs", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["zone"] = "nl-ams-1" }, nil,
			"gpu-tenancy:gpuPools[0].nodeType", "allowUnlistedZone: true"},
		{"scaleway node type unknown", goodScaleway, func(tc testConfig) { at(tc, "gpuPools", 0)["nodeType"] = "GPU-3070-S" }, nil,
			"gpu-tenancy:gpuPools[0].nodeType", `"L4-1-24G"`},
		{"scaleway MIG on L4", goodScaleway, func(tc testConfig) { at(tc, "gpuPools", 0)["partition"] = "1g.10gb" }, nil,
			"gpu-tenancy:gpuPools[0].partition", "has no MIG partitions"},
		{"scaleway patch version with auto-upgrade", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["kubernetesVersion"] = "1.35.2" }, nil,
			"gpu-tenancy:scaleway.kubernetesVersion", "minor version"},
		{"scaleway version too old", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["kubernetesVersion"] = "1.32" }, nil,
			"gpu-tenancy:scaleway.kubernetesVersion", "1.35 or later"},
		{"scaleway 1.34, out of Kapsule's support", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["kubernetesVersion"] = "1.34" }, nil,
			"gpu-tenancy:scaleway.kubernetesVersion", "must be 1.35 or later; Kapsule supports"},
		{"scaleway CNI unknown", goodScaleway, func(tc testConfig) { tc["scaleway"].(obj)["cni"] = "kilo" }, nil,
			"gpu-tenancy:scaleway.cni", `"cilium"`},
		{"scaleway maintenance hour out of range", goodScaleway, func(tc testConfig) {
			tc["scaleway"].(obj)["autoUpgrade"] = obj{"maintenanceWindowStartHour": 24}
		}, nil, "gpu-tenancy:scaleway.autoUpgrade.maintenanceWindowStartHour", "0 to 23"},
		{"scaleway pool with a GKE field", goodScaleway, func(tc testConfig) { at(tc, "gpuPools", 0)["accelerator"] = "nvidia-l4" }, nil,
			"gpu-tenancy:gpuPools[0].accelerator", "not used on cloud scaleway"},
		{"existing without kubeconfig", goodExisting, func(tc testConfig) { delete(tc, "existing") }, nil,
			"gpu-tenancy:existing.kubeconfigPath", "gpu-tenancy:kubeconfig"},
		{"existing kubeconfig given twice", goodExisting, func(tc testConfig) { tc["kubeconfig"] = "apiVersion: v1" },
			[]string{"kubeconfig"}, "gpu-tenancy:existing.kubeconfigPath", "give the kubeconfig once"},
		{"kubeconfig in plain text", goodExisting, func(tc testConfig) {
			delete(tc, "existing")
			tc["kubeconfig"] = "apiVersion: v1"
		}, nil, "gpu-tenancy:kubeconfig", "--secret"},
		{"existing pool model unknown", goodExisting, func(tc testConfig) { at(tc, "gpuPools", 0)["model"] = "v100" }, nil,
			"gpu-tenancy:gpuPools[0].model", `"a100-40gb"`},
		{"class name is a driver class", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["name"] = "gpu.nvidia.com" }, nil,
			"gpu-tenancy:gpuClasses[0].name", "NVIDIA DRA driver creates itself"},
		{"class name under the driver's domain", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["name"] = "my.gpu.nvidia.com" }, nil,
			"gpu-tenancy:gpuClasses[0].name", "NVIDIA DRA driver creates itself"},
		{"class name not a DNS subdomain", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["name"] = "GPU_Whole" }, nil,
			"gpu-tenancy:gpuClasses[0].name", "RFC 1123 subdomain"},
		{"mig profile malformed", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 1)["migProfile"] = "1g5gb" }, nil,
			"gpu-tenancy:gpuClasses[1].migProfile", "must be a MIG profile"},
		{"class names repeat", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 1)["name"] = "gpu-whole" }, nil,
			"gpu-tenancy:gpuClasses[1].name", "Duplicate"},
		{"class device unknown", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["device"] = "vgpu" }, nil,
			"gpu-tenancy:gpuClasses[0].device", `"gpu", "mig"`},
		{"mig class without profile", goodGKE, func(tc testConfig) { delete(at(tc, "gpuClasses", 1), "migProfile") }, nil,
			"gpu-tenancy:gpuClasses[1].migProfile", "such as 1g.5gb"},
		{"whole-GPU class with a profile", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["migProfile"] = "1g.5gb" }, nil,
			"gpu-tenancy:gpuClasses[0].migProfile", "device: mig"},
		{"mig class no pool offers", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 1)["migProfile"] = "2g.10gb" }, nil,
			"gpu-tenancy:gpuClasses[1]", "partition: 2g.10gb"},
		{"class product no pool offers", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["product"] = "H100" }, nil,
			"gpu-tenancy:gpuClasses[0]", `matching "H100"`},
		{"class product with CEL syntax", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["product"] = "A100') || true || ('" }, nil,
			"gpu-tenancy:gpuClasses[0].product", "letters, digits"},
		{"extra CEL that does not compile", goodGKE, func(tc testConfig) {
			at(tc, "gpuClasses", 0)["extraCEL"] = "device.attributes['gpu.nvidia.com'].driverVersion >= "
		}, nil, "gpu-tenancy:gpuClasses[0].extraCEL", "selector"},
		{"extra CEL that escapes its parentheses", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["extraCEL"] = "true) || (true" }, nil,
			"gpu-tenancy:gpuClasses[0].extraCEL", "selector"},
		{"tenant name too long for its vCluster", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["name"] = strings.Repeat("a", 53) }, nil,
			"gpu-tenancy:tenants[0].name", "more than 52"},
		{"tenant name too long for its namespace", goodGKE, func(tc testConfig) {
			at(tc, "tenants", 0)["name"] = strings.Repeat("a", 55)
			tc["vcluster"] = obj{"enabled": false}
		}, nil, "gpu-tenancy:tenants[0].name", "more than 54"},
		{"tenant name not a DNS label", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["name"] = "Legal.AI" }, nil,
			"gpu-tenancy:tenants[0].name", "RFC 1123"},
		{"tenant name with vCluster's name join", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["name"] = "a-x-b" }, nil,
			"gpu-tenancy:tenants[0].name", "may not contain -x-"},
		{"tenant in the vCluster Platform's namespace", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["name"] = "platform" }, nil,
			"gpu-tenancy:tenants[0].name", "its namespace vcluster-platform is one of the platform's own"},
		{"tenant in a platform namespace of the stack's", goodGKE, func(tc testConfig) {
			at(tc, "tenants", 0)["name"] = "ops"
			tc["admission"] = obj{"platformNamespaces": list{"vcluster-ops"}}
		}, nil, "gpu-tenancy:admission.platformNamespaces[0]", "names starting with vcluster- are tenant host namespaces"},
		{"tenant names repeat", goodGKE, func(tc testConfig) { at(tc, "tenants", 1)["name"] = "legal-ai" }, nil,
			"gpu-tenancy:tenants[1].name", "Duplicate"},
		{"tenant granted unknown class", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["classes"] = list{"gpu-hole"} }, nil,
			"gpu-tenancy:tenants[0].classes[0]", `"gpu-whole"`},
		{"granted class without quota", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["gpuQuota"] = obj{} }, nil,
			"gpu-tenancy:tenants[0].gpuQuota[gpu-whole]", "device quota"},
		{"quota for a class not granted", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["gpuQuota"].(obj)["gpu-slice"] = 1 }, nil,
			"gpu-tenancy:tenants[0].gpuQuota[gpu-slice]", "not granted"},
		{"negative quota", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["gpuQuota"].(obj)["gpu-whole"] = -1 }, nil,
			"gpu-tenancy:tenants[0].gpuQuota[gpu-whole]", "0 or more"},
		{"cpu quota not a quantity", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["cpuQuota"] = "lots" }, nil,
			"gpu-tenancy:tenants[0].cpuQuota", "quantity"},
		{"memory quota zero", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["memoryQuota"] = "0" }, nil,
			"gpu-tenancy:tenants[0].memoryQuota", "positive"},
		{"tenant grants a class twice", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["classes"] = list{"gpu-whole", "gpu-whole"} }, nil,
			"gpu-tenancy:tenants[0].classes[1]", "Duplicate"},
		{"vcluster storage not a quantity", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["vcluster"] = obj{"storageSize": "5 gigs"} }, nil,
			"gpu-tenancy:tenants[0].vcluster.storageSize", "quantity"},
		{"blocked egress not a CIDR", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["blockedEgressCIDRs"] = list{"10.0.0.0/33"} }, nil,
			"gpu-tenancy:tenants[0].blockedEgressCIDRs[0]", "CIDR"},
		{"platform without admin password", goodGKE, func(tc testConfig) { delete(tc, "platformAdminPassword") }, nil,
			"gpu-tenancy:platformAdminPassword", "--secret"},
		{"admin password in plain text", goodGKE, func(tc testConfig) {}, []string{},
			"gpu-tenancy:platformAdminPassword", "must be a secret"},
		{"platform without host", goodGKE, func(tc testConfig) { tc["platform"] = obj{} }, nil,
			"gpu-tenancy:platform.host", "public host name"},
		{"access keys in plain text", goodGKE, func(tc testConfig) { tc["platformAccessKeys"] = `{"team-a":"key"}` }, nil,
			"gpu-tenancy:platformAccessKeys", "must be a secret"},
		{"one access key shared by every tenant", goodGKE, func(tc testConfig) { tc["platformAccessKey"] = "key" },
			[]string{"platformAdminPassword", "platformAccessKey"},
			"gpu-tenancy:platformAccessKey", "lets each tenant act on the platform as the key's creator"},
		{"an access key for no tenant", goodGKE, func(tc testConfig) { tc["platformAccessKeys"] = `{"legal-ia":"key"}` },
			[]string{"platformAdminPassword", "platformAccessKeys"}, "gpu-tenancy:platformAccessKeys[legal-ia]", `"legal-ai"`},
		{"access keys not a map, and not quoted back", goodGKE, func(tc testConfig) { tc["platformAccessKeys"] = "sk-12345" },
			[]string{"platformAdminPassword", "platformAccessKeys"}, "gpu-tenancy:platformAccessKeys", "Invalid value: \"[secret]\""},
		{"access keys while tenants have no vCluster", goodGKE, func(tc testConfig) {
			tc["platformAccessKeys"] = `{"legal-ai":"key"}`
			tc["vcluster"] = obj{"enabled": false}
		}, []string{"platformAdminPassword", "platformAccessKeys"}, "gpu-tenancy:platformAccessKeys[legal-ai]", "vcluster.enabled"},
		{"a connected platform without host", goodGKE, func(tc testConfig) { tc["platform"] = obj{"install": false} }, nil,
			"gpu-tenancy:platform.host", "public host name"},
		{"kubeconfig server not https", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"kubeconfigServer": "{tenant}.example.com"} }, nil,
			"gpu-tenancy:vcluster.kubeconfigServer", "https URL"},
		{"kubeconfig server in clear text", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"kubeconfigServer": "http://{tenant}.example.com"} }, nil,
			"gpu-tenancy:vcluster.kubeconfigServer", "https URL"},
		{"vCluster API client CIDR with host bits", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"apiClientCIDRs": list{"10.243.0.1/24"}} }, nil,
			"gpu-tenancy:vcluster.apiClientCIDRs[0]", "host bits set; use 10.243.0.0/24"},
		{"vCluster API clients everywhere", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"apiClientCIDRs": list{"0.0.0.0/0"}} }, nil,
			"gpu-tenancy:vcluster.apiClientCIDRs[0]", "admits every address"},
		{"vCluster API client CIDR not a CIDR", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"apiClientCIDRs": list{"10.243.0.1"}} }, nil,
			"gpu-tenancy:vcluster.apiClientCIDRs[0]", "must be a CIDR"},
		{"a GPU access mode that does not exist", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["gpuAccess"] = "deviceplugin" }, nil,
			"gpu-tenancy:tenants[0].gpuAccess", `supported values: "claims", "extendedResources", "both"`},
		{"a platform-wide GPU access mode that does not exist", goodGKE, func(tc testConfig) { tc["vcluster"] = obj{"gpuAccess": "names"} }, nil,
			"gpu-tenancy:vcluster.gpuAccess", `supported values: "claims", "extendedResources", "both"`},
		{"extended resources on GKE's default version", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["gpuAccess"] = "extendedResources" }, nil,
			"gpu-tenancy:tenants[0].gpuAccess", "tenant legal-ai asks for GPUs as extended resources, which need Kubernetes 1.36 or later (DRAExtendedResource, on by default from 1.36); gpu-tenancy:gke.kubernetesVersion is 1.35"},
		{"extended resources for every tenant on Kapsule 1.35", goodScaleway, func(tc testConfig) {
			tc["vcluster"] = obj{"gpuAccess": "both"}
			tc["scaleway"].(obj)["kubernetesVersion"] = "1.35"
		}, nil, "gpu-tenancy:vcluster.gpuAccess", "gpu-tenancy:scaleway.kubernetesVersion is 1.35: raise it, or set gpu-tenancy:tenants[0].gpuAccess to claims"},
		{"an access key for a tenant with no claim sync", goodGKE, func(tc testConfig) {
			tc["platformAccessKeys"] = `{"legal-ai":"key"}`
			tc["gke"].(obj)["kubernetesVersion"] = "1.36"
			at(tc, "tenants", 0)["gpuAccess"] = "extendedResources"
		}, []string{"platformAdminPassword", "platformAccessKeys"}, "gpu-tenancy:platformAccessKeys[legal-ai]", "connects to no platform"},
		{"two classes with one extended-resource name", goodGKE, func(tc testConfig) {
			at(tc, "gpuClasses", 1)["extendedResourceName"] = "gpu-tenancy.io/gpu-whole"
		}, nil, "gpu-tenancy:gpuClasses[1].extendedResourceName", "is class gpu-whole's already"},
		{"the device plugin's name for a class", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["extendedResourceName"] = "nvidia.com/gpu" }, nil,
			"gpu-tenancy:gpuClasses[0].extendedResourceName", "nvidia.com/ names are the NVIDIA device plugin's"},
		{"vCluster image without a tag", goodGKE, func(tc testConfig) {
			tc["vcluster"] = obj{"images": obj{"controlPlane": "ghcr.io/loft-sh/vcluster-oss"}}
		}, nil,
			"gpu-tenancy:vcluster.images.controlPlane", "needs a tag"},
		{"blocked egress CIDR with host bits", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["blockedEgressCIDRs"] = list{"10.0.0.1/8"} }, nil,
			"gpu-tenancy:tenants[0].blockedEgressCIDRs[0]", "host bits"},
		{"blocked egress of everything", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["blockedEgressCIDRs"] = list{"::/0"} }, nil,
			"gpu-tenancy:tenants[0].blockedEgressCIDRs[0]", "would block all egress"},
		{"vcluster storage class not a name", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["vcluster"] = obj{"storageClass": "Fast SSD"} }, nil,
			"gpu-tenancy:tenants[0].vcluster.storageClass", "RFC 1123"},
		{"driver root on a cloud", goodGKE, func(tc testConfig) { tc["existing"] = obj{"driverRoot": "/opt/nvidia"} }, nil,
			"gpu-tenancy:existing.driverRoot", "not used on cloud gke"},
		{"pod ranges on a cloud", goodGKE, func(tc testConfig) { tc["existing"] = obj{"podCIDRs": list{"10.244.0.0/16"}} }, nil,
			"gpu-tenancy:existing.podCIDRs", "not used on cloud gke"},
		{"existing pod range not a CIDR", goodExisting, func(tc testConfig) {
			tc["existing"].(obj)["podCIDRs"] = list{"10.244.0.0/16", "10.244.0.0"}
		}, nil, "gpu-tenancy:existing.podCIDRs[1]", "must be a CIDR"},
		{"existing pod range of every address", goodExisting, func(tc testConfig) { tc["existing"].(obj)["podCIDRs"] = list{"::/0"} }, nil,
			"gpu-tenancy:existing.podCIDRs[0]", "block all of the tenants' egress"},
		{"class granted to no tenant", goodGKE, func(tc testConfig) {
			at(tc, "tenants", 1)["classes"] = list{"gpu-whole"}
			at(tc, "tenants", 1)["gpuQuota"] = obj{"gpu-whole": 1}
		}, nil,
			"gpu-tenancy:gpuClasses[1]", "mark it platformOnly"},
		{"platform-only class granted", goodGKE, func(tc testConfig) { at(tc, "gpuClasses", 0)["platformOnly"] = true }, nil,
			"gpu-tenancy:gpuClasses[0].platformOnly", "granted to legal-ai"},
		{"namespace deletion wait not a duration", goodGKE, func(tc testConfig) { tc["timeouts"] = obj{"namespaceDeletion": "ten minutes"} }, nil,
			"gpu-tenancy:timeouts.namespaceDeletion", "a duration such as 10m"},
		{"namespace deletion wait of zero", goodGKE, func(tc testConfig) { tc["timeouts"] = obj{"namespaceDeletion": "0s"} }, nil,
			"gpu-tenancy:timeouts.namespaceDeletion", "more than 0"},
		{"adopting an object without its kind", goodGKE, func(tc testConfig) { tc["ownership"] = obj{"adopt": list{"gpu-whole"}} }, nil,
			"gpu-tenancy:ownership.adopt[0]", "Kind/name"},
		{"adopting a kind the program does not create", goodGKE, func(tc testConfig) { tc["ownership"] = obj{"adopt": list{"Pod/x"}} }, nil,
			"gpu-tenancy:ownership.adopt[0]", "DeviceClass"},
		{"pending-claim alert sooner than a minute", goodGKE, func(tc testConfig) { tc["monitoring"] = obj{"pendingClaimAfter": "30s"} }, nil,
			"gpu-tenancy:monitoring.pendingClaimAfter", "at least 1m"},
		{"alert channels on a cloud without Cloud Monitoring", goodScaleway, func(tc testConfig) {
			tc["monitoring"] = obj{"gke": obj{"notificationChannels": list{"projects/p/notificationChannels/1"}}}
		}, nil, "gpu-tenancy:monitoring.gke.notificationChannels", "is not used on scaleway"},
		{"privileged tenant", goodGKE, func(tc testConfig) { at(tc, "tenants", 0)["podSecurity"] = "privileged" }, nil,
			"gpu-tenancy:tenants[0].podSecurity", `"baseline", "restricted"`},
		{"platform namespace that is a tenant's", goodGKE, func(tc testConfig) {
			tc["admission"] = obj{"platformNamespaces": list{"vcluster-legal-ai"}}
		}, nil, "gpu-tenancy:admission.platformNamespaces[0]", "tenant host namespaces"},
		{"tenant syncer as a claim status writer", goodGKE, func(tc testConfig) {
			tc["admission"] = obj{"claimStatusWriters": list{"system:serviceaccount:vcluster-legal-ai:vc-legal-ai"}}
		}, nil, "gpu-tenancy:admission.claimStatusWriters[0]", "never allocate devices themselves"},
		{"the dedicated pools' taint as one every tenant may tolerate", goodGKE, func(tc testConfig) {
			tc["admission"] = obj{"tolerableTaints": list{"gpu-tenancy.io/dedicated"}}
		}, nil, "gpu-tenancy:admission.tolerableTaints[0]", "only that tenant's pods may tolerate it"},
		{"the platform pool's taint as one every tenant may tolerate", goodGKE, func(tc testConfig) {
			tc["admission"] = obj{"tolerableTaints": list{"gpu-tenancy.io/platform-pool"}}
		}, nil, "gpu-tenancy:admission.tolerableTaints[0]", "keeps tenant pods off the platform's own pool"},
		{"a GPU pool named as the tenant pool", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["name"] = "tenants" }, nil,
			"gpu-tenancy:gpuPools[0].name", "names a pool without GPUs"},
		{"a tenant pool that cannot scale", goodGKE, func(tc testConfig) {
			tc["gke"].(obj)["tenantPool"] = obj{"minNodes": 2, "maxNodes": 1}
		}, nil, "gpu-tenancy:gke.tenantPool.maxNodes", "must be at least 2"},
		{"unknown admission key", goodGKE, func(tc testConfig) { tc["admission"] = obj{"platformNamespace": list{"ml"}} }, nil,
			"gpu-tenancy:admission.platformNamespace", `"platformNamespaces"`},
		{"driver chart given twice", goodGKE, func(tc testConfig) {
			tc["draDriver"] = obj{"chart": obj{"path": "./chart", "name": "dra"}}
		}, nil, "gpu-tenancy:draDriver.chart.path", "not both"},
		{"chart with both path and repo", goodGKE, func(tc testConfig) {
			tc["vcluster"] = obj{"chart": obj{"path": "./chart", "repo": "https://charts.loft.sh", "name": "vcluster"}}
		}, nil, "gpu-tenancy:vcluster.chart.path", "not both"},
		{"gke pool name that is no GCP label value", goodGKE, func(tc testConfig) { at(tc, "gpuPools", 0)["name"] = "A100" }, nil,
			"gpu-tenancy:gpuPools[0].name", "GCP label gpu-tenancy-pool"},
		{"scaleway pool name that is no tag value", goodScaleway, func(tc testConfig) { at(tc, "gpuPools", 0)["name"] = "l4-" }, nil,
			"gpu-tenancy:gpuPools[0].name", "tag gpu-tenancy-pool"},
		{"prices without a currency", goodGKE, func(tc testConfig) { tc["prices"] = obj{"perDeviceHour": obj{"gpu-whole": 2.93}} }, nil,
			"gpu-tenancy:prices.currency", "ISO 4217"},
		{"prices in a currency that is no code", goodGKE, func(tc testConfig) {
			tc["prices"] = obj{"currency": "€", "perDeviceHour": obj{"gpu-whole": 2.93}}
		}, nil, "gpu-tenancy:prices.currency", "three capital letters"},
		{"price of a class not in the catalog", goodGKE, func(tc testConfig) {
			tc["prices"] = obj{"currency": "EUR", "perDeviceHour": obj{"gpu-h100": 4}}
		}, nil, "gpu-tenancy:prices.perDeviceHour[gpu-h100]", `"gpu-whole", "gpu-slice"`},
		{"price that is not positive", goodGKE, func(tc testConfig) {
			tc["prices"] = obj{"currency": "EUR", "perDeviceHour": obj{"gpu-whole": -1}}
		}, nil, "gpu-tenancy:prices.perDeviceHour[gpu-whole]", "positive price"},
		{"price that is no number", goodGKE, func(tc testConfig) {
			tc["prices"] = obj{"currency": "EUR", "perDeviceHour": obj{"gpu-whole": "2.93 EUR"}}
		}, nil, "gpu-tenancy:prices.perDeviceHour[gpu-whole]", "must be a number"},
		{"a tenant both listed and retired", goodGKE, func(tc testConfig) {
			tc["retiredTenants"] = list{at(tc, "tenants", 1)["name"]}
		}, nil, "gpu-tenancy:retiredTenants[0]", "is listed in gpu-tenancy:tenants too"},
		{"a tenant retired twice", goodGKE, func(tc testConfig) { tc["retiredTenants"] = list{"team-z", "team-z"} }, nil,
			"gpu-tenancy:retiredTenants[1]", "Duplicate value"},
		{"a retired name that is no tenant's", goodGKE, func(tc testConfig) { tc["retiredTenants"] = list{"Team_Z"} }, nil,
			"gpu-tenancy:retiredTenants[0]", "RFC 1123"},
		{"unknown prices key", goodGKE, func(tc testConfig) { tc["prices"] = obj{"currency": "EUR", "perHour": obj{"gpu-whole": 2}} }, nil,
			"gpu-tenancy:prices.perHour", `"perDeviceHour"`},
	}
}

func TestBadConfigs(t *testing.T) {
	cases := badConfigs()
	require.GreaterOrEqual(t, len(cases), 30)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(c.config().source(c.secretKeys()...), ConfigKeys)
			require.Error(t, err)
			assert.Nil(t, cfg)
			var cerr *ArgsError
			require.ErrorAs(t, err, &cerr)
			found := false
			for _, e := range cerr.Errs {
				if e.Field == c.wantPath && strings.Contains(e.Error(), c.wantMsg) {
					found = true
				}
			}
			assert.True(t, found, "want an error at %s mentioning %q, got:\n%s", c.wantPath, c.wantMsg, err)
		})
	}
}

func TestValidExtraCELIsAccepted(t *testing.T) {
	tc := goodGKE()
	at(tc, "gpuClasses", 0)["extraCEL"] = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
	_, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
	require.NoError(t, err)
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	tc := goodGKE()
	tc["gke"].(obj)["zone"] = "nowhere"
	at(tc, "gpuPools", 0)["name"] = "Bad_Name"
	at(tc, "tenants", 1)["classes"] = list{"nope"}
	_, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
	var cerr *ArgsError
	require.ErrorAs(t, err, &cerr)
	var fields []string
	for _, e := range cerr.Errs {
		fields = append(fields, e.Field)
	}
	assert.Contains(t, fields, "gpu-tenancy:gke.zone")
	assert.Contains(t, fields, "gpu-tenancy:gpuPools[0].name")
	assert.Contains(t, fields, "gpu-tenancy:tenants[1].classes[0]")
	assert.Contains(t, err.Error(), "invalid stack config")
}

func TestSecretValuesNeverPrinted(t *testing.T) {
	tc := goodExisting()
	tc["kubeconfig"] = "apiVersion: v1 # token=abc"
	_, err := Load(tc.source("platformAdminPassword"), ConfigKeys)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "token=abc")
	assert.Equal(t, "[secret]", Secret("hunter2").String())
}

func TestMalformedAccessKeysAreNeverPrinted(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":           "sk-12345",
		"a list, not a map":  `["sk-12345"]`,
		"a key not a string": `{"legal-ai": {"key": "sk-12345"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			tc := goodGKE()
			tc["platformAccessKeys"] = raw
			_, err := Load(tc.source("platformAdminPassword", "platformAccessKeys"), ConfigKeys)
			require.ErrorContains(t, err, "gpu-tenancy:platformAccessKeys")
			assert.NotContains(t, err.Error(), "sk-12345")
		})
	}
}

// The properties a schema is generated from are the keys the decoder reads: every one but the refused shared
// platform access key.
func TestPropertiesAreTheKnownKeys(t *testing.T) {
	var names []string
	for _, p := range Properties() {
		names = append(names, p.Name)
		assert.NotEmpty(t, p.Types, p.Name)
		assert.Equal(t, p.Secret, slices.Contains([]string{keyKubeconfig, keyAdminPassword, keyLicenseToken, keyAccessKeys}, p.Name), p.Name)
	}
	want := slices.DeleteFunc(slices.Clone(knownKeys), func(k string) bool { return k == keyAccessKey })
	assert.ElementsMatch(t, want, names)
}
