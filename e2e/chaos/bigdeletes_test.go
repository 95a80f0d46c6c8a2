//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// The bigWorker sends the deletes that remove many objects at once
// (docs/contract.md rules 6, 11 and 12), in namespaces and kinds of its own so
// that the other clients' namespaces and kinds are never disturbed:
//
//   - episodes: a scratch namespace with a Stack "owner" that owns a
//     PostgresCluster "child", and a Lock on the child (most of the time),
//     on a missing object, or none. Once the Lock is active (its status
//     says a delete would be denied right now, which for a namespace
//     includes the has-locks label its webhook entry selects on), the
//     worker deletes the owner with Background, Foreground or Orphan
//     propagation, and the namespace. The child must survive every one of
//     them while the Lock lives, the namespace delete must be denied, and
//     the owner's answer is counted (denied by the cascade guard, or
//     allowed). A namespace with no Lock on an existing object must be
//     deleted, and must be gone after the run;
//   - CRDs: ChaosWidget, a kind only this worker uses, with a locked
//     object: its CRD's delete must be denied and the object survive;
//     ChaosGadget, whose objects are never locked: its CRD is deleted
//     (which must go through) and recreated.
type bigWorker struct {
	prefix string
	c      client.Client
	rng    *rand.Rand
	n      *counts
	b      *bigCounts
	report func(kind deleteKind, msg string)
	logf   func(format string, args ...any)
	// waitActive: a Lock protects a namespace and an owner's descendants
	// once its status says active. The self-test runs without lockguard,
	// so nothing writes a status: there a Lock protects from its create.
	waitActive bool

	seq      int
	owners   int // owner deletes sent: the propagation policies take turns
	episodes []*episode
	// deleted are the scratch namespaces whose delete was allowed: they
	// must be gone after the run.
	deleted []string
	widget  widgetState
}

// bigCounts are what the bigWorker counts besides the kinds' rows.
type bigCounts struct {
	episodes, lockedEpisodes, missingEpisodes, bareEpisodes atomic.Int64
	// nsFree* count the deletes of namespaces without a Lock on an
	// existing object.
	nsFreeSent, nsFreeAllowed, nsFreeDenied, nsFreeErrors atomic.Int64
	gadgetDeletes, gadgetAllowed, gadgetCreates           atomic.Int64
	widgetCRDCreates                                      atomic.Int64
	notActive                                             atomic.Int64 // Locks never seen active within activeWithin
	warnings                                              atomic.Int64 // admission warnings received
	// nsFreeWait is the longest a namespace's delete waited after its
	// Lock's delete was answered, ns.
	nsFreeWait atomic.Int64
}

// activeWithin bounds how long the worker waits for a Lock's status to say
// active before it gives the episode up (faults may delay the reconciler).
const activeWithin = 45 * time.Second

// ownerSettle bounds how long an episode waits, after an allowed owner
// delete, for the collector to finish with the owner before its namespace
// may be deleted. A chaos-short self-test once saw no Foreground violation
// in 2 minutes: each episode's namespace went before the collector had
// deleted the child, so the namespace delete was blamed instead.
const ownerSettle = 15 * time.Second

// The kinds the CRD deletes work on.
var (
	widgetGVK = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1", Kind: "ChaosWidget"}
	gadgetGVK = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1", Kind: "ChaosGadget"}
)

// crdName returns the name of gvk's CRD.
func crdName(gvk schema.GroupVersionKind) string {
	return strings.ToLower(gvk.Kind) + "s." + gvk.Group
}

// episode is one scratch namespace.
type episode struct {
	ns        string
	ownerUID  types.UID
	childUID  types.UID // the child that must survive while the Lock lives; empty once it may go
	lock      string    // the Lock's name; empty for none
	missing   bool      // the Lock targets an object that does not exist
	acked     time.Time // when the Lock's create was answered; zero while unknown
	active    bool      // the Lock protects the namespace and the owner's descendants
	steps     int
	lastKind  deleteKind // the last request that could have removed the child
	ownerGone bool       // an owner delete was allowed
	ownerStep int        // the step the allowed owner delete was sent at
	ownerAt   time.Time  // when the allowed owner delete was answered
	// unlockedAt is when the delete of the episode's Lock was answered.
	unlockedAt time.Time
}

