// Package rules defines the platform's alert rules once, as data: their PromQL, hold time, severity and texts, and
// what kube-state-metrics must expose for them. The monitoring component renders them for each flavour (a
// prometheus-operator PrometheusRule, or Cloud Monitoring alert policies on GKE); tests evaluate the same values
// with Prometheus's engine. It imports no Pulumi SDK, so the end-to-end tests and small programs can use it cheaply.
package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// Severity ranks an alert; it is the `severity` label of every alert.
type Severity string

const (
	Critical Severity = "critical"
	Warning  Severity = "warning"
	Info     Severity = "info"
)

// Alert names.
const (
	ClaimPendingTooLong     = "DRAClaimPendingTooLong"
	TenantQuotaExhausted    = "TenantGPUQuotaExhausted"
	KubeletPluginPrepareErr = "DRAKubeletPluginPrepareErrors"
	KubeletPluginNotRunning = "DRAKubeletPluginNotRunning"
	ServiceRangeNearlyFull  = "ServiceRangeNearlyFull"
)

// ServiceRangeFullAbove is the share of the cluster's Service range in use above which ServiceRangeNearlyFull fires.
const ServiceRangeFullAbove = 0.8

// GroupName is the rule group every rule belongs to (a PrometheusRule group, a Cloud Monitoring rule group).
const GroupName = "gpu-tenancy-dra"

// Labels the rules write on their alerts.
const (
	TenantLabel = "tenant"
	ClassLabel  = "class"
	PoolLabel   = "pool"
)

// Label names kube-state-metrics gives allowlisted Kubernetes labels: "label_" and the key with every character
// outside [a-zA-Z0-9_] replaced by "_", then snake-cased, which leaves these lower-case keys as they are
// (k8s.io/kube-state-metrics/v2@v2.20.0 internal/store/utils.go labelName, SanitizeLabelName).
var (
	namespaceTenantLabel = "label_" + sanitize(naming.TenantNamespaceLabel)
	nodePoolLabel        = "label_" + sanitize(naming.PoolLabel)
	pluginComponentLabel = "label_" + sanitize(KubeletPluginComponentLabel)
)

// The NVIDIA DRA driver chart labels its kubelet-plugin pods with this key and value, independent of the release name
// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml).
const (
	KubeletPluginComponentLabel = "nvidia-dra-driver-gpu-component"
	KubeletPluginComponent      = "kubelet-plugin"
)

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func sanitize(key string) string { return invalidLabelChars.ReplaceAllString(key, "_") }

// Jobs are the `job` labels of the two scrapes the rules read. Every selector names its job, so that another
// kube-state-metrics in the same Prometheus (kube-prometheus-stack's, GKE's managed one) or another cluster writing
// to the same Cloud Monitoring project never doubles a series: a join over doubled series fails the whole rule.
type Jobs struct {
	KubeStateMetrics string
	KubeletPlugin    string
}

// JobsFor names the jobs of one platform instance; scope tells apart clusters that share a metrics store.
func JobsFor(scope string) Jobs {
	prefix := "gpu-tenancy-"
	if scope != "" {
		prefix += scope + "-"
	}
	return Jobs{KubeStateMetrics: prefix + "kube-state-metrics", KubeletPlugin: prefix + "dra-kubelet-plugin"}
}

// Params are the thresholds a stack may change.
type Params struct {
	// PendingClaimAfter is how long a pod may wait for its claims before DRAClaimPendingTooLong fires.
	PendingClaimAfter time.Duration
	// QuotaExhaustedFor is how long a tenant must sit at a class's device quota before TenantGPUQuotaExhausted fires.
	QuotaExhaustedFor time.Duration
	// DriverNamespace is where the DRA kubelet plugin runs, the one namespace whose pods and series the plugin rules
	// take for the plugin's; default naming.DriverNamespace.
	DriverNamespace string
	// ExtendedResourceNames are the extended-resource names the catalog's DeviceClasses carry: a pod waiting for one
	// counts as a pod waiting for its claim.
	ExtendedResourceNames []string
	Jobs                  Jobs
	// ServiceAddresses is how many addresses the cluster's Service range gives Services (servicerange.Addresses);
	// zero, when the platform cannot know it, leaves ServiceRangeNearlyFull out.
	ServiceAddresses int64
	// Prices price the classes in the showback recording rules (Recordings); the alerts do not read them.
	Prices Prices
}

