package contract_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestOptInProtectedLabel (issue 40, docs/optin.md): a targetRef Lock's
// opted-in target carries ProtectedLabel the moment the Lock's create
// returns, put on by the create's admission in one write with
// ProtectedPendingAnnotation (seen by a watch: the mark may be gone by a
// read right after the create); the reconciler drops the mark once the Lock covers the target, and
// the label once no Lock does. An opted-in object no Lock covers never
// carries it.
func TestOptInProtectedLabel(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-label")
	ctx := t.Context()
	for _, name := range []string{"data", "free"} {
		if err := kube.Client.Create(ctx, newPVC(ns, name, nil)); err != nil {
			t.Fatal(err)
		}
	}
	pvc := func(ctx context.Context, name string) (*corev1.PersistentVolumeClaim, error) {
		var p corev1.PersistentVolumeClaim
		return &p, kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	}
	// The reconciler may drop the mark before a read right after the
	// create (once the Lock is in its cache): the write that put the label
	// on, seen by a watch from before the create, must carry both.
	before, err := pvc(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=data", ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	lock := kube.CreateLock(t, optInLock(ns, "keep-data", pvcGVK, "data"))
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	got, err := pvc(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Labels[lockv1alpha1.ProtectedLabel]; v != "true" {
		t.Fatalf("right after the Lock's create, PVC data's label %s = %q, want \"true\"", lockv1alpha1.ProtectedLabel, v)
	}
	labelled := labelledBy(t, w.ResultChan(), got.ResourceVersion)
	if _, ok := labelled.Annotations[lockv1alpha1.ProtectedPendingAnnotation]; !ok {
		t.Errorf("the write that labelled PVC data %s (resourceVersion %s) has no %s annotation (annotations %v)", lockv1alpha1.ProtectedLabel, labelled.ResourceVersion, lockv1alpha1.ProtectedPendingAnnotation, labelled.Annotations)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the pending mark dropped, the label kept", func(ctx context.Context) error {
		got, err := pvc(ctx, "data")
		switch {
		case err != nil:
			return err
		case got.Labels[lockv1alpha1.ProtectedLabel] != "true":
			return fmt.Errorf("label %s = %q, want \"true\"", lockv1alpha1.ProtectedLabel, got.Labels[lockv1alpha1.ProtectedLabel])
		case got.Annotations[lockv1alpha1.ProtectedPendingAnnotation] != "":
			return fmt.Errorf("annotation %s still there", lockv1alpha1.ProtectedPendingAnnotation)
		}
		return nil
	})
	if got, err := pvc(ctx, "free"); err != nil || got.Labels[lockv1alpha1.ProtectedLabel] != "" {
		t.Errorf("PVC free, under no Lock: labels %v (%v), want no %s", got.Labels, err, lockv1alpha1.ProtectedLabel)
	}
	kube.DeleteLock(t, lock)
	framework.Eventually(t, framework.DefaultTimeout, "the label gone with the Lock", func(ctx context.Context) error {
		got, err := pvc(ctx, "data")
		if err != nil {
			return err
		}
		if v, ok := got.Labels[lockv1alpha1.ProtectedLabel]; ok {
			return fmt.Errorf("label %s = %q, want none", lockv1alpha1.ProtectedLabel, v)
		}
		return nil
	})
}

// labelledBy returns the first PVC of events that carries ProtectedLabel:
// the write that put it on. It fails the test if events end, or pass
// resourceVersion upTo (a read that already showed the label), without
// one.
func labelledBy(t *testing.T, events <-chan watch.Event, upTo string) *corev1.PersistentVolumeClaim {
	t.Helper()
	timeout := time.After(framework.DefaultTimeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the PVC's watch ended before the write that labelled it")
			}
			p, isPVC := ev.Object.(*corev1.PersistentVolumeClaim)
			if !isPVC {
				t.Fatalf("the PVC's watch: %s %T", ev.Type, ev.Object)
			}
			if p.Labels[lockv1alpha1.ProtectedLabel] == "true" {
				return p
			}
			if p.ResourceVersion == upTo {
				t.Fatalf("the PVC's watch reached resourceVersion %s, which carries the label, without a write carrying it", upTo)
			}
		case <-timeout:
			t.Fatal("no write of the PVC carrying the label within the timeout")
		}
	}
}

