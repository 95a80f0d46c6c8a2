package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// freshness is a Freshness and PendingCreates that answers mayLack (for
// reason "cold", or "marker" when pending) and pending for every target,
// and records, in calls, the order of its questions and of the index's.
type freshness struct {
	mayLack, pending bool
	calls            *[]string
	confirmed        []string
}

func (f *freshness) MayLack(lockv1alpha1.TargetKey) (string, bool) {
	*f.calls = append(*f.calls, "freshness")
	switch {
	case f.mayLack && f.pending:
		return "marker", true
	case f.mayLack:
		return "cold", true
	}
	return "", false
}

func (f *freshness) PendingCreate(lockv1alpha1.TargetKey) bool {
	*f.calls = append(*f.calls, "pending")
	return f.pending
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
		reason           string
		mayLack, pending bool
		indexed          bool // the index has Lock "old"
		apiDown          bool // every List fails
		want             []string
		wantConfirmed    []string
		wantCalls        []string
	}{
		"MayLack": {
			reason:        "A pending create of the target: the API server's Lock is found.",
			mayLack:       true,
			pending:       true,
			want:          []string{"new"},
			wantConfirmed: []string{"marker"},
		},
		"Cold": {
			reason:        "A cold replica, nothing in the index: the API server's Lock is found.",
			mayLack:       true,
			want:          []string{"new"},
			wantConfirmed: []string{"cold"},
		},
		"PendingWhileIndexDenies": {
			reason:        "A pending create of a target the index already has a Lock of: the denial names both Locks, each once (docs/contract.md rule 14; found by Test14PendingAcrossReplicas under load).",
			mayLack:       true,
			pending:       true,
			indexed:       true,
			want:          []string{"old", "new"},
			wantConfirmed: []string{"marker"},
		},
		"PendingWhileIndexDeniesAPIDown": {
			reason:        "A pending create, the index denies, the API server cannot be read: denied from the index, not failed (the read would only add a name).",
			mayLack:       true,
			pending:       true,
			indexed:       true,
			apiDown:       true,
			want:          []string{"old"},
			wantConfirmed: []string{"marker"},
		},
		"ColdWhileIndexDenies": {
			reason:  "A cold replica whose index denies, no create pending: denied from the index, no read (a cold replica must not list the namespace for every denial; TestReadyMeansFresh).",
			mayLack: true,
			indexed: true,
			want:    []string{"old"},
		},
		"IndexDeniesCannotLack": {
			reason:    "No pending create, warm: the index's Lock denies, no read.",
			indexed:   true,
			want:      []string{"old"},
			wantCalls: []string{"freshness", "index"},
		},
		"CannotLack": {
			reason: "No pending create and a warm replica: allowed from the index, no read (the API server's Lock stands for one the proof says cannot exist).",
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls []string
			index := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
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
			b := fake.NewClientBuilder().WithScheme(s).WithObjects(stored...)
			if tc.apiDown {
				b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return errors.New("connection refused")
				}})
			}
			api := b.Build()
			f := &freshness{mayLack: tc.mayLack, pending: tc.pending, calls: &calls}
			h := NewHandler(Config{Locks: index, Live: api, Freshness: f})
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
			wantCalls := tc.wantCalls
			if wantCalls == nil {
				wantCalls = []string{"freshness", "index"}
				if tc.mayLack {
					wantCalls = []string{"freshness", "pending", "index"}
				}
			}
			if diff := cmp.Diff(wantCalls, calls); diff != "" {
				t.Errorf("order of the questions: -want, +got:\n%s", diff)
			}
		})
	}
}
