package lockctl

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// honourDryRun makes the fake API server of c answer a server-side dry
// run of a create or delete of Locks as the real one does: as if done,
// keeping nothing (the fake's tracker ignores dryRun).
func honourDryRun(c *clients) {
	fake := c.dynamic.(*dynamicfake.FakeDynamicClient)
	fake.PrependReactor("create", "locks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.CreateActionImpl).CreateOptions.DryRun == nil {
			return false, nil, nil
		}
		obj := a.(clienttesting.CreateAction).GetObject()
		name := obj.(metav1.Object).GetName()
		if _, err := fake.Tracker().Get(locksResource, a.GetNamespace(), name); err == nil {
			return true, nil, apierrors.NewAlreadyExists(lockGroupResource, name)
		}
		return true, obj, nil
	})
	fake.PrependReactor("delete", "locks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return a.(clienttesting.DeleteActionImpl).DeleteOptions.DryRun != nil, nil, nil
	})
}

// writesSent returns the writes of Locks the fake was sent, each as
// "VERB NAME dryRun=[...] uid=UID" (uid only for a delete's precondition).
func writesSent(c *clients) []string {
	var out []string
	for _, a := range c.dynamic.(*dynamicfake.FakeDynamicClient).Actions() {
		if a.GetResource().Resource != "locks" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.CreateActionImpl:
			u := a.GetObject().(metav1.Object)
			out = append(out, "create "+u.GetName()+" dryRun="+strings.Join(a.CreateOptions.DryRun, ","))
		case clienttesting.DeleteActionImpl:
			uid := ""
			if p := a.DeleteOptions.Preconditions; p != nil && p.UID != nil {
				uid = string(*p.UID)
			}
			out = append(out, "delete "+a.Name+" dryRun="+strings.Join(a.DeleteOptions.DryRun, ",")+" uid="+uid)
		}
	}
	return out
}

// TestLockCreateDryRun: kubectl lock --dry-run=server sends the create
// with dryRun=All, says "(server dry run)" and waits for nothing (the
// fake reports no status: a wait would time out); -o prints the Lock the
// API server answered. --dry-run=client sends no create and prints the
// Lock it would send. Where the Lock exists, a server dry run says
// unchanged, as the real create would. Nothing is stored.
func TestLockCreateDryRun(t *testing.T) {
	existing := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier-db", UID: "u1"},
		Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}}}
	c := fakeClients(lockObject(t, existing))
	honourDryRun(c)
	create := func(name, dryRun, output string) (string, error) {
		t.Helper()
		o := &lockOptions{dryRun: dryRun, output: output, timeout: 200 * time.Millisecond, reason: "r"}
		l := o.newLock("forge", name)
		l.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}
		var out bytes.Buffer
		err := o.create(t.Context(), Streams{Out: &out, ErrOut: &bytes.Buffer{}}, c.locks(), l, func(bool) string { return "locked" },
			func(l *lockv1alpha1.Lock) error { return nil })
		return out.String(), err
	}
	for _, tc := range []struct{ name, dryRun, output, want string }{
		{"new", dryRunServer, "", "lock.core.navique.com/new created (server dry run)\n"},
		{"new", dryRunClient, "", "lock.core.navique.com/new created (dry run)\n"},
		{"tier-db", dryRunServer, "", "lock.core.navique.com/tier-db unchanged (server dry run)\n"},
	} {
		if out, err := create(tc.name, tc.dryRun, tc.output); err != nil || out != tc.want {
			t.Errorf("kubectl lock --name %s --dry-run=%s: err %v, stdout %q, want %q", tc.name, tc.dryRun, err, out, tc.want)
		}
	}
	for _, dryRun := range []string{dryRunServer, dryRunClient} {
		out, err := create("new", dryRun, "yaml")
		var printed lockv1alpha1.Lock
		if err != nil || yaml.UnmarshalStrict([]byte(out), &printed) != nil || printed.Name != "new" || printed.Spec.Reason != "r" || printed.Kind != "Lock" {
			t.Errorf("kubectl lock --dry-run=%s -o yaml: err %v, printed %q", dryRun, err, out)
		}
	}
	want := []string{"create new dryRun=All", "create tier-db dryRun=All", "create new dryRun=All"}
	if diff := cmp.Diff(want, writesSent(c)); diff != "" {
		t.Errorf("writes sent: -want, +got:\n%s", diff)
	}
	if _, err := getLock(t.Context(), c.dynamic.Resource(locksResource).Namespace("forge"), "new"); !apierrors.IsNotFound(err) {
		t.Errorf("the Lock of the dry runs: %v, want NotFound", err)
	}
}

