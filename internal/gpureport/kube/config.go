// Package kube connects the reports to a cluster: it finds the kubeconfig (a file, $KUBECONFIG or a Pulumi stack's
// output) and lists what a report needs, page by page, into a gpureport.Snapshot.
package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Source says where the kubeconfig comes from: Kubeconfig (a path) or Stack (a Pulumi stack name), at most one;
// with neither, $KUBECONFIG or else ~/.kube/config, as kubectl reads them.
type Source struct {
	Kubeconfig string
	Stack      string
	// Timeout bounds each API request.
	Timeout time.Duration
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
	var (
		cfg  *rest.Config
		from string
		err  error
	)
	switch {
	case src.Kubeconfig != "" && src.Stack != "":
		return nil, errors.New("--kubeconfig and --stack exclude each other")
	case src.Kubeconfig != "":
		from = fmt.Sprintf("kubeconfig %s (--kubeconfig)", src.Kubeconfig)
		cfg, err = clientcmd.BuildConfigFromFlags("", src.Kubeconfig)
	case src.Stack != "":
		from = fmt.Sprintf("kubeconfig output of Pulumi stack %s (--stack)", src.Stack)
		var raw []byte
		if raw, err = stackKubeconfig(ctx, src.Stack); err == nil {
			cfg, err = clientcmd.RESTConfigFromKubeConfig(raw)
		}
	default:
		// Inside a pod without a kubeconfig, client-go falls back to the pod's service account.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		from = "kubeconfig " + clientcmd.RecommendedHomeFile
		env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
		if env != "" {
			from = fmt.Sprintf("kubeconfig %s ($KUBECONFIG)", env)
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		switch {
		case clientcmd.IsEmptyConfig(err) && env != "":
			return nil, fmt.Errorf("$KUBECONFIG (%s) holds no usable kubeconfig: missing files or no current context", env)
		case clientcmd.IsEmptyConfig(err):
			return nil, errNoKubeconfig
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", from, err)
	}
	cfg.UserAgent = "gpu-tenancy"
	cfg.Timeout = src.Timeout
	// Protobuf decodes about five times faster than JSON, which matters for ten thousand claims.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	// A handful of paged lists: client-side throttling would only add waiting.
	cfg.QPS, cfg.Burst = 100, 200
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
