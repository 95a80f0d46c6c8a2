package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The guards of the deletes that remove locked objects whatever their
// Locks: a Namespace (its controller deletes everything in it, the Locks
// included, and then the objects are no longer locked) and a
// core.navique.com CustomResourceDefinition (the API server drops its
// objects from storage, without admission). Both deny from the Locks of
// the cache, checking their targets with the API server, and confirm what
// they would allow with the API server's Locks: a lagging cache must not
// let such a delete through.

// GuardObject, GuardNamespace and GuardCRD name the guard that decided a
// request, as the metrics count it.
const (
	GuardObject    = "object"
	GuardNamespace = "namespace"
	GuardCRD       = "crd"
)

// KindMapper maps a kind to its resource, a served version and its scope
// (in lockguard, the manager's RESTMapper).
type KindMapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

// CachedLocks lists live Locks from an informer cache (in lockguard,
// readmodel.LockIndex). Each method copies only the Locks it returns, so
// that a decision never copies every Lock of the cluster. Each returns an
// error when it cannot tell, for example while its cache has not synced.
type CachedLocks interface {
	// LiveLocksIn returns copies of the live Locks of namespace ns.
	LiveLocksIn(ns string) ([]lockv1alpha1.Lock, error)
	// LiveLocksOfKind returns copies of the live Locks of every namespace
	// whose target is of kind gk.
	LiveLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error)
	// AnyLiveLocks returns copies of at most limit live Locks of every
	// namespace, the first by "namespace/name", and how many live Locks
	// there are in all.
	AnyLiveLocks(limit int) (locks []lockv1alpha1.Lock, total int, err error)
}

// WithClusterGuards makes the handler decide the DELETE of Namespaces and
// of core.navique.com CustomResourceDefinitions. The Locks come from
// cache when it finds some that protect an existing object (a cache that
// lags only errs towards denying, as for the object guard), and otherwise
// from r, a reader of the API server (in lockguard, the manager's
// APIReader), which also tells whether their targets exist; kinds are
// mapped through m. cache may be nil: every decision then lists the Locks
// from the API server. Without this option such requests are answered
// Errored: the handler was not configured for what the webhook
// configuration sends it.
func WithClusterGuards(cache CachedLocks, r LockLister, m KindMapper) Option {
	return func(h *Handler) {
		h.cluster = &clusterGuards{cache: cache, api: r, kinds: m, slots: make(chan struct{}, maxClusterDecisions)}
	}
}

// maxClusterDecisions bounds the Namespace and CRD decisions made at once:
// each holds copies of Locks (every Lock of a namespace, or of one target
// kind in every namespace; the Lock CRD's a few) and, listing from the API
// server, a page of Locks, so a flood of such reviews (they are rare; a
// forged one needs only the port) holds at most this many. The others wait
// for a slot until their deadline, then fail closed.
const maxClusterDecisions = 4

// clusterGuards decide Namespace and CRD deletes.
type clusterGuards struct {
	cache CachedLocks
	api   LockLister
	kinds KindMapper
	// slots holds one token per decision in progress.
	slots chan struct{}
}

// enter waits for a decision slot until ctx ends; a nil error must be
// followed by leave.
func (g *clusterGuards) enter(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lockguard is deciding %d namespace or CRD deletes already; retry: %w", cap(g.slots), ctx.Err())
	}
}

// leave frees the slot of a decision that enter admitted.
func (g *clusterGuards) leave() { <-g.slots }

// lockScope is the Locks a cluster decision reads: the live Locks of
// namespace ns (the namespace guard) or, when ns is "", the live Locks of
// every namespace whose target is of kind kind (the CRD guard).
type lockScope struct {
	ns   string
	kind schema.GroupKind
}

// cached returns copies of the Locks of s in c, and no other.
func (s lockScope) cached(c CachedLocks) ([]lockv1alpha1.Lock, error) {
	if s.ns != "" {
		return c.LiveLocksIn(s.ns)
	}
	return c.LiveLocksOfKind(s.kind)
}

// holds reports whether the live Lock l is one of s.
func (s lockScope) holds(l *lockv1alpha1.Lock) bool {
	if s.ns != "" {
		return l.Namespace == s.ns
	}
	key, _ := l.LiveTarget()
	return key.GroupKind() == s.kind
}

