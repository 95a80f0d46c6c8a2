package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Notes renders the chart's NOTES.txt for the release, which helm
// template leaves out (and helm install --dry-run renders only with a
// cluster to reach): it renders a copy of the chart in which a ConfigMap
// holds NOTES.txt's text, unchanged, as a named template.
func Notes(ctx context.Context, r Release) (string, error) {
	chart, err := ChartDir()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "lockguard-notes-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "lockguard")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		return "", err
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		return "", err
	}
	define := "{{- define \"framework.notes\" -}}\n" + string(notes) + "\n{{- end }}\n"
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include \"framework.notes\" . | toJson }}\n"
	for name, text := range map[string]string{"_framework_notes.tpl": define, "framework-notes.yaml": configMap} {
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	rest := r.args() // the release name first
	args := append([]string{"template", rest[0], dir, "--show-only", "templates/framework-notes.yaml"}, rest[1:]...)
	out, err := Helm(ctx, args...)
	if err != nil {
		return "", err
	}
	objs, err := Decode(out)
	if err != nil {
		return "", err
	}
	if len(objs) != 1 {
		return "", fmt.Errorf("the notes' ConfigMap: %d objects rendered, want 1", len(objs))
	}
	text, _, err := unstructured.NestedString(objs[0].Object, "data", "notes")
	return text, err
}
