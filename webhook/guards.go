package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// objects from storage, without admission). Both read their Locks through
// the handler's reader (reader.go): they deny from the Locks of the cache,
// checking their targets with the API server, and confirm what they would
// allow with the API server's Locks: a lagging cache must not let such a
// delete through.

// KindMapper maps a kind to its resource, a served version and its scope
// (in lockguard, the manager's RESTMapper).
type KindMapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

// maxClusterDecisions bounds the Namespace and CRD decisions made at once
// (slots): each holds copies of Locks (every Lock of a namespace, or of
// one target kind in every namespace; the Lock CRD's a few) and, listing
// from the API server, a page of Locks; such reviews are rare.
const maxClusterDecisions = 4

// clusterGuards decide Namespace and CRD deletes.
type clusterGuards struct {
	locks *lockReader // the handler's
	api   LockLister  // reads the targets
	kinds KindMapper
	// served lists the group's namespaced kinds, whose objects a selector
	// Lock without kinds may cover (ClusterConfig.Served); nil: such a Lock
	// counts as protecting something.
	served func() ([]schema.GroupKind, error)
	// slots bounds the decisions in progress.
	slots slots
}

// slots bounds the decisions of one kind that read the API server at once
// (each holds what it read until it answers): a flood of such reviews (a
// forged one needs only the port) holds at most cap of them; the others
// wait for a slot until their deadline, then fail closed.
type slots struct {
	tokens chan struct{}
	what   string // the decisions, as the error of a full set names them
}

// newSlots returns n slots for the decisions what names.
func newSlots(n int, what string) slots {
	return slots{tokens: make(chan struct{}, n), what: what}
}

// enter waits for a slot until ctx ends; a nil error must be followed by
// leave.
func (s slots) enter(ctx context.Context) error {
	select {
	case s.tokens <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lockguard is deciding %d %s already; retry: %w", cap(s.tokens), s.what, ctx.Err())
	}
}

// leave frees the slot of a decision that enter admitted.
func (s slots) leave() { <-s.tokens }

// checked is what check found of the live Locks of a scope.
type checked struct {
	// protected are the Locks that enforce (Lock.Enforces) whose target
	// exists and is not being deleted, missing those whose target does not
	// exist, and unchecked counts those whose targets were not checked.
	protected, missing []lockv1alpha1.Lock
	unchecked          int
	// audit are, when no Lock in protected enforces, the Locks in Audit
	// enforcement that would protect, and auditUnchecked counts the audit
	// Locks whose targets were not checked (docs/contract.md rule 20).
	audit          []lockv1alpha1.Lock
	auditUnchecked int
}

// check returns, of the live Locks of scope, the ones that enforce whose
// target exists and is not being deleted (protected) and the ones whose
// target does not exist (missing), from the Locks the handler's reader
// gives (the cache's, whose protected Locks deny at once, then the API
// server's); the targets are always read from the API server. When none
// protects, it returns the Locks in Audit enforcement of the API server
// that would (audit), checked alike (docs/contract.md rule 20).
//
// With enough > 0 it stops checking targets once it has found that many
// protected Locks (of those that enforce, then of those in Audit), and
// counts the Locks it did not check (unchecked, auditUnchecked).
func (g *clusterGuards) check(ctx context.Context, scope lockScope, enough int) (checked, error) {
	// The objects of a kind are read once per decision, though the API
	// server's Locks may be checked after the cache's.
	seen := map[nsKind]presence{}
	var c checked
	err := g.locks.inScope(ctx, scope, func(live []lockv1alpha1.Lock, final bool) (bool, error) {
		enforcing, audit := splitEnforcing(live)
		var rest []lockv1alpha1.Lock
		var err error
		c = checked{}
		c.protected, c.missing, rest, err = g.protecting(ctx, enforcing, scope.kind, enough, seen)
		c.unchecked = len(rest)
		if err != nil || len(c.protected) > 0 || !final {
			return len(c.protected) > 0, err
		}
		// Only the API server's Locks say what audit Locks would
		// refuse (the cache's are read first only to deny at once).
		c.audit, _, rest, err = g.protecting(ctx, audit, scope.kind, enough, seen)
		c.auditUnchecked = len(rest)
		return false, err
	})
	if err != nil {
		return checked{}, err
	}
	return c, nil
}

// splitEnforcing returns the Locks of live that enforce (Lock.Enforces)
// and those in Audit enforcement, in new slices: live may be shared.
func splitEnforcing(live []lockv1alpha1.Lock) (enforcing, audit []lockv1alpha1.Lock) {
	for _, l := range live {
		if l.Enforces() {
			enforcing = append(enforcing, l)
		} else {
			audit = append(audit, l)
		}
	}
	return enforcing, audit
}

