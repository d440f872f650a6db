// Package vcluster installs the vCluster Platform and one virtual cluster per tenant. A tenant's vCluster sees only
// the host DeviceClasses granted to it (by label) and syncs its ResourceClaims to the host, where the host's DRA driver,
// admission policy and quotas apply.
package vcluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Chart defaults (gpu-facts 4.3: latest stable vCluster tag v0.36.1; repository https://charts.loft.sh).
const (
	ChartRepo         = "https://charts.loft.sh"
	VClusterChartName = "vcluster"
	VClusterVersion   = "0.36.1"
)

// DefaultVirtualClusterChart is the vCluster chart installed when VirtualClusterArgs.Chart is left empty.
var DefaultVirtualClusterChart = helmchart.Chart{Repo: ChartRepo, Name: VClusterChartName, Version: VClusterVersion}

// Where vCluster writes the tenant kubeconfig on the host: Secret vc-<vcluster name>, key config
// (vcluster pkg/util/kubeconfig; gpu-facts 4.6).
const (
	KubeconfigSecretPrefix = "vc-"
	KubeconfigSecretKey    = "config"
)

// maxReleaseName is Helm's limit on release names.
const maxReleaseName = 53

// awaitTimeoutSeconds gives a first start time to pull images (loft-sh/vcluster-terraform-modules uses 600).
const awaitTimeoutSeconds = 600

// ResourceList holds Kubernetes quantities; an empty field keeps the chart default.
type ResourceList struct {
	CPU    string
	Memory string
}

// ResourceRequirements are the control plane container's requests and limits.
type ResourceRequirements struct {
	Requests ResourceList
	Limits   ResourceList
}

// Persistence configures the control plane's volume; empty fields keep the chart defaults (5Gi, default class).
type Persistence struct {
	Size         string
	StorageClass string
}

// PlatformConnection is what a vCluster needs to register with the vCluster Platform.
type PlatformConnection struct {
	// Host is the platform's host name, for information; the key Secret carries it too.
	Host string
	// Project is the platform project the vCluster is imported into.
	Project string
	// APIKeySecretName and APIKeySecretNamespace locate the Secret holding the platform access key
	// (keys accessKey, host, project, insecure; vcluster pkg/platform/secret.go).
	APIKeySecretName      string
	APIKeySecretNamespace string
}

// VirtualClusterArgs configure one tenant's virtual cluster.
type VirtualClusterArgs struct {
	// Tenant names the vCluster (and its Helm release); a DNS label.
	Tenant string
	// Namespace is the tenant's host namespace, created elsewhere.
	Namespace pulumi.StringInput
	// Chart defaults to DefaultVirtualClusterChart. With a local Path, Version names the vCluster release whose
	// images to run (default VClusterVersion): the chart in the Go module carries a placeholder version.
	Chart helmchart.Chart
	// ClassSelectorLabel is the DeviceClass label that grants a class to this tenant; only classes labelled
	// "<ClassSelectorLabel>: true" are synced into the vCluster. Required.
	ClassSelectorLabel string
	// GPUTolerations are added to every pod the vCluster syncs to the host, so GPU workloads reach tainted GPU nodes.
	GPUTolerations []cluster.Taint
	// ControlPlane sets the control plane container's requests and limits.
	ControlPlane ResourceRequirements
	// Persistence sets the control plane's volume.
	Persistence Persistence
	// KubeconfigServer is the server URL written into the exported kubeconfig; empty keeps vCluster's
	// https://localhost:8443, usable only through a port-forward.
	KubeconfigServer string
	// Platform connects the vCluster to the vCluster Platform; DRA sync is a platform-licensed feature (gpu-facts 4.2).
	Platform *PlatformConnection
	// Await waits for the vCluster to become ready and reads its kubeconfig. Leave false where nothing can run
	// (a control plane without kubelets).
	Await bool
}

// VirtualCluster is one tenant's virtual cluster.
type VirtualCluster struct {
	pulumi.ResourceState

	Release *helmv3.Release
	// KubeconfigSecretNamespace and KubeconfigSecretName locate the host Secret holding the tenant kubeconfig
	// (key KubeconfigSecretKey).
	KubeconfigSecretNamespace pulumi.StringOutput
	KubeconfigSecretName      pulumi.StringOutput
	// Kubeconfig is the tenant kubeconfig, always secret; empty unless Await.
	Kubeconfig pulumi.StringOutput
}

var taintEffects = map[string]bool{"NoSchedule": true, "PreferNoSchedule": true, "NoExecute": true}

func (a *VirtualClusterArgs) validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(a.Tenant) {
		errs = append(errs, fmt.Errorf("tenant %q: %s", a.Tenant, msg))
	}
	if len(a.Tenant) > maxReleaseName {
		errs = append(errs, fmt.Errorf("tenant %q: longer than the %d characters a Helm release name allows", a.Tenant, maxReleaseName))
	}
	if a.Namespace == nil {
		errs = append(errs, errors.New("namespace is required"))
	}
	if a.ClassSelectorLabel == "" {
		errs = append(errs, errors.New("class selector label is required: without it every host DeviceClass, "+
			"the driver's unrestricted ones included, is synced into the vCluster"))
	} else {
		for _, msg := range validation.IsQualifiedName(a.ClassSelectorLabel) {
			errs = append(errs, fmt.Errorf("class selector label %q: %s", a.ClassSelectorLabel, msg))
		}
	}
	for _, t := range a.GPUTolerations {
		if t.Key == "" || !taintEffects[t.Effect] {
			errs = append(errs, fmt.Errorf("GPU toleration %+v: needs a key and an effect NoSchedule, PreferNoSchedule or NoExecute", t))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("GPU toleration %q value %q: %s", t.Key, t.Value, msg))
		}
	}
	// A slice, not a map: errors come out in the same order every run.
	for _, q := range []struct{ field, value string }{
		{"control plane CPU request", a.ControlPlane.Requests.CPU}, {"control plane memory request", a.ControlPlane.Requests.Memory},
		{"control plane CPU limit", a.ControlPlane.Limits.CPU}, {"control plane memory limit", a.ControlPlane.Limits.Memory},
		{"persistence size", a.Persistence.Size},
	} {
		if _, err := resource.ParseQuantity(q.value); q.value != "" && err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", q.field, q.value, err))
		}
	}
	if a.KubeconfigServer != "" {
		// vcluster pkg/config/validation.go refuses anything else at start-up.
		if u, err := url.Parse(a.KubeconfigServer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
			errs = append(errs, fmt.Errorf("kubeconfig server %q: must be an http(s) URL with a host", a.KubeconfigServer))
		}
	}
	if p := a.Platform; p != nil && (p.APIKeySecretName == "" || p.APIKeySecretNamespace == "") {
		errs = append(errs, errors.New("platform connection needs the access key Secret's name and namespace"))
	}
	return errors.Join(errs...)
}

