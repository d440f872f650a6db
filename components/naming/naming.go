// Package naming holds what the platform writes on the host cluster and what other programs read back: namespace
// names, labels, quota keys and admission object names. The components create objects with these names; the
// operators' CLI, the policy pack and the tests find them by the same names. It imports only the standard library, so a
// small program can use it without compiling the Pulumi SDKs.
package naming

const (
	// Driver is the NVIDIA DRA driver's name and the domain of its device attributes
	// (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 cmd/gpu-kubelet-plugin/deviceinfo.go).
	Driver = "gpu.nvidia.com"
	// DriverClassSuffix ends the name of every DeviceClass the NVIDIA DRA driver chart creates (gpu.nvidia.com,
	// mig.nvidia.com, vfio.gpu.nvidia.com, compute-domain-*.nvidia.com: dra-driver-nvidia-gpu v0.4.0
	// deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml). Those classes select every GPU.
	DriverClassSuffix = ".nvidia.com"
)

// Labels.
const (
	// TenantNamespaceLabel marks a tenant's host namespace with the tenant's name; the admission bindings select
	// namespaces by it.
	TenantNamespaceLabel = "gpu-tenancy.io/tenant"
	// VClusterManagedByLabel is the label vCluster puts on every object it writes to the host. On a namespaced object
	// its value is the release (the tenant); on a cluster-scoped one, such as a PriorityClass, it is
	// vcluster-<release>-x-<namespace>, cut to 52 characters and a hash past 63 (loft-sh/vcluster v0.36.1
	// pkg/util/translate/labels.go MarkerLabel, single_namespace.go MarkerLabelCluster).
	VClusterManagedByLabel = "vcluster.loft.sh/managed-by"
	// ClassTenantLabelPrefix prefixes the per-tenant grant label on DeviceClasses (see ClassTenantLabel).
	ClassTenantLabelPrefix = "tenant.gpu-tenancy.io/"
	// PlatformOnlyLabel marks a DeviceClass the catalog grants to no tenant, for the platform's own namespaces.
	PlatformOnlyLabel = "gpu-tenancy.io/platform-only"
	// ManagedByLabel and ManagedBy mark every object the platform creates.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "gpu-tenancy"
	// PoolLabel names the GPU pool a node belongs to.
	PoolLabel = "gpu-tenancy.io/pool"
	// DedicatedNodeKey is the label and the NoSchedule taint, valued with the tenant's name, of the nodes of a pool
	// dedicated to one tenant: only that tenant's pods may tolerate it.
	DedicatedNodeKey = "gpu-tenancy.io/dedicated"
	// PlatformPoolKey is the label and the NoSchedule taint, valued "true", of the system pool's nodes when the
	// cluster has a pool for the tenants' other pods: only the platform's own pods tolerate it.
	PlatformPoolKey = "gpu-tenancy.io/platform-pool"
)

// NamespacePrefix prefixes each tenant's host namespace (see Namespace).
const NamespacePrefix = "vcluster-"

// Namespace is the host namespace of a tenant's vCluster and of everything it syncs to the host.
func Namespace(tenant string) string { return NamespacePrefix + tenant }

// ClassTenantLabel is the label a DeviceClass carries, with value "true", for each tenant granted the class; a
// tenant's vCluster syncs exactly the DeviceClasses with matchLabels{ClassTenantLabel(tenant): "true"}.
func ClassTenantLabel(tenant string) string { return ClassTenantLabelPrefix + tenant }

// DeviceQuotaSuffix follows a DeviceClass name in the ResourceQuota key that caps its devices
// (k8s.io/api v0.34.4 core/v1/types.go ResourceClaimsPerClass).
const DeviceQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

// DeviceQuotaKey is the ResourceQuota key that caps the devices of one DeviceClass in a namespace.
func DeviceQuotaKey(class string) string { return class + DeviceQuotaSuffix }

// RequestsQuotaPrefix turns a resource name into the ResourceQuota key that caps its requests
// (k8s.io/api v0.36.3 core/v1 DefaultResourceRequestsPrefix).
const RequestsQuotaPrefix = "requests."

// RequestsQuotaKey is the ResourceQuota key that caps a resource name's requests in a namespace: for a DeviceClass's
// extended-resource name, what the pods asking for it and the class's claims may take together.
func RequestsQuotaKey(resourceName string) string { return RequestsQuotaPrefix + resourceName }

// Objects in each tenant namespace.
const (
	// TenantQuota caps the namespace's CPU, memory and devices per granted class.
	TenantQuota = "tenant-quota"
	// ContainerDefaults is the LimitRange that gives containers without resources a request and a limit.
	ContainerDefaults = "container-defaults"
)

// EntitlementPolicy names the ValidatingAdmissionPolicy, and its binding, that lets each tenant's namespace claim only
// the classes granted to it: one for every tenant, reading the grants from the namespace's ClassGrantLabel labels.
const EntitlementPolicy = "gpu-tenancy-device-entitlements"

// LegacyEntitlementPolicyPrefix prefixed the per-tenant entitlement policies of earlier versions
// (gpu-tenancy-device-entitlements-<tenant>); an upgrade removes them once the namespace carries its grants.
const LegacyEntitlementPolicyPrefix = EntitlementPolicy + "-"