// run returns decide's decision, made within the guards' bound of
// decisions at once and, when ctx has no deadline, guardTimeout.
func (g *clusterGuards) run(ctx context.Context, guard string, decide func(context.Context) decision) decision {
	ctx, cancel := guardContext(ctx)
	defer cancel()
	if err := g.slots.enter(ctx); err != nil {
		return decision{guard: guard, resp: errored(http.StatusServiceUnavailable, err)}
	}
	defer g.slots.leave()
	return decide(ctx)
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

// metadataPageSize is the page size of the guards' lists of targets from
// the API server (metadata only, a few hundred bytes each).
const metadataPageSize = 2000

// protecting returns those of locks (live Locks) whose target exists and is
// not being deleted, and those whose target does not exist, read from the
// API server: one metadata list per namespace and kind, kept in seen for
// the rest of the decision. A Lock on a kind
// that is not served, or not namespaced, protects nothing.
//
// A selector Lock protects when it covers an existing object
// (selectorProtects): of kind, when kind is set (the CRD guard), or of any
// kind (the namespace guard); an empty selector Lock protects its
// namespace whatever it holds.
//
// With enough > 0 it stops once it has found that many protected Locks,
// and returns the Locks whose targets it did not check as unchecked: a
// denial needs only one (the CRD guard's Locks may be spread over
// thousands of namespaces, one list each).
func (g *clusterGuards) protecting(ctx context.Context, locks []lockv1alpha1.Lock, kind schema.GroupKind, enough int, seen map[nsKind]presence) (protected, missing, unchecked []lockv1alpha1.Lock, err error) {
	locks = slices.Clone(locks)
	slices.SortFunc(locks, func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	byKind := map[nsKind][]lockv1alpha1.Lock{}
	var order []nsKind
	var selectors []lockv1alpha1.Lock
	for _, l := range locks {
		if l.HasSelector() {
			selectors = append(selectors, l)
			continue
		}
		key, _ := l.StandingTarget()
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
		p, err := g.presence(ctx, k, seen)
		if err != nil {
			return nil, nil, nil, err
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
	for i, l := range selectors {
		if enough > 0 && len(protected) >= enough {
			unchecked = append(unchecked, selectors[i:]...)
			break
		}
		covers, err := g.selectorProtects(ctx, &l, kind, seen)
		if err != nil {
			return nil, nil, nil, err
		}
		if covers {
			protected = append(protected, l)
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
	labels  map[string]map[string]string
	mapped  bool
}

// present returns the objects of kind gk in namespace ns, by name: true for
// those not being deleted, and their labels. It is empty for a kind that is
// not namespaced; mapped is false when lockguard's RESTMapper does not know
// the kind (not served, or served in a version the mapper has not
// discovered).
func (g *clusterGuards) present(ctx context.Context, ns string, gk schema.GroupKind) (presence, error) {
	mapping, err := g.kinds.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return presence{}, nil
	}
	if err != nil {
		return presence{}, fmt.Errorf("mapping kind %s: %w", gk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return presence{mapped: true}, nil
	}
	p := presence{objects: map[string]bool{}, labels: map[string]map[string]string{}, mapped: true}
	err = listMetadata(ctx, g.api, mapping.GroupVersionKind, ns, func(o *metav1.PartialObjectMetadata) error {
		p.objects[o.Name] = o.DeletionTimestamp == nil
		if len(o.Labels) > 0 {
			p.labels[o.Name] = o.Labels
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		// The collection itself is not found: the kind is not served in
		// the mapper's version (its CRD just deleted, or its versions
		// changed) though the mapper, refreshed from discovery now and
		// then, still maps it. Not proof that it has no objects: as a kind
		// the mapper does not know (mapped false), its Locks then count
		// unless their status says otherwise.
		return presence{}, nil
	}
	if err != nil {
		return presence{}, err
	}
	return p, nil
}

// listMetadata calls each with every object of kind gvk in namespace ns,
// as the API server lists it (metadata only), page by page
// (metadataPageSize; the pages of one list are one snapshot, and a page
// the API server can no longer serve fails the list: listPageSize), until
// each returns an error, which it returns. each is handed an item of the
// page: it copies what it keeps, so that a page is garbage once the next
// is read. It stops with ctx's error once ctx ends, between pages too.
func listMetadata(ctx context.Context, api LockLister, gvk schema.GroupVersionKind, ns string, each func(*metav1.PartialObjectMetadata) error) error {
	gk := gvk.GroupKind()
	cont := ""
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("listing %s in namespace %s from the API server: %w", gk, ns, err)
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := api.List(ctx, list, client.InNamespace(ns), client.Limit(metadataPageSize), client.Continue(cont)); err != nil {
			return fmt.Errorf("listing %s in namespace %s from the API server: %w", gk, ns, err)
		}
		for i := range list.Items {
			if err := each(&list.Items[i]); err != nil {
				return err
			}
		}
		if cont = list.Continue; cont == "" {
			return nil
		}
	}
}

// presence returns present's answer for k, read once per decision (seen).
func (g *clusterGuards) presence(ctx context.Context, k nsKind, seen map[nsKind]presence) (presence, error) {
	if p, ok := seen[k]; ok {
		return p, nil
	}
	p, err := g.present(ctx, k.ns, k.gk)
	if err != nil {
		return presence{}, err
	}
	seen[k] = p
	return p, nil
}
