package gpureport

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Helm's release storage (helm.sh/helm/v3 pkg/storage/driver/secrets.go, util.go): a Secret of this type labelled
// owner=helm, name=<release>, version=<revision>, status=<status>, whose data key "release" holds the release as
// base64 of gzipped JSON.
const (
	HelmReleaseType   = "helm.sh/release.v1"
	helmOwnerLabel    = "owner"
	helmOwner         = "helm"
	helmNameLabel     = "name"
	helmVersionLabel  = "version"
	helmStatusLabel   = "status"
	helmDeployed      = "deployed"
	helmReleaseKey    = "release"
	vclusterChartName = "vcluster"
)

// HelmReleaseSelector selects Helm's release Secrets.
const HelmReleaseSelector = helmOwnerLabel + "=" + helmOwner

// helmRelease is the part of a Helm release this tool reads.
type helmRelease struct {
	Name  string `json:"name"`
	Chart struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		// Values are the chart's defaults.
		Values map[string]any `json:"values"`
	} `json:"chart"`
	// Config holds the values the user supplied.
	Config map[string]any `json:"config"`
}

func decodeRelease(s *corev1.Secret) (*helmRelease, error) {
	raw, err := base64.StdEncoding.DecodeString(string(s.Data[helmReleaseKey]))
	if err != nil {
		return nil, fmt.Errorf("decoding base64: %w", err)
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("opening gzip: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("reading gzip: %w", err)
		}
	}
	var r helmRelease
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	return &r, nil
}

// values are the release's effective values: the user's config coalesced over the chart's defaults, maps merged
// key by key and a null removing a default, as Helm does.
func (r *helmRelease) values() map[string]any {
	return coalesce(r.Chart.Values, r.Config)
}

func coalesce(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = coalesce(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// lookup follows a path of map keys.
func lookup(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// currentReleases picks, per release, the Secret of the deployed revision, or the newest revision when none is
// deployed (a failed upgrade).
func currentReleases(secrets []corev1.Secret) []*corev1.Secret {
	type key struct{ namespace, name string }
	best := map[key]*corev1.Secret{}
	var order []key
	rank := func(s *corev1.Secret) (bool, int) {
		v, _ := strconv.Atoi(s.Labels[helmVersionLabel])
		return s.Labels[helmStatusLabel] == helmDeployed, v
	}
	for i := range secrets {
		s := &secrets[i]
		if s.Type != HelmReleaseType || s.Labels[helmOwnerLabel] != helmOwner {
			continue
		}
		k := key{s.Namespace, s.Labels[helmNameLabel]}
		cur, ok := best[k]
		if !ok {
			order = append(order, k)
			best[k] = s
			continue
		}
		sd, sv := rank(s)
		cd, cv := rank(cur)
		if (sd && !cd) || (sd == cd && sv > cv) {
			best[k] = s
		}
	}
	out := make([]*corev1.Secret, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	return out
}
