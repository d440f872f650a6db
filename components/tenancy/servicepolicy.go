package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// servicePolicy refuses externalIPs on tenant Services. kube-proxy (and CNIs that implement them) captures traffic to
// a Service's external IP from every pod and node of the cluster, so a tenant naming an address other tenants talk to
// intercepts or black-holes their traffic (CVE-2020-8554, https://github.com/kubernetes/kubernetes/issues/97076).
// vCluster copies externalIPs from the virtual Service to the host (loft-sh/vcluster v0.36.1
// pkg/controllers/resources/services/syncer.go), and the syncer may create host Services itself. Kubernetes' own
// DenyServiceExternalIPs admission plugin is off by default and not ours to turn on in a managed control plane.
var servicePolicy = admissionPolicy{
	name:  ServicePolicy,
	rules: []admissionRule{{group: "", resources: []string{"services"}, operations: createUpdate}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"externalIPs", `object.spec.?externalIPs.orValue([])
	.filter(ip, request.operation == 'CREATE' || !(ip in oldObject.spec.?externalIPs.orValue([])))`},
	},
	validations: []celValidation{
		{
			expression: `size(variables.externalIPs) == 0`,
			message: `'tenant ' + variables.tenant + ': Service ' + object.metadata.name + ' sets externalIPs ' +
	variables.externalIPs.join(', ') + ', which would capture other tenants\' traffic to those addresses'`,
		},
		{
			expression: `size(object.spec.?ports.orValue([])) <= $MAX_PORTS`,
			message: `'tenant ' + variables.tenant + ': Service ' + object.metadata.name + ' has ' + string(size(object.spec.ports)) +
	' ports; a tenant Service may have at most ' + string($MAX_PORTS) + ': every port of every endpoint is programmed on every node'`,
		},
	},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "MAX_PORTS": fmt.Sprint(MaxEndpointPorts)},
}

// Limits on one tenant object's share of the dataplane. kube-proxy (or the CNI) programs every endpoint of every port
// of every Service on every node, so the cost of a tenant's EndpointSlice is its endpoints' addresses times its ports,
// cluster-wide (an endpoint holds up to 100 addresses, and Cilium makes each a backend); the quota counts objects only. The EndpointSlice controller itself puts at most 100 endpoints in a slice
// (kube-controller-manager --max-endpoints-per-slice, default 100), and vCluster's own Services have at most three
// ports (loft-sh/vcluster v0.36.1 chart/templates/service.yaml, pkg/coredns/template.go). A tenant's whole share is
// then at most its EndpointSlice quota times MaxEndpoints times MaxEndpointPorts (docs/tenants.md, "Limits and quotas").
const (
	MaxEndpoints     = 100
	MaxEndpointPorts = 10
)

