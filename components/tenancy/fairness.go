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
//   - each tenant has a priority level of its own, and all its requests are one flow of it however many identities it
//     holds: a FlowSchema per tenant without a distinguisher, matching its namespace's service-account group. Not
//     ByNamespace: that distinguishes by the namespace in the request's URL, which the client picks, and a request RBAC
//     will refuse is queued before it is authorised, so one tenant could spread itself over any number of flows;
//   - a level no request is classified into lends all its seats, so that each tenant's one share is one seat;
//   - the platform's own controllers (ControllerNamespaces) go to workload-high, ahead of every tenant.

// Names of the cluster-wide flow-control objects.
const (
	// ControllersFlowSchema sends the platform controllers' requests to workload-high.
	ControllersFlowSchema = "gpu-tenancy-platform-controllers"
	// ControllersPriorityLevel is Kubernetes' own level for controllers (bootstrap default.go).
	ControllersPriorityLevel = "workload-high"
	// LentSeatsPriorityLevel is a level no request is classified into, which lends all its seats (lentSeats).
	LentSeatsPriorityLevel = "gpu-tenancy-lent-seats"
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

// Each tenant's level is as small as a level can be, one nominal share, which lentSeats makes one seat: a level holds
// ceil(server seats x its shares / all levels' shares) seats (k8s.io/apiserver v0.34.4
// pkg/util/flowcontrol/apf_controller.go, finishQueueSetReconfigsLocked). A level's seats bound how much of the API
// server's CPU a burst in it can take, and a level of its own means no other tenant's request waits for a seat behind
// that burst: with one level shared by every tenant, a measured flood made the other tenants wait for its seats and
// left them slower than with no flow schema at all (docs/benchmarks.md, "API fairness"). One seat, not the 3 one share would hold
// beside the bootstrap levels alone: a flood of 3 seats kept another tenant's p99 over twice its latency on 2 cores, one
// seat keeps it within (docs/benchmarks.md, "API fairness"). A tenant's requests then run one at a time, each waiting at most for
// its own previous one; a syncer's are short, and its watches hold a seat only while they start. It lends just under
// half its seats while idle (49%: the lent seats are rounded, finishQueueSetReconfigsLocked, so a level of 1 seat lends
// none) and borrows nothing, so a burst stays inside it. One flow per level needs one queue; a burst of more than the
// level's seats and 128 waiting requests is answered 429.
var tenantLevel = struct{ shares, lendable, borrowing, queues, handSize, queueLength int }{1, 49, 0, 1, 1, 128}

// lentSeats are the shares of a level no FlowSchema points at, which lends all its seats and borrows none: with them
// the levels' shares add up to a default API server's seats (--max-requests-inflight 400 +
// --max-mutating-requests-inflight 200 = 600, over the bootstrap levels' 245 shares: bootstrap default.go), so a share
// is at most one seat and each tenant's level holds one, however few tenants there are (without it, 3 up to about 55
// tenants, 2 up to about 355). The bootstrap levels' own seats shrink to 245 of 600 plus the tenants' shares, as they
// would with 355 tenants, and they borrow the lent seats back whenever they are busy (they have no borrowing limit;
// the API server moves lent seats every 10 s, apf_controller.go updateBorrowingLocked). An API server of more seats
// (a larger managed control plane) gives each tenant a few.
const lentSeats = 355

// newLentSeats creates the level that lends all its seats, so that each tenant's one share is one seat.
func newLentSeats(ctx *pulumi.Context, name string, parent pulumi.Resource) error {
	_, err := flowcontrolv1.NewPriorityLevelConfiguration(ctx, name+"-lent-seats", &flowcontrolv1.PriorityLevelConfigurationArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(LentSeatsPriorityLevel), Labels: managedLabels(nil)},
		Spec: &flowcontrolv1.PriorityLevelConfigurationSpecArgs{
			Type: pulumi.String("Limited"),
			Limited: &flowcontrolv1.LimitedPriorityLevelConfigurationArgs{
				NominalConcurrencyShares: pulumi.Int(lentSeats),
				LendablePercent:          pulumi.Int(100),
				BorrowingLimitPercent:    pulumi.Int(0),
				// No request is classified here; one that were would be refused rather than wait for seats lent away.
				LimitResponse: &flowcontrolv1.LimitResponseArgs{Type: pulumi.String("Reject")},
			},
		},
	}, pulumi.Parent(parent))
	if err != nil {
		return fmt.Errorf("creating PriorityLevelConfiguration %q: %w", LentSeatsPriorityLevel, err)
	}
	return nil
}

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

// newControllersFlowSchema sends every request of the platform's controllers to workload-high.
func newControllersFlowSchema(ctx *pulumi.Context, name string, controllerNamespaces []string, parent pulumi.Resource) error {
	if len(controllerNamespaces) == 0 {
		return nil
	}
	var subjects flowcontrolv1.SubjectArray
	for _, ns := range controllerNamespaces {
		subjects = append(subjects, serviceAccountsOf(ns))
	}
	_, err := newFlowSchema(ctx, name+"-controllers-flow-schema", ControllersFlowSchema, ControllersPriorityLevel,
		controllersPrecedence, subjects, nil, pulumi.Parent(parent))
	return err
}

// newTenantFairness gives the tenant a priority level of its own and puts every service account of its namespace
// into it, as one flow.
func newTenantFairness(ctx *pulumi.Context, name, tenant string, opts ...pulumi.ResourceOption) error {
	l, levelName := tenantLevel, naming.TenantPriorityLevel(tenant)
	labels := managedLabels(map[string]string{naming.TenantNamespaceLabel: tenant})
	level, err := flowcontrolv1.NewPriorityLevelConfiguration(ctx, name+"-priority-level", &flowcontrolv1.PriorityLevelConfigurationArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(levelName), Labels: labels},
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
	}, opts...)
	if err != nil {
		return fmt.Errorf("creating PriorityLevelConfiguration %q: %w", levelName, err)
	}
	_, err = newFlowSchema(ctx, name+"-flow-schema", naming.TenantFlowSchema(tenant), levelName, tenantsPrecedence,
		flowcontrolv1.SubjectArray{serviceAccountsOf(naming.Namespace(tenant))},
		map[string]string{naming.TenantNamespaceLabel: tenant}, append(opts, pulumi.DependsOn([]pulumi.Resource{level}))...)
	return err
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
