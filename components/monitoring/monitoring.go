// Package monitoring provisions the platform's alerts with `up`: kube-state-metrics (v2.20.0 or later, for
// kube_pod_resourceclaim_info), scrapes of it and of the NVIDIA DRA kubelet plugin, and the alert and showback
// recording rules of package rules, rendered for the cluster's flavour. On prometheus-operator clusters (Scaleway,
// existing) they become PrometheusRules and PodMonitors; on GKE, Managed Service for Prometheus ClusterPodMonitorings,
// one Cloud Monitoring alert policy per alert rule, with the same PromQL, and ClusterRules for the recording rules.
// The alert policies need the pulumi-gcp SDK: package cloudmonitoring creates them and registers itself here, so a
// program that never monitors GKE does not link it.
package monitoring

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/dashboard"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NoTenantsPolicy is the NetworkPolicy that keeps tenant namespaces from reaching the monitoring namespace.
const NoTenantsPolicy = "gpu-tenancy-no-tenants"

// DefaultDriverNamespace is where the NVIDIA DRA driver runs unless told otherwise.
const DefaultDriverNamespace = dra.DefaultNamespace

// maxScope keeps the job names, which also name Kubernetes objects and Cloud Monitoring labels, within 63 characters.
const maxScope = 63 - len("gpu-tenancy--dra-kubelet-plugin")

// MonitoringArgs configure the alerts of one cluster.
type MonitoringArgs struct {
	// Spec is the stack config; it must pass Spec.Validate. Whether to call NewMonitoring at all is Spec.EnabledFor.
	Spec Spec
	// Flavour picks the renderer: GKE gets Managed Service for Prometheus and Cloud Monitoring, the others
	// prometheus-operator objects.
	Flavour cluster.Flavour
	// Project is the GCP project of the alert policies; required on GKE.
	Project string
	// DriverNamespace is where the DRA kubelet plugin runs; default DefaultDriverNamespace.
	DriverNamespace string
	// Scope tells this cluster's scrape jobs from other clusters' in a shared metrics store (all GKE clusters of a
	// project share Cloud Monitoring); default the stack name, lower-cased to a DNS label.
	Scope string
	// Prices price the GPU classes in the showback recording rules; without prices only the devices are recorded. The
	// Platform checks the priced classes against the catalog.
	Prices rules.Prices
	// ExtendedResourceNames are the extended-resource names the catalog's DeviceClasses carry, which the pending alert
	// reads in pods' requests.
	ExtendedResourceNames []string
	// ServiceAddresses is how many addresses the cluster's Service range gives Services, which
	// ServiceRangeNearlyFull weighs their use against; zero, when the platform does not know it, leaves that alert out.
	ServiceAddresses int64
	// Placement is where kube-state-metrics runs: the platform pool when the cluster has one
	// (cluster.Cluster.PlatformPlacement).
	Placement cluster.Placement
}

// Monitoring is the installed alerting.
type Monitoring struct {
	pulumi.ResourceState

	// Namespace holds kube-state-metrics.
	Namespace pulumi.StringOutput
	// KubeStateMetrics is its Helm release.
	KubeStateMetrics *helmchart.Release
	// Jobs are the scrape jobs the rules read.
	Jobs rules.Jobs
	// Rules are the alert rules as rendered.
	Rules []rules.Rule
	// Recordings are the showback recording rules as rendered.
	Recordings []rules.Recording
	// AlertPolicies are the names of the Cloud Monitoring policies, one per rule, on GKE only.
	AlertPolicies []pulumi.StringOutput
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// defaultScope turns a stack name into a DNS label.
func defaultScope(stack string) string {
	s := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(stack), "-"), "-")
	if len(s) > maxScope {
		s = strings.TrimRight(s[:maxScope], "-")
	}
	return s
}

// WithDefaults fills in the namespaces, the scope (from the stack's name), the chart and the image tag.
func (a MonitoringArgs) WithDefaults(stack string) MonitoringArgs {
	if a.Spec.Namespace == "" {
		a.Spec.Namespace = DefaultNamespace
	}
	if a.DriverNamespace == "" {
		a.DriverNamespace = DefaultDriverNamespace
	}
	if a.Scope == "" {
		a.Scope = defaultScope(stack)
	}
	if a.Spec.KubeStateMetrics.Chart == (helmchart.Chart{}) {
		a.Spec.KubeStateMetrics.Chart = DefaultKubeStateMetricsChart
	}
	if a.Spec.KubeStateMetrics.ImageTag == "" {
		a.Spec.KubeStateMetrics.ImageTag = rules.KubeStateMetricsVersion
	}
	if g := &a.Spec.Grafana; g.Namespace != "" {
		if g.Label == "" {
			g.Label = DefaultGrafanaLabel
		}
		if g.LabelValue == "" {
			g.LabelValue = DefaultGrafanaLabelValue
		}
	}
	return a
}

