//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// check returns what is not (yet) as the contract says: each Lock's status
// from what it covers (a targetRef Lock its target; a selector Lock the
// objects whose labels and kind its selector matches, counted in
// status.protected), a ReadOnly Lock's ReadOnly condition (InForce for its
// generation, once every object it covers carries the read-only label;
// Pending for an invalid target; Expired for an expired Lock, Audit for
// one in Audit that would be active), and each object's lock annotation
// (the live Locks that enforce and cover it) and read-only label (present
// exactly when a live ReadOnly Lock covers it, Audit ones too). The
// opt-in worker's PVCs (opt, nil for none) are checked the same way, and
// also carry core.navique.com/protected exactly when their annotation
// names a Lock (docs/optin.md). It is the oracle of lockguard's
// reconciler: it works out what each status, annotation and label should
// be itself, from the objects and Locks the API server holds, and calls
// none of the product's code (controller/), so that a mistake there cannot
// hide here.
func (h *harness) check(ctx context.Context, workers []*worker, opt *worker) ([]string, error) {
	var problems []string
	all := slices.Clip(workers)
	if opt != nil {
		all = append(all, opt)
	}
	for _, w := range all {
		p, err := h.checkNamespace(ctx, w)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		return problems, nil
	}
	// Converged as the checker expects: every status also tells the truth
	// to the API server (docs/contract.md rule 13; a dry-run DELETE of each active
	// Lock's target, which deletes nothing). Of the group's workers only:
	// framework.CheckLockStatusTruth knows the group's kinds alone.
	namespaces := make([]string, 0, len(workers))
	for _, w := range workers {
		namespaces = append(namespaces, w.ns)
	}
	if err := framework.NewKube(h.admin, "", "").CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces}); err != nil {
		problems = append(problems, "docs/contract.md rule 13: "+err.Error())
	}
	return problems, nil
}

// checkNamespace is check's work in w's namespace: its objects (the
// group's Stacks and PostgreSQLs, or an opt-in worker's PVCs) and Locks.
func (h *harness) checkNamespace(ctx context.Context, w *worker) ([]string, error) {
	var problems []string
	{
		type object struct {
			gvk  schema.GroupVersionKind
			meta metav1.PartialObjectMetadata
		}
		var objects []object
		kinds := []schema.GroupVersionKind{stackGVK, pgGVK}
		if w.optIn {
			kinds = []schema.GroupVersionKind{pvcGVK}
		}
		for _, gvk := range kinds {
			var list metav1.PartialObjectMetadataList
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := h.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
				return nil, err
			}
			for _, o := range list.Items {
				objects = append(objects, object{gvk: gvk, meta: o})
			}
		}
		var locks lockv1alpha1.LockList
		if err := h.admin.List(ctx, &locks, client.InNamespace(w.ns)); err != nil {
			return nil, err
		}
		protecting := map[string][]string{} // kind/name -> Lock names
		frozen := map[string]bool{}         // kind/name -> a ReadOnly Lock covers it
		now := time.Now()
		for _, l := range locks.Items {
			if l.DeletionTimestamp != nil {
				continue
			}
			readOnly := l.Spec.Level == lockv1alpha1.LevelReadOnly
			// An Audit Lock protects nothing: it is in no annotation,
			// but its ReadOnly level still labels what it covers (so that
			// the update guard warns); it says Audit where it would be
			// active (docs/contract.md rule 20).
			audit := !l.Enforces()
			var want lockStatus
			if l.ExpiredAt(now) {
				// It covers nothing and says so (rule 19).
				want = lockStatus{Reason: lockv1alpha1.ReasonExpired, Ready: metav1.ConditionFalse}
				if readOnly {
					want.ReadOnly, want.ReadOnlyReason = metav1.ConditionFalse, lockv1alpha1.ReasonPending
				}
				if got := statusOf(&l); got != want {
					problems = append(problems, fmt.Sprintf("Lock %s/%s (expired at %s): status %+v, want %+v", w.ns, l.Name, l.ExpiresAtString(), got, want))
				}
				continue
			}
			if sel := l.Spec.Selector; sel != nil {
				labels, err := metav1.LabelSelectorAsSelector(sel.LabelSelector())
				if err != nil {
					return nil, fmt.Errorf("Lock %s/%s: %w", w.ns, l.Name, err)
				}
				var count int32
				for _, o := range objects {
					// A selector without kinds covers the group's kinds
					// only, never an opted-in one (docs/optin.md).
					named := slices.Contains(sel.Kinds, o.gvk.Kind) || (len(sel.Kinds) == 0 && o.gvk.Group == lockv1alpha1.Group)
					if !named || !labels.Matches(k8slabels.Set(o.meta.Labels)) {
						continue
					}
					count++
					key := o.gvk.Kind + "/" + o.meta.Name
					if !audit {
						protecting[key] = append(protecting[key], l.Name)
					}
					frozen[key] = frozen[key] || readOnly
				}
				want = lockStatus{Active: true, Reason: lockv1alpha1.ReasonActive, Ready: metav1.ConditionTrue, Protected: count}
				if readOnly {
					want.ReadOnly, want.ReadOnlyReason = metav1.ConditionTrue, lockv1alpha1.ReasonInForce
				}
				if audit {
					want = audited(want, readOnly)
				}
				if got := statusOf(&l); got != want {
					problems = append(problems, fmt.Sprintf("Lock %s/%s (selector %s, %s): status %+v, want %+v", w.ns, l.Name, sel, orDefault(string(l.Spec.Level), "CanNotDelete"), got, want))
				}
				continue
			}
			gv, err := schema.ParseGroupVersion(orDefault(l.Spec.TargetRef.APIVersion, lockv1alpha1.DefaultTargetAPIVersion))
			ref := schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: l.Spec.TargetRef.Kind}
			valid := err == nil && ((gv.Group == lockv1alpha1.Group && ref.Kind != "Lock") || (w.optIn && ref == pvcGVK))
			want = lockStatus{Reason: lockv1alpha1.ReasonInvalidTarget, Ready: metav1.ConditionFalse}
			if readOnly {
				want.ReadOnly, want.ReadOnlyReason = metav1.ConditionFalse, lockv1alpha1.ReasonPending
			}
			if valid {
				key := l.Spec.TargetRef.Kind + "/" + l.Spec.TargetRef.Name
				if !audit {
					protecting[key] = append(protecting[key], l.Name)
				}
				frozen[key] = frozen[key] || readOnly
				exists, err := h.exists(ctx, w.ns, ref, l.Spec.TargetRef.Name)
				if err != nil {
					return nil, err
				}
				want = lockStatus{Reason: lockv1alpha1.ReasonMissingReference, Ready: metav1.ConditionFalse}
				if exists {
					want = lockStatus{Active: true, Reason: lockv1alpha1.ReasonActive, Ready: metav1.ConditionTrue, Protected: 1}
				}
				if readOnly {
					want.ReadOnly, want.ReadOnlyReason = metav1.ConditionTrue, lockv1alpha1.ReasonInForce
				}
				if audit && exists {
					want = audited(want, readOnly)
				}
			}
			if got := statusOf(&l); got != want {
				problems = append(problems, fmt.Sprintf("Lock %s/%s on %s %s (%s): status %+v, want %+v", w.ns, l.Name, l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name, orDefault(string(l.Spec.Level), "CanNotDelete"), got, want))
			}
		}
		for _, o := range objects {
			key := o.gvk.Kind + "/" + o.meta.Name
			names := protecting[key]
			slices.Sort(names)
			want := strings.Join(names, ",")
			got, ok := o.meta.Annotations[lockv1alpha1.LockedAnnotation]
			if got != want || (want == "" && ok) {
				problems = append(problems, fmt.Sprintf("%s %s/%s: annotation %q (set %v), want %q", o.gvk.Kind, w.ns, o.meta.Name, got, ok, want))
			}
			gotRO, okRO := o.meta.Labels[lockv1alpha1.ReadOnlyLabel]
			if frozen[key] != (gotRO == "true") || (!frozen[key] && okRO) {
				problems = append(problems, fmt.Sprintf("%s %s/%s: label %s=%q (set %v), want it set to true %v (labels %v)", o.gvk.Kind, w.ns, o.meta.Name, lockv1alpha1.ReadOnlyLabel, gotRO, okRO, frozen[key], o.meta.Labels))
			}
			if o.gvk.Group == lockv1alpha1.Group {
				continue
			}
			// An opted-in object carries the protected label exactly when
			// an enforcing Lock covers it; one put on at a Lock's create
			// (the protected-pending mark) may stay a while after that
			// create failed: the reconciler keeps a marked label for the
			// mark's grace, so a marked one is not judged.
			gotP, okP := o.meta.Labels[lockv1alpha1.ProtectedLabel]
			_, pending := o.meta.Annotations[lockv1alpha1.ProtectedPendingAnnotation]
			if want != "" && gotP != "true" || want == "" && okP && !pending {
				problems = append(problems, fmt.Sprintf("%s %s/%s: label %s=%q (set %v), want it set to true %v (labels %v)", o.gvk.Kind, w.ns, o.meta.Name, lockv1alpha1.ProtectedLabel, gotP, okP, want != "", o.meta.Labels))
			}
		}
	}
	return problems, nil
}