// Defaults of Params.
const (
	DefaultPendingClaimAfter = 15 * time.Minute
	DefaultQuotaExhaustedFor = 30 * time.Minute
)

// DefaultParams are the thresholds with the default job names.
func DefaultParams() Params {
	return Params{PendingClaimAfter: DefaultPendingClaimAfter, QuotaExhaustedFor: DefaultQuotaExhaustedFor, Jobs: JobsFor("")}
}

// Rule is one alerting rule.
type Rule struct {
	Name string
	Expr string
	// For is how long the expression must hold before the alert fires.
	For      time.Duration
	Severity Severity
	// Summary and Description are Prometheus templates that refer to alert labels only, as {{ $labels.<name> }};
	// renderers for other alerting systems translate exactly that form.
	Summary     string
	Description string
	// Runbook is the first thing to do.
	Runbook string
	// Metrics are the metric names Expr reads, sorted; they bound what the scrapes must keep.
	Metrics []string
}

// withDefaults fills in the zero thresholds and the driver's namespace.
func (p Params) withDefaults() Params {
	if p.PendingClaimAfter == 0 {
		p.PendingClaimAfter = DefaultPendingClaimAfter
	}
	if p.QuotaExhaustedFor == 0 {
		p.QuotaExhaustedFor = DefaultQuotaExhaustedFor
	}
	if p.DriverNamespace == "" {
		p.DriverNamespace = naming.DriverNamespace
	}
	return p
}

// deviceKeys matches the ResourceQuota keys of devices per class.
var deviceKeys = `resource=~"` + promString(".+"+regexp.QuoteMeta(naming.DeviceQuotaSuffix)) + `"`

// exprs are the selectors and subexpressions the rules and the dashboard's queries share.
type exprs struct {
	p Params
	// inDriverNamespace matches the driver's namespace. The plugin's pods are known by their label, which a tenant
	// may put on its own pods too (pods are the tenant's to write in its namespace: docs/threat-model.md), and its
	// series by the scrape's job, which on GKE scrapes labelled pods of every namespace: both count only in the
	// driver's namespace.
	inDriverNamespace string
	// tenantJoin gives a namespace's series its tenant, as label `tenant`; namespaces without the tenant label keep
	// none. Deduplicated so that two scrapes of one namespace (a restarted kube-state-metrics pod, for one lookback)
	// cannot fail the join.
	tenantJoin string
	// waitedForClaims is, per unscheduled pod that references a ResourceClaim, the seconds since its creation, with
	// its claim and tenant; waitedByName the same for a pod asking for a class by its extended-resource name, or ""
	// when no class has one.
	waitedForClaims, waitedByName string
	// waitingMetrics are the metric names the two read, sorted.
	waitingMetrics []string
}

