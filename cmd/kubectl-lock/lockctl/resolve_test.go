package lockctl

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestTargetNames: a target is named as kubectl names it, with no dot for
// the core group, and its default Lock name is KIND-NAME whatever the
// group.
func TestTargetNames(t *testing.T) {
	for _, tc := range []struct {
		gvk        schema.GroupVersionKind
		str, ldflt string
	}{
		{stackGVK, "stack.core.navique.com/forge", "stack-forge"},
		{schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, "persistentvolumeclaim/forge", "persistentvolumeclaim-forge"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "statefulset.apps/forge", "statefulset-forge"},
	} {
		tg := target{mapping: &meta.RESTMapping{GroupVersionKind: tc.gvk, Scope: meta.RESTScopeNamespace}, name: "forge"}
		if got := tg.String(); got != tc.str {
			t.Errorf("%s: String() = %q, want %q", tc.gvk, got, tc.str)
		}
		if got := defaultLockName(tg); got != tc.ldflt {
			t.Errorf("%s: defaultLockName = %q, want %q", tc.gvk, got, tc.ldflt)
		}
	}
}