// protected reports whether the child must survive.
func (e *episode) protected() bool {
	return e.lock != "" && !e.missing && !e.acked.IsZero() && e.childUID != ""
}

// widgetState is the locked ChaosWidget and its Lock.
type widgetState struct {
	ns       string
	uid      types.UID // the widget that must survive while the Lock lives
	acked    bool
	active   bool
	lastKind deleteKind
	since    time.Time // when the worker started to wait for active
}

// newBigWorker returns a bigWorker whose namespaces start with prefix,
// with a client of its own (cfg, opts) that counts the admission warnings
// it receives.
func newBigWorker(prefix string, cfg *rest.Config, opts client.Options, seed uint64, n *counts, report func(deleteKind, string), logf func(string, ...any), waitActive bool) (*bigWorker, error) {
	b := &bigWorker{
		prefix: prefix, rng: rand.New(rand.NewPCG(seed, 0xb16)), n: n, b: &bigCounts{},
		report: report, logf: logf, waitActive: waitActive,
		widget: widgetState{ns: prefix + "-widgets", lastKind: kindNone},
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, warningCounter{&b.b.warnings}
	var err error
	b.c, err = client.New(cfg, opts)
	return b, err
}

// warningCounter counts the API server's warnings (docs/contract.md rule 14: an
// allowed delete a user might not expect carries one).
type warningCounter struct{ n *atomic.Int64 }

// HandleWarningHeaderWithContext counts a warning.
func (w warningCounter) HandleWarningHeaderWithContext(context.Context, int, string, string) {
	w.n.Add(1)
}

// run works until ctx ends.
func (b *bigWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch r := b.rng.Float64(); {
		case r < 0.30 && len(b.episodes) < 4:
			b.newEpisode(ctx)
		case r < 0.85 && len(b.episodes) > 0:
			b.advance(ctx, b.episodes[b.rng.IntN(len(b.episodes))])
		case r < 0.93:
			b.widgetStep(ctx)
		default:
			b.gadgetStep(ctx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *bigWorker) violation(kind deleteKind, format string, args ...any) {
	b.n.byKind[kind].violations.Add(1)
	b.report(kind, fmt.Sprintf(format, args...))
}

func object(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// read returns the UID of the object, empty when it does not exist (or
// its kind is not served), and false when the API server does not answer.
func (b *bigWorker) read(ctx context.Context, u *unstructured.Unstructured) (types.UID, bool) {
	err := b.c.Get(ctx, client.ObjectKeyFromObject(u), u)
	switch {
	case err == nil:
		return u.GetUID(), true
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return "", true
	}
	return "", false
}

// newEpisode creates a scratch namespace, its owner and child, and a Lock
// on the child (half of the time), on a missing PostgresCluster (one in
// six) or none.
func (b *bigWorker) newEpisode(ctx context.Context) {
	b.seq++
	e := &episode{ns: fmt.Sprintf("%s-%d", b.prefix, b.seq), lastKind: kindNone}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return // The API server is away; the next number is another namespace.
	}
	b.episodes = append(b.episodes, e)
	b.b.episodes.Add(1)
	owner := object(stackGVK, e.ns, "owner")
	owner.Object["spec"] = map[string]any{"size": int64(1)}
	if err := b.c.Create(ctx, owner); err != nil {
		return // advance retires an episode it cannot use.
	}
	e.ownerUID = owner.GetUID()
	child := object(pgGVK, e.ns, "child")
	child.Object["spec"] = map[string]any{"size": int64(1)}
	child.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: stackGVK.GroupVersion().String(), Kind: "Stack", Name: "owner", UID: e.ownerUID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	if err := b.c.Create(ctx, child); err != nil {
		return
	}
	switch r := b.rng.IntN(6); {
	case r == 0:
		b.b.bareEpisodes.Add(1)
		return
	case r == 1:
		e.missing = true
		b.b.missingEpisodes.Add(1)
	default:
		b.b.lockedEpisodes.Add(1)
	}
	e.lock = "keep-child"
	name := "child"
	if e.missing {
		name = "not-there"
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.lock},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: pgGVK.Kind, Name: name}, Reason: "chaos: namespace and owner deletes"},
	}
	if err := b.c.Create(ctx, lock); err != nil {
		return // Unknown: advance reads it.
	}
	e.acked = time.Now()
	if !e.missing {
		// Nothing deleted the child since its create: from the Lock's
		// create on, the same child must stay.
		e.childUID = child.GetUID()
	}
}

