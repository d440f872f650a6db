package tenancy

import (
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	flowcontrolv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/flowcontrol/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// API Priority and Fairness for a shared control plane. Out of the box every service account outside kube-system falls
// into FlowSchema service-accounts at priority level workload-low, one flow per user: every tenant's syncer, every token
// a tenant mints for its namespace's other service accounts, and the NVIDIA DRA driver's kubelet plugins, which publish
// the ResourceSlices every allocation reads (k8s.io/apiserver v0.34.4 pkg/apis/flowcontrol/bootstrap/default.go). So
// one tenant's burst queues the driver and gains a flow per service account it holds. Instead:
//   - tenants share their own bounded level, TenantsPriorityLevel, and each tenant is one flow however many identities
//     it holds: a FlowSchema per tenant without a distinguisher (all its requests are one flow), matching its
//     namespace's service-account group. Not ByNamespace: that distinguishes by the namespace in the request's URL,
//     which the client picks, and a request RBAC will refuse is queued before it is authorised, so one tenant could
//     spread itself over any number of flows;
//   - the platform's own controllers (ControllerNamespaces) go to workload-high, ahead of every tenant.

// Names of the cluster-wide flow-control objects.
const (
	// TenantsPriorityLevel is the priority level every tenant's API requests share.
	TenantsPriorityLevel = "gpu-tenancy-tenants"
	// ControllersFlowSchema sends the platform controllers' requests to workload-high.
	ControllersFlowSchema = "gpu-tenancy-platform-controllers"
	// ControllersPriorityLevel is Kubernetes' own level for controllers (bootstrap default.go).
	ControllersPriorityLevel = "workload-high"
)

// Matching precedences: lower wins, and between equal precedences the name that sorts first (k8s.io/apiserver v0.34.4
// pkg/util/flowcontrol/apf_controller.go, the schemas sorted by precedence, then name). A tenant's schema must come
// before every bootstrap schema its identities would otherwise match: `probes` (precedence 2, every user's /healthz,
// /livez and /readyz, served at the exempt level), then service-accounts (9000). At 2, the tenants' names
// (naming.TenantFlowSchemaPrefix, "gpu-tenancy-tenant-…") sort before "probes", so a tenant's probes count in its own
// flow too; `exempt` (1) matches system:masters only. The controllers' schema needs no such place: the platform's
// controllers are not whom the levels guard against.
const (
	controllersPrecedence = 950
	tenantsPrecedence     = 2
)

// probesFlowSchema is the bootstrap schema that serves every user's health checks at the exempt level, which the
// tenants' schemas must precede (tenantsPrecedence).
const probesFlowSchema = "probes"

// The tenants' level is sized so that one tenant's burst queues: fair queuing shares a level's seats among its flows
// only once they run out, and with workload-low's 100 shares the level held about 170 of a default API server's 600
// seats (--max-requests-inflight 400 + --max-mutating-requests-inflight 200, shared by the levels' nominal shares:
// bootstrap 245 in all, kube-apiserver v1.34 pkg/apis/flowcontrol/bootstrap/default.go), far more than one tenant's
// burst, so a burst took the API server's CPU instead of queuing (README, "API fairness"). The seats a level holds
// bound how much CPU a burst in it can take: measured on 2 cores under one tenant's flood, 5 shares (about 12 seats)
// left the other tenant 4.6 times slower and the DRA driver, at workload-high, 3.5 times; 2 shares (about 5 seats)
// 3.0 and 2.0 times, and 1 share no better for the other tenant (README). 2 shares, about 5 of 600 seats, are enough
// for every tenant's syncers at their steady state (watches hold no seat once started; writes take milliseconds), while
// a burst of one tenant waits in its own queues. It lends half of what it does not use and borrows nothing, so a flood
// stays inside it; 64 queues, each flow dealt 4 (shuffle sharding), 50 requests each, past which a flood is answered
// 429.
var tenantsLevel = struct{ shares, lendable, borrowing, queues, handSize, queueLength int }{2, 50, 0, 64, 4, 50}

// everyRequestOf matches every request of the subjects.
func everyRequestOf(subjects flowcontrolv1.SubjectArray) flowcontrolv1.PolicyRulesWithSubjectsArrayInput {
	all := pulumi.ToStringArray([]string{"*"})
	return flowcontrolv1.PolicyRulesWithSubjectsArray{flowcontrolv1.PolicyRulesWithSubjectsArgs{
		Subjects: subjects,
		ResourceRules: flowcontrolv1.ResourcePolicyRuleArray{flowcontrolv1.ResourcePolicyRuleArgs{
			Verbs: all, ApiGroups: all, Resources: all, Namespaces: all, ClusterScope: pulumi.Bool(true),
		}},
		NonResourceRules: flowcontrolv1.NonResourcePolicyRuleArray{flowcontrolv1.NonResourcePolicyRuleArgs{
			Verbs: all, NonResourceURLs: all,
		}},
	}}
}

// serviceAccountsOf is the group every service account of a namespace is in
// (k8s.io/apiserver v0.34.4 pkg/authentication/serviceaccount/util.go MakeNamespaceGroupName).
func serviceAccountsOf(namespace string) flowcontrolv1.SubjectArgs {
	return flowcontrolv1.SubjectArgs{Kind: pulumi.String("Group"),
		Group: &flowcontrolv1.GroupSubjectArgs{Name: pulumi.String("system:serviceaccounts:" + namespace)}}
}

// newFairness creates the tenants' priority level and, when there are controller namespaces, the controllers' flow
// schema. Tenants' flow schemas depend on the level it returns.
func newFairness(ctx *pulumi.Context, name string, controllerNamespaces []string, parent pulumi.Resource) (pulumi.Resource, error) {
	l := tenantsLevel
	level, err := flowcontrolv1.NewPriorityLevelConfiguration(ctx, name+"-tenants-priority-level", &flowcontrolv1.PriorityLevelConfigurationArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(TenantsPriorityLevel), Labels: managedLabels(nil)},
		Spec: &flowcontrolv1.PriorityLevelConfigurationSpecArgs{
			Type: pulumi.String("Limited"),
			Limited: &flowcontrolv1.LimitedPriorityLevelConfigurationArgs{
				NominalConcurrencyShares: pulumi.Int(l.shares),
				LendablePercent:          pulumi.Int(l.lendable),
				BorrowingLimitPercent:    pulumi.Int(l.borrowing),
				LimitResponse: &flowcontrolv1.LimitResponseArgs{
					Type: pulumi.String("Queue"),
					Queuing: &flowcontrolv1.QueuingConfigurationArgs{
						Queues: pulumi.Int(l.queues), HandSize: pulumi.Int(l.handSize), QueueLengthLimit: pulumi.Int(l.queueLength),
					},
				},
			},
		},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating PriorityLevelConfiguration %q: %w", TenantsPriorityLevel, err)
	}
	if len(controllerNamespaces) == 0 {
		return level, nil
	}
	var subjects flowcontrolv1.SubjectArray
	for _, ns := range controllerNamespaces {
		subjects = append(subjects, serviceAccountsOf(ns))
	}
	if _, err := newFlowSchema(ctx, name+"-controllers-flow-schema", ControllersFlowSchema, ControllersPriorityLevel,
		controllersPrecedence, subjects, nil, pulumi.Parent(parent)); err != nil {
		return nil, err
	}
	return level, nil
}