// Validate checks what the wiring hands over besides the spec and the prices (Spec.ValidateFor and Prices.Validate
// own those): the flavour, a GCP project on GKE, the driver's namespace and the scope, at path.
func (a *MonitoringArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e := fieldcheck.OneOf(path.Child("flavour"), string(a.Flavour), cluster.Flavours); e != nil {
		errs = append(errs, e)
	}
	if a.Flavour == cluster.GKE && a.Project == "" {
		errs = append(errs, field.Required(path.Child("project"), "the GCP project the alert policies live in"))
	}
	if a.DriverNamespace != "" {
		errs = append(errs, fieldcheck.DNSLabel(path.Child("driverNamespace"), a.DriverNamespace, validation.DNS1123LabelMaxLength)...)
	}
	if a.Scope != defaultScope(a.Scope) || len(a.Scope) > maxScope {
		errs = append(errs, field.Invalid(path.Child("scope"), a.Scope, fmt.Sprintf("must be a DNS label of at most %d characters", maxScope)))
	}
	return errs
}

// NewMonitoring installs kube-state-metrics, the scrapes and the alerts for the flavour. opts carry the cluster's
// kubernetes provider, which the children inherit (cluster.Cluster.ResourceOptions). GCP alert policies use the
// default (or a passed) gcp provider and are never deleted with the cluster: they live in the project and would
// otherwise be left behind when the cluster is destroyed.
func NewMonitoring(ctx *pulumi.Context, name string, args *MonitoringArgs, opts ...pulumi.ResourceOption) (*Monitoring, error) {
	if args == nil {
		return nil, errors.New("creating monitoring: args are required")
	}
	cfg := args.WithDefaults(ctx.Stack())
	path := field.NewPath("monitoring")
	errs := cfg.Spec.ValidateFor(path, cfg.Flavour)
	errs = append(errs, cfg.Prices.Validate(field.NewPath("prices"), cfg.Prices.Classes())...)
	errs = append(errs, cfg.Validate(path)...)
	if cfg.Flavour == cluster.GKE && !AlertPoliciesRegistered() {
		errs = append(errs, AlertPoliciesNotIncluded(path.Child("flavour")))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating monitoring %q: %w", name, errs.ToAggregate())
	}
	m := &Monitoring{Jobs: rules.JobsFor(cfg.Scope)}
	params := cfg.Spec.params(m.Jobs)
	params.Prices, params.DriverNamespace, params.ExtendedResourceNames = cfg.Prices, cfg.DriverNamespace, cfg.ExtendedResourceNames
	params.ServiceAddresses = cfg.ServiceAddresses
	m.Rules, m.Recordings = rules.Rules(params), rules.Recordings(params)
	opts = append(opts, pulumi.Transformations([]pulumi.ResourceTransformation{outliveCluster}))
	if err := ctx.RegisterComponentResource("gpu-tenancy:monitoring:Monitoring", name, m, opts...); err != nil {
		return nil, fmt.Errorf("registering monitoring %q: %w", name, err)
	}

	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(cfg.Spec.Namespace), Labels: managedLabels(nil)},
	}, pulumi.Parent(m))
	if err != nil {
		return nil, fmt.Errorf("creating monitoring namespace %q: %w", cfg.Spec.Namespace, err)
	}
	// kube-state-metrics serves every namespace's pods, claims and quotas by name, with no authentication: no tenant
	// namespace may reach it (docs/threat-model.md, "Cloud identity and node services"). Every other namespace may, so
	// whichever Prometheus the cluster runs still scrapes it.
	if _, err := networkingv1.NewNetworkPolicy(ctx, name+"-no-tenants", &networkingv1.NetworkPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(NoTenantsPolicy), Namespace: ns.Metadata.Name().Elem(), Labels: managedLabels(nil)},
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{},
			PolicyTypes: pulumi.ToStringArray([]string{"Ingress"}),
			Ingress: networkingv1.NetworkPolicyIngressRuleArray{networkingv1.NetworkPolicyIngressRuleArgs{
				From: networkingv1.NetworkPolicyPeerArray{networkingv1.NetworkPolicyPeerArgs{
					NamespaceSelector: &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{
						metav1.LabelSelectorRequirementArgs{Key: pulumi.String(naming.TenantNamespaceLabel), Operator: pulumi.String("DoesNotExist")},
					}},
				}},
			}},
		},
	}, pulumi.Parent(m), pulumi.DeletedWith(ns)); err != nil {
		return nil, fmt.Errorf("creating the monitoring namespace's network policy: %w", err)
	}
	vals, err := helmchart.Values(chartValues(rules.KubeStateMetrics(m.Rules, m.Recordings...), cfg.Spec.KubeStateMetrics.ImageTag, cfg.Placement))
	if err != nil {
		return nil, fmt.Errorf("creating kube-state-metrics release: %w", err)
	}
	releaseArgs := cfg.Spec.KubeStateMetrics.Chart.ReleaseArgs(KubeStateMetricsRelease, cfg.Spec.Namespace)
	releaseArgs.Values = vals
	release, err := helmchart.NewRelease(ctx, name+"-kube-state-metrics", releaseArgs, pulumi.Parent(m), pulumi.DependsOn([]pulumi.Resource{ns}))
	if err != nil {
		return nil, fmt.Errorf("creating kube-state-metrics release %q: %w", KubeStateMetricsRelease, err)
	}

	outputs := pulumi.Map{"namespace": ns.Metadata.Name().Elem(), "kubeStateMetrics": release.Name}
	switch cfg.Flavour {
	case cluster.GKE:
		if err := m.renderGKE(ctx, name, &cfg); err != nil {
			return nil, err
		}
		var names pulumi.StringArray
		for _, n := range m.AlertPolicies {
			names = append(names, n)
		}
		outputs["alertPolicies"] = names
	default:
		if err := m.renderOperator(ctx, name, &cfg, ns); err != nil {
			return nil, err
		}
	}

	if g := cfg.Spec.Grafana; g.Namespace != "" {
		if err := m.shipDashboard(ctx, name, params, cfg.Scope, g); err != nil {
			return nil, err
		}
		outputs["dashboard"] = pulumi.String(DashboardConfigMap(cfg.Scope))
	}

	m.Namespace = ns.Metadata.Name().Elem()
	m.KubeStateMetrics = release
	if err := ctx.RegisterResourceOutputs(m, outputs); err != nil {
		return nil, fmt.Errorf("registering monitoring %q outputs: %w", name, err)
	}
	return m, nil
}