// advance takes an episode one step: it settles what is unknown, checks
// the child, then deletes the owner or the namespace, or retires it.
func (b *bigWorker) advance(ctx context.Context, e *episode) {
	e.steps++
	if e.lock != "" && e.acked.IsZero() {
		var l lockv1alpha1.Lock
		err := b.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: e.lock}, &l)
		switch {
		case apierrors.IsNotFound(err):
			e.lock = "" // Never created; the child is unlocked.
		case err != nil:
			return
		default:
			e.acked = time.Now()
			if !e.missing {
				// The child, read after the Lock exists, is the one that
				// must stay (nothing deleted it: no owner delete was sent).
				uid, ok := b.read(ctx, object(pgGVK, e.ns, "child"))
				if !ok {
					return
				}
				e.childUID = uid
			}
		}
	}
	if !b.checkChild(ctx, e) {
		return
	}
	if e.ownerUID == "" || (e.lock != "" && e.acked.IsZero()) || e.steps > 5 {
		b.retire(ctx, e)
		return
	}
	if e.protected() && !e.active {
		if !b.waitActive {
			e.active = true
		} else {
			var l lockv1alpha1.Lock
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: e.lock}, &l); err != nil {
				return
			}
			if !l.Status.Active {
				if time.Since(e.acked) > activeWithin {
					b.b.notActive.Add(1)
					b.logf("big deletes: Lock %s/%s not active %s after its create; retiring its namespace", e.ns, e.lock, activeWithin)
					b.retire(ctx, e)
				}
				e.steps-- // Waiting does not count.
				return
			}
			e.active = true
		}
	}
	if e.protected() && !e.ownerGone && b.rng.IntN(3) > 0 {
		b.deleteOwner(ctx, e)
		return
	}
	if e.ownerGone && e.steps-e.ownerStep < 2 {
		return // One more look at the child (above) before its namespace may go.
	}
	if e.ownerGone && time.Since(e.ownerAt) < ownerSettle {
		// The collector has not finished with the owner (a Foreground
		// owner stays until its dependents are gone): the namespace's
		// delete would take the child first and hide what the owner's
		// delete did to it.
		if uid, ok := b.read(ctx, object(stackGVK, e.ns, "owner")); !ok || uid == e.ownerUID {
			e.steps-- // Waiting does not count.
			return
		}
	}
	if e.protected() || e.lock == "" || e.missing {
		b.deleteNamespace(ctx, e, e.protected())
	}
}

// checkChild checks the invariant for the episode's child: while its Lock
// lives, it must be the same child. It returns false when the API server
// does not answer.
func (b *bigWorker) checkChild(ctx context.Context, e *episode) bool {
	if !e.protected() {
		return true
	}
	uid, ok := b.read(ctx, object(pgGVK, e.ns, "child"))
	if !ok {
		return false
	}
	if uid != e.childUID {
		b.violation(e.lastKind, "PostgresCluster %s/child (uid %s) is gone while Lock %s protected it (created %s ago); the last request that could have removed it: %s",
			e.ns, e.childUID, e.lock, time.Since(e.acked).Round(time.Millisecond), e.lastKind)
		e.childUID = "" // Counted once.
	}
	return true
}

// deleteOwner deletes the child's owner with a random propagation policy,
// and counts its answer. The child must survive (checkChild).
func (b *bigWorker) deleteOwner(ctx context.Context, e *episode) {
	kind, policy := kindOwnerBackground, metav1.DeletePropagationBackground
	b.owners++
	switch b.owners % 3 {
	case 1:
		kind, policy = kindOwnerForeground, metav1.DeletePropagationForeground
	case 2:
		kind, policy = kindOwnerOrphan, metav1.DeletePropagationOrphan
	}
	k := &b.n.byKind[kind]
	k.sent.Add(1)
	k.locked.Add(1)
	e.lastKind = kind
	uid := e.ownerUID
	err := b.c.Delete(ctx, object(stackGVK, e.ns, "owner"), client.Preconditions{UID: &uid}, client.PropagationPolicy(policy))
	switch {
	case err == nil:
		k.allowed.Add(1)
		e.ownerGone, e.ownerStep, e.ownerAt = true, e.steps, time.Now()
	case isCascadeDenial(err):
		k.denied.Add(1)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		e.ownerGone, e.ownerStep, e.ownerAt = true, e.steps, time.Now() // An earlier delete whose answer was lost went through.
	default:
		k.errors.Add(1)
	}
	b.checkChild(ctx, e)
}

