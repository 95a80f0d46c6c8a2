package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/eventnote"
)

// namespaceLookup bounds how long an Event's write waits to learn whether
// its namespace is live.
const namespaceLookup = 5 * time.Second

// eventRecorder is the recorder of every Event lockguard records: what
// controller-runtime's GetEventRecorder would build (an events.k8s.io
// broadcaster, started at the first Event, stopped with the manager, its
// Events logged at V(1)), but writing through eventnote.Sink, so that no
// Event goes to a namespace that is gone or terminating. The manager's
// own recorder takes no sink.
type eventRecorder struct {
	events.EventRecorder
	broadcaster events.EventBroadcaster
	start       sync.Once
	ctx         context.Context
	stop        context.CancelFunc
}

// newEventRecorder returns lockguard's Event recorder for mgr, added to
// it to be stopped with it. With watchNamespaces (the namespace guard on:
// the reconciler watches the namespaces' metadata, and the chart grants
// it), it reads whether an Event's namespace is live from the cache, and
// watches the namespaces on every replica for it; without, from the API
// server alone: a cache of namespaces that lockguard may not list would
// never sync, and the manager's controllers wait for every informer of
// its cache (e2e/chart's TestUpgradeFromPreviousChart runs the binary
// under the RBAC of a chart without the guard).
func newEventRecorder(ctx context.Context, mgr ctrl.Manager, watchNamespaces bool) (*eventRecorder, error) {
	cl, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the Events client: %w", err)
	}
	var cached client.Reader
	if watchNamespaces {
		if _, err := mgr.GetCache().GetInformer(ctx, controller.NamespaceObject(""), cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("watching namespaces: %w", err)
		}
		cached = mgr.GetCache()
	}
	live := namespaceLive(cached, mgr.GetAPIReader())
	b := events.NewBroadcaster(eventnote.Sink(&events.EventSinkImpl{Interface: cl}, live))
	r := &eventRecorder{EventRecorder: b.NewRecorder(mgr.GetScheme(), "lockguard"), broadcaster: b}
	r.ctx, r.stop = context.WithCancel(log.IntoContext(context.Background(), mgr.GetLogger().WithName("events")))
	if err := mgr.Add(r); err != nil {
		return nil, fmt.Errorf("adding the Event recorder: %w", err)
	}
	return r, nil
}

// Eventf records an Event, starting the broadcaster's writes first.
func (r *eventRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.start.Do(func() {
		logger := log.FromContext(r.ctx)
		if err := r.broadcaster.StartRecordingToSinkWithContext(r.ctx); err != nil {
			logger.Error(err, "Cannot record Events")
		}
		if _, err := r.broadcaster.StartLogging(logger.V(1)); err != nil {
			logger.Error(err, "Cannot log Events")
		}
	})
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Start waits for ctx, then stops the broadcaster: Events not written yet
// are dropped, as controller-runtime's recorder drops them.
func (r *eventRecorder) Start(ctx context.Context) error {
	<-ctx.Done()
	r.stop()
	r.broadcaster.Shutdown()
	return nil
}

// NeedLeaderElection is false: every replica records the Events of its
// webhook.
func (r *eventRecorder) NeedLeaderElection() bool { return false }

// namespaceLive tells eventnote.Sink whether a namespace exists and is not
// terminating: from cached (nil for none), and, for a namespace the cache
// does not hold (deleted, or created a moment ago), from the API server, a
// read rather than two refused writes. What it cannot learn within
// namespaceLookup counts as live: the API server judges the write.
func namespaceLive(cached, api client.Reader) func(context.Context, string) bool {
	return func(ctx context.Context, ns string) bool {
		if ns == "" {
			return true
		}
		ctx, cancel := context.WithTimeout(ctx, namespaceLookup)
		defer cancel()
		obj := controller.NamespaceObject(ns)
		var err error = apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
		if cached != nil {
			err = cached.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		if apierrors.IsNotFound(err) {
			err = api.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		switch {
		case apierrors.IsNotFound(err):
			return false
		case err != nil:
			return true
		}
		return obj.DeletionTimestamp == nil
	}
}
