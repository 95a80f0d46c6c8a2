package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestClusterLockLastDenied (docs/contract.md rules 14, 20 and 22): a
// ClusterLock's refusals are recorded on it as a Lock's are. The refused
// delete of a Namespace under a ClusterLock sets the ClusterLock's
// status.lastDenied (time, user, operation, object, count) and records a
// DeleteBlocked Warning Event on the ClusterLock and on the Namespace; a
// refused dry run is recorded nowhere; a person's refused removal of the
// cluster-locked label counts too (UPDATE, UpdateBlocked). A person's
// update that a ReadOnly ClusterLock refuses is recorded on it
// (UpdateBlocked, "read-only under"). The delete of a ClusterRole that only an audit
// ClusterLock covers is allowed and recorded in that ClusterLock's
// status.lastWouldDeny, as its Ready condition says.
func TestClusterLockLastDenied(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	user := whoAmI(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cld-ns-" + suffix}}
	frozenNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cld-ro-" + suffix}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cld-role-" + suffix}}
	keep := newClusterLock("cld-keep-"+suffix, "v1", "Namespace", ns.Name)
	frozen := newClusterLock("cld-freeze-"+suffix, "v1", "Namespace", frozenNS.Name)
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	audit := newClusterLock("cld-audit-"+suffix, "rbac.authorization.k8s.io/v1", "ClusterRole", role.Name)
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	for _, o := range []client.Object{ns, frozenNS, role, keep, frozen, audit} {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), o) })
	}
	kube.WaitClusterLock(t, keep.Name, lockv1alpha1.ReasonActive, "")
	kube.WaitClusterLock(t, frozen.Name, lockv1alpha1.ReasonActive, "")
	waitClusterReadOnly(t, frozen.Name, lockv1alpha1.ReasonInForce)
	kube.WaitClusterLock(t, audit.Name, lockv1alpha1.ReasonAudit, "each request it would refuse is allowed with a warning and recorded in status.lastWouldDeny")
	for _, o := range []client.Object{ns, frozenNS, role} {
		framework.Eventually(t, framework.DefaultTimeout, o.GetName()+" labelled", clusterLabelled(kube.Client, o, true))
	}
	lastDenied := func(s lockv1alpha1.LockStatus) *lockv1alpha1.DeniedRequest { return s.LastDenied }

	// A dry run, then the real delete: one refusal recorded.
	deleteRefused := func(opts ...client.DeleteOption) {
		t.Helper()
		if err := kube.Client.Delete(ctx, namespace(ns.Name), opts...); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is protected by ClusterLock(s) ["+keep.Name) {
			t.Fatalf("deleting Namespace %s (options %v): %v; want the ClusterLock's refusal", ns.Name, opts, err)
		}
	}
	deleteRefused(client.DryRunAll)
	before := time.Now()
	deleteRefused()
	waitClusterDenied(t, keep.Name, lastDenied, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Namespace", Name: ns.Name, Count: 1}, before, time.Now().Add(time.Second))
	// Had the dry runs been recorded, they would be counted with the next
	// refusal (the count would pass 2, never stop at it).
	deleteRefused(client.DryRunAll)
	before = time.Now()
	deleteRefused()
	waitClusterDenied(t, keep.Name, lastDenied, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Namespace", Name: ns.Name, Count: 2}, before, time.Now().Add(time.Second))
	waitClusterEvents(t, webhook.ReasonDeleteBlocked, map[string]string{
		"ClusterLock/" + keep.Name: fmt.Sprintf("Denied the DELETE of Namespace %q by %s", ns.Name, user),
		"Namespace/" + ns.Name:     fmt.Sprintf("DELETE by %s denied: protected by ClusterLock(s) %s", user, keep.Name),
	})

	// Taking the cluster-locked label off is refused and counted; the
	// suite's user is lockguard's own (its writes are allowed), so a
	// person who may patch Namespaces tries.
	person := "cld-user-" + suffix
	bindCluster(t, person, clusterRole(t, "cld-patch-ns-"+suffix, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "patch", "update"}}))
	as := impersonate(t, person)
	before = time.Now()
	unlabel := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, lockv1alpha1.ClusterLockedLabel))
	if err := as.Patch(ctx, namespace(ns.Name), unlabel); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is kept by lockguard while ClusterLock(s) ["+keep.Name) {
		t.Fatalf("taking the label off Namespace %s: %v; want the ClusterLock's refusal", ns.Name, err)
	}
	waitClusterDenied(t, keep.Name, lastDenied, lockv1alpha1.DeniedRequest{User: person, Operation: "UPDATE", Kind: "Namespace", Name: ns.Name, Count: 3}, before, time.Now().Add(time.Second))
	waitClusterEvents(t, webhook.ReasonUpdateBlocked, map[string]string{
		"ClusterLock/" + keep.Name: fmt.Sprintf("Denied the UPDATE of Namespace %q by %s", ns.Name, person),
		"Namespace/" + ns.Name:     fmt.Sprintf("UPDATE by %s denied: protected by ClusterLock(s) %s", person, keep.Name),
	})

	// An update the ReadOnly ClusterLock refuses.
	before = time.Now()
	annotate := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"x"}}}`))
	if err := as.Patch(ctx, namespace(frozenNS.Name), annotate); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is read-only under ClusterLock(s) ["+frozen.Name) {
		t.Fatalf("annotating the frozen Namespace %s: %v; want the ReadOnly ClusterLock's refusal", frozenNS.Name, err)
	}
	waitClusterDenied(t, frozen.Name, lastDenied, lockv1alpha1.DeniedRequest{User: person, Operation: "UPDATE", Kind: "Namespace", Name: frozenNS.Name, Count: 1}, before, time.Now().Add(time.Second))
	waitClusterEvents(t, webhook.ReasonUpdateBlocked, map[string]string{
		"ClusterLock/" + frozen.Name: fmt.Sprintf("Denied the UPDATE of Namespace %q by %s", frozenNS.Name, person),
		"Namespace/" + frozenNS.Name: fmt.Sprintf("UPDATE by %s denied: read-only under ClusterLock(s) %s", person, frozen.Name),
	})

	// The audit ClusterLock refuses nothing and records what it would.
	before = time.Now()
	if err := kube.Client.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role.Name}}); err != nil {
		t.Fatalf("deleting ClusterRole %s under an audit ClusterLock: %v; want it allowed", role.Name, err)
	}
	waitClusterDenied(t, audit.Name, func(s lockv1alpha1.LockStatus) *lockv1alpha1.DeniedRequest { return s.LastWouldDeny },
		lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "ClusterRole", Name: role.Name, Count: 1}, before, time.Now().Add(time.Second))
	got := &lockv1alpha1.ClusterLock{}
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: audit.Name}, got); err != nil || got.Status.LastDenied != nil {
		t.Errorf("the audit ClusterLock: %v, lastDenied %+v; want none: it refused nothing", err, got.Status.LastDenied)
	}
}

// newClusterLock is a ClusterLock name on the object of apiVersion and
// kind named target.
func newClusterLock(name, apiVersion, kind, target string) *lockv1alpha1.ClusterLock {
	return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: apiVersion, Kind: kind, Name: target}}}
}

// waitClusterDenied waits until field of ClusterLock name's status
// (lastDenied or lastWouldDeny) is want, its time within [from, to] (the
// API server keeps seconds).
func waitClusterDenied(t *testing.T, name string, field func(lockv1alpha1.LockStatus) *lockv1alpha1.DeniedRequest, want lockv1alpha1.DeniedRequest, from, to time.Time) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("the status of ClusterLock %s records %s %s %s", name, want.Operation, want.Kind, want.Name), func(ctx context.Context) error {
		var cl lockv1alpha1.ClusterLock
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			return err
		}
		d := field(cl.Status)
		if d == nil {
			return fmt.Errorf("nothing recorded yet")
		}
		return deniedIs(*d, want, from, to)
	})
}

// waitClusterEvents waits until, for each "Kind/name" of want, a Warning
// Event of reason regards that object (in any namespace: client-go puts
// those of cluster-scoped objects in default) with the note want gives.
func waitClusterEvents(t *testing.T, reason string, want map[string]string) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, reason+" Events", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(ctx, &list); err != nil {
			return err
		}
		var missing []string
		for regarding, note := range want {
			if !slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Reason == reason && e.Type == corev1.EventTypeWarning && e.Regarding.Kind+"/"+e.Regarding.Name == regarding && e.Note == note
			}) {
				missing = append(missing, fmt.Sprintf("%s: %q", regarding, note))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no %s Event on %s among %d Events", reason, strings.Join(missing, "; "), len(list.Items))
		}
		return nil
	})
}
