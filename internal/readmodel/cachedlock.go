package readmodel

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// CachedLock is what lockguard's cache keeps of a Lock (CacheTransform):
// what trimLock keeps of it, in a form of its own (issue 38: a
// lockv1alpha1.Lock is 464 bytes before its strings and slices, most of
// its metadata fields empty in the cache). Its UID and resourceVersion are
// kept as numbers when they have the usual form (a UUID in lower case, a
// decimal), its timestamps as nanoseconds, its level and enforcement as
// codes, its Ready condition inline when it is its only one, its scope not
// at all when it is the one the spec gives (Lock.ScopeString), and its
// status.protected.resources not at all when they name its target alone;
// apiVersion and kind are not kept when they are lockguard's. What few
// Locks carry (an expiry, a deletionTimestamp, lastDenied and the other
// records of refused requests, several conditions, a value of an unusual
// form) is behind one pointer.
//
// A CachedLock is read-only, as every object of the cache, and reads as
// the lockv1alpha1.Lock trimLock leaves (Lock,
// DeepCopyObject): a cached client's Get and List of Locks answer with
// such copies, the controller's Lock source converts it (AsLock) before
// its handlers see it, and the LockIndex's reads decide from its fields
// and copy only the Locks they return. Its metav1.Object setters change
// the metadata fields it keeps; setting one it does not keep (labels,
// annotations, owner references, finalizers, managedFields) does nothing.
type CachedLock struct {
	name       string
	namespace  string // shared between the Locks of a namespace
	objectIDs         // odd ones in rare
	generation int64
	// created is the creationTimestamp (packTime); when it cannot be, it
	// is rare.created.
	created int64

	// The spec: the target's apiVersion and kind and the reason are
	// shared, the selector is the trimmed Lock's, its matchLabels as
	// requirements (cachedSelector; read-only).
	target   lockv1alpha1.TargetReference
	selector *cachedSelector
	reason   string

	// The status: the Ready condition, when flagReady says it is the only
	// condition, and status.protected, when flagProtected says there is
	// one (its resources are the target alone with flagProtectedTarget).
	observedGeneration int64
	ready              readyCondition
	protected          []lockv1alpha1.ProtectedResource
	protectedCount     int32

	level, enforcement uint8 // codes (levels, enforcements); codeRare: rare's
	readyStatus        uint8 // the Ready condition's status, a code (conditionStatuses)
	flags              lockFlags
	rare               *lockRare
}

// readyCondition is a Lock's Ready condition, kept inline: its type is
// lockv1alpha1.ConditionReady, its status a code (CachedLock.readyStatus:
// outside, where it takes no room of its own), its lastTransitionTime
// packed (packTime); reason and message shared as trimLock shares
// them.
type readyCondition struct {
	observedGeneration int64
	transition         int64
	reason, message    string
}

// lockFlags say which form a CachedLock's fields have.
type lockFlags uint8

const (
	// flagTypeMeta: apiVersion and kind are lockguard's Lock's; otherwise
	// they are rare's (empty without rare).
	flagTypeMeta lockFlags = 1 << iota
	// flagReady: status.conditions is the Ready condition alone, inline;
	// otherwise it is rare's (nil without rare).
	flagReady
	// flagScope: status.scope is Lock.ScopeString; otherwise it is rare's
	// (empty without rare).
	flagScope
	// flagProtected: status.protected is set.
	flagProtected
	// flagProtectedTarget: status.protected.resources is the target alone
	// (its kind and name).
	flagProtectedTarget
	// flagCreatedRare: the creationTimestamp is rare's.
	flagCreatedRare
	// flagActive: status.active is true.
	flagActive
	// flagActiveMessage: the inline Ready condition's message is the
	// Lock's lockv1alpha1.Lock.ActiveMessage, not kept (ready.message is
	// empty): it repeats the spec, and was the largest string of a Lock.
	flagActiveMessage
)

