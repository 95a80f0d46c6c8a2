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
	key     types.NamespacedName
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

// write adds d to the lastDenied of its Lock: it reads the Lock (from the
// cache first, from the API server after a conflict), and patches
// status.lastDenied alone, with the Lock's resourceVersion as a
// precondition, at most MaxAttempts times. gone reports that the Lock no
// longer exists, was recreated (another UID) or is being deleted: d is
// then dropped.
func (r *Recorder) write(ctx context.Context, d due) (gone bool, err error) {
	log := ctrl.LoggerFrom(ctx).WithValues("lock", d.key)
	var read client.Reader = r.writer
	for range MaxAttempts {
		var lock lockv1alpha1.Lock
		if err := read.Get(ctx, d.key, &lock); err != nil {
			if apierrors.IsNotFound(err) {
				r.metrics.write(resultGone)
				return true, nil
			}
			log.Error(err, "Cannot read a Lock to record its denials")
			return false, fmt.Errorf("reading Lock %s: %w", d.key, err)
		}
		if (d.uid != "" && lock.UID != d.uid) || lock.DeletionTimestamp != nil {
			r.metrics.write(resultGone)
			return true, nil
		}
		cur, field := lock.Status.LastDenied, "lastDenied"
		switch {
		case r.wouldDeny:
			cur, field = lock.Status.LastWouldDeny, "lastWouldDeny"
		case r.exceptions:
			cur, field = lock.Status.LastException, "lastException"
		}
		denied := merged(cur, d.last, d.pending)
		err := r.writer.Status().Patch(ctx, &lock, lastDeniedPatch(lock.ResourceVersion, field, denied))
		switch {
		case err == nil:
			r.metrics.write(resultWritten)
			return false, nil
		case apierrors.IsNotFound(err):
			r.metrics.write(resultGone)
			return true, nil
		case !apierrors.IsConflict(err):
			log.Error(err, "Cannot record a Lock's denials")
			return false, fmt.Errorf("writing the lastDenied of Lock %s: %w", d.key, err)
		}
		// Another writer got there first: read the Lock as the API server
		// has it now, and add to its count.
		r.metrics.write(resultConflict)
		read = r.api
	}
	log.Info("Cannot record a Lock's denials: it kept changing; trying again later", "attempts", MaxAttempts, "pending", d.pending)
	return false, fmt.Errorf("writing the lastDenied of Lock %s: %d conflicts", d.key, MaxAttempts)
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
