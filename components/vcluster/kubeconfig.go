package vcluster

import (
	"encoding/base64"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// defaultKubeconfigServer is the server vCluster writes into its exported kubeconfig unless told otherwise
// (loft-sh/vcluster v0.36.1 pkg/config exportKubeConfig.server, empty: the virtual API server's local port).
const defaultKubeconfigServer = "https://localhost:8443"

// pinnedKubeconfig rebuilds the kubeconfig a tenant's vCluster exported from the parts the platform relies on: the
// server the platform set (never the one in the Secret), the cluster's CA and the client certificate or token, each as
// inline data. The Secret lives in the tenant's namespace, which the tenant's syncer (and so a hostile tenant) can
// write, and a kubeconfig is code on the reader's machine: an exec or auth-provider plugin runs a command there, a
// file path reads the operator's files, a proxy URL sends the credentials elsewhere. None of them is ever copied, and a
// credential in any other form is refused instead of exported.
func pinnedKubeconfig(raw []byte, server, tenant string) (string, error) {
	in, err := clientcmd.Load(raw)
	if err != nil {
		return "", fmt.Errorf("the kubeconfig vCluster exported for tenant %s does not parse: %w", tenant, err)
	}
	ctxName := in.CurrentContext
	if len(in.Contexts) == 1 {
		for name := range in.Contexts {
			ctxName = name
		}
	}
	kctx, ok := in.Contexts[ctxName]
	if !ok {
		return "", fmt.Errorf("the kubeconfig vCluster exported for tenant %s has no current context", tenant)
	}
	cl, user := in.Clusters[kctx.Cluster], in.AuthInfos[kctx.AuthInfo]
	if cl == nil || user == nil {
		return "", fmt.Errorf("the kubeconfig vCluster exported for tenant %s names a cluster or user it does not hold", tenant)
	}
	if len(cl.CertificateAuthorityData) == 0 {
		return "", fmt.Errorf("the kubeconfig vCluster exported for tenant %s has no inline CA (certificate-authority-data): not exported", tenant)
	}
	pinned := clientcmdapi.NewAuthInfo()
	switch {
	case len(user.ClientCertificateData) > 0 && len(user.ClientKeyData) > 0:
		pinned.ClientCertificateData, pinned.ClientKeyData = user.ClientCertificateData, user.ClientKeyData
	case user.Token != "":
		pinned.Token = user.Token
	default:
		return "", fmt.Errorf("the kubeconfig vCluster exported for tenant %s holds no inline client certificate or token "+
			"(an exec or auth plugin, or a file, is never exported): not exported", tenant)
	}
	if server == "" {
		server = defaultKubeconfigServer
	}
	name := "vcluster-" + tenant
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cl.CertificateAuthorityData}
	out.AuthInfos[name] = pinned
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	out.CurrentContext = name
	written, err := clientcmd.Write(*out)
	if err != nil {
		return "", err
	}
	return string(written), nil
}

// exportedKubeconfig is the kubeconfig to export from the data of the Secret vCluster wrote: rebuilt from its pinned
// parts, or empty with the problem to warn of when the data is not what vCluster writes.
func exportedKubeconfig(data map[string]string, secretName, server, tenant string) (config, problem string) {
	nothing := func(why string) (string, string) {
		return "", fmt.Sprintf("tenant %s: %s; its kubeconfig is exported empty until vCluster writes the Secret again "+
			"(it does when its control plane starts)", tenant, why)
	}
	enc, ok := data[KubeconfigSecretKey]
	if !ok {
		return nothing(fmt.Sprintf("kubeconfig Secret %q has no key %q", secretName, KubeconfigSecretKey))
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nothing(fmt.Sprintf("decoding kubeconfig Secret %q: %v", secretName, err))
	}
	config, err = pinnedKubeconfig(raw, server, tenant)
	if err != nil {
		return nothing(err.Error())
	}
	return config, ""
}
