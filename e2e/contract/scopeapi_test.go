package contract_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// unstructuredLock returns a Lock named name in ns with exactly spec, as a
// client would send it (no Go zero values added or dropped).
func unstructuredLock(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(lockv1alpha1.GroupVersion.WithKind("Lock"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestScopeAPI: the API server itself (the CRD's schema and CEL rules, docs/contract.md
// rules 13 and 15) rejects a Lock with both or neither of targetRef and
// selector, a selector Kubernetes would not parse, and any change of a
// Lock's scope, each with a message that says how to fix it.
func TestScopeAPI(t *testing.T) {
	ns := kube.NewNamespace(t, "scopeapi")
	target := map[string]any{"kind": "Stack", "name": "forge"}
	refused := map[string]struct {
		spec map[string]any
		want string
	}{
		"both": {
			spec: map[string]any{"targetRef": target, "selector": map[string]any{}},
			want: "set exactly one of targetRef (one resource) or selector",
		},
		"neither": {
			spec: map[string]any{"reason": "nothing"},
			want: "set exactly one of targetRef (one resource) or selector",
		},
		"unknown operator": {
			spec: map[string]any{"selector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "tier", "operator": "Equals", "values": []any{"db"}}}}},
			want: `Unsupported value: "Equals"`,
		},
		"In without values": {
			spec: map[string]any{"selector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "tier", "operator": "In"}}}},
			want: "values must be non-empty for the operators In and NotIn",
		},
		"bad label key": {
			spec: map[string]any{"selector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "not a key", "operator": "Exists"}}}},
			want: "spec.selector.matchExpressions[0].key",
		},
		"kind spelling": {
			spec: map[string]any{"selector": map[string]any{"kinds": []any{"stacks"}}},
			want: "spec.selector.kinds[0]",
		},
	}
	for name, tc := range refused {
		err := kube.Client.Create(t.Context(), unstructuredLock(ns, "refused", tc.spec))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: creating a Lock of %v: got %v, want Invalid with %q", name, tc.spec, err, tc.want)
		}
	}

	const immutable = "the scope (targetRef or selector) is immutable: delete this Lock and create a new one"
	l := unstructuredLock(ns, "db", map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"tier": "db"}}})
	if err := kube.Client.Create(t.Context(), l); err != nil {
		t.Fatalf("creating a tier=db selector Lock: %v", err)
	}
	all := unstructuredLock(ns, "all", map[string]any{"selector": map[string]any{}})
	if err := kube.Client.Create(t.Context(), all); err != nil {
		t.Fatalf("creating a selector: {} Lock: %v", err)
	}
	var got lockv1alpha1.Lock
	if err := kube.Client.Get(t.Context(), client.ObjectKeyFromObject(all), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Selector == nil || !got.Spec.Selector.IsEmpty() {
		t.Errorf("selector: {} reads back as %+v, want an empty selector (the whole namespace)", got.Spec.Selector)
	}
	// Merge patches, not updates: the reconciler writes the status meanwhile.
	changes := map[string]string{
		"relabel":      `{"spec":{"selector":{"matchLabels":{"tier":"web"}}}}`,
		"add kinds":    `{"spec":{"selector":{"kinds":["Stack"]}}}`,
		"to targetRef": `{"spec":{"selector":null,"targetRef":{"kind":"Stack","name":"forge"}}}`,
	}
	for name, patch := range changes {
		err := kube.Client.Patch(t.Context(), l, client.RawPatch(types.MergePatchType, []byte(patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), immutable) {
			t.Errorf("%s: changing a selector Lock's scope: got %v, want Invalid with %q", name, err, immutable)
		}
	}
	tl := unstructuredLock(ns, "one", map[string]any{"targetRef": target})
	if err := kube.Client.Create(t.Context(), tl); err != nil {
		t.Fatalf("creating a targetRef Lock: %v", err)
	}
	err := kube.Client.Patch(t.Context(), tl, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"targetRef":null,"selector":{}}}`)))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), immutable) {
		t.Errorf("changing a targetRef Lock to a selector: got %v, want Invalid with %q", err, immutable)
	}
}