// deleteNamespace deletes the episode's namespace. locked says whether a
// live Lock in it protects an existing object: then the delete must be
// denied, else it must go through (and the namespace must go).
func (b *bigWorker) deleteNamespace(ctx context.Context, e *episode, locked bool) {
	k := &b.n.byKind[kindNamespace]
	k.sent.Add(1)
	if locked {
		k.locked.Add(1)
		e.lastKind = kindNamespace
	} else {
		b.b.nsFreeSent.Add(1)
	}
	err := b.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	switch {
	case err == nil && locked:
		k.allowed.Add(1)
		b.violation(kindNamespace, "the delete of namespace %s was allowed while Lock %s (created %s ago, active) protected PostgresCluster child (uid %s)",
			e.ns, e.lock, time.Since(e.acked).Round(time.Millisecond), e.childUID)
		e.childUID = "" // Counted once; the namespace goes.
		b.drop(e, true)
	case err == nil || apierrors.IsNotFound(err):
		b.b.nsFreeAllowed.Add(1)
		if !e.unlockedAt.IsZero() {
			waited := int64(time.Since(e.unlockedAt))
			for cur := b.b.nsFreeWait.Load(); waited > cur && !b.b.nsFreeWait.CompareAndSwap(cur, waited); cur = b.b.nsFreeWait.Load() {
			}
		}
		b.drop(e, true)
	case isGuardDenial(err, "namespace"):
		if locked {
			k.denied.Add(1)
		} else {
			b.b.nsFreeDenied.Add(1) // A Lock just deleted, not yet out of every cache: retried.
		}
	default:
		if locked {
			k.errors.Add(1)
		} else {
			b.b.nsFreeErrors.Add(1)
		}
	}
	if locked {
		b.checkChild(ctx, e)
	}
}

// isGuardDenial reports whether err is the denial of guard's webhook entry
// (namespace or crd) of lockguard.
func isGuardDenial(err error, guard string) bool {
	return err != nil && apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), fmt.Sprintf(`admission webhook "%s.lockguard.core.navique.com" denied the request: `, guard))
}

// retire ends an episode: it checks the child a last time, deletes the
// Lock, and from then on deletes the namespace (which must go through).
func (b *bigWorker) retire(ctx context.Context, e *episode) {
	if !b.checkChild(ctx, e) {
		return
	}
	if e.lock != "" {
		err := b.c.Delete(ctx, &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.lock}})
		if err != nil && !apierrors.IsNotFound(err) {
			return // Retried at the next step.
		}
		b.n.lockDeletes.Add(1)
		e.lock, e.childUID, e.unlockedAt = "", "", time.Now()
	}
	b.deleteNamespace(ctx, e, false)
}

// drop removes e from the live episodes; deleted: its namespace's delete
// was allowed, and it must go.
func (b *bigWorker) drop(e *episode, deleted bool) {
	for i, o := range b.episodes {
		if o == e {
			b.episodes = append(b.episodes[:i], b.episodes[i+1:]...)
			break
		}
	}
	if deleted {
		b.deleted = append(b.deleted, e.ns)
	}
}

