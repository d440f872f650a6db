// Package kube connects the reports to a cluster: it finds the kubeconfig (kubectl's flags and precedence, or a
// Pulumi stack's output) and lists what a report needs, page by page, into a gpureport.Snapshot.
package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// DefaultRequestTimeout bounds each API request unless --request-timeout says otherwise: a report is a handful of
// paged lists, and a cron job should fail rather than hang on a cluster that stopped answering.
const DefaultRequestTimeout = "30s"

// NewFlags returns the kubectl flags the CLI takes: --kubeconfig, --context and --request-timeout, read by
// cli-runtime with kubectl's precedence. The credential and server overrides (--token, --as, --server ...) are left
// out: the reports run with the kubeconfig's own user.
func NewFlags() *genericclioptions.ConfigFlags {
	return &genericclioptions.ConfigFlags{
		KubeConfig: ptr.To(""),
		Context:    ptr.To(""),
		Timeout:    ptr.To(DefaultRequestTimeout),
	}
}

// Source says where the kubeconfig comes from: Flags (NewFlags), or Stack, a Pulumi stack name, which excludes
// --kubeconfig and --context; --request-timeout applies to both.
type Source struct {
	Flags *genericclioptions.ConfigFlags
	Stack string
}

// Target is a cluster to read and how it was found, for messages.
type Target struct {
	Config *rest.Config
	// From says which kubeconfig was used, e.g. "kubeconfig /tmp/k (--kubeconfig)".
	From string
}

// Server is the API server's address.
func (t *Target) Server() string { return t.Config.Host }

var errNoKubeconfig = errors.New("no kubeconfig: pass --kubeconfig FILE or --stack NAME, or set KUBECONFIG")

// Resolve finds the kubeconfig and builds a client configuration from it.
func Resolve(ctx context.Context, src Source) (*Target, error) {
	f := src.Flags
	timeout, err := clientcmd.ParseTimeout(*f.Timeout)
	if err != nil || timeout < 0 {
		return nil, fmt.Errorf("--request-timeout %q: want a duration such as 30s or 2m, whole seconds, or 0 for none", *f.Timeout)
	}
	var t *Target
	if src.Stack != "" {
		t, err = fromStack(ctx, src.Stack, f)
	} else {
		t, err = fromFlags(f)
	}
	if err != nil {
		return nil, err
	}
	cfg := t.Config
	cfg.UserAgent = "gpu-tenancy"
	cfg.Timeout = timeout
	// Protobuf decodes about five times faster than JSON, which matters for ten thousand claims.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	// A handful of paged lists: client-side throttling would only add waiting.
	cfg.QPS, cfg.Burst = 100, 200
	return t, nil
}

// fromFlags reads the kubeconfig as kubectl does: --kubeconfig, else the files of $KUBECONFIG merged, else
// ~/.kube/config; --context, else the current context; inside a pod with neither, the pod's service account.
func fromFlags(f *genericclioptions.ConfigFlags) (*Target, error) {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	var from string
	switch {
	case *f.KubeConfig != "":
		from = fmt.Sprintf("kubeconfig %s (--kubeconfig)", *f.KubeConfig)
	case env != "":
		from = fmt.Sprintf("kubeconfig %s ($KUBECONFIG)", env)
	default:
		from = "kubeconfig " + clientcmd.RecommendedHomeFile
	}
	if *f.Context != "" {
		from += fmt.Sprintf(", context %s (--context)", *f.Context)
	}
	loader := f.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", from, err)
	}
	// Without a context, client-go would fall back to the legacy default http://localhost:8080 and the run would fail
	// later as an unreachable cluster; no kubeconfig is a usage error.
	if *f.Context == "" && raw.CurrentContext == "" {
		if _, err := rest.InClusterConfig(); err != nil {
			switch {
			case *f.KubeConfig == "" && env != "":
				return nil, fmt.Errorf("$KUBECONFIG (%s) holds no usable kubeconfig: missing files or no current context", env)
			case *f.KubeConfig == "" && clientcmdapi.IsConfigEmpty(&raw):
				return nil, errNoKubeconfig
			default:
				return nil, fmt.Errorf("%s has no current context: pass --context NAME", from)
			}
		}
		from = "the pod's service account"
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", from, err)
	}
	return &Target{Config: cfg, From: from}, nil
}

// fromStack reads the kubeconfig output of a Pulumi stack: one cluster, one context, so the kubeconfig flags would
// only contradict it.
func fromStack(ctx context.Context, stack string, f *genericclioptions.ConfigFlags) (*Target, error) {
	for _, other := range []struct{ flag, value string }{{"--kubeconfig", *f.KubeConfig}, {"--context", *f.Context}} {
		if other.value != "" {
			return nil, fmt.Errorf("%s and --stack exclude each other", other.flag)
		}
	}
	from := fmt.Sprintf("kubeconfig output of Pulumi stack %s (--stack)", stack)
	raw, err := stackKubeconfig(ctx, stack)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", from, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", from, err)
	}
	return &Target{Config: cfg, From: from}, nil
}

// stackKubeconfig reads the secret `kubeconfig` output of a Pulumi stack with the pulumi CLI found on PATH, run in
// the current directory: the backend and the secrets passphrase are whatever that CLI is set up to use there
// (`pulumi login`, PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE[_FILE]).
func stackKubeconfig(ctx context.Context, stack string) ([]byte, error) {
	bin, err := exec.LookPath("pulumi")
	if err != nil {
		return nil, fmt.Errorf("the pulumi CLI is not on PATH (make tools builds it into .tools/bin): %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.Join(strings.Fields(stderr.String()), " ")
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("pulumi stack output kubeconfig --stack %s: %s", stack, msg)
	}
	if len(bytes.TrimSpace(stdout.Bytes())) == 0 {
		return nil, fmt.Errorf("stack %s has no kubeconfig output", stack)
	}
	return stdout.Bytes(), nil
}
