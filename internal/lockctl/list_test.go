package lockctl

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestLockTableLastDenied: the LAST DENIED column says how long ago, what
// and by whom, or <none>.
func TestLockTableLastDenied(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	denied := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep"}}
	denied.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}
	denied.Status.LastDenied = &lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now.Add(-5 * time.Minute)), User: "alice", Operation: "DELETE", Kind: "Stack", Name: "web", Count: 3}
	quiet := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "all"}}
	quiet.Spec.Selector = &lockv1alpha1.LockSelector{}
	quiet.Spec.Reason = "freeze"

	var out bytes.Buffer
	if err := printLockTable(&out, []lockv1alpha1.Lock{quiet, denied}, false, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TARGET      LOCK   STATUS    LAST DENIED          REASON\n" +
		"<all>       all    Pending   <none>               freeze\n" +
		"Stack/web   keep   Pending   5m DELETE by alice   <none>\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printLockTable(...): -want, +got:\n%s", diff)
	}
}
