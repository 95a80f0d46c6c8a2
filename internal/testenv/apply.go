package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadObjects reads every object of the YAML (or JSON) manifests at paths.
func ReadObjects(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", p, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// Apply server-side applies objects as field manager "lockguard-test".
func Apply(ctx context.Context, c client.Client, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		u = u.DeepCopy()
		u.SetResourceVersion("")
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("lockguard-test"), client.ForceOwnership); err != nil { //nolint:staticcheck // client.Apply on unstructured is the simplest SSA here
			return fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// ApplyFiles reads the manifests at paths and applies their objects.
func ApplyFiles(ctx context.Context, c client.Client, paths ...string) error {
	objs, err := ReadObjects(paths...)
	if err != nil {
		return err
	}
	return Apply(ctx, c, objs...)
}