// DashboardConfigMap names the ConfigMap that carries the dashboard of the cluster of scope.
func DashboardConfigMap(scope string) string { return "gpu-tenancy-" + scope + "-dashboard" }

// DashboardUID is the dashboard's uid in Grafana, which takes at most 40 characters: one per cluster, so that two
// clusters' dashboards in one Grafana never replace each other. A scope too long for it is cut and told apart by a
// hash of the whole.
func DashboardUID(scope string) string {
	const prefix, most = "gpu-tenancy-", 40
	if len(prefix)+len(scope) <= most {
		return prefix + scope
	}
	sum := sha256.Sum256([]byte(scope))
	tail := "-" + hex.EncodeToString(sum[:4])
	return prefix + scope[:most-len(prefix)-len(tail)] + tail
}

// shipDashboard puts the dashboard, with this cluster's jobs and Service range, into a ConfigMap in the Grafana
// namespace g names, labelled for its dashboard sidecar.
func (m *Monitoring) shipDashboard(ctx *pulumi.Context, name string, params rules.Params, scope string, g GrafanaSpec) error {
	raw, err := dashboard.JSON(params, scope, DashboardUID(scope), "GPU tenancy: "+scope)
	if err != nil {
		return fmt.Errorf("creating the dashboard of monitoring %q: %w", name, err)
	}
	if _, err := corev1.NewConfigMap(ctx, name+"-dashboard", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(DashboardConfigMap(scope)), Namespace: pulumi.String(g.Namespace),
			Labels: managedLabels(map[string]string{g.Label: g.LabelValue})},
		Data: pulumi.StringMap{DashboardConfigMap(scope) + ".json": pulumi.String(raw)},
	}, pulumi.Parent(m)); err != nil {
		return fmt.Errorf("creating the dashboard ConfigMap in namespace %s: %w", g.Namespace, err)
	}
	return nil
}

// outliveCluster keeps alert policies from being deleted with the cluster. A transformation of the component runs
// after those it was given (pulumi sdk v3.274.1 go/pulumi/context.go applyTransformations: own, then the parent's),
// and the option set it returns replaces theirs, so the DeletedWith that cluster.Cluster.ResourceOptions adds to
// in-cluster objects is undone for these alone. It knows them by their type token: their Go type is
// cloudmonitoring's, which this package does not import.
func outliveCluster(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	if args.Type != alertPolicyType {
		return nil
	}
	return &pulumi.ResourceTransformationResult{Props: args.Props, Opts: append(args.Opts, pulumi.DeletedWith(nil))}
}

func managedLabels(extra map[string]string) pulumi.StringMap {
	l := pulumi.StringMap{naming.ManagedByLabel: pulumi.String(naming.ManagedBy)}
	for k, v := range extra {
		l[k] = pulumi.String(v)
	}
	return l
}

