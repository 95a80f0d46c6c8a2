package peers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// LeaseGroupLabel labels the identity Leases of the replicas of one
// lockguard installation; its value is the group's name (the webhook
// Service's, in the chart).
const LeaseGroupLabel = "lockguard.navique.com/peers"

// DefaultLeaseDuration is how long an identity Lease counts after its
// holder renewed it: Leases.Duration's default.
const DefaultLeaseDuration = 30 * time.Second

// Leases is the view of the replicas that announce themselves: each holds
// an identity Lease in Namespace, labelled LeaseGroupLabel=Group, whose
// holderIdentity is its address, and renews it every Duration/6. The view
// is every other Lease of the group that some list of this replica showed
// changed less than Duration ago (counted on this replica's clock from the
// list that first showed its current version), so a pod that never
// started is never in it, and a dead one leaves it Duration after its last
// renewal reached the API server (or at once when it deleted its Lease on
// the way out). The Leases are read with a consistent list every
// Duration/6, never from a watch that may lag.
//
// This replica counts as a replica (Fresh, Tracker.SelfFresh) only while
// every other replica whose lists work has it in its view. Let D be
// Duration, W = D/2, T = D/10 (the timeout of each call) and s the time
// at which a successful renewal was sent. The replica is fresh at t when
//
//   - a successful renewal was sent in (t-D, t-D+W]: it reached the API
//     server by t-D+W+T, and
//   - its last successful cycle (a renewal, then a list) was sent after
//     t-D+W+T, so its own list has read that far.
//
// If two replicas are fresh at t, each one's last list read the other's
// renewal of (t-D, t-D+W] (or a later one), first seen after t-D: each has
// the other in its view at t. Renewals every D/6 that each take at most
// 2T keep that true without a gap; one more than W after the previous
// success starts a new streak (Tracker.SelfFresh: cold for the TTL).
//
// The proof assumes that a Lease changes only by its holder's renewals,
// its holder's release and collect (which deletes a Lease unchanged for
// three durations, whose holder is not fresh): the chart lets no one else
// write them (LeaseWriteVerb, NewLeaseGuard). A renewal answered NotFound
// or Conflict means someone did: the others may have dropped this replica
// since its last renewal, so it is not fresh from then on and its next
// success starts a new streak.
type Leases struct {
	Client    coordinationclient.LeasesGetter
	Namespace string
	Group     string
	// Self is this replica's address (host:port), its Lease's
	// holderIdentity; its Lease is named after it (LeaseName).
	Self string
	// Duration: see DefaultLeaseDuration.
	Duration time.Duration
	// Fresh is told the interval in which this replica is fresh after
	// every successful cycle.
	Fresh func(from, until time.Time)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// LeaseName returns the name of the identity Lease of the replica at
// address in group: the group, then the address with every character
// that a name cannot hold replaced by "-".
func LeaseName(group, address string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return '-'
	}, group+"-"+address)
	return strings.Trim(name, "-")
}

// leaseTimings are the intervals of Leases derived from its Duration.
type leaseTimings struct {
	duration, window, call, renew time.Duration
}

func timingsOf(d time.Duration) leaseTimings {
	if d <= 0 {
		d = DefaultLeaseDuration
	}
	return leaseTimings{duration: d, window: d / 2, call: d / 10, renew: d / 6}
}

// seen is what this replica knows of another replica's Lease.
type seen struct {
	holder string
	rv     string
	// since is when a list first showed rv.
	since time.Time
}

// Run renews this replica's Lease, lists the group's Leases and calls set
// with the view whenever it changes (the first time after the first
// successful list), until ctx ends; then it deletes its Lease, so that the
// others drop it at once.
func (l Leases) Run(ctx context.Context, set func([]string)) error {
	if l.Group == "" || l.Namespace == "" || l.Self == "" {
		return fmt.Errorf("identity Leases need a group, a namespace and this replica's address")
	}
	r := newLeaseRunner(l)
	now, tm := r.now, r.tm
	log := ctrl.LoggerFrom(ctx).WithValues("lease", r.name)
	defer r.release(log)
	var view []string
	known, failing := false, false
	for {
		sent := now()
		err := r.cycle(ctx, sent)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Info("Could not renew this replica's identity Lease or list the others'; it stops counting as a replica until it can", "error", err.Error())
		case err == nil && failing:
			log.Info("Identity Leases renewed and listed again")
		}
		failing = err != nil
		if err == nil {
			if next := r.view(now()); !known || !slices.Equal(next, view) {
				view, known = next, true
				set(view)
			}
			r.collect(ctx, now())
		} else if known {
			// No list: the Leases this replica saw still expire.
			if next := r.view(now()); !slices.Equal(next, view) {
				view = next
				set(view)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(tm.renew):
		}
	}
}

type leaseRunner struct {
	l      Leases
	tm     leaseTimings
	now    func() time.Time
	leases coordinationclient.LeaseInterface
	name   string
	// own is this replica's Lease as last written, nil before.
	own *coordinationv1.Lease
	// seen holds the other Leases of the group, by name.
	seen map[string]seen
	// streak is when the current streak of successful renewals started,
	// last when the last successful one was sent.
	streak, last time.Time
}

func newLeaseRunner(l Leases) *leaseRunner {
	now := l.Now
	if now == nil {
		now = time.Now
	}
	return &leaseRunner{l: l, tm: timingsOf(l.Duration), now: now, leases: l.Client.Leases(l.Namespace), name: LeaseName(l.Group, l.Self), seen: map[string]seen{}}
}

