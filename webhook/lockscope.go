package webhook

// The Locks of a namespace or CustomResourceDefinition decision (the
// namespace and CRD guards): read by scope, never every Lock of the cluster.

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// lockScope is the Locks a namespace or CRD decision reads: the live Locks
// of namespace ns (the namespace guard) or, when ns is "", the live Locks
// of every namespace whose target is of kind kind (the CRD guard).
type lockScope struct {
	ns   string
	kind schema.GroupKind
}

// cached returns copies of the Locks of s in c, and no other: targetRef
// Locks and selector Locks.
func (s lockScope) cached(c Locks) ([]lockv1alpha1.Lock, error) {
	var locks, selectors []lockv1alpha1.Lock
	var err error
	if s.ns != "" {
		if locks, err = c.LiveLocksIn(s.ns); err == nil {
			selectors, err = c.LiveSelectorLocksIn(s.ns)
		}
	} else {
		if locks, err = c.LiveLocksOfKind(s.kind); err == nil {
			selectors, err = c.LiveSelectorLocksOfKind(s.kind)
		}
	}
	return append(locks, selectors...), err
}

// holds reports whether the live Lock l is one of s at time now: a Lock
// of namespace ns, or one that could cover an object of kind
// (Lock.CoversKind).
func (s lockScope) holds(l *lockv1alpha1.Lock, now time.Time) bool {
	if s.ns != "" {
		return l.Namespace == s.ns
	}
	return l.CoversKind(s.kind, now)
}

// inScope calls denies with the live Locks of scope that enforce
// (Lock.Enforces) from the cache, and, unless those deny the delete (or
// the cache cannot tell), again, final, with the live Locks of scope read
// from the API server (shared with other decisions: read-only), those in
// Audit enforcement too: what they would refuse is decided from the API
// server's Locks alone, as is what the cache would allow (docs/contract.md
// rule 20). It returns the error of denies or of the read. It never holds
// a Lock outside scope (issue 22: a CRD delete does not copy every Lock of
// the cluster).
func (r *lockReader) inScope(ctx context.Context, scope lockScope, denies func(live []lockv1alpha1.Lock, final bool) (bool, error)) error {
	now := r.now()
	if cached, err := scope.cached(r.cache); err == nil {
		live := slices.DeleteFunc(cached, func(l lockv1alpha1.Lock) bool { return !l.Enforces() || !scope.holds(&l, now) })
		if denied, err := denies(live, false); err != nil || denied {
			return err
		}
	}
	var live []lockv1alpha1.Lock
	var err error
	if scope.ns != "" {
		live, err = r.api.namespace(ctx, scope.ns)
	} else {
		live, _, err = r.api.list(ctx, "", func(l *lockv1alpha1.Lock) bool { return scope.holds(l, now) }, 0)
	}
	if err != nil {
		return err
	}
	_, err = denies(live, true)
	return err
}

// anyLive returns at most maxNamed live Locks that enforce
// (Lock.Enforces) of every namespace, the first by namespace and name, and
// how many more live Locks there are: from the cache when it has some
// that enforce (more then counts every other live Lock of the cache, audit
// ones too: it errs towards denying), otherwise from the API server, whose
// list it reads to the end, counting the Locks past maxNamed without
// keeping them (kubectl lock why reads the same list: both name and count
// the same Locks). From the API server's list it also returns, when none
// enforces, at most maxNamed live Locks in Audit enforcement, and how many
// more there are (docs/contract.md rule 20). It never copies or holds more
// than that (and a page of the API server's list).
func (r *lockReader) anyLive(ctx context.Context) (named []lockv1alpha1.Lock, more int, audit []lockv1alpha1.Lock, auditMore int, err error) {
	if named, total, err := r.cache.AnyLiveLocks(maxNamed); err == nil && total > 0 {
		if enforcing := slices.DeleteFunc(slices.Clone(named), audits); len(enforcing) > 0 {
			return enforcing, total - len(enforcing), nil, 0, nil
		}
	}
	named, more, err = r.api.list(ctx, "", func(l *lockv1alpha1.Lock) bool {
		if l.Enforces() {
			return true
		}
		// One pass: the audit Locks are tallied as the list goes by.
		if len(audit) < maxNamed {
			audit = append(audit, *l.DeepCopy())
		} else {
			auditMore++
		}
		return false
	}, maxNamed)
	if err != nil || len(named) > 0 {
		return named, more, nil, 0, err
	}
	return nil, 0, audit, auditMore, nil
}

// enforces and audits say whether a live Lock refuses (Lock.Enforces),
// as slices' functions take it.
func enforces(l lockv1alpha1.Lock) bool { return l.Enforces() }
func audits(l lockv1alpha1.Lock) bool   { return !l.Enforces() }