func newExprs(p Params) exprs {
	x := exprs{p: p, inDriverNamespace: `namespace="` + promString(p.DriverNamespace) + `"`}
	x.tenantJoin = fmt.Sprintf(`* on (namespace) group_left (%s) max by (namespace, %s) (label_replace(%s, "%s", "$1", "%s", "(.+)"))`,
		TenantLabel, TenantLabel, x.ksm("kube_namespace_labels"), TenantLabel, namespaceTenantLabel)

	// The wait of an unscheduled pod, in seconds, for the series of waitsFor that share its namespace, pod and uid.
	waited := func(waitsFor string) string {
		return fmt.Sprintf(`(time() - max by (namespace, pod, uid) (%s)) * on (namespace, pod, uid) (max by (namespace, pod, uid) (%s) == 1) `+
			`* on (namespace, pod, uid) group_right () %s %s`,
			x.ksm("kube_pod_created"), x.ksm("kube_pod_status_scheduled", `condition="false"`), waitsFor, x.tenantJoin)
	}
	x.waitedForClaims = waited(fmt.Sprintf(`max by (namespace, pod, uid, claim_name, resourceclaim_name, resourceclaim_template_name) (%s)`,
		x.ksm("kube_pod_resourceclaim_info")))
	x.waitingMetrics = []string{"kube_namespace_labels", "kube_pod_created", "kube_pod_resourceclaim_info", "kube_pod_status_scheduled"}
	if len(p.ExtendedResourceNames) > 0 {
		// A pod that asks for a class by its extended-resource name has no claim until the scheduler binds it
		// (KEP-5004), so it waits with no claim to name: its request names the class instead. kube-state-metrics
		// writes the name with every character outside [a-zA-Z0-9_] as "_" (k8s.io/kube-state-metrics/v2@v2.20.0
		// internal/store/pod.go, utils.go SanitizeLabelName); each is written back as the tenant wrote it.
		var sanitized []string
		for _, name := range p.ExtendedResourceNames {
			sanitized = append(sanitized, regexp.QuoteMeta(sanitize(name)))
		}
		byName := fmt.Sprintf(`max by (namespace, pod, uid, resource) (%s > 0)`,
			x.ksm("kube_pod_container_resource_requests", `resource=~"`+promString(strings.Join(sanitized, "|"))+`"`))
		for i, name := range p.ExtendedResourceNames {
			byName = fmt.Sprintf(`label_replace(%s, "resourceclaim_name", "%s", "resource", "%s")`, byName,
				promString("none yet: it asks for "+name), promString(sanitized[i]))
		}
		x.waitedByName = waited(byName)
		x.waitingMetrics = append(x.waitingMetrics, "kube_pod_container_resource_requests")
		slices.Sort(x.waitingMetrics)
	}
	return x
}

// ksm selects metric from the kube-state-metrics job, with matchers.
func (x exprs) ksm(metric string, matchers ...string) string {
	return selector(metric, append([]string{`job="` + x.p.Jobs.KubeStateMetrics + `"`}, matchers...)...)
}

// plugin selects metric from the kubelet plugin's scrape, in the driver's namespace.
func (x exprs) plugin(metric string) string {
	return selector(metric, `job="`+x.p.Jobs.KubeletPlugin+`"`, x.inDriverNamespace)
}

// pluginMissing is the GPU nodes (those with a pool label), labels node and pool, where no kubelet-plugin pod of the
// driver's namespace is Running. Judged from the API (kube-state-metrics), not from the plugin's own scrape: a plugin
// pod that does not exist has no scrape target and so no `up` series.
func (x exprs) pluginMissing() string {
	return fmt.Sprintf(`max by (node, %s) (label_replace(%s, "%s", "$1", "%s", "(.+)")) unless on (node) max by (node) (`+
		`max by (namespace, pod, uid, node) (%s) * on (namespace, pod, uid) group_left () (max by (namespace, pod, uid) (%s) == 1) `+
		`* on (namespace, pod, uid) group_left () max by (namespace, pod, uid) (%s))`,
		PoolLabel, x.ksm("kube_node_labels", nodePoolLabel+`!=""`), PoolLabel, nodePoolLabel,
		x.ksm("kube_pod_info", x.inDriverNamespace, `node!=""`), x.ksm("kube_pod_status_phase", x.inDriverNamespace, `phase="Running"`),
		x.ksm("kube_pod_labels", x.inDriverNamespace, pluginComponentLabel+`="`+KubeletPluginComponent+`"`))
}

// servicesHeld counts the Services that hold an address of the cluster's Service range: every one with a cluster IP
// (kube_service_info's cluster_ip label, "None" for a headless Service: k8s.io/kube-state-metrics/v2@v2.20.0
// internal/store/service.go), a tenant's included, since kube-state-metrics reads the Services from the API server.
func (x exprs) servicesHeld() string {
	return fmt.Sprintf(`count(%s)`, x.ksm("kube_service_info", `cluster_ip!=""`, `cluster_ip!="None"`))
}