// untyped turns a typed spec into the map a CustomResource carries; JSON tags spell each field once.
func untyped(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m)
}

type customResource struct {
	resource, apiVersion, kind, objectName string
	namespace                              pulumi.StringInput
	labels                                 map[string]string
	spec                                   any
}

func (m *Monitoring) newCustomResource(ctx *pulumi.Context, c customResource) error {
	spec, err := untyped(c.spec)
	if err != nil {
		return fmt.Errorf("encoding %s %q: %w", c.kind, c.objectName, err)
	}
	meta := &metav1.ObjectMetaArgs{Name: pulumi.String(c.objectName), Labels: managedLabels(c.labels)}
	if c.namespace != nil {
		meta.Namespace = c.namespace
	}
	_, err = apiextensions.NewCustomResource(ctx, c.resource, &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String(c.apiVersion), Kind: pulumi.String(c.kind), Metadata: meta,
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}, pulumi.Parent(m))
	if err != nil {
		return fmt.Errorf("creating %s %q: %w", c.kind, c.objectName, err)
	}
	return nil
}

// renderOperator writes the alert rules and the recording rules as two PrometheusRules, and the scrapes as
// PodMonitors.
func (m *Monitoring) renderOperator(ctx *pulumi.Context, name string, cfg *MonitoringArgs, ns *corev1.Namespace) error {
	namespace := ns.Metadata.Name().Elem()
	labels := cfg.Spec.PrometheusOperator.Labels
	for _, c := range []customResource{
		{name + "-kube-state-metrics", operatorAPIVersion, podMonitorKind, m.Jobs.KubeStateMetrics, namespace, labels,
			kubeStateMetricsPodMonitor(cfg.Spec.Namespace, m.Jobs)},
		{name + "-dra-kubelet-plugin", operatorAPIVersion, podMonitorKind, m.Jobs.KubeletPlugin, namespace, labels,
			kubeletPluginPodMonitor(cfg.DriverNamespace, m.Jobs)},
		{name + "-rules", operatorAPIVersion, prometheusRuleKind, PrometheusRuleName, namespace, labels,
			prometheusRuleSpec{Groups: rules.Groups(m.Rules)}},
		{name + "-showback", operatorAPIVersion, prometheusRuleKind, ShowbackRulesName, namespace, labels,
			prometheusRuleSpec{Groups: rules.ShowbackGroups(m.Recordings)}},
	} {
		if err := m.newCustomResource(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// renderGKE writes the scrapes as ClusterPodMonitorings, each alert rule as a Cloud Monitoring alert policy and the
// recording rules as ClusterRules for the managed rule evaluator.
func (m *Monitoring) renderGKE(ctx *pulumi.Context, name string, cfg *MonitoringArgs) error {
	for _, c := range []customResource{
		{name + "-kube-state-metrics", gmpAPIVersion, clusterPodMonitoringKind, m.Jobs.KubeStateMetrics, nil, nil,
			kubeStateMetricsClusterPodMonitoring()},
		{name + "-dra-kubelet-plugin", gmpAPIVersion, clusterPodMonitoringKind, m.Jobs.KubeletPlugin, nil, nil,
			kubeletPluginClusterPodMonitoring(cfg.DriverNamespace)},
		{name + "-showback", gmpAPIVersion, clusterRulesKind, ShowbackRulesName, nil, nil,
			clusterRulesSpec{Groups: rules.ShowbackGroups(m.Recordings)}},
	} {
		if err := m.newCustomResource(ctx, c); err != nil {
			return err
		}
	}
	prefix := "gpu-tenancy " + cfg.Scope + ": "
	userLabels := map[string]string{"managed-by": naming.ManagedBy, "gpu-tenancy-scope": cfg.Scope}
	for _, r := range m.Rules {
		policy, err := newAlertPolicy(ctx, name+"-"+kebab(r.Name), AlertPolicy{Rule: r, Project: cfg.Project,
			DisplayName: prefix + r.Name, NotificationChannels: cfg.Spec.GKE.NotificationChannels, UserLabels: userLabels},
			pulumi.Parent(m))
		if err != nil {
			return fmt.Errorf("creating alert policy %q: %w", r.Name, err)
		}
		m.AlertPolicies = append(m.AlertPolicies, policy)
	}
	return nil
}

var (
	wordAfterLower   = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	wordAfterAcronym = regexp.MustCompile(`([A-Z]+)([A-Z][a-z])`)
)

// kebab writes an alert name (DRAClaimPendingTooLong) as a resource name (dra-claim-pending-too-long).
func kebab(s string) string {
	s = wordAfterLower.ReplaceAllString(s, "$1-$2")
	return strings.ToLower(wordAfterAcronym.ReplaceAllString(s, "$1-$2"))
}
