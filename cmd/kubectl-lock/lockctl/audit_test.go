package lockctl

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// reportLive makes the fake API server of c store each Lock created with
// the status lockguard writes for a live one: Ready True, reason Active
// and active, or reason Audit and not active for a Lock in Audit
// enforcement (docs/contract.md rule 20).
func reportLive(t *testing.T, c *clients) {
	t.Helper()
	c.dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("create", "locks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
		l, err := fromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		reason := lockv1alpha1.ReasonActive
		if !l.Enforces() {
			reason = lockv1alpha1.ReasonAudit
		}
		l.Status = lockv1alpha1.LockStatus{Active: l.Enforces(),
			Conditions: []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason}}}
		*u = *lockObject(t, l)
		return false, nil, nil // the tracker stores u
	})
}

// TestLockAudit: kubectl lock --audit creates the Lock with
// spec.enforcement Audit, returns once lockguard reports it live (Ready,
// reason Audit: it is never active) and says that it refuses nothing and
// where what it would refuse goes. Where a Lock of the name exists, an
// enforcing one is kept, with a warning, and an Audit one when --audit is
// not given is an error that says how to make it refuse.
func TestLockAudit(t *testing.T) {
	existing := func(name string, e lockv1alpha1.Enforcement) *unstructured.Unstructured {
		l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name},
			Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}, Enforcement: e}}
		l.Status.Active = l.Enforces()
		l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive}}
		if !l.Enforces() {
			l.Status.Conditions[0].Reason = lockv1alpha1.ReasonAudit
		}
		return lockObject(t, l)
	}
	c := fakeClients(existing("enforced", lockv1alpha1.EnforcementEnforce), existing("audited", lockv1alpha1.EnforcementAudit))
	reportLive(t, c)
	done := func(bool) string { return "enforcing" }
	create := func(name string, o *lockOptions) (string, string, error) {
		t.Helper()
		o.timeout = 2 * time.Second
		l := o.newLock("forge", name)
		l.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}
		var out, errOut bytes.Buffer
		err := o.create(t.Context(), Streams{Out: &out, ErrOut: &errOut}, c.locks(), l, done, func(*lockv1alpha1.Lock) error { return nil })
		return out.String(), errOut.String(), err
	}

	out, errOut, err := create("try-db", &lockOptions{audit: true, readOnly: true, reason: "try"})
	wantOut := "lock.core.navique.com/try-db created\n" +
		"the Lock try-db on selector:tier=db in namespace forge is in Audit enforcement: it refuses nothing; each request it would refuse " +
		"(deleting what it covers, or changing its spec or metadata) is allowed with a warning and recorded in its status.lastWouldDeny " +
		"(kubectl lock show try-db -n forge); kubectl lock update try-db -n forge --enforce makes it refuse\n"
	if err != nil || errOut != "" {
		t.Fatalf("kubectl lock --audit: %v, stderr %q", err, errOut)
	}
	if diff := cmp.Diff(wantOut, out); diff != "" {
		t.Errorf("kubectl lock --audit: stdout -want, +got:\n%s", diff)
	}
	got, err := getLock(t.Context(), c.dynamic.Resource(locksResource).Namespace("forge"), "try-db")
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}},
		Level: lockv1alpha1.LevelReadOnly, Reason: "try", Enforcement: lockv1alpha1.EnforcementAudit}
	if diff := cmp.Diff(wantSpec, got.Spec); diff != "" {
		t.Errorf("the Lock kubectl lock --audit created: spec -want, +got:\n%s", diff)
	}

	out, errOut, err = create("enforced", &lockOptions{audit: true})
	if err != nil || out != "lock.core.navique.com/enforced unchanged\nenforcing\n" || errOut != "Warning: the existing Lock's enforcement Enforce was kept\n" {
		t.Errorf("kubectl lock --audit where an enforcing Lock exists: err %v, stdout %q, stderr %q", err, out, errOut)
	}

	_, _, err = create("audited", &lockOptions{})
	want := `lock.core.navique.com "audited" already exists in Audit enforcement, which refuses nothing: make it refuse (kubectl lock update audited -n forge --enforce) or choose another name with --name`
	if err == nil || err.Error() != want {
		t.Errorf("kubectl lock where an Audit Lock exists:\n  %v\nwant\n  %s", err, want)
	}
	if out, _, err = create("audited", &lockOptions{audit: true}); err != nil || out != "lock.core.navique.com/audited unchanged\n"+auditDone(mustLock(t, existing("audited", lockv1alpha1.EnforcementAudit)))+"\n" {
		t.Errorf("kubectl lock --audit where the same Audit Lock exists: err %v, stdout %q", err, out)
	}
}

// lockObject is l as the dynamic client holds it.
func lockObject(t *testing.T, l *lockv1alpha1.Lock) *unstructured.Unstructured {
	t.Helper()
	l = l.DeepCopy()
	l.APIVersion, l.Kind = lockv1alpha1.GroupVersion.String(), "Lock"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// mustLock decodes a Lock.
func mustLock(t *testing.T, u *unstructured.Unstructured) *lockv1alpha1.Lock {
	t.Helper()
	l, err := fromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
