package e2e

import (
	"context"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv4 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v4"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	resourcev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/resource/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pack's name and policies as the engine reports them (policy/main.go).
const (
	policyPackName        = "gpu-tenancy"
	vclusterSelectorRule  = "vcluster-device-class-selector"
	deviceClassOwnerRule  = "device-class-owner"
	tenantNamespaceRule   = "tenant-namespace-guard-rails"
	mandatoryEnforcement  = "mandatory"
	brokenVCluster        = legal                          // its vCluster Chart syncs DeviceClasses with no selector
	brokenClassResource   = "gpu-catalog-" + slice         // its DeviceClass loses its grant label
	brokenQuotaResource   = legal + "-quota"               // its quota loses the gpu-whole device key
	brokenQuotaNamespace  = naming.NamespacePrefix + legal // where that quota is
	brokenQuotaMissingKey = whole + naming.DeviceQuotaSuffix
	// brokenConfigResource is the config Secret the broken vCluster Chart renders, named as the Chart's provider names
	// its objects, <chart>:<namespace>/<name> (pulumi-kubernetes provider pkg/provider/yaml/v2/yaml.go).
	brokenConfigResource = brokenVCluster + ":" + naming.NamespacePrefix + brokenVCluster + "/" + vcluster.ConfigSecretPrefix + brokenVCluster
)

// checkPolicyPack runs a preview of the local stack through the Automation API and the built CLI with the project's
// policy pack (.tools/bin/gpu-tenancy-policy, built by `make tools`): the program as it is passes (advisory findings
// allowed) with every policy run, and a deliberately broken program fails, each mandatory policy's message naming the
// broken resource. Previews change no state, so it runs before or after an up.
func checkPolicyPack(t *testing.T, ctx context.Context, env *stackEnv) {
	pack := environment.PolicyPack(repoRoot)
	_, err := os.Stat(pack)
	require.NoError(t, err, "the policy pack is not built: run `make tools`")

	t.Run("the program passes every policy", func(t *testing.T) {
		found, err := previewWithPolicy(t, ctx, env, nil)
		require.NoError(t, err)
		assert.Empty(t, found.mandatory, "mandatory violations")
		assert.Contains(t, found.stackPassed, tenantNamespaceRule, "the stack policy ran and passed")
		for _, rule := range []string{vclusterSelectorRule, deviceClassOwnerRule} {
			assert.Contains(t, found.resourcePassed, rule, "policy %s ran and passed", rule)
		}
	})

	t.Run("a broken program fails with each policy's message naming the resource", func(t *testing.T) {
		broken := &guardRailBreaker{}
		found, err := previewWithPolicy(t, ctx, env, broken.program(platform.Program(repoRoot)))
		require.Equal(t, []string{brokenVCluster, brokenClassResource, brokenQuotaResource}, broken.applied(),
			"the broken program must break all three guard rails (have the Platform's resource names changed?)")
		require.Error(t, err, "a mandatory policy violation fails the preview")
		for rule, want := range map[string]struct{ urnSuffix, message string }{
			// On the config Secret the Chart renders, not on the Chart: the engine analyzes the Chart without its inputs
			// (policy/vcluster.go), so the one violation proves the rendered config is what the pack checks.
			vclusterSelectorRule: {"helm.sh/v4:Chart$kubernetes:core/v1:Secret::" + brokenConfigResource,
				"vCluster config Secret " + vcluster.ConfigSecretPrefix + brokenVCluster + " (resource " + brokenConfigResource +
					", namespace " + naming.Namespace(brokenVCluster) + ") syncs DeviceClasses from the host without a label selector"},
			deviceClassOwnerRule: {"DeviceClass::" + brokenClassResource,
				"DeviceClass " + slice + " (resource " + brokenClassResource + ") carries no owner label"},
			tenantNamespaceRule: {"core/v1:Namespace::" + legal + "-namespace",
				"tenant namespace " + brokenQuotaNamespace + " (resource " + legal + "-namespace) has no quota on DeviceClass " + whole},
		} {
			got := found.mandatory[rule]
			if assert.Len(t, got, 1, "one %s violation: %v", rule, found.mandatory) {
				assert.True(t, strings.HasSuffix(got[0].ResourceURN, want.urnSuffix), "%s names %s", got[0].ResourceURN, want.urnSuffix)
				assert.Contains(t, got[0].Message, want.message)
				assert.Equal(t, policyPackName, got[0].PolicyPackName)
			}
			assert.Contains(t, err.Error(), want.message, "the CLI's output carries the message")
		}
		assert.Len(t, found.mandatory, 3, "nothing else violated: %v", found.mandatory)
	})
}

// policyFindings are what a preview's engine events say about the pack.
type policyFindings struct {
	// mandatory are the mandatory violations by policy name.
	mandatory map[string][]apitype.PolicyEvent
	// resourcePassed and stackPassed name the policies that ran and passed on some resource, and on the stack.
	resourcePassed, stackPassed []string
}

// previewWithPolicy previews the local stack (the state env's other subtests share) with the policy pack, running
// program instead of the platform program when given.
func previewWithPolicy(t *testing.T, ctx context.Context, env *stackEnv, program pulumi.RunFunc) (policyFindings, error) {
	t.Helper()
	opts := env.options(nil, nil)
	opts.PolicyPacks, opts.Program, opts.Progress = []string{environment.PolicyPack(repoRoot)}, program, progressTo(t)
	st, err := environment.Open(ctx, opts)
	require.NoError(t, err)

	found := policyFindings{mandatory: map[string][]apitype.PolicyEvent{}}
	ch := make(chan events.EngineEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			switch {
			case e.PolicyEvent != nil && e.PolicyEvent.PolicyPackName == policyPackName:
				if e.PolicyEvent.EnforcementLevel == mandatoryEnforcement {
					found.mandatory[e.PolicyEvent.PolicyName] = append(found.mandatory[e.PolicyEvent.PolicyName], *e.PolicyEvent)
				}
				t.Logf("policy %s (%s) on %s: %s", e.PolicyEvent.PolicyName, e.PolicyEvent.EnforcementLevel,
					e.PolicyEvent.ResourceURN, e.PolicyEvent.Message)
			case e.PolicyAnalyzeSummaryEvent != nil && e.PolicyAnalyzeSummaryEvent.PolicyPackName == policyPackName:
				found.resourcePassed = append(found.resourcePassed, e.PolicyAnalyzeSummaryEvent.Passed...)
			case e.PolicyAnalyzeStackSummaryEvent != nil && e.PolicyAnalyzeStackSummaryEvent.PolicyPackName == policyPackName:
				found.stackPassed = append(found.stackPassed, e.PolicyAnalyzeStackSummaryEvent.Passed...)
			}
		}
	}()
	_, err = st.Preview(ctx, optpreview.EventStreams(ch))
	<-done
	return found, err
}

