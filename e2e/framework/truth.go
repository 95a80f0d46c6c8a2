package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// CreateLockMix creates, in namespace ns, a Stack web, a PostgresCluster
// db and a ConfigMap settings, and Locks of every kind of status: two
// valid on web, one on db, two misspelled (Stacks, StAck), one whose
// target does not exist, one of a kind no CRD serves, one of another
// group; and one of kind "stack" where the API server still accepts it
// (a CRD without the kind rule). It returns the Locks created.
func (k *Kube) CreateLockMix(t *testing.T, ns string) []*lockv1alpha1.Lock {
	t.Helper()
	k.CreateObject(t, StackGVK, ns, "web")
	k.CreateObject(t, PostgresClusterGVK, ns, "db")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	if err := k.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	locks := []*lockv1alpha1.Lock{
		NewLock(ns, "web", "Stack", "web", "valid"),
		NewLock(ns, "web-too", "Stack", "web", "valid, a second one"),
		NewLock(ns, "db", "PostgresCluster", "db", "valid"),
		NewLock(ns, "plural", "Stacks", "web", "misspelled"),
		NewLock(ns, "odd-case", "StAck", "web", "misspelled"),
		NewLock(ns, "missing", "Stack", "nothing", "no such Stack"),
		NewLock(ns, "uninstalled", "Gateway", "edge", "no such kind"),
		NewLock(ns, "other-group", "ConfigMap", "settings", "not our group"),
	}
	locks[len(locks)-1].Spec.TargetRef.APIVersion = "v1"
	for _, l := range locks {
		k.CreateLock(t, l)
	}
	if lower := NewLock(ns, "lower", "stack", "web", "misspelled"); k.Client.Create(t.Context(), lower) == nil {
		locks = append(locks, lower)
	}
	return locks
}

// TruthOptions configure CheckLockStatusTruth.
type TruthOptions struct {
	// Namespaces limits the check to the Locks of these namespaces; empty
	// means every namespace.
	Namespaces []string
	// AllowPending accepts Locks whose status lockguard has not written for
	// their current generation yet (a run that creates Locks while it
	// checks); by default such a Lock is a violation.
	AllowPending bool
}

