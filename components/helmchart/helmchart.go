// Package helmchart says where a Helm chart comes from and turns typed values into Helm release values, so every
// release in the project is declared the same way.
package helmchart

import (
	"encoding/json"
	"fmt"

	helmv4 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v4"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Chart locates a chart: a local directory (Path) or a repository (Repo + Name, or an oci:// Name), at Version.
type Chart struct {
	Repo    string `json:"repo,omitempty"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
}

// Validate checks that the chart is located one way: a local path, or a repository with a chart name.
func (c Chart) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Path != "" && (c.Repo != "" || c.Name != "") {
		errs = append(errs, field.Forbidden(path.Child("path"), "give either a local chart path or repo+name, not both"))
	}
	if c.Path == "" && c.Repo != "" && c.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "the chart name in repo "+c.Repo))
	}
	return errs
}

// Values turns a typed values struct into the map a Helm release takes; JSON tags on the struct spell each key once.
func Values(v any) (pulumi.Map, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding helm values: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding helm values: %w", err)
	}
	return pulumi.ToMap(m), nil
}

// ReleaseArgs declares a Helm release of this chart. The caller sets Values and waiting behaviour.
func (c Chart) ReleaseArgs(release, namespace string) *ReleaseArgs {
	chart, version, repo := c.location()
	args := &ReleaseArgs{
		Name:      pulumi.String(release),
		Namespace: pulumi.String(namespace),
		Chart:     chart,
		Version:   version,
		// Fixed-length history keeps the release's Secrets from piling up in the namespace.
		MaxHistory: pulumi.Int(5),
	}
	if repo != "" {
		args.RepositoryOpts = pulumi.Map{"repo": pulumi.String(repo)}
	}
	return args
}

// ChartArgs declares this chart rendered and applied object by object (helm/v4 Chart): no Helm release record, each
// object server-side applied and tracked on its own. The release name names the objects as `helm install` would. The
// caller sets Values and waiting behaviour.
func (c Chart) ChartArgs(release string, namespace pulumi.StringInput) *helmv4.ChartArgs {
	chart, version, repo := c.location()
	args := &helmv4.ChartArgs{
		Name:      pulumi.String(release),
		Namespace: namespace.ToStringOutput().ToStringPtrOutput(),
		Chart:     chart,
		Version:   version,
	}
	if repo != "" {
		args.RepositoryOpts = &helmv4.RepositoryOptsArgs{Repo: pulumi.String(repo)}
	}
	return args
}

// location is the chart argument, version and repository both kinds of Helm resource take.
func (c Chart) location() (chart pulumi.StringInput, version pulumi.StringPtrInput, repo string) {
	if c.Path != "" {
		return pulumi.String(c.Path), nil, ""
	}
	if c.Version != "" {
		version = pulumi.String(c.Version)
	}
	return pulumi.String(c.Name), version, c.Repo
}