// ClassGrantLabelPrefix prefixes the grant labels on a tenant's host namespace (see ClassGrantLabel).
const ClassGrantLabelPrefix = "class.gpu-tenancy.io/"

// ClassGrantLabel is the label a tenant's host namespace carries, with value "true", for each class granted to the
// tenant: the mirror of ClassTenantLabel on the DeviceClass. The entitlement policy reads it; a tenant's identities
// cannot write namespaces.
func ClassGrantLabel(class string) string { return ClassGrantLabelPrefix + class }

// GrantsLabel marks, with value "true", a tenant host namespace whose grants are its ClassGrantLabel labels: the
// entitlement policy's binding selects namespaces by it, so a namespace of an earlier version stays under its
// per-tenant policy until the update that labels it also removes that policy.
const GrantsLabel = "gpu-tenancy.io/grants-labelled"

// KubeconfigSecretPrefix prefixes the Secret in which a tenant's vCluster exports its kubeconfig, vc-<tenant>
// (loft-sh/vcluster v0.36.1 pkg/util/kubeconfig/kubeconfig.go, the chart's exportKubeConfig default).
const KubeconfigSecretPrefix = "vc-"

// TenantFlowSchemaPrefix prefixes each tenant's FlowSchema (see TenantFlowSchema).
const TenantFlowSchemaPrefix = "gpu-tenancy-tenant-"

// TenantFlowSchema names the FlowSchema that makes a tenant's API requests one flow of its priority level.
func TenantFlowSchema(tenant string) string { return TenantFlowSchemaPrefix + tenant }

// TenantPriorityLevel names a tenant's own priority level; it shares its name with the tenant's FlowSchema.
func TenantPriorityLevel(tenant string) string { return TenantFlowSchemaPrefix + tenant }

// Namespaces of the platform's own controllers: the NVIDIA DRA driver and vCluster Platform, where their charts
// install them by default (dra-driver-nvidia-gpu v0.4.0 docs/install.md; loft-sh/vcluster v0.36.1
// pkg/platform/clihelper/clihelper.go DefaultPlatformNamespace).
const (
	DriverNamespace   = "dra-driver-nvidia-gpu"
	PlatformNamespace = "vcluster-platform"
)

// Pod Security Admission namespace labels (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
const (
	PodSecurityEnforceLabel        = "pod-security.kubernetes.io/enforce"
	PodSecurityEnforceVersionLabel = "pod-security.kubernetes.io/enforce-version"
	PodSecurityWarnLabel           = "pod-security.kubernetes.io/warn"
	PodSecurityWarnVersionLabel    = "pod-security.kubernetes.io/warn-version"
	PodSecurityAuditLabel          = "pod-security.kubernetes.io/audit"
	PodSecurityAuditVersionLabel   = "pod-security.kubernetes.io/audit-version"
)

// Pod Security Standards a tenant may run under (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
// Privileged is not one of them: a privileged pod on a GPU node sees every GPU of the node, outside any claim, quota
// or grant.
const (
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// TenantPodSecurityLevels are the levels a tenant may run under.
var TenantPodSecurityLevels = []string{PodSecurityBaseline, PodSecurityRestricted}

// StackLabel names the Pulumi stack that created an object, as `<project>.<stack>` (see StackOwner). One cluster holds
// one platform stack: DeviceClasses, admission policies and namespaces have cluster-wide names.
const StackLabel = "gpu-tenancy.io/stack"

// StackOwner is the StackLabel value of a stack.
func StackOwner(project, stack string) string { return project + "." + stack }

// Kinds of the cluster-scoped objects the platform creates, as ObjectRef.Kind spells them.
const (
	KindNamespace     = "Namespace"
	KindDeviceClass   = "DeviceClass"
	KindPolicy        = "ValidatingAdmissionPolicy"
	KindPolicyBinding = "ValidatingAdmissionPolicyBinding"
	KindFlowSchema    = "FlowSchema"
	KindPriorityLevel = "PriorityLevelConfiguration"
)

// ObjectRef names a cluster-scoped object.
type ObjectRef struct {
	Kind string
	Name string
}

func (r ObjectRef) String() string { return r.Kind + "/" + r.Name }

// EnvironmentLockNamespace holds the Lease that locks an environment while gpu-tenancy runs an operation on it.
const EnvironmentLockNamespace = "kube-system"

// EnvironmentLock names the Lease that locks the environment env (its platform stack's name) on its cluster. A Lease
// name is a DNS subdomain: a stack name's capitals and underscores are lowered and replaced.
func EnvironmentLock(env string) string {
	out := []rune("gpu-tenancyironment-")
	for _, r := range env {
		switch {
		case r >= 'A' && r <= 'Z':
			out = append(out, r+'a'-'A')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			out = append(out, r)
		default:
			out = append(out, '-')
		}
	}
	return string(out)
}

// EnvironmentLockMove starts the holder of an environment's Lease while it moves tenants between stacks.
const EnvironmentLockMove = "move "

// ExclusiveLockOps start the holders of an environment's Lease beside which no stack's program runs: a move hands a
// tenant's state from one stack to another, and a destroy or a recovery deletes or restores what a stack holds; a
// stack that ran in between would see its tenants in the wrong place, or bring back what is being deleted.
var ExclusiveLockOps = []string{EnvironmentLockMove, "destroy ", "recover "}
