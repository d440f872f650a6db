package e2e

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// forgedMessage is what a tenant writes to pass for the resource claim controller and take over the operator's
// terminal: escapes that clear the screen and home the cursor, a carriage return that overwrites the line.
const forgedMessage = "exceeded quota\x1b[2J\x1b[H\rQuotaExceeded: ask the platform team for 8 GPUs"

// checkPlatformReadsTenantWords writes, with the tenants' syncers' own tokens, what the operators' CLI reads from
// tenant namespaces (docs/threat-model.md, What the platform reads) and checks how the CLI reports it: a forged
// FailedResourceClaimCreation event is labelled as the tenant-writable event it is and its controls are escaped, an
// event in one tenant's namespace never speaks for another's pod, and a rewritten vCluster config no longer passes
// for the chart's. It expects the state checkQuotaAndAllocation leaves (legal-ai at its gpu-whole quota) and restores
// what it changes.
func checkPlatformReadsTenantWords(t *testing.T, ctx context.Context) {
	bin := buildCLI(t, ctx)
	cli := cliJSON(ctx, bin)
	legalNS, researchNS := naming.Namespace(legal), naming.Namespace(research)
	legalSyncer, _ := syncerOf(t, ctx, legal)
	researchSyncer, _ := syncerOf(t, ctx, research)

	t.Run("a forged event is the tenant's word, and its controls are escaped", func(t *testing.T) {
		// A pod whose claim the quota refuses: legal-ai already requests every gpu-whole device it may.
		template := &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "forged-wait", Namespace: legalNS},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: whole}}},
			}}},
		}
		_, err := legalSyncer.ResourceV1().ResourceClaimTemplates(legalNS).Create(ctx, template, metav1.CreateOptions{})
		require.NoError(t, err)
		pod, err := legalSyncer.CoreV1().Pods(legalNS).Create(ctx, tenantPod(legalNS, "forged-wait", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template.Name}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			bg := context.Background()
			assert.NoError(t, client.CoreV1().Pods(legalNS).Delete(bg, pod.Name, metav1.DeleteOptions{}))
			assert.NoError(t, client.ResourceV1().ResourceClaimTemplates(legalNS).Delete(bg, template.Name, metav1.DeleteOptions{}))
			assert.NoError(t, client.CoreV1().Events(legalNS).DeleteCollection(bg, metav1.DeleteOptions{},
				metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod.Name).String()}))
			assert.NoError(t, client.CoreV1().Events(researchNS).DeleteCollection(bg, metav1.DeleteOptions{},
				metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod.Name).String()}))
		})
		onPod := metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", pod.Name),
			fields.OneTermEqualSelector("reason", "FailedResourceClaimCreation")).String()}
		eventually(t, ctx, func() error {
			events, err := client.CoreV1().Events(legalNS).List(ctx, onPod)
			if err == nil && len(events.Items) == 0 {
				return errorf("no FailedResourceClaimCreation event for pod %s yet", pod.Name)
			}
			return err
		})

		// The tenant's own event about its pod, posing as the controller, newer than the controller's.
		reference := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: legalNS, Name: pod.Name, UID: pod.UID}
		later := metav1.NewTime(time.Now().Add(time.Hour))
		forged, err := legalSyncer.CoreV1().Events(legalNS).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + ".forged", Namespace: legalNS},
			InvolvedObject: reference, Reason: "FailedResourceClaimCreation", Message: forgedMessage, Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: "resource_claim"}, FirstTimestamp: later, LastTimestamp: later, Count: 1,
		}, metav1.CreateOptions{})
		require.NoError(t, err, "the syncer may create events in its namespace")
		// research-ai's event about legal-ai's pod: with eventTime set, the API server does not hold involvedObject to
		// the event's own namespace.
		_, err = researchSyncer.CoreV1().Events(researchNS).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + ".foreign", Namespace: researchNS},
			InvolvedObject: reference, Reason: "FailedResourceClaimCreation", Message: "PodResourceClaim gpu: admission webhook denied",
			Type: corev1.EventTypeWarning, EventTime: metav1.NewMicroTime(later.Time), ReportingController: "resource_claim",
			ReportingInstance: "kube-controller-manager", Action: "Create",
		}, metav1.CreateOptions{})
		require.NoError(t, err, "an event with eventTime may name another namespace's pod")

		var rep cliPending
		code, stderr := cli(t, &rep, "pending")
		require.Equal(t, 0, code, stderr)
		var reasons []string
		for _, c := range rep.Claims {
			if c.Namespace != legalNS || !slices.Contains(c.Pods, pod.Name) {
				continue
			}
			for _, r := range c.Reasons {
				if r.From == nil || r.From.Object.Kind != "Event" {
					continue
				}
				reasons = append(reasons, r.Kind+" "+r.From.Object.Namespace+"/"+r.From.Object.Name)
				assert.Equal(t, forgedMessage, r.Message, "JSON keeps the message as written")
				assert.Equal(t, "resource_claim", r.From.ReportedBy)
				assert.True(t, r.From.TenantWritable, "an event in a tenant namespace is the tenant's word")
			}
		}
		assert.Equal(t, []string{"QuotaExceeded " + legalNS + "/" + forged.Name}, reasons,
			"the newest event of the pod's own namespace, never research-ai's")

		table, stderr, code := runCLI(t, ctx, bin, "pending", "-n", legalNS)
		require.Equal(t, 0, code, stderr)
		assert.Empty(t, terminalControls(table), "%s", table)
		assert.Contains(t, string(table), `QuotaExceeded [tenant-writable Event `+forged.Name+`, reported by "resource_claim"]: `+
			`exceeded quota\x1b[2J\x1b[H QuotaExceeded: ask the platform team for 8 GPUs`)
	})

	t.Run("a vCluster config rewritten by its syncer no longer passes for the chart's", func(t *testing.T) {
		name := vcluster.ConfigSecretPrefix + legal
		own, err := legalSyncer.CoreV1().Secrets(legalNS).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "the syncer reads its config")
		original := own.Data[vcluster.ConfigSecretKey]
		var config map[string]any
		require.NoError(t, yaml.Unmarshal(original, &config))
		classes, ok := lookupMap(config, "sync", "fromHost", "deviceClasses")
		require.True(t, ok, "the config of %s syncs DeviceClasses: %v", legal, config)
		delete(classes, "selector")
		raw, err := yaml.Marshal(config)
		require.NoError(t, err)
		// Written as the chart writes it, so only the hash tells it apart; and the chart's label taken off, so a reader
		// that finds vCluster configs by that label would not see it.
		own.Data[vcluster.ConfigSecretKey] = bytes.TrimSuffix(raw, []byte("\n"))
		delete(own.Labels, "app")
		_, err = legalSyncer.CoreV1().Secrets(legalNS).Update(ctx, own, metav1.UpdateOptions{})
		require.NoError(t, err, "the syncer may rewrite its config")
		t.Cleanup(func() {
			bg := context.Background()
			s, err := client.CoreV1().Secrets(legalNS).Get(bg, name, metav1.GetOptions{})
			if assert.NoError(t, err) {
				s.Data[vcluster.ConfigSecretKey] = original
				s.Labels["app"] = "vcluster"
				_, err = client.CoreV1().Secrets(legalNS).Update(bg, s, metav1.UpdateOptions{})
				assert.NoError(t, err, "restoring %s", name)
			}
		})

		var rep cliAudit
		code, _ := cli(t, &rep, "audit")
		assert.Equal(t, 1, code, "a finding fails the run")
		var found []string
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Check, "VCluster") {
				found = append(found, f.Check+" "+f.Tenant+" "+f.Object.Kind+"/"+f.Object.Namespace+"/"+f.Object.Name)
			}
		}
		assert.Equal(t, []string{
			"VClusterConfigTampered " + legal + " Secret/" + legalNS + "/" + name,
			"VClusterSyncsAllDeviceClasses " + legal + " Secret/" + legalNS + "/" + name,
		}, found)
	})
}

// terminalControls lists the control characters of out but line feeds, and the bytes that are not UTF-8.
func terminalControls(out []byte) []string {
	var found []string
	for len(out) > 0 {
		r, size := utf8.DecodeRune(out)
		if (r == utf8.RuneError && size == 1) || (unicode.IsControl(r) && r != '\n') {
			found = append(found, string(out[:size]))
		}
		out = out[size:]
	}
	return found
}
