package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestCascadeGuard (rule 6): deleting an owner whose cascade would make the
// garbage collector delete a locked object, three levels down, is denied
// up front with every non-orphan policy, by name and by deletecollection,
// dry run or not, and nothing is changed; Orphan is allowed (dry run here:
// this suite runs no garbage collector to finish it) with a warning that
// names the locked dependent. Once the locked object has another owner
// that stays, the cascade no longer reaches it and the owner's delete is
// allowed. The garbage collector's side is in e2e/cascade_test.go.
func TestCascadeGuard(t *testing.T) {
	ns := kube.NewNamespace(t, "cascade")
	root := kube.CreateObject(t, framework.StackGVK, ns, "root")
	mid := kube.CreateOwned(t, framework.StackGVK, ns, "mid", root)
	db := kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "db", mid)
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-db", "PostgresCluster", "db", "the data outlives the stack"))
	kube.WaitActive(t, lock)

	want := kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "PostgresCluster/db")
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "root", want)
	policies := map[string][]client.DeleteOption{
		"default":    nil,
		"Background": {client.PropagationPolicy(metav1.DeletePropagationBackground)},
		"Foreground": {client.PropagationPolicy(metav1.DeletePropagationForeground)},
	}
	for name, opts := range policies {
		for _, dry := range []bool{true, false} {
			o := opts
			if dry {
				o = append(o[:len(o):len(o)], client.DryRunAll)
			}
			framework.WantError(t, fmt.Sprintf("deleting Stack root (%s, dry run %v)", name, dry), kube.DeleteObject(t.Context(), framework.StackGVK, ns, "root", o...), want)
		}
	}
	// The middle of the chain is an owner of the locked object too.
	framework.WantError(t, "deleting Stack mid", kube.DeleteObject(t.Context(), framework.StackGVK, ns, "mid"), want)
	// kubectl delete stacks --all: each Stack arrives with the request's options.
	for _, dry := range []bool{true, false} {
		opts := []client.DeleteAllOfOption{client.InNamespace(ns)}
		if dry {
			opts = append(opts, client.DryRunAll)
		}
		framework.WantError(t, fmt.Sprintf("deleting every Stack (dry run %v)", dry), kube.Client.DeleteAllOf(t.Context(), framework.Object(framework.StackGVK, ns, ""), opts...), want)
	}
	intact(t, ns, map[string]schema.GroupVersionKind{"root": framework.StackGVK, "mid": framework.StackGVK, "db": framework.PostgresClusterGVK})

	// Rule 14: the real denials are recorded on the Lock that denied them.
	framework.Eventually(t, framework.DefaultTimeout, "DeleteBlocked recorded on Lock keep-db", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == webhook.ReasonDeleteBlocked && e.Regarding.Kind == "Lock" && e.Regarding.Name == "keep-db" &&
				strings.HasPrefix(e.Note, `Denied the DELETE of Stack "root" by `) {
				return nil
			}
		}
		return fmt.Errorf("no DeleteBlocked Event on Lock keep-db for Stack root among %d Events", len(list.Items))
	})

	if suite.env != nil {
		c, warnings := warningClient(t)
		if err := c.Delete(t.Context(), framework.Object(framework.StackGVK, ns, "root"), client.PropagationPolicy(metav1.DeletePropagationOrphan), client.DryRunAll); err != nil {
			t.Fatalf("a dry-run delete of Stack root with propagation Orphan: %v; want it allowed", err)
		}
		wantWarning := "the dependents of this resource are orphaned, not deleted; locked dependents that stay: PostgresCluster/db (Lock(s) [keep-db])"
		if got := warnings.All(); len(got) != 1 || got[0] != wantWarning {
			t.Fatalf("warnings %q; want [%q]", got, wantWarning)
		}
	}

	// A second owner that stays keeps db out of the cascade.
	other := kube.CreateObject(t, framework.StackGVK, ns, "other")
	patch := client.MergeFrom(db.DeepCopy())
	db.SetOwnerReferences(append(db.GetOwnerReferences(), metav1.OwnerReference{APIVersion: other.GetAPIVersion(), Kind: "Stack", Name: "other", UID: other.GetUID()}))
	if err := kube.Client.Patch(t.Context(), db, patch); err != nil {
		t.Fatalf("adding Stack other as an owner of PostgresCluster db: %v", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "a dry-run delete of Stack root allowed once db has another owner", func(ctx context.Context) error {
		return kube.DeleteObject(ctx, framework.StackGVK, ns, "root", client.DryRunAll)
	})
}

// intact fails the test unless each object (name: kind) of namespace ns
// exists, is not being deleted and carries no finalizer (a foreground
// delete that was let through would leave foregroundDeletion).
func intact(t *testing.T, ns string, objects map[string]schema.GroupVersionKind) {
	t.Helper()
	for name, gvk := range objects {
		o := kube.MustExist(t, gvk, ns, name)
		if o.GetDeletionTimestamp() != nil || len(o.GetFinalizers()) > 0 {
			t.Fatalf("%s %s/%s: deletionTimestamp %v, finalizers %v; want it untouched", gvk.Kind, ns, name, o.GetDeletionTimestamp(), o.GetFinalizers())
		}
	}
}