// ensureCRD creates the CRD of a namespaced kind served as v1 if it does not
// exist, and reports whether the kind is served.
func (b *bigWorker) ensureCRD(ctx context.Context, gvk schema.GroupVersionKind) bool {
	name := crdName(gvk)
	crd := framework.CRD(name)
	err := b.c.Get(ctx, client.ObjectKey{Name: name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		plural := strings.ToLower(gvk.Kind) + "s"
		crd = &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{
				"group": gvk.Group,
				"names": map[string]any{"kind": gvk.Kind, "listKind": gvk.Kind + "List", "plural": plural, "singular": strings.ToLower(gvk.Kind)},
				"scope": "Namespaced",
				"versions": []any{map[string]any{
					"name": gvk.Version, "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				}},
			},
		}}
		crd.SetGroupVersionKind(framework.CRDGVK)
		crd.SetName(name)
		if err := b.c.Create(ctx, crd); err != nil {
			return false
		}
		if gvk == widgetGVK {
			b.b.widgetCRDCreates.Add(1)
		} else {
			b.b.gadgetCreates.Add(1)
		}
	case err != nil:
		return false
	case crd.GetDeletionTimestamp() != nil:
		return false // Still going.
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return b.c.List(ctx, list, client.InNamespace(b.widget.ns), client.Limit(1)) == nil
}

// widgetStep keeps a ChaosWidget locked, and deletes its CRD once the Lock
// is active: the delete must be denied, and the widget must stay.
func (b *bigWorker) widgetStep(ctx context.Context) {
	s := &b.widget
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	if !b.ensureCRD(ctx, widgetGVK) {
		return
	}
	uid, ok := b.read(ctx, object(widgetGVK, s.ns, "w"))
	if !ok {
		return
	}
	if s.uid != "" && s.acked && uid != s.uid {
		b.violation(s.lastKind, "ChaosWidget %s/w (uid %s) is gone while Lock keep-w protected it; the last request that could have removed it: %s", s.ns, s.uid, s.lastKind)
		s.uid = ""
	}
	if uid == "" {
		w := object(widgetGVK, s.ns, "w")
		w.Object["spec"] = map[string]any{"size": int64(1)}
		if err := b.c.Create(ctx, w); err != nil {
			return
		}
		uid = w.GetUID()
		s.active, s.since = false, time.Now()
	}
	if !s.acked {
		lock := &lockv1alpha1.Lock{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "keep-w"},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind, Name: "w"}, Reason: "chaos: CRD deletes"},
		}
		if err := b.c.Create(ctx, lock); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
		s.acked, s.since = true, time.Now()
		b.n.lockCreates.Add(1)
	}
	// The Lock exists and nothing deleted the widget since: it must stay.
	s.uid = uid
	if !s.active {
		if !b.waitActive {
			s.active = true
		} else {
			var l lockv1alpha1.Lock
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "keep-w"}, &l); err != nil || !l.Status.Active {
				if time.Since(s.since) > activeWithin {
					b.b.notActive.Add(1)
					b.logf("big deletes: Lock %s/keep-w not active %s after its target's create", s.ns, activeWithin)
					s.since = time.Now()
				}
				return
			}
			s.active = true
		}
	}
	k := &b.n.byKind[kindCRD]
	k.sent.Add(1)
	k.locked.Add(1)
	s.lastKind = kindCRD
	err := b.c.Delete(ctx, framework.CRD(crdName(widgetGVK)))
	switch {
	case err == nil:
		k.allowed.Add(1)
		b.violation(kindCRD, "the delete of CRD %s was allowed while Lock %s/keep-w (active) protected ChaosWidget w (uid %s)", crdName(widgetGVK), s.ns, s.uid)
		s.uid = "" // Counted once; the CRD and the widget go, and are created again.
	case isGuardDenial(err, "crd"):
		k.denied.Add(1)
	default:
		k.errors.Add(1)
	}
	if s.uid != "" {
		if uid, ok := b.read(ctx, object(widgetGVK, s.ns, "w")); ok && uid != s.uid {
			b.violation(kindCRD, "ChaosWidget %s/w (uid %s) is gone after a denied CRD delete, while Lock keep-w protected it", s.ns, s.uid)
			s.uid = ""
		}
	}
}

// gadgetStep creates the ChaosGadget CRD and an object of it, or deletes
// the CRD: no Lock ever targets a gadget, so the delete must go through.
func (b *bigWorker) gadgetStep(ctx context.Context) {
	name := crdName(gadgetGVK)
	crd := framework.CRD(name)
	err := b.c.Get(ctx, client.ObjectKey{Name: name}, crd)
	if apierrors.IsNotFound(err) || (err == nil && crd.GetDeletionTimestamp() == nil && !b.hasGadget(ctx)) {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.widget.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
		if b.ensureCRD(ctx, gadgetGVK) {
			g := object(gadgetGVK, b.widget.ns, "g")
			g.Object["spec"] = map[string]any{"size": int64(1)}
			_ = b.c.Create(ctx, g)
		}
		return
	}
	if err != nil || crd.GetDeletionTimestamp() != nil {
		return
	}
	b.deleteGadgetCRD(ctx)
}