// endpointsPolicy bounds each EndpointSlice in a tenant namespace, whoever writes it: the tenant's syncer (vCluster
// copies the endpoints of selector-less Services: pkg/controllers/resources/endpoints, endpointslices) or the host's
// controllers, whose slices follow the tenant's Services and pods (the mirroring controller's, of the tenant's own
// Endpoints, included). And each Endpoints object a tenant identity writes, which the mirroring controller turns into
// slices (kubernetes v1.34.4 pkg/controller/endpointslicemirroring). Not the Endpoints controller's: no dataplane
// programs those (kube-proxy and Cilium read slices), and they list every pod a Service selects in one object, grouped
// by port numbers, so a Service over more pods than MaxEndpoints (a raised pods quota) or a rollout that renumbers a
// named port would have them refused. The mirroring controller leaves them alone while their Service has a selector;
// one the tenant leaves behind by taking the selector off is mirrored into slices, which the slice bound holds.
var endpointsPolicy = admissionPolicy{
	name: EndpointsPolicy,
	rules: []admissionRule{
		{group: "discovery.k8s.io", resources: []string{"endpointslices"}, operations: createUpdate},
		{group: "", resources: []string{"endpoints"}, operations: createUpdate},
	},
	matchConditions: []celNamed{{"slices-or-tenant-endpoints", `request.resource.resource == 'endpointslices' || ` + celTenantIdentity}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"slice", `request.resource.resource == 'endpointslices'`},
		// An EndpointSlice's endpoints and ports are kept even when empty (k8s.io/api v0.34.4 discovery/v1 types.go:
		// no omitempty), and an empty list arrives as null (protobuf tells no empty list from none): the EndpointSlice
		// controller's placeholder slice of a Service whose selector matches no pod carries `endpoints: null`, which
		// size() does not take.
		// Each endpoint of a slice may hold up to 100 addresses, and Cilium (GKE's Dataplane V2, Kapsule's default)
		// programs every one as a backend: a slice counts its addresses (k8s v1.34.4 pkg/apis/discovery/validation).
		{"endpoints", `variables.slice ? (object.?endpoints.orValue(null) == null ? 0 :
	object.endpoints.map(e, size(e.?addresses.orValue([]))).sum()) :
	object.?subsets.orValue([]).map(s, size(s.?addresses.orValue([])) + size(s.?notReadyAddresses.orValue([]))).sum()`},
		{"ports", `variables.slice ? (object.?ports.orValue(null) == null ? 0 : size(object.ports)) :
	object.?subsets.orValue([]).map(s, size(s.?ports.orValue([]))).sum()`},
	},
	validations: []celValidation{{
		expression: `variables.endpoints <= $MAX_ENDPOINTS && variables.ports <= $MAX_PORTS`,
		message: `'tenant ' + variables.tenant + ': ' + request.kind.kind + ' ' + object.metadata.name + ' has ' +
	string(variables.endpoints) + ' endpoint addresses and ' + string(variables.ports) + ' ports; at most ' + string($MAX_ENDPOINTS) +
	' and ' + string($MAX_PORTS) + ': every endpoint of every port is programmed on every node'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel),
		"MAX_ENDPOINTS": fmt.Sprint(MaxEndpoints), "MAX_PORTS": fmt.Sprint(MaxEndpointPorts)},
}

// eventSizePolicy: an event a tenant identity writes in its namespace is no larger than the ones Kubernetes' own
// components write. Through the core API without eventTime, an event skips the length checks of the events API
// (kubernetes v1.34.4 pkg/apis/core/validation/events.go: the 1024-character note and the 128-character reason, action
// and reporting instance are checked on the eventTime branch only), the generic checks of its metadata bound no length
// but the labels' and annotations', the tenant's quota does not count events, and they stay for the API server's event
// TTL (an hour by default): events of a megabyte each would fill etcd, whose quota, once hit, stops every write of the
// cluster. So the note or message is held to 1024 characters; the reason, action and reporting instance to 128, as the
// events API holds them; every other string of the event, its name and the object it regards included, to the length of
// a qualified name (316); and its labels, annotations, owner references and finalizers to MaxEventMetadata characters
// in all. Its managed fields too, which the API server keeps as a client sends them (k8s.io/apimachinery v0.34.4
// pkg/util/managedfields/internal/fieldmanager.go Update): at most MaxManagers managers, naming fields no deeper than
// an event's (a label under metadata, an owner reference's field) in at most MaxEventManagedFields characters of field
// paths in all. The host's components write their events in tenant namespaces under identities of their own, which this
// does not bound. vCluster copies the host's events into the virtual cluster and none the other way (loft-sh/vcluster
// v0.36.1 pkg/controllers/resources/events/syncer.go); the events it writes on the host are client-go's short ones, of
// leader election (pkg/leaderelection) and snapshot requests (pkg/snapshot/controller.go), without labels or
// annotations.
var eventSizePolicy = admissionPolicy{
	name: EventSizePolicy,
	rules: []admissionRule{
		{group: "", resources: []string{"events"}, operations: createUpdate},
		{group: "events.k8s.io", resources: []string{"events"}, operations: createUpdate},
	},
	matchConditions: []celNamed{{"tenant-identity", celTenantIdentity}},
	variables: []celNamed{
		{"tenant", celTenant},
		// The core API's fields, then the events API's.
		{"texts", `[object.?message.orValue(''), object.?note.orValue('')]`},
		{"short", `[` + eventFields("reason", "action", "reportingInstance") + `]`},
		{"long", `[` + eventFields(longEventFields()...) + `]`},
		{"metadata", `[object.metadata.?labels.orValue({}), object.metadata.?annotations.orValue({})]
	.map(m, m.map(k, size(k) + size(m[k])).sum()).sum() +
	object.metadata.?ownerReferences.orValue([]).map(r, size(r.name) + size(r.kind) + size(r.apiVersion) + size(r.uid)).sum() +
	object.metadata.?finalizers.orValue([]).map(f, size(f)).sum()`},
	},
	validations: []celValidation{{
		expression: `variables.texts.all(t, size(t) <= $MAX_TEXT) && variables.short.all(f, size(f) <= $MAX_SHORT) &&
	variables.long.all(f, size(f) <= $MAX_LONG) && variables.metadata <= $MAX_METADATA`,
		message: `'tenant ' + variables.tenant + ': event ' + object.metadata.name + ' is larger than an event may be: at most ' +
	string($MAX_TEXT) + ' characters of message or note, ' + string($MAX_SHORT) + ' of reason, action or reporting instance, ' +
	string($MAX_LONG) + ' in any other field and ' + string($MAX_METADATA) +
	' of labels, annotations, owner references and finalizers; the quota does not count events, and they stay for the event TTL'`,
	}, {
		expression: celManagedFieldsWithin("$MAX_MANAGERS", "$MAX_MANAGED_FIELDS"),
		message: `'tenant ' + variables.tenant + ': event ' + object.metadata.name + ' may have at most ' + string($MAX_MANAGERS) +
	' managers, naming fields no deeper than an event\'s in at most ' + string($MAX_MANAGED_FIELDS) + ' characters of field paths in all'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "MAX_TEXT": fmt.Sprint(maxEventNote),
		"MAX_SHORT": fmt.Sprint(maxEventField), "MAX_LONG": fmt.Sprint(maxQualifiedName), "MAX_METADATA": fmt.Sprint(MaxEventMetadata),
		"MAX_MANAGERS": fmt.Sprint(MaxManagers), "MAX_MANAGED_FIELDS": fmt.Sprint(MaxEventManagedFields)},
}

