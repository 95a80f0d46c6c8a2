package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// lockedDependent is an object of the cascade that live Locks protect.
type lockedDependent struct {
	name  string // Kind/name
	locks []lockv1alpha1.Lock
}

// decideCascade walks the cascade of req, a DELETE the object guard
// allowed, and returns the answer when the cascade guard has one (decided
// true): a denial (and the Locks that deny it), or an allowed delete with
// a warning. decided is false when the cascade reaches no locked object,
// the object guard's answer stands.
func (h *Handler) decideCascade(ctx context.Context, req Request, target lockv1alpha1.TargetKey) (resp admission.Response, locks []lockv1alpha1.Lock, decided bool) {
	g := h.cascade
	uid := req.OldObject.Metadata.UID
	if uid == "" {
		return admission.Response{}, nil, false
	}
	policy := rootPolicy(req)
	walked := policy
	if policy == metav1.DeletePropagationOrphan {
		// Nothing is deleted; walk as background to name the locked
		// dependents the orphaning leaves.
		walked = metav1.DeletePropagationBackground
	}
	c := g.walk(ctx, target.Namespace, uid, walked)
	locked, err := h.lockedIn(ctx, target.Namespace, c.deleted)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify the Locks on the dependents of %s %s/%s, so the delete is refused; retry when lockguard is ready: %w",
			target.GroupKind(), target.Namespace, target.Name, err)), nil, true
	}
	h.metrics.cascadeIncomplete(c.incomplete)
	locks = locksOf(locked)
	switch {
	case len(locked) > 0 && policy == metav1.DeletePropagationOrphan:
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"the dependents of this resource are orphaned, not deleted; locked dependents that stay: %s (Lock(s) %v)",
			dependentNames(locked), lockNames(locks, false, 0))), nil, true
	case len(locked) > 0 && g.mode == CascadeWarn:
		return admission.Allowed("").WithWarnings(CascadeWarning(locks, dependentList(locked))), nil, true
	case len(locked) > 0:
		return admission.Denied(CascadeDenialMessage(locks, dependentList(locked))), locks, true
	case c.incomplete != "" && policy != metav1.DeletePropagationOrphan:
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"lockguard could not check all of this delete's cascade (%s): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there", c.detail)), nil, true
	}
	return admission.Response{}, nil, false
}

// lockedIn returns the objects of deleted that live Locks protect: those
// the index holds, or, when it holds none and the handler confirms what
// it would allow (a cache that lags must not let a cascade through that
// the API server's Locks would deny), those of the namespace's Locks read
// from the API server.
func (h *Handler) lockedIn(ctx context.Context, ns string, deleted []*member) ([]lockedDependent, error) {
	if len(deleted) == 0 {
		return nil, nil
	}
	// Before the index: see Freshness.MayLack.
	reason, mayLack := h.locks.mayLackAny(ns, deleted)
	var locked []lockedDependent
	for _, m := range deleted {
		if lockv1alpha1.Protectable(m.gk) != nil {
			continue
		}
		ls, err := h.locks.index.LiveLocks(keyOf(ns, m))
		if err != nil {
			return nil, err
		}
		if len(ls) > 0 {
			locked = append(locked, lockedDependent{name: m.gk.Kind + "/" + m.meta.Name, locks: ls})
		}
	}
	if len(locked) > 0 || h.locks.live == nil || !mayLack {
		return locked, nil
	}
	if h.locks.fresh != nil {
		h.locks.fresh.Confirmed(reason)
	}
	live, err := listLiveLocks(ctx, h.locks.live, ns)
	if err != nil {
		return nil, err
	}
	byTarget := map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock{}
	for _, l := range live {
		key, _ := l.LiveTarget()
		byTarget[key] = append(byTarget[key], l)
	}
	for _, m := range deleted {
		if ls := byTarget[keyOf(ns, m)]; len(ls) > 0 {
			locked = append(locked, lockedDependent{name: m.gk.Kind + "/" + m.meta.Name, locks: ls})
		}
	}
	return locked, nil
}

