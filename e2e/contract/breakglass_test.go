package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// exceptionWebhook is how the API server prefixes the refusals of the
// chart's entry exception.lockguard.core.navique.com.
const exceptionWebhook = `admission webhook "exception.lockguard.core.navique.com" denied the request: `

// TestBreakGlassException (docs/contract.md rule 20), as real users with
// the chart's roles: a user of the built-in edit role cannot create a
// LockException (RBAC: only lockguard-break-glass grants create on them);
// one who may create them but lacks the verb break-glass on the Lock is
// refused by lockguard, naming the verb and the role; a lockguard-break-glass
// user is refused an exception for another user or of more than 24 hours,
// and creates one for themselves. It lets its creator, and nobody else,
// delete the locked object (with a warning naming it), and the use is
// recorded in the Lock's status.lastException (a dry run is not) and as an
// Event on the Lock. An exception that names one of two refusing Locks
// lets nothing through; one that expires stops letting the delete through
// while its Lock, still there, refuses again; an UPDATE exception lets its
// creator change an object under a ReadOnly Lock.
func TestBreakGlassException(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	ns := kube.NewNamespace(t, "breakglass")
	for _, s := range []string{"app", "pair", "brief"} {
		kube.CreateObject(t, framework.StackGVK, ns, s)
	}
	lkA := kube.CreateLock(t, framework.NewLock(ns, "lk-a", "Stack", "app", "production"))
	lkP1 := kube.CreateLock(t, framework.NewLock(ns, "lk-p1", "Stack", "pair", ""))
	lkP2 := kube.CreateLock(t, framework.NewLock(ns, "lk-p2", "Stack", "pair", ""))
	lkB := kube.CreateLock(t, framework.NewLock(ns, "lk-b", "Stack", "brief", ""))

	// Every user may delete and update Stacks; RBAC never stops them.
	stacks := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack-admin"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "update", "patch", "delete"},
	}}}
	creator := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exception-creator"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"lockexceptions"}, Verbs: []string{"create"},
	}}}
	for _, r := range []*rbacv1.Role{stacks, creator} {
		if err := kube.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	exceptions := &lockv1alpha1.LockExceptionList{}
	editor := kube.EditUser(t, suite.env.Config, ns, "bg-editor", &lockv1alpha1.LockList{})
	nobreak := kube.EditUser(t, suite.env.Config, ns, "bg-nobreak", &lockv1alpha1.LockList{})
	bind(t, ns, "bg-nobreak", "Role", creator.Name)
	bind(t, ns, "bg-holder", "ClusterRole", lockv1alpha1.BreakGlassRole)
	for _, u := range []string{"bg-holder", "bg-other"} {
		bind(t, ns, u, "Role", stacks.Name)
	}
	holder, warnings := userClient(t, "bg-holder")
	other, _ := userClient(t, "bg-other")
	framework.Eventually(t, framework.DefaultTimeout, "bg-holder can list LockExceptions", func(ctx context.Context) error {
		return holder.List(ctx, exceptions, client.InNamespace(ns))
	})
	framework.Eventually(t, framework.DefaultTimeout, "bg-other can read Stacks", func(ctx context.Context) error {
		return other.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, framework.Object(framework.StackGVK, ns, "app"))
	})

	newException := func(name, user, target string, expires time.Time, ops []lockv1alpha1.ExceptionOperation, locks ...string) *lockv1alpha1.LockException {
		return &lockv1alpha1.LockException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lockv1alpha1.LockExceptionSpec{
			TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: target}, Locks: locks, Operations: ops,
			Reason: "incident 42: " + name, User: user, ExpiresAt: metav1.NewTime(expires)}}
	}
	deleteOnly := []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}
	hour := time.Now().Add(time.Hour)

	// Who may create one.
	err := editor.Create(ctx, newException("x-edit", "bg-editor", "app", hour, deleteOnly, "lk-a"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "lockexceptions") {
		t.Errorf("an edit user creating a LockException: %v, want forbidden by RBAC (create lockexceptions)", err)
	}
	wantBreakGlass := exceptionWebhook + lockv1alpha1.BreakGlassMessage(ns, "lk-a")
	framework.Eventually(t, framework.DefaultTimeout, "lockguard's refusal of a user without break-glass", func(ctx context.Context) error {
		err := nobreak.Create(ctx, newException("x-nobreak", "bg-nobreak", "app", hour, deleteOnly, "lk-a"))
		if err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), wantBreakGlass) {
			return fmt.Errorf("%v, want forbidden ending with %q", err, wantBreakGlass)
		}
		return nil
	})
	refusedCreate := func(what string, e *lockv1alpha1.LockException, want string) {
		t.Helper()
		err := holder.Create(ctx, e)
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), exceptionWebhook) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused by lockguard with %q", what, err, want)
		}
	}
	refusedCreate("an exception for another user", newException("x-other", "bg-other", "app", hour, deleteOnly, "lk-a"), lockv1alpha1.ErrExceptionUser.Error())
	refusedCreate("an exception of 25 hours", newException("x-long", "bg-holder", "app", time.Now().Add(25*time.Hour), deleteOnly, "lk-a"), "at most 24h0m0s")

	// The creator's exception lets the creator alone through.
	xApp := newException("x-app", "bg-holder", "app", hour, deleteOnly, "lk-a")
	framework.Eventually(t, framework.DefaultTimeout, "bg-holder creates a LockException", func(ctx context.Context) error {
		return holder.Create(ctx, xApp)
	})
	kube.WantDenied(t, other.Delete(ctx, framework.Object(framework.StackGVK, ns, "app")), lkA)
	wantWarning := webhook.ExceptionWarning(xApp, []lockv1alpha1.Lock{*lkA})
	allowed := func(what string, del func() error) {
		t.Helper()
		seen := len(warnings.All())
		framework.Eventually(t, framework.DefaultTimeout, what, func(context.Context) error { return del() })
		if got := warnings.All()[seen:]; !slices.Contains(got, wantWarning) {
			t.Errorf("%s: warnings %q, want %q", what, got, wantWarning)
		}
	}
	usesBefore := exceptionUses(t, "DELETE")
	allowed("the creator's dry-run delete", func() error {
		return holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll)
	})
	allowed("the creator's delete", func() error { return holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app")) })
	// Counted, the dry run too (the suite's tests run one at a time).
	if got := exceptionUses(t, "DELETE") - usesBefore; got != 2 {
		t.Errorf("lockguard_exception_uses_total{operation=\"DELETE\"} grew by %v, want 2", got)
	}
	framework.Eventually(t, framework.DefaultTimeout, "status.lastException of lk-a", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lkA), &got); err != nil {
			return err
		}
		switch x := got.Status.LastException; {
		case x == nil:
			return fmt.Errorf("none yet (status %+v)", got.Status)
		case x.Exception != "x-app" || x.User != "bg-holder" || x.Operation != "DELETE" || x.Kind != "Stack" || x.Name != "app" || x.Count != 1:
			return fmt.Errorf("%+v, want one DELETE of Stack app by bg-holder through x-app (the dry run not counted)", *x)
		case got.Status.LastDenied == nil || got.Status.LastDenied.User != "bg-other":
			return fmt.Errorf("lastDenied %+v, want bg-other's refused delete", got.Status.LastDenied)
		}
		return nil
	})
	framework.Eventually(t, framework.DefaultTimeout, "an ExceptionUsed Event on lk-a", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == webhook.ReasonExceptionUsed && e.Regarding.Kind == "Lock" && e.Regarding.Name == "lk-a" && strings.Contains(e.Note, "x-app") {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(list.Items))
	})

	// Every refusing Lock must be named.
	if err := holder.Create(ctx, newException("x-pair", "bg-holder", "pair", hour, deleteOnly, "lk-p1")); err != nil {
		t.Fatalf("bg-holder creating an exception for one of two Locks: %v", err)
	}
	kube.WantDenied(t, holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "pair"), client.DryRunAll), lkP1, lkP2)

	// An exception that expires: the Lock refuses again by itself.
	expires := time.Now().Add(8 * time.Second).Truncate(time.Second)
	xBrief := newException("x-brief", "bg-holder", "brief", expires, deleteOnly, "lk-b")
	if err := holder.Create(ctx, xBrief); err != nil {
		t.Fatalf("bg-holder creating an exception of 8 seconds: %v", err)
	}
	framework.Eventually(t, time.Until(expires), "the expiring exception lets the dry-run delete through", func(ctx context.Context) error {
		return holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "brief"), client.DryRunAll)
	})
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	kube.WantDenied(t, holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "brief"), client.DryRunAll), lkB)
	if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lkB), &lockv1alpha1.Lock{}); err != nil {
		t.Errorf("the Lock the expired exception pierced: %v, want it still there", err)
	}

	t.Run("Update", func(t *testing.T) { checkUpdateException(t, ns, holder, other, newException) })
}

