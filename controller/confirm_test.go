package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestConfirmedFinder: the webhook's finder answers from the cache when it
// has Locks, and otherwise from the API server, so that a Lock the cache
// has not seen yet still protects its target (found by the chaos run of
// issue 7: a delete sent right after a Lock's create was answered went
// through).
func TestConfirmedFinder(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	stack := schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}
	forge := types.NamespacedName{Namespace: "forge", Name: "forge"}
	cached := func(locks ...client.Object) *Finder {
		c := fake.NewClientBuilder().WithScheme(s).WithIndex(&lockv1alpha1.Lock{}, TargetIndex, indexLockTarget).WithObjects(locks...).Build()
		return &Finder{reader: c, synced: func() bool { return true }}
	}
	apiServer := func(locks ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(s).WithObjects(locks...).Build()
	}
	failing := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	}).Build()
	deleting := newLock("forge", "deleting", "", "Stack", "forge")
	deleting.Finalizers = []string{"example.com/keep"}
	deleting.DeletionTimestamp = ptrNow()

	cases := map[string]struct {
		reason  string
		finder  *ConfirmedFinder
		want    []string
		wantErr bool
	}{
		"CacheHasLocks": {
			reason: "Locks in the cache deny at once; the API server is not read (it would fail).",
			finder: NewConfirmedFinder(cached(newLock("forge", "a", "", "Stack", "forge")), failing),
			want:   []string{"a"},
		},
		"CacheLagsBehind": {
			reason: "A Lock the cache has not seen yet is found on the API server.",
			finder: NewConfirmedFinder(cached(), apiServer(
				newLock("forge", "new", "core.navique.com/v1beta1", "Stack", "forge"),
				newLock("forge", "other-name", "", "Stack", "other"),
				newLock("forge", "other-kind", "", "PostgresCluster", "forge"),
				newLock("forge", "other-group", "apps/v1", "Stack", "forge"),
				newLock("elsewhere", "other-ns", "", "Stack", "forge"),
				deleting,
			)),
			want: []string{"new"},
		},
		"NoLockAnywhere": {
			reason: "Without a Lock in the cache or on the API server, nothing protects the object.",
			finder: NewConfirmedFinder(cached(), apiServer(newLock("forge", "other-name", "", "Stack", "other"))),
		},
		"APIServerUnreadable": {
			reason:  "When the API server cannot confirm, FindLocks fails, and the webhook fails closed.",
			finder:  NewConfirmedFinder(cached(), failing),
			wantErr: true,
		},
		"CacheNotSynced": {
			reason:  "Before the cache has synced, FindLocks fails as the Finder does.",
			finder:  NewConfirmedFinder(&Finder{synced: func() bool { return false }}, apiServer()),
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			locks, err := tc.finder.FindLocks(context.Background(), stack, forge)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nFindLocks(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			var names []string
			for _, l := range locks {
				names = append(names, l.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s\nFindLocks(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}
