package lockctl

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// stack is a Stack of namespace forge with labels.
func stack(name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(stackGVK)
	u.SetNamespace("forge")
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

// stackTarget is the target stack/NAME, resolved.
func stackTarget(name string) target {
	return target{mapping: &meta.RESTMapping{Resource: stackGVR, GroupVersionKind: stackGVK, Scope: meta.RESTScopeNamespace}, name: name}
}

// TestUnlockSelectorLocks: kubectl unlock finds the selector Locks that
// cover the resource by its labels (Lock.Covers) and refuses, deleting
// nothing, with the names to delete by hand; a resource no selector Lock
// covers, or one that does not exist, is left to its targetRef Locks.
func TestUnlockSelectorLocks(t *testing.T) {
	locks := whyLocks()
	c := fakeClients(stack("db", map[string]string{"tier": "db", "env": "prod"}), stack("other", map[string]string{"tier": "web"}))
	cases := map[string]struct {
		reason string
		name   string
		locks  []lockv1alpha1.Lock
		want   []string
	}{
		"Covered": {
			reason: "Stack db matches tier-db, not-legacy and the empty selector; the deleting and invalid selector Locks do not count.",
			name:   "db", locks: locks,
			want: []string{"everything", "not-legacy", "tier-db"},
		},
		"EverythingAndWeb": {
			reason: "Stack other (tier=web, no env) is covered by the empty selector and web only.",
			name:   "other", locks: locks,
			want: []string{"everything", "web"},
		},
		"NoSelectorLocks": {
			reason: "Without selector Locks, none.",
			name:   "db", locks: []lockv1alpha1.Lock{locks[6], locks[7]},
		},
		"Missing": {
			reason: "A resource that does not exist is covered by nothing: its targetRef Locks can still go.",
			name:   "ghost", locks: locks,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := coveringSelectors(t.Context(), c, stackTarget(tc.name), tc.locks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range got {
				names = append(names, l.Name)
			}
			slices.Sort(names)
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s\ncoveringSelectors(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	var out bytes.Buffer
	tierDB := locks[0]
	tierDB.Spec.Reason = "Customer data"
	err := refuseSelectors(Streams{Out: &out}, lockKind{kind: "Lock", ns: "forge"}, stackTarget("db"), []lockv1alpha1.Lock{locks[4], tierDB}, []lockv1alpha1.Lock{locks[7], locks[6]})
	wantOut := "" +
		"Selector Locks covering stack.core.navique.com/db in namespace forge (they protect other resources too):\n" +
		"LOCK         SCOPE              LEVEL          STATUS    PROTECTED   REASON\n" +
		"everything   <all>              CanNotDelete   Pending   <none>      <none>\n" +
		"tier-db      selector:tier=db   CanNotDelete   Pending   <none>      Customer data\n"
	if diff := cmp.Diff(wantOut, out.String()); diff != "" {
		t.Errorf("refuseSelectors output: -want, +got:\n%s", diff)
	}
	wantErr := "no Lock deleted, not even the Lock(s) [freeze-db keep-db] that target it: kubectl unlock never deletes a selector Lock, which protects other resources too; " +
		"if nothing else needs them, delete the selector Lock(s) by name (kubectl delete lock everything tier-db -n forge), then run kubectl unlock again"
	if err == nil || err.Error() != wantErr {
		t.Errorf("refuseSelectors error:\n  %v\nwant\n  %s", err, wantErr)
	}
	if err := refuseSelectors(Streams{Out: &bytes.Buffer{}}, lockKind{kind: "Lock", ns: "forge"}, stackTarget("db"), []lockv1alpha1.Lock{tierDB}, nil); err == nil ||
		err.Error() != "no Lock deleted: kubectl unlock never deletes a selector Lock, which protects other resources too; if nothing else needs them, delete the selector Lock(s) by name (kubectl delete lock tier-db -n forge), then run kubectl unlock again" {
		t.Errorf("refuseSelectors without targetRef Locks: %v", err)
	}
}