// TestLockUnlock: kubectl lock unlock NAME shows the Lock, a selector Lock
// too, and asks; not confirmed, it deletes nothing. --dry-run=server
// sends the delete with dryRun=All and the Lock's UID as precondition,
// and the Lock stays; --dry-run=client sends nothing; neither asks. A
// refusal for want of the verb unlock names lockguard-unlock. Confirmed,
// it deletes the Lock and returns once it is gone. A Lock that does not
// exist says where to look.
func TestLockUnlock(t *testing.T) {
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { return time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC) }
	tierDB := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier-db", UID: "u1"},
		Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}},
			Level: lockv1alpha1.LevelCanNotDelete, Reason: "Customer data"}}
	refused := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "stack-forge", UID: "u2"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "forge"}}}
	c := fakeClients(lockObject(t, tierDB), lockObject(t, refused))
	honourDryRun(c)
	refusal := apierrors.NewForbidden(lockGroupResource, "stack-forge", errors.New(`admission webhook "unlock.lockguard.core.navique.com" denied the request: `+
		lockv1alpha1.UnlockDeleteMessage("forge", "stack-forge")))
	c.dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("delete", "locks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return a.(clienttesting.DeleteActionImpl).Name == "stack-forge", nil, refusal
	})
	unlock := func(name, answer string, o lockUnlockOptions) (string, error) {
		t.Helper()
		o.timeout = 2 * time.Second
		var out bytes.Buffer
		err := withRoleHint(o.unlock(t.Context(), Streams{In: strings.NewReader(answer), Out: &out, ErrOut: &bytes.Buffer{}}, c, name))
		return out.String(), err
	}
	shown := "Lock tier-db in namespace forge:\n" +
		"LOCK      SCOPE              LEVEL          STATUS    PROTECTED   REASON\n" +
		"tier-db   selector:tier=db   CanNotDelete   Pending   <none>      Customer data\n"

	out, err := unlock("tier-db", "n\n", lockUnlockOptions{})
	if errText(err) != "not confirmed: no Lock deleted (--yes skips the question)" || out != shown+"Delete 1 Lock(s)? [y/N]: " {
		t.Errorf("kubectl lock unlock, not confirmed: err %v, stdout %q", err, out)
	}
	out, err = unlock("tier-db", "", lockUnlockOptions{dryRun: dryRunServer})
	if err != nil || out != shown+"lock.core.navique.com/tier-db deleted (server dry run)\n" {
		t.Errorf("kubectl lock unlock --dry-run=server: err %v, stdout %q", err, out)
	}
	out, err = unlock("tier-db", "", lockUnlockOptions{dryRun: dryRunClient})
	if err != nil || out != shown+"lock.core.navique.com/tier-db deleted (dry run)\n" {
		t.Errorf("kubectl lock unlock --dry-run=client: err %v, stdout %q", err, out)
	}
	if _, err := getLock(t.Context(), c.dynamic.Resource(locksResource).Namespace("forge"), "tier-db"); err != nil {
		t.Errorf("the Lock after dry runs: %v, want it kept", err)
	}

	_, err = unlock("stack-forge", "", lockUnlockOptions{yes: true})
	wantHint := "You lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace"
	if !errors.Is(err, refusal) || !strings.Contains(errText(err), wantHint) {
		t.Errorf("kubectl lock unlock, refused: %v\nwant the refusal and %q", err, wantHint)
	}

	out, err = unlock("tier-db", "y\n", lockUnlockOptions{})
	if err != nil || out != shown+"Delete 1 Lock(s)? [y/N]: lock.core.navique.com/tier-db deleted\n" {
		t.Errorf("kubectl lock unlock, confirmed: err %v, stdout %q", err, out)
	}
	if _, err := getLock(t.Context(), c.dynamic.Resource(locksResource).Namespace("forge"), "tier-db"); !apierrors.IsNotFound(err) {
		t.Errorf("the Lock after kubectl lock unlock: %v, want NotFound", err)
	}
	want := []string{"delete tier-db dryRun=All uid=u1", "delete stack-forge dryRun= uid=u2", "delete tier-db dryRun= uid=u1"}
	if diff := cmp.Diff(want, writesSent(c)); diff != "" {
		t.Errorf("deletes sent: -want, +got:\n%s", diff)
	}

	_, err = unlock("ghost", "", lockUnlockOptions{yes: true})
	if !apierrors.IsNotFound(err) || !strings.Contains(errText(err), "kubectl lock list -n forge") {
		t.Errorf("kubectl lock unlock of a Lock that does not exist: %v", err)
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
