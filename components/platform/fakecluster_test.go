package platform

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeCluster is an API server that answers what a stack's program reads before it registers anything: namespaces,
// the environment's lock, the platform's guards and classes, and a dry-run pod, which mutate rewrites as a cluster's
// own admission would. Objects are keyed by their API path; a path it does not hold answers 404.
type fakeCluster struct {
	t       *testing.T
	mu      sync.Mutex
	objects map[string]map[string]any
	// lists are the items of a collection path, as the metadata client lists them.
	lists  map[string][]map[string]any
	mutate func(pod map[string]any)
	// refuse answers a dry-run pod with this Forbidden message; refuseFirst, when set, only the first that many;
	// refuseIn, when set, only in that namespace.
	refuse      string
	refuseFirst int
	refuseIn    string
	refused     int
	// dropsExtendedResourceName answers a dry-run DeviceClass as an API server whose DRAExtendedResource gate is
	// off does: without spec.extendedResourceName.
	dropsExtendedResourceName bool
	server                    *httptest.Server
}

func newFakeCluster(t *testing.T) *fakeCluster {
	f := &fakeCluster{t: t, objects: map[string]map[string]any{}, lists: map[string][]map[string]any{}}
	f.put("/api/v1/namespaces/kube-system", map[string]any{"metadata": map[string]any{"name": "kube-system", "uid": "cluster-uid-1"}})
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

// put holds an object at its API path.
func (f *fakeCluster) put(path string, obj map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[path] = obj
}

// namespace holds a tenant namespace owned by a stack.
func (f *fakeCluster) namespace(name, tenant, owner string) {
	labels := map[string]any{}
	if tenant != "" {
		labels["gpu-tenancy.io/tenant"] = tenant
	}
	if owner != "" {
		labels["gpu-tenancy.io/stack"] = owner
	}
	obj := map[string]any{"metadata": map[string]any{"name": name, "labels": labels}}
	f.put("/api/v1/namespaces/"+name, obj)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists["/api/v1/namespaces"] = append(f.lists["/api/v1/namespaces"], obj)
}

func (f *fakeCluster) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods") {
		if f.refuse != "" && (f.refuseFirst == 0 || f.refused < f.refuseFirst) &&
			(f.refuseIn == "" || strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"+f.refuseIn+"/")) {
			f.refused++
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"reason": "Forbidden", "code": 403, "message": f.refuse})
			return
		}
		var pod map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &pod)
		if f.mutate != nil {
			f.mutate(pod)
		}
		_ = json.NewEncoder(w).Encode(pod)
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/deviceclasses") {
		var class map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &class)
		if spec, ok := class["spec"].(map[string]any); ok && f.dropsExtendedResourceName {
			delete(spec, "extendedResourceName")
		}
		_ = json.NewEncoder(w).Encode(class)
		return
	}
	accept := r.Header.Get("Accept")
	if obj, ok := f.objects[r.URL.Path]; ok {
		if strings.Contains(accept, "as=PartialObjectMetadata") {
			obj = map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
		}
		_ = json.NewEncoder(w).Encode(obj)
		return
	}
	if isCollection(r.URL.Path) {
		items := []map[string]any{}
		for _, item := range f.lists[r.URL.Path] {
			if matches(item, r.URL.Query().Get("labelSelector")) {
				items = append(items, item)
			}
		}
		kind, version := "List", "v1"
		if strings.Contains(accept, "as=PartialObjectMetadataList") {
			kind, version = "PartialObjectMetadataList", "meta.k8s.io/v1"
			for i, item := range items {
				items[i] = map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": item["metadata"]}
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": kind, "apiVersion": version, "metadata": map[string]any{}, "items": items})
		return
	}
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
}

// isCollection tells a collection path (…/namespaces, …/deviceclasses) from an object's.
func isCollection(path string) bool {
	for _, c := range []string{"/namespaces", "/deviceclasses", "/resourceclaims", "/validatingadmissionpolicies", "/validatingadmissionpolicybindings",
		"/flowschemas", "/prioritylevelconfigurations", "/nodes", "/servicecidrs", "/ipaddresses"} {
		if strings.HasSuffix(path, c) {
			return true
		}
	}
	return false
}

// matches applies the one form of label selector the program lists by: a key that must exist.
func matches(item map[string]any, selector string) bool {
	if selector == "" {
		return true
	}
	labels, _ := item["metadata"].(map[string]any)["labels"].(map[string]any)
	_, ok := labels[selector]
	return ok
}

// kubeconfig reaches the fake cluster.
func (f *fakeCluster) kubeconfig() string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + f.server.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
}
