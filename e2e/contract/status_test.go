package contract_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/denials"
	"github.com/navique/lockguard/webhook"
)

// holdFinalizer keeps an object whose delete was allowed until the test
// releases it, so that the test chooses when its delete event comes.
const holdFinalizer = "lockguard.test/hold"

// createHeldStack creates Stack ns/name with labels and holdFinalizer,
// deletes it while nothing covers it (it stays, terminating), and
// releases it when the test ends, if it has not.
func createHeldStack(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	u := framework.Object(framework.StackGVK, ns, name)
	u.SetLabels(labels)
	u.SetFinalizers([]string{holdFinalizer})
	if err := kube.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating Stack %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { _ = releaseStack(context.Background(), ns, name) })
	if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, name); err != nil {
		t.Fatalf("deleting Stack %s/%s while nothing covers it: %v", ns, name, err)
	}
}

// releaseStack removes the finalizers of Stack ns/name, which lets the
// API server remove it.
func releaseStack(ctx context.Context, ns, name string) error {
	return client.IgnoreNotFound(kube.Client.Patch(ctx, framework.Object(framework.StackGVK, ns, name),
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
}

// protected is the status.protected of a Lock covering names (Kind/name
// pairs, sorted), count in all.
func protected(count int32, names ...string) *lockv1alpha1.ProtectedStatus {
	p := &lockv1alpha1.ProtectedStatus{Count: count}
	for i := 0; i+1 < len(names); i += 2 {
		p.Resources = append(p.Resources, lockv1alpha1.ProtectedResource{Kind: names[i], Name: names[i+1]})
	}
	return p
}

// waitProtected waits until Lock l's status.protected is want.
func waitProtected(t *testing.T, l *lockv1alpha1.Lock, want *lockv1alpha1.ProtectedStatus) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("status.protected of Lock %s", l.Name), func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
			return err
		}
		if diff := cmp.Diff(want, got.Status.Protected); diff != "" {
			return fmt.Errorf("-want, +got:\n%s", diff)
		}
		return nil
	})
}

// TestStatusProtected: status.protected follows what a Lock covers, by
// the webhook's own rule: a targetRef Lock covers its target while it
// exists; a tier=db selector Lock counts and names the objects labelled
// tier=db, including one created or labelled later, and stops counting
// one relabelled out of it or deleted.
func TestStatusProtected(t *testing.T) {
	ns := kube.NewNamespace(t, "protected")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", nil)
	kube.CreateObject(t, framework.PostgresClusterGVK, ns, "pg")
	// Deleted while nothing covers it, held by a finalizer: a covered
	// object cannot be deleted, so this is how a covered object goes away
	// below (its finalizer released).
	createHeldStack(t, ns, "held", nil)
	keep := kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "web", ""))
	ghost := kube.CreateLock(t, framework.NewLock(ns, "ghost", "Stack", "nothing", ""))
	hold := kube.CreateLock(t, framework.NewLock(ns, "hold", "Stack", "held", ""))
	db := kube.CreateLock(t, framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	kube.WaitActive(t, keep, hold, db)
	waitProtected(t, keep, protected(1, "Stack", "web"))
	waitProtected(t, ghost, protected(0))
	waitProtected(t, hold, protected(1, "Stack", "held"))
	waitProtected(t, db, protected(1, "Stack", "db"))

	// Created, and labelled, later.
	createLabelledStack(t, ns, "db2", map[string]string{"tier": "db"})
	waitProtected(t, db, protected(2, "Stack", "db", "Stack", "db2"))
	if err := kube.Client.Patch(t.Context(), framework.Object(framework.PostgresClusterGVK, ns, "pg"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"db"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitProtected(t, db, protected(3, "PostgresCluster", "pg", "Stack", "db", "Stack", "db2"))
	// Relabelled out.
	relabel(t, ns, "db", "web")
	waitProtected(t, db, protected(2, "PostgresCluster", "pg", "Stack", "db2"))
	// Labelled in, then gone.
	relabel(t, ns, "held", "db")
	waitProtected(t, db, protected(3, "PostgresCluster", "pg", "Stack", "db2", "Stack", "held"))
	if err := releaseStack(t.Context(), ns, "held"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "Stack held gone", kube.Gone(framework.StackGVK, ns, "held"))
	waitProtected(t, db, protected(2, "PostgresCluster", "pg", "Stack", "db2"))
	waitProtected(t, hold, protected(0))
	waitProtected(t, keep, protected(1, "Stack", "web"))
}

// whoAmI returns the user name the API server authenticates the suite's
// client as (a SelfSubjectReview).
func whoAmI(t *testing.T) string {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	if err := kube.Client.Create(t.Context(), review); err != nil {
		t.Fatalf("asking who the suite's client is: %v", err)
	}
	return review.Status.UserInfo.Username
}

// readLock reads Lock l as the API server has it.
func readLock(ctx context.Context, l *lockv1alpha1.Lock) (*lockv1alpha1.Lock, error) {
	got := &lockv1alpha1.Lock{}
	return got, kube.Client.Get(ctx, client.ObjectKeyFromObject(l), got)
}

// deniedIs checks d, a recorded refusal, against want, its time within
// [from, to] (the API server keeps seconds).
func deniedIs(d, want lockv1alpha1.DeniedRequest, from, to time.Time) error {
	at := d.Time.Time
	d.Time = want.Time
	if diff := cmp.Diff(want, d); diff != "" {
		return fmt.Errorf("-want, +got:\n%s", diff)
	}
	if at.Before(from.Truncate(time.Second)) || at.After(to) {
		return fmt.Errorf("time %s, want between %s and %s", at, from, to)
	}
	return nil
}

// waitLastDenied waits until Lock l's status.lastDenied is want, its time
// within [from, to] (the API server keeps seconds).
func waitLastDenied(t *testing.T, l *lockv1alpha1.Lock, want lockv1alpha1.DeniedRequest, from, to time.Time) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("status.lastDenied of Lock %s", l.Name), func(ctx context.Context) error {
		got, err := readLock(ctx, l)
		if err != nil {
			return err
		}
		if got.Status.LastDenied == nil {
			return fmt.Errorf("no lastDenied yet")
		}
		return deniedIs(*got.Status.LastDenied, want, from, to)
	})
}

