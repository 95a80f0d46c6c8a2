package readmodel

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// LabelKeys are the label keys that the cache keeps of a namespaced
// object (CacheTransform): ReadOnlyLabel and ProtectedLabel, which
// lockguard writes, and the keys that the selectors of the selector Locks
// of its namespace read. Of every other label of a namespaced object the
// cache keeps nothing (issue 38: an object's labels of its own were about
// 26 of the 148 bytes it cost, BenchmarkCacheHeapOwnLabels).
//
// The keys of a Lock are added as its informer transforms it, before the
// Lock index holds it, and stay until the process ends (a key costs its
// string; dropping one would need the same refresh as adding it). The
// metadata informers list once the Lock informer has synced (their lists
// and watches wait: NewInformerFunc), so what they store first carries
// every key of the Locks then. A key added later is missing from the
// objects the metadata informers already hold in its namespace: until
// each has stored them again (cachestore.Informer.RefreshNamespace, a
// list of that namespace), Complete reports the namespace incomplete, and
// whatever decides from cached labels there (the cascade guard, a
// selector Lock's pass) reads the API server or waits.
//
// A nil *LabelKeys keeps every label (as the cache did before). Safe for
// concurrent use.
type LabelKeys struct {
	mu         sync.RWMutex
	namespaces map[string]*namespaceKeys
	// informers are the metadata informers, weakly: one the cache has
	// dropped (the kind of a selector ClusterLock no longer live, a CRD
	// deleted) is not kept for its sake.
	informers  []weak.Pointer[cachestore.Informer]
	synced     chan struct{} // closed once the Lock informer has synced
	syncedOnce sync.Once
	running    atomic.Int32  // refreshes running (tests: refreshing)
	slots      chan struct{} // refreshes listing at once
	// retry is the first wait after a failed refresh, doubling to a
	// minute.
	retry time.Duration
}

// namespaceKeys are a namespace's keys: sorted and read-only (replaced
// when one is added), and the generation of its keys (want, one more each
// time keys are added once the Lock informer has synced) that its
// objects have been refreshed to (done).
type namespaceKeys struct {
	keys       []string
	want, done int
	refreshing bool
}

// refreshSlots is how many namespaces are listed again at once: a burst
// of selector Locks on new keys in many namespaces lists them a few at a
// time.
const refreshSlots = 4

// ownLabels are the labels lockguard writes on namespaced objects and
// reads back from the cache: kept whatever the Locks.
var ownLabels = []string{lockv1alpha1.ProtectedLabel, lockv1alpha1.ReadOnlyLabel}

// NewLabelKeys returns the LabelKeys of a cache whose Lock informer has
// not synced yet.
func NewLabelKeys() *LabelKeys {
	return &LabelKeys{namespaces: map[string]*namespaceKeys{}, synced: make(chan struct{}), slots: make(chan struct{}, refreshSlots), retry: time.Second}
}

// labelsOf returns, of the labels l of an object of namespace ns, those
// the cache keeps; nil for none, l itself when it holds nothing else.
func (k *LabelKeys) labelsOf(ns string, l map[string]string) map[string]string {
	if k == nil || len(l) == 0 {
		return l
	}
	k.mu.RLock()
	var keys []string
	if n := k.namespaces[ns]; n != nil {
		keys = n.keys
	}
	k.mu.RUnlock()
	return keptLabels(l, ownLabels, keys)
}

// keptLabels returns, of the labels l, those whose key one of keys holds:
// nil for none, l itself when it holds nothing else.
func keptLabels(l map[string]string, keys ...[]string) map[string]string {
	keeps := func(key string) bool {
		return slices.ContainsFunc(keys, func(ks []string) bool { return slices.Contains(ks, key) })
	}
	kept := 0
	for key := range l {
		if keeps(key) {
			kept++
		}
	}
	switch kept {
	case len(l):
		return l
	case 0:
		return nil
	}
	out := make(map[string]string, kept)
	for key, v := range l {
		if keeps(key) {
			out[key] = v
		}
	}
	return out
}