// lockRare holds what few Locks of the cache have: metadata fields rarely
// set, a UID, resourceVersion, timestamp, level or enforcement of an
// unusual form, an expiry, a scope other than the spec's, conditions other
// than a Ready one alone, and the records of refused requests.
type lockRare struct {
	apiVersion, kind       string
	generateName, selfLink string
	oddIDs
	created                    metav1.Time
	deletionTimestamp          *metav1.Time
	deletionGracePeriodSeconds *int64
	level                      lockv1alpha1.LockLevel
	enforcement                lockv1alpha1.Enforcement
	expiresAt                  *metav1.Time
	scope                      string
	conditions                 []metav1.Condition
	lastDenied                 *lockv1alpha1.DeniedRequest
	lastWouldDeny              *lockv1alpha1.DeniedRequest
	lastException              *lockv1alpha1.DeniedRequest
}

// codeRare is the code of a level, enforcement or condition status not in
// its table: the value is rare's.
const codeRare = 0xff

// The values a code stands for, by code.
var (
	levels            = []lockv1alpha1.LockLevel{"", lockv1alpha1.LevelCanNotDelete, lockv1alpha1.LevelReadOnly}
	enforcements      = []lockv1alpha1.Enforcement{"", lockv1alpha1.EnforcementEnforce, lockv1alpha1.EnforcementAudit}
	conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
)

var (
	_ metav1.Object  = (*CachedLock)(nil)
	_ runtime.Object = (*CachedLock)(nil)
)

// newCachedLock returns the CachedLock of o, a Lock as trimLock leaves
// it (its strings shared, its labels and the rest dropped): it takes o's
// strings, selector, slices and pointers as they are, and keeps nothing
// else of o.
func newCachedLock(o *lockv1alpha1.Lock) *CachedLock {
	c := &CachedLock{name: o.Name, namespace: o.Namespace, generation: o.Generation,
		target: o.Spec.TargetRef, selector: newCachedSelector(o.Spec.Selector), reason: o.Spec.Reason,
		observedGeneration: o.Status.ObservedGeneration}
	if o.TypeMeta == lockTypeMeta {
		c.flags |= flagTypeMeta
	} else if o.APIVersion != "" || o.Kind != "" {
		c.more().apiVersion, c.more().kind = o.APIVersion, o.Kind
	}
	if o.GenerateName != "" || o.SelfLink != "" {
		c.more().generateName, c.more().selfLink = o.GenerateName, o.SelfLink
	}
	c.SetUID(o.UID)
	c.SetResourceVersion(o.ResourceVersion)
	c.SetCreationTimestamp(o.CreationTimestamp)
	c.SetDeletionTimestamp(o.DeletionTimestamp)
	c.SetDeletionGracePeriodSeconds(o.DeletionGracePeriodSeconds)
	var ok bool
	if c.level, ok = code(levels, o.Spec.Level); !ok {
		c.more().level = o.Spec.Level
	}
	if c.enforcement, ok = code(enforcements, o.Spec.Enforcement); !ok {
		c.more().enforcement = o.Spec.Enforcement
	}
	if o.Spec.ExpiresAt != nil {
		c.more().expiresAt = o.Spec.ExpiresAt
	}
	c.packStatus(o)
	return c
}

// lockTypeMeta is the apiVersion and kind of a Lock.
var lockTypeMeta = metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"}