// TestStatusLastDenied: a refused delete of a locked object, by the
// suite's user, and then of its namespace, are recorded on the Lock's
// status.lastDenied (time, user, operation, object) with a count; a
// refused dry run is recorded nowhere.
func TestStatusLastDenied(t *testing.T) {
	ns := kube.NewNamespace(t, "lastdenied")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	keep := kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "forge", ""))
	kube.WaitActive(t, keep)
	user := whoAmI(t)

	before := time.Now()
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge"), keep)
	waitLastDenied(t, keep, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Stack", Name: "forge", Count: 1}, before, time.Now().Add(time.Second))

	before = time.Now()
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns)), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, keep))
	waitLastDenied(t, keep, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Namespace", Name: ns, Count: 2}, before, time.Now().Add(time.Second))

	// Dry runs, then one real refusal: had the dry runs been recorded,
	// they would be counted with it (the count would pass 3, never stop
	// at it).
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge", client.DryRunAll), keep)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, keep))
	before = time.Now()
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge"), keep)
	waitLastDenied(t, keep, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Stack", Name: "forge", Count: 3}, before, time.Now().Add(time.Second))
}

// settledLock creates a namespace with Stack forge and Lock keep on it,
// and returns them once the Lock's status is written (active, covering
// the Stack), with the Lock as it is then.
func settledLock(t *testing.T, prefix string) (ns string, keep, settled *lockv1alpha1.Lock) {
	t.Helper()
	ns = kube.NewNamespace(t, prefix)
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	keep = kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "forge", ""))
	kube.WaitActive(t, keep)
	waitProtected(t, keep, protected(1, "Stack", "forge"))
	settled, err := readLock(t.Context(), keep)
	if err != nil {
		t.Fatal(err)
	}
	return ns, keep, settled
}

// TestStatusDryRunWritesNothing: refused dry runs (of the object and of
// its namespace) leave the Lock exactly as it was: no status write at all.
func TestStatusDryRunWritesNothing(t *testing.T) {
	ns, keep, settled := settledLock(t, "dryrunstatus")
	for range 5 {
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge", client.DryRunAll), keep)
		kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, keep))
	}
	// Longer than a flush interval: a recorded dry run would be written
	// by then.
	framework.Consistently(t, denials.DefaultInterval+2*time.Second, "the Lock is unchanged", func(ctx context.Context) error {
		got, err := readLock(ctx, keep)
		if err != nil {
			return err
		}
		if got.ResourceVersion != settled.ResourceVersion || got.Status.LastDenied != nil {
			return fmt.Errorf("the Lock changed: resourceVersion %s -> %s, lastDenied %+v", settled.ResourceVersion, got.ResourceVersion, got.Status.LastDenied)
		}
		return nil
	})
}

// restConfig is the suite's API server's client configuration.
func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	if suite.env != nil {
		return suite.env.Config
	}
	cfg, err := framework.ClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// burstDeletes is how many refused deletes TestStatusDenialBurst sends.
const burstDeletes = 50

// TestStatusDenialBurst: a delete loop does not make a write storm. 50
// refused deletes sent one after the other are all counted in
// lastDenied, while the Lock is written at most once when the first
// arrives, once per flush interval while they keep coming, and once after
// the last: 2 + ceil(burst duration / interval) resourceVersions at most
// (the bound is derived from the burst as measured, not from a speed).
func TestStatusDenialBurst(t *testing.T) {
	ns, keep, settled := settledLock(t, "burst")
	wc, err := client.NewWithWatch(restConfig(t), client.Options{Scheme: kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &lockv1alpha1.LockList{}, &client.ListOptions{
		Namespace:     ns,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", keep.Name),
		Raw:           &metav1.ListOptions{ResourceVersion: settled.ResourceVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	start := time.Now()
	for range burstDeletes {
		if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge"); err == nil {
			t.Fatal("a delete of the locked Stack was allowed")
		}
	}
	burst := time.Since(start)
	user := whoAmI(t)
	waitLastDenied(t, keep, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Stack", Name: "forge", Count: burstDeletes}, start, time.Now().Add(time.Second))
	final, err := readLock(t.Context(), keep)
	if err != nil {
		t.Fatal(err)
	}

	// Every resourceVersion the Lock went through, up to the final one.
	versions := 0
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			t.Fatalf("watching the Lock: %v", ev.Object)
		}
		l, ok := ev.Object.(*lockv1alpha1.Lock)
		if !ok || ev.Type != watch.Modified {
			continue
		}
		versions++
		if l.ResourceVersion == final.ResourceVersion {
			break
		}
	}
	bound := 2 + int(math.Ceil(float64(burst)/float64(denials.DefaultInterval)))
	t.Logf("%d refused deletes in %s: the Lock went through %d resourceVersions (at most %d allowed, flush interval %s)", burstDeletes, burst.Round(time.Millisecond), versions, bound, denials.DefaultInterval)
	if versions > bound {
		t.Errorf("%d refused deletes in %s made %d writes of the Lock, want at most %d", burstDeletes, burst, versions, bound)
	}
}