// mayLackAny reports whether the index may lack a live Lock of one of
// deleted, and why (Freshness, as the object guard asks it). Without a
// Freshness, it may.
func (f *lockFinder) mayLackAny(ns string, deleted []*member) (string, bool) {
	if f.fresh == nil {
		return "", true
	}
	for _, m := range deleted {
		if reason, mayLack := f.fresh.MayLack(keyOf(ns, m)); mayLack {
			return reason, true
		}
	}
	return "", false
}

// keyOf is the target key of m in namespace ns.
func keyOf(ns string, m *member) lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: ns, Group: m.gk.Group, Kind: m.gk.Kind, Name: m.meta.Name}
}

// locksOf returns the Locks of locked, each once, sorted by name.
func locksOf(locked []lockedDependent) []lockv1alpha1.Lock {
	var all []lockv1alpha1.Lock
	seen := map[string]bool{}
	for _, d := range locked {
		for _, l := range d.locks {
			if !seen[l.Name] {
				seen[l.Name] = true
				all = append(all, l)
			}
		}
	}
	return sortedByName(all)
}

// dependentList returns the Kind/name of each of locked, sorted.
func dependentList(locked []lockedDependent) []string {
	names := make([]string, 0, len(locked))
	for _, d := range locked {
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names
}

// dependentNames is dependentList joined with ", ", at most maxNamed of
// them, then how many more.
func dependentNames(locked []lockedDependent) string {
	return capJoin(dependentList(locked))
}

// capJoin joins at most maxNamed of names with ", ", then "and N more".
func capJoin(names []string) string {
	if len(names) > maxNamed {
		return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return strings.Join(names, ", ")
}

// CascadeDenialMessage is the message of a delete denied because its
// cascade would delete dependents (Kind/name, sorted) that locks protect:
// the contract's sentence naming the Locks (sorted; at most maxNamed, then
// how many more), both ways out, and the locked dependents (at most
// maxNamed, then how many more).
func CascadeDenialMessage(locks []lockv1alpha1.Lock, dependents []string) string {
	return fmt.Sprintf("resource would cascade-delete resources protected by Lock(s) %v; "+
		"delete the Lock(s) first, or delete this resource with --cascade=orphan (propagationPolicy Orphan) to keep its dependents "+
		"(locked dependents: %s)", lockNames(locks, false, 0), capJoin(dependents))
}

// CascadeWarning is the warning of a delete the cascade guard, in mode
// Warn, lets through although its cascade would delete dependents that
// locks protect.
func CascadeWarning(locks []lockv1alpha1.Lock, dependents []string) string {
	return fmt.Sprintf("this delete would cascade-delete resources protected by Lock(s) %v (locked dependents: %s): "+
		"the garbage collector's delete of each is denied, so the cascade stops there", lockNames(locks, false, 0), capJoin(dependents))
}

// cascadeOf is decideCascade for req, which the object guard answered
// resp, when the handler walks cascades and req is the allowed DELETE of
// a named core.navique.com object that Locks can protect (never a Lock:
// deleting a Lock is never blocked).
func (h *Handler) cascadeOf(ctx context.Context, req Request, resp admission.Response) (admission.Response, []lockv1alpha1.Lock, bool) {
	if h.cascade == nil || !resp.Allowed || req.Operation != admissionv1.Delete || req.Namespace == "" {
		return admission.Response{}, nil, false
	}
	target := lockv1alpha1.TargetKey{Namespace: req.Namespace, Group: req.Kind.Group, Kind: req.Kind.Kind, Name: targetName(req)}
	if target.Name == "" || lockv1alpha1.Protectable(target.GroupKind()) != nil {
		return admission.Response{}, nil, false
	}
	gctx, cancel := guardContext(ctx)
	defer cancel()
	return h.decideCascade(gctx, req, target)
}
