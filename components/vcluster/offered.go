package vcluster

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// OfferedClass is one class a tenant may ask for by its extended-resource name, as the tenant reads it inside its own
// vCluster: the name and what one device of it is. The tenant's quota is not among them: the vCluster's values are its
// config, and a change of them restarts its control plane, which a quota change must not.
type OfferedClass struct {
	Class        string `json:"class"`
	ResourceName string `json:"name"`
	Gives        string `json:"gives"`
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
		"A pod over your quota of the class is refused when it is created, with the quota's message.", example)
	raw, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": OfferedConfigMap, "namespace": OfferedNamespace},
		"data":     data,
	})
	return strings.TrimSpace(string(raw)), err
}