// Rules returns the alert rules for p. Zero thresholds take their defaults; jobs must be set.
func Rules(p Params) []Rule {
	p = p.withDefaults()
	x := newExprs(p)
	threshold := " > " + strconv.FormatInt(int64(p.PendingClaimAfter/time.Second), 10)
	pendingExpr := x.waitedForClaims + threshold
	if x.waitedByName != "" {
		pendingExpr = "(" + pendingExpr + ") or (" + x.waitedByName + threshold + ")"
	}
	rs := []Rule{
		{
			Name: ClaimPendingTooLong,
			// A pod that references a ResourceClaim and that the scheduler has marked unschedulable waits for its claims:
			// DRA allocates in the scheduler's DynamicResources plugin, so a claim that cannot be allocated keeps its
			// pod unscheduled (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/).
			// The wait is measured from the pod's creation timestamp, not with `for`, so that a restarted evaluator
			// fires at once instead of starting the hold time over.
			Expr:     pendingExpr,
			Severity: Warning,
			Summary:  "Pod {{ $labels.namespace }}/{{ $labels.pod }} of tenant {{ $labels.tenant }} waits for ResourceClaim {{ $labels.resourceclaim_name }}",
			Description: "Pod {{ $labels.pod }} in namespace {{ $labels.namespace }} (tenant {{ $labels.tenant }}) references ResourceClaim " +
				"{{ $labels.resourceclaim_name }} and has not been scheduled for more than " + PromDuration(p.PendingClaimAfter) +
				": its devices cannot be allocated.",
			Runbook: "Run `gpu-tenancy pending` for the claim's classes and the scheduler's reason, and `gpu-tenancy capacity` for free " +
				"devices: none free in the class (add GPU nodes or wait), or a claim the tenant's classes cannot satisfy.",
			Metrics: x.waitingMetrics,
		},
		{
			Name: TenantQuotaExhausted,
			// ResourceQuota counts the devices a namespace's claims request per DeviceClass under
			// <class>.deviceclass.resource.k8s.io/devices (k8s.io/api v0.34.4 core/v1 ResourceClaimsPerClass); the
			// tightest hard limit of several quotas is the one that holds. A zero limit is a class the tenant may not
			// use, not one it used up.
			Expr: fmt.Sprintf(`label_replace(max by (namespace, resource) (%s) >= on (namespace, resource) (min by (namespace, resource) (%s) > 0), "%s", "$1", "resource", "(.+)%s") %s`,
				x.ksm("kube_resourcequota", `type="used"`, deviceKeys), x.ksm("kube_resourcequota", `type="hard"`, deviceKeys),
				ClassLabel, promString(regexp.QuoteMeta(naming.DeviceQuotaSuffix)), x.tenantJoin),
			For:         p.QuotaExhaustedFor,
			Severity:    Info,
			Summary:     "Tenant {{ $labels.tenant }} holds all its {{ $labels.class }} devices",
			Description: "Namespace {{ $labels.namespace }} (tenant {{ $labels.tenant }}) has requested every device its quota allows for class {{ $labels.class }} for " + PromDuration(p.QuotaExhaustedFor) + ": new claims of that class are rejected.",
			Runbook:     "`gpu-tenancy capacity` shows the tenant's requested and allowed devices per class; raise the tenant's gpuQuota for the class in the stack config if it should get more, or ask the tenant to release claims it no longer uses.",
			Metrics:     []string{"kube_namespace_labels", "kube_resourcequota"},
		},
		{
			Name: KubeletPluginPrepareErr,
			// The kubelet plugin counts failed NodePrepareResources calls (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0
			// pkg/metrics/dra_requests.go); a pod whose claim cannot be prepared never starts its containers.
			Expr:        fmt.Sprintf(`sum by (node, driver, error_type) (increase(%s[10m])) > 0`, x.plugin("nvidia_dra_node_prepare_errors_total")),
			For:         5 * time.Minute,
			Severity:    Critical,
			Summary:     "The DRA kubelet plugin on {{ $labels.node }} fails to prepare devices ({{ $labels.error_type }})",
			Description: "The NVIDIA DRA kubelet plugin on node {{ $labels.node }} (driver {{ $labels.driver }}) reported {{ $labels.error_type }} errors preparing devices in the last 10m: pods with claims on that node cannot start.",
			Runbook:     "Read the kubelet plugin's log on the node (`kubectl logs -n <driver namespace> -l " + KubeletPluginComponentLabel + "=" + KubeletPluginComponent + " --all-containers` on that node) and the affected pods' events; if the GPU driver is broken, taint the node `gpu-tenancy.io/maintenance:NoSchedule` (a cordon does not keep tenant DaemonSet pods off it: docs/threat-model.md, Node placement).",
			Metrics:     []string{"nvidia_dra_node_prepare_errors_total"},
		},
		{
			Name: KubeletPluginNotRunning,
			Expr: x.pluginMissing(),
			// Room for a new node to pull and start the plugin before it counts as missing.
			For:         10 * time.Minute,
			Severity:    Critical,
			Summary:     "GPU node {{ $labels.node }} (pool {{ $labels.pool }}) has no running DRA kubelet plugin",
			Description: "No NVIDIA DRA kubelet-plugin pod is Running on GPU node {{ $labels.node }} of pool {{ $labels.pool }}: its GPUs are not published and claims cannot be prepared there.",
			Runbook:     "Check the driver DaemonSet's pods for that node (`kubectl get pods -n <driver namespace> -o wide -l " + KubeletPluginComponentLabel + "=" + KubeletPluginComponent + "`): taints it does not tolerate, a missing node label, or a crash.",
			Metrics:     []string{"kube_node_labels", "kube_pod_info", "kube_pod_labels", "kube_pod_status_phase"},
		},
	}
	if p.ServiceAddresses > 0 {
		full := strconv.FormatFloat(ServiceRangeFullAbove*100, 'f', -1, 64) + "%"
		rs = append(rs, Rule{
			Name: ServiceRangeNearlyFull,
			// A tenant counts only the Services it holds. The range's size is the platform's to know (the range it made
			// the cluster with, or read from an existing cluster's ServiceCIDRs), since kube-state-metrics exposes no
			// ServiceCIDR.
			Expr:     fmt.Sprintf(`%s / %d > %s`, x.servicesHeld(), p.ServiceAddresses, strconv.FormatFloat(ServiceRangeFullAbove, 'f', -1, 64)),
			For:      15 * time.Minute,
			Severity: Warning,
			Summary:  "The cluster's Service range is more than " + full + " used",
			Description: fmt.Sprintf("Services hold more than %s of the %d addresses of the cluster's Service range; when it is "+
				"full, every tenant's next Service and vCluster fail to get an address.", full, p.ServiceAddresses),
			Runbook: "`gpu-tenancy capacity` shows the range, what is held and each tenant's Services against its quota " +
				"(serviceAddresses): lower the tenants' objectQuota.services, or widen the range: on an existing cluster with a " +
				"further ServiceCIDR, on GKE or Kapsule with serviceRange.cidr, which replaces the cluster.",
			Metrics: []string{"kube_service_info"},
		})
	}
	return rs
}

// selector writes metric{matchers}.
func selector(metric string, matchers ...string) string {
	return metric + "{" + strings.Join(matchers, ", ") + "}"
}

// promString escapes s for a double-quoted PromQL string, where a backslash starts an escape
// (https://prometheus.io/docs/prometheus/latest/querying/basics/#string-literals).
func promString(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }

// PromDuration writes d the way Prometheus durations are usually written: whole hours, minutes or seconds.
func PromDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	default:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
}
