package readmodel

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// DefaultDiscoveryInterval is how often the core.navique.com group is
// rediscovered, by default, for kinds to index and to watch.
const DefaultDiscoveryInterval = 30 * time.Second

// Discovery adds every kind of the core.navique.com group that it finds
// (ServedKind.Watched) to an owner index, at start and then every
// interval, so that kinds whose CRD is installed later are indexed too. It
// is a controller-runtime Runnable on every replica, leader or not: every
// replica's webhook walks cascades over its own owner index. It adds the
// informers once the manager runs, so that nothing waits for their lists
// at start: until they have synced, the webhook walks cascades over the
// API server's lists (webhook.CascadeConfig.API).
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
