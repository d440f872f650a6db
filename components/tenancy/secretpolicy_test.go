package tenancy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubeconfig Secret the platform reads on every deployment stays, whatever the tenant does; its other Secrets are
// its own.
func TestTheKubeconfigSecretIsNotTheTenantsToDelete(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS}}
	}
	for _, tt := range []struct {
		name       string
		secret     string
		user       string
		wantDenied []string
	}{
		{name: "the kubeconfig Secret deleted by the syncer", secret: "vc-team-a",
			wantDenied: []string{"tenant team-a: " + syncer(tenantNS) + " may not delete Secret vc-team-a"}},
		{name: "the kubeconfig Secret deleted by a token the tenant minted", secret: "vc-team-a",
			user: "system:serviceaccount:" + tenantNS + ":default", wantDenied: []string{"may not delete Secret vc-team-a"}},
		{name: "another Secret of the tenant deleted", secret: "vc-team-a-certs"},
		{name: "the kubeconfig Secret deleted by the namespace controller", secret: "vc-team-a",
			user: "system:serviceaccount:kube-system:namespace-controller"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := request{namespace: tenantNS, gvk: secretGVK, gvr: secretGVR, user: tt.user, old: secret(tt.secret),
				deleteOptions: &metav1.DeleteOptions{}}
			if r.user == "" {
				r.user = syncer(tenantNS)
			}
			assertDenied(t, h.do(t, r), tt.wantDenied)
		})
	}
}