// guardRailBreaker wraps a program so that three guard rails break the way a faulty change could break them:
// tenant legal-ai's vCluster Chart syncs DeviceClasses with no selector, the gpu-slice DeviceClass loses its grant label,
// and legal-ai's quota loses its gpu-whole device key. A stack transformation edits the resources' own args
// (pulumi sdk v3.274.1 go/pulumi/transformation.go), so the program itself stays the platform program.
type guardRailBreaker struct {
	mu   sync.Mutex
	done map[string]bool
}

func (b *guardRailBreaker) program(program pulumi.RunFunc) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		if err := ctx.RegisterStackTransformation(b.transform); err != nil {
			return err
		}
		return program(ctx)
	}
}

// applied lists the resources the breaker changed, in a fixed order.
func (b *guardRailBreaker) applied() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, name := range []string{brokenVCluster, brokenClassResource, brokenQuotaResource} {
		if b.done[name] {
			out = append(out, name)
		}
	}
	return out
}

func (b *guardRailBreaker) transform(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	var props pulumi.Input
	switch p := args.Props.(type) {
	case *helmv4.ChartArgs:
		if args.Name != brokenVCluster || p.Values == nil {
			return nil
		}
		broken := *p
		broken.Values = p.Values.ToMapOutput().ApplyT(withoutClassSelector).(pulumi.MapOutput)
		props = &broken
	case *resourcev1.DeviceClassArgs:
		meta, ok := p.Metadata.(*metav1.ObjectMetaArgs)
		if args.Name != brokenClassResource || !ok {
			return nil
		}
		broken, brokenMeta := *p, *meta
		brokenMeta.Labels = pulumi.StringMap{naming.ManagedByLabel: pulumi.String(naming.ManagedBy)}
		broken.Metadata = &brokenMeta
		props = &broken
	case *corev1.ResourceQuotaArgs:
		spec, ok := p.Spec.(*corev1.ResourceQuotaSpecArgs)
		if args.Name != brokenQuotaResource || !ok {
			return nil
		}
		hard, ok := spec.Hard.(pulumi.StringMap)
		if !ok {
			return nil
		}
		broken, brokenSpec := *p, *spec
		brokenHard := pulumi.StringMap{}
		for k, v := range hard {
			if k != brokenQuotaMissingKey {
				brokenHard[k] = v
			}
		}
		brokenSpec.Hard = brokenHard
		broken.Spec = &brokenSpec
		props = &broken
	default:
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = map[string]bool{}
	}
	b.done[args.Name] = true
	return &pulumi.ResourceTransformationResult{Props: props, Opts: args.Opts}
}

// withoutClassSelector is a copy of vCluster values without sync.fromHost.deviceClasses.selector, the sync left as
// it was. It copies each map on the way, so the program's own values stay as they are.
func withoutClassSelector(values map[string]any) map[string]any {
	clone := func(m any) map[string]any {
		out := map[string]any{}
		if m, ok := m.(map[string]any); ok {
			maps.Copy(out, m)
		}
		return out
	}
	out, sync := clone(values), clone(values["sync"])
	fromHost := clone(sync["fromHost"])
	classes := clone(fromHost["deviceClasses"])
	delete(classes, "selector")
	fromHost["deviceClasses"], sync["fromHost"], out["sync"] = classes, fromHost, sync
	return out
}
