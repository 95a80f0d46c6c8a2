package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newLock(ns, name, apiVersion, kind, target string) *Lock {
	return &Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       LockSpec{TargetRef: TargetReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func TestTarget(t *testing.T) {
	deleting := newLock("ns", "l", "", "Stack", "s")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := map[string]struct {
		reason   string
		lock     *Lock
		want     TargetKey
		wantErr  string
		wantLive bool
	}{
		"Default": {
			reason:   "An empty apiVersion means core.navique.com/v1alpha1.",
			lock:     newLock("ns", "l", "", "Stack", "s"),
			want:     TargetKey{Namespace: "ns", Group: "core.navique.com", Kind: "Stack", Name: "s"},
			wantLive: true,
		},
		"OtherVersion": {
			reason:   "Any version of the group is valid, and the key has none.",
			lock:     newLock("ns", "l", "core.navique.com/v1beta1", "Stack", "s"),
			want:     TargetKey{Namespace: "ns", Group: "core.navique.com", Kind: "Stack", Name: "s"},
			wantLive: true,
		},
		"BeingDeleted": {
			reason: "A Lock being deleted still has its target, but no longer counts.",
			lock:   deleting,
			want:   TargetKey{Namespace: "ns", Group: "core.navique.com", Kind: "Stack", Name: "s"},
		},
		"OtherGroup": {
			reason:  "Only core.navique.com can be locked.",
			lock:    newLock("ns", "l", "apps/v1", "Deployment", "d"),
			wantErr: `only core.navique.com resources can be locked, and targetRef.apiVersion "apps/v1" is in group "apps"; Deployment.apps is not among the kinds this installation protects: to lock it, add {group: apps, resources: [<resource>]} to the chart's protect.resources (lockguard --protect-resource=<resource>.apps), then create the Lock again`,
		},
		"CoreGroup": {
			reason:  "The core group (apiVersion v1) is another group.",
			lock:    newLock("ns", "l", "v1", "ConfigMap", "c"),
			wantErr: `only core.navique.com resources can be locked, and targetRef.apiVersion "v1" is in group ""; ConfigMap is not among the kinds this installation protects: to lock it, add {group: "", resources: [<resource>]} to the chart's protect.resources (lockguard --protect-resource=<resource>), then create the Lock again`,
		},
		"LockOfLock": {
			reason:  "A Lock cannot lock a Lock.",
			lock:    newLock("ns", "l", "", "Lock", "other"),
			wantErr: "a Lock cannot protect another Lock: deleting a Lock is never blocked",
		},
		"Unparsable": {
			reason:  "An apiVersion with two slashes does not parse.",
			lock:    newLock("ns", "l", "a/b/c", "Stack", "s"),
			wantErr: `targetRef.apiVersion "a/b/c" is not a valid API version: unexpected GroupVersion string: a/b/c`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.lock.Target()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("%s\nTarget() error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nTarget(): -want, +got:\n%s", tc.reason, diff)
			}
			if _, live := tc.lock.LiveTarget(time.Time{}); live != tc.wantLive {
				t.Errorf("%s\nLiveTarget(): live %v, want %v", tc.reason, live, tc.wantLive)
			}
		})
	}
}

// TestTargetKeyString: keys of different targets never share a string (the
// index is keyed by it).
func TestTargetKeyString(t *testing.T) {
	a := TargetKey{Namespace: "ns", Group: "core.navique.com", Kind: "Stack", Name: "s"}
	if got, want := a.String(), "ns/core.navique.com/Stack/s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, b := range []TargetKey{
		{Namespace: "other", Group: a.Group, Kind: a.Kind, Name: a.Name},
		{Namespace: a.Namespace, Group: a.Group, Kind: "PostgresCluster", Name: a.Name},
		{Namespace: a.Namespace, Group: a.Group, Kind: a.Kind, Name: "t"},
	} {
		if a.String() == b.String() {
			t.Errorf("%+v and %+v share the string %q", a, b, a.String())
		}
	}
}