// TestOptInSelectorProtectedLabel (issue 40, docs/optin.md): a selector
// Lock whose kinds name PersistentVolumeClaim, its namespace's first Lock,
// labels the PVCs it matches ProtectedLabel before its create returns (the
// create's admission lists and labels them, with
// ProtectedPendingAnnotation, which a quick reconciler may have dropped
// already for the annotation naming the Lock), so that a delete sent at
// once is the protect-locked entry's; the PVCs it does not match are not
// labelled, and a dry run labels none. The reconciler drops the mark once
// the Lock is in its cache, and keeps the label.
func TestOptInSelectorProtectedLabel(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-sel-label")
	ctx := t.Context()
	db := map[string]string{"tier": "db"}
	for name, labels := range map[string]map[string]string{"a": db, "b": db, "web": {"tier": "web"}} {
		if err := kube.Client.Create(ctx, newPVC(ns, name, labels)); err != nil {
			t.Fatal(err)
		}
	}
	labelsOf := func(ctx context.Context, name string) (map[string]string, map[string]string, error) {
		var p corev1.PersistentVolumeClaim
		err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
		return p.Labels, p.Annotations, err
	}
	lock := framework.NewSelectorLock(ns, "keep-db", lockv1alpha1.LockSelector{MatchLabels: db, Kinds: []string{"PersistentVolumeClaim"}})
	if err := kube.Client.Create(ctx, lock.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		if l, a, err := labelsOf(ctx, name); err != nil || l[lockv1alpha1.ProtectedLabel] != "" || a[lockv1alpha1.ProtectedPendingAnnotation] != "" {
			t.Errorf("after a dry-run create, PVC %s: labels %v, annotations %v (%v); want neither %s nor %s", name, l, a, err, lockv1alpha1.ProtectedLabel, lockv1alpha1.ProtectedPendingAnnotation)
		}
	}
	// Every version of PVC a from now on: the first that carries the
	// label must be the create's admission's (with the pending mark), not
	// the reconciler's (with the annotation alone), which an in-process
	// reconciler may write as quickly as the create returns.
	var before corev1.PersistentVolumeClaim
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &before); err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(restConfig(t), client.Options{Scheme: kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.PersistentVolumeClaimList{}, &client.ListOptions{Namespace: ns,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "a"), Raw: &metav1.ListOptions{ResourceVersion: before.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	kube.CreateLock(t, lock)
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	// At once: the protect-locked entry's denial, so PVC a carried the
	// label when the delete came.
	wantProtectDenied(t, kube.Client.Delete(ctx, newPVC(ns, "a", nil)), lock)
	for first := false; !first; {
		select {
		case e := <-w.ResultChan():
			p, ok := e.Object.(*corev1.PersistentVolumeClaim)
			if !ok || p.Labels[lockv1alpha1.ProtectedLabel] != "true" {
				continue
			}
			first = true
			if p.Annotations[lockv1alpha1.ProtectedPendingAnnotation] == "" {
				t.Errorf("PVC a's first labelled version has no %s: labelled by the reconciler, not by the create's admission (annotations %v)", lockv1alpha1.ProtectedPendingAnnotation, p.Annotations)
			}
		case <-time.After(framework.DefaultTimeout):
			t.Fatal("no labelled version of PVC a watched")
		}
	}
	for _, name := range []string{"a", "b"} {
		l, a, err := labelsOf(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		// The mark, unless the reconciler, as quick, has already dropped it
		// for the annotation naming the Lock.
		if l[lockv1alpha1.ProtectedLabel] != "true" || a[lockv1alpha1.ProtectedPendingAnnotation] == "" && a[lockv1alpha1.LockedAnnotation] != lock.Name {
			t.Errorf("right after the selector Lock's create, PVC %s: labels %v, annotations %v; want %s=true, and %s or %s=%s", name, l, a,
				lockv1alpha1.ProtectedLabel, lockv1alpha1.ProtectedPendingAnnotation, lockv1alpha1.LockedAnnotation, lock.Name)
		}
	}
	if l, _, err := labelsOf(ctx, "web"); err != nil || l[lockv1alpha1.ProtectedLabel] != "" {
		t.Errorf("PVC web, which the selector does not match: labels %v (%v), want no %s", l, err, lockv1alpha1.ProtectedLabel)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the pending marks dropped, the labels kept", func(ctx context.Context) error {
		for _, name := range []string{"a", "b"} {
			l, a, err := labelsOf(ctx, name)
			switch {
			case err != nil:
				return err
			case l[lockv1alpha1.ProtectedLabel] != "true":
				return fmt.Errorf("PVC %s: label %s = %q, want \"true\"", name, lockv1alpha1.ProtectedLabel, l[lockv1alpha1.ProtectedLabel])
			case a[lockv1alpha1.ProtectedPendingAnnotation] != "":
				return fmt.Errorf("PVC %s: annotation %s still there", name, lockv1alpha1.ProtectedPendingAnnotation)
			}
		}
		return nil
	})
}

// TestOptInSelectorCap (docs/optin.md): the create of a selector Lock
// whose selector matches more than webhook.SelectorLabelCap objects of
// opted-in kinds is refused with SelectorCapMessage, and labels none of
// them; one matching SelectorLabelCap is allowed.
func TestOptInSelectorCap(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-sel-cap")
	ctx := t.Context()
	// Secrets: no finalizer holds the namespace's delete.
	names := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, webhook.SelectorLabelCap+1)
	for range 8 {
		wg.Go(func() {
			for i := range names {
				errs <- kube.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%d", i), Labels: map[string]string{"n": fmt.Sprint(i)}}})
			}
		})
	}
	for i := range webhook.SelectorLabelCap + 1 {
		names <- i
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	over := framework.NewSelectorLock(ns, "too-many", lockv1alpha1.LockSelector{Kinds: []string{"Secret"},
		MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "n", Operator: lockv1alpha1.SelectorOpExists}}})
	err := kube.Client.Create(ctx, over)
	want := webhook.SelectorCapMessage(over, []schema.GroupKind{secretGVK.GroupKind()})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("create of a selector Lock matching %d Secrets: got %v, want Forbidden with %q", webhook.SelectorLabelCap+1, err, want)
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(secretGVK.GroupVersion().WithKind("SecretList"))
	if err := kube.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{lockv1alpha1.ProtectedLabel}); err != nil || len(list.Items) != 0 {
		t.Errorf("after the refused create: %d Secrets labelled %s (%v), want none", len(list.Items), lockv1alpha1.ProtectedLabel, err)
	}
	at := framework.NewSelectorLock(ns, "just-enough", lockv1alpha1.LockSelector{Kinds: []string{"Secret"},
		MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "n", Operator: lockv1alpha1.SelectorOpNotIn, Values: []string{"0"}}}})
	start := time.Now()
	kube.CreateLock(t, at)
	t.Logf("the create of a selector Lock matching %d Secrets, each labelled first, took %s", webhook.SelectorLabelCap, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { deleteLocksFirst(t, at) })
	if err := kube.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{lockv1alpha1.ProtectedLabel}); err != nil || len(list.Items) != webhook.SelectorLabelCap {
		t.Errorf("right after the create of a selector Lock matching %d Secrets: %d labelled %s (%v)", webhook.SelectorLabelCap, len(list.Items), lockv1alpha1.ProtectedLabel, err)
	}
}