// cycle renews this replica's Lease and lists the group's; when both
// succeed it reports the freshness interval to Fresh.
func (r *leaseRunner) cycle(ctx context.Context, sent time.Time) error {
	if err := r.renew(ctx, sent); err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, r.tm.call)
	defer cancel()
	// No resourceVersion: a consistent read from etcd.
	list, err := r.leases.List(lctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{LeaseGroupLabel: r.l.Group}).String()})
	if err != nil {
		return fmt.Errorf("listing the identity Leases: %w", err)
	}
	listed := r.now()
	names := map[string]bool{}
	for i := range list.Items {
		le := &list.Items[i]
		if le.Name == r.name || le.Spec.HolderIdentity == nil {
			continue
		}
		names[le.Name] = true
		if s, ok := r.seen[le.Name]; ok && s.rv == le.ResourceVersion {
			continue
		}
		r.seen[le.Name] = seen{holder: *le.Spec.HolderIdentity, rv: le.ResourceVersion, since: listed}
	}
	for name := range r.seen {
		if !names[name] {
			delete(r.seen, name)
		}
	}
	if r.streak.IsZero() || sent.Sub(r.last) > r.tm.window {
		r.streak = sent
	}
	r.last = sent
	if r.l.Fresh != nil {
		r.l.Fresh(r.streak.Add(r.tm.duration-r.tm.window), sent.Add(r.tm.duration-r.tm.window-r.tm.call))
	}
	return nil
}

// renew writes this replica's Lease with a renewTime of sent, creating it
// when it does not exist; a conflict (another writer, or a stale copy)
// re-reads it for the next cycle and fails this one.
func (r *leaseRunner) renew(ctx context.Context, sent time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, r.tm.call)
	defer cancel()
	secs := int32(r.tm.duration / time.Second)
	renewed := metav1.NewMicroTime(sent)
	if r.own == nil {
		got, err := r.leases.Get(ctx, r.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			holder := r.l.Self
			le := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.l.Namespace, Labels: map[string]string{LeaseGroupLabel: r.l.Group}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &renewed, RenewTime: &renewed},
			}
			created, err := r.leases.Create(ctx, le, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating the identity Lease %s: %w", r.name, err)
			}
			r.own = created
			return nil
		case err != nil:
			return fmt.Errorf("reading the identity Lease %s: %w", r.name, err)
		}
		r.own = got
	}
	le := r.own.DeepCopy()
	holder := r.l.Self
	if le.Labels == nil {
		le.Labels = map[string]string{}
	}
	le.Labels[LeaseGroupLabel] = r.l.Group
	le.Spec.HolderIdentity, le.Spec.LeaseDurationSeconds, le.Spec.RenewTime = &holder, &secs, &renewed
	updated, err := r.leases.Update(ctx, le, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Someone else deleted or wrote this replica's Lease: the
			// others may have dropped it from their views since its last
			// renewal, and admitted creates without telling it. Cold at
			// once, and a new streak when it renews again.
			r.own = nil
			r.lost()
		}
		return fmt.Errorf("renewing the identity Lease %s: %w", r.name, err)
	}
	r.own = updated
	return nil
}

// lost ends the current streak: this replica's Lease was not as it last
// wrote it. It is not fresh from now on, and its next successful renewal
// starts a new streak (Tracker.SelfFresh: cold for the TTL).
func (r *leaseRunner) lost() {
	r.streak = time.Time{}
	if r.l.Fresh != nil {
		r.l.Fresh(time.Time{}, time.Time{})
	}
}

// view returns the addresses of the Leases seen changed less than
// Duration before now, sorted.
func (r *leaseRunner) view(now time.Time) []string {
	var out []string
	for _, s := range r.seen {
		if now.Sub(s.since) < r.tm.duration && validAddress(s.holder) {
			out = append(out, s.holder)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// collectAfter is how long a Lease must have stayed unchanged before a
// replica deletes it: its holder stopped counting as a replica a Duration
// after its last renewal (it died, or a new pod at another address took
// its place), and a new replica would otherwise count it in its view for
// Duration after it starts.
func (r *leaseRunner) collectAfter() time.Duration { return 3 * r.tm.duration }

// collect deletes the Leases that stayed unchanged for collectAfter, with
// a precondition on the version seen: a renewal meanwhile wins. Their
// holders stopped counting as replicas (Fresh) Duration after they last
// renewed; one that comes back creates its Lease again.
func (r *leaseRunner) collect(ctx context.Context, now time.Time) {
	for name, s := range r.seen {
		if now.Sub(s.since) < r.collectAfter() {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, r.tm.call)
		rv := s.rv
		err := r.leases.Delete(dctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			delete(r.seen, name)
		}
	}
}

// release deletes this replica's Lease as it stops (with a precondition
// on the version it wrote), so that the others drop it at once.
func (r *leaseRunner) release(log logr.Logger) {
	if r.l.Fresh != nil {
		// No longer a replica: no more admissions.
		r.l.Fresh(time.Time{}, time.Time{})
	}
	if r.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.tm.call)
	defer cancel()
	uid, rv := r.own.UID, r.own.ResourceVersion
	err := r.leases.Delete(ctx, r.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Info("Could not delete this replica's identity Lease; the others drop it when it expires", "error", err.Error())
	}
}

// validAddress reports whether a Lease's holderIdentity is an address
// this replica may call: an IP and a port, as netip writes them, and
// nothing else (no name, zone, path, query or user), so that no holder
// can steer the URL of a call (calls.go builds it from the address alone).
func validAddress(a string) bool {
	ap, err := netip.ParseAddrPort(a)
	return err == nil && ap.Port() != 0 && ap.Addr().Zone() == "" && ap.String() == a
}