// enforcedToleration writes a taint's toleration in vCluster's syntax (vcluster pkg/util/toleration ParseToleration):
// key=value:Effect tolerates that value, key:Effect any value.
func enforcedToleration(t cluster.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

func resourceMap(r ResourceList) map[string]string {
	m := map[string]string{}
	if r.CPU != "" {
		m["cpu"] = r.CPU
	}
	if r.Memory != "" {
		m["memory"] = r.Memory
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// virtualClusterValues builds the chart values; args must be valid.
func virtualClusterValues(a *VirtualClusterArgs) vclusterValues {
	v := vclusterValues{Sync: syncValues{
		ToHost: syncToHostValues{
			ResourceClaims:         enableSwitch{Enabled: true},
			ResourceClaimTemplates: enableSwitch{Enabled: true},
		},
		FromHost: syncFromHostValues{DeviceClasses: deviceClassSyncValues{
			Enabled:  true,
			Selector: labelSelector{MatchLabels: map[string]string{a.ClassSelectorLabel: "true"}},
		}},
	}}
	if len(a.GPUTolerations) > 0 {
		pods := &podSyncValues{}
		for _, t := range a.GPUTolerations {
			pods.EnforceTolerations = append(pods.EnforceTolerations, enforcedToleration(t))
		}
		v.Sync.ToHost.Pods = pods
	}

	sts := &statefulSetValues{}
	if a.Chart.Path != "" {
		tag := a.Chart.Version
		if tag == "" {
			tag = VClusterVersion
		}
		sts.Image = &imageValues{Tag: tag}
	}
	if req, lim := resourceMap(a.ControlPlane.Requests), resourceMap(a.ControlPlane.Limits); req != nil || lim != nil {
		sts.Resources = &resourceValues{Requests: req, Limits: lim}
	}
	if a.Persistence != (Persistence{}) {
		sts.Persistence = &persistenceValues{VolumeClaim: volumeClaimValues{
			Size: a.Persistence.Size, StorageClass: a.Persistence.StorageClass,
		}}
	}
	cp := &controlPlaneValues{}
	if *sts != (statefulSetValues{}) {
		cp.StatefulSet = sts
	}
	if a.KubeconfigServer != "" {
		v.ExportKubeConfig = &exportKubeConfigValues{Server: a.KubeconfigServer}
		// The proxy's certificate must name the host the kubeconfig points at.
		u, _ := url.Parse(a.KubeconfigServer)
		cp.Proxy = &proxyValues{ExtraSANs: []string{u.Hostname()}}
	}
	if *cp != (controlPlaneValues{}) {
		v.ControlPlane = cp
	}
	if p := a.Platform; p != nil {
		v.Platform = &platformConnValues{
			APIKey:  platformAPIKeyValues{SecretName: p.APIKeySecretName, Namespace: p.APIKeySecretNamespace, CreateRBAC: true},
			Project: p.Project,
		}
	}
	return v
}

// NewVirtualCluster installs a tenant's vCluster into its host namespace.
func NewVirtualCluster(ctx *pulumi.Context, name string, args *VirtualClusterArgs, opts ...pulumi.ResourceOption) (*VirtualCluster, error) {
	if args == nil {
		return nil, errors.New("creating virtual cluster: args are required")
	}
	if err := args.validate(); err != nil {
		return nil, fmt.Errorf("creating virtual cluster %q: %w", name, err)
	}
	a := *args
	if a.Chart == (helmchart.Chart{}) {
		a.Chart = DefaultVirtualClusterChart
	}
	vals, err := helmchart.Values(virtualClusterValues(&a))
	if err != nil {
		return nil, fmt.Errorf("creating virtual cluster %q: %w", name, err)
	}

	vc := &VirtualCluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:vcluster:VirtualCluster", name, vc, opts...); err != nil {
		return nil, fmt.Errorf("registering virtual cluster %q: %w", name, err)
	}
	releaseArgs := a.Chart.ReleaseArgs(a.Tenant, "")
	releaseArgs.Namespace = a.Namespace.ToStringOutput().ToStringPtrOutput()
	releaseArgs.Values = vals
	releaseArgs.SkipAwait = pulumi.Bool(!a.Await)
	if a.Await {
		releaseArgs.Timeout = pulumi.Int(awaitTimeoutSeconds)
	}
	release, err := helmv3.NewRelease(ctx, name, releaseArgs, pulumi.Parent(vc))
	if err != nil {
		return nil, fmt.Errorf("creating virtual cluster release %q: %w", a.Tenant, err)
	}

	secretName := KubeconfigSecretPrefix + a.Tenant
	vc.Release = release
	vc.KubeconfigSecretNamespace = a.Namespace.ToStringOutput()
	vc.KubeconfigSecretName = pulumi.String(secretName).ToStringOutput()
	vc.Kubeconfig = pulumi.ToSecret(pulumi.String("")).(pulumi.StringOutput)
	outputs := pulumi.Map{
		"kubeconfigSecretNamespace": vc.KubeconfigSecretNamespace,
		"kubeconfigSecretName":      vc.KubeconfigSecretName,
	}
	if a.Await {
		if vc.Kubeconfig, err = readKubeconfig(ctx, name, release, a.Namespace, secretName, vc); err != nil {
			return nil, err
		}
		outputs["kubeconfig"] = vc.Kubeconfig
	}
	if err := ctx.RegisterResourceOutputs(vc, outputs); err != nil {
		return nil, fmt.Errorf("registering virtual cluster %q outputs: %w", name, err)
	}
	return vc, nil
}

// readKubeconfig reads the kubeconfig vCluster exported once the release is ready. The Secret's id derives from the
// release's id, so a preview of a new release skips the read instead of failing on a Secret that does not exist yet.
func readKubeconfig(ctx *pulumi.Context, name string, release *helmv3.Release, namespace pulumi.StringInput,
	secretName string, vc *VirtualCluster) (pulumi.StringOutput, error) {
	id := pulumi.All(release.ID(), namespace).ApplyT(func(v []any) pulumi.ID {
		return pulumi.ID(fmt.Sprintf("%s/%s", v[1], secretName))
	}).(pulumi.IDOutput)
	secret, err := corev1.GetSecret(ctx, name+"-kubeconfig", id, nil, pulumi.Parent(vc),
		pulumi.DependsOn([]pulumi.Resource{release}), pulumi.AdditionalSecretOutputs([]string{"data"}))
	if err != nil {
		return pulumi.StringOutput{}, fmt.Errorf("reading virtual cluster kubeconfig Secret %q: %w", secretName, err)
	}
	config := secret.Data.ApplyT(func(data map[string]string) (string, error) {
		enc, ok := data[KubeconfigSecretKey]
		if !ok {
			return "", fmt.Errorf("kubeconfig Secret %q has no key %q", secretName, KubeconfigSecretKey)
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return "", fmt.Errorf("decoding kubeconfig Secret %q: %w", secretName, err)
		}
		return string(raw), nil
	}).(pulumi.StringOutput)
	return pulumi.ToSecret(config).(pulumi.StringOutput), nil
}
