package lockctl

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestLockTable: kubectl lock list shows each Lock's scope, level (with
// whether a ReadOnly Lock's freeze is in force), status, how many
// resources it covers, and its last denial: how long ago, what and by
// whom, or <none>.
func TestLockTable(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	active := func(l *lockv1alpha1.Lock, protected int32, conds ...metav1.Condition) {
		l.Generation, l.Status.ObservedGeneration, l.Status.Active = 1, 1, true
		l.Status.Conditions = append([]metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive}}, conds...)
		l.Status.Protected = &lockv1alpha1.ProtectedStatus{Count: protected}
	}
	denied := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep"}}
	denied.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}
	denied.Spec.Level = lockv1alpha1.LevelCanNotDelete
	active(&denied, 1)
	denied.Status.LastDenied = &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-5 * time.Minute)), User: "alice", Operation: "DELETE", Kind: "Stack", Name: "web", Count: 3}
	quiet := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "all"}}
	quiet.Spec.Selector = &lockv1alpha1.LockSelector{}
	quiet.Spec.Reason = "freeze"
	frozen := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "freeze-db"}}
	frozen.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	active(&frozen, 2, metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonInForce})
	frozen.Status.LastDenied = &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-90 * time.Second)), User: "bob", Operation: "UPDATE", Kind: "Stack", Name: "db", Count: 1}
	pending := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "freeze-web"}}
	pending.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}
	pending.Spec.Level = lockv1alpha1.LevelReadOnly
	active(&pending, 1, metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonPending})
	// An expiring Lock, and one whose expiry has passed though its status
	// still says Active (lockguard has not written Expired yet): the
	// table says Expired at now, as every guard decides (rule 19).
	expiring := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "for-3h"}}
	expiring.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}
	expiring.Spec.ExpiresAt = &metav1.Time{Time: now.Add(3 * time.Hour)}
	active(&expiring, 1)
	expired := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "until-now"}}
	expired.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}
	expired.Spec.ExpiresAt = &metav1.Time{Time: now}
	active(&expired, 1)

	var out bytes.Buffer
	if err := printLockTable(&out, []lockv1alpha1.Lock{quiet, frozen, expiring, expired, denied, pending}, false, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"SCOPE              LOCK         LEVEL                 STATUS    EXPIRES                         PROTECTED   LAST DENIED          REASON\n" +
		"<all>              all          CanNotDelete          Pending   <none>                          <none>      <none>               freeze\n" +
		"selector:tier=db   freeze-db    ReadOnly (in force)   Active    <none>                          2           90s UPDATE by bob    <none>\n" +
		"Stack/db           for-3h       CanNotDelete          Active    2026-12-02T09:00:00Z (in 3h)    1           <none>               <none>\n" +
		"Stack/db           until-now    CanNotDelete          Expired   2026-12-02T06:00:00Z (0s ago)   1           <none>               <none>\n" +
		"Stack/web          keep         CanNotDelete          Active    <none>                          1           5m DELETE by alice   <none>\n" +
		"Stack/web          freeze-web   ReadOnly (pending)    Active    <none>                          1           <none>               <none>\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printLockTable(...): -want, +got:\n%s", diff)
	}

	out.Reset()
	if err := printLockTable(&out, []lockv1alpha1.Lock{denied}, true, now); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"NAMESPACE   SCOPE       LOCK   LEVEL          STATUS   EXPIRES   PROTECTED   LAST DENIED          REASON\n" +
		"forge       Stack/web   keep   CanNotDelete   Active   <none>    1           5m DELETE by alice   <none>\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printLockTable(..., all namespaces): -want, +got:\n%s", diff)
	}
}