// hasGadget reports whether the gadget object exists.
func (b *bigWorker) hasGadget(ctx context.Context) bool {
	uid, ok := b.read(ctx, object(gadgetGVK, b.widget.ns, "g"))
	return ok && uid != ""
}

// deleteGadgetCRD deletes the ChaosGadget CRD, and returns whether that
// went through (or it was gone).
func (b *bigWorker) deleteGadgetCRD(ctx context.Context) bool {
	k := &b.n.byKind[kindCRD]
	k.sent.Add(1)
	b.b.gadgetDeletes.Add(1)
	err := b.c.Delete(ctx, framework.CRD(crdName(gadgetGVK)))
	switch {
	case err == nil || apierrors.IsNotFound(err):
		b.b.gadgetAllowed.Add(1)
		return true
	case isGuardDenial(err, "crd"):
		b.n.staleDenials.Add(1)
	default:
		k.errors.Add(1)
	}
	return false
}

// settle retires every episode and deletes the ChaosGadget CRD, until
// that all went through or ctx ends, then waits for every namespace whose
// delete was allowed to be gone. It returns what is left.
func (b *bigWorker) settle(ctx context.Context) []string {
	for ctx.Err() == nil && len(b.episodes) > 0 {
		for _, e := range append([]*episode(nil), b.episodes...) {
			b.retire(ctx, e)
		}
		if len(b.episodes) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	gadgetGone := false
	for ctx.Err() == nil && !gadgetGone {
		if gadgetGone = b.deleteGadgetCRD(ctx); !gadgetGone {
			time.Sleep(500 * time.Millisecond)
		}
	}
	var left []string
	for _, e := range b.episodes {
		left = append(left, fmt.Sprintf("namespace %s: its delete never went through", e.ns))
	}
	if !gadgetGone {
		left = append(left, fmt.Sprintf("CRD %s: its delete never went through", crdName(gadgetGVK)))
	}
	for _, ns := range b.deleted {
		for {
			err := b.c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				left = append(left, fmt.Sprintf("namespace %s: deleted, still there (last error %v)", ns, err))
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return left
}

// audit checks the locked objects once more: the episodes' children and
// the widget. It returns false when the API server did not answer.
func (b *bigWorker) audit(ctx context.Context) bool {
	for _, e := range b.episodes {
		if !b.checkChild(ctx, e) {
			return false
		}
	}
	s := &b.widget
	if s.uid == "" {
		return true
	}
	uid, ok := b.read(ctx, object(widgetGVK, s.ns, "w"))
	if ok && uid != s.uid {
		b.violation(s.lastKind, "ChaosWidget %s/w (uid %s) is gone at the last check while Lock keep-w protected it", s.ns, s.uid)
		s.uid = ""
	}
	return ok
}

// namespaces returns every namespace the worker created.
func (b *bigWorker) namespaces() []string {
	out := []string{b.widget.ns}
	for _, e := range b.episodes {
		out = append(out, e.ns)
	}
	return append(out, b.deleted...)
}

// summary is the summary's line of the bigWorker's own counts.
func (b *bigWorker) summary() string {
	c := b.b
	return fmt.Sprintf("chaos: namespaces, CRDs and owners: %d scratch namespaces (%d with a Lock on the owned child, %d with a Lock on a missing object, %d with none; %d Locks never active within %s); deletes of namespaces without a Lock on an existing object %d (%d went through, %d denied by a Lock just deleted, %d errors; slowest went through %s after its Lock's delete; %d namespaces deleted, all checked gone after settling); CRD %s (never locked) deleted %d times of %d tries, created %d times; CRD %s (locked) created %d times; %d admission warnings received (rule 14: a namespace whose Locks all target missing objects, an Orphan owner delete with locked dependents)",
		c.episodes.Load(), c.lockedEpisodes.Load(), c.missingEpisodes.Load(), c.bareEpisodes.Load(), c.notActive.Load(), activeWithin,
		c.nsFreeSent.Load(), c.nsFreeAllowed.Load(), c.nsFreeDenied.Load(), c.nsFreeErrors.Load(), time.Duration(c.nsFreeWait.Load()).Round(100*time.Millisecond), len(b.deleted),
		crdName(gadgetGVK), c.gadgetAllowed.Load(), c.gadgetDeletes.Load(), c.gadgetCreates.Load(), crdName(widgetGVK), c.widgetCRDCreates.Load(), c.warnings.Load())
}