// checkUpdateException: under a ReadOnly Lock, an UPDATE exception lets
// its creator change the object; another user is still refused.
func checkUpdateException(t *testing.T, ns string, holder, other client.Client,
	newException func(name, user, target string, expires time.Time, ops []lockv1alpha1.ExceptionOperation, locks ...string) *lockv1alpha1.LockException) {
	ctx := t.Context()
	kube.CreateObject(t, framework.StackGVK, ns, "frozen")
	ro := framework.NewLock(ns, "lk-ro", "Stack", "frozen", "change window")
	ro.Spec.Level = lockv1alpha1.LevelReadOnly
	ro = kube.CreateLock(t, ro)
	waitReadOnly(t, ro, lockv1alpha1.ReasonInForce)
	waitLabel(t, ns, "frozen", true)
	update := func(c client.Client, size string) error {
		u, err := kube.GetObject(ctx, framework.StackGVK, ns, "frozen")
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, size, "spec", "size"); err != nil {
			t.Fatal(err)
		}
		return c.Update(ctx, u)
	}
	want := webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*ro}, "spec")
	wantRefused(t, update(holder, "large"), want)
	x := newException("x-frozen", "bg-holder", "frozen", time.Now().Add(time.Hour), []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionUpdate}, "lk-ro")
	if err := holder.Create(ctx, x); err != nil {
		t.Fatalf("bg-holder creating an UPDATE exception: %v", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the creator's update through the UPDATE exception", func(context.Context) error {
		return update(holder, "large")
	})
	wantRefused(t, update(other, "small"), want)
	// An UPDATE exception is no DELETE exception.
	kube.WantDenied(t, holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "frozen"), client.DryRunAll), ro)
}

