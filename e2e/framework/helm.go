package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ChartDir returns the chart's directory in the repository.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "chart", "lockguard"), nil
}

// HelmPath returns the helm binary: $LOCKGUARD_HELM (set by the Makefile to
// the pinned version), else the newest bin/helm-v* of the repository.
func HelmPath() (string, error) {
	if p := os.Getenv("LOCKGUARD_HELM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("helm binary %s (LOCKGUARD_HELM) is missing: run `make helm`: %w", p, err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", "helm-v*"))
	if len(found) == 0 {
		return "", errors.New("helm binary bin/helm-v* is missing: run `make helm`")
	}
	sort.Strings(found)
	return found[len(found)-1], nil
}

// Release says what to render.
type Release struct {
	// Name of the release; default "lockguard".
	Name string
	// Namespace of the release; default "lockguard-system".
	Namespace string
	// KubeVersion is Capabilities.KubeVersion; default the helm binary's.
	KubeVersion string
	// APIVersions are added to Capabilities.APIVersions, as helm's
	// --api-versions: "group/version" or "group/version/Kind".
	APIVersions []string
	// Set are --set values, "key=value".
	Set []string
	// SetString are --set-string values.
	SetString []string
	// SetJSON are --set-json values.
	SetJSON []string
	// IncludeCRDs also renders the chart's crds/ directory.
	IncludeCRDs bool
}

func (r Release) args() []string {
	name, ns := r.Name, r.Namespace
	if name == "" {
		name = "lockguard"
	}
	if ns == "" {
		ns = "lockguard-system"
	}
	args := []string{name, "--namespace", ns}
	if r.KubeVersion != "" {
		args = append(args, "--kube-version", r.KubeVersion)
	}
	for _, v := range r.APIVersions {
		args = append(args, "--api-versions", v)
	}
	for _, s := range r.Set {
		args = append(args, "--set", s)
	}
	for _, s := range r.SetString {
		args = append(args, "--set-string", s)
	}
	for _, s := range r.SetJSON {
		args = append(args, "--set-json", s)
	}
	if r.IncludeCRDs {
		args = append(args, "--include-crds")
	}
	return args
}

// Helm runs the helm binary with args and returns its standard output; the
// error carries its standard error.
func Helm(ctx context.Context, args ...string) ([]byte, error) {
	helm, err := HelmPath()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	// No repositories, plugins or registries: keep helm away from $HOME.
	tmp, err := os.MkdirTemp("", "lockguard-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(tmp, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"HELM_DATA_HOME="+filepath.Join(tmp, "data"),
	)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Template renders the chart (helm template) and returns its YAML.
func Template(ctx context.Context, r Release) ([]byte, error) {
	chart, err := ChartDir()
	if err != nil {
		return nil, err
	}
	rest := r.args() // the release name first
	args := append([]string{"template", rest[0], chart}, rest[1:]...)
	return Helm(ctx, args...)
}

// Render renders the chart and decodes its objects.
func Render(ctx context.Context, r Release) ([]*unstructured.Unstructured, error) {
	out, err := Template(ctx, r)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Lint runs helm lint --strict on the chart with the release's values and
// capabilities.
func Lint(ctx context.Context, r Release) ([]byte, error) {
	chart, err := ChartDir()
	if err != nil {
		return nil, err
	}
	args := []string{"lint", "--strict", chart, "--namespace", "lockguard-system"}
	if r.KubeVersion != "" {
		args = append(args, "--kube-version", r.KubeVersion)
	}
	for _, s := range r.Set {
		args = append(args, "--set", s)
	}
	for _, s := range r.SetString {
		args = append(args, "--set-string", s)
	}
	for _, s := range r.SetJSON {
		args = append(args, "--set-json", s)
	}
	return Helm(ctx, args...)
}

// Decode reads every object of a multi-document YAML stream.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding the rendered chart: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Find returns the object of that kind and name, or nil.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Kinds returns "Kind/name" of every object, sorted.
func Kinds(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

// Capabilities returns what helm install sees of the API server of cfg: its
// version (for --kube-version) and every "group/version" and
// "group/version/Kind" it serves (for --api-versions).
func Capabilities(cfg *rest.Config) (kubeVersion string, apiVersions []string, err error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", nil, err
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return "", nil, err
	}
	for _, l := range lists {
		apiVersions = append(apiVersions, l.GroupVersion)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // subresource
			}
			apiVersions = append(apiVersions, l.GroupVersion+"/"+r.Kind)
		}
	}
	sort.Strings(apiVersions)
	return v.GitVersion, apiVersions, nil
}
