package vcluster

import (
	"errors"
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Platform chart defaults. 4.11.2 is a stable tag of loft-sh/loft (the chart's source, published as vcluster-platform),
// at least the v4.11.0 vCluster v0.36.1 requires (loft-sh/vcluster v0.36.1 pkg/platform/version.go), and its chart can
// read the admin password from a Secret (admin.passwordSecretRef, loft-sh/loft v4.11.2 chart/values.yaml).
const (
	PlatformChartName        = "vcluster-platform"
	PlatformVersion          = "4.11.2"
	PlatformReleaseName      = "vcluster-platform"
	DefaultPlatformNamespace = naming.PlatformNamespace
	// DefaultProject is the project every platform starts with.
	DefaultProject = "default"
	// APIKeySecretName is the Secret a vCluster reads its platform access key from, in its own namespace: the name and
	// place vCluster looks in by default (loft-sh/vcluster v0.36.1 pkg/platform/secret.go DefaultPlatformSecretName).
	APIKeySecretName = "vcluster-platform-api-key"
	// APIKeyResourceSuffix follows the vCluster's name in the name of its key Secret's resource.
	APIKeyResourceSuffix = "-platform-api-key"
)

// DefaultPlatformChart is the platform chart installed when PlatformArgs.Chart is left empty.
var DefaultPlatformChart = helmchart.Chart{Repo: ChartRepo, Name: PlatformChartName, Version: PlatformVersion}

// Keys of the platform's credentials Secret.
const (
	credentialsSecretName = "vcluster-platform-credentials"
	adminPasswordKey      = "adminPassword"
	licenseTokenKey       = "licenseToken"
)

// PlatformArgs configure the vCluster Platform. A stack's `platform` block decodes into the tagged fields; the
// secrets come from their own config keys.
type PlatformArgs struct {
	// Chart defaults to DefaultPlatformChart.
	Chart helmchart.Chart `json:"chart"`
	// Host is the platform's public host name (no scheme), served through an ingress.
	Host string `json:"host"`
	// Namespace defaults to DefaultPlatformNamespace.
	Namespace string `json:"-"`
	// AdminPassword is the admin user's password. Required; keep it a secret.
	AdminPassword pulumi.StringInput `json:"-"`
	// LicenseToken is an optional platform license token; keep it a secret.
	LicenseToken pulumi.StringInput `json:"-"`
	// Placement is where the platform runs: the platform pool when the cluster has one
	// (cluster.Cluster.PlatformPlacement).
	Placement cluster.Placement `json:"-"`
}

// Validate checks the chart, the host and the namespace; the credentials are the caller's to provide.
func (a *PlatformArgs) Validate(path *field.Path) field.ErrorList {
	errs := a.Chart.Validate(path.Child("chart"))
	if a.Host == "" {
		errs = append(errs, field.Required(path.Child("host"), "the platform's public host name"))
	} else {
		errs = append(errs, fieldcheck.DNSSubdomain(path.Child("host"), a.Host, validation.DNS1123SubdomainMaxLength)...)
	}
	if a.Namespace != "" {
		errs = append(errs, fieldcheck.DNSLabel(path.Child("namespace"), a.Namespace, validation.DNS1123LabelMaxLength)...)
	}
	return errs
}

// Platform is the installed vCluster Platform.
type Platform struct {
	pulumi.ResourceState

	Namespace pulumi.StringOutput
	// URL is where the platform is served.
	URL     pulumi.StringOutput
	Release *helmchart.Release
	// Connection is what tenant vClusters pass as VirtualClusterArgs.Platform.
	Connection *PlatformConnection
}

// platformValues are the vcluster-platform chart values this project sets (loft-sh/loft v4.11.2 chart/values.yaml,
// templates/deployment.yaml; the keys `vcluster platform start` sets, loft-sh/vcluster v0.36.1 pkg/cli/start/upgrade.go).
// Secrets never appear here: the chart reads them from the credentials Secret.
type platformValues struct {
	Admin        platformAdminValues     `json:"admin"`
	Ingress      platformIngressValues   `json:"ingress"`
	Config       platformConfigValues    `json:"config"`
	Env          map[string]string       `json:"env"`
	EnvValueFrom map[string]envVarSource `json:"envValueFrom,omitempty"`
	// NodeSelector and Tolerations place the platform's Deployment (templates/deployment.yaml renders them when set).
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations  []cluster.Toleration `json:"tolerations,omitempty"`
}

type platformAdminValues struct {
	Create            bool         `json:"create"`
	PasswordSecretRef secretKeyRef `json:"passwordSecretRef"`
}

type platformIngressValues struct {
	Enabled bool   `json:"enabled"`
	Host    string `json:"host"`
}

type platformConfigValues struct {
	LoftHost string `json:"loftHost"`
}

type envVarSource struct {
	SecretKeyRef secretKeyRef `json:"secretKeyRef"`
}

type secretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

func platformChartValues(host string, license bool, placement cluster.Placement) platformValues {
	v := platformValues{
		NodeSelector: placement.NodeSelector,
		Tolerations:  placement.TolerationValues(),
		Admin:        platformAdminValues{Create: true, PasswordSecretRef: secretKeyRef{Name: credentialsSecretName, Key: adminPasswordKey}},
		Ingress:      platformIngressValues{Enabled: true, Host: host},
		// Served on its own host, so the loft.host tunnel (the "router") is not used
		// (loft-sh/vcluster v0.36.1 pkg/cli/start/upgrade.go).
		Config: platformConfigValues{LoftHost: host},
		Env:    map[string]string{"DISABLE_LOFT_ROUTER": "true"},
	}
	if license {
		// `vcluster platform start` passes the token as env.LICENSE_TOKEN (loft-sh/vcluster v0.36.1 pkg/cli/start/upgrade.go).
		v.EnvValueFrom = map[string]envVarSource{
			"LICENSE_TOKEN": {SecretKeyRef: secretKeyRef{Name: credentialsSecretName, Key: licenseTokenKey}},
		}
	}
	return v
}

// NewPlatform installs the vCluster Platform with its credentials kept in a Secret.
func NewPlatform(ctx *pulumi.Context, name string, args *PlatformArgs, opts ...pulumi.ResourceOption) (*Platform, error) {
	if args == nil {
		return nil, errors.New("creating vCluster Platform: args are required")
	}
	errs := args.Validate(field.NewPath("platform"))
	if args.AdminPassword == nil {
		errs = append(errs, field.Required(field.NewPath("adminPassword"), "the platform admin's password"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating vCluster Platform %q: %w", name, errs.ToAggregate())
	}
	a := *args
	if a.Chart == (helmchart.Chart{}) {
		a.Chart = DefaultPlatformChart
	}
	if a.Namespace == "" {
		a.Namespace = DefaultPlatformNamespace
	}
	vals, err := helmchart.Values(platformChartValues(a.Host, a.LicenseToken != nil, a.Placement))
	if err != nil {
		return nil, fmt.Errorf("creating vCluster Platform %q: %w", name, err)
	}

	p := &Platform{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:vcluster:Platform", name, p, opts...); err != nil {
		return nil, fmt.Errorf("registering vCluster Platform %q: %w", name, err)
	}
	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(a.Namespace)},
	}, pulumi.Parent(p))
	if err != nil {
		return nil, fmt.Errorf("creating vCluster Platform namespace %q: %w", a.Namespace, err)
	}

	credentials := pulumi.StringMap{adminPasswordKey: a.AdminPassword}
	if a.LicenseToken != nil {
		credentials[licenseTokenKey] = a.LicenseToken
	}
	creds, err := newSecret(ctx, name+"-credentials", credentialsSecretName, ns.Metadata.Name(), credentials, pulumi.Parent(p))
	if err != nil {
		return nil, fmt.Errorf("creating vCluster Platform credentials Secret: %w", err)
	}
	releaseArgs := a.Chart.ReleaseArgs(PlatformReleaseName, a.Namespace)
	releaseArgs.Values = vals
	release, err := helmchart.NewRelease(ctx, name, releaseArgs, pulumi.Parent(p), pulumi.DependsOn([]pulumi.Resource{ns, creds}))
	if err != nil {
		return nil, fmt.Errorf("creating vCluster Platform release: %w", err)
	}

	p.Namespace = ns.Metadata.Name().Elem()
	p.URL = pulumi.String("https://" + a.Host).ToStringOutput()
	p.Release = release
	p.Connection = &PlatformConnection{Host: a.Host, Project: DefaultProject}
	if err := ctx.RegisterResourceOutputs(p, pulumi.Map{
		"namespace": p.Namespace,
		"url":       p.URL,
	}); err != nil {
		return nil, fmt.Errorf("registering vCluster Platform %q outputs: %w", name, err)
	}
	return p, nil
}

// newSecret declares an Opaque Secret whose contents are secret in inputs and state alike.
func newSecret(ctx *pulumi.Context, resourceName, secretName string, namespace pulumi.StringPtrInput, data pulumi.StringMap,
	opts ...pulumi.ResourceOption) (*corev1.Secret, error) {
	return corev1.NewSecret(ctx, resourceName, &corev1.SecretArgs{
		Metadata:   &metav1.ObjectMetaArgs{Name: pulumi.String(secretName), Namespace: namespace},
		Type:       pulumi.String("Opaque"),
		StringData: pulumi.ToSecret(data).(pulumi.StringMapOutput),
	}, append(opts, pulumi.AdditionalSecretOutputs([]string{"data", "stringData"}))...)
}