// packStatus keeps the status of o.
func (c *CachedLock) packStatus(o *lockv1alpha1.Lock) {
	s := &o.Status
	if s.Active {
		c.flags |= flagActive
	}
	if s.Scope != "" {
		// The spec's own selector (o's), as Lock shows it: core's shows
		// its matchLabels as requirements (cachedSelector).
		if s.Scope == o.ScopeString() {
			c.flags |= flagScope
		} else {
			c.more().scope = s.Scope
		}
	}
	if r, status, ok := inlineReady(s.Conditions); ok {
		c.ready, c.readyStatus, c.flags = r, status, c.flags|flagReady
		if core := c.core(); r.reason == lockv1alpha1.ReasonActive && core.Namespace != "" && r.message == core.ActiveMessage() {
			c.ready.message, c.flags = "", c.flags|flagActiveMessage
		}
	} else if s.Conditions != nil {
		c.more().conditions = s.Conditions
	}
	if p := s.Protected; p != nil {
		c.flags |= flagProtected
		c.protectedCount = p.Count
		if len(p.Resources) == 1 && p.Resources[0] == (lockv1alpha1.ProtectedResource{Kind: c.target.Kind, Name: c.target.Name}) {
			c.flags |= flagProtectedTarget
		} else {
			c.protected = p.Resources
		}
	}
	if s.LastDenied != nil || s.LastWouldDeny != nil || s.LastException != nil {
		r := c.more()
		r.lastDenied, r.lastWouldDeny, r.lastException = s.LastDenied, s.LastWouldDeny, s.LastException
	}
}

// inlineReady returns conds as a readyCondition, and the code of its
// status, when they are one Ready condition whose status has a code and
// whose lastTransitionTime packs.
func inlineReady(conds []metav1.Condition) (readyCondition, uint8, bool) {
	if len(conds) != 1 || conds[0].Type != lockv1alpha1.ConditionReady {
		return readyCondition{}, 0, false
	}
	c := conds[0]
	status, ok := code(conditionStatuses, c.Status)
	transition, packed := packTime(c.LastTransitionTime)
	if !ok || !packed {
		return readyCondition{}, 0, false
	}
	return readyCondition{observedGeneration: c.ObservedGeneration, transition: transition, reason: c.Reason, message: c.Message}, status, true
}

// code returns the index of v in table, or codeRare and false.
func code[T comparable](table []T, v T) (uint8, bool) {
	if i := slices.Index(table, v); i >= 0 {
		return uint8(i), true
	}
	return codeRare, false
}

// packTime returns t as nanoseconds since the Unix epoch, 0 for the zero
// time, when unpackTime gives t back exactly (a time as decoded: in the
// local zone, without monotonic reading); false otherwise.
func packTime(t metav1.Time) (int64, bool) {
	if t.Time == (time.Time{}) {
		return 0, true
	}
	n := t.UnixNano()
	return n, n != 0 && time.Unix(0, n) == t.Time
}

// unpackTime returns the time packTime packed as n.
func unpackTime(n int64) metav1.Time {
	if n == 0 {
		return metav1.Time{}
	}
	return metav1.Time{Time: time.Unix(0, n)}
}

// core returns the Lock c stands for as far as the LockIndex's decisions
// read it: its name, namespace, deletionTimestamp and spec (the cache's
// selector and expiry: read-only; the selector's matchLabels as
// requirements, cachedSelector), and nothing else. It allocates nothing
// when its result does not escape.
func (c *CachedLock) core() lockv1alpha1.Lock {
	l := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace}, Spec: lockv1alpha1.LockSpec{
		TargetRef: c.target, Selector: c.selector.decided(), Reason: c.reason,
		Level: levels[0], Enforcement: enforcements[0],
	}}
	if c.level != codeRare {
		l.Spec.Level = levels[c.level]
	}
	if c.enforcement != codeRare {
		l.Spec.Enforcement = enforcements[c.enforcement]
	}
	if r := c.rare; r != nil {
		l.DeletionTimestamp, l.Spec.ExpiresAt = r.deletionTimestamp, r.expiresAt
		if c.level == codeRare {
			l.Spec.Level = r.level
		}
		if c.enforcement == codeRare {
			l.Spec.Enforcement = r.enforcement
		}
	}
	return l
}