// longEventFields are the string fields of an event in either API, as optional paths below the object, that the
// events API bounds by a name's or a qualified name's length: the event's name, its type and reporting component or
// controller, its source, and the fields of the objects it regards.
func longEventFields() []string {
	paths := []string{"metadata.?name", "metadata.?generateName", "type", "reportingComponent", "reportingController",
		"source.?component", "source.?host", "deprecatedSource.?component", "deprecatedSource.?host"}
	for _, ref := range []string{"involvedObject", "regarding", "related"} {
		for _, f := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
			paths = append(paths, ref+".?"+f)
		}
	}
	return paths
}

// eventFields is CEL for the string fields at paths below the event (optional paths, such as "source.?host"), each
// its value or ”.
func eventFields(paths ...string) string {
	fields := make([]string, len(paths))
	for i, p := range paths {
		fields[i] = "object.?" + p + ".orValue('')"
	}
	return strings.Join(fields, ", ")
}

// The events API's own limits (kubernetes v1.34.4 pkg/apis/core/validation/events.go noteLengthLimit, and the
// 128-character reason, action and reporting instance), a qualified name's length (a prefix of 253 and a name of 63)
// for the other strings, and a bound on an event's labels, annotations, owner references and finalizers, of which
// Kubernetes' components write none.
const (
	maxEventNote     = 1024
	maxEventField    = 128
	maxQualifiedName = 316
	// MaxEventMetadata is how many characters of labels, annotations, owner references and finalizers, keys and values
	// together, a tenant event may carry.
	MaxEventMetadata = 1024
	// MaxEventManagedFields is how many characters of field paths a tenant event's managers may name in all: an event's
	// own fields, and its labels' and annotations' keys within MaxEventMetadata.
	MaxEventManagedFields = 4096
)

// celManagedFieldsWithin is true when the object has at most maxManagers managers in its managed fields, naming field
// paths at most four deep (metadata, labels, a label; or metadata, owner references, one of them, its field) whose
// names add up to at most maxChars characters in all. Every manager's fields are a tree of JSON objects whose leaves
// are empty (k8s.io/apimachinery pkg/apis/meta/v1 FieldsV1), which CEL can walk to a fixed depth only: a deeper path is
// refused. Its schema types it as an object without fields, so it is read as dyn.
func celManagedFieldsWithin(maxManagers, maxChars string) string {
	return `size(object.metadata.?managedFields.orValue([])) <= ` + maxManagers + ` &&
	object.metadata.?managedFields.orValue([]).all(m, !has(m.fieldsV1) ||
	dyn(m.fieldsV1).all(a, dyn(m.fieldsV1)[a].all(b, dyn(m.fieldsV1)[a][b].all(c, dyn(m.fieldsV1)[a][b][c].all(d, size(dyn(m.fieldsV1)[a][b][c][d]) == 0))))) &&
	object.metadata.?managedFields.orValue([]).map(m, !has(m.fieldsV1) ? 0 : dyn(m.fieldsV1).map(a, size(a) + dyn(m.fieldsV1)[a].map(b, size(b) +
	dyn(m.fieldsV1)[a][b].map(c, size(c) + dyn(m.fieldsV1)[a][b][c].map(d, size(d)).sum()).sum()).sum()).sum()).sum() <= ` + maxChars
}