// decide returns, of the live Locks of scope, the ones whose target exists
// and is not being deleted (protected) and the ones whose target does not
// exist (missing). It looks in the cache first, and when the cache has no
// such protecting Lock it reads the Locks from the API server; the targets
// are always read from the API server. It holds no Lock outside scope
// (issue 22: a CRD delete does not copy every Lock of the cluster).
//
// With enough > 0 it stops checking targets once it has found that many
// protected Locks, and counts the Locks it did not check (protecting).
func (g *clusterGuards) decide(ctx context.Context, scope lockScope, enough int) (protected, missing []lockv1alpha1.Lock, unchecked int, err error) {
	var rest []lockv1alpha1.Lock
	// The objects of a kind are read once per decision, though the API
	// server's Locks may be checked after the cache's.
	seen := map[nsKind]presence{}
	if g.cache != nil {
		if cached, err := scope.cached(g.cache); err == nil {
			live := slices.DeleteFunc(cached, func(l lockv1alpha1.Lock) bool { return !scope.holds(&l) })
			if protected, missing, rest, err = g.protecting(ctx, live, enough, seen); err != nil || len(protected) > 0 {
				return protected, missing, len(rest), err
			}
		}
	}
	live, _, err := listLocks(ctx, g.api, scope.ns, scope.holds, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	protected, missing, rest, err = g.protecting(ctx, live, enough, seen)
	return protected, missing, len(rest), err
}

// guardTimeout bounds the reads of a namespace or CRD decision whose
// context has no deadline (ServeHTTP gives it the review's timeout less a
// margin; Handle's caller may give none), so that lockguard answers (fail
// closed, with its own message) before the API server's call to it times
// out (timeoutSeconds 5).
const guardTimeout = 3 * time.Second

// guardContext returns ctx, bounded by guardTimeout if it has no deadline.
func guardContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, guardTimeout)
}

// listPageSize is the page size of the guards' lists of Locks from the API
// server, and metadataPageSize of their lists of targets (metadata only,
// a few hundred bytes each).
const (
	listPageSize     = 500
	metadataPageSize = 2000
)

// maxNamed bounds the Locks a namespace or CRD denial names and describes,
// so that a namespace with thousands of Locks still gets a short message.
const maxNamed = 10

// maxReasonLen bounds each reason quoted in a namespace or CRD denial.
const maxReasonLen = 120

// anyLiveLocks returns at most maxNamed live Locks of every namespace, the
// first by namespace and name, and how many more live Locks there are:
// from the cache when it has some, otherwise from the API server, whose
// list it reads to the end, counting the Locks past maxNamed without
// keeping them (kubectl lock why reads the same list: both name and count
// the same Locks). It never copies or holds more than that (and a page of
// the API server's list).
func (g *clusterGuards) anyLiveLocks(ctx context.Context) (named []lockv1alpha1.Lock, more int, err error) {
	if g.cache != nil {
		if named, total, err := g.cache.AnyLiveLocks(maxNamed); err == nil && total > 0 {
			return named, total - len(named), nil
		}
	}
	return listLocks(ctx, g.api, "", nil, maxNamed)
}

// listLiveLocks returns the live Locks of namespace ns, or of every
// namespace when ns is "", read through api page by page.
func listLiveLocks(ctx context.Context, api LockLister, ns string) ([]lockv1alpha1.Lock, error) {
	live, _, err := listLocks(ctx, api, ns, nil, 0)
	return live, err
}

// listLocks returns the live Locks of namespace ns, or of every namespace
// when ns is "", that keep accepts (every live Lock when keep is nil),
// read through api page by page: of each page it keeps only those, so
// that a decision that needs some Locks of the cluster never holds them
// all. With limit > 0 it keeps the first limit of them (in the API
// server's order, by namespace and name) and counts the rest in more. It
// stops with ctx's error once ctx ends, between pages too.
func listLocks(ctx context.Context, api LockLister, ns string, keep func(*lockv1alpha1.Lock) bool, limit int) (live []lockv1alpha1.Lock, more int, err error) {
	opts := []client.ListOption{client.Limit(listPageSize)}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	cont := ""
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("listing Locks from the API server: %w", err)
		}
		var page lockv1alpha1.LockList
		if err := api.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return nil, 0, fmt.Errorf("listing Locks from the API server: %w", err)
		}
		for i := range page.Items {
			l := &page.Items[i]
			if _, ok := l.LiveTarget(); !ok || keep != nil && !keep(l) {
				continue
			}
			if limit > 0 && len(live) >= limit {
				more++
				continue
			}
			live = append(live, *l)
		}
		if cont = page.Continue; cont == "" {
			return live, more, nil
		}
	}
}

