package webhook

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// freshness is a Freshness that answers mayLack for every target and
// records, in calls, the order of its questions and of the index's.
type freshness struct {
	mayLack   bool
	calls     *[]string
	confirmed []string
}

func (f *freshness) MayLack(lockv1alpha1.TargetKey) (string, bool) {
	*f.calls = append(*f.calls, "freshness")
	if f.mayLack {
		return "marker", true
	}
	return "", false
}

func (f *freshness) Confirmed(reason string) { f.confirmed = append(f.confirmed, reason) }

// TestFreshness: with a Freshness, a delete the index would allow is
// confirmed with the API server only when the Freshness says the index may
// lack a Lock of its target (even when the index denies, so that the
// denial names every Lock), and the Freshness is asked before the index
// (a marker is removed only after the index holds its Lock).
func TestFreshness(t *testing.T) {
	s := lockScheme(t)
	key := lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}
	cases := map[string]struct {
		reason        string
		mayLack       bool
		indexed       bool // the index has Lock "old"
		want          []string
		wantConfirmed []string
	}{
		"MayLack": {
			reason:        "A pending create of the target: the API server's Lock is found.",
			mayLack:       true,
			want:          []string{"new"},
			wantConfirmed: []string{"marker"},
		},
		"MayLackWhileIndexDenies": {
			reason:        "A pending create of a target the index already has a Lock of: the denial names both Locks, each once (LOCK-SPEC rule 14; found by Test14PendingAcrossReplicas under load).",
			mayLack:       true,
			indexed:       true,
			want:          []string{"old", "new"},
			wantConfirmed: []string{"marker"},
		},
		"IndexDeniesCannotLack": {
			reason:  "No pending create: the index's Lock denies, no read.",
			indexed: true,
			want:    []string{"old"},
		},
		"CannotLack": {
			reason: "No pending create and a warm replica: allowed from the index, no read (the API server's Lock stands for one the proof says cannot exist).",
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls []string
			index := LockIndexFunc(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				calls = append(calls, "index")
				if tc.indexed {
					return []lockv1alpha1.Lock{*newLock("forge", "old", "", "Stack", "forge")}, nil
				}
				return nil, nil
			})
			stored := []client.Object{newLock("forge", "new", "", "Stack", "forge")}
			if tc.indexed {
				stored = append(stored, newLock("forge", "old", "", "Stack", "forge"))
			}
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(stored...).Build()
			f := &freshness{mayLack: tc.mayLack, calls: &calls}
			h := NewHandler(index, api, WithFreshness(f))
			locks, err := h.locks.find(context.Background(), key.Object(nil))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range locks {
				got = append(got, l.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nfind(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantConfirmed, f.confirmed); diff != "" {
				t.Errorf("%s\nconfirmations: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{"freshness", "index"}, calls); diff != "" {
				t.Errorf("order of the questions: -want, +got:\n%s", diff)
			}
		})
	}
}