// Lock returns the Lock c stands for, as trimLock left it,
// as a new lockv1alpha1.Lock that shares nothing with c but strings.
func (c *CachedLock) Lock() *lockv1alpha1.Lock {
	l := c.core()
	if c.flags&flagTypeMeta != 0 {
		l.TypeMeta = lockTypeMeta
	}
	l.UID, l.ResourceVersion, l.Generation = c.GetUID(), c.GetResourceVersion(), c.generation
	l.CreationTimestamp = c.GetCreationTimestamp()
	l.Spec.Selector = c.selector.selector()
	l.Spec.ExpiresAt = l.Spec.ExpiresAt.DeepCopy()
	l.DeletionTimestamp = l.DeletionTimestamp.DeepCopy()
	s := &l.Status
	s.Active, s.ObservedGeneration = c.flags&flagActive != 0, c.observedGeneration
	if c.flags&flagScope != 0 {
		s.Scope = l.ScopeString()
	}
	if c.flags&flagReady != 0 {
		s.Conditions = []metav1.Condition{c.readyCondition()}
	}
	if c.flags&flagProtected != 0 {
		s.Protected = &lockv1alpha1.ProtectedStatus{Count: c.protectedCount, Resources: slices.Clone(c.protected)}
		if c.flags&flagProtectedTarget != 0 {
			s.Protected.Resources = []lockv1alpha1.ProtectedResource{{Kind: c.target.Kind, Name: c.target.Name}}
		}
	}
	if r := c.rare; r != nil {
		if c.flags&flagTypeMeta == 0 {
			l.APIVersion, l.Kind = r.apiVersion, r.kind
		}
		l.GenerateName, l.SelfLink = r.generateName, r.selfLink
		if r.deletionGracePeriodSeconds != nil {
			l.DeletionGracePeriodSeconds = ptr.To(*r.deletionGracePeriodSeconds)
		}
		if c.flags&flagScope == 0 {
			s.Scope = r.scope
		}
		if r.conditions != nil {
			s.Conditions = make([]metav1.Condition, len(r.conditions))
			for i := range r.conditions {
				r.conditions[i].DeepCopyInto(&s.Conditions[i])
			}
		}
		s.LastDenied, s.LastWouldDeny, s.LastException = r.lastDenied.DeepCopy(), r.lastWouldDeny.DeepCopy(), r.lastException.DeepCopy()
	}
	return &l
}

// readyCondition returns the Ready condition c keeps inline (flagReady),
// its message made again when c does not keep it (flagActiveMessage).
func (c *CachedLock) readyCondition() metav1.Condition {
	r := c.ready
	if c.flags&flagActiveMessage != 0 {
		l := c.core()
		r.message = l.ActiveMessage()
	}
	return metav1.Condition{Type: lockv1alpha1.ConditionReady, Status: conditionStatuses[c.readyStatus],
		ObservedGeneration: r.observedGeneration, LastTransitionTime: unpackTime(r.transition), Reason: r.reason, Message: r.message}
}

// AsLock returns obj as a lockv1alpha1.Lock when it is a *CachedLock (a
// copy, CachedLock.Lock), a client-go tombstone of one likewise, and obj
// itself otherwise.
func AsLock(obj any) any {
	switch o := obj.(type) {
	case *CachedLock:
		return o.Lock()
	case toolscache.DeletedFinalStateUnknown:
		if c, ok := o.Obj.(*CachedLock); ok {
			o.Obj = c.Lock()
		}
		return o
	}
	return obj
}

// DeepCopyObject returns the lockv1alpha1.Lock c stands for (Lock): what
// a cached client's reads copy into the caller's object.
func (c *CachedLock) DeepCopyObject() runtime.Object { return c.Lock() }

// GetObjectKind returns an empty kind: a CachedLock keeps its kind only to
// give it back in Lock (its informer has one).
func (c *CachedLock) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// more returns c.rare, made if c has none.
func (c *CachedLock) more() *lockRare {
	if c.rare == nil {
		c.rare = &lockRare{}
	}
	return c.rare
}
