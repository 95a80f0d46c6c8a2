package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
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

// NewLock returns a Lock named name in ns that protects the kind and
// target (default apiVersion), with reason; not yet created.
func NewLock(ns, name, kind, target, reason string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lockv1alpha1.LockSpec{
			TargetRef: lockv1alpha1.TargetReference{Kind: kind, Name: target},
			Reason:    reason,
		},
	}
}

// NewSelectorLock returns a Lock named name in ns of the resources of ns
// that selector s matches (an empty s: all of them, and ns itself); not
// yet created.
func NewSelectorLock(ns, name string, s lockv1alpha1.LockSelector) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lockv1alpha1.LockSpec{Selector: &s}}
}
