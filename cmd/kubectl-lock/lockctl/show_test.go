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

// TestLockSummary: kubectl lock show says what a Lock covers, its level,
// enforcement, reason and expiry (with the time left, or that it has
// expired), its status and conditions, what it covers now and its last
// refusals, as its status carries them.
func TestLockSummary(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	ready := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: lockv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}
	}

	frozen := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "freeze-db", Generation: 2}}
	frozen.Spec = lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}},
		Level: lockv1alpha1.LevelReadOnly, Enforcement: lockv1alpha1.EnforcementEnforce, Reason: "Change\nfreeze",
		ExpiresAt: &metav1.Time{Time: now.Add(71 * time.Hour)}}
	frozen.Status = lockv1alpha1.LockStatus{Active: true, ObservedGeneration: 2,
		Conditions: []metav1.Condition{ready(metav1.ConditionTrue, lockv1alpha1.ReasonActive, "protected"),
			{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonInForce, Message: "frozen"}},
		Protected: &lockv1alpha1.ProtectedStatus{Count: 12, Resources: []lockv1alpha1.ProtectedResource{{Kind: "PostgresCluster", Name: "db"}, {Kind: "Stack", Name: "db"}}},
		LastDenied: &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-5 * time.Minute)), User: "alice", Operation: "UPDATE",
			Kind: "Stack", Name: "db", Count: 3},
		LastException: &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-2 * time.Minute)), User: "oncall", Operation: "UPDATE",
			Kind: "Stack", Name: "db", Count: 2, Exception: "db-hotfix"}}

	audit := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "try-all", Generation: 1}}
	audit.Spec = lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}, Level: lockv1alpha1.LevelCanNotDelete, Enforcement: lockv1alpha1.EnforcementAudit}
	audit.Status = lockv1alpha1.LockStatus{ObservedGeneration: 1,
		Conditions: []metav1.Condition{ready(metav1.ConditionTrue, lockv1alpha1.ReasonAudit, "this Lock is in Audit enforcement")},
		Protected:  &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: "forge"}}},
		LastWouldDeny: &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-90 * time.Second)), User: "bob", Operation: "DELETE",
			Kind: "Namespace", Name: "forge", Count: 1}}

	// Its expiry has passed though its status still says Active: show
	// says Expired at now, as every guard decides (rule 19).
	expired := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "stack-forge", Generation: 1}}
	expired.Spec = lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "forge"}, ExpiresAt: &metav1.Time{Time: now.Add(-time.Hour)}}
	expired.Status = lockv1alpha1.LockStatus{Active: true, ObservedGeneration: 1,
		Conditions: []metav1.Condition{ready(metav1.ConditionTrue, lockv1alpha1.ReasonActive, "")}, Protected: &lockv1alpha1.ProtectedStatus{}}

	fresh := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "new", Generation: 1}}
	fresh.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}

	cases := map[string]struct {
		lock *lockv1alpha1.Lock
		want string
	}{
		"ReadOnly": {lock: frozen, want: "" +
			"Name:            freeze-db\n" +
			"Namespace:       forge\n" +
			"Scope:           selector:tier=db (spec.selector: the resources of the namespace whose labels match, now and later)\n" +
			"Level:           ReadOnly (in force)\n" +
			"Enforcement:     Enforce\n" +
			"Reason:          Change freeze\n" +
			"Expires:         2026-12-05T05:00:00Z (in 2d23h)\n" +
			"Status:          Active: protected\n" +
			"Conditions:\n" +
			"  TYPE       STATUS   REASON    MESSAGE\n" +
			"  Ready      True     Active    protected\n" +
			"  ReadOnly   True     InForce   frozen\n" +
			"Protected:       12 resources now: PostgresCluster/db, Stack/db and 10 more\n" +
			"Last denied:     UPDATE Stack/db by alice, 5m ago (2026-12-02T05:55:00Z); 3 refused so far\n" +
			"Last would-deny: <none>\n" +
			"Last exception:  UPDATE Stack/db by oncall, 2m ago (2026-12-02T05:58:00Z); 2 let through by exceptions so far; by LockException db-hotfix\n"},
		"Audit": {lock: audit, want: "" +
			"Name:            try-all\n" +
			"Namespace:       forge\n" +
			"Scope:           <all> (spec.selector {}: the namespace and every resource in it, now and later)\n" +
			"Level:           CanNotDelete\n" +
			"Enforcement:     Audit (it refuses nothing: each request it would refuse is allowed with a warning and recorded in Last would-deny)\n" +
			"Reason:          <none>\n" +
			"Expires:         never\n" +
			"Status:          Audit: this Lock is in Audit enforcement\n" +
			"Conditions:\n" +
			"  TYPE    STATUS   REASON   MESSAGE\n" +
			"  Ready   True     Audit    this Lock is in Audit enforcement\n" +
			"Protected:       1 resource now, and the namespace itself: Stack/forge\n" +
			"Last denied:     <none>\n" +
			"Last would-deny: DELETE Namespace/forge by bob, 90s ago (2026-12-02T05:58:30Z); 1 would have been refused so far\n" +
			"Last exception:  <none>\n"},
		"Expired": {lock: expired, want: "" +
			"Name:            stack-forge\n" +
			"Namespace:       forge\n" +
			"Scope:           Stack/forge (spec.targetRef: this one resource)\n" +
			"Level:           CanNotDelete\n" +
			"Enforcement:     Enforce\n" +
			"Reason:          <none>\n" +
			"Expires:         2026-12-02T05:00:00Z (expired 60m ago: it protects nothing)\n" +
			"Status:          Expired\n" +
			"Conditions:\n" +
			"  TYPE    STATUS   REASON   MESSAGE\n" +
			"  Ready   True     Active   \n" +
			"Protected:       no resource now\n" +
			"Last denied:     <none>\n" +
			"Last would-deny: <none>\n" +
			"Last exception:  <none>\n"},
		"NoStatus": {lock: fresh, want: "" +
			"Name:            new\n" +
			"Namespace:       forge\n" +
			"Scope:           Stack/web (spec.targetRef: this one resource)\n" +
			"Level:           CanNotDelete\n" +
			"Enforcement:     Enforce\n" +
			"Reason:          <none>\n" +
			"Expires:         never\n" +
			"Status:          Pending\n" +
			"Conditions:      <none> (lockguard has not reported on this Lock yet)\n" +
			"Protected:       <unknown> (lockguard has not reported it yet)\n" +
			"Last denied:     <none>\n" +
			"Last would-deny: <none>\n" +
			"Last exception:  <none>\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printLockSummary(&out, tc.lock, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("printLockSummary(%s): -want, +got:\n%s", tc.lock.Name, diff)
			}
		})
	}
}

