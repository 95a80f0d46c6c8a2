package denials

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

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
		denied := merged(lock.Status.LastDenied, d.last, d.pending)
		err := r.writer.Status().Patch(ctx, &lock, lastDeniedPatch(lock.ResourceVersion, denied))
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

// lastDeniedPatch is a JSON merge patch that sets status.lastDenied to d,
// and touches no other field, if the Lock is still at resourceVersion.
func lastDeniedPatch(resourceVersion string, d lockv1alpha1.DeniedRequest) client.Patch {
	data, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"lastDenied": d},
	})
	return client.RawPatch(types.MergePatchType, data)
}