// protecting returns those of locks (live Locks) whose target exists and is
// not being deleted, and those whose target does not exist, read from the
// API server: one metadata list per namespace and kind, kept in seen for
// the rest of the decision. A Lock on a kind
// that is not served, or not namespaced, protects nothing.
//
// With enough > 0 it stops once it has found that many protected Locks,
// and returns the Locks whose targets it did not check as unchecked: a
// denial needs only one (the CRD guard's Locks may be spread over
// thousands of namespaces, one list each).
func (g *clusterGuards) protecting(ctx context.Context, locks []lockv1alpha1.Lock, enough int, seen map[nsKind]presence) (protected, missing, unchecked []lockv1alpha1.Lock, err error) {
	locks = slices.Clone(locks)
	slices.SortFunc(locks, func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	byKind := map[nsKind][]lockv1alpha1.Lock{}
	var order []nsKind
	for _, l := range locks {
		key, _ := l.LiveTarget()
		k := nsKind{key.Namespace, key.GroupKind()}
		if _, seen := byKind[k]; !seen {
			order = append(order, k)
		}
		byKind[k] = append(byKind[k], l)
	}
	for i, k := range order {
		if enough > 0 && len(protected) >= enough {
			for _, rest := range order[i:] {
				unchecked = append(unchecked, byKind[rest]...)
			}
			break
		}
		p, ok := seen[k]
		if !ok {
			if p.objects, p.mapped, err = g.present(ctx, k.ns, k.gk); err != nil {
				return nil, nil, nil, err
			}
			seen[k] = p
		}
		present, mapped := p.objects, p.mapped
		for _, l := range byKind[k] {
			alive, exists := present[l.Spec.TargetRef.Name]
			if !mapped {
				// lockguard's RESTMapper does not know the kind, which is
				// not proof that it is not served: the mapper caches a
				// group's versions, so a CRD that adds a version to the
				// group (a new kind in v1, say) stays unknown to it. The
				// reconciler rediscovers the group's kinds on its own: a
				// Lock counts as protecting unless its status says its
				// target is missing or invalid, so that a stale mapper
				// can only deny, never allow a delete that destroys a
				// locked object.
				alive, exists = true, !reportedMissing(l)
			}
			switch {
			case exists && alive:
				protected = append(protected, l)
			case !exists:
				missing = append(missing, l)
			}
		}
	}
	return protected, missing, unchecked, nil
}

// nsKind is a kind in a namespace, whose objects a guard reads at most
// once per decision.
type nsKind struct {
	ns string
	gk schema.GroupKind
}

// presence is what present returned for an nsKind.
type presence struct {
	objects map[string]bool
	mapped  bool
}

// present returns the objects of kind gk in namespace ns, by name: true for
// those not being deleted. It is empty for a kind that is not namespaced;
// mapped is false when lockguard's RESTMapper does not know the kind (not
// served, or served in a version the mapper has not discovered).
func (g *clusterGuards) present(ctx context.Context, ns string, gk schema.GroupKind) (_ map[string]bool, mapped bool, _ error) {
	mapping, err := g.kinds.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("mapping kind %s: %w", gk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, true, nil
	}
	out := map[string]bool{}
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := g.api.List(ctx, list, client.InNamespace(ns), client.Limit(metadataPageSize), client.Continue(cont)); err != nil {
			return nil, false, fmt.Errorf("listing %s in namespace %s from the API server: %w", gk, ns, err)
		}
		for _, o := range list.Items {
			out[o.Name] = o.DeletionTimestamp == nil
		}
		if cont = list.Continue; cont == "" {
			return out, true, nil
		}
	}
}
