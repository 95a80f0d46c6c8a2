package webhook_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// TestCoveringAcrossAnUpdate checks that a Lock's update never uncovers
// what it covers, not even for a moment (issue 24): while the status of a
// selector Lock, of an empty-selector Lock and of a targetRef Lock is
// written over and over (each write replaces the Lock object in the
// informer's store and its indexes), DELETEs of objects they cover,
// decided at the same time through lockguard's index, are all denied,
// naming the Lock. An earlier implementation, which kept the selector
// Locks' parsed selectors beside the store, let one delete in 400 through.
func TestCoveringAcrossAnUpdate(t *testing.T) {
	db := lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier-db", ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}},
	}
	all := lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "everything", Name: "all", ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}},
	}
	ref := lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "pinned", ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "pinned"}},
	}
	locks := []*lockv1alpha1.Lock{&db, &all, &ref}
	list := &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for _, l := range locks {
		list.Items = append(list.Items, *l.DeepCopy())
	}
	watcher := watch.NewFake()
	index, inf := lockCacheWatching(t, list, watcher)
	h := webhook.NewHandler(webhook.Config{Locks: index})

	deletion := func(ns, name string, labels map[string]string) webhook.Request {
		r := webhook.Request{
			UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
			Operation: admissionv1.Delete,
			Kind:      metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
			Namespace: ns, Name: name,
		}
		r.OldObject.Metadata.Name, r.OldObject.Metadata.Labels = name, labels
		return r
	}
	cases := []struct {
		req  webhook.Request
		want string
	}{
		{deletion("forge", "db", map[string]string{"tier": "db"}), webhook.DenialMessage([]lockv1alpha1.Lock{db})},
		{deletion("everything", "any", nil), webhook.DenialMessage([]lockv1alpha1.Lock{all})},
		{deletion("forge", "pinned", nil), webhook.DenialMessage([]lockv1alpha1.Lock{ref})},
	}

	const updates = 3000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var decisions, violations atomic.Int64
	var first sync.Once
	for g := range 2 {
		wg.Go(func() {
			ctx := context.Background()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tc := cases[i%len(cases)]
				resp := h.Decide(ctx, tc.req)
				decisions.Add(1)
				if got := resp.Result.Message; resp.Allowed || got != tc.want {
					violations.Add(1)
					first.Do(func() {
						t.Errorf("VIOLATION: the DELETE of Stack %s/%s during its Lock's update: allowed %v, %q; want denied, %q",
							tc.req.Namespace, tc.req.Name, resp.Allowed, got, tc.want)
					})
				}
			}
		})
	}
	// Each update rewrites one Lock's status, as lockguard's status writes
	// do (Lock.Status.Protected): a new object, the same spec.
	for i := range updates {
		l := locks[i%len(locks)].DeepCopy()
		l.ResourceVersion = strconv.Itoa(i + 2)
		l.Status.Protected = &lockv1alpha1.ProtectedStatus{Count: int32(i)}
		watcher.Modify(l)
	}
	// The last updates are in the store before the deciders stop.
	deadline := time.Now().Add(time.Minute)
	for i := updates - len(locks); i < updates; i++ {
		l := locks[i%len(locks)]
		for {
			o, ok, err := inf.GetIndexer().GetByKey(l.Namespace + "/" + l.Name)
			if err != nil {
				t.Fatal(err)
			}
			if ok && o.(metav1.Object).GetResourceVersion() == strconv.Itoa(i+2) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the informer did not deliver the update %d of Lock %s/%s", i, l.Namespace, l.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d decisions during %d Lock updates: %d allowed or not naming the Lock", decisions.Load(), updates, violations.Load())
	if violations.Load() > 0 {
		t.Errorf("%d of %d decisions uncovered an object during its Lock's update", violations.Load(), decisions.Load())
	}
}