// observe adds the keys that l's selector reads to its namespace's, and,
// once the Lock informer has synced, starts a refresh of the namespace
// when one is new.
func (k *LabelKeys) observe(l *lockv1alpha1.Lock) {
	if k == nil || l.Spec.Selector == nil {
		return
	}
	var added []string
	k.mu.RLock()
	n := k.namespaces[l.Namespace]
	for key := range selectorKeys(l.Spec.Selector) {
		if n == nil || !slices.Contains(n.keys, key) {
			added = append(added, key)
		}
	}
	k.mu.RUnlock()
	if len(added) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if n = k.namespaces[l.Namespace]; n == nil {
		n = &namespaceKeys{}
		k.namespaces[l.Namespace] = n
	}
	keys := slices.Clone(n.keys)
	for _, key := range added {
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == len(n.keys) {
		return
	}
	slices.Sort(keys)
	n.keys = keys
	if !k.syncedLocked() {
		// The metadata informers have not listed yet: they list with
		// these keys.
		return
	}
	n.want++
	if !n.refreshing {
		n.refreshing = true
		k.running.Add(1)
		go k.refresh(l.Namespace, n)
	}
}

// selectorKeys yields each label key that s reads, once or more.
func selectorKeys(s *lockv1alpha1.LockSelector) func(func(string) bool) {
	return func(yield func(string) bool) {
		for key := range s.MatchLabels {
			if !yield(key) {
				return
			}
		}
		for _, r := range s.MatchExpressions {
			if !yield(r.Key) {
				return
			}
		}
	}
}

// refresh stores again the objects of namespace ns in every metadata
// informer, until its keys' generation is refreshed, retrying a failed
// refresh (a list the API server refused) after a wait that doubles to a
// minute.
func (k *LabelKeys) refresh(ns string, n *namespaceKeys) {
	defer k.running.Add(-1)
	wait := k.retry
	for {
		k.mu.RLock()
		gen, informers := n.want, slices.Clone(k.informers)
		k.mu.RUnlock()
		var err error
		k.slots <- struct{}{}
		for _, p := range informers {
			if inf := p.Value(); inf != nil && !inf.IsStopped() {
				if err = inf.RefreshNamespace(ns); err != nil {
					break
				}
			}
		}
		<-k.slots
		k.mu.Lock()
		if err == nil {
			n.done = gen
		}
		if n.done == n.want {
			n.refreshing = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		if err != nil {
			time.Sleep(wait)
			wait = min(2*wait, time.Minute)
		}
	}
}

// Complete reports whether the cache holds, of every object of namespace
// ns, the labels that the selector Locks it has transformed read: false
// while a refresh of ns runs. A nil *LabelKeys is always complete.
func (k *LabelKeys) Complete(ns string) bool {
	_, complete := k.Generation(ns)
	return complete
}

// Generation returns the generation of the keys kept of the objects of
// namespace ns (it changes with each key added once the Lock informer
// has synced) and whether its objects carry them all (no refresh of ns
// runs). An object read while complete, at a generation that has not
// changed since, carries every key of the Locks transformed by then: a
// reader asks before it reads the objects, then again after it has read
// the Lock index (a Lock the index held then had its keys added before).
func (k *LabelKeys) Generation(ns string) (gen int, complete bool) {
	if k == nil {
		return 0, true
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := k.namespaces[ns]
	if n == nil {
		return 0, true
	}
	return n.want, n.done == n.want
}

// Keeps reports whether the keys kept of the objects of namespace ns
// include every key that the selectors of locks (Locks of ns) read: a
// Lock the cache has not transformed yet may read one they do not.
func (k *LabelKeys) Keeps(ns string, locks []lockv1alpha1.Lock) bool {
	if k == nil {
		return true
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := k.namespaces[ns]
	for i := range locks {
		if s := locks[i].Spec.Selector; s != nil && locks[i].Namespace == ns {
			for key := range selectorKeys(s) {
				if n == nil || !slices.Contains(n.keys, key) {
					return false
				}
			}
		}
	}
	return true
}

// refreshing returns how many namespaces are being refreshed.
func (k *LabelKeys) refreshing() int {
	if k == nil {
		return 0
	}
	return int(k.running.Load())
}

// watchInformer makes inf one of the metadata informers that a new key
// refreshes, and forgets those gone or stopped.
func (k *LabelKeys) watchInformer(inf *cachestore.Informer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.informers = slices.DeleteFunc(k.informers, func(p weak.Pointer[cachestore.Informer]) bool {
		i := p.Value()
		return i == nil || i.IsStopped()
	})
	k.informers = append(k.informers, weak.Make(inf))
}

// lockInformerSynced is called once the Lock informer has synced: the
// metadata informers may list.
func (k *LabelKeys) lockInformerSynced() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.syncedOnce.Do(func() { close(k.synced) })
}

// syncedLocked reports whether the Lock informer has synced.
func (k *LabelKeys) syncedLocked() bool {
	select {
	case <-k.synced:
		return true
	default:
		return false
	}
}
