package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

// EntryWatch watches lockguard's ValidatingWebhookConfiguration (one
// object, by name) and reports the state of its Lock-create entry to a
// Tracker (SetCreateEntry) at every change. Peers runs it on every
// replica (New).
//
// The watch shows every write of the configuration unless it breaks; a
// relist then shows only the last state. Writes the watch missed show as
// a generation that grew by more than one (the API server adds one at
// each write that changes the webhooks) or a new UID (deleted and
// created again): those count as a change, so the replica holds off for
// the TTL even when the entry it finds is valid.
//
// It watches the Lock-create entry alone, not the update guard's entries
// (update. and subresource.lockguard.core.navique.com) nor the delete
// guards': only the create entry backs a proof the replica decides from
// (every Lock create was announced to it, so its cache lacks no Lock),
// and only there has the replica a safe fallback while the entry is
// relaxed (confirming with the API server). An update the API server no
// longer sends is one no replica can refuse, whatever it watches
// (docs/limits.md, ReadOnly).
type EntryWatch struct {
	t    *Tracker
	lw   cache.ListerWatcher
	name string
	want Expectation

	valid prometheus.GaugeFunc

	// mu serializes the reads of the informer's store and what follows.
	mu sync.Mutex
	// seen, uid and generation: the configuration last observed.
	seen       bool
	uid        types.UID
	generation int64
	// last is the verdict last reported; reported: one was.
	last     error
	reported bool
}

// entryListWatch lists and watches the ValidatingWebhookConfiguration
// name through cs, and no other.
func entryListWatch(cs kubernetes.Interface, name string) cache.ListerWatcher {
	// A field selector on the name: the RBAC rule can then name the
	// object (resourceNames) for list and watch too.
	return cache.NewListWatchFromClient(cs.AdmissionregistrationV1().RESTClient(), "validatingwebhookconfigurations", "",
		fields.OneTermEqualSelector("metadata.name", name))
}

// newEntryWatch returns the watch of the ValidatingWebhookConfiguration
// name through lw, whose Lock-create entry must be as want says, and
// makes t require the entry (RequireCreateEntry).
func newEntryWatch(lw cache.ListerWatcher, name string, want Expectation, t *Tracker) *EntryWatch {
	t.RequireCreateEntry()
	w := &EntryWatch{t: t, lw: lw, name: name, want: want}
	w.valid = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockguard_create_entry_valid",
		Help: "1 while the Lock-create entry (" + CreateEntryName + ") of lockguard's ValidatingWebhookConfiguration sends every Lock create to lockguard with failurePolicy Fail, as the chart renders it; 0 while it is missing, relaxed or not yet observed (the replica is then cold, and stays cold for the pending TTL once it is valid again).",
	}, func() float64 {
		if observed, err := t.CreateEntry(); observed && err == nil {
			return 1
		}
		return 0
	})
	return w
}

// Start watches the configuration until ctx ends.
func (w *EntryWatch) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("create-entry").WithValues("validatingWebhookConfiguration", w.name, "webhook", CreateEntryName, "want", w.want.String())
	ctx = ctrl.LoggerInto(ctx, log)
	var store cache.Store
	// Level-based: each call reads the store, which the informer updates
	// before it calls a handler, under w.mu, so the last call to take
	// w.mu reports the latest state.
	update := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		obj, exists, err := store.GetByKey(w.name)
		var vwc *admissionregistrationv1.ValidatingWebhookConfiguration
		if err == nil && exists {
			vwc, _ = obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		}
		w.observeLocked(ctx, vwc)
	}
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: w.lw,
		ObjectType:    &admissionregistrationv1.ValidatingWebhookConfiguration{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { update() },
			UpdateFunc: func(any, any) { update() },
			DeleteFunc: func(any) { update() },
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		// Synced with no object: no handler ran.
		update()
	}
	<-done
	return nil
}

// errUnobserved is the state reported for writes the watch missed.
var errUnobserved = errors.New("the configuration was written while the watch was broken")

// observeLocked reports vwc (nil: it does not exist) to the Tracker,
// logging each change of the verdict once. w.mu is held.
func (w *EntryWatch) observeLocked(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
	log := ctrl.LoggerFrom(ctx)
	err := CheckCreateEntry(vwc, w.want)
	if vwc != nil {
		if err == nil && w.seen && w.last == nil && (vwc.UID != w.uid || vwc.Generation > w.generation+1) {
			// A write in between may have relaxed the entry.
			gap := fmt.Errorf("%w (generation %d, uid %s, then generation %d, uid %s)", errUnobserved, w.generation, w.uid, vwc.Generation, vwc.UID)
			log.Error(gap, "The Lock-create webhook entry may have changed unobserved: this replica confirms every delete its cache would allow with the API server for the pending TTL")
			w.t.SetCreateEntry(gap)
			w.last = gap
		}
		w.seen, w.uid, w.generation = true, vwc.UID, vwc.Generation
	}
	w.t.SetCreateEntry(err)
	switch {
	case err != nil && (w.last == nil || w.last.Error() != err.Error()):
		log.Error(err, "The Lock-create webhook entry is not as the chart renders it: Lock creates may bypass lockguard, so this replica confirms every delete its cache would allow with the API server until the entry is restored, and for the pending TTL after")
	case err == nil && w.last != nil:
		log.Info("The Lock-create webhook entry is valid again: this replica stays cold for the pending TTL, then lists the Locks and decides from its cache again")
	case err == nil && !w.reported:
		log.Info("The Lock-create webhook entry is valid")
	}
	w.last, w.reported = err, true
}

// createEntry is what a Tracker knows of the Lock-create entry: whether
// it must be valid for the replica to be warm (RequireCreateEntry),
// whether it has been observed yet, and the last verdict of
// CheckCreateEntry on it.
type createEntry struct {
	required, observed bool
	err                error
}

// RequireCreateEntry makes the replica warm only while the Lock-create
// entry is known valid (SetCreateEntry): cold until the first report and
// while the last one is an error. Call it before the Tracker is used;
// without it, the entry is trusted.
func (t *Tracker) RequireCreateEntry() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entry.required = true
}

// entryValidLocked reports whether the entry lets the replica be warm.
func (t *Tracker) entryValidLocked() bool {
	return !t.entry.required || (t.entry.observed && t.entry.err == nil)
}

// SetCreateEntry records the state of the Lock-create entry, as the
// watcher of lockguard's ValidatingWebhookConfiguration last saw it: nil
// when CheckCreateEntry passes, the difference otherwise (a missing
// configuration or entry is an error). With RequireCreateEntry, the
// replica is cold until the first call and while the last call's err is
// not nil. When the entry turns valid again after an error, a Lock create
// may have been admitted without lockguard meanwhile: the replica stays
// cold for TTL (such a create has reached etcd or never will by then),
// then lists every Lock, as after a lost create. The first observation
// needs no hold-off: newTracker holds off for TTL from the start already
// (a Standalone replica assumes, as it does of other replicas, that no
// Lock create bypassed it before it started).
func (t *Tracker) SetCreateEntry(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil && t.entry.observed && t.entry.err != nil {
		t.lostLocked(t.cfg.Now())
	}
	t.entry.observed, t.entry.err = true, err
}

// CreateEntry returns whether SetCreateEntry has been called, and the
// state it last recorded.
func (t *Tracker) CreateEntry() (observed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entry.observed, t.entry.err
}
