package denials

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// NeedLeaderElection is false: every replica writes the refusals it
// decided.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start writes the entries that are due until ctx is done.
func (r *Recorder) Start(ctx context.Context) error {
	timer := time.NewTimer(r.interval)
	defer timer.Stop()
	for {
		next := r.flush(ctx)
		if next <= 0 {
			next = r.interval
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// due is an entry to write: its Lock, and a copy of what to write.
type due struct {
	key     key
	uid     types.UID
	last    lockv1alpha1.DeniedRequest
	pending int64
}

// flush writes every entry that is due, forgets the entries that have
// nothing pending and have not been written within the interval, and
// returns how long until the next entry is due (0: none is).
func (r *Recorder) flush(ctx context.Context) time.Duration {
	now := r.now()
	var todo []due
	var next time.Duration
	r.mu.Lock()
	for key, e := range r.entries {
		wait := r.interval - now.Sub(e.written)
		switch {
		case e.pending == 0 && wait <= 0:
			delete(r.entries, key)
		case e.pending == 0:
		case wait <= 0:
			todo = append(todo, due{key: key, uid: e.uid, last: e.last, pending: e.pending})
		case next == 0 || wait < next:
			next = wait
		}
	}
	r.mu.Unlock()
	for _, d := range todo {
		if r.limiter.Wait(ctx) != nil {
			return 0
		}
		gone, err := r.write(ctx, d)
		r.mu.Lock()
		if e := r.entries[d.key]; e != nil && e.uid == d.uid {
			switch {
			case gone:
				delete(r.entries, d.key)
			case err == nil:
				e.pending -= d.pending
				e.written = r.now()
			default:
				// Kept for the next flush, one interval later.
				e.written = r.now()
			}
		}
		r.mu.Unlock()
		if err != nil {
			r.metrics.write(resultFailed)
		}
		if next == 0 || r.interval < next {
			next = r.interval
		}
	}
	return next
}

// write adds d to the lastDenied of its Lock (or ClusterLock): it reads
// the Lock (from the cache first, from the API server after a conflict),
// and patches status.lastDenied alone, with the Lock's resourceVersion as
// a precondition, at most MaxAttempts times. gone reports that the Lock
// no longer exists, was recreated (another UID) or is being deleted: d is
// then dropped.
func (r *Recorder) write(ctx context.Context, d due) (gone bool, err error) {
	noun, logKey := d.key.noun(), "lock"
	if d.key.cluster {
		logKey = "clusterLock"
	}
	log := ctrl.LoggerFrom(ctx).WithValues(logKey, d.key.NamespacedName)
	_, field := r.field(&lockv1alpha1.LockStatus{})
	var read client.Reader = r.writer
	for range MaxAttempts {
		lock, status := d.key.object()
		if err := read.Get(ctx, d.key.NamespacedName, lock); err != nil {
			if apierrors.IsNotFound(err) {
				r.metrics.write(resultGone)
				return true, nil
			}
			log.Error(err, "Cannot read a "+noun+" to record its denials")
			return false, fmt.Errorf("reading %s %s: %w", noun, d.key.NamespacedName, err)
		}
		if (d.uid != "" && lock.GetUID() != d.uid) || lock.GetDeletionTimestamp() != nil {
			r.metrics.write(resultGone)
			return true, nil
		}
		cur, _ := r.field(status)
		denied := merged(cur, d.last, d.pending)
		err := r.writer.Status().Patch(ctx, lock, lastDeniedPatch(lock.GetResourceVersion(), field, denied))
		switch {
		case err == nil:
			r.metrics.write(resultWritten)
			return false, nil
		case apierrors.IsNotFound(err):
			r.metrics.write(resultGone)
			return true, nil
		case !apierrors.IsConflict(err):
			log.Error(err, "Cannot record a "+noun+"'s denials")
			return false, fmt.Errorf("writing the %s of %s %s: %w", field, noun, d.key.NamespacedName, err)
		}
		// Another writer got there first: read the Lock as the API server
		// has it now, and add to its count.
		r.metrics.write(resultConflict)
		read = r.api
	}
	log.Info("Cannot record a "+noun+"'s denials: it kept changing; trying again later", "attempts", MaxAttempts, "pending", d.pending)
	return false, fmt.Errorf("writing the %s of %s %s: %d conflicts", field, noun, d.key.NamespacedName, MaxAttempts)
}

// field returns the field of status the Recorder writes, and its name:
// lastDenied, lastWouldDeny (Options.WouldDeny) or lastException
// (Options.Exceptions).
func (r *Recorder) field(status *lockv1alpha1.LockStatus) (*lockv1alpha1.DeniedRequest, string) {
	switch {
	case r.wouldDeny:
		return status.LastWouldDeny, "lastWouldDeny"
	case r.exceptions:
		return status.LastException, "lastException"
	}
	return status.LastDenied, "lastDenied"
}

// merged is cur, the Lock's lastDenied, with pending more refusals, the
// last of which is last: the count is cur's plus pending, and the
// request is the later of cur's and last (another replica may have
// written a later one).
func merged(cur *lockv1alpha1.DeniedRequest, last lockv1alpha1.DeniedRequest, pending int64) lockv1alpha1.DeniedRequest {
	out := last
	out.Count = pending
	if cur != nil {
		if cur.Time.After(last.Time.Time) {
			out = *cur
		}
		out.Count = cur.Count + pending
	}
	return out
}

// lastDeniedPatch is a JSON merge patch that sets status.<field>
// (lastDenied, lastWouldDeny or lastException) to d, and touches no other field, if the
// Lock is still at resourceVersion.
func lastDeniedPatch(resourceVersion, field string, d lockv1alpha1.DeniedRequest) client.Patch {
	data, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{field: d},
	})
	return client.RawPatch(types.MergePatchType, data)
}