// newTenantFlowSchema puts every service account of the tenant's namespace into the tenants' level, as one flow.
func newTenantFlowSchema(ctx *pulumi.Context, name, tenant string, opts ...pulumi.ResourceOption) (*flowcontrolv1.FlowSchema, error) {
	return newFlowSchema(ctx, name+"-flow-schema", naming.TenantFlowSchema(tenant), TenantsPriorityLevel, tenantsPrecedence,
		flowcontrolv1.SubjectArray{serviceAccountsOf(naming.Namespace(tenant))},
		map[string]string{naming.TenantNamespaceLabel: tenant}, opts...)
}

// newFlowSchema sends every request of the subjects to level, as one flow (no distinguisher).
func newFlowSchema(ctx *pulumi.Context, resourceName, name, level string, precedence int, subjects flowcontrolv1.SubjectArray,
	labels map[string]string, opts ...pulumi.ResourceOption) (*flowcontrolv1.FlowSchema, error) {
	schema, err := flowcontrolv1.NewFlowSchema(ctx, resourceName, &flowcontrolv1.FlowSchemaArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(name), Labels: managedLabels(labels)},
		Spec: &flowcontrolv1.FlowSchemaSpecArgs{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReferenceArgs{Name: pulumi.String(level)},
			MatchingPrecedence:         pulumi.Int(precedence),
			Rules:                      everyRequestOf(subjects),
		},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating FlowSchema %q: %w", name, err)
	}
	return schema, nil
}
