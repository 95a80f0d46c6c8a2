package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// DefaultDiscoveryInterval is how often the core.navique.com group is
// rediscovered, by default, for kinds to index and to watch.
const DefaultDiscoveryInterval = 30 * time.Second

// Discovery adds every kind of the core.navique.com group that it finds
// (ServedKind.Watched) to an owner index, at start and then every
// interval, so that kinds whose CRD is installed later are indexed too. It
// is a controller-runtime Runnable on every replica, leader or not: every
// replica's webhook walks cascades over its own owner index.
type Discovery struct {
	kinds    *Kinds
	owners   *OwnerIndex
	interval time.Duration
}

// NewDiscovery returns the discovery that feeds owners from kinds every
// interval (DefaultDiscoveryInterval when not positive).
func NewDiscovery(kinds *Kinds, owners *OwnerIndex, interval time.Duration) *Discovery {
	if interval <= 0 {
		interval = DefaultDiscoveryInterval
	}
	return &Discovery{kinds: kinds, owners: owners, interval: interval}
}

// NeedLeaderElection is false: every replica serves the webhook, which
// reads the owner index.
func (d *Discovery) NeedLeaderElection() bool { return false }

// Start discovers kinds until ctx is done.
func (d *Discovery) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, d.discover, d.interval)
	return nil
}

// discover rereads the group's kinds and adds each to the owner index;
// once every kind found is in it, the index knows the group.
func (d *Discovery) discover(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("kind-discovery")
	kinds, err := d.kinds.Refresh()
	if err != nil {
		log.Error(err, "Cannot discover the kinds of the group", "group", lockv1alpha1.Group)
		return
	}
	complete := true
	for _, k := range kinds {
		if !k.Watched() {
			continue
		}
		if err := d.owners.ensure(ctx, k); err != nil {
			complete = false
			log.Error(err, "Cannot index a discovered kind by owner", "kind", k.GVK.GroupKind())
		}
	}
	if complete {
		d.owners.markDiscovered()
	}
}

// IndexOwners adds to the owner index every kind discovery finds whose
// list answers now, and does nothing else: the mark that discovery ran is
// Start's. Call it before the manager starts, so that the owner index's
// informers start with the cache, beside the Lock informer, instead of
// once the Lock informer has synced (the manager starts its runnables
// after its caches): at start the lists of Locks and of targets then run
// together, and /readyz, which waits for both, answers sooner.
//
// An informer added before the start is one the manager waits for before
// it starts anything else (its peers, discovery, the reconciler), with no
// time limit. So a kind is added here only if a one-item metadata list of
// it answers (within probeTimeout): a kind whose list fails (a conversion
// webhook down, an aggregated API away) is left to Start, which adds it
// once the manager runs, without blocking anything on it.
func (d *Discovery) IndexOwners(ctx context.Context, reader client.Reader) error {
	kinds, err := d.kinds.Refresh()
	if err != nil {
		return err
	}
	var failed []error
	for _, k := range kinds {
		if !k.Watched() {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := reader.List(probeCtx, list, client.Limit(1))
		cancel()
		if err == nil {
			err = d.owners.ensure(ctx, k)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", k.Resource, err))
		}
	}
	return errors.Join(failed...)
}

// probeTimeout bounds IndexOwners' list of one kind.
const probeTimeout = 5 * time.Second