// TestShowLock: kubectl lock show reads the Lock of the namespace; -o
// yaml prints it without managed fields; a Lock that does not exist says
// so and where to list the Locks; a refused read names the role that
// grants reading Locks.
func TestShowLock(t *testing.T) {
	l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-lock"}}}}
	l.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}
	c := fakeClients(lockObject(t, l))
	locks := c.dynamic.Resource(locksResource).Namespace("forge")

	var out bytes.Buffer
	if err := showLock(t.Context(), Streams{Out: &out}, locks, "forge", "keep", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Name:            keep\nNamespace:       forge\nScope:           Stack/db ") {
		t.Errorf("kubectl lock show keep printed:\n%s", out.String())
	}

	out.Reset()
	if err := showLock(t.Context(), Streams{Out: &out}, locks, "forge", "keep", "yaml"); err != nil {
		t.Fatal(err)
	}
	var printed lockv1alpha1.Lock
	if err := yaml.UnmarshalStrict(out.Bytes(), &printed); err != nil {
		t.Fatalf("kubectl lock show -o yaml printed no Lock: %v\n%s", err, out.String())
	}
	if printed.Name != "keep" || printed.Kind != "Lock" || printed.Spec.TargetRef.Name != "db" || printed.ManagedFields != nil {
		t.Errorf("kubectl lock show -o yaml printed %+v", printed)
	}

	err := showLock(t.Context(), Streams{Out: &bytes.Buffer{}}, locks, "forge", "ghost", "")
	want := `locks.core.navique.com "ghost" not found` +
		"\nNo Lock of that name in namespace forge: kubectl lock list -n forge lists its Locks (kubectl lock list -A, those of every namespace)"
	if err == nil || err.Error() != want || !apierrors.IsNotFound(errors.Unwrap(err)) {
		t.Errorf("kubectl lock show ghost: %v\nwant %s", err, want)
	}

	forbidden := apierrors.NewForbidden(locksResource.GroupResource(), "keep",
		errors.New(`User "ann" cannot get resource "locks" in API group "core.navique.com" in the namespace "forge"`))
	c.dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("get", "locks", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	err = withRoleHint(showLock(t.Context(), Streams{Out: &bytes.Buffer{}}, locks, "forge", "keep", ""))
	want = forbidden.Error() + "\nYou lack the verb \"get\" on Locks: ask for the ClusterRole lockguard-view (aggregated into the built-in view, edit and admin ClusterRoles) in this namespace"
	if err == nil || err.Error() != want {
		t.Errorf("kubectl lock show, refused:\n  %v\nwant\n  %s", err, want)
	}
}