// CheckLockStatusTruth checks docs/contract.md rule 13 against the API server and
// returns one error per violation, joined (nil when none):
//
//   - for every Lock whose status says active, a server-side dry-run DELETE
//     of its target is denied by lockguard naming the Lock; for a selector
//     Lock, of each object its status.protected names;
//   - for every Lock that says it is not active, status.active is present
//     and false and the Ready condition says why: False, with reason
//     MissingReference or InvalidTarget and a message; or, for a live Lock
//     in Audit enforcement (rule 20), True with reason Audit, and no
//     dry-run DELETE of its target is denied naming it;
//   - the status was computed for the Lock's current generation.
//
// The target of a Lock is found as a user would mean it: the
// core.navique.com kind whose Kind, plural or singular name matches the
// Lock's kind case-insensitively, so that a Lock that claims to protect a
// misspelled target is checked against the object it seems to protect. A
// Lock being deleted is skipped: it no longer counts (rule 2). The dry-run
// deletes nothing.
func (k *Kube) CheckLockStatusTruth(ctx context.Context, opts TruthOptions) error {
	kinds, err := k.servedKinds(ctx)
	if err != nil {
		return err
	}
	var locks []unstructured.Unstructured
	lockGVK := lockv1alpha1.GroupVersion.WithKind("LockList")
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{""}
	}
	for _, ns := range opts.Namespaces {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(lockGVK)
		if err := k.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing Locks: %w", err)
		}
		locks = append(locks, list.Items...)
	}
	var errs []error
	for i := range locks {
		if err := k.checkLockTruth(ctx, &locks[i], kinds, opts); err != nil {
			errs = append(errs, fmt.Errorf("Lock %s/%s: %w", locks[i].GetNamespace(), locks[i].GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func (k *Kube) checkLockTruth(ctx context.Context, u *unstructured.Unstructured, kinds []servedKind, opts TruthOptions) error {
	if u.GetDeletionTimestamp() != nil {
		return nil
	}
	var l lockv1alpha1.Lock
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l); err != nil {
		return err
	}
	if l.ExpiredAt(time.Now()) {
		return k.checkExpiredTruth(ctx, &l, kinds, opts)
	}
	active, hasActive, _ := unstructured.NestedBool(u.Object, "status", "active")
	cond := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady)
	if cond == nil || l.Status.ObservedGeneration != l.Generation || cond.ObservedGeneration != l.Generation {
		if opts.AllowPending && !active {
			return nil
		}
		return fmt.Errorf("status not written for generation %d: %+v", l.Generation, l.Status)
	}
	if !hasActive {
		return fmt.Errorf("status.active is missing (Ready %s, reason %s)", cond.Status, cond.Reason)
	}
	if want := l.ScopeString(); l.Status.Scope != want {
		return fmt.Errorf("status.scope is %q, want %q (Lock.ScopeString)", l.Status.Scope, want)
	}
	if !l.Enforces() && !active && cond.Reason != lockv1alpha1.ReasonMissingReference && cond.Reason != lockv1alpha1.ReasonInvalidTarget {
		return k.checkAuditTruth(ctx, &l, kinds, cond)
	}
	if !active {
		switch {
		case cond.Status != metav1.ConditionFalse:
			return fmt.Errorf("not active, but Ready is %s", cond.Status)
		case cond.Reason != lockv1alpha1.ReasonMissingReference && cond.Reason != lockv1alpha1.ReasonInvalidTarget:
			return fmt.Errorf("not active, with Ready reason %q rather than %s or %s", cond.Reason, lockv1alpha1.ReasonMissingReference, lockv1alpha1.ReasonInvalidTarget)
		case cond.Message == "":
			return fmt.Errorf("not active, and Ready (%s) has no message", cond.Reason)
		}
		return nil
	}
	if cond.Status != metav1.ConditionTrue || cond.Reason != lockv1alpha1.ReasonActive {
		return fmt.Errorf("active, but Ready is %s reason %s", cond.Status, cond.Reason)
	}
	if l.HasSelector() {
		return k.checkSelectorTruth(ctx, &l, kinds)
	}
	gvk, ok := l.Spec.TargetRef.GroupKind()
	if ok != nil || gvk.Group != lockv1alpha1.Group {
		return fmt.Errorf("active with a target outside %s: %+v", lockv1alpha1.Group, l.Spec.TargetRef)
	}
	target, found := lookupKind(kinds, l.Spec.TargetRef.Kind)
	if !found {
		return fmt.Errorf("active, but no served kind of %s is spelled like %q", lockv1alpha1.Group, l.Spec.TargetRef.Kind)
	}
	err := k.Client.Delete(ctx, Object(target, l.Namespace, l.Spec.TargetRef.Name), client.DryRunAll)
	switch {
	case err == nil:
		return fmt.Errorf("active, but a dry-run DELETE of %s %s/%s is allowed", target.Kind, l.Namespace, l.Spec.TargetRef.Name)
	case !apierrors.IsForbidden(err):
		return fmt.Errorf("active, but a dry-run DELETE of %s %s/%s returned %w, not a denial", target.Kind, l.Namespace, l.Spec.TargetRef.Name, err)
	case !deniedBy(err.Error(), l.Name):
		return fmt.Errorf("active, but the dry-run DELETE of %s %s/%s was denied without naming it: %w", target.Kind, l.Namespace, l.Spec.TargetRef.Name, err)
	}
	return nil
}

// checkExpiredTruth checks the expired Lock l (docs/contract.md rule 19):
// no dry-run DELETE of its target is denied naming it, whatever its
// status says; and its status says Expired, not active, or (with
// opts.AllowPending, the reconciler not yet past the expiry) anything.
func (k *Kube) checkExpiredTruth(ctx context.Context, l *lockv1alpha1.Lock, kinds []servedKind, opts TruthOptions) error {
	if target, found := lookupKind(kinds, l.Spec.TargetRef.Kind); found && !l.HasSelector() {
		err := k.Client.Delete(ctx, Object(target, l.Namespace, l.Spec.TargetRef.Name), client.DryRunAll)
		if err != nil && apierrors.IsForbidden(err) && deniedBy(err.Error(), l.Name) {
			return fmt.Errorf("expired at %s, but a dry-run DELETE of %s %s/%s was denied naming it: %w", l.ExpiresAtString(), target.Kind, l.Namespace, l.Spec.TargetRef.Name, err)
		}
	}
	cond := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady)
	switch {
	case opts.AllowPending:
	case cond == nil || cond.Reason != lockv1alpha1.ReasonExpired || cond.Status != metav1.ConditionFalse || l.Status.Active:
		return fmt.Errorf("expired at %s, but its status is %+v", l.ExpiresAtString(), l.Status)
	}
	return nil
}

// checkAuditTruth checks the live Lock l in Audit enforcement
// (docs/contract.md rule 20), not active: its status says Ready True,
// reason Audit, with a message; and no dry-run DELETE of its target is
// denied naming it.
func (k *Kube) checkAuditTruth(ctx context.Context, l *lockv1alpha1.Lock, kinds []servedKind, cond *metav1.Condition) error {
	if cond.Status != metav1.ConditionTrue || cond.Reason != lockv1alpha1.ReasonAudit || cond.Message == "" {
		return fmt.Errorf("in Audit enforcement, but Ready is %s reason %s (%q), want True, reason %s, with a message", cond.Status, cond.Reason, cond.Message, lockv1alpha1.ReasonAudit)
	}
	if target, found := lookupKind(kinds, l.Spec.TargetRef.Kind); found && !l.HasSelector() {
		err := k.Client.Delete(ctx, Object(target, l.Namespace, l.Spec.TargetRef.Name), client.DryRunAll)
		if err != nil && apierrors.IsForbidden(err) && deniedBy(err.Error(), l.Name) {
			return fmt.Errorf("in Audit enforcement, but a dry-run DELETE of %s %s/%s was denied naming it: %w", target.Kind, l.Namespace, l.Spec.TargetRef.Name, err)
		}
	}
	return nil
}

// checkSelectorTruth checks the active selector Lock l: a dry-run DELETE
// of each object its status.protected names is denied naming it.
func (k *Kube) checkSelectorTruth(ctx context.Context, l *lockv1alpha1.Lock, kinds []servedKind) error {
	if l.Status.Protected == nil {
		return errors.New("active, but status.protected is missing")
	}
	for _, kind := range l.Spec.Selector.Kinds {
		// A DELETE carries the kind as served: only that spelling matches.
		if !slices.ContainsFunc(kinds, func(k servedKind) bool { return k.gvk.Kind == kind }) {
			return fmt.Errorf("active, but its selector names kind %q, which %s does not serve as written: no DELETE matches it", kind, lockv1alpha1.Group)
		}
	}
	for _, r := range l.Status.Protected.Resources {
		gvk, found := lookupKind(kinds, r.Kind)
		if !found {
			return fmt.Errorf("active, and status.protected names %s %q, of no served kind", r.Kind, r.Name)
		}
		err := k.Client.Delete(ctx, Object(gvk, l.Namespace, r.Name), client.DryRunAll)
		switch {
		case err == nil:
			return fmt.Errorf("active, but a dry-run DELETE of %s %s/%s, which status.protected names, is allowed", r.Kind, l.Namespace, r.Name)
		case !apierrors.IsForbidden(err):
			return fmt.Errorf("active, but a dry-run DELETE of %s %s/%s, which status.protected names, returned %w, not a denial", r.Kind, l.Namespace, r.Name, err)
		case !deniedBy(err.Error(), l.Name):
			return fmt.Errorf("active, but the dry-run DELETE of %s %s/%s, which status.protected names, was denied without naming it: %w", r.Kind, l.Namespace, r.Name, err)
		}
	}
	return nil
}

// deniedBy reports whether a denial message names Lock name among the
// Locks it lists ("... protected by Lock(s) [a b c]; ...").
func deniedBy(msg, name string) bool {
	for _, prefix := range []string{"resource is protected by Lock(s) [", "resource would cascade-delete resources protected by Lock(s) ["} {
		if _, rest, ok := strings.Cut(msg, prefix); ok {
			names, _, _ := strings.Cut(rest, "]")
			if slices.Contains(strings.Fields(names), name) {
				return true
			}
		}
	}
	return false
}

// servedKind is a kind of the core.navique.com group as its CRD names it.
type servedKind struct {
	gvk              schema.GroupVersionKind // a served version
	plural, singular string
}

// servedKinds reads the CRDs of the core.navique.com group (through
// unstructured, so that any scheme does).
func (k *Kube) servedKinds(ctx context.Context) ([]servedKind, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := k.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	var kinds []servedKind
	for _, crd := range list.Items {
		if group, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); group != lockv1alpha1.Group {
			continue
		}
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		singular, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "singular")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			v, _ := v.(map[string]any)
			if served, _ := v["served"].(bool); served {
				name, _ := v["name"].(string)
				kinds = append(kinds, servedKind{gvk: schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: name, Kind: kind}, plural: plural, singular: singular})
				break
			}
		}
	}
	return kinds, nil
}

// lookupKind returns the served kind that s names, case-insensitively, by
// Kind, plural or singular.
func lookupKind(kinds []servedKind, s string) (schema.GroupVersionKind, bool) {
	for _, k := range kinds {
		if strings.EqualFold(k.gvk.Kind, s) || strings.EqualFold(k.plural, s) || strings.EqualFold(k.singular, s) {
			return k.gvk, true
		}
	}
	return schema.GroupVersionKind{}, false
}