// exceptionUses is lockguard_exception_uses_total{operation=op} of the
// lockguard in this process.
func exceptionUses(t *testing.T, op string) float64 {
	t.Helper()
	return counter(t, "lockguard_exception_uses_total", "operation", op)
}

// counter is the counter name{label=value} of the lockguard in this
// process, of its one label (0 when it has not been counted yet).
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetName() == label && l[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestExceptionWhileCacheLags (docs/contract.md rule 20): while
// lockguard's cache of LockExceptions lags the API server (its watch
// events held back 5 seconds), the delete its creator sends the moment
// the exception's create is answered goes through, the exception read
// from the API server (lockguard_confirmations_total{reason="exception"}
// grows: the cache had none); another user is still refused, and so is
// the creator once an exception is deleted, whatever the cache has.
func TestExceptionWhileCacheLags(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	ns := kube.NewNamespace(t, "lagging-exception")
	kube.CreateObject(t, framework.StackGVK, ns, "app")
	kube.CreateObject(t, framework.StackGVK, ns, "other")
	lk := kube.CreateLock(t, framework.NewLock(ns, "lk-app", "Stack", "app", "production"))
	lkOther := kube.CreateLock(t, framework.NewLock(ns, "lk-other", "Stack", "other", "production"))
	stacks := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack-admin"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "delete"},
	}}}
	if err := kube.Client.Create(ctx, stacks); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "lag-holder", "ClusterRole", lockv1alpha1.BreakGlassRole)
	for _, u := range []string{"lag-holder", "lag-other"} {
		bind(t, ns, u, "Role", stacks.Name)
	}
	holder, warnings := userClient(t, "lag-holder")
	other, _ := userClient(t, "lag-other")
	for _, u := range []client.Client{holder, other} {
		framework.Eventually(t, framework.DefaultTimeout, "the users' roles", func(ctx context.Context) error {
			return u.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, framework.Object(framework.StackGVK, ns, "app"))
		})
	}
	framework.Eventually(t, framework.DefaultTimeout, "lag-holder can list LockExceptions", func(ctx context.Context) error {
		return holder.List(ctx, &lockv1alpha1.LockExceptionList{}, client.InNamespace(ns))
	})
	kube.WantDenied(t, holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll), lk)

	const lag = 5 * time.Second
	exceptionLag.Store(int64(lag))
	defer exceptionLag.Store(0)
	// An event already on its way when the lag began arrives on time.
	time.Sleep(time.Second)
	newException := func(name, target, lock string) *lockv1alpha1.LockException {
		return &lockv1alpha1.LockException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lockv1alpha1.LockExceptionSpec{
			TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: target}, Locks: []string{lock},
			Operations: []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete},
			Reason:     "incident 43: " + name, User: "lag-holder", ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour))}}
	}

	x := newException("x-app", "app", lk.Name)
	reads := counter(t, "lockguard_confirmations_total", "reason", webhook.ReasonException)
	if err := holder.Create(ctx, x); err != nil {
		t.Fatalf("lag-holder creating a LockException: %v", err)
	}
	created := time.Now()
	kube.WantDenied(t, other.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll), lk)
	seen := len(warnings.All())
	if err := holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app")); err != nil {
		t.Fatalf("the creator's delete %s after its exception's create was answered, while lockguard's cache of exceptions lags: %v, want it allowed",
			time.Since(created).Round(time.Millisecond), err)
	}
	if took := time.Since(created); took >= lag {
		t.Errorf("the deletes took %s after the create: the cache of exceptions may have caught up", took)
	}
	if want := webhook.ExceptionWarning(x, []lockv1alpha1.Lock{*lk}); !slices.Contains(warnings.All()[seen:], want) {
		t.Errorf("warnings %q, want %q", warnings.All()[seen:], want)
	}
	// Two reads at least: other's refusal and the creator's delete.
	if got := counter(t, "lockguard_confirmations_total", "reason", webhook.ReasonException) - reads; got < 2 {
		t.Errorf("lockguard_confirmations_total{reason=%q} grew by %v, want at least 2: the exceptions were not read from the API server (did the cache not lag?)", webhook.ReasonException, got)
	}

	// A deleted exception lets nothing through.
	xOther := newException("x-other", "other", lkOther.Name)
	if err := holder.Create(ctx, xOther); err != nil {
		t.Fatalf("lag-holder creating a LockException: %v", err)
	}
	if err := kube.Client.Delete(ctx, xOther); err != nil {
		t.Fatal(err)
	}
	kube.WantDenied(t, holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "other"), client.DryRunAll), lkOther)
}

// userClient returns a client acting as user (in system:authenticated),
// and the warnings its requests get.
func userClient(t *testing.T, user string) (client.Client, *framework.Warnings) {
	t.Helper()
	cfg := rest.CopyConfig(suite.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return framework.WarningClient(t, cfg)
}
