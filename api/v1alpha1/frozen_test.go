package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// obj decodes a JSON object as an admission review carries it.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return m
}

func TestFrozenChange(t *testing.T) {
	const base = `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
		"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,
			"labels":{"tier":"db","core.navique.com/read-only":"true"},
			"annotations":{"core.navique.com/locked":"l","note":"a"},
			"managedFields":[{"manager":"kubectl"}]},
		"spec":{"replicas":1},"status":{"ready":true}}`
	type want struct {
		Path    string
		Changed bool
	}
	cases := map[string]struct {
		reason string
		new    string
		want   want
	}{
		"NoChange": {
			reason: "An update that changes nothing (kubectl apply of the same object) is not frozen.",
			new:    base,
		},
		"Spec": {
			reason: "A spec change is frozen.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":2},"status":{"ready":true}}`,
			want: want{"spec", true},
		},
		"SpecRemoved": {
			reason: "Removing the spec is frozen.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"status":{"ready":true}}`,
			want: want{"spec", true},
		},
		"OtherTopLevel": {
			reason: "A top-level member other than spec (a ConfigMap-like data) is frozen too.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"data":{"k":"v"},"status":{"ready":true}}`,
			want: want{"data", true},
		},
		"Status": {
			reason: "Status is never frozen (kinds served without a status subresource).",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"2","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":false}}`,
		},
		"ServerSetMetadata": {
			reason: "resourceVersion, generation and managedFields are the API server's.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"7","generation":3,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"other"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
		},
		"LockedAnnotation": {
			reason: "lockguard's own annotation may change (its reconciler keeps it; a hand edit unprotects nothing).",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
		},
		"OtherAnnotation": {
			reason: "Any other annotation is frozen.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"b"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.annotations[note]", true},
		},
		"AnnotationsEmptied": {
			reason: "Removing every annotation but lockguard's is frozen: the first changed key is named.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.annotations[note]", true},
		},
		"LabelRemoved": {
			reason: "Removing a label (relabelling out of a selector) is frozen.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.labels[tier]", true},
		},
		"ReadOnlyLabelRemoved": {
			reason: "Removing lockguard's label is frozen: without it the API server would send the next update to no one.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.labels[core.navique.com/read-only]", true},
		},
		"ReadOnlyLabelChanged": {
			reason: "Changing lockguard's label from true is its removal.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"tier":"db","core.navique.com/read-only":"false"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.labels[core.navique.com/read-only]", true},
		},
		"Finalizers": {
			reason: "Any other metadata (finalizers, owner references) is frozen.",
			new: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack",
				"metadata":{"name":"s","namespace":"ns","resourceVersion":"1","generation":1,"finalizers":["x"],"labels":{"tier":"db","core.navique.com/read-only":"true"},"annotations":{"core.navique.com/locked":"l","note":"a"},"managedFields":[{"manager":"kubectl"}]},
				"spec":{"replicas":1},"status":{"ready":true}}`,
			want: want{"metadata.finalizers", true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path, changed := FrozenChange(obj(t, base), obj(t, tc.new))
			if diff := cmp.Diff(tc.want, want{path, changed}); diff != "" {
				t.Errorf("%s\nFrozenChange(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFrozenChangeLabelsAddedByLockguard(t *testing.T) {
	cases := map[string]struct {
		reason, old, new string
		want             bool
	}{
		"LabelAdded": {
			reason: "lockguard's label going on (the reconciler, or anyone) is not frozen, and absent labels equal empty ones.",
			old:    `{"metadata":{"name":"s"},"spec":{}}`,
			new:    `{"metadata":{"name":"s","labels":{"core.navique.com/read-only":"true","core.navique.com/has-locks":"true"},"annotations":{"core.navique.com/locked":"l"}},"spec":{}}`,
		},
		"EmptyMaps": {
			reason: "labels: {} and annotations: null equal absent ones.",
			old:    `{"metadata":{"name":"s","labels":{},"annotations":null},"spec":{}}`,
			new:    `{"metadata":{"name":"s"},"spec":{}}`,
		},
		"LabelsNotAMap": {
			reason: "A malformed labels member that changes is frozen.",
			old:    `{"metadata":{"name":"s","labels":"x"}}`,
			new:    `{"metadata":{"name":"s","labels":"y"}}`,
			want:   true,
		},
		"NoMetadata": {
			reason: "Objects without metadata compare their other members.",
			old:    `{"spec":{"a":1}}`,
			new:    `{"spec":{"a":1}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			oldObj, newObj := obj(t, tc.old), obj(t, tc.new)
			if _, got := FrozenChange(oldObj, newObj); got != tc.want {
				t.Errorf("%s\nFrozenChange(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