// lockStatus is what check compares of a Lock's status.
type lockStatus struct {
	Active bool
	Ready  metav1.ConditionStatus
	Reason string
	// Protected is status.protected.count.
	Protected int32
	// ReadOnly and ReadOnlyReason are the ReadOnly condition's status and
	// reason ("" when it has none, as a CanNotDelete Lock must), if the
	// condition is for the Lock's generation.
	ReadOnly       metav1.ConditionStatus
	ReadOnlyReason string
}

// audited is the status of a Lock in Audit enforcement that would be
// active with status want: not active, Ready True with reason Audit, what
// it covers counted, and a ReadOnly level's condition False with reason
// Audit.
func audited(want lockStatus, readOnly bool) lockStatus {
	want.Active, want.Reason = false, lockv1alpha1.ReasonAudit
	if readOnly {
		want.ReadOnly, want.ReadOnlyReason = metav1.ConditionFalse, lockv1alpha1.ReasonAudit
	}
	return want
}

func statusOf(l *lockv1alpha1.Lock) lockStatus {
	s := lockStatus{Active: l.Status.Active}
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady); c != nil {
		s.Ready, s.Reason = c.Status, c.Reason
	}
	if p := l.Status.Protected; p != nil {
		s.Protected = p.Count
	}
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); c != nil {
		s.ReadOnly, s.ReadOnlyReason = c.Status, c.Reason
		if c.ObservedGeneration != l.Generation {
			s.ReadOnlyReason += fmt.Sprintf(" (for generation %d of %d)", c.ObservedGeneration, l.Generation)
		}
	}
	return s
}

// exists reports whether the object of gvk (of the group: any served
// version) and name exists in ns.
func (h *harness) exists(ctx context.Context, ns string, gvk schema.GroupVersionKind, name string) (bool, error) {
	if gvk.Group == lockv1alpha1.Group {
		gvk.Version = "v1alpha1"
	}
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
