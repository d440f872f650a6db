package vcluster

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// OfferedClass is one class a tenant may ask for by its extended-resource name, as the tenant reads it inside its own
// vCluster: the name, what one device of it is, and how many the tenant may hold at once.
//
// They reach the vCluster in its values (experimental.deploy.vcluster.manifests), so a change of the tenant's quota
// restarts its control plane once (the chart's pod template carries a hash of the values: loft-sh/vcluster v0.36.1
// chart/templates/statefulset.yaml vClusterConfigHash); its data and its pods on the host stay. The way that would
// not restart it, a host ConfigMap synced in by sync.fromHost.configMaps, is closed: for it the chart grants the
// syncer list and watch of every ConfigMap of the cluster, other tenants' included (chart/templates/_rbac.tpl
// rulesForFromHostSyncerForGivenCoreResource, a ClusterRole rule without namespace or names).
type OfferedClass struct {
	Class        string `json:"class"`
	ResourceName string `json:"name"`
	Gives        string `json:"gives"`
	// Quota is the tenant's quota of the class: devices held at once, by name and by claim together.
	Quota int `json:"quota"`
}

// Where a tenant reads its offered classes inside its vCluster: kube-public is readable by every user of the cluster
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces).
const (
	OfferedNamespace = "kube-public"
	OfferedConfigMap = "gpu-tenancy-gpus"
)

// offeredManifest is the ConfigMap listing the classes, one key per class (a ConfigMap key holds no "/"), each value
// a small YAML document, and a usage key with the one line a container writes.
func offeredManifest(classes []OfferedClass) (string, error) {
	data := map[string]string{}
	var example string
	for _, c := range classes {
		raw, err := yaml.Marshal(c)
		if err != nil {
			return "", err
		}
		data[c.Class] = string(raw)
		if example == "" {
			example = c.ResourceName
		}
	}
	data["usage"] = fmt.Sprintf("Ask for a class by its name in a container, in whole devices: resources: {limits: {%s: 1}}. "+
		"A pod that would take you over a class's quota is refused when it is created, with the quota's message; "+
		"the quota counts the class's devices you hold by name and by claim together.", example)
	raw, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": OfferedConfigMap, "namespace": OfferedNamespace},
		"data":     data,
	})
	return strings.TrimSpace(string(raw)), err
}
